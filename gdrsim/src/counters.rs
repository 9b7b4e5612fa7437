//! The ioctl counter shared by a process and its forked children (a shared anonymous page
//! made when the library is loaded), and the `gdrsim_get_counters` snapshot type.

use crate::real;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// `struct gdrsim_counters` of `gdrsim.h`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Pinned regions of files this process opened (invalidated ones included until unpinned).
    pub live_pins: u64,
    /// CPU mappings of the emulated device that this process has not munmapped.
    pub live_mappings: u64,
    /// Live `cuMemAlloc` allocations plus unreleased `cuMemCreate` handles of this process.
    pub live_allocations: u64,
    /// Emulated device files this process opened and the driver has not released.
    pub open_files: u64,
    /// Every ioctl that reached the emulated driver, from this process or any process forked
    /// from it after the library was loaded.
    pub ioctls: u64,
    /// dma-buf fds from `cuMemGetHandleForAddressRange` not yet closed.
    pub live_dmabufs: u64,
    /// Export fds from `cuMemExportToShareableHandle` not yet closed or imported.
    pub live_vmm_exports: u64,
    /// Memory objects of the Vulkan stand-in (imports) not yet freed.
    pub live_vk_imports: u64,
    /// `vkMapMemory` mappings of the stand-in not yet unmapped.
    pub live_vk_mappings: u64,
    /// `VkDevice`s of the stand-in not yet destroyed.
    pub live_vk_devices: u64,
    /// `VkInstance`s of the stand-in not yet destroyed.
    pub live_vk_instances: u64,
    /// Imports (`vkAllocateMemory` of an export fd) this process has made since it started,
    /// freed or not: a running total.
    pub vk_imports_made: u64,
    /// Bytes the live imports of this process hold, each import counted at its allocation's
    /// size (two imports of one allocation count twice).
    pub live_vk_import_bytes: u64,
    /// Calls of this process that a `GDRSIM_FAIL` rule failed (or made panic), counted
    /// since it started: a caller that reads it around a call knows whether a rule fired.
    pub injected_faults: u64,
}

static FALLBACK: AtomicU64 = AtomicU64::new(0);
static SHARED: AtomicPtr<AtomicU64> = AtomicPtr::new(std::ptr::null_mut());

/// Creates the shared page; called from the library constructor, before any fork.
pub fn init() {
    if !SHARED.load(Ordering::Acquire).is_null() {
        return;
    }
    // SAFETY: a fresh shared anonymous page chosen by the kernel overlaps nothing.
    let p = unsafe {
        real::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p != libc::MAP_FAILED {
        SHARED.store(p.cast(), Ordering::Release);
    }
}

fn cell() -> &'static AtomicU64 {
    let p = SHARED.load(Ordering::Acquire);
    if p.is_null() {
        &FALLBACK
    } else {
        // SAFETY: p points to a zero-filled shared page that is never unmapped; AtomicU64 is
        // valid for any bit pattern and the page is 8-byte aligned.
        unsafe { &*p }
    }
}

/// Counts one ioctl that reached the emulated driver.
pub fn count_ioctl() {
    cell().fetch_add(1, Ordering::Relaxed);
}

/// The ioctl count so far.
pub fn ioctls() -> u64 {
    cell().load(Ordering::Relaxed)
}
