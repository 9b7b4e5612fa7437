//! The real CUDA driver behind the Vulkan backing: found by path (the emulator itself answers
//! to `libcuda.so.1`), loaded once, and asked for functions by name.

use gdrapi_support::dl::{object_of, Library};
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

/// The real driver, loaded (and never unloaded).
pub struct Real {
    /// The library.
    pub lib: Library,
    /// The path it was loaded from.
    pub path: String,
}

/// Loads the first candidate that is a CUDA driver and not this emulator.
fn load(paths: &[String]) -> Result<Real, String> {
    let me = object_of(get as *const () as usize).map(|o| o.base);
    let mut why = Vec::new();
    for path in paths {
        if std::fs::metadata(path).is_err() {
            continue;
        }
        let lib = match Library::open(path) {
            Ok(l) => l,
            Err(e) => {
                why.push(e.to_string());
                continue;
            }
        };
        let Some(init) = lib.address("cuInit") else {
            why.push(format!("{path}: no cuInit"));
            continue;
        };
        if me.is_some() && object_of(init as usize).map(|o| o.base) == me {
            why.push(format!("{path}: is this emulator"));
            continue;
        }
        return Ok(Real {
            lib,
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

/// The real driver's `name` (NUL-terminated), cached in `slot` (0: not looked up yet,
/// 1: absent).
pub fn symbol_cached(slot: &AtomicUsize, name: &'static [u8]) -> Option<usize> {
    match slot.load(Ordering::Acquire) {
        0 => {}
        1 => return None,
        p => return Some(p),
    }
    let found = std::str::from_utf8(name.strip_suffix(b"\0")?)
        .ok()
        .and_then(|n| get().ok()?.lib.address(n))
        .map(|p| p as usize);
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
