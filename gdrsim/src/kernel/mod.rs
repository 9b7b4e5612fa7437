//! `GDRSIM_BACKING=kernel`: device memory comes from the test provider module's `/dev/nvp2p`
//! (`vm/nvp2p/` of the repository: a fake NVIDIA P2P provider whose "GPU memory" is a PCI
//! BAR), and `/dev/gdrdrv` is the real gdrdrv module, not emulated.
//!
//! `cuInit` opens the provider and maps its window (as many bytes as the BAR holds) at a
//! 64 KiB aligned address; the window's addresses are the device pointers, so copies and
//! memsets are CPU accesses as in the host backing. `cuMemAlloc` picks a 64 KiB aligned range
//! of the window and asks the provider to back it with BAR pages; `cuMemFree` gives them back,
//! which runs the free callbacks of the real driver's non-persistent pins. Nothing of
//! `/dev/gdrdrv` is interposed: every open, ioctl and mmap reaches the module.

pub mod counters;

use crate::config::{self, Backing};
use crate::cuda::errors as cu;
use crate::cuda::CUresult;
use crate::gpu::Gpu;
use crate::real;
use libc::{c_int, c_ulong, c_void, pid_t};
use std::sync::atomic::{AtomicI32, Ordering};

/// The provider's device node.
const NODE: &std::ffi::CStr = c"/dev/nvp2p";
/// Its GPU page: allocations and the window are aligned to it.
pub const GPU_PAGE: u64 = 1 << 16;

/// `struct nvp2p_info` of `vm/nvp2p/nvp2p_uapi.h`.
#[repr(C)]
#[derive(Default)]
struct Info {
    bar_size: u64,
    free_bytes: u64,
    window_base: u64,
    window_size: u64,
    pins: u64,
}

/// `struct nvp2p_alloc`.
#[repr(C)]
struct Alloc {
    addr: u64,
    size: u64,
}

/// `struct nvp2p_free`.
#[repr(C)]
struct Free {
    addr: u64,
}

/// Linux's `_IOC(dir, 'N', nr, size)`.
const fn ioc(dir: c_ulong, nr: c_ulong, size: usize) -> c_ulong {
    (dir << 30) | ((size as c_ulong) << 16) | ((b'N' as c_ulong) << 8) | nr
}
const IOC_INFO: c_ulong = ioc(2, 1, std::mem::size_of::<Info>());
const IOC_ALLOC: c_ulong = ioc(1, 2, std::mem::size_of::<Alloc>());
const IOC_FREE: c_ulong = ioc(1, 3, std::mem::size_of::<Free>());

/// The provider file of this process's GPU, and the process that opened it.
static FD: AtomicI32 = AtomicI32::new(-1);
static FD_PID: AtomicI32 = AtomicI32::new(0);

/// Whether the kernel backing is selected.
pub fn active() -> bool {
    config::get().backing == Backing::Kernel
}

/// Prints why the backing cannot start, once per process.
fn report(what: &str) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| eprintln!("gdrsim: GDRSIM_BACKING=kernel: {what}"));
}

/// `cuInit`'s GPU: the provider's window for the kernel backing, `None` otherwise.
pub fn create_gpu(pid: pid_t, gen: u64) -> Option<Result<Gpu, CUresult>> {
    active().then(|| open_window(pid, gen))
}

fn open_window(pid: pid_t, gen: u64) -> Result<Gpu, CUresult> {
    // A forked child's copy of its parent's file stays the parent's: the child opens its own.
    let old = FD.swap(-1, Ordering::AcqRel);
    if old >= 0 && FD_PID.load(Ordering::Acquire) != pid {
        // SAFETY: the inherited descriptor is this emulator's own and nobody else uses it.
        unsafe { real::close(old) };
    }
    // SAFETY: NODE is NUL-terminated; open has no other precondition.
    let fd = unsafe { real::open(NODE.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC, 0) };
    if fd < 0 {
        report(&format!(
            "cannot open /dev/nvp2p ({}): is the nvp2p module loaded?",
            std::io::Error::last_os_error()
        ));
        return Err(100); // CUDA_ERROR_NO_DEVICE
    }
    let close = |e| {
        // SAFETY: fd was opened above and is not shared yet.
        unsafe { real::close(fd) };
        Err(e)
    };
    let mut info = Info::default();
    // SAFETY: NVP2P_IOC_INFO writes one struct nvp2p_info into `info`.
    if unsafe { real::ioctl(fd, IOC_INFO, (&mut info as *mut Info).cast()) } != 0 {
        report("NVP2P_IOC_INFO failed");
        return close(100); // CUDA_ERROR_NO_DEVICE
    }
    let size = info.bar_size & !(GPU_PAGE - 1);
    let Some(base) = map_window(fd, size) else {
        report("cannot map the provider's window");
        return close(cu::OUT_OF_MEMORY);
    };
    FD.store(fd, Ordering::Release);
    FD_PID.store(pid, Ordering::Release);
    Ok(Gpu::external_aligned(pid, gen, base, size, GPU_PAGE))
}

/// Maps `size` bytes of the provider's window at a `GPU_PAGE` aligned address.
fn map_window(fd: c_int, size: u64) -> Option<u64> {
    let at = crate::gpu::reserve_aligned(size, GPU_PAGE)?;
    // SAFETY: [at, at + size) is the reservation made just above, which is ours.
    let w = unsafe {
        real::mmap(
            at as *mut c_void,
            size as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            fd,
            0,
        )
    };
    if w == libc::MAP_FAILED {
        // SAFETY: the reservation is ours and unused.
        unsafe { real::munmap(at as *mut c_void, size as usize) };
        return None;
    }
    Some(at)
}

/// `cuMemAlloc` of `[va, va + size)` in the window: the provider backs it with BAR pages.
pub fn back(va: u64, size: u64) -> Result<(), CUresult> {
    if !active() {
        return Ok(());
    }
    let mut a = Alloc { addr: va, size };
    // SAFETY: NVP2P_IOC_ALLOC reads one struct nvp2p_alloc.
    match unsafe {
        real::ioctl(
            FD.load(Ordering::Acquire),
            IOC_ALLOC,
            (&mut a as *mut Alloc).cast(),
        )
    } {
        0 => Ok(()),
        _ if real::errno() == libc::ENOMEM => Err(cu::OUT_OF_MEMORY),
        _ => Err(cu::INVALID_VALUE),
    }
}

/// `cuMemFree` of the allocation at `va`: its pages go back to the provider, and the real
/// driver's non-persistent pins of them are invalidated through their free callbacks.
pub fn release(va: u64) {
    if !active() {
        return;
    }
    let mut f = Free { addr: va };
    // SAFETY: NVP2P_IOC_FREE reads one struct nvp2p_free.
    unsafe {
        real::ioctl(
            FD.load(Ordering::Acquire),
            IOC_FREE,
            (&mut f as *mut Free).cast(),
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_are_the_providers() {
        // _IOR('N', 1, 40 bytes), _IOW('N', 2, 16 bytes), _IOW('N', 3, 8 bytes).
        assert_eq!(IOC_INFO, 0x8028_4e01);
        assert_eq!(IOC_ALLOC, 0x4010_4e02);
        assert_eq!(IOC_FREE, 0x4008_4e03);
    }

    #[test]
    fn host_backing_is_untouched() {
        assert!(!active());
        assert!(create_gpu(1, 1).is_none());
        assert_eq!(back(1 << 16, 1), Ok(()));
    }
}
