//! aarch64 NEON bulk kernels: `LD1`/`ST1` of four q registers per 64-byte line, single q
//! registers for the 16-byte units before the device pointer is 64-byte aligned and after
//! the last whole line. Every device access is 16-byte aligned.

use core::arch::aarch64::*;

/// NEON stores to 16-aligned device memory.
///
/// # Safety
/// [`super::Bulk`] contract; NEON is part of the aarch64 baseline.
#[target_feature(enable = "neon")]
pub unsafe fn store(dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY: the caller's contract is `lines`' with the device on the destination side.
    unsafe { lines::<true>(dst, src, n) }
}

/// NEON loads from 16-aligned device memory.
///
/// # Safety
/// [`super::Bulk`] contract with the device on the source side.
#[target_feature(enable = "neon")]
pub unsafe fn load(dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY: the caller's contract is `lines`' with the device on the source side.
    unsafe { lines::<false>(dst, src, n) }
}

/// Both kernels: 16-byte units until the device pointer (`dst` when `DEVICE_DST`, else `src`)
/// is 64-byte aligned, then whole 64-byte lines, then 16-byte units.
///
/// # Safety
/// [`super::Bulk`] contract, with the device pointer on the side `DEVICE_DST` names.
#[inline(always)]
unsafe fn lines<const DEVICE_DST: bool>(dst: *mut u8, src: *const u8, n: usize) {
    let (mut d, mut s, mut n) = (dst, src, n);
    let device = |d: *mut u8, s: *const u8| if DEVICE_DST { d as usize } else { s as usize };
    // SAFETY: the caller guarantees `dst..dst+n` and `src..src+n` (the device side 16-aligned,
    // n % 16 == 0); every access below stays inside them.
    unsafe {
        while n >= 16 && device(d, s) & 63 != 0 {
            vst1q_u8(d, vld1q_u8(s));
            d = d.add(16);
            s = s.add(16);
            n -= 16;
        }
        while n >= 64 {
            vst1q_u8_x4(d, vld1q_u8_x4(s));
            d = d.add(64);
            s = s.add(64);
            n -= 64;
        }
        while n >= 16 {
            vst1q_u8(d, vld1q_u8(s));
            d = d.add(16);
            s = s.add(16);
            n -= 16;
        }
    }
}
