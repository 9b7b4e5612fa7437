//! Copy engine: `gdr_copy_to_mapping` / `gdr_copy_from_mapping` kernels, chosen once per
//! process from the CPU's features, plus the fences the memory model needs.
//!
//! (Placeholder implementation: a plain copy and a full fence. Replaced by the tuned engine.)

use crate::backend::MappingType;
use std::sync::atomic::{fence, AtomicUsize, Ordering};

static LIVE: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

/// Records that a mapping of `kind` now exists (drives the mixed-mapping fence).
pub fn mapping_created(kind: MappingType) {
    LIVE[kind as usize].fetch_add(1, Ordering::Relaxed);
}

/// Records that a mapping of `kind` is gone.
pub fn mapping_destroyed(kind: MappingType) {
    let _ = LIVE[kind as usize].fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1));
}

/// Copies `n` bytes from host memory to a mapping of type `kind`, then fences.
///
/// # Safety
/// `dev..dev+n` must lie in a live mapping and `host..host+n` must be readable.
pub unsafe fn to_mapping(_kind: MappingType, dev: *mut u8, host: *const u8, n: usize) {
    // SAFETY: the caller guarantees both ranges are valid and they cannot overlap
    // (one is a device mapping, the other host memory).
    unsafe { std::ptr::copy_nonoverlapping(host, dev, n) };
    fence(Ordering::SeqCst);
}

/// Copies `n` bytes from a mapping of type `kind` to host memory, then fences.
///
/// # Safety
/// `dev..dev+n` must lie in a live mapping and `host..host+n` must be writable.
pub unsafe fn from_mapping(_kind: MappingType, host: *mut u8, dev: *const u8, n: usize) {
    // SAFETY: as in `to_mapping`.
    unsafe { std::ptr::copy_nonoverlapping(dev, host, n) };
    fence(Ordering::SeqCst);
}
