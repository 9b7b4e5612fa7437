//! `/proc/driver/gdrdrv/nv_get_pages_refcount`, which gdrdrv creates when loaded with
//! `dbg_enabled=1` (`GDRSIM_DBG_ENABLED=1`): the number of pins that hold their pages, over
//! every file. NVIDIA's extended sanity test (`leakage_pin_pages_fork_cumemalloc`) reads it
//! with `fopen`, which is what is interposed here (glibc's `fopen` does not go through the
//! interposable `open`). Without the setting, or with the kernel backing (the real module has
//! the real file), every path goes to the C library.

use crate::intercept::interposed;
use crate::real;
use crate::state::STATE;
use libc::{c_char, FILE};

const REFCOUNT_PATH: &[u8] = b"/proc/driver/gdrdrv/nv_get_pages_refcount\0";

/// Whether `path` is exactly the refcount file and the emulated driver shows it.
fn is_refcount_path(path: *const c_char) -> bool {
    if path.is_null() {
        return false;
    }
    for (i, &want) in REFCOUNT_PATH.iter().enumerate() {
        // SAFETY: the caller's path is NUL-terminated and we stop at its NUL (or earlier).
        if unsafe { *path.add(i) } as u8 != want {
            return false;
        }
    }
    let cfg = crate::config::get();
    cfg.dbg_enabled && !cfg.no_device && !crate::kernel::active()
}

/// The file's contents now, as a stream: a memfd holding "N\n".
fn refcount_stream(mode: *const c_char) -> *mut FILE {
    let n = STATE.lock().drv.pages_refcount();
    let text = format!("{n}\n");
    // SAFETY: the name is a NUL-terminated literal.
    let fd = unsafe { libc::memfd_create(c"nv_get_pages_refcount".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return std::ptr::null_mut();
    }
    // SAFETY: writes `text` into our own fresh memfd and rewinds it; fdopen takes the fd over.
    unsafe {
        let written = libc::write(fd, text.as_ptr().cast(), text.len());
        if written != text.len() as isize || libc::lseek(fd, 0, libc::SEEK_SET) != 0 {
            real::close(fd);
            return std::ptr::null_mut();
        }
        let f = libc::fdopen(fd, mode);
        if f.is_null() {
            real::close(fd);
        }
        f
    }
}

/// `fopen(3)`.
#[no_mangle]
pub unsafe extern "C" fn fopen(path: *const c_char, mode: *const c_char) -> *mut FILE {
    interposed("fopen", std::ptr::null_mut(), || {
        if is_refcount_path(path) {
            return refcount_stream(mode);
        }
        // SAFETY: the caller's arguments, under fopen's contract.
        unsafe { real::fopen(path, mode) }
    })
}

/// `fopen64(3)`.
#[no_mangle]
pub unsafe extern "C" fn fopen64(path: *const c_char, mode: *const c_char) -> *mut FILE {
    interposed("fopen64", std::ptr::null_mut(), || {
        if is_refcount_path(path) {
            return refcount_stream(mode);
        }
        // SAFETY: the caller's arguments, under fopen64's contract.
        unsafe { real::fopen64(path, mode) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_path_and_only_when_enabled() {
        // Unit tests run with the default settings: dbg_enabled is off.
        assert!(!is_refcount_path(
            c"/proc/driver/gdrdrv/nv_get_pages_refcount".as_ptr()
        ));
        assert!(!is_refcount_path(c"/proc/driver/gdrdrv/params".as_ptr()));
        assert!(!is_refcount_path(std::ptr::null()));
    }
}
