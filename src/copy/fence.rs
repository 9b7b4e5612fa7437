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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::backend::MappingType;

/// The environment variable that turns on the load fence after reads from WC mappings.
pub const READ_FENCE_ENV: &str = "GDRAPI_READ_FENCE";

/// Bits of a count in [`Counters`]' word: a lane that reaches its maximum (a million live
/// mappings of one type, far past the kernel's default limit of mappings per process) stays
/// there, so it never reads as zero while mappings are live.
const LANE_BITS: u32 = 20;
const LANE_MAX: u64 = (1 << LANE_BITS) - 1;
/// The lanes: write-combining, caching, device (the type's number less one).
const LANES: u32 = 3;
/// The count in lane `l` of a [`Counters`] word.
#[inline(always)]
const fn lane(word: u64, l: u32) -> u64 {
    (word >> (l * LANE_BITS)) & LANE_MAX
}
/// Flag bit: mappings of more than one type are live.
const MIXED: u64 = 1 << (LANES * LANE_BITS);
/// Flag bit: `GDRAPI_READ_FENCE=1`.
const READ_FENCE: u64 = MIXED << 1;

/// Live mappings per type and the flags every copy reads once to pick its fence, in one word,
/// so that a map or an unmap updates counts and flags with one compare-and-swap and a copy
/// reads them with one load.
struct Counters {
    word: AtomicU64,
}

impl Counters {
    const fn new() -> Counters {
        Counters {
            word: AtomicU64::new(0),
        }
    }

    /// Adds one to `kind`'s count (`down`: takes one off, never below zero), recomputes the
    /// mixed flag and sets `extra`, in one compare-and-swap. A mapping of no type is not
    /// counted. The lane is the type's number less one: arithmetic, not a jump table.
    fn update(&self, kind: MappingType, down: bool, extra: u64) {
        const {
            assert!(MappingType::None as u32 == 0 && MappingType::WriteCombining as u32 == 1);
            assert!(MappingType::Caching as u32 == 2 && MappingType::Device as u32 == 3);
        };
        let Some(l) = (kind as u32).checked_sub(1) else {
            return;
        };
        let shift = l * LANE_BITS;
        let live = |w: u64, l: u32| u32::from(lane(w, l) != 0);
        let mut cur = self.word.load(Ordering::Relaxed);
        loop {
            let count = match lane(cur, l) {
                LANE_MAX => LANE_MAX,
                c if down => c.saturating_sub(1),
                c => c + 1,
            };
            let mut new = (cur & !(LANE_MAX << shift) & !MIXED) | (count << shift) | extra;
            if live(new, 0) + live(new, 1) + live(new, 2) > 1 {
                new |= MIXED;
            }
            match self
                .word
                .compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }

    #[inline(always)]
    fn created(&self, kind: MappingType) {
        let extra = if read_fence_requested() {
            READ_FENCE
        } else {
            0
        };
        self.update(kind, false, extra);
    }

    #[inline(always)]
    fn destroyed(&self, kind: MappingType) {
        self.update(kind, true, 0);
    }

    #[inline(always)]
    fn flags(&self) -> u64 {
        self.word.load(Ordering::Acquire)
    }

    #[cfg(test)]
    fn count(&self, kind: MappingType) -> u64 {
        lane(self.flags(), kind as u32 - 1)
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
        for kind in [
            MappingType::WriteCombining,
            MappingType::Caching,
            MappingType::Device,
        ] {
            assert_eq!(c.count(kind), 0);
        }
        assert_eq!(c.flags(), 0);
    }

    #[test]
    fn a_full_lane_stays_full_and_flags_survive_updates() {
        let c = Counters::new();
        c.word.store(LANE_MAX << LANE_BITS, Ordering::Relaxed); // caching (lane 1) at its maximum
        c.destroyed(MappingType::Caching);
        assert_eq!(
            c.count(MappingType::Caching),
            LANE_MAX,
            "never counted down to zero"
        );
        c.created(MappingType::WriteCombining);
        assert!(c.flags() & MIXED != 0);
        c.created(MappingType::Device);
        c.update(MappingType::Device, true, READ_FENCE);
        c.destroyed(MappingType::WriteCombining);
        assert_eq!(
            c.flags() & READ_FENCE,
            READ_FENCE,
            "the read-fence flag stays set"
        );
        assert_eq!(c.count(MappingType::WriteCombining), 0);
        c.created(MappingType::None); // not counted
        assert_eq!(c.flags() & !READ_FENCE, LANE_MAX << LANE_BITS);
    }

    #[test]
    fn concurrent_maps_and_unmaps_leave_counts_and_mixed_exact() {
        let c = Counters::new();
        let kinds = [
            MappingType::WriteCombining,
            MappingType::Caching,
            MappingType::Device,
        ];
        c.created(MappingType::WriteCombining);
        std::thread::scope(|s| {
            for (t, &kind) in kinds.iter().cycle().take(6).enumerate() {
                let c = &c;
                s.spawn(move || {
                    for i in 0..20_000 {
                        c.created(kind);
                        if (i + t) % 2 == 0 {
                            c.destroyed(kind);
                        }
                    }
                });
            }
        });
        // Each thread leaves 10 000 of its kind; two threads per kind.
        assert_eq!(c.count(MappingType::WriteCombining), 20_001);
        assert_eq!(c.count(MappingType::Caching), 20_000);
        assert_eq!(c.count(MappingType::Device), 20_000);
        assert!(c.flags() & MIXED != 0);
        for kind in [MappingType::Caching, MappingType::Device] {
            for _ in 0..20_000 {
                c.destroyed(kind);
            }
        }
        assert_eq!(c.flags() & MIXED, 0, "one type left: not mixed");
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
