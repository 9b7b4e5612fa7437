//! The copy methods `barbench` compares, behind one trait: this project's copy engine, glibc
//! `memcpy` with a store fence, upstream's copy as its write-combining path drives its kernels,
//! and one upstream kernel alone.

use crate::upstream::{store_fence, Kernel, Upstream};
use gdrapi::backend::MappingType;

/// A way of copying between host memory and a write-combining BAR mapping; each call ends
/// with whatever fence the method issues (every method here fences).
#[allow(clippy::wrong_self_convention)] // `from_mapping` mirrors `gdrapi::copy::from_mapping`
pub trait Copier {
    /// Short name for tables.
    fn name(&self) -> String;

    /// Whether the method handles `n` bytes at a mapping address `dev` in this direction.
    fn supports(&self, to_mapping: bool, dev: usize, n: usize) -> bool {
        let _ = (to_mapping, dev, n);
        true
    }

    /// Copies `n` bytes from `host` to the mapping at `dev`.
    ///
    /// # Safety
    /// `dev..dev+n` must be inside a live mapping, `host..host+n` readable, and
    /// [`Copier::supports`] true for the arguments.
    unsafe fn to_mapping(&self, dev: *mut u8, host: *const u8, n: usize);

    /// Copies `n` bytes from the mapping at `dev` to `host`.
    ///
    /// # Safety
    /// As [`Copier::to_mapping`], with `host..host+n` writable.
    unsafe fn from_mapping(&self, host: *mut u8, dev: *const u8, n: usize);
}

/// This project's copy engine (`gdrapi::copy`) on a write-combining mapping.
pub struct Engine {
    label: String,
}

impl Engine {
    /// The engine, labelled `label` in tables; registers one live write-combining mapping with
    /// the engine (as the library does when it maps), which lasts until the value is dropped.
    pub fn new(label: &str) -> Engine {
        gdrapi::copy::mapping_created(MappingType::WriteCombining);
        Engine {
            label: label.to_owned(),
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        gdrapi::copy::mapping_destroyed(MappingType::WriteCombining);
    }
}

impl Copier for Engine {
    fn name(&self) -> String {
        self.label.clone()
    }
    unsafe fn to_mapping(&self, dev: *mut u8, host: *const u8, n: usize) {
        // SAFETY: forwarded contract (valid, disjoint ranges).
        unsafe { gdrapi::copy::to_mapping(MappingType::WriteCombining, dev, host, n) }
    }
    unsafe fn from_mapping(&self, host: *mut u8, dev: *const u8, n: usize) {
        // SAFETY: forwarded contract.
        unsafe { gdrapi::copy::from_mapping(MappingType::WriteCombining, host, dev, n) }
    }
}

/// glibc `memcpy`, then `sfence`.
pub struct Memcpy;

impl Copier for Memcpy {
    fn name(&self) -> String {
        "memcpy".into()
    }
    unsafe fn to_mapping(&self, dev: *mut u8, host: *const u8, n: usize) {
        // SAFETY: forwarded contract; the ranges are disjoint (mapping vs host memory).
        unsafe { libc::memcpy(dev.cast(), host.cast(), n) };
        store_fence();
    }
    unsafe fn from_mapping(&self, host: *mut u8, dev: *const u8, n: usize) {
        // SAFETY: as above.
        unsafe { libc::memcpy(host.cast(), dev.cast(), n) };
        store_fence();
    }
}

/// Upstream 2.6's write-combining copy ([`Upstream::to_mapping`]).
pub struct UpstreamCopy<'a>(pub &'a Upstream);

impl Copier for UpstreamCopy<'_> {
    fn name(&self) -> String {
        "upstream".into()
    }
    unsafe fn to_mapping(&self, dev: *mut u8, host: *const u8, n: usize) {
        // SAFETY: forwarded contract.
        unsafe { self.0.to_mapping(dev, host, n) }
    }
    unsafe fn from_mapping(&self, host: *mut u8, dev: *const u8, n: usize) {
        // SAFETY: forwarded contract.
        unsafe { self.0.from_mapping(host, dev, n) }
    }
}

/// One upstream kernel alone (then `sfence`): one direction, mapping side aligned to `width`,
/// sizes a non-zero multiple of `width`.
pub struct RawKernel {
    /// Table name, such as `up:avx2`.
    pub label: String,
    /// The kernel.
    pub kernel: Kernel,
    /// Its access width in bytes (16, 32 or 64).
    pub width: usize,
    /// True for a store kernel (to the mapping), false for a load kernel.
    pub store: bool,
}

impl Copier for RawKernel {
    fn name(&self) -> String {
        self.label.clone()
    }
    fn supports(&self, to_mapping: bool, dev: usize, n: usize) -> bool {
        to_mapping == self.store
            && n >= self.width
            && n.is_multiple_of(self.width)
            && dev.is_multiple_of(self.width)
    }
    unsafe fn to_mapping(&self, dev: *mut u8, host: *const u8, n: usize) {
        // SAFETY: forwarded contract; `supports` guarantees the kernel's preconditions.
        unsafe { (self.kernel)(dev.cast(), host.cast(), n) };
        store_fence();
    }
    unsafe fn from_mapping(&self, host: *mut u8, dev: *const u8, n: usize) {
        // SAFETY: as above.
        unsafe { (self.kernel)(host.cast(), dev.cast(), n) };
        store_fence();
    }
}

/// Another method followed by `lfence` after each copy from the mapping (copies to the mapping
/// are not offered): the same work, but no later load may start before the copy's loads have
/// completed, as with this project's engine under `GDRAPI_READ_FENCE=1`.
pub struct LoadFenced<C>(pub C);

impl<C: Copier> Copier for LoadFenced<C> {
    fn name(&self) -> String {
        format!("{}+lfence", self.0.name())
    }
    fn supports(&self, to_mapping: bool, dev: usize, n: usize) -> bool {
        !to_mapping && self.0.supports(false, dev, n)
    }
    unsafe fn to_mapping(&self, dev: *mut u8, host: *const u8, n: usize) {
        // SAFETY: forwarded contract.
        unsafe { self.0.to_mapping(dev, host, n) }
    }
    unsafe fn from_mapping(&self, host: *mut u8, dev: *const u8, n: usize) {
        // SAFETY: forwarded contract.
        unsafe { self.0.from_mapping(host, dev, n) };
        #[cfg(target_arch = "x86_64")]
        // SAFETY: LFENCE has no preconditions.
        unsafe {
            std::arch::x86_64::_mm_lfence()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_fenced_copies_from_the_mapping_only() {
        let c = LoadFenced(Memcpy);
        assert_eq!(c.name(), "memcpy+lfence");
        assert!(!c.supports(true, 0, 64));
        assert!(c.supports(false, 0, 64));
        let src: Vec<u8> = (0..100u8).collect();
        let mut dst = vec![0u8; 100];
        // SAFETY: both vectors hold 100 bytes.
        unsafe { c.from_mapping(dst.as_mut_ptr(), src.as_ptr(), 100) };
        assert_eq!(dst, src);
    }

    #[test]
    fn raw_kernels_only_take_their_direction_alignment_and_width() {
        unsafe extern "C" fn k(
            _: *mut std::ffi::c_void,
            _: *const std::ffi::c_void,
            _: usize,
        ) -> std::ffi::c_int {
            0
        }
        let r = RawKernel {
            label: "k".into(),
            kernel: k,
            width: 32,
            store: true,
        };
        assert!(r.supports(true, 64, 96));
        assert!(!r.supports(false, 64, 96));
        assert!(!r.supports(true, 16, 96));
        assert!(!r.supports(true, 64, 48));
        assert!(!r.supports(true, 64, 0));
    }
}
