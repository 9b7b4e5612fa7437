//! The write-combining path, alignment driven by the device pointer as upstream's: naturally
//! aligned 1/2/4/8-byte accesses up to the first 16-byte boundary, one bulk kernel call for
//! all whole 16-byte units (the kernel itself climbs to 64-byte alignment and then works a
//! line at a time), naturally aligned accesses for the last `< 16` bytes. Copies below 16 bytes are scalar accesses only.
//!
//! Stores of at most [`SMALL`] bytes take an inline path with 16-byte SSE2/NEON stores and no
//! indirect call at all; so do loads below 16 bytes (scalar accesses only), and, when the
//! chosen load family is AVX2 or wider, loads of at most [`SMALL_LOAD`] bytes
//! ([`load_streaming`]: 16- and 32-byte VEX streaming loads written as inline assembly, which
//! the compiler needs no target feature for; the caller's flag is what proves the CPU has
//! them), inline below [`CALLED_LOAD`] bytes and through a direct call from there. Where the
//! chosen stores are `MOVDIR64B`, stores above [`SMALL`] up to [`DIRECT_MAX`] bytes make the
//! same accesses inline too ([`store_direct`]).

use super::access::{head, tail, Cursor, Direction, FromMapping, ToMapping};
use super::kernels::Bulk;

/// Largest store handled inline, without going through the dispatch table.
pub(crate) const SMALL: usize = 64;

/// Largest store handled by [`store_direct`], without going through the dispatch table.
pub(crate) const DIRECT_MAX: usize = 1024;

/// Largest load handled by [`load_streaming`], without going through the table: just below
/// the size where the AVX-512 family switches to `VMOVNTDQA zmm`.
pub(crate) const SMALL_LOAD: usize = 1023;

/// Smallest load that [`load_streaming`] makes in a function of its own ([`load_called`])
/// rather than inline in the entry: one whole line.
pub(crate) const CALLED_LOAD: usize = 64;

/// A complete write-combining copy in one direction, `fn(dev, host, n)`; what the dispatch
/// table holds.
pub type CopyFn = unsafe fn(*mut u8, *mut u8, usize);

/// The whole write-combining copy with bulk kernel `k`.
///
/// # Safety
/// `dev..dev+n` device memory and `host..host+n` host memory, valid for the direction `D`;
/// `k` must be a [`Bulk`] kernel the CPU can run, for the direction `D`.
#[inline(always)]
pub(crate) unsafe fn copy<D: Direction>(k: Bulk, dev: *mut u8, host: *mut u8, n: usize) {
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
/// As for [`copy`] with `D = ToMapping`, and `n <= SMALL`.
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
            tail::<ToMapping>(&mut c);
            return;
        }
        head::<ToMapping, true>(&mut c);
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
        tail::<ToMapping>(&mut c);
    }
}

/// Inline store path for `SMALL < n <= DIRECT_MAX` where the chosen stores are `MOVDIR64B`:
/// the accesses of [`copy`] with the `MOVDIR64B` kernel (scalar head, 16-byte stores up to a
/// line, one `MOVDIR64B` per whole line, 16-byte stores, scalar tail), with no call.
///
/// # Safety
/// As for [`copy`] with `D = ToMapping`; the CPU must support MOVDIR64B (the caller's flag,
/// set only for such stores, proves it).
#[inline(always)]
pub(crate) unsafe fn store_direct(dev: *mut u8, host: *const u8, n: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: forwarded; `direct_line` gets what `store_lines` promises its `line`.
    unsafe {
        store_lines(dev, host, n, |d, s| {
            super::access::trace::record(d, 64, false);
            super::kernels::x86::direct_line(d, s)
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: forwarded; elsewhere the flag is never set, and this is the portable copy.
    unsafe {
        copy::<ToMapping>(super::kernels::portable::store, dev, host.cast_mut(), n)
    }
}

/// [`store_direct`]'s walk with `line` storing each whole line: `line(d, s)` gets a 64-aligned
/// device address with 64 bytes left to store and their source.
///
/// # Safety
/// As for [`copy`] with `D = ToMapping`; `line` stores exactly the 64 bytes it is given.
#[cfg(any(target_arch = "x86_64", test))]
#[inline(always)]
pub(super) unsafe fn store_lines(
    dev: *mut u8,
    host: *const u8,
    n: usize,
    line: impl Fn(*mut u8, *const u8),
) {
    let mut c = Cursor {
        dev,
        host: host.cast_mut(),
        n,
    };
    // SAFETY: as in `copy`: after `head` the device cursor is 16-aligned (or `n < 16`); the
    // 16-byte stores climb to a line boundary, and each line lies inside the `n` bytes left.
    unsafe {
        head::<ToMapping, true>(&mut c);
        while c.dev as usize & 63 != 0 && c.n >= 16 {
            store16(c.dev, c.host);
            c.advance(16);
        }
        while c.n >= 64 {
            line(c.dev, c.host);
            c.advance(64);
        }
        while c.n >= 16 {
            store16(c.dev, c.host);
            c.advance(16);
        }
        tail::<ToMapping>(&mut c);
    }
}

/// Inline load path for `n < 16`: naturally aligned scalar accesses only, exactly what
/// [`copy`] does for such sizes, without the indirect call.
///
/// # Safety
/// As for [`copy`] with `D = FromMapping`, and `n < 16`.
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
            tail::<FromMapping>(&mut c);
            return;
        }
        head::<FromMapping, true>(&mut c);
        tail::<FromMapping>(&mut c);
    }
}

/// One `VMOVNTDQA` streaming load of `N` (16 or 32) bytes from the device and a `VMOVDQU`
/// store of them to the host.
///
/// # Safety
/// `dev` aligned to `N` and readable for `N` bytes, `host` writable for `N` bytes; the CPU
/// must support AVX (16) or AVX2 (32). After a 32-byte one the caller must run
/// [`vzeroupper`] before returning to code that may use legacy SSE instructions.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn stream_load<const N: usize>(host: *mut u8, dev: *const u8) {
    super::access::trace::record(dev.cast_mut(), N, false);
    // SAFETY: caller contract. Both instructions are VEX-encoded and touch only the two
    // ranges and the scratch register.
    unsafe {
        if N == 32 {
            // ymm0 is named literally: code compiled without AVX cannot name a ymm register
            // class, and the xmm0 clobber covers the register as far as that code can see.
            core::arch::asm!(
                "vmovntdqa ymm0, ymmword ptr [{s}]",
                "vmovdqu ymmword ptr [{d}], ymm0",
                s = in(reg) dev,
                d = in(reg) host,
                out("xmm0") _,
                options(nostack, preserves_flags),
            )
        } else {
            core::arch::asm!(
                "vmovntdqa {t}, xmmword ptr [{s}]",
                "vmovdqu xmmword ptr [{d}], {t}",
                s = in(reg) dev,
                d = in(reg) host,
                t = out(xmm_reg) _,
                options(nostack, preserves_flags),
            )
        }
    };
}

/// Four 32-byte streaming loads from the device, then four stores to the host: 128 bytes
/// with the loads of two whole lines in flight together.
///
/// # Safety
/// `dev` 32-aligned and readable for 128 bytes, `host` writable for 128 bytes; the CPU must
/// support AVX2, and the caller must run [`vzeroupper`] afterwards.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn stream_load128(host: *mut u8, dev: *const u8) {
    super::access::trace::record(dev.cast_mut(), 32, false);
    super::access::trace::record(dev.cast_mut().wrapping_add(32), 32, false);
    super::access::trace::record(dev.cast_mut().wrapping_add(64), 32, false);
    super::access::trace::record(dev.cast_mut().wrapping_add(96), 32, false);
    // SAFETY: caller contract; registers named literally as in `stream_load`.
    unsafe {
        core::arch::asm!(
            "vmovntdqa ymm0, ymmword ptr [{s}]",
            "vmovntdqa ymm1, ymmword ptr [{s} + 32]",
            "vmovntdqa ymm2, ymmword ptr [{s} + 64]",
            "vmovntdqa ymm3, ymmword ptr [{s} + 96]",
            "vmovdqu ymmword ptr [{d}], ymm0",
            "vmovdqu ymmword ptr [{d} + 32], ymm1",
            "vmovdqu ymmword ptr [{d} + 64], ymm2",
            "vmovdqu ymmword ptr [{d} + 96], ymm3",
            s = in(reg) dev,
            d = in(reg) host,
            out("xmm0") _,
            out("xmm1") _,
            out("xmm2") _,
            out("xmm3") _,
            options(nostack, preserves_flags),
        )
    };
}

/// `VZEROUPPER`: clears the upper halves of the vector registers after 256-bit code, so that
/// later legacy SSE code pays no transition.
///
/// # Safety
/// The CPU must support AVX. No live value may be held in a ymm register's upper half (true
/// in code compiled without AVX, which cannot hold one).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn vzeroupper() {
    // SAFETY: caller contract.
    unsafe { core::arch::asm!("vzeroupper", options(nostack, preserves_flags, nomem)) };
}

/// The streaming-load path for `16 <= n <= SMALL_LOAD`, without the table: below
/// [`CALLED_LOAD`] bytes inline ([`load_inline`]), from there the same accesses through a
/// direct call ([`load_called`]). Over the BAR, back-to-back reads of whole lines ran as
/// gdrcopy's only with the call (PERFORMANCE.md, "Why the copy engine is as it is").
///
/// # Safety
/// As for [`load_inline`].
#[inline(always)]
pub(crate) unsafe fn load_streaming(host: *mut u8, dev: *const u8, n: usize) {
    // SAFETY: forwarded.
    unsafe {
        if n < CALLED_LOAD {
            load_inline(host, dev, n)
        } else {
            load_called(host, dev, n)
        }
    }
}

/// [`load_inline`] in a function of its own (see [`load_streaming`]).
///
/// # Safety
/// As for [`load_inline`].
#[inline(never)]
unsafe fn load_called(host: *mut u8, dev: *const u8, n: usize) {
    // SAFETY: forwarded.
    unsafe { load_inline(host, dev, n) }
}

/// Inline load path for `16 <= n <= SMALL_LOAD`: scalar head up to 16-byte alignment, one
/// 16-byte streaming load up to 32-byte alignment, 32-byte streaming loads (four at a time
/// while 128 bytes remain), then one 16-byte
/// load and the scalar tail. Every device access is naturally aligned, as in [`copy`], and
/// the loads of one line are issued back to back, so on write-combining memory they share one
/// line fill as the kernels' do.
///
/// # Safety
/// As for [`copy`] with `D = FromMapping`, `n <= SMALL_LOAD`, and the CPU must support AVX2 (the
/// caller's flag, set only for the AVX2 and AVX-512 families, proves it).
#[inline(always)]
pub(crate) unsafe fn load_inline(host: *mut u8, dev: *const u8, n: usize) {
    debug_assert!(n <= SMALL_LOAD);
    #[cfg(target_arch = "x86_64")]
    {
        let mut c = Cursor {
            dev: dev.cast_mut(),
            host,
            n,
        };
        // SAFETY: as in `copy`: after `head` the device cursor is 16-aligned (or `n < 16`),
        // after the optional 16-byte load it is 32-aligned, and every load fits in `n`.
        unsafe {
            head::<FromMapping, true>(&mut c);
            if c.n >= 16 && c.dev as usize & 16 != 0 {
                stream_load::<16>(c.host, c.dev);
                c.advance(16);
            }
            if c.n >= 32 {
                while c.n >= 128 {
                    stream_load128(c.host, c.dev);
                    c.advance(128);
                }
                while c.n >= 32 {
                    stream_load::<32>(c.host, c.dev);
                    c.advance(32);
                }
                vzeroupper();
            }
            if c.n >= 16 {
                stream_load::<16>(c.host, c.dev);
                c.advance(16);
            }
            tail::<FromMapping>(&mut c);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: forwarded; elsewhere the flag is never set, and this is the portable copy.
    unsafe {
        copy::<FromMapping>(super::kernels::portable::load, dev.cast_mut(), host, n)
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
    unsafe { copy::<ToMapping>(I::STORE, dev, host, n) }
}

/// The complete host-bound copy for `I` (a [`CopyFn`]).
///
/// # Safety
/// As for [`copy`]; the CPU must support `I`.
pub(crate) unsafe fn load<I: Isa>(dev: *mut u8, host: *mut u8, n: usize) {
    // SAFETY: forwarded.
    unsafe { copy::<FromMapping>(I::LOAD, dev, host, n) }
}
