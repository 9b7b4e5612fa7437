//! Run-time loading of shared libraries (`dlopen`/`dlsym`/`dladdr`), so the tools start on
//! machines without CUDA or libgdrapi and can say what is missing.

use std::ffi::{c_void, CStr, CString};
use std::fmt;

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

/// A shared library opened with `dlopen`; it stays loaded for the life of the process
/// (function pointers taken from it are never invalidated).
#[derive(Debug)]
pub struct Library {
    name: String,
    handle: *mut c_void,
}

// SAFETY: a dlopen handle is a process-global token; dlsym/dladdr are thread-safe.
unsafe impl Send for Library {}
// SAFETY: see above; the handle is never mutated after creation.
unsafe impl Sync for Library {}

/// Last `dlerror()` text, or a fallback.
fn last_dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string owned by libdl, valid until the
    // next dl* call on this thread; we copy it out at once.
    unsafe {
        let p = libc::dlerror();
        if p.is_null() {
            "unknown dlopen error".to_string()
        } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    }
}

impl Library {
    /// Opens `name` (a soname or path) with `RTLD_NOW | RTLD_GLOBAL`.
    pub fn open(name: &str) -> Result<Library, DlError> {
        let cname = CString::new(name).map_err(|_| DlError::Open {
            name: name.to_string(),
            reason: "name contains a NUL byte".to_string(),
        })?;
        // SAFETY: cname is a valid NUL-terminated string; dlopen has no other preconditions.
        let handle = unsafe { libc::dlopen(cname.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if handle.is_null() {
            return Err(DlError::Open {
                name: name.to_string(),
                reason: last_dl_error(),
            });
        }
        Ok(Library {
            name: name.to_string(),
            handle,
        })
    }

    /// The name the library was opened under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Address of `symbol`, or `None` when the library does not export it.
    pub fn sym_addr(&self, symbol: &str) -> Option<*mut c_void> {
        let csym = CString::new(symbol).ok()?;
        // SAFETY: handle came from a successful dlopen and is never closed; csym is valid.
        let p = unsafe { libc::dlsym(self.handle, csym.as_ptr()) };
        if p.is_null() {
            None
        } else {
            Some(p)
        }
    }

    /// Address of `symbol`, or an error naming the library and the symbol.
    pub fn require(&self, symbol: &str) -> Result<*mut c_void, DlError> {
        self.sym_addr(symbol).ok_or_else(|| DlError::Symbol {
            name: self.name.clone(),
            symbol: symbol.to_string(),
        })
    }

    /// The file that actually provides `symbol` (through `dladdr`), e.g. the real path of the
    /// loaded libgdrapi. `None` when the symbol is absent or dladdr cannot tell.
    pub fn path_of(&self, symbol: &str) -> Option<String> {
        let addr = self.sym_addr(symbol)?;
        let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
        // SAFETY: addr is an address inside a loaded object; info points to writable storage
        // of the right type; dladdr only writes it.
        let ok = unsafe { libc::dladdr(addr as *const c_void, info.as_mut_ptr()) };
        if ok == 0 {
            return None;
        }
        // SAFETY: dladdr succeeded, so the struct is initialised.
        let info = unsafe { info.assume_init() };
        if info.dli_fname.is_null() {
            return None;
        }
        // SAFETY: dli_fname is a NUL-terminated string owned by the loader, valid while the
        // object is loaded (forever here).
        let name = unsafe { CStr::from_ptr(info.dli_fname) }
            .to_string_lossy()
            .into_owned();
        Some(
            std::fs::canonicalize(&name)
                .map(|p| p.display().to_string())
                .unwrap_or(name),
        )
    }
}

/// Resolves `symbol` in `lib` as a function pointer of type `F`.
///
/// # Safety
/// `F` must be an `extern "C" fn` type matching the symbol's real C signature.
pub unsafe fn function<F: Copy>(lib: &Library, symbol: &str) -> Result<F, DlError> {
    let p = lib.require(symbol)?;
    debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: the caller guarantees F is a function pointer type of the symbol's signature;
    // function pointers and data pointers have the same size and representation on Linux.
    Ok(std::mem::transmute_copy::<*mut c_void, F>(&p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_library_is_an_error_with_its_name() {
        let err = Library::open("libdoes-not-exist-gdrcopy.so.9").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("libdoes-not-exist-gdrcopy.so.9"), "{text}");
    }

    #[test]
    fn libc_symbols_resolve_and_path_is_reported() {
        let lib = Library::open("libc.so.6").expect("libc loads");
        assert!(lib.sym_addr("getpid").is_some());
        assert!(lib.sym_addr("no_such_symbol_gdrcopy").is_none());
        let err = lib.require("no_such_symbol_gdrcopy").unwrap_err();
        assert_eq!(
            err,
            DlError::Symbol {
                name: "libc.so.6".into(),
                symbol: "no_such_symbol_gdrcopy".into()
            }
        );
        let path = lib.path_of("getpid").expect("dladdr knows libc");
        assert!(path.contains("libc"), "{path}");
        // SAFETY: getpid's C signature is `pid_t getpid(void)`.
        let getpid: extern "C" fn() -> libc::pid_t = unsafe { function(&lib, "getpid") }.unwrap();
        assert_eq!(getpid(), std::process::id() as libc::pid_t);
    }
}
