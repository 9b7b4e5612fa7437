//! Thin wrappers over the C library's `open`, `ioctl`, `mmap`, `mprotect`, `munmap`, `madvise`,
//! `close`, `sysconf`, `getpid`, `pthread_atfork` and `dlerror`, returning [`Result`] where
//! the call can fail, and the text of an errno ([`strerror`]).
//!
//! Every call goes through the C library's exported symbol, never a raw `syscall`, so that an
//! `LD_PRELOAD`ed emulator (or any other interposer) sees exactly what upstream's library
//! would issue.

use crate::error::{Error, Result};
use std::ffi::CStr;
use std::os::raw::{c_int, c_ulong, c_void};
use std::sync::atomic::{AtomicU64, AtomicU8};

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

/// `madvise(addr, len, MADV_DONTFORK)`: a child created by `fork` (or any `clone` without
/// `CLONE_VM`) does not inherit `[addr, addr+len)`, as gdrdrv's own mappings (`VM_DONTCOPY`).
pub fn dont_fork(addr: usize, len: usize) -> Result<()> {
    // SAFETY: the advice only changes whether future children inherit the range; it neither
    // unmaps nor alters the memory of this process.
    let rc = unsafe { libc::madvise(addr as *mut c_void, len, libc::MADV_DONTFORK) };
    if rc < 0 {
        Err(Error::last_os("madvise"))
    } else {
        Ok(())
    }
}

/// `mprotect(addr, len, ...)`: `[addr, addr+len)` readable and writable when `open`, else no
/// access at all (an access faults with SIGSEGV), as after gdrdrv's `munmap`.
///
/// # Safety
/// The range lies inside one mapping this library made and owns; when `open` is false nothing
/// may still access it.
pub unsafe fn protect(addr: usize, len: usize, open: bool) -> Result<()> {
    let prot = if open {
        libc::PROT_READ | libc::PROT_WRITE
    } else {
        libc::PROT_NONE
    };
    // SAFETY: the caller's contract: the range is ours, and nothing relies on access to it
    // when it is closed.
    let rc = unsafe { libc::mprotect(addr as *mut c_void, len, prot) };
    if rc < 0 {
        Err(Error::last_os("mprotect"))
    } else {
        Ok(())
    }
}

/// New, never-unmapped, zero-filled anonymous memory of at least `len` bytes (page aligned),
/// apart from the process's heap.
pub fn anonymous_pages(len: usize) -> Result<*mut u8> {
    let len = round_up(len.max(1), page_size()).ok_or(Error::NoMemory)?;
    // SAFETY: a fresh private anonymous mapping at an address the kernel chooses replaces
    // nothing of this process.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(Error::last_os("mmap"));
    }
    Ok(p.cast())
}

/// [`anonymous_pages`] marked `MADV_WIPEONFORK` (Linux 4.14+): it reads as zeros again in
/// every child process, however the child was created. Fails where the kernel does not know
/// the advice.
pub fn wipe_on_fork_pages(len: usize) -> Result<*mut u8> {
    let p = anonymous_pages(len)?;
    let len = round_up(len.max(1), page_size()).ok_or(Error::NoMemory)?;
    // SAFETY: `p` is the mapping made just above, which a child may read as zeros.
    if let Err(e) = unsafe { advise_wipe_on_fork(p, len) } {
        // SAFETY: the mapping was made above and nothing refers to it.
        unsafe { libc::munmap(p.cast(), len) };
        return Err(e);
    }
    Ok(p)
}

/// Marks the pages of `[p, p + len)` `MADV_WIPEONFORK`: they read as zeros in every child
/// process. Fails where the kernel does not know the advice, and for memory that is not
/// private and anonymous (a library's zero-initialised data beyond its file's last page is).
///
/// # Safety
/// `[p, p + len)` is whole pages of this process's memory whose content a child may see as
/// zero bytes.
pub unsafe fn advise_wipe_on_fork(p: *mut u8, len: usize) -> Result<()> {
    // SAFETY: the caller's contract; the advice changes only what a child sees.
    if unsafe { libc::madvise(p.cast(), len, libc::MADV_WIPEONFORK) } < 0 {
        return Err(Error::last_os("madvise"));
    }
    Ok(())
}

/// Faults in, for writing, the pages of `[p, p + len)`, so that their first use later costs
/// no page fault: `MADV_POPULATE_WRITE` where the kernel has it (Linux 5.14), else a zero
/// byte stored (atomically, as other threads may read it) to each page.
///
/// # Safety
/// `[p, p + len)` lies in private anonymous memory of this process that reads as zero bytes
/// and that nothing writes yet.
pub unsafe fn populate_zeroed(p: *mut u8, len: usize) {
    // SAFETY: the range is this process's own memory (the caller's contract); the advice
    // only allocates its pages.
    if len == 0 || unsafe { libc::madvise(p.cast(), len, libc::MADV_POPULATE_WRITE) } == 0 {
        return;
    }
    for off in (0..len).step_by(page_size()) {
        // SAFETY: `off < len`, inside the range, valid and aligned for a byte; it reads as
        // zero and nothing else writes it, so storing a zero changes no value, and the store
        // is atomic, so readers race with nothing.
        unsafe { AtomicU8::from_ptr(p.add(off)) }.store(0, std::sync::atomic::Ordering::Relaxed);
    }
}

/// One `u64` in a page from [`wipe_on_fork_pages`]: 0 until written, and 0 again in every
/// child process.
pub fn wipe_on_fork_word() -> Result<&'static AtomicU64> {
    let p = wipe_on_fork_pages(std::mem::size_of::<AtomicU64>())?;
    // SAFETY: the page is readable and writable, page aligned (so aligned for AtomicU64),
    // zero-filled (a valid AtomicU64) and never unmapped, so the reference lives as long as
    // the process; all access to it goes through the atomic.
    Ok(unsafe { &*(p as *const AtomicU64) })
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

/// The text of the calling thread's last `dlopen`/`dlsym` failure, for log lines.
pub fn dlerror() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string valid until the next dl* call
    // on this thread; it is copied at once.
    let p = unsafe { libc::dlerror() };
    if p.is_null() {
        return "unknown dlopen error".to_owned();
    }
    // SAFETY: non-null, NUL-terminated (see above).
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
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

/// Test helpers that make a child process.
#[cfg(test)]
pub mod child {
    /// How the child is made.
    #[derive(Clone, Copy)]
    pub enum Made {
        /// By `fork()`: the `pthread_atfork` handlers run.
        Fork,
        /// By a raw `clone` system call: no fork handler runs in the child.
        RawClone,
    }

    /// Runs `check` in a child made as `made` says, and asserts that it returned true there.
    /// `check` may only make calls that neither allocate nor take a lock another thread of the
    /// parent may hold; the child leaves with `_exit`.
    pub fn assert_passes(made: Made, check: impl FnOnce() -> bool) {
        let pid = match made {
            // SAFETY: the child runs `check` alone (see above) and leaves with _exit.
            Made::Fork => unsafe { libc::fork() },
            // SAFETY: as for fork; the raw call returns the child's pid, a pid_t.
            Made::RawClone => unsafe {
                libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_long, 0, 0, 0, 0)
                    as libc::pid_t
            },
        };
        if pid == 0 {
            let ok = check();
            // SAFETY: _exit has no preconditions.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        assert!(pid > 0);
        let mut status = 0;
        // SAFETY: waiting for the child created above.
        let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(waited, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{status:#x}"
        );
    }
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
    fn wipe_on_fork_word_reads_zero_in_a_child() {
        let w = wipe_on_fork_word().expect("MADV_WIPEONFORK (Linux 4.14+)");
        w.store(42, std::sync::atomic::Ordering::SeqCst);
        child::assert_passes(child::Made::Fork, || {
            w.load(std::sync::atomic::Ordering::SeqCst) == 0
        });
        assert_eq!(w.load(std::sync::atomic::Ordering::SeqCst), 42);
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
        // Not `fd` again: another test's thread may already have been given that number, and
        // closing it would break that test (the emulated map of `session`'s tests opens
        // /dev/zero for each mapping).
        assert_eq!(close(-1).unwrap_err().errno(), libc::EBADF);
    }
}
