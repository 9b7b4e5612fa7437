//! The `stat` family on `/dev/gdrdrv`: what the emulated node looks like to `stat`, `lstat`,
//! `fstatat`, `statx` and glibc's older `__xstat` entry points (binaries built before glibc
//! 2.33 still call those). Any other path goes to the C library after one short byte compare.
//!
//! The node is owned by root, has the mode `GDRSIM_DEVICE_MODE` and is what
//! `GDRSIM_DEVICE_NODE` says (a character device by default, major `GDRSIM_DEVICE_MAJOR`,
//! minor 0); with `GDRSIM_NO_DEVICE=1` it does not exist (ENOENT).

use crate::config::{self, NodeKind};
use crate::intercept::interposed;
use crate::real;
use libc::{c_char, c_int, c_uint};
use libc::{stat as Stat, stat64 as Stat64, statx as Statx};

const DEVICE_PATH: &[u8] = b"/dev/gdrdrv\0";

/// Whether `path` is exactly `/dev/gdrdrv`; stops at the first byte that differs, so other
/// paths cost a byte or two.
pub fn is_device_path(path: *const c_char) -> bool {
    if path.is_null() {
        return false;
    }
    for (i, &want) in DEVICE_PATH.iter().enumerate() {
        // SAFETY: the caller's path is a NUL-terminated string and we stop at its NUL (or
        // earlier): every byte read lies within it.
        let got = unsafe { *path.add(i) } as u8;
        if got != want {
            return false;
        }
    }
    // With the kernel backing the node is the real module's.
    !crate::kernel::active()
}

/// The attributes `stat` reports for the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attrs {
    /// File type and permission bits.
    pub mode: u32,
    /// Major of `st_rdev` (0 for a regular file).
    pub rdev_major: u32,
}

/// The node's attributes, or the errno `stat` gives (ENOENT when there is no node).
pub fn attrs() -> Result<Attrs, c_int> {
    let cfg = config::get();
    if cfg.no_device {
        return Err(libc::ENOENT);
    }
    let perms = cfg.device_mode & 0o7777;
    Ok(match cfg.device_node {
        NodeKind::File => Attrs {
            mode: libc::S_IFREG | perms,
            rdev_major: 0,
        },
        _ => Attrs {
            mode: libc::S_IFCHR | perms,
            rdev_major: cfg.node_major(),
        },
    })
}

/// Inode number of the emulated node (any fixed number; devtmpfs numbers are small).
const NODE_INO: u64 = 0x6472;
/// `st_dev` of the emulated node: devtmpfs is usually device 0:5.
const DEVTMPFS_MINOR: u32 = 5;

/// Fills a `struct stat` or `struct stat64` (same field names) for the node.
macro_rules! fill_stat {
    ($buf:expr, $a:expr) => {{
        let a: Attrs = $a;
        let b = $buf;
        b.st_dev = libc::makedev(0, DEVTMPFS_MINOR) as _;
        b.st_ino = NODE_INO as _;
        b.st_nlink = 1;
        b.st_mode = a.mode as _;
        b.st_uid = 0;
        b.st_gid = 0;
        b.st_rdev = libc::makedev(a.rdev_major, 0) as _;
        b.st_size = 0;
        b.st_blksize = 4096;
        b.st_blocks = 0;
    }};
}

fn errno_fail(e: c_int) -> c_int {
    real::set_errno_value(e);
    -1
}

/// Answers a stat-family query for the node: the errno of [`attrs`] when there is no node,
/// EFAULT for a NULL buffer, else the buffer zeroed and then completed by `fill`.
///
/// # Safety
/// `buf` must be null or point at writable storage for a `T`, for which all-zero is a valid
/// value (true of `struct stat`, `stat64` and `statx`).
unsafe fn answer<T>(buf: *mut T, fill: impl FnOnce(&mut T, Attrs)) -> c_int {
    match attrs() {
        Err(e) => errno_fail(e),
        Ok(_) if buf.is_null() => errno_fail(libc::EFAULT),
        Ok(a) => {
            // SAFETY: buf is non-null and writable (the caller's contract), and all-zero is a
            // valid `T`.
            let b = unsafe {
                buf.write(std::mem::zeroed());
                &mut *buf
            };
            fill(b, a);
            0
        }
    }
}

/// Answers a `struct stat` query for the node.
///
/// # Safety
/// As [`answer`].
unsafe fn answer_stat(buf: *mut Stat) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { answer(buf, |b, a| fill_stat!(b, a)) }
}

/// Answers a `struct stat64` query for the node.
///
/// # Safety
/// As [`answer`].
unsafe fn answer_stat64(buf: *mut Stat64) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { answer(buf, |b, a| fill_stat!(b, a)) }
}

/// Answers a `statx` query for the node.
///
/// # Safety
/// As [`answer`].
unsafe fn answer_statx(buf: *mut Statx) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        answer(buf, |b, a| {
            b.stx_mask = libc::STATX_BASIC_STATS;
            b.stx_blksize = 4096;
            b.stx_nlink = 1;
            b.stx_uid = 0;
            b.stx_gid = 0;
            b.stx_mode = a.mode as u16;
            b.stx_ino = NODE_INO;
            b.stx_size = 0;
            b.stx_blocks = 0;
            b.stx_rdev_major = a.rdev_major;
            b.stx_rdev_minor = 0;
            b.stx_dev_major = 0;
            b.stx_dev_minor = DEVTMPFS_MINOR;
        })
    }
}

/// `stat(2)`.
///
/// # Safety
///
/// The C library's contract for `stat`: `path` is NULL or a NUL-terminated string; `buf` is
/// NULL or writable for one `Stat`.
#[no_mangle]
pub unsafe extern "C" fn stat(path: *const c_char, buf: *mut Stat) -> c_int {
    interposed("stat", -1, || {
        if is_device_path(path) {
            // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
            return unsafe { answer_stat(buf) };
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::stat(path, buf) }
    })
}

/// `stat64(2)`.
///
/// # Safety
///
/// The C library's contract for `stat64`: `path` is NULL or a NUL-terminated string; `buf` is
/// NULL or writable for one `Stat64`.
#[no_mangle]
pub unsafe extern "C" fn stat64(path: *const c_char, buf: *mut Stat64) -> c_int {
    interposed("stat64", -1, || {
        if is_device_path(path) {
            // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
            return unsafe { answer_stat64(buf) };
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::stat64(path, buf) }
    })
}

/// `lstat(2)`: the node is not a symbolic link, so the same answer as `stat`.
///
/// # Safety
///
/// The C library's contract for `lstat`: `path` is NULL or a NUL-terminated string; `buf` is
/// NULL or writable for one `Stat`.
#[no_mangle]
pub unsafe extern "C" fn lstat(path: *const c_char, buf: *mut Stat) -> c_int {
    interposed("lstat", -1, || {
        if is_device_path(path) {
            // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
            return unsafe { answer_stat(buf) };
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::lstat(path, buf) }
    })
}

/// `lstat64(2)`.
///
/// # Safety
///
/// The C library's contract for `lstat64`: `path` is NULL or a NUL-terminated string; `buf` is
/// NULL or writable for one `Stat64`.
#[no_mangle]
pub unsafe extern "C" fn lstat64(path: *const c_char, buf: *mut Stat64) -> c_int {
    interposed("lstat64", -1, || {
        if is_device_path(path) {
            // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
            return unsafe { answer_stat64(buf) };
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::lstat64(path, buf) }
    })
}

/// `fstatat(2)` (the `newfstatat` system call); the node is recognised by its absolute path.
///
/// # Safety
///
/// The C library's contract for `fstatat`: `path` is NULL or a NUL-terminated string; `buf` is
/// NULL or writable for one `Stat`.
#[no_mangle]
pub unsafe extern "C" fn fstatat(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut Stat,
    flags: c_int,
) -> c_int {
    interposed("fstatat", -1, || {
        if is_device_path(path) {
            // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
            return unsafe { answer_stat(buf) };
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::fstatat(dirfd, path, buf, flags) }
    })
}

/// `fstatat64(2)`.
///
/// # Safety
///
/// The C library's contract for `fstatat64`: `path` is NULL or a NUL-terminated string; `buf`
/// is NULL or writable for one `Stat64`.
#[no_mangle]
pub unsafe extern "C" fn fstatat64(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut Stat64,
    flags: c_int,
) -> c_int {
    interposed("fstatat64", -1, || {
        if is_device_path(path) {
            // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
            return unsafe { answer_stat64(buf) };
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::fstatat64(dirfd, path, buf, flags) }
    })
}

/// `statx(2)`; Rust's `std::fs::metadata` asks this one first.
///
/// # Safety
///
/// The C library's contract for `statx`: `path` is NULL or a NUL-terminated string; `buf` is
/// NULL or writable for one `Statx`.
#[no_mangle]
pub unsafe extern "C" fn statx(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: c_uint,
    buf: *mut Statx,
) -> c_int {
    interposed("statx", -1, || {
        if is_device_path(path) {
            // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
            return unsafe { answer_statx(buf) };
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::statx(dirfd, path, flags, mask, buf) }
    })
}

/// glibc's `__xstat` (what `stat` compiled to before glibc 2.33).
///
/// # Safety
///
/// The C library's contract for `__xstat`: `path` is NULL or a NUL-terminated string; `buf` is
/// NULL or writable for one `Stat`.
#[no_mangle]
pub unsafe extern "C" fn __xstat(ver: c_int, path: *const c_char, buf: *mut Stat) -> c_int {
    interposed("__xstat", -1, || {
        if is_device_path(path) {
            // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
            return unsafe { answer_stat(buf) };
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::xstat(ver, path, buf) }
    })
}

/// glibc's `__xstat64`.
///
/// # Safety
///
/// The C library's contract for `__xstat64`: `path` is NULL or a NUL-terminated string; `buf`
/// is NULL or writable for one `Stat64`.
#[no_mangle]
pub unsafe extern "C" fn __xstat64(ver: c_int, path: *const c_char, buf: *mut Stat64) -> c_int {
    interposed("__xstat64", -1, || {
        if is_device_path(path) {
            // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
            return unsafe { answer_stat64(buf) };
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::xstat64(ver, path, buf) }
    })
}

/// glibc's `__lxstat`.
///
/// # Safety
///
/// The C library's contract for `__lxstat`: `path` is NULL or a NUL-terminated string; `buf` is
/// NULL or writable for one `Stat`.
#[no_mangle]
pub unsafe extern "C" fn __lxstat(ver: c_int, path: *const c_char, buf: *mut Stat) -> c_int {
    interposed("__lxstat", -1, || {
        if is_device_path(path) {
            // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
            return unsafe { answer_stat(buf) };
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::lxstat(ver, path, buf) }
    })
}

/// glibc's `__lxstat64`.
///
/// # Safety
///
/// The C library's contract for `__lxstat64`: `path` is NULL or a NUL-terminated string; `buf`
/// is NULL or writable for one `Stat64`.
#[no_mangle]
pub unsafe extern "C" fn __lxstat64(ver: c_int, path: *const c_char, buf: *mut Stat64) -> c_int {
    interposed("__lxstat64", -1, || {
        if is_device_path(path) {
            // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
            return unsafe { answer_stat64(buf) };
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::lxstat64(ver, path, buf) }
    })
}

/// glibc's `__fxstatat`.
///
/// # Safety
///
/// The C library's contract for `__fxstatat`: `path` is NULL or a NUL-terminated string; `buf`
/// is NULL or writable for one `Stat`.
#[no_mangle]
pub unsafe extern "C" fn __fxstatat(
    ver: c_int,
    dirfd: c_int,
    path: *const c_char,
    buf: *mut Stat,
    flags: c_int,
) -> c_int {
    interposed("__fxstatat", -1, || {
        if is_device_path(path) {
            // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
            return unsafe { answer_stat(buf) };
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::fxstatat(ver, dirfd, path, buf, flags) }
    })
}

/// glibc's `__fxstatat64`.
///
/// # Safety
///
/// The C library's contract for `__fxstatat64`: `path` is NULL or a NUL-terminated string;
/// `buf` is NULL or writable for one `Stat64`.
#[no_mangle]
pub unsafe extern "C" fn __fxstatat64(
    ver: c_int,
    dirfd: c_int,
    path: *const c_char,
    buf: *mut Stat64,
    flags: c_int,
) -> c_int {
    interposed("__fxstatat64", -1, || {
        if is_device_path(path) {
            // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
            return unsafe { answer_stat64(buf) };
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::fxstatat64(ver, dirfd, path, buf, flags) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_device_path_matches() {
        assert!(is_device_path(c"/dev/gdrdrv".as_ptr()));
        for p in [
            c"/dev/gdrdrv1",
            c"/dev/gdrdr",
            c"dev/gdrdrv",
            c"",
            c"/dev/null",
        ] {
            assert!(!is_device_path(p.as_ptr()), "{p:?}");
        }
        assert!(!is_device_path(std::ptr::null()));
    }
}
