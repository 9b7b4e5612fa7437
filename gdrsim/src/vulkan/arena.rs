//! The arena of the Vulkan backing: one exportable allocation of BAR memory per process, its
//! device address (a CUDA import of it, or its own CPU mapping), and the per-mapping Vulkan
//! imports that stand for gdrdrv's mappings of pins.

use super::{libcuda, report, with_driver};
use crate::cuda::errors as cu;
use crate::cuda::CUresult;
use crate::forklock::{self, Mutex};
use crate::gpu::Gpu;
use crate::state::pid;
use gdrapi_support::bar::{BarMemory, VkBar};
use gdrapi_support::cuda::{fns, Cuda};
use libc::{c_int, c_void, pid_t};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The Vulkan device, created once per process and never destroyed (allocations borrow it).
struct Device(VkBar);
// SAFETY: VkBar holds Vulkan handles and function pointers; Vulkan allows using a device from
// any thread, and every use here is serialised by the ARENA lock or happens at set-up.
unsafe impl Send for Device {}
// SAFETY: as above.
unsafe impl Sync for Device {}

/// The real CUDA driver with the arena's device's primary context retained for good.
struct CudaDriver(Cuda);
// SAFETY: the CUDA driver API may be called from any thread; this is only used at set-up,
// under the emulator's state lock.
unsafe impl Send for CudaDriver {}
// SAFETY: as above.
unsafe impl Sync for CudaDriver {}

static DEVICE: OnceLock<Result<Device, String>> = OnceLock::new();
static CUDA: OnceLock<Result<CudaDriver, String>> = OnceLock::new();

/// One process's arena and the imports mapped from it.
struct Arena {
    pid: pid_t,
    bar: &'static VkBar,
    memory: BarMemory<'static>,
    size: u64,
    /// Live mappings of pins: CPU address -> the import that maps it.
    imports: BTreeMap<u64, BarMemory<'static>>,
}

struct Slot(Option<Arena>);
// SAFETY: the BarMemory values hold a raw CPU pointer and Vulkan handles that any thread may
// use; all access goes through the ARENA lock.
unsafe impl Send for Slot {}

static ARENA: Mutex<Slot> = Mutex::new(Slot(None));

fn device() -> Result<&'static VkBar, String> {
    DEVICE
        .get_or_init(|| {
            with_driver(VkBar::open)
                .map(Device)
                .map_err(|e| format!("no Vulkan device: {e}"))
        })
        .as_ref()
        .map(|d| &d.0)
        .map_err(Clone::clone)
}

/// The real driver's current context of this thread, and its `cuCtxSetCurrent` to restore it
/// after set-up.
fn current_context(real: &libcuda::Real) -> Option<(*mut c_void, SetCurrent)> {
    let get = real.lib.get::<fns::cuCtxGetCurrent>().ok()?;
    let set = real.lib.get::<fns::cuCtxSetCurrent>().ok()?;
    let mut ctx = std::ptr::null_mut();
    // SAFETY: a writable slot.
    (with_driver(|| unsafe { get(&mut ctx) }) == 0).then_some((ctx, set))
}

type SetCurrent = gdrapi_abi::cuda::pfn::cuCtxSetCurrent;

/// Imports the arena into the real CUDA driver on the device with the Vulkan device's UUID;
/// returns its device address. The import lives as long as the process.
fn import_into_cuda(bar: &VkBar, memory: &BarMemory<'_>, size: u64) -> Result<u64, String> {
    let real = libcuda::get().map_err(|e| format!("no real libcuda.so.1 ({e})"))?;
    let uuid = bar.info().uuid;
    let saved = current_context(real);
    let cuda = CUDA
        .get_or_init(|| {
            with_driver(|| Cuda::open_at(&real.path, Some(uuid)))
                .map(CudaDriver)
                .map_err(|e| format!("real CUDA driver {}: {e}", real.path))
        })
        .as_ref()
        .map(|c| &c.0)
        .map_err(Clone::clone)?;
    let result = (|| {
        if cuda.uuid() != Some(uuid) {
            return Err("CUDA has no device with the Vulkan device's UUID".to_string());
        }
        let fd = with_driver(|| memory.export_fd()).map_err(|e| e.to_string())?;
        let imported = with_driver(|| cuda.import(fd, size as usize)).map_err(|e| e.to_string())?;
        let d = imported.device_ptr();
        // The import stays for the life of the process: the device pointers handed out
        // point into it.
        std::mem::forget(imported);
        Ok(d)
    })();
    if let Some((ctx, set)) = saved {
        // SAFETY: the real driver's cuCtxSetCurrent, with the context that was current before
        // set-up (possibly NULL).
        with_driver(|| unsafe { set(ctx) });
    }
    result
}

/// Creates this process's arena of `size` bytes and the GPU that sub-allocates it; with
/// `cuda` its device addresses are those of a real CUDA import, else its CPU addresses.
pub fn create(pid: pid_t, gen: u64, size: u64, cuda: bool) -> Result<Gpu, CUresult> {
    let fail = |why: String| {
        report(&why);
        Err(cu::NO_DEVICE)
    };
    let bar = match device() {
        Ok(b) => b,
        Err(e) => return fail(e),
    };
    if !bar.info().external_fd {
        return fail("the Vulkan device cannot export memory as an fd".to_string());
    }
    let memory = match with_driver(|| bar.allocate(size as usize, true)) {
        Ok(m) => m,
        Err(e) => {
            report(&format!("arena of {size} bytes: {e}"));
            return Err(cu::OUT_OF_MEMORY);
        }
    };
    let base = if cuda {
        match import_into_cuda(bar, &memory, size) {
            Ok(d) => d,
            Err(e) => return fail(e),
        }
    } else {
        memory.as_ptr() as u64
    };
    let mut slot = ARENA.lock();
    if let Some(old) = slot.0.take() {
        // A forked child's copy of its parent's arena: the parent's Vulkan objects are not
        // this process's to free.
        std::mem::forget(old);
    }
    slot.0 = Some(Arena {
        pid,
        bar,
        memory,
        size,
        imports: BTreeMap::new(),
    });
    Ok(Gpu::external(pid, gen, base, size))
}

/// In a forked child: makes the arena's lock new (unlocked, no waiters). The lock is taken only
/// under the state lock, which the fork handlers hold across the fork, so no thread of the
/// parent was inside it at that moment.
pub fn reset_after_fork() {
    // SAFETY: called only by the child's fork handler, in a process of one thread; the arena
    // was consistent at the fork (see above).
    unsafe { forklock::reset_in_child(&ARENA) };
}

/// Whether an arena exists that another process (the parent of this forked child) made.
pub fn inherited() -> bool {
    let me = pid();
    ARENA.lock().0.as_ref().is_some_and(|a| a.pid != me)
}

/// The part of a mapping request the Vulkan backing can honour: no fixed address (Vulkan
/// picks it), and a range inside the arena.
pub fn check_request(size: u64, offset: u64, len: u64, flags: c_int) -> Result<(), c_int> {
    if flags & (libc::MAP_FIXED | libc::MAP_FIXED_NOREPLACE) != 0 || len == 0 {
        return Err(libc::EINVAL);
    }
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(libc::EINVAL),
    }
}

/// Maps `len` bytes of the arena from `offset` for the CPU through a new Vulkan import of it
/// (gdrdrv's mmap of a pin); returns the address. The import lives until [`unmap`].
pub fn map(offset: u64, len: u64, prot: c_int, flags: c_int) -> Result<u64, c_int> {
    let mut slot = ARENA.lock();
    let me = pid();
    let a = slot.0.as_mut().filter(|a| a.pid == me).ok_or(libc::EIO)?;
    check_request(a.size, offset, len, flags)?;
    let fd = with_driver(|| a.memory.export_fd()).map_err(|_| libc::ENOMEM)?;
    let bar = a.bar;
    let m = with_driver(|| bar.import_fd_range(fd, a.size as usize, offset as usize, len as usize))
        .map_err(|_| libc::ENOMEM)?;
    let addr = m.as_ptr() as u64;
    if !addr.is_multiple_of(4096) {
        with_driver(|| drop(m));
        return Err(libc::EINVAL);
    }
    if prot != libc::PROT_READ | libc::PROT_WRITE {
        // SAFETY: [addr, addr+len) is the mapping Vulkan made just above for us.
        if unsafe { libc::mprotect(addr as *mut c_void, len as usize, prot) } != 0 {
            let e = crate::real::errno();
            with_driver(|| drop(m));
            return Err(e);
        }
    }
    a.imports.insert(addr, m);
    Ok(addr)
}

/// Gives up the import mapped at exactly `addr`, if any (which unmaps it), so that the caller
/// can put something else at that address. Returns whether there was one. Used by the zap of
/// an unpinned or invalidated mapping.
pub fn surrender(addr: u64) -> bool {
    // Why not replace the range in place: under the GPU driver's own mapping that left the
    // driver an import whose pages were no longer its, and NVIDIA's driver then killed the
    // process at exit.
    let mut slot = ARENA.lock();
    let me = pid();
    let Some(a) = slot.0.as_mut().filter(|a| a.pid == me) else {
        return false;
    };
    match a.imports.remove(&addr) {
        Some(m) => {
            with_driver(|| drop(m));
            true
        }
        None => false,
    }
}

/// munmap of `[addr, addr + len)`: frees every import mapped there (which unmaps it, zapped or
/// not). Returns whether there was any, i.e. whether the munmap was this backing's.
pub fn unmap(addr: u64, len: u64) -> bool {
    let mut slot = ARENA.lock();
    let me = pid();
    let Some(a) = slot.0.as_mut().filter(|a| a.pid == me) else {
        return false;
    };
    let end = addr.saturating_add(len);
    let hit: Vec<u64> = a
        .imports
        .iter()
        .filter(|(&s, m)| s < end && addr < s + m.len() as u64)
        .map(|(&s, _)| s)
        .collect();
    for s in &hit {
        if let Some(m) = a.imports.remove(s) {
            with_driver(|| drop(m));
        }
    }
    !hit.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_must_fit_the_arena_and_not_be_fixed() {
        assert_eq!(check_request(1 << 20, 0, 1 << 20, libc::MAP_SHARED), Ok(()));
        assert_eq!(
            check_request(1 << 20, 1 << 16, 1 << 20, libc::MAP_SHARED),
            Err(libc::EINVAL)
        );
        assert_eq!(
            check_request(1 << 20, u64::MAX, 2, libc::MAP_SHARED),
            Err(libc::EINVAL)
        );
        assert_eq!(check_request(1 << 20, 0, 0, 0), Err(libc::EINVAL));
        assert_eq!(
            check_request(1 << 20, 0, 4096, libc::MAP_SHARED | libc::MAP_FIXED),
            Err(libc::EINVAL)
        );
    }

    #[test]
    fn unmap_of_nothing_is_not_ours() {
        assert!(!unmap(0x1000, 0x1000));
    }
}
