//! The C library's own versions of the calls the emulator interposes, found once with
//! `dlsym(RTLD_NEXT, ...)`
//! ([`gdrapi_support::dl::next_symbol`]).
//!
//! Everything inside the emulator that needs `open`, `ioctl`, `mmap`, `munmap`, `close` or one
//! of the `stat` family must
//! call these wrappers: calling `libc::mmap` directly would bind to the emulator's own exported
//! `mmap` and re-enter it.

use libc::{c_char, c_int, c_long, c_uint, c_ulong, c_void, mode_t, off_t, size_t};
use libc::{stat as Stat, stat64 as Stat64, statx as Statx};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Looks up `name` (NUL-terminated) in the objects loaded after this one, caching the result in
/// `slot`. Returns 0 when the C library lacks the symbol.
fn resolve(slot: &AtomicUsize, name: &'static [u8]) -> usize {
    let cached = slot.load(Ordering::Acquire);
    if cached != 0 {
        return cached;
    }
    let found = std::ffi::CStr::from_bytes_with_nul(name)
        .ok()
        .and_then(gdrapi_support::dl::next_symbol)
        .map_or(0, |p| p as usize);
    slot.store(found, Ordering::Release);
    found
}

fn set_errno(e: c_int) {
    // SAFETY: __errno_location always returns this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

macro_rules! next_fn {
    ($(#[$doc:meta])* $name:ident = $cname:literal : fn($($arg:ident: $ty:ty),*) -> $ret:ty, fail = $fail:expr) => {
        next_fn!(@body $(#[$doc])* $name = $cname, ($($arg: $ty),*), $ret, $fail,
                 unsafe extern "C" fn($($ty),*) -> $ret);
    };
    ($(#[$doc:meta])* $name:ident = $cname:literal : variadic fn($($arg:ident: $ty:ty),*) -> $ret:ty, fail = $fail:expr) => {
        next_fn!(@body $(#[$doc])* $name = $cname, ($($arg: $ty),*), $ret, $fail,
                 unsafe extern "C" fn($($ty),*, ...) -> $ret);
    };
    (@body $(#[$doc:meta])* $name:ident = $cname:literal, ($($arg:ident: $ty:ty),*), $ret:ty, $fail:expr, $fty:ty) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// The C library's contract for this function: pointer arguments valid for what it
        /// reads and writes.
        pub unsafe fn $name($($arg: $ty),*) -> $ret {
            static SLOT: AtomicUsize = AtomicUsize::new(0);
            let p = resolve(&SLOT, concat!($cname, "\0").as_bytes());
            if p == 0 {
                set_errno(libc::ENOSYS);
                return $fail;
            }
            // SAFETY: `p` is the C library's definition of this function, whose C prototype is
            // the one written here (variadic ones are called through a variadic pointer type).
            let f: $fty = unsafe { std::mem::transmute::<usize, $fty>(p) };
            // SAFETY: the caller's arguments, under the same contract.
            unsafe { f($($arg),*) }
        }
    };
}

next_fn!(
    /// The C library's `fopen`.
    fopen = "fopen": fn(path: *const c_char, mode: *const c_char) -> *mut libc::FILE, fail = std::ptr::null_mut());
next_fn!(
    /// The C library's `fopen64`.
    fopen64 = "fopen64": fn(path: *const c_char, mode: *const c_char) -> *mut libc::FILE, fail = std::ptr::null_mut());
next_fn!(
    /// The C library's `open`.
    open = "open": variadic fn(path: *const c_char, flags: c_int, mode: mode_t) -> c_int, fail = -1);
next_fn!(
    /// The C library's `open64`.
    open64 = "open64": variadic fn(path: *const c_char, flags: c_int, mode: mode_t) -> c_int, fail = -1);
next_fn!(
    /// The C library's `openat`.
    openat = "openat": variadic fn(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int, fail = -1);
next_fn!(
    /// The C library's `openat64`.
    openat64 = "openat64": variadic fn(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int, fail = -1);
next_fn!(
    /// The C library's fortified `__open_2`.
    open_2 = "__open_2": fn(path: *const c_char, flags: c_int) -> c_int, fail = -1);
next_fn!(
    /// The C library's fortified `__open64_2`.
    open64_2 = "__open64_2": fn(path: *const c_char, flags: c_int) -> c_int, fail = -1);
next_fn!(
    /// The C library's fortified `__openat_2`.
    openat_2 = "__openat_2": fn(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int, fail = -1);
next_fn!(
    /// The C library's fortified `__openat64_2`.
    openat64_2 = "__openat64_2": fn(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int, fail = -1);
next_fn!(
    /// The C library's `ioctl`.
    ioctl = "ioctl": variadic fn(fd: c_int, request: c_ulong, arg: *mut c_void) -> c_int, fail = -1);
next_fn!(
    /// The C library's `mmap`.
    mmap = "mmap": fn(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void,
    fail = libc::MAP_FAILED);
next_fn!(
    /// The C library's `mmap64`.
    mmap64 = "mmap64": fn(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void,
    fail = libc::MAP_FAILED);
next_fn!(
    /// The C library's `munmap`.
    munmap = "munmap": fn(addr: *mut c_void, len: size_t) -> c_int, fail = -1);
next_fn!(
    /// The C library's `syscall`, with the six arguments a system call takes at most.
    syscall = "syscall": variadic fn(n: c_long, a: c_long, b: c_long, c: c_long, d: c_long, e: c_long, f: c_long) -> c_long,
    fail = -1);
next_fn!(
    /// The C library's `close`.
    close = "close": fn(fd: c_int) -> c_int, fail = -1);

next_fn!(
    /// The C library's `stat`.
    stat = "stat": fn(path: *const c_char, buf: *mut Stat) -> c_int, fail = -1);
next_fn!(
    /// The C library's `stat64`.
    stat64 = "stat64": fn(path: *const c_char, buf: *mut Stat64) -> c_int, fail = -1);
next_fn!(
    /// The C library's `lstat`.
    lstat = "lstat": fn(path: *const c_char, buf: *mut Stat) -> c_int, fail = -1);
next_fn!(
    /// The C library's `lstat64`.
    lstat64 = "lstat64": fn(path: *const c_char, buf: *mut Stat64) -> c_int, fail = -1);
next_fn!(
    /// The C library's `fstatat`.
    fstatat = "fstatat": fn(dirfd: c_int, path: *const c_char, buf: *mut Stat, flags: c_int) -> c_int, fail = -1);
next_fn!(
    /// The C library's `fstatat64`.
    fstatat64 = "fstatat64": fn(dirfd: c_int, path: *const c_char, buf: *mut Stat64, flags: c_int) -> c_int, fail = -1);
next_fn!(
    /// The C library's `statx`.
    statx = "statx": fn(dirfd: c_int, path: *const c_char, flags: c_int, mask: c_uint, buf: *mut Statx) -> c_int, fail = -1);
next_fn!(
    /// The C library's `__xstat` (binaries built against glibc before 2.33).
    xstat = "__xstat": fn(ver: c_int, path: *const c_char, buf: *mut Stat) -> c_int, fail = -1);
next_fn!(
    /// The C library's `__xstat64`.
    xstat64 = "__xstat64": fn(ver: c_int, path: *const c_char, buf: *mut Stat64) -> c_int, fail = -1);
next_fn!(
    /// The C library's `__lxstat`.
    lxstat = "__lxstat": fn(ver: c_int, path: *const c_char, buf: *mut Stat) -> c_int, fail = -1);
next_fn!(
    /// The C library's `__lxstat64`.
    lxstat64 = "__lxstat64": fn(ver: c_int, path: *const c_char, buf: *mut Stat64) -> c_int, fail = -1);
next_fn!(
    /// The C library's `__fxstatat`.
    fxstatat = "__fxstatat": fn(ver: c_int, dirfd: c_int, path: *const c_char, buf: *mut Stat, flags: c_int) -> c_int, fail = -1);
next_fn!(
    /// The C library's `__fxstatat64`.
    fxstatat64 = "__fxstatat64": fn(ver: c_int, dirfd: c_int, path: *const c_char, buf: *mut Stat64, flags: c_int) -> c_int, fail = -1);

/// The calling thread's `errno`.
pub fn errno() -> c_int {
    // SAFETY: __errno_location always returns this thread's errno slot.
    unsafe { *libc::__errno_location() }
}

/// Sets the calling thread's `errno`.
pub fn set_errno_value(e: c_int) {
    set_errno(e)
}
