//! The write-combining path, alignment driven by the device pointer (as upstream, section 7.3
//! of the library facts): naturally aligned 1/2/4/8-byte accesses up to the first 16-byte
//! boundary, one bulk kernel call for all whole 16-byte units (the kernel itself climbs to
//! 64-byte alignment and then works a line at a time), naturally aligned accesses for the last
//! `< 16` bytes. Copies below 16 bytes are scalar accesses only.
//!
//! Stores of at most [`SMALL`] bytes take an inline path with 16-byte SSE2/NEON stores and no
//! indirect call at all; so do loads below 16 bytes (scalar accesses only: 16-byte streaming
//! loads need SSE4.1, which only the dispatch table may assume).

use super::access::{head, tail, Cursor, Dir, FromDev, ToDev};
use super::kernels::Bulk;

/// Largest store handled inline, without going through the dispatch table.
pub(crate) const SMALL: usize = 64;

/// A complete write-combining copy in one direction, `fn(dev, host, n)`; what the dispatch
/// table holds.
pub type CopyFn = unsafe fn(*mut u8, *mut u8, usize);

/// The whole write-combining copy with bulk kernel `k`.
///
/// # Safety
/// `dev..dev+n` device memory and `host..host+n` host memory, valid for the direction `D`;
/// `k` must be a [`Bulk`] kernel the CPU can run, for the direction `D`.
#[inline(always)]
pub(crate) unsafe fn copy<D: Dir>(k: Bulk, dev: *mut u8, host: *mut u8, n: usize) {
    let mut c = Cursor { dev, host, n };
    // SAFETY: `head` leaves the device cursor 16-aligned when `n >= 16` (it needs at most 15
    // bytes); the kernel gets a 16-aligned device pointer and a multiple of 16; `tail` gets
    // the `< 16` rest on a 16-aligned cursor, or everything after an early-stopping `head`.
    unsafe {
        head::<D, true>(&mut c);
        if c.n >= 16 {
            let m = c.n & !15;
            D::bulk(k, c.dev, c.host, m);
            c.advance(m);
        }
        tail::<D>(&mut c);
    }
}

/// One 16-byte aligned device store for the inline small path.
///
/// # Safety
/// `dev` 16-aligned and writable for 16 bytes, `host` readable for 16 bytes.
#[inline(always)]
unsafe fn store16(dev: *mut u8, host: *const u8) {
    super::access::trace::record(dev, 16, false);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: caller contract; SSE2 is part of the x86-64 baseline, and a volatile `__m128i`
    // store is one `MOVDQA`, which neither splits nor merges.
    unsafe {
        use core::arch::x86_64::{__m128i, _mm_loadu_si128};
        core::ptr::write_volatile(dev.cast::<__m128i>(), _mm_loadu_si128(host.cast()));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: caller contract; NEON is part of the aarch64 baseline; one q-register store.
    unsafe {
        use core::arch::aarch64::{uint8x16_t, vld1q_u8};
        core::ptr::write_volatile(dev.cast::<uint8x16_t>(), vld1q_u8(host));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    // SAFETY: caller contract; two aligned 8-byte volatile stores.
    unsafe {
        let h = host.cast::<u64>();
        core::ptr::write_volatile(dev.cast::<u64>(), core::ptr::read_unaligned(h));
        core::ptr::write_volatile(
            dev.cast::<u64>().add(1),
            core::ptr::read_unaligned(h.add(1)),
        );
    }
}

/// Inline store path for `n <= SMALL`: scalar head, aligned 16-byte stores, scalar tail.
///
/// # Safety
/// As for [`copy`] with `D = ToDev`, and `n <= SMALL`.
#[inline(always)]
pub(crate) unsafe fn store_small(dev: *mut u8, host: *const u8, n: usize) {
    debug_assert!(n <= SMALL);
    let mut c = Cursor {
        dev,
        host: host.cast_mut(),
        n,
    };
    // SAFETY: as in `copy`; the 16-byte stores run on a 16-aligned device cursor.
    unsafe {
        if n < 16 && dev as usize & 7 == 0 {
            // See `load_small`: the tail alone makes the same accesses.
            tail::<ToDev>(&mut c);
            return;
        }
        head::<ToDev, true>(&mut c);
        // At most four 16-byte units: straight-line code, no loop.
        if c.n >= 32 {
            store16(c.dev, c.host);
            store16(c.dev.add(16), c.host.add(16));
            c.advance(32);
            if c.n >= 32 {
                store16(c.dev, c.host);
                store16(c.dev.add(16), c.host.add(16));
                c.advance(32);
            }
        }
        if c.n >= 16 {
            store16(c.dev, c.host);
            c.advance(16);
        }
        tail::<ToDev>(&mut c);
    }
}

/// Inline load path for `n < 16`: naturally aligned scalar accesses only, exactly what
/// [`copy`] does for such sizes, without the indirect call.
///
/// # Safety
/// As for [`copy`] with `D = FromDev`, and `n < 16`.
#[inline(always)]
pub(crate) unsafe fn load_small(host: *mut u8, dev: *const u8, n: usize) {
    debug_assert!(n < 16);
    let mut c = Cursor {
        dev: dev.cast_mut(),
        host,
        n,
    };
    // SAFETY: as in `copy`; with `n < 16` no bulk kernel is needed.
    unsafe {
        if dev as usize & 7 == 0 {
            // An 8-aligned device pointer: the head would take at most one 8-byte unit, which
            // is what the tail takes first, so the tail alone makes the same accesses (the
            // common aligned case, with four fewer tests).
            tail::<FromDev>(&mut c);
            return;
        }
        head::<FromDev, true>(&mut c);
        tail::<FromDev>(&mut c);
    }
}

/// An instruction set's pair of bulk kernels.
pub(crate) trait Isa {
    /// Device-bound kernel.
    const STORE: Bulk;
    /// Host-bound kernel.
    const LOAD: Bulk;
}

/// The complete device-bound copy for `I` (a [`CopyFn`]); the kernel call is direct.
///
/// # Safety
/// As for [`copy`]; the CPU must support `I`.
pub(crate) unsafe fn store<I: Isa>(dev: *mut u8, host: *mut u8, n: usize) {
    // SAFETY: forwarded.
    unsafe { copy::<ToDev>(I::STORE, dev, host, n) }
}

/// The complete host-bound copy for `I` (a [`CopyFn`]).
///
/// # Safety
/// As for [`copy`]; the CPU must support `I`.
pub(crate) unsafe fn load<I: Isa>(dev: *mut u8, host: *mut u8, n: usize) {
    // SAFETY: forwarded.
    unsafe { copy::<FromDev>(I::LOAD, dev, host, n) }
}
