//! x86-64 bulk kernels for the write-combining path.
//!
//! Every kernel has the [`super::Bulk`] contract: the device pointer is 16-byte aligned and `n`
//! is a multiple of 16. Each one walks 16-byte units until the device pointer is 64-byte
//! aligned, then whole 64-byte lines, then the last 16-byte units, so every device access is
//! naturally aligned and a line is written or read by as few instructions as the ISA allows.
//! Host-side accesses may be unaligned. None of them fences; the caller does.
//!
//! Loads are always streaming loads. Stores of whole lines are streaming (non-temporal) stores
//! when the copy is at least [`STREAM_MIN`] bytes, ordinary aligned stores otherwise (except
//! [`store_movdir64b`]'s, which are always direct stores); the
//! 16-byte units of partial lines are always ordinary aligned stores. See [`STREAM_MIN`] for
//! why this costs nothing on write-combining memory.

use core::arch::asm;
use core::arch::x86_64::*;

use super::STREAM_MIN;

/// Streams the 16-byte units of `[dst, dst + n)` while `dst` is not `align`-aligned (or all
/// of them when `all`), returning the advanced pointers and the remaining length.
macro_rules! units16 {
    ($d:ident, $s:ident, $n:ident, $cond:expr, $body:block) => {
        while $n >= 16 && $cond {
            $body
            $d = $d.add(16);
            $s = $s.add(16);
            $n -= 16;
        }
    };
}

/// `VMOVNTDQA xmm`: a 16-byte streaming load, VEX-encoded. Inside AVX kernels this replaces
/// `_mm_stream_load_si128`, which always emits the legacy-SSE `MOVNTDQA` and would then pay an
/// SSE/AVX transition on every use while the upper ymm/zmm halves are dirty.
///
/// # Safety
/// `p` must be 16-byte aligned and readable for 16 bytes; the CPU must support AVX.
#[inline(always)]
unsafe fn vstream_load16(p: *const u8) -> __m128i {
    let r: __m128i;
    // SAFETY: the caller guarantees an aligned, readable 16-byte range; the instruction only
    // reads memory and writes the output register.
    unsafe {
        asm!(
            "vmovntdqa {r}, xmmword ptr [{p}]",
            r = out(xmm_reg) r,
            p = in(reg) p,
            options(nostack, preserves_flags, readonly),
        )
    };
    r
}

/// `MOVNTDQA xmm` from `p + OFF`: `_mm_stream_load_si128`, whose core::arch version is
/// inline assembly that takes the address in a register, costs an `LEA` for each load at an
/// offset; here the offset is the instruction's displacement. Legacy SSE, as the SSE4.1
/// kernel must be.
///
/// # Safety
/// `p + OFF` must be 16-byte aligned and readable for 16 bytes; the CPU must support SSE4.1.
#[target_feature(enable = "sse4.1")]
#[inline]
unsafe fn stream_load16<const OFF: usize>(p: *const u8) -> __m128i {
    let r: __m128i;
    // SAFETY: the caller guarantees an aligned, readable range; the instruction only reads
    // memory and writes the output register.
    unsafe {
        asm!(
            "movntdqa {r}, xmmword ptr [{p} + {off}]",
            r = out(xmm_reg) r,
            p = in(reg) p,
            off = const OFF,
            options(nostack, preserves_flags, readonly),
        )
    };
    r
}

/// `VMOVNTDQA ymm` from `p + OFF`, with the offset as the displacement (see
/// [`stream_load16`]).
///
/// # Safety
/// `p + OFF` must be 32-byte aligned and readable for 32 bytes; the CPU must support AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn vstream_load32<const OFF: usize>(p: *const u8) -> __m256i {
    let r: __m256i;
    // SAFETY: as in `stream_load16`.
    unsafe {
        asm!(
            "vmovntdqa {r}, ymmword ptr [{p} + {off}]",
            r = out(ymm_reg) r,
            p = in(reg) p,
            off = const OFF,
            options(nostack, preserves_flags, readonly),
        )
    };
    r
}

/// `VMOVNTDQA zmm` from `p + OFF`, with the offset as the displacement (see
/// [`stream_load16`]).
///
/// # Safety
/// `p + OFF` must be 64-byte aligned and readable for 64 bytes; the CPU must support AVX-512F.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn vstream_load64<const OFF: usize>(p: *const u8) -> __m512i {
    let r: __m512i;
    // SAFETY: as in `stream_load16`.
    unsafe {
        asm!(
            "vmovntdqa {r}, zmmword ptr [{p} + {off}]",
            r = out(zmm_reg) r,
            p = in(reg) p,
            off = const OFF,
            options(nostack, preserves_flags, readonly),
        )
    };
    r
}

/// SSE4.1 stores (`MOVNTDQ`, 4 per line).
///
/// # Safety
/// [`super::Bulk`] contract; the CPU must support SSE4.1.
#[target_feature(enable = "sse4.1")]
pub unsafe fn store_sse41(dst: *mut u8, src: *const u8, n: usize) {
    let (mut d, mut s, mut n) = (dst, src, n);
    // SAFETY: (whole body) the caller guarantees `dst..dst+n` is device memory aligned to 16
    // with `n % 16 == 0` and `src..src+n` readable; every access stays inside those ranges.
    unsafe {
        units16!(d, s, n, (d as usize) & 63 != 0, {
            _mm_store_si128(d.cast(), _mm_loadu_si128(s.cast()));
        });
        let stream = n >= STREAM_MIN;
        while n >= 64 {
            let a = _mm_loadu_si128(s.cast());
            let b = _mm_loadu_si128(s.add(16).cast());
            let c = _mm_loadu_si128(s.add(32).cast());
            let e = _mm_loadu_si128(s.add(48).cast());
            if stream {
                _mm_stream_si128(d.cast(), a);
                _mm_stream_si128(d.add(16).cast(), b);
                _mm_stream_si128(d.add(32).cast(), c);
                _mm_stream_si128(d.add(48).cast(), e);
            } else {
                _mm_store_si128(d.cast(), a);
                _mm_store_si128(d.add(16).cast(), b);
                _mm_store_si128(d.add(32).cast(), c);
                _mm_store_si128(d.add(48).cast(), e);
            }
            d = d.add(64);
            s = s.add(64);
            n -= 64;
        }
        units16!(d, s, n, true, {
            _mm_store_si128(d.cast(), _mm_loadu_si128(s.cast()));
        });
    }
}

/// SSE4.1 streaming loads (`MOVNTDQA`, 4 per line) into host memory.
///
/// # Safety
/// [`super::Bulk`] contract with the device on the source side; the CPU must support SSE4.1.
#[target_feature(enable = "sse4.1")]
pub unsafe fn load_sse41(dst: *mut u8, src: *const u8, n: usize) {
    let (mut d, mut s, mut n) = (dst, src, n);
    // SAFETY: (whole body) as in `store_sse41`, with the device range `src..src+n`.
    unsafe {
        units16!(d, s, n, (s as usize) & 63 != 0, {
            _mm_storeu_si128(d.cast(), stream_load16::<0>(s));
        });
        while n >= 64 {
            let a = stream_load16::<0>(s);
            let b = stream_load16::<16>(s);
            let c = stream_load16::<32>(s);
            let e = stream_load16::<48>(s);
            _mm_storeu_si128(d.cast(), a);
            _mm_storeu_si128(d.add(16).cast(), b);
            _mm_storeu_si128(d.add(32).cast(), c);
            _mm_storeu_si128(d.add(48).cast(), e);
            d = d.add(64);
            s = s.add(64);
            n -= 64;
        }
        units16!(d, s, n, true, {
            _mm_storeu_si128(d.cast(), stream_load16::<0>(s));
        });
    }
}

/// AVX2 stores (`VMOVNTDQ` ymm, 2 per line; 16-byte units at the edges).
///
/// # Safety
/// [`super::Bulk`] contract; the CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub unsafe fn store_avx2(dst: *mut u8, src: *const u8, n: usize) {
    let (mut d, mut s, mut n) = (dst, src, n);
    // SAFETY: (whole body) as in `store_sse41`.
    unsafe {
        units16!(d, s, n, (d as usize) & 63 != 0, {
            _mm_store_si128(d.cast(), _mm_loadu_si128(s.cast()));
        });
        let stream = n >= STREAM_MIN;
        while n >= 128 {
            let a = _mm256_loadu_si256(s.cast());
            let b = _mm256_loadu_si256(s.add(32).cast());
            let c = _mm256_loadu_si256(s.add(64).cast());
            let e = _mm256_loadu_si256(s.add(96).cast());
            if stream {
                _mm256_stream_si256(d.cast(), a);
                _mm256_stream_si256(d.add(32).cast(), b);
                _mm256_stream_si256(d.add(64).cast(), c);
                _mm256_stream_si256(d.add(96).cast(), e);
            } else {
                _mm256_store_si256(d.cast(), a);
                _mm256_store_si256(d.add(32).cast(), b);
                _mm256_store_si256(d.add(64).cast(), c);
                _mm256_store_si256(d.add(96).cast(), e);
            }
            d = d.add(128);
            s = s.add(128);
            n -= 128;
        }
        if n >= 64 {
            let a = _mm256_loadu_si256(s.cast());
            let b = _mm256_loadu_si256(s.add(32).cast());
            if stream {
                _mm256_stream_si256(d.cast(), a);
                _mm256_stream_si256(d.add(32).cast(), b);
            } else {
                _mm256_store_si256(d.cast(), a);
                _mm256_store_si256(d.add(32).cast(), b);
            }
            d = d.add(64);
            s = s.add(64);
            n -= 64;
        }
        units16!(d, s, n, true, {
            _mm_store_si128(d.cast(), _mm_loadu_si128(s.cast()));
        });
    }
}

/// AVX2 streaming loads (`VMOVNTDQA` ymm, 2 per line; 16-byte units at the edges).
///
/// # Safety
/// [`super::Bulk`] contract with the device on the source side; the CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub unsafe fn load_avx2(dst: *mut u8, src: *const u8, n: usize) {
    let (mut d, mut s, mut n) = (dst, src, n);
    // SAFETY: (whole body) as in `load_sse41`.
    unsafe {
        units16!(d, s, n, (s as usize) & 63 != 0, {
            _mm_storeu_si128(d.cast(), vstream_load16(s));
        });
        while n >= 128 {
            let a = vstream_load32::<0>(s);
            let b = vstream_load32::<32>(s);
            let c = vstream_load32::<64>(s);
            let e = vstream_load32::<96>(s);
            _mm256_storeu_si256(d.cast(), a);
            _mm256_storeu_si256(d.add(32).cast(), b);
            _mm256_storeu_si256(d.add(64).cast(), c);
            _mm256_storeu_si256(d.add(96).cast(), e);
            d = d.add(128);
            s = s.add(128);
            n -= 128;
        }
        if n >= 64 {
            let a = vstream_load32::<0>(s);
            let b = vstream_load32::<32>(s);
            _mm256_storeu_si256(d.cast(), a);
            _mm256_storeu_si256(d.add(32).cast(), b);
            d = d.add(64);
            s = s.add(64);
            n -= 64;
        }
        units16!(d, s, n, true, {
            _mm_storeu_si128(d.cast(), vstream_load16(s));
        });
    }
}

/// AVX-512 stores (`VMOVNTDQ` zmm, one per line; 16-byte units at the edges).
///
/// # Safety
/// [`super::Bulk`] contract; the CPU must support AVX-512F.
#[target_feature(enable = "avx512f")]
pub unsafe fn store_avx512(dst: *mut u8, src: *const u8, n: usize) {
    let (mut d, mut s, mut n) = (dst, src, n);
    // SAFETY: (whole body) as in `store_sse41`.
    unsafe {
        units16!(d, s, n, (d as usize) & 63 != 0, {
            _mm_store_si128(d.cast(), _mm_loadu_si128(s.cast()));
        });
        let stream = n >= STREAM_MIN;
        while n >= 256 {
            let a = _mm512_loadu_si512(s.cast());
            let b = _mm512_loadu_si512(s.add(64).cast());
            let c = _mm512_loadu_si512(s.add(128).cast());
            let e = _mm512_loadu_si512(s.add(192).cast());
            if stream {
                _mm512_stream_si512(d.cast(), a);
                _mm512_stream_si512(d.add(64).cast(), b);
                _mm512_stream_si512(d.add(128).cast(), c);
                _mm512_stream_si512(d.add(192).cast(), e);
            } else {
                _mm512_store_si512(d.cast(), a);
                _mm512_store_si512(d.add(64).cast(), b);
                _mm512_store_si512(d.add(128).cast(), c);
                _mm512_store_si512(d.add(192).cast(), e);
            }
            d = d.add(256);
            s = s.add(256);
            n -= 256;
        }
        while n >= 64 {
            let a = _mm512_loadu_si512(s.cast());
            if stream {
                _mm512_stream_si512(d.cast(), a);
            } else {
                _mm512_store_si512(d.cast(), a);
            }
            d = d.add(64);
            s = s.add(64);
            n -= 64;
        }
        units16!(d, s, n, true, {
            _mm_store_si128(d.cast(), _mm_loadu_si128(s.cast()));
        });
    }
}

/// Loads of fewer bytes than this use AVX2 in [`load_avx512_split`].
pub const LOAD_ZMM_MIN: usize = 1024;

/// The AVX-512 family's loads: [`load_avx2`] below [`LOAD_ZMM_MIN`] bytes, `VMOVNTDQA zmm`
/// ([`load_avx512`]) from there on: through a GPU BAR, small zmm streaming loads are slower
/// than ymm ones and large ones faster (figures in PERFORMANCE.md).
///
/// # Safety
/// [`super::Bulk`] contract with the device on the source side; the CPU must support AVX-512F
/// (which implies AVX2).
#[target_feature(enable = "avx2,avx512f")]
pub unsafe fn load_avx512_split(dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY: forwarded contract; this CPU runs both kernels.
    unsafe {
        if n < LOAD_ZMM_MIN {
            load_avx2(dst, src, n)
        } else {
            load_avx512(dst, src, n)
        }
    }
}

/// AVX-512 streaming loads (`VMOVNTDQA` zmm, one per line; 16-byte units at the edges).
///
/// # Safety
/// [`super::Bulk`] contract with the device on the source side; the CPU must support AVX-512F.
#[target_feature(enable = "avx512f")]
pub unsafe fn load_avx512(dst: *mut u8, src: *const u8, n: usize) {
    let (mut d, mut s, mut n) = (dst, src, n);
    // SAFETY: (whole body) as in `load_sse41`.
    unsafe {
        units16!(d, s, n, (s as usize) & 63 != 0, {
            _mm_storeu_si128(d.cast(), vstream_load16(s));
        });
        while n >= 256 {
            let a = vstream_load64::<0>(s);
            let b = vstream_load64::<64>(s);
            let c = vstream_load64::<128>(s);
            let e = vstream_load64::<192>(s);
            _mm512_storeu_si512(d.cast(), a);
            _mm512_storeu_si512(d.add(64).cast(), b);
            _mm512_storeu_si512(d.add(128).cast(), c);
            _mm512_storeu_si512(d.add(192).cast(), e);
            d = d.add(256);
            s = s.add(256);
            n -= 256;
        }
        while n >= 64 {
            _mm512_storeu_si512(d.cast(), vstream_load64::<0>(s));
            d = d.add(64);
            s = s.add(64);
            n -= 64;
        }
        units16!(d, s, n, true, {
            _mm_storeu_si128(d.cast(), vstream_load16(s));
        });
    }
}

/// One `MOVDIR64B`: the 64 bytes at `s + OFF` to the line at `d + OFF`, with `OFF` the
/// instruction's displacement on the source.
///
/// # Safety
/// `d + OFF` 64-byte aligned and writable for 64 bytes, `s + OFF` readable for 64 bytes (any
/// alignment); the CPU must support MOVDIR64B.
#[inline(always)]
unsafe fn movdir64b<const OFF: usize>(d: *mut u8, s: *const u8) {
    // SAFETY: the caller's contract; the instruction writes only that line and reads only
    // those 64 bytes.
    unsafe {
        asm!(
            "movdir64b {d}, zmmword ptr [{s} + {off}]",
            d = in(reg) d.add(OFF),
            s = in(reg) s,
            off = const OFF,
            options(nostack, preserves_flags),
        )
    };
}

/// `MOVDIR64B` stores: one 64-byte direct store per line, at every size, four lines per loop
/// turn while four remain, as upstream's `MOVDIR64B` kernel does; ordinary 16-byte stores for
/// the partial lines.
///
/// # Safety
/// [`super::Bulk`] contract; the CPU must support MOVDIR64B (CPUID.7.0:ECX bit 28) and AVX2.
#[target_feature(enable = "avx2")]
pub unsafe fn store_movdir64b(dst: *mut u8, src: *const u8, n: usize) {
    let (mut d, mut s, mut n) = (dst, src, n);
    // SAFETY: (whole body) as in `store_sse41`. After the 16-byte units `d` is 64-byte
    // aligned, and every line stored lies inside the `n` bytes left, as `movdir64b` requires.
    unsafe {
        units16!(d, s, n, (d as usize) & 63 != 0, {
            _mm_store_si128(d.cast(), _mm_loadu_si128(s.cast()));
        });
        while n >= 256 {
            movdir64b::<0>(d, s);
            movdir64b::<64>(d, s);
            movdir64b::<128>(d, s);
            movdir64b::<192>(d, s);
            d = d.add(256);
            s = s.add(256);
            n -= 256;
        }
        while n >= 64 {
            movdir64b::<0>(d, s);
            d = d.add(64);
            s = s.add(64);
            n -= 64;
        }
        units16!(d, s, n, true, {
            _mm_store_si128(d.cast(), _mm_loadu_si128(s.cast()));
        });
    }
}

/// One `MOVDIR64B` of the 64 bytes at `s` to the line at `d`: the inline store path's line
/// ([`super::super::wc::store_direct`]).
///
/// # Safety
/// `d` 64-byte aligned and writable for 64 bytes, `s` readable for 64 bytes; the CPU must
/// support MOVDIR64B.
#[inline(always)]
pub(crate) unsafe fn direct_line(d: *mut u8, s: *const u8) {
    // SAFETY: the caller's contract.
    unsafe { movdir64b::<0>(d, s) }
}

/// True when the CPU has `MOVDIR64B` (CPUID leaf 7, subleaf 0, ECX bit 28). The instruction
/// needs no operating-system state, so CPUID alone decides.
pub fn has_movdir64b() -> bool {
    // SAFETY: CPUID is available on every x86-64 CPU; leaf 0 gives the highest leaf so that
    // leaf 7 is only read where it exists. (`unsafe` for toolchains where CPUID is not safe.)
    #[allow(unused_unsafe)]
    unsafe {
        if __cpuid(0).eax < 7 {
            return false;
        }
        __cpuid_count(7, 0).ecx & (1 << 28) != 0
    }
}

/// CPUID facts that `is_x86_feature_detected!` does not give, for upstream's DEBUG line.
pub struct CpuFlags {
    /// The vendor string is `GenuineIntel`.
    pub vendor_intel: bool,
    /// CPUID leaf 7 ECX bit 28.
    pub movdir64b: bool,
    /// CPUID leaf 7 ECX bit 27.
    pub movdiri: bool,
}

/// Reads [`CpuFlags`] with CPUID.
pub fn cpu_flags() -> CpuFlags {
    // SAFETY: CPUID is available on every x86-64 CPU; leaf 0 gives the vendor and the highest
    // leaf, so leaf 7 is only read where it exists. (`unsafe` for toolchains where CPUID is
    // not safe.)
    #[allow(unused_unsafe)]
    unsafe {
        let l0 = __cpuid(0);
        let mut vendor = [0u8; 12];
        vendor[..4].copy_from_slice(&l0.ebx.to_le_bytes());
        vendor[4..8].copy_from_slice(&l0.edx.to_le_bytes());
        vendor[8..].copy_from_slice(&l0.ecx.to_le_bytes());
        let ecx7 = if l0.eax >= 7 {
            __cpuid_count(7, 0).ecx
        } else {
            0
        };
        CpuFlags {
            vendor_intel: &vendor == b"GenuineIntel",
            movdir64b: ecx7 & (1 << 28) != 0,
            movdiri: ecx7 & (1 << 27) != 0,
        }
    }
}
