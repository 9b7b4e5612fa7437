//! Portable bulk kernels: 8-byte volatile device accesses, four per iteration.
//!
//! Used where no SIMD set is available or when forced with `GDRAPI_COPY_IMPL=portable`.
//! Every device access is a naturally aligned 8-byte access (the device pointer is 16-aligned).

use core::ptr;

/// Stores `n` bytes (a multiple of 16) to 16-aligned device memory with 8-byte accesses.
///
/// # Safety
/// [`super::Bulk`] contract.
pub unsafe fn store(dst: *mut u8, src: *const u8, n: usize) {
    let (d, s) = (dst.cast::<u64>(), src.cast::<u64>());
    let words = n / 8;
    let mut i = 0;
    // SAFETY: `dst` is 16-aligned device memory of `n` bytes and `src` readable for `n` bytes
    // (caller); `i + k < words` keeps every access inside; the host side may be unaligned.
    unsafe {
        while i + 4 <= words {
            let a = ptr::read_unaligned(s.add(i));
            let b = ptr::read_unaligned(s.add(i + 1));
            let c = ptr::read_unaligned(s.add(i + 2));
            let e = ptr::read_unaligned(s.add(i + 3));
            ptr::write_volatile(d.add(i), a);
            ptr::write_volatile(d.add(i + 1), b);
            ptr::write_volatile(d.add(i + 2), c);
            ptr::write_volatile(d.add(i + 3), e);
            i += 4;
        }
        while i < words {
            ptr::write_volatile(d.add(i), ptr::read_unaligned(s.add(i)));
            i += 1;
        }
    }
}

/// Loads `n` bytes (a multiple of 16) from 16-aligned device memory with 8-byte accesses.
///
/// # Safety
/// [`super::Bulk`] contract with the device on the source side.
pub unsafe fn load(dst: *mut u8, src: *const u8, n: usize) {
    let (d, s) = (dst.cast::<u64>(), src.cast::<u64>());
    let words = n / 8;
    let mut i = 0;
    // SAFETY: as in `store`, with the device range on the source side.
    unsafe {
        while i + 4 <= words {
            let a = ptr::read_volatile(s.add(i));
            let b = ptr::read_volatile(s.add(i + 1));
            let c = ptr::read_volatile(s.add(i + 2));
            let e = ptr::read_volatile(s.add(i + 3));
            ptr::write_unaligned(d.add(i), a);
            ptr::write_unaligned(d.add(i + 1), b);
            ptr::write_unaligned(d.add(i + 2), c);
            ptr::write_unaligned(d.add(i + 3), e);
            i += 4;
        }
        while i < words {
            ptr::write_unaligned(d.add(i), ptr::read_volatile(s.add(i)));
            i += 1;
        }
    }
}
