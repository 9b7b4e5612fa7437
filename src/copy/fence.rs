//! Fences after a copy, and the live-mapping counters that decide which one.
//!
//! Rules (upstream's, plus one load fence): when mappings of more than one type are live in
//! the process, every non-empty copy ends with a full fence (`MFENCE` / `DMB SY`). Otherwise a
//! copy to a write-combining mapping ends with a store fence (`SFENCE` / `DMB ST`) that drains
//! the write-combining buffers, and a copy *from* one ends with `LFENCE; SFENCE` on x86
//! (`DMB SY` on aarch64): reads of write-combining memory are weakly ordered and may be
//! speculative, so without the load fence a later read (of a flag, of the next buffer) could
//! be satisfied before this copy's reads. Upstream only issues the store fence there; ours is
//! a superset. Caching and device mappings get no fence unless mappings are mixed.
//!
//! # Why `LFENCE` and not something cheaper
//!
//! The guarantee after a copy from a write-combining mapping: a later read sees data no older
//! than the bytes just copied. Streaming loads (`MOVNTDQA`) from write-combining memory are
//! weakly ordered, so something must order them before later loads. Candidates, each timed
//! as the extra cost over a load and a store in a loop on a Xeon (ordinary memory, best of 5):
//! `SFENCE` +0.1 ns (orders stores only: no help), `LFENCE` +3.8 ns, `LFENCE; SFENCE` +3.8 ns
//! (the store fence is free once the load fence has drained the pipeline), a locked
//! read-modify-write of the stack +4.3 ns (and the ordering of weakly ordered loads by locked
//! instructions is less plainly documented than `LFENCE`'s), `MFENCE` +10.8 ns. `LFENCE`
//! is the cheapest instruction that gives the guarantee, so it stays. In the library
//! benchmark on the emulator (ordinary memory) it is the whole remaining gap for small reads:
//! a 1-byte `gdr_copy_from_mapping` took 14.7 ns with it and 6.1 ns without (upstream, which
//! issues only `SFENCE`, 4.8 ns). Through a GPU BAR the load latency (about 1 us) dominates
//! and the fence was within noise.

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::backend::MappingType;

/// Live mappings per type and whether more than one type is live.
struct Counters {
    live: Mutex<[usize; 4]>,
    mixed: AtomicBool,
}

impl Counters {
    const fn new() -> Counters {
        Counters {
            live: Mutex::new([0; 4]),
            mixed: AtomicBool::new(false),
        }
    }

    fn update(&self, kind: MappingType, f: impl FnOnce(usize) -> usize) {
        let mut live = self.live.lock();
        let slot = &mut live[kind as usize];
        *slot = f(*slot);
        let types = live.iter().filter(|&&c| c > 0).count();
        self.mixed.store(types > 1, Ordering::Release);
    }

    fn created(&self, kind: MappingType) {
        self.update(kind, |c| c.saturating_add(1));
    }

    fn destroyed(&self, kind: MappingType) {
        self.update(kind, |c| c.saturating_sub(1));
    }

    #[inline(always)]
    fn mixed(&self) -> bool {
        self.mixed.load(Ordering::Acquire)
    }
}

static COUNTERS: Counters = Counters::new();

/// Counts one more live mapping of `kind`.
pub(crate) fn created(kind: MappingType) {
    COUNTERS.created(kind);
}

/// Counts one live mapping of `kind` less (never below zero).
pub(crate) fn destroyed(kind: MappingType) {
    COUNTERS.destroyed(kind);
}

/// True when live mappings of more than one type exist.
#[inline(always)]
pub fn mixed() -> bool {
    COUNTERS.mixed()
}

/// The fence after a device-bound copy to a mapping of `kind`.
#[inline(always)]
pub(crate) fn after_store(kind: MappingType) {
    if mixed() {
        full();
    } else if kind == MappingType::WriteCombining {
        store();
    }
}

/// The fence after a host-bound copy from a mapping of `kind`.
#[inline(always)]
pub(crate) fn after_load(kind: MappingType) {
    if mixed() {
        full();
    } else if kind == MappingType::WriteCombining {
        load();
    }
}

/// Full fence: all earlier loads and stores, including weakly ordered ones, before any later.
#[inline(always)]
pub fn full() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: MFENCE has no operands and no preconditions (SSE2 is baseline on x86-64).
    unsafe {
        core::arch::x86_64::_mm_mfence()
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: a barrier instruction; touches no registers or memory besides ordering.
    unsafe {
        core::arch::asm!("dmb sy", options(nostack, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    std::sync::atomic::fence(Ordering::SeqCst);
}

/// Store fence: drains write-combining buffers and orders earlier stores before later ones.
#[inline(always)]
pub fn store() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SFENCE has no operands and no preconditions.
    unsafe {
        core::arch::x86_64::_mm_sfence()
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: a barrier instruction.
    unsafe {
        core::arch::asm!("dmb st", options(nostack, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    std::sync::atomic::fence(Ordering::SeqCst);
}

/// Load fence after reading write-combining memory (plus upstream's store fence).
#[inline(always)]
pub fn load() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: LFENCE and SFENCE have no operands and no preconditions.
    unsafe {
        core::arch::x86_64::_mm_lfence();
        core::arch::x86_64::_mm_sfence();
    };
    #[cfg(not(target_arch = "x86_64"))]
    full();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_follows_live_types() {
        let c = Counters::new();
        assert!(!c.mixed());
        c.created(MappingType::WriteCombining);
        c.created(MappingType::WriteCombining);
        assert!(!c.mixed());
        c.created(MappingType::Caching);
        assert!(c.mixed());
        c.destroyed(MappingType::WriteCombining);
        assert!(c.mixed());
        c.destroyed(MappingType::WriteCombining);
        assert!(!c.mixed());
        c.destroyed(MappingType::WriteCombining); // an extra destroy must not underflow
        c.created(MappingType::Device);
        assert!(c.mixed());
        c.destroyed(MappingType::Device);
        assert!(!c.mixed());
        c.destroyed(MappingType::Caching);
        assert!(!c.mixed());
        assert_eq!(*c.live.lock(), [0; 4]);
    }
}
