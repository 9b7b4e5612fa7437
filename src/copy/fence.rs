//! Fences after a copy, and the live-mapping counters that decide which one.
//!
//! Rules (upstream's): when mappings of more than one type are live in the process, every
//! non-empty copy ends with a full fence (`MFENCE` / `DMB SY`); otherwise a copy to or from a
//! write-combining mapping ends with a store fence (`SFENCE` / `DMB ST`), which drains the
//! write-combining buffers after stores. Caching and device mappings get no fence unless
//! mappings are mixed.
//!
//! # Ordered reads: `GDRAPI_READ_FENCE=1`
//!
//! Reads of write-combining memory are weakly ordered and may be speculative: after a copy
//! *from* such a mapping, a later read (of a flag, of the next buffer) can be satisfied
//! before this copy's reads, and upstream gives no guarantee there. Setting the environment
//! variable [`READ_FENCE_ENV`] to `1` (read once, at the first `gdr_map`) adds `LFENCE`
//! before the store fence after every such copy (`DMB SY` on aarch64), so that a later read
//! sees data no older than the bytes just copied. It is off by default (upstream's
//! behaviour, and its cost falls on the smallest reads; figures in PERFORMANCE.md). Programs
//! that poll a flag in device memory and then read the data it guards should set it, or
//! order the two reads themselves.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

use parking_lot::Mutex;

use crate::backend::MappingType;

/// The environment variable that turns on the load fence after reads from WC mappings.
pub const READ_FENCE_ENV: &str = "GDRAPI_READ_FENCE";

/// Flag bit: mappings of more than one type are live.
const MIXED: u8 = 1;
/// Flag bit: `GDRAPI_READ_FENCE=1`.
const READ_FENCE: u8 = 2;

/// Live mappings per type, and the flag word every copy reads once to pick its fence.
struct Counters {
    live: Mutex<[usize; 4]>,
    flags: AtomicU8,
}

impl Counters {
    const fn new() -> Counters {
        Counters {
            live: Mutex::new([0; 4]),
            flags: AtomicU8::new(0),
        }
    }

    fn update(&self, kind: MappingType, f: impl FnOnce(usize) -> usize) {
        let mut live = self.live.lock();
        let slot = &mut live[kind as usize];
        *slot = f(*slot);
        let types = live.iter().filter(|&&c| c > 0).count();
        // Under the lock, so concurrent updates cannot interleave their read and write.
        if types > 1 {
            self.flags.fetch_or(MIXED, Ordering::Release);
        } else {
            self.flags.fetch_and(!MIXED, Ordering::Release);
        }
    }

    #[inline(always)]
    fn created(&self, kind: MappingType) {
        if read_fence_requested() {
            self.flags.fetch_or(READ_FENCE, Ordering::Release);
        }
        self.update(kind, |c| c.saturating_add(1));
    }

    #[inline(always)]
    fn destroyed(&self, kind: MappingType) {
        self.update(kind, |c| c.saturating_sub(1));
    }

    #[inline(always)]
    fn flags(&self) -> u8 {
        self.flags.load(Ordering::Acquire)
    }
}

static COUNTERS: Counters = Counters::new();

/// Whether `GDRAPI_READ_FENCE` asks for the load fence (`1`, `yes`, `on` or `true`); read once.
fn read_fence_requested() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        let v = std::env::var(READ_FENCE_ENV).unwrap_or_default();
        let on = parse_switch(&v);
        if on {
            gdr_info!(
                "{READ_FENCE_ENV}={v}: load fence after every read from a write-combining mapping"
            );
        }
        on
    })
}

/// `1`, `yes`, `on`, `true` (any case, blanks around ignored) are on; anything else is off.
fn parse_switch(v: &str) -> bool {
    let v = v.trim();
    ["1", "yes", "on", "true"]
        .iter()
        .any(|w| v.eq_ignore_ascii_case(w))
}

/// Counts one more live mapping of `kind`.
#[inline(always)]
pub(crate) fn created(kind: MappingType) {
    COUNTERS.created(kind);
}

/// Counts one live mapping of `kind` less (never below zero).
#[inline(always)]
pub(crate) fn destroyed(kind: MappingType) {
    COUNTERS.destroyed(kind);
}

/// True when live mappings of more than one type exist.
#[inline(always)]
pub(crate) fn mixed() -> bool {
    COUNTERS.flags() & MIXED != 0
}

/// True when the load fence after reads from write-combining mappings is on. Out of line, as
/// the public functions of `copy` are (see `copy::mapping_created`).
#[inline(never)]
pub fn read_fence() -> bool {
    COUNTERS.flags() & READ_FENCE != 0
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
    let flags = COUNTERS.flags();
    if flags & MIXED != 0 {
        full();
    } else if kind == MappingType::WriteCombining {
        if flags & READ_FENCE != 0 {
            load();
        } else {
            store();
        }
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

/// Load fence after reading write-combining memory, plus upstream's store fence.
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
        assert!(c.flags() & MIXED == 0);
        c.created(MappingType::WriteCombining);
        c.created(MappingType::WriteCombining);
        assert!(c.flags() & MIXED == 0);
        c.created(MappingType::Caching);
        assert!(c.flags() & MIXED != 0);
        c.destroyed(MappingType::WriteCombining);
        assert!(c.flags() & MIXED != 0);
        c.destroyed(MappingType::WriteCombining);
        assert!(c.flags() & MIXED == 0);
        c.destroyed(MappingType::WriteCombining); // an extra destroy must not underflow
        c.created(MappingType::Device);
        assert!(c.flags() & MIXED != 0);
        c.destroyed(MappingType::Device);
        assert!(c.flags() & MIXED == 0);
        c.destroyed(MappingType::Caching);
        assert!(c.flags() & MIXED == 0);
        assert_eq!(*c.live.lock(), [0; 4]);
        assert_eq!(c.flags() & MIXED, 0);
    }

    #[test]
    fn read_fence_switch_values() {
        for on in ["1", " yes", "ON", "true "] {
            assert!(parse_switch(on), "{on:?}");
        }
        for off in ["", "0", "no", "off", "2", "enable"] {
            assert!(!parse_switch(off), "{off:?}");
        }
    }
}
