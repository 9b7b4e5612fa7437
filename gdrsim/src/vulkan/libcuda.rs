//! The real CUDA driver behind the Vulkan backing: found by path (the emulator itself answers
//! to `libcuda.so.1`), loaded once, and asked for functions by name.

use libc::c_void;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Directories where driver installations put `libcuda.so.1`, searched after
/// `LD_LIBRARY_PATH`.
const SYSTEM_DIRS: [&str; 8] = [
    "/usr/local/nvidia/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/lib",
];

/// The paths to try, in order: `explicit` alone when given, else `libcuda.so.1` in each
/// directory of `ld_library_path` and then in [`SYSTEM_DIRS`], without repeats.
pub fn candidates(explicit: Option<&str>, ld_library_path: Option<&str>) -> Vec<String> {
    if let Some(p) = explicit {
        return vec![p.to_string()];
    }
    let mut out: Vec<String> = Vec::new();
    let dirs = ld_library_path
        .unwrap_or("")
        .split(':')
        .filter(|d| d.starts_with('/'))
        .chain(SYSTEM_DIRS);
    for d in dirs {
        let p = format!("{}/libcuda.so.1", d.trim_end_matches('/'));
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// The real driver, loaded.
pub struct Real {
    handle: usize,
    /// The path it was loaded from.
    pub path: String,
}

/// The start of the shared object that contains `addr`, if any.
fn object_base(addr: *const c_void) -> Option<usize> {
    // SAFETY: dladdr only reads the loader's tables and writes the zeroed Dl_info we pass.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let ok = unsafe { libc::dladdr(addr, &mut info) } != 0;
    ok.then_some(info.dli_fbase as usize)
}

/// Loads the first candidate that is a CUDA driver and not this emulator.
fn load(paths: &[String]) -> Result<Real, String> {
    let me = object_base(get as *const () as *const c_void);
    let mut why = Vec::new();
    for path in paths {
        if std::fs::metadata(path).is_err() {
            continue;
        }
        let Ok(c) = CString::new(path.as_str()) else {
            continue;
        };
        // SAFETY: a NUL-terminated path; dlopen has no other precondition. The library is
        // never closed (driver stacks keep threads and handlers).
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if h.is_null() {
            // SAFETY: dlerror returns NULL or a string valid until the next dl* call.
            let e = unsafe { libc::dlerror() };
            let msg = if e.is_null() {
                "dlopen failed".to_string()
            } else {
                // SAFETY: non-NULL, NUL-terminated (see above).
                unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
            };
            why.push(format!("{path}: {msg}"));
            continue;
        }
        // SAFETY: a live handle and a NUL-terminated name.
        let sym = unsafe { libc::dlsym(h, c"cuInit".as_ptr()) };
        if sym.is_null() {
            why.push(format!("{path}: no cuInit"));
            continue;
        }
        if me.is_some() && object_base(sym) == me {
            why.push(format!("{path}: is this emulator"));
            continue;
        }
        return Ok(Real {
            handle: h as usize,
            path: path.clone(),
        });
    }
    if why.is_empty() {
        why.push("no candidate exists".to_string());
    }
    Err(why.join("; "))
}

static REAL: OnceLock<Result<Real, String>> = OnceLock::new();

/// The real driver, loaded on first use; the error says what was tried.
pub fn get() -> Result<&'static Real, &'static str> {
    REAL.get_or_init(|| {
        let cfg = crate::config::get();
        let lp = std::env::var("LD_LIBRARY_PATH").ok();
        load(&candidates(cfg.real_libcuda.as_deref(), lp.as_deref()))
    })
    .as_ref()
    .map_err(|e| e.as_str())
}

impl Real {
    /// The address of `name` (NUL-terminated) in the real driver, or `None`.
    pub fn symbol(&self, name: &CStr) -> Option<usize> {
        // SAFETY: a live dlopen handle (never closed) and a NUL-terminated name.
        let p = unsafe { libc::dlsym(self.handle as *mut c_void, name.as_ptr()) };
        (!p.is_null()).then_some(p as usize)
    }
}

/// The real driver's `name` (NUL-terminated), cached in `slot` (0: not looked up yet,
/// 1: absent).
pub fn symbol_cached(slot: &AtomicUsize, name: &'static [u8]) -> Option<usize> {
    match slot.load(Ordering::Acquire) {
        0 => {}
        1 => return None,
        p => return Some(p),
    }
    let found = CStr::from_bytes_with_nul(name)
        .ok()
        .and_then(|n| get().ok()?.symbol(n));
    slot.store(found.unwrap_or(1), Ordering::Release);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_path_is_the_only_candidate() {
        assert_eq!(
            candidates(Some("/opt/x/libcuda.so.1"), Some("/a")),
            vec!["/opt/x/libcuda.so.1".to_string()]
        );
    }

    #[test]
    fn library_path_comes_first_without_repeats_or_relative_dirs() {
        let c = candidates(None, Some("/build/sim:rel/dir:/usr/lib64/:/build/sim"));
        assert_eq!(c[0], "/build/sim/libcuda.so.1");
        assert_eq!(c[1], "/usr/lib64/libcuda.so.1");
        assert!(!c.iter().any(|p| p.starts_with("rel")));
        let n = c.iter().filter(|p| *p == "/usr/lib64/libcuda.so.1").count();
        assert_eq!(n, 1);
        assert_eq!(c.len(), 1 + SYSTEM_DIRS.len());
        assert_eq!(candidates(None, None).len(), SYSTEM_DIRS.len());
    }

    #[test]
    fn missing_candidates_are_reported() {
        let e = load(&["/nonexistent/libcuda.so.1".to_string()])
            .err()
            .expect("nothing to load");
        assert!(e.contains("no candidate"), "{e}");
    }
}
