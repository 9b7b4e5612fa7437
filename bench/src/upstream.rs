//! gdrcopy 2.6's own copy kernels, loaded from a `libgdrapi.so.2.6` built from upstream's
//! sources (given by path; never part of this repository), for side-by-side timings.
//!
//! Upstream exports its x86 kernels (`memcpy_uncached_store_avx2`, `memcpy_uncached_load_sse41`,
//! ...: `int f(void *dst, const void *src, size_t n)`, each wanting the mapping side aligned to
//! its width and `n` a multiple of it). [`Upstream::to_mapping`] and [`Upstream::from_mapping`]
//! drive them the way upstream's write-combining copy does: 16-byte kernel to reach 32-byte
//! alignment, 32-byte kernel to reach 64, a 64-byte kernel (MOVDIR64B, stores only) for the bulk
//! when the CPU has it, then the 32- and 16-byte kernels, then single aligned accesses of at
//! most 8 bytes for what is left, and a store fence.

use crate::Result;
use gdrapi_support::dl::Library;
use std::ffi::{c_int, c_void};

/// An upstream kernel: `int f(void *dst, const void *src, size_t n)`.
pub type Kernel = unsafe extern "C" fn(*mut c_void, *const c_void, usize) -> c_int;

/// The CPU features upstream's selection looks at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuFlags {
    /// SSE4.1 (`movntdqa` loads).
    pub sse41: bool,
    /// AVX2.
    pub avx2: bool,
    /// AVX-512F (upstream compiles kernels for it but does not select them).
    pub avx512f: bool,
    /// MOVDIR64B (64-byte direct stores).
    pub movdir64b: bool,
}

impl CpuFlags {
    /// The flags of this CPU.
    pub fn detect() -> CpuFlags {
        #[cfg(target_arch = "x86_64")]
        {
            // (`__cpuid_count` is safe on newer compilers, unsafe on the oldest supported one.)
            // SAFETY: CPUID leaf 7 subleaf 0 exists on every x86-64 CPU that reports max leaf
            // >= 7; on older ones it returns zeros, which reads as "no MOVDIR64B".
            #[allow(unused_unsafe)]
            let leaf7 = unsafe { std::arch::x86_64::__cpuid_count(7, 0) };
            CpuFlags {
                sse41: std::arch::is_x86_feature_detected!("sse4.1"),
                avx2: std::arch::is_x86_feature_detected!("avx2"),
                avx512f: std::arch::is_x86_feature_detected!("avx512f"),
                movdir64b: leaf7.ecx & (1 << 28) != 0,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        CpuFlags::default()
    }

    /// A short list such as `sse4.1 avx2 movdir64b`.
    pub fn describe(&self) -> String {
        let mut v = Vec::new();
        for (on, n) in [
            (self.sse41, "sse4.1"),
            (self.avx2, "avx2"),
            (self.avx512f, "avx512f"),
            (self.movdir64b, "movdir64b"),
        ] {
            if on {
                v.push(n);
            }
        }
        v.join(" ")
    }
}

/// Upstream's library with the kernels its x86 selection would use on this CPU.
pub struct Upstream {
    lib: Library,
    store16: Option<Kernel>,
    store32: Option<Kernel>,
    store64: Option<Kernel>,
    load16: Option<Kernel>,
    load32: Option<Kernel>,
    names: String,
}

impl Upstream {
    /// Loads the library at `path` and picks kernels for `cpu`: SSE4.1 for 16 bytes, AVX2 for 32,
    /// MOVDIR64B for 64-byte stores (upstream's choices; its AVX-512 kernels are not selected).
    pub fn open(path: &str, cpu: CpuFlags) -> Result<Upstream> {
        let lib = Library::open(path)?;
        let k = |name: &str, on: bool| -> Option<Kernel> {
            if !on {
                return None;
            }
            // SAFETY: upstream declares every memcpy_uncached_* with exactly this signature.
            unsafe { lib.function::<Kernel>(name) }.ok()
        };
        let store16 = k("memcpy_uncached_store_sse41", cpu.sse41);
        let store32 = k("memcpy_uncached_store_avx2", cpu.avx2);
        let store64 = k("memcpy_uncached_store_movdir64b", cpu.movdir64b);
        let load16 = k("memcpy_uncached_load_sse41", cpu.sse41);
        let load32 = k("memcpy_uncached_load_avx2", cpu.avx2);
        let mut names = Vec::new();
        for (k, n) in [
            (store16, "store:sse41"),
            (store32, "store:avx2"),
            (store64, "store:movdir64b"),
            (load16, "load:sse41"),
            (load32, "load:avx2"),
        ] {
            if k.is_some() {
                names.push(n);
            }
        }
        Ok(Upstream {
            lib,
            store16,
            store32,
            store64,
            load16,
            load32,
            names: names.join(" "),
        })
    }

    /// The kernels selected, as `store:avx2 load:sse41 ...`.
    pub fn selected(&self) -> &str {
        &self.names
    }

    /// A kernel by its exported name, for timing it alone.
    pub fn kernel(&self, name: &str) -> Option<Kernel> {
        // SAFETY: as in `open`; callers only pass memcpy_uncached_* names.
        unsafe { self.lib.function::<Kernel>(name) }.ok()
    }

    /// Upstream's write-combining copy to a mapping, then `sfence`.
    ///
    /// # Safety
    /// `dev..dev+n` must be a live mapping and `host..host+n` readable memory.
    pub unsafe fn to_mapping(&self, dev: *mut u8, host: *const u8, n: usize) {
        // SAFETY: forwarded contract.
        unsafe { self.drive(dev, host.cast_mut(), n, true) };
        store_fence();
    }

    /// Upstream's write-combining copy from a mapping, then `sfence`.
    ///
    /// # Safety
    /// `dev..dev+n` must be a live mapping and `host..host+n` writable memory.
    pub unsafe fn from_mapping(&self, host: *mut u8, dev: *const u8, n: usize) {
        // SAFETY: forwarded contract.
        unsafe { self.drive(dev.cast_mut(), host, n, false) };
        store_fence();
    }

    /// The dispatch; `to_dev` says which way bytes move between `dev` and `host`.
    unsafe fn drive(&self, mut dev: *mut u8, mut host: *mut u8, mut n: usize, to_dev: bool) {
        let (k16, k32, k64) = if to_dev {
            (self.store16, self.store32, self.store64)
        } else {
            (self.load16, self.load32, None)
        };
        // SAFETY: every step of the body stays inside `dev..dev+n` / `host..host+n`, which the
        // caller guarantees, and every kernel call meets its alignment and size rules.
        unsafe {
            let head = (dev as usize) & 15;
            if n < 16 {
                scalar(dev, host, n, to_dev);
                return;
            }
            if head != 0 {
                let m = 16 - head;
                scalar(dev, host, m, to_dev);
                (dev, host, n) = (dev.add(m), host.add(m), n - m);
            }
            let run = |k: Option<Kernel>,
                       len: usize,
                       dev: &mut *mut u8,
                       host: &mut *mut u8,
                       n: &mut usize| {
                if let Some(f) = k {
                    if to_dev {
                        f((*dev).cast(), (*host).cast(), len);
                    } else {
                        f((*host).cast(), (*dev).cast(), len);
                    }
                    *dev = dev.add(len);
                    *host = host.add(len);
                    *n -= len;
                }
            };
            if n >= 16 && (dev as usize) % 32 == 16 {
                run(k16, 16, &mut dev, &mut host, &mut n);
            }
            if n >= 32 && (dev as usize) % 64 == 32 {
                run(k32, 32, &mut dev, &mut host, &mut n);
            }
            if n >= 64 && (dev as usize).is_multiple_of(64) {
                run(k64, n & !63, &mut dev, &mut host, &mut n);
            }
            if n >= 32 && (dev as usize).is_multiple_of(32) {
                run(k32, n & !31, &mut dev, &mut host, &mut n);
            }
            if n >= 16 && (dev as usize).is_multiple_of(16) {
                run(k16, n & !15, &mut dev, &mut host, &mut n);
            }
            scalar(dev, host, n, to_dev);
        }
    }
}

/// Copies `n` bytes with single volatile accesses, each as wide as the mapping address's
/// alignment allows (at most 8 bytes) and no wider than what is left.
///
/// # Safety
/// Both ranges must be valid for `n` bytes.
unsafe fn scalar(mut dev: *mut u8, mut host: *mut u8, mut n: usize, to_dev: bool) {
    macro_rules! step {
        ($t:ty) => {{
            let d = dev.cast::<$t>();
            let h = host.cast::<$t>();
            // SAFETY: `d` is aligned for $t (checked by the caller's width choice); the host
            // side may be unaligned, hence the unaligned accesses there.
            unsafe {
                if to_dev {
                    d.write_volatile(h.read_unaligned());
                } else {
                    h.write_unaligned(d.read_volatile());
                }
            }
        }};
    }
    while n > 0 {
        let align = 1usize << (dev as usize).trailing_zeros().min(3);
        let mut w = align;
        while w > n {
            w >>= 1;
        }
        match w {
            8 => step!(u64),
            4 => step!(u32),
            2 => step!(u16),
            _ => step!(u8),
        }
        // SAFETY: `w <= n`, so both pointers stay inside their ranges.
        unsafe {
            dev = dev.add(w);
            host = host.add(w);
        }
        n -= w;
    }
}

/// `sfence` (a full fence elsewhere): drains write-combining buffers.
pub fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no preconditions on x86-64.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_copies_every_length_and_alignment_both_ways() {
        let src: Vec<u8> = (0..96u32).map(|i| (i * 7 + 3) as u8).collect();
        for off in 0..16 {
            for n in 0..40 {
                let mut dev = vec![0u8; 96];
                // SAFETY: off+n <= 56 < 96 on both sides.
                unsafe { scalar(dev.as_mut_ptr().add(off), src.as_ptr().cast_mut(), n, true) };
                assert_eq!(&dev[off..off + n], &src[..n], "to dev off {off} n {n}");
                assert!(dev[..off].iter().chain(&dev[off + n..]).all(|&b| b == 0));
                let mut host = vec![0u8; 96];
                // SAFETY: as above.
                unsafe {
                    scalar(
                        src.as_ptr().add(off).cast_mut(),
                        host.as_mut_ptr(),
                        n,
                        false,
                    )
                };
                assert_eq!(&host[..n], &src[off..off + n], "from dev off {off} n {n}");
                assert!(host[n..].iter().all(|&b| b == 0));
            }
        }
    }

    #[test]
    fn cpu_flags_describe_lists_only_present_features() {
        let f = CpuFlags {
            sse41: true,
            avx2: false,
            avx512f: false,
            movdir64b: true,
        };
        assert_eq!(f.describe(), "sse4.1 movdir64b");
        assert_eq!(CpuFlags::default().describe(), "");
    }
}
