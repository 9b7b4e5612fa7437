//! The states of a [`HandleRecord`], and the holds a call takes on a handle: a map, an unmap
//! or an unpin moves it into a transient state by compare-and-swap ([`Transition`]), so that
//! two threads never map, unmap or unpin one handle at once; a pin keeps the record it
//! reserved ([`Reserved`]). Each undoes itself on drop, an error or a panic included.
//!
//! ```text
//! FREE -> RESERVED -> PINNED <-> MAPPING -> MAPPED <-> UNMAPPING
//!                       |                     |
//!                       +---> UNPINNING <-----+ ---> FREE (quarantined)
//! ```

use super::records::HandleRecord;
use crate::backend::{BackendKind, Mapping};
use std::sync::atomic::Ordering;

/// Slot not in use.
pub const FREE: u32 = 0;
/// Slot taken by a pin that has not completed.
pub const RESERVED: u32 = 1;
/// Pinned, not mapped.
pub const PINNED: u32 = 2;
/// A `gdr_map` is in progress.
pub const MAPPING: u32 = 3;
/// Pinned and mapped.
pub const MAPPED: u32 = 4;
/// A `gdr_unmap` is in progress.
pub const UNMAPPING: u32 = 5;
/// An unpin is in progress.
pub const UNPINNING: u32 = 6;

/// Whether a handle in state `s` holds a pin that is not being released.
pub(super) fn is_pinned(s: u32) -> bool {
    matches!(s, PINNED | MAPPING | MAPPED | UNMAPPING)
}

/// A handle held in a transient state by a map or an unmap: dropping it before the call's
/// end (an error or a panic in the backend) puts the handle back in the state it came from.
pub(super) struct Transition {
    h: &'static HandleRecord,
    back_to: u32,
}

impl Transition {
    /// Moves `h` from `from` to the transient state `to`; `Err` with the state found when `h`
    /// is not in `from`.
    pub(super) fn start(h: &'static HandleRecord, from: u32, to: u32) -> Result<Transition, u32> {
        h.state
            .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire)?;
        Ok(Transition { h, back_to: from })
    }

    /// Ends a map: records `m` (made by a backend of this `kind`) and the handle becomes
    /// MAPPED. Returns the mapping's address.
    pub(super) fn mapped(mut self, m: &Mapping, kind: BackendKind) -> usize {
        self.h.record_mapping(m, kind);
        self.back_to = MAPPED;
        gdr_dbg!("ptr_va: {:#x}", m.addr);
        gdr_dbg!("mapping_type={}", m.kind as u32);
        m.addr
    }

    /// Ends an unmap: forgets `m`, now removed, and the handle becomes PINNED.
    pub(super) fn unmapped(mut self, m: &Mapping, kind: BackendKind) {
        self.h.forget_mapping(m.kind, kind);
        self.back_to = PINNED;
    }
}

impl Drop for Transition {
    fn drop(&mut self) {
        self.h.state.store(self.back_to, Ordering::Release);
    }
}

/// A handle slot taken for a pin in progress; freed on drop unless kept.
pub(super) struct Reserved(pub(super) &'static HandleRecord);

impl Reserved {
    pub(super) fn keep(self) -> &'static HandleRecord {
        let h = self.0;
        std::mem::forget(self);
        h
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        self.0.free();
    }
}
