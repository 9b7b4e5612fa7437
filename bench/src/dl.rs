//! Run-time loading of shared libraries (`dlopen`/`dlsym`): nothing here is a link dependency,
//! so the crate builds and its non-GPU parts run on machines without Vulkan or CUDA.

use crate::error::{Error, Result};
use std::ffi::{c_void, CStr, CString};

/// A library loaded with `dlopen`. It is never unloaded: GPU driver stacks keep threads and
/// atexit handlers that must not outlive their code.
#[derive(Debug)]
pub struct Library {
    handle: *mut c_void,
    name: String,
}

fn last_dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl* call
    // on this thread; it is copied out at once.
    let p = unsafe { libc::dlerror() };
    if p.is_null() {
        "unknown dlopen error".to_owned()
    } else {
        // SAFETY: non-null, NUL-terminated (see above).
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

impl Library {
    /// Loads `name` (a soname or a path) with `RTLD_NOW | RTLD_LOCAL`.
    pub fn open(name: &str) -> Result<Library> {
        let c = CString::new(name).map_err(|_| Error::Invalid(format!("library name {name:?}")))?;
        // SAFETY: `c` is NUL-terminated; dlopen has no other precondition.
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(Error::Load {
                library: name.to_owned(),
                reason: last_dl_error(),
            });
        }
        Ok(Library {
            handle,
            name: name.to_owned(),
        })
    }

    /// The name the library was opened with.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The address of symbol `name`, or [`Error::Symbol`] if it is absent.
    pub fn symbol(&self, name: &str) -> Result<*mut c_void> {
        let c = CString::new(name).map_err(|_| Error::Symbol {
            name: name.to_owned(),
        })?;
        // SAFETY: `handle` is a live dlopen handle (never closed) and `c` is NUL-terminated.
        let p = unsafe { libc::dlsym(self.handle, c.as_ptr()) };
        if p.is_null() {
            Err(Error::Symbol {
                name: name.to_owned(),
            })
        } else {
            Ok(p)
        }
    }
}
