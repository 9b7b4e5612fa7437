//! The interposed C library calls. Calls on anything that is not the emulated device (or one
//! of its mappings, or a dma-buf fd) go straight to the C library after one table lookup.
//!
//! `open`, `openat` and `ioctl` are variadic in C. Rust cannot define variadic functions on
//! stable, so the optional argument is declared as a fixed parameter: on x86-64 and aarch64
//! (the only targets this emulator supports) the first variadic argument travels in the same
//! register as a fixed one, so this reads exactly what the caller passed.

use crate::config::NodeKind;
use crate::driver;
use crate::node::is_device_path;
use crate::real;
use crate::state::{Dmabuf, STATE};
use libc::{c_char, c_int, c_long, c_ulong, c_void, mode_t, off_t, size_t};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("gdrsim supports x86-64 and aarch64 only");

const FD_TABLE: usize = 1 << 16;
/// fd kind bit: an emulated `/dev/gdrdrv` file.
pub const KIND_DEVICE: u8 = 1;
/// fd kind bit: a dma-buf export.
pub const KIND_DMABUF: u8 = 2;
/// fd kind bit: a POSIX fd export of a `cuMemCreate` allocation.
pub const KIND_VMMFD: u8 = 4;

static FD_KIND: [AtomicU8; FD_TABLE] = [const { AtomicU8::new(0) }; FD_TABLE];
static HIGH_FDS: AtomicBool = AtomicBool::new(false);
static ANY_VMAS: AtomicBool = AtomicBool::new(false);

/// Marks `fd` as one of ours (`kind` bits) or, with 0, as not ours.
pub fn set_kind(fd: c_int, kind: u8) {
    match usize::try_from(fd) {
        Ok(i) if i < FD_TABLE => FD_KIND[i].store(kind, Ordering::Release),
        Ok(_) => HIGH_FDS.store(true, Ordering::Release),
        Err(_) => {}
    }
}

fn kind(fd: c_int) -> u8 {
    match usize::try_from(fd) {
        Ok(i) if i < FD_TABLE => FD_KIND[i].load(Ordering::Acquire),
        Ok(_) if HIGH_FDS.load(Ordering::Acquire) && !crate::vulkan::in_driver() => {
            let st = STATE.lock();
            let mut k = 0;
            if st.drv.file_of(fd).is_some() {
                k |= KIND_DEVICE;
            }
            if st.dmabufs.contains_key(&fd) {
                k |= KIND_DMABUF;
            }
            if st.vmm_exports.contains_key(&fd) {
                k |= KIND_VMMFD;
            }
            k
        }
        _ => 0,
    }
}

/// Runs the body of the interposed C library function `name` inside `gdrapi-boundary`'s
/// guard: a panic returns `failed` (-1, `MAP_FAILED`, NULL) with `errno` EIO instead of
/// unwinding into C.
pub(crate) fn interposed<T>(name: &'static str, failed: T, body: impl FnOnce() -> T) -> T {
    gdrapi_boundary::guard_or(name, || fail(libc::EIO, failed), body)
}

fn fail<T>(e: c_int, v: T) -> T {
    real::set_errno_value(e);
    v
}

/// The seals every emulated device file carries; together with its empty size and (where
/// `/proc` is mounted) its memfd name they identify a device fd from another process.
const DEVICE_SEALS: c_int =
    libc::F_SEAL_WRITE | libc::F_SEAL_GROW | libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL;

/// Whether `fd` (unknown to this process's table) is an emulated device file opened by some
/// other process, e.g. received over a unix socket.
fn is_foreign_device(fd: c_int) -> bool {
    let saved = real::errno();
    let found = looks_like_device(fd);
    real::set_errno_value(saved);
    found
}

fn looks_like_device(fd: c_int) -> bool {
    // SAFETY: F_GET_SEALS only reads the seals of `fd` (EINVAL for anything but a memfd).
    if unsafe { libc::fcntl(fd, libc::F_GET_SEALS) } != DEVICE_SEALS {
        return false;
    }
    // SAFETY: fstat writes only into the zeroed buffer we pass.
    let empty = unsafe {
        let mut sb: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut sb) == 0 && sb.st_size == 0
    };
    if !empty {
        return false;
    }
    let link = format!("/proc/self/fd/{fd}\0");
    let mut buf = [0u8; 64];
    // SAFETY: link is NUL-terminated and buf is writable for its length.
    let n = unsafe { libc::readlink(link.as_ptr().cast(), buf.as_mut_ptr().cast(), buf.len()) };
    n <= 0 || buf[..n as usize].starts_with(b"/memfd:gdrdrv ")
}

fn device_open(flags: c_int) -> c_int {
    let cfg = crate::config::get();
    if cfg.no_device {
        return fail(libc::ENOENT, -1);
    }
    if !driver::may_open(flags) {
        return fail(libc::EACCES, -1);
    }
    if let Some(e) = crate::fail::check("open") {
        return fail(e, -1);
    }
    match cfg.device_node {
        NodeKind::Char => {}
        // A character device whose major no driver registered: the kernel's chrdev_open
        // finds nothing to call.
        NodeKind::Stale | NodeKind::NoDriver => return fail(libc::ENXIO, -1),
        NodeKind::File => return plain_file_open(flags),
    }
    let mut mflags = libc::MFD_ALLOW_SEALING;
    if flags & libc::O_CLOEXEC != 0 {
        mflags |= libc::MFD_CLOEXEC;
    }
    let mut st = STATE.lock();
    // SAFETY: the name is a NUL-terminated literal.
    let fd = unsafe { libc::memfd_create(c"gdrdrv".as_ptr(), mflags) };
    if fd < 0 {
        return -1;
    }
    // Sealed against writes: a process that gets this fd without our table (over a unix
    // socket) cannot mmap it writable, and we answer EACCES as the driver would.
    // SAFETY: fcntl on the fd just created.
    unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, DEVICE_SEALS) };
    let Some(ino) = driver::inode_of(fd) else {
        // SAFETY: closing the memfd made just above.
        unsafe { real::close(fd) };
        return fail(libc::EIO, -1);
    };
    st.drv.add_file(fd, ino, flags & libc::O_ACCMODE);
    set_kind(fd, KIND_DEVICE);
    fd
}

/// Opens the regular file that `GDRSIM_DEVICE_NODE=file` puts where the node should be: an
/// empty memfd the driver does not know, so its ioctls give ENOTTY as a real file's do.
fn plain_file_open(flags: c_int) -> c_int {
    let mflags = if flags & libc::O_CLOEXEC != 0 {
        libc::MFD_CLOEXEC
    } else {
        0
    };
    // SAFETY: the name is a NUL-terminated literal.
    unsafe { libc::memfd_create(c"gdrdrv-file".as_ptr(), mflags) }
}

/// `open(2)`.
///
/// # Safety
///
/// The C library's contract for `open`: `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    interposed("open", -1, || {
        if is_device_path(path) {
            return device_open(flags);
        }
        if crate::procmaps::is_self_maps(path) {
            return crate::procmaps::open(path, flags);
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::open(path, flags, mode) }
    })
}

/// `open64(2)`.
///
/// # Safety
///
/// The C library's contract for `open64`: `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    interposed("open64", -1, || {
        if is_device_path(path) {
            return device_open(flags);
        }
        if crate::procmaps::is_self_maps(path) {
            return crate::procmaps::open(path, flags);
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::open64(path, flags, mode) }
    })
}

/// `openat(2)`; the device is recognised by its absolute path.
///
/// # Safety
///
/// The C library's contract for `openat`: `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn openat(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: mode_t,
) -> c_int {
    interposed("openat", -1, || {
        if is_device_path(path) {
            return device_open(flags);
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::openat(dirfd, path, flags, mode) }
    })
}

/// `openat64(2)`.
///
/// # Safety
///
/// The C library's contract for `openat64`: `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn openat64(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: mode_t,
) -> c_int {
    interposed("openat64", -1, || {
        if is_device_path(path) {
            return device_open(flags);
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::openat64(dirfd, path, flags, mode) }
    })
}

/// Fortified `open` (`_FORTIFY_SOURCE`).
///
/// # Safety
///
/// The C library's contract for `__open_2`: `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    interposed("__open_2", -1, || {
        if is_device_path(path) {
            return device_open(flags);
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::open_2(path, flags) }
    })
}

/// Fortified `open64`.
///
/// # Safety
///
/// The C library's contract for `__open64_2`: `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    interposed("__open64_2", -1, || {
        if is_device_path(path) {
            return device_open(flags);
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::open64_2(path, flags) }
    })
}

/// Fortified `openat`.
///
/// # Safety
///
/// The C library's contract for `__openat_2`: `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    interposed("__openat_2", -1, || {
        if is_device_path(path) {
            return device_open(flags);
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::openat_2(dirfd, path, flags) }
    })
}

/// Fortified `openat64`.
///
/// # Safety
///
/// The C library's contract for `__openat64_2`: `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn __openat64_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    interposed("__openat64_2", -1, || {
        if is_device_path(path) {
            return device_open(flags);
        }
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { real::openat64_2(dirfd, path, flags) }
    })
}

/// `ioctl(2)`.
///
/// # Safety
///
/// The C library's contract for `ioctl`: `arg` is valid for the argument `request` names.
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, request: c_ulong, arg: *mut c_void) -> c_int {
    interposed("ioctl", -1, || {
        if kind(fd) & KIND_DEVICE == 0 {
            crate::kernel::counters::count(request);
            // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
            let r = unsafe { real::ioctl(fd, request, arg) };
            if r == -1 && real::errno() == libc::ENOTTY && is_foreign_device(fd) {
                crate::counters::count_ioctl();
                let e = if (request >> 8) & 0xff == driver::IOCTL_TYPE {
                    libc::EACCES
                } else {
                    libc::EINVAL
                };
                return fail(e, -1);
            }
            return r;
        }
        let mut st = STATE.lock();
        let Some(file) = driver::lookup_fd(&mut st, fd) else {
            set_kind(fd, 0);
            drop(st);
            // SAFETY: pass-through with the caller's own arguments.
            return unsafe { real::ioctl(fd, request, arg) };
        };
        match driver::ioctl(&mut st, file, request, arg) {
            Ok(v) => v,
            Err(e) => fail(e, -1),
        }
    })
}

/// mmap of a device or dma-buf fd; `None` when the fd turned out not to be ours any more.
fn emulated_mmap(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
    k: u8,
) -> Option<*mut c_void> {
    let mut st = STATE.lock();
    let r = if k & KIND_DEVICE != 0 {
        let Some(file) = driver::lookup_fd(&mut st, fd) else {
            set_kind(fd, 0);
            return None;
        };
        if let Some(e) = crate::fail::check("mmap") {
            return Some(fail(e, libc::MAP_FAILED));
        }
        let r = driver::mmap(&mut st, file, addr, len as u64, prot, flags, off);
        if r.is_ok() {
            ANY_VMAS.store(true, Ordering::Release);
        }
        r
    } else if k & KIND_DMABUF == 0 {
        // A VMM export fd: an opaque handle for an importer, not something to map.
        if st.export_of(fd).is_none() {
            set_kind(fd, 0);
            return None;
        }
        Err(libc::ENODEV)
    } else {
        let gone = st
            .dmabufs
            .get(&fd)
            .is_none_or(|d| driver::inode_of(fd) != Some(d.ino));
        if gone {
            st.dmabufs.remove(&fd);
            set_kind(fd, 0);
            return None;
        }
        if let Some(e) = crate::fail::check("mmap") {
            return Some(fail(e, libc::MAP_FAILED));
        }
        match st.dmabufs.get(&fd) {
            Some(d) => dmabuf_mmap(d, addr, len as u64, prot, flags, off),
            None => Err(libc::EBADF),
        }
    };
    Some(match r {
        Ok(a) => a as *mut c_void,
        Err(e) => fail(e, libc::MAP_FAILED),
    })
}

fn dmabuf_mmap(
    d: &Dmabuf,
    addr: *mut c_void,
    len: u64,
    prot: c_int,
    flags: c_int,
    off: off_t,
) -> Result<u64, c_int> {
    let page = 1u64 << driver::page_shift();
    let size = (d.size + page - 1) & !(page - 1);
    if len == 0 || off < 0 || (off as u64) & (page - 1) != 0 || flags & libc::MAP_SHARED == 0 {
        return Err(libc::EINVAL);
    }
    let rlen = len.checked_add(page - 1).ok_or(libc::EINVAL)? & !(page - 1);
    if (off as u64).checked_add(rlen).is_none_or(|e| e > size) {
        return Err(libc::EINVAL);
    }
    // A real dma-buf is exported in whole pages; the last piece may need rounding up.
    let mut segs = d.segs.clone();
    if let Some(last) = segs.last_mut() {
        let total: u64 = d.segs.iter().map(|s| s.len).sum();
        last.len += size - total;
    }
    driver::map_segments(addr, rlen, prot, flags, d.memfd, &segs, off as u64)
}

/// `mmap` of an emulated device file, or `next` (the C library's `mmap` or `mmap64`) for
/// anything else.
///
/// # Safety
///
/// The C library's contract for `mmap`: with `MAP_FIXED`, `[addr, addr + len)` holds nothing
/// that is still in use (it is replaced); `next` is the C library's `mmap` or `mmap64`.
unsafe fn mmap_common(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
    next: unsafe fn(*mut c_void, size_t, c_int, c_int, c_int, off_t) -> *mut c_void,
) -> *mut c_void {
    if fd < 0 || flags & libc::MAP_ANONYMOUS != 0 {
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        return unsafe { next(addr, len, prot, flags, fd, off) };
    }
    let k = kind(fd);
    if k != 0 {
        if let Some(p) = emulated_mmap(addr, len, prot, flags, fd, off, k) {
            return p;
        }
    }
    // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
    let p = unsafe { next(addr, len, prot, flags, fd, off) };
    if p == libc::MAP_FAILED
        && matches!(real::errno(), libc::EPERM | libc::EACCES)
        && is_foreign_device(fd)
    {
        return fail(libc::EACCES, libc::MAP_FAILED);
    }
    p
}

/// `mmap(2)`.
///
/// # Safety
///
/// The C library's contract for `mmap`: with `MAP_FIXED`, `[addr, addr + len)` holds nothing
/// that is still in use (it is replaced).
#[no_mangle]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    interposed("mmap", libc::MAP_FAILED, || {
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { mmap_common(addr, len, prot, flags, fd, off, real::mmap) }
    })
}

/// `mmap64(2)`.
///
/// # Safety
///
/// The C library's contract for `mmap64`: with `MAP_FIXED`, `[addr, addr + len)` holds nothing
/// that is still in use (it is replaced).
#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    interposed("mmap64", libc::MAP_FAILED, || {
        // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
        unsafe { mmap_common(addr, len, prot, flags, fd, off, real::mmap64) }
    })
}

/// `munmap(2)`.
///
/// # Safety
///
/// The C library's contract for `munmap`: nothing in `[addr, addr + len)` is used after the
/// call.
#[no_mangle]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: size_t) -> c_int {
    interposed("munmap", -1, || {
        if !ANY_VMAS.load(Ordering::Acquire) || crate::vulkan::in_driver() {
            // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
            return unsafe { real::munmap(addr, len) };
        }
        let mut st = STATE.lock();
        if driver::touches_vma(&st, addr as u64, len as u64) {
            if let Some(e) = crate::fail::check("munmap") {
                return fail(e, -1);
            }
            let r = if crate::vulkan::arena::unmap(addr as u64, len as u64) {
                0
            } else {
                // SAFETY: the caller's own munmap, with its own arguments.
                unsafe { real::munmap(addr, len) }
            };
            if r == 0 {
                driver::munmap(&mut st, addr as u64, len as u64);
            }
            if !st.drv.has_vmas() {
                ANY_VMAS.store(false, Ordering::Release);
            }
            return r;
        }
        drop(st);
        // SAFETY: the caller's own munmap, with its own arguments.
        unsafe { real::munmap(addr, len) }
    })
}

/// `close(2)`.
///
/// # Safety
///
/// The C library's contract for `close`: no one uses `fd` after the call.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    interposed("close", -1, || {
        let k = kind(fd);
        if k == 0 {
            // SAFETY: the caller's arguments, under the contract of the C function this one stands for.
            return unsafe { real::close(fd) };
        }
        let mut st = STATE.lock();
        // An injected failure reports an error after the close has happened, as Linux does:
        // the descriptor and the file are released whatever close returns.
        let injected = if k & KIND_DEVICE != 0 {
            crate::fail::check("close")
        } else {
            None
        };
        set_kind(fd, 0);
        if st.dmabufs.remove(&fd).is_some() {
            st.reclaim();
        }
        st.drop_export(fd, false);
        if driver::lookup_fd(&mut st, fd).is_some() {
            driver::close_fd(&mut st, fd);
        }
        // SAFETY: closing the caller's fd, as asked.
        let r = unsafe { real::close(fd) };
        match injected {
            Some(e) => fail(e, -1),
            None => r,
        }
    })
}

/// `kind` without waiting: 0 when the answer needs the state lock and someone holds it (the
/// emulator itself, mapping its own memory, is the one caller that can get here then).
fn kind_if_free(fd: c_int) -> u8 {
    match usize::try_from(fd) {
        Ok(i) if i < FD_TABLE => FD_KIND[i].load(Ordering::Acquire),
        Ok(_) if HIGH_FDS.load(Ordering::Acquire) && !crate::vulkan::in_driver() => {
            let Some(st) = STATE.try_lock() else {
                return 0;
            };
            let mut k = 0;
            if st.drv.file_of(fd).is_some() {
                k |= KIND_DEVICE;
            }
            if st.dmabufs.contains_key(&fd) {
                k |= KIND_DMABUF;
            }
            if st.vmm_exports.contains_key(&fd) {
                k |= KIND_VMMFD;
            }
            k
        }
        _ => 0,
    }
}

/// The kernel's mmap, reached without the C library's `mmap` (which a hooking library may
/// have patched to end up here again).
unsafe fn raw_mmap(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    // SAFETY: the caller's own mmap arguments, passed to the system call unchanged.
    let r = unsafe {
        real::syscall(
            libc::SYS_mmap,
            addr as c_long,
            len as c_long,
            prot as c_long,
            flags as c_long,
            fd as c_long,
            off as c_long,
        )
    };
    r as *mut c_void
}

/// `syscall(3)`. UCX's memory hooks replace the C library's `mmap` with code that ends in
/// `syscall(SYS_mmap, ...)`; a mapping of the emulated device (or of a dma-buf) made that way
/// is emulated as if it had come through `mmap`, as the kernel module sees every mapping
/// however it is asked for. Every other call goes to the C library unchanged. (Only the
/// mapping needs this: unmapping goes through the interposed `munmap` before it reaches the
/// hook, and the kernel's munmap of an emulated mapping is the real one.)
#[no_mangle]
pub unsafe extern "C" fn syscall(
    n: c_long,
    a: c_long,
    b: c_long,
    c: c_long,
    d: c_long,
    e: c_long,
    f: c_long,
) -> c_long {
    interposed("syscall", -1, || {
        if n == libc::SYS_mmap {
            let (flags, fd) = (d as c_int, e as c_int);
            if fd >= 0 && flags & libc::MAP_ANONYMOUS == 0 && kind_if_free(fd) != 0 {
                // SAFETY: the caller's mmap arguments, as mmap would get them.
                let p = unsafe {
                    mmap_common(
                        a as *mut c_void,
                        b as size_t,
                        c as c_int,
                        flags,
                        fd,
                        f as off_t,
                        raw_mmap,
                    )
                };
                return p as c_long;
            }
        }
        // SAFETY: pass-through with the caller's own arguments.
        unsafe { real::syscall(n, a, b, c, d, e, f) }
    })
}

// Lock order everywhere: STATE before the fault-injection rules (the Vulkan arena's lock is
// taken only under STATE).
extern "C" fn fork_prepare() {
    gdrapi_boundary::guard("fork_prepare", || {
        // The settings are read once per process; read them now, outside any lock, so that a child
        // never finds their one-time initialisation cut short by the fork.
        crate::config::get();
        crate::state::lock_for_fork();
        crate::fail::lock_for_fork();
    })
}

extern "C" fn fork_parent() {
    gdrapi_boundary::guard("fork_parent", || {
        crate::fail::unlock_after_fork();
        crate::state::unlock_after_fork();
    })
}

// The child makes every lock new instead of unlocking it: threads of the parent that were
// waiting for a lock at the fork do not exist here, and an unlock could hand it to one of them.
extern "C" fn fork_child() {
    gdrapi_boundary::guard("fork_child", || {
        crate::fail::reset_after_fork();
        crate::state::reset_after_fork();
        crate::vulkan::arena::reset_after_fork();
        driver::forget_vmas_after_fork(&mut STATE.lock());
        crate::vulkan::after_fork_child();
    })
}

extern "C" fn on_load() {
    gdrapi_boundary::guard("on_load", || {
        crate::counters::init();
        crate::fail::init_from_env();
        // SAFETY: registering plain extern "C" handlers that live as long as the process.
        unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child)) };
    })
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;
