//! Hints for the hot paths: branch layout and cache prefetch.

/// Marks the path that calls it as rarely taken, so that the compiler lays the common path
/// out as one straight run of code: `std::hint::cold_path` on compilers that have it (Rust
/// 1.95), nothing on older ones.
#[inline(always)]
pub fn cold_path() {
    #[cfg(has_cold_path)]
    #[allow(clippy::incompatible_msrv)]
    std::hint::cold_path();
}

/// Starts bringing the cache line at `addr` into the CPU's caches, so that a later access
/// (a locked one in particular, which later loads wait for) finds it there. Any address is
/// allowed: a prefetch reads nothing the program can observe and never faults.
#[inline(always)]
pub fn prefetch(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is a hint: it does not fault on any address and changes no state
    // the program can observe.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(addr as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}
