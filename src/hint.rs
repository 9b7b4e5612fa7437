//! Hints for the hot paths: branch layout.

/// Marks the path that calls it as rarely taken, so that the compiler lays the common path
/// out as one straight run of code: `std::hint::cold_path` on compilers that have it (Rust
/// 1.95), nothing on older ones.
#[inline(always)]
pub fn cold_path() {
    #[cfg(has_cold_path)]
    #[allow(clippy::incompatible_msrv)]
    std::hint::cold_path();
}
