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

/// Smallest device-bound bulk copy that uses streaming (non-temporal) stores for whole lines.
///
/// On write-combining memory the memory type already makes every store weakly ordered and
/// write-combined, so ordinary and non-temporal stores take the same path (the write-combining
/// buffers) and this choice changes nothing there: through the BAR of an H200 host, ordinary
/// AVX-512 stores gave 17-22 GB/s for 8-128 KiB, as did upstream's streaming AVX-512 kernel. On cacheable memory that a mapping may
/// really be (the emulator, a benchmark), non-temporal stores send every line to DRAM and the
/// closing store fence waits for it: measured on a Xeon, 165 ns for a single 64-byte line and
/// 20 GB/s at 16 KiB (against 4 ns and 230 GB/s with ordinary stores), and still 24 against
/// 31 GB/s at 1 MiB for a buffer copied again and again; from 2 MiB on, streaming stores win
/// (no read-for-ownership): 20.6 against 14 GB/s for `memcpy`.
pub const STREAM_MIN: usize = 2 << 20;

/// A bulk copy `fn(dst, src, n)`; see the module docs for the contract.
pub type Bulk = unsafe fn(*mut u8, *const u8, usize);
