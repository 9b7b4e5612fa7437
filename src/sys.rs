//! Thin wrappers over the C library's `open`, `ioctl`, `mmap`, `munmap`, `close`, `sysconf`
//! and `getpid`, returning [`Result`].
//!
//! Every call goes through the C library's exported symbol, never a raw `syscall`, so that an
//! `LD_PRELOAD`ed emulator (or any other interposer) sees exactly what upstream's library
//! would issue.

use crate::error::{Error, Result};
use std::ffi::CStr;
use std::os::raw::{c_int, c_ulong, c_void};

/// A struct that may be handed to [`ioctl`] as the argument of a request.
///
/// # Safety
/// Implementors must be `#[repr(C)]` plain-old-data whose size is the *whole* structure the
/// driver reads and writes for the requests it is used with (the kernel copies the full
/// struct whatever size the request number encodes), and every bit pattern must be valid.
pub unsafe trait IoctlParam: Copy {}

/// `open(path, flags)`; returns the new file descriptor.
pub fn open(path: &CStr, flags: c_int) -> Result<c_int> {
    // SAFETY: `path` is a valid NUL-terminated string for the duration of the call; open
    // does not retain it.
    let fd = unsafe { libc::open(path.as_ptr(), flags) };
    if fd < 0 {
        Err(Error::last_os("open"))
    } else {
        Ok(fd)
    }
}

/// `ioctl(fd, request, arg)`; the driver may read and write the whole of `*arg`.
pub fn ioctl<T: IoctlParam>(fd: c_int, request: c_ulong, arg: &mut T) -> Result<()> {
    // SAFETY: `arg` is an exclusive reference to a `T` that, by the `IoctlParam` contract, is
    // exactly the structure the driver copies in and out, and every bit pattern the driver
    // writes back is a valid `T`.
    let rc = unsafe { libc::ioctl(fd, request as _, arg as *mut T as *mut c_void) };
    if rc < 0 {
        Err(Error::last_os("ioctl"))
    } else {
        Ok(())
    }
}

/// `mmap(NULL, len, PROT_READ|PROT_WRITE, MAP_SHARED, fd, offset)`: a new shared mapping at an
/// address the kernel chooses. Returns its address.
pub fn mmap_shared(len: usize, fd: c_int, offset: u64) -> Result<usize> {
    let off = libc::off_t::try_from(offset)
        .map_err(|_| Error::InvalidArgument("mmap offset out of range"))?;
    // SAFETY: with a NULL hint and no MAP_FIXED the kernel picks an unused range, so no
    // existing memory of the process is replaced; the result is only returned as an address.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            off,
        )
    };
    if p == libc::MAP_FAILED {
        Err(Error::last_os("mmap"))
    } else {
        Ok(p as usize)
    }
}

/// `munmap(addr, len)`.
///
/// # Safety
/// `[addr, addr+len)` must be a mapping this library created and that nothing still uses
/// through a Rust reference.
pub unsafe fn munmap(addr: usize, len: usize) -> Result<()> {
    // SAFETY: the caller guarantees the range is one of our mappings and unused.
    let rc = unsafe { libc::munmap(addr as *mut c_void, len) };
    if rc < 0 {
        Err(Error::last_os("munmap"))
    } else {
        Ok(())
    }
}

/// `close(fd)`.
pub fn close(fd: c_int) -> Result<()> {
    // SAFETY: closing a descriptor has no memory-safety effect on this process; the caller
    // owns `fd` and does not use it afterwards.
    let rc = unsafe { libc::close(fd) };
    if rc < 0 {
        Err(Error::last_os("close"))
    } else {
        Ok(())
    }
}

/// The host page size (`sysconf(_SC_PAGESIZE)`), 4096 if the C library cannot tell.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    match usize::try_from(v) {
        Ok(p) if p.is_power_of_two() => p,
        _ => 4096,
    }
}

/// The calling process's id (`getpid`).
pub fn getpid() -> i32 {
    // SAFETY: getpid has no preconditions and cannot fail.
    unsafe { libc::getpid() }
}

/// Registers fork handlers (`pthread_atfork`): `prepare` runs in the forking thread before
/// the fork, `parent` and `child` after it in each process. Handlers must not allocate locks
/// the forking thread may already hold.
pub fn at_fork(
    prepare: extern "C" fn(),
    parent: extern "C" fn(),
    child: extern "C" fn(),
) -> Result<()> {
    // SAFETY: the three handlers are plain `extern "C"` functions with no arguments, as
    // pthread_atfork requires; glibc's wrapper ties them to this library's DSO handle, so
    // they are dropped if the library is unloaded.
    let rc = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::Sys {
            call: "pthread_atfork",
            errno: rc,
        })
    }
}

/// `strerror(errno)` text without Rust's " (os error N)" suffix, for log lines.
pub fn strerror(errno: i32) -> String {
    let s = std::io::Error::from_raw_os_error(errno).to_string();
    match s.rfind(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// `n` rounded up to a multiple of `align` (a power of two); `None` on overflow.
pub fn round_up(n: usize, align: usize) -> Option<usize> {
    debug_assert!(align.is_power_of_two());
    n.checked_add(align - 1).map(|v| v & !(align - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_size_is_a_power_of_two() {
        let p = page_size();
        assert!(p.is_power_of_two() && p >= 4096, "{p}");
    }

    #[test]
    fn round_up_rounds_and_detects_overflow() {
        assert_eq!(round_up(0, 4096), Some(0));
        assert_eq!(round_up(1, 4096), Some(4096));
        assert_eq!(round_up(4096, 4096), Some(4096));
        assert_eq!(round_up(4097, 4096), Some(8192));
        assert_eq!(round_up(usize::MAX - 10, 4096), None);
    }

    #[test]
    fn open_missing_file_reports_enoent() {
        let e = open(c"/nonexistent/gdrapi-test", libc::O_RDONLY).unwrap_err();
        assert_eq!(
            e,
            Error::Sys {
                call: "open",
                errno: libc::ENOENT
            }
        );
    }

    #[test]
    fn strerror_has_no_rust_suffix() {
        assert_eq!(strerror(libc::ENOENT), "No such file or directory");
    }

    #[test]
    fn mmap_and_munmap_round_trip() {
        // An anonymous-like shared mapping of /dev/zero is enough to exercise the wrappers.
        let fd = open(c"/dev/zero", libc::O_RDWR | libc::O_CLOEXEC).unwrap();
        let addr = mmap_shared(page_size(), fd, 0).unwrap();
        assert_ne!(addr, 0);
        // SAFETY: the mapping was created just above and is not referenced elsewhere.
        unsafe { munmap(addr, page_size()) }.unwrap();
        close(fd).unwrap();
        assert_eq!(close(fd).unwrap_err().errno(), libc::EBADF);
    }
}
