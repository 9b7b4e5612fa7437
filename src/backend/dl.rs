//! Libraries the backends load at run time (libcuda, libvulkan, NVML), through the C library's
//! `dlopen` and `dlsym`: never a link dependency, so the library needs only libc wherever it
//! is loaded. A [`Library`] is closed on drop unless [`Library::keep`] keeps it for the rest
//! of the process; [`Library::function`] resolves a function as its typed pointer.

use std::ffi::{c_int, c_void, CStr};
use std::ptr::NonNull;

/// A library opened with `dlopen` (`RTLD_LOCAL`), closed again on drop unless kept.
#[derive(Debug)]
pub struct Library(NonNull<c_void>);

impl Library {
    /// The first of `names` that `dlopen` loads, with `mode` (`RTLD_LAZY` or `RTLD_NOW`);
    /// otherwise the `dlerror()` text of the last attempt.
    pub fn open_first(names: &[&CStr], mode: c_int) -> Result<Library, String> {
        let mut why = String::from("no library name given");
        for name in names {
            // SAFETY: `name` is NUL-terminated; dlopen has no other precondition.
            let h = unsafe { libc::dlopen(name.as_ptr(), mode | libc::RTLD_LOCAL) };
            match NonNull::new(h) {
                Some(h) => {
                    crate::gdr_dbg!("loaded {}", name.to_string_lossy());
                    return Ok(Library(h));
                }
                None => why = crate::sys::dlerror(),
            }
        }
        Err(why)
    }

    /// The function the library exports as `name`, as the function pointer type `F`, or
    /// `None` when it exports no such symbol.
    ///
    /// # Safety
    /// `F` is the `extern "C"` function pointer type of the C function `name`, and the
    /// pointer is not called once the library is closed (see [`Library::keep`]).
    pub unsafe fn function<F: Copy>(&self, name: &CStr) -> Option<F> {
        const {
            assert!(std::mem::size_of::<F>() == std::mem::size_of::<*mut c_void>());
        }
        // SAFETY: `self.0` is a live handle from dlopen and `name` is NUL-terminated.
        let p = unsafe { libc::dlsym(self.0.as_ptr(), name.as_ptr()) };
        // SAFETY: non-null, and `F` is the symbol's function pointer type (the caller's
        // contract), which is one pointer wide (asserted above).
        (!p.is_null()).then(|| unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
    }

    /// Keeps the library loaded for the rest of the process, so that the functions resolved
    /// from it stay valid: a GPU driver, once initialised, owns threads and process-wide state
    /// that must not outlive its code.
    pub fn keep(self) {
        std::mem::forget(self);
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        // SAFETY: `self.0` came from dlopen and is closed once; no function resolved from a
        // library that is not kept outlives it (the contract of `function`).
        unsafe { libc::dlclose(self.0.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_a_function_of_the_c_library_and_calls_it() {
        let lib = Library::open_first(&[c"libgdrapi-no-such.so", c"libc.so.6"], libc::RTLD_NOW)
            .expect("the C library loads");
        // SAFETY: getpid's prototype, and the pointer is called while `lib` is open.
        let getpid = unsafe { lib.function::<unsafe extern "C" fn() -> libc::pid_t>(c"getpid") }
            .expect("libc exports getpid");
        // SAFETY: getpid has no preconditions.
        assert_eq!(unsafe { getpid() }, std::process::id() as libc::pid_t);
        // SAFETY: the type is never called: the symbol does not exist.
        let none = unsafe { lib.function::<unsafe extern "C" fn()>(c"gdrapi_no_such_symbol") };
        assert!(none.is_none());
    }

    #[test]
    fn a_library_that_does_not_load_gives_dlerrors_text() {
        let why = Library::open_first(&[c"libgdrapi-no-such.so.1"], libc::RTLD_NOW).unwrap_err();
        assert!(why.contains("libgdrapi-no-such.so.1"), "{why}");
        let none = Library::open_first(&[], libc::RTLD_NOW).unwrap_err();
        assert_eq!(none, "no library name given");
    }
}
