//! Bulk kernels of the write-combining path, one pair (store, load) per instruction set.
//!
//! A kernel is a [`Bulk`] function. Both directions share its contract: the **device** pointer
//! (the destination of a store, the source of a load) is 16-byte aligned and `n` is a multiple
//! of 16 (possibly 0). The head and tail bytes around that are the caller's (`super::wc`).

pub mod portable;

#[cfg(target_arch = "x86_64")]
pub mod x86;

#[cfg(target_arch = "aarch64")]
pub mod neon;

/// Smallest device-bound bulk copy that uses streaming (non-temporal) stores for whole lines;
/// smaller ones use ordinary stores. On write-combining memory both kinds take the same path.
/// On cacheable memory that a mapping may really be (the emulator, a benchmark), ordinary
/// stores are faster for small copies, but a large copy made with them leaves its lines dirty
/// in the cache, and later copies pay for their write-back (figures in PERFORMANCE.md).
pub const STREAM_MIN: usize = 1 << 20;

/// A bulk copy `fn(dst, src, n)`; see the module docs for the contract.
pub type Bulk = unsafe fn(*mut u8, *const u8, usize);
