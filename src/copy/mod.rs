//! Copy engine behind `gdr_copy_to_mapping` / `gdr_copy_from_mapping`.
//!
//! What a copy does depends on the mapping type:
//!
//! - **Write-combining** (`GDR_MAPPING_TYPE_WC`): alignment is driven by the device pointer.
//!   Naturally aligned 1/2/4/8-byte accesses up to a 16-byte boundary, then one SIMD kernel
//!   for every whole 16-byte unit (16-byte units up to a 64-byte boundary, then whole 64-byte
//!   lines), then naturally aligned accesses for the rest. Loads are streaming loads
//!   (`MOVNTDQA`); whole lines are stored with streaming stores from
//!   [`kernels::STREAM_MIN`] bytes on and with ordinary stores below, which is the same thing
//!   on write-combining memory and faster for small copies on cached memory (see there), or
//!   with `MOVDIR64B` (see below).
//!   Stores of at most 64 bytes, loads below 16 bytes, with the AVX2 and AVX-512
//!   families loads of at most 1023 bytes (16- and 32-byte streaming loads), and, where the
//!   stores below 8 KiB are `MOVDIR64B`, stores of at most 1 KiB are done inline, without any
//!   indirect call.
//! - **Device** (`GDR_MAPPING_TYPE_DEVICE`): naturally aligned device accesses, never wider
//!   than 8 bytes, in both directions.
//! - **Caching** (and anything else): plain `memcpy`.
//!
//! # Fences (see [`fence`])
//!
//! After every non-empty copy: a full fence when mappings of more than one type are live in
//! the process (counted through [`mapping_created`] and [`mapping_destroyed`]); otherwise, for
//! write-combining mappings, a store fence, in both directions, as upstream. With
//! `GDRAPI_READ_FENCE=1` a load fence precedes it after reads, so that later reads (of a flag,
//! of the next buffer) cannot be satisfied before this copy's weakly ordered reads (see
//! [`fence`] for why it is not the default). An empty copy does nothing, not even a fence.
//!
//! # Kernel choice
//!
//! The write-combining kernels are chosen once per process, on the first copy, from what the
//! CPU offers ([`Impl::auto_store`]: AVX-512, else AVX2, SSE4.1, NEON, portable;
//! [`Impl::auto_load`]: the AVX-512 family, whose loads use AVX2 below 1 KiB, else AVX2,
//! SSE4.1, NEON, portable; PERFORMANCE.md has the figures behind both), and installed in a
//! table of two atomic function pointers: later calls pay one load and one indirect call, no
//! feature test and no lock.
//!
//! Where the CPU also has `MOVDIR64B`, stores of 65 bytes to less than 8 KiB use it, as
//! upstream's do, and larger ones, where it is faster through some hosts' BARs and slower
//! through others', are timed: in each size class (a factor of 4 wide), the first copies
//! alternate between the AVX-512 (or AVX2) kernel and `MOVDIR64B`, and the class then keeps the
//! faster ([`trial`]; a DEBUG log line gives each verdict). Trial copies are real copies; only
//! their speed differs.
//!
//! The environment variable **`GDRAPI_COPY_IMPL`** forces one family, for experiments and
//! benchmarks, with no timing: `portable`, `sse41`, `avx2`, `avx512`, `movdir64b` (stores;
//! loads then use the automatic choice) or `neon`; `auto` or an empty value means the
//! automatic choice. A value
//! that is unknown or that this CPU cannot run falls back to the automatic choice with a WARN
//! log line (visible with `GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=3`). The variable is read
//! once. It does not affect the inline path for stores of at most 64 bytes; the inline
//! `MOVDIR64B` path applies with `movdir64b` only.
//!
//! [`Engine`] gives the same copies with a family chosen by the caller (tests, benchmarks).

mod access;
pub mod fence;
pub mod kernels;
mod select;
mod trial;
mod wc;

#[cfg(test)]
mod tests;

pub use select::{chosen, log_cpu_flags, Impl, Kernels, ENV};
pub use wc::CopyFn;

use crate::backend::MappingType;
pub(crate) use access::{Direction, FromMapping, ToMapping};

// The public functions of this module that reach the copy engine's statics (the fence
// counters, the chosen kernels) are out of line: were one inlinable, the statics would be
// visible to other crates, and in the shared object every access to them, each copy's
// included, would go through the GOT. The library's own copies call [`copy`].

/// Records that a mapping of `kind` now exists (drives the mixed-mapping fence), and makes
/// the process-wide kernel choice if it is not made yet.
#[inline(never)]
pub fn mapping_created(kind: MappingType) {
    created(kind);
}

/// Records that a mapping of `kind` is gone; extra calls never take a count below zero.
#[inline(never)]
pub fn mapping_destroyed(kind: MappingType) {
    destroyed(kind);
}

/// [`mapping_created`] for the library's own calls. Not public, so that it stays internal to
/// the shared object and its callers reach it without the GOT.
#[inline(never)]
pub(crate) fn created(kind: MappingType) {
    fence::created(kind);
    if kind == MappingType::WriteCombining {
        select::prepare();
    }
}

/// [`mapping_destroyed`] for the library's own calls (see [`created`]).
#[inline(never)]
pub(crate) fn destroyed(kind: MappingType) {
    fence::destroyed(kind);
}

/// Copies `n` bytes from host memory to a mapping of type `kind`, then fences.
///
/// # Safety
/// `dev..dev+n` must lie in a live mapping and `host..host+n` must be readable.
#[inline(never)]
pub unsafe fn to_mapping(kind: MappingType, dev: *mut u8, host: *const u8, n: usize) {
    // SAFETY: forwarded caller contract; the host range is only read.
    unsafe { copy::<ToMapping>(kind, dev, host.cast_mut(), n) }
}

/// Copies `n` bytes from a mapping of type `kind` to host memory, then fences.
///
/// # Safety
/// `dev..dev+n` must lie in a live mapping and `host..host+n` must be writable.
#[inline(never)]
pub unsafe fn from_mapping(kind: MappingType, host: *mut u8, dev: *const u8, n: usize) {
    // SAFETY: forwarded caller contract; the device range is only read.
    unsafe { copy::<FromMapping>(kind, dev.cast_mut(), host, n) }
}

/// [`to_mapping`] (`D` is [`ToMapping`]) or [`from_mapping`], inline: the library's C entries
/// call it directly.
///
/// # Safety
/// `[dev, +n)` lies inside a live mapping of type `kind`; `[host, +n)` is host memory valid
/// for `D`'s access (read for [`ToMapping`], write for [`FromMapping`]).
#[inline(always)]
pub(crate) unsafe fn copy<D: Direction>(kind: MappingType, dev: *mut u8, host: *mut u8, n: usize) {
    // SAFETY: the caller's contract; `select::store_fn` and `select::load_fn` hold kernels
    // this CPU runs.
    unsafe {
        if D::TO_DEVICE {
            to_mapping_via(
                select::store_fn,
                select::inline_direct_stores,
                kind,
                dev,
                host,
                n,
            )
        } else {
            from_mapping_via(select::load_fn, select::inline_loads, kind, host, dev, n)
        }
    }
}

/// The device-bound copy; `store` gives the write-combining copy, asked only when no inline
/// path applies, and `direct` whether the inline `MOVDIR64B` path may be used (asked only for
/// its sizes).
#[inline(always)]
unsafe fn to_mapping_via(
    store: impl FnOnce() -> CopyFn,
    direct: impl FnOnce() -> bool,
    kind: MappingType,
    dev: *mut u8,
    host: *const u8,
    n: usize,
) {
    if n == 0 {
        return;
    }
    // SAFETY: the caller guarantees both ranges; they cannot overlap (one is a device mapping,
    // the other host memory). `store` is a supported write-combining copy; `direct` is true
    // only where the CPU has MOVDIR64B.
    unsafe {
        // Tested first and apart: the common case costs a compare, not a jump table.
        if kind == MappingType::WriteCombining {
            if n <= wc::SMALL {
                wc::store_small(dev, host, n)
            } else if n <= wc::DIRECT_MAX && direct() {
                wc::store_direct(dev, host, n)
            } else {
                store()(dev, host.cast_mut(), n)
            }
            fence::after_store(MappingType::WriteCombining);
            return;
        }
        match kind {
            MappingType::Device => access::device::<ToMapping>(dev, host.cast_mut(), n),
            _ => core::ptr::copy_nonoverlapping(host, dev, n),
        }
    }
    fence::after_store(kind);
}

/// The host-bound copy; `load` gives the write-combining copy, `inline` says whether the
/// streaming-load path without the table may be used for small sizes (both asked only when
/// needed).
#[inline(always)]
unsafe fn from_mapping_via(
    load: impl FnOnce() -> CopyFn,
    inline: impl FnOnce() -> bool,
    kind: MappingType,
    host: *mut u8,
    dev: *const u8,
    n: usize,
) {
    if n == 0 {
        return;
    }
    // SAFETY: as in `to_mapping_via`.
    unsafe {
        if kind == MappingType::WriteCombining {
            if n < 16 {
                wc::load_small(host, dev, n)
            } else if n <= wc::SMALL_LOAD && inline() {
                wc::load_streaming(host, dev, n)
            } else {
                load()(dev.cast_mut(), host, n)
            }
            fence::after_load(MappingType::WriteCombining);
            return;
        }
        match kind {
            MappingType::Device => access::device::<FromMapping>(dev.cast_mut(), host, n),
            _ => core::ptr::copy_nonoverlapping(dev, host, n),
        }
    }
    fence::after_load(kind);
}

/// The copy engine with a caller-chosen kernel family: the same paths and fences as
/// [`to_mapping`] / [`from_mapping`], without the process-wide table.
#[derive(Debug, Clone, Copy)]
pub struct Engine {
    kernels: Kernels,
}

impl Engine {
    /// The engine for `imp`, or `None` when this CPU cannot run it.
    pub fn new(imp: Impl) -> Option<Engine> {
        imp.kernels().map(|kernels| Engine { kernels })
    }

    /// The engine the process-wide table uses.
    #[inline(never)]
    pub fn chosen() -> Engine {
        Engine { kernels: *chosen() }
    }

    /// Which families this engine runs.
    pub fn kernels(&self) -> &Kernels {
        &self.kernels
    }

    /// As [`to_mapping`], with this engine's kernels.
    ///
    /// # Safety
    /// As [`to_mapping`].
    #[inline(never)]
    pub unsafe fn to_mapping(&self, kind: MappingType, dev: *mut u8, host: *const u8, n: usize) {
        let direct = || self.kernels.inline_direct_stores();
        // SAFETY: forwarded; the kernels were checked supported in `Engine::new`, and `direct`
        // holds only for a family whose stores are MOVDIR64B, which the CPU then has.
        unsafe { to_mapping_via(|| self.kernels.store, direct, kind, dev, host, n) }
    }

    /// As [`from_mapping`], with this engine's kernels.
    ///
    /// # Safety
    /// As [`from_mapping`].
    #[inline(never)]
    pub unsafe fn from_mapping(&self, kind: MappingType, host: *mut u8, dev: *const u8, n: usize) {
        let inline = || self.kernels.load_impl.inline_loads();
        // SAFETY: as in `to_mapping`; `inline` only where the load family is AVX2 or wider.
        unsafe { from_mapping_via(|| self.kernels.load, inline, kind, host, dev, n) }
    }
}
