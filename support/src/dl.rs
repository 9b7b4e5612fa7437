//! Run-time loading of shared libraries: nothing the tools, benchmarks or emulator call in the
//! CUDA driver, Vulkan or libgdrapi is a link dependency, so they start on any machine and say
//! what is missing.
//!
//! A [`Library`] is never unloaded (GPU driver stacks keep threads and exit handlers that must
//! not outlive their code), so function pointers taken from it stay valid for the process.
//! Functions are looked up through [`Entry`] types, which pair an exported name with its C
//! prototype once, so callers resolve them without `unsafe`.

use libloading::os::unix::{Library as Raw, RTLD_GLOBAL, RTLD_LOCAL, RTLD_NOW};
use std::ffi::{c_void, CStr};
use std::fmt;
use std::mem::ManuallyDrop;

/// Why a library or one of its symbols could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DlError {
    /// `dlopen` failed; carries the library name and `dlerror()`'s text.
    Open { name: String, reason: String },
    /// A required symbol is absent; carries the library name and the symbol.
    Symbol { name: String, symbol: String },
}

impl fmt::Display for DlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DlError::Open { name, reason } => write!(f, "cannot load {name}: {reason}"),
            DlError::Symbol { name, symbol } => write!(f, "{name} does not export {symbol}"),
        }
    }
}

impl std::error::Error for DlError {}

/// An exported C function: its name and its prototype as a Rust function pointer type.
///
/// # Safety
///
/// `Fn` must be an `unsafe extern "C" fn` type matching the C prototype of the function
/// exported as `NAME` by every library it is looked up in.
pub unsafe trait Entry {
    /// The exported name.
    const NAME: &'static str;
    /// Its prototype.
    type Fn: Copy;
}

/// Declares [`Entry`] types, one per exported function: `name = fn(args) -> ret;`, or
/// `name: Prototype;` for a prototype declared elsewhere (`gdrapi_abi`'s).
#[macro_export]
macro_rules! entries {
    ($($(#[$meta:meta])* $name:ident : $proto:ty;)*) => {
        $(
            $(#[$meta])*
            #[allow(non_camel_case_types)]
            #[derive(Debug)]
            pub enum $name {}
            // SAFETY: the prototype named here is the one the C header declares for this name.
            unsafe impl $crate::dl::Entry for $name {
                const NAME: &'static str = stringify!($name);
                type Fn = $proto;
            }
        )*
    };
    ($($(#[$meta:meta])* $name:ident = fn($($arg:ty),* $(,)?) $(-> $ret:ty)?;)*) => {
        $(
            $(#[$meta])*
            #[allow(non_camel_case_types)]
            #[derive(Debug)]
            pub enum $name {}
            // SAFETY: the prototype written here is the one the C header declares for this name.
            unsafe impl $crate::dl::Entry for $name {
                const NAME: &'static str = stringify!($name);
                type Fn = unsafe extern "C" fn($($arg),*) $(-> $ret)?;
            }
        )*
    };
}

/// A shared library opened with `dlopen`, kept loaded for the life of the process.
#[derive(Debug)]
pub struct Library {
    name: String,
    raw: ManuallyDrop<Raw>,
}

impl Library {
    /// Opens `name` (a soname or a path) with `RTLD_NOW | RTLD_LOCAL`.
    pub fn open(name: &str) -> Result<Library, DlError> {
        Library::open_with(name, RTLD_NOW | RTLD_LOCAL)
    }

    /// Opens `name` with `RTLD_NOW | RTLD_GLOBAL`: its symbols also resolve libraries loaded
    /// after it.
    pub fn open_global(name: &str) -> Result<Library, DlError> {
        Library::open_with(name, RTLD_NOW | RTLD_GLOBAL)
    }

    fn open_with(name: &str, flags: libc::c_int) -> Result<Library, DlError> {
        // SAFETY: loading runs the library's initialisers; the libraries opened here (CUDA
        // drivers, the Vulkan loader, libgdrapi builds) are meant to be loaded this way.
        let raw = unsafe { Raw::open(Some(name), flags) }.map_err(|e| DlError::Open {
            name: name.to_string(),
            reason: e.to_string(),
        })?;
        Ok(Library {
            name: name.to_string(),
            raw: ManuallyDrop::new(raw),
        })
    }

    /// The name the library was opened under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The address of `symbol`, or `None` when the library does not export it.
    pub fn address(&self, symbol: &str) -> Option<*mut c_void> {
        // SAFETY: the symbol is read as a plain address, which is valid for any symbol.
        let p = unsafe { self.raw.get::<*mut c_void>(symbol.as_bytes()) }.ok()?;
        let p = *p;
        (!p.is_null()).then_some(p)
    }

    /// The address of `symbol`, or an error naming the library and the symbol.
    pub fn require(&self, symbol: &str) -> Result<*mut c_void, DlError> {
        self.address(symbol).ok_or_else(|| DlError::Symbol {
            name: self.name.clone(),
            symbol: symbol.to_string(),
        })
    }

    /// The function `E`, or an error naming the library and the function.
    pub fn get<E: Entry>(&self) -> Result<E::Fn, DlError> {
        // SAFETY: `Entry`'s contract: `E::Fn` is the prototype of `E::NAME`.
        unsafe { self.function::<E::Fn>(E::NAME) }
    }

    /// The function `symbol` as type `F`.
    ///
    /// # Safety
    ///
    /// `F` must be an `extern "C" fn` type matching the symbol's C prototype.
    pub unsafe fn function<F: Copy>(&self, symbol: &str) -> Result<F, DlError> {
        let p = self.require(symbol)?;
        assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
        // SAFETY: the caller names the symbol's function pointer type; code and data pointers
        // have the same size and representation on the platforms this builds for.
        Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
    }

    /// The file that provides `symbol` (through `dladdr`), canonicalised, e.g. the real path
    /// of a libgdrapi found by soname. `None` when the symbol is absent or dladdr cannot tell.
    pub fn path_of(&self, symbol: &str) -> Option<String> {
        let name = object_of(self.address(symbol)? as usize)?.path?;
        Some(
            std::fs::canonicalize(&name)
                .map(|p| p.display().to_string())
                .unwrap_or(name),
        )
    }
}

/// The shared object that contains an address, as `dladdr` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// Its load address.
    pub base: usize,
    /// Its file name as the loader knows it, when it has one.
    pub path: Option<String>,
}

/// The shared object that contains `addr`, if any. `addr` is only compared with the loader's
/// tables, never read.
pub fn object_of(addr: usize) -> Option<Object> {
    let addr = addr as *const c_void;
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only reads the loader's tables and writes the Dl_info it is given.
    if unsafe { libc::dladdr(addr, info.as_mut_ptr()) } == 0 {
        return None;
    }
    // SAFETY: dladdr succeeded, so it filled the struct (which was zeroed before anyway).
    let info = unsafe { info.assume_init() };
    let path = (!info.dli_fname.is_null()).then(|| {
        // SAFETY: a NUL-terminated string owned by the loader, valid while the object is
        // loaded; it is copied out at once.
        unsafe { CStr::from_ptr(info.dli_fname) }
            .to_string_lossy()
            .into_owned()
    });
    Some(Object {
        base: info.dli_fbase as usize,
        path,
    })
}

/// `dlsym(RTLD_NEXT, name)`: the definition of `name` in the objects loaded after the one
/// that calls this (an interposer's way to its wrapped function); `None` when there is none.
///
/// Hand-written because libloading has no `RTLD_NEXT` lookup: the pseudo-handle only works
/// when `dlsym` is called from the interposing object itself, which this crate, linked
/// statically into it, is.
pub fn next_symbol(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: `name` is NUL-terminated; dlsym has no other precondition.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    (!p.is_null()).then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::entries! {
        /// `pid_t getpid(void)`.
        getpid = fn() -> libc::pid_t;
        /// Absent from every C library.
        no_such_symbol_gdrapi_support = fn();
    }

    #[test]
    fn missing_library_is_an_error_with_its_name() {
        let err = Library::open("libdoes-not-exist-gdrapi.so.9").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("cannot load libdoes-not-exist-gdrapi.so.9: "),
            "{text}"
        );
        assert!(Library::open("nul\0inside").is_err());
    }

    #[test]
    fn libc_symbols_resolve_and_their_file_is_reported() {
        let lib = Library::open_global("libc.so.6").expect("libc loads");
        assert_eq!(lib.name(), "libc.so.6");
        assert!(lib.address("getpid").is_some());
        assert!(lib.address("no_such_symbol_gdrapi_support").is_none());
        assert_eq!(
            lib.get::<no_such_symbol_gdrapi_support>().unwrap_err(),
            DlError::Symbol {
                name: "libc.so.6".into(),
                symbol: "no_such_symbol_gdrapi_support".into()
            }
        );
        let path = lib.path_of("getpid").expect("dladdr knows libc");
        assert!(path.contains("libc"), "{path}");
        let f = lib.get::<getpid>().expect("libc exports getpid");
        // SAFETY: getpid has no preconditions.
        assert_eq!(unsafe { f() }, std::process::id() as libc::pid_t);
    }

    #[test]
    fn objects_are_found_by_address_and_next_skips_nothing_it_should_not() {
        let here = object_of(object_of as *const () as usize).expect("this test binary");
        assert_ne!(here.base, 0);
        assert!(object_of(0).is_none());
        // The C library's getpid comes after the test binary, which does not define one.
        assert!(next_symbol(c"getpid").is_some());
        assert!(next_symbol(c"no_such_symbol_gdrapi_support").is_none());
    }
}
