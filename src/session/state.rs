//! The states of a [`HandleRecord`], and the holds a call takes on a handle: a map, an unmap
//! or an unpin moves it into a transient state ([`hold`], [`Transition`]), a query outside
//! the quick case counts itself in its `users` ([`InUse`]; the quick case confirms its
//! answer instead), a pin keeps the record it reserved ([`Reserved`]).
//!
//! ```text
//! FREE -> RESERVED -> PINNED <-> MAPPING -> MAPPED <-> UNMAPPING
//!                       |                     |
//!                       +---> UNPINNING <-----+ ---> FREE (quarantined)
//! ```

use super::records::HandleRecord;
use super::refuse::accept_handle;
use crate::backend::{gdrdrv, BackendKind, Mapping};
use crate::hint::cold_path;
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

/// Whether a handle in state `s` holds a pin that is not being released: one of the states
/// from `PINNED` to `UNMAPPING`, which are numbered in a row (one compare).
#[inline(always)]
pub(super) fn is_pinned(s: u32) -> bool {
    const {
        assert!(MAPPING == PINNED + 1 && MAPPED == PINNED + 2);
        assert!(UNMAPPING == PINNED + 3);
    };
    s.wrapping_sub(PINNED) <= UNMAPPING - PINNED
}

/// A query's hold on a handle outside the quick case (see [`super::query`]); released on
/// drop.
pub(super) struct InUse(pub(super) &'static HandleRecord);

impl InUse {
    /// Counts a query in `h`'s `users`, before it reads the state (both SeqCst), so that an
    /// unpin that moved the state on after that read sees the count and waits (see
    /// `Open::release`).
    pub(super) fn count(h: &'static HandleRecord) -> InUse {
        h.users.fetch_add(1, Ordering::SeqCst);
        InUse(h)
    }
}

impl std::ops::Deref for InUse {
    type Target = HandleRecord;
    fn deref(&self) -> &HandleRecord {
        self.0
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        self.0.users.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Moves `h`, found by [`super::lookup::quick_handle`], from `from` to the transient state
/// `to`, and returns its driver once it holds it, when the decision on a handle
/// ([`accept_handle`], on the state it was held from) still takes it as the session `g`'s;
/// otherwise puts it back and returns `None`.
///
/// Holding the handle stands in for the session's lock: another map, unmap or unpin of it
/// fails (EAGAIN or EINVAL, as when it held the lock), and `gdr_close` waits for the state to
/// settle before it releases the handle and closes the descriptor (see
/// `start_release_mapped`). A pinned handle whose recorded session is `g` proves `g` open, as
/// for a query. It is checked again once held, because the record may have been unpinned and
/// pinned again since `quick_handle` read it; only a call with a handle its own process freed
/// meanwhile can see that, and the other pin then reads a transient state for as long as this
/// check takes.
#[inline(always)]
pub(super) fn hold(
    h: &'static HandleRecord,
    g: usize,
    from: u32,
    to: u32,
) -> Option<gdrdrv::Driver> {
    h.state
        .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire)
        .ok()?;
    // The decision on the handle, on the state it was held from.
    if accept_handle(from, || h.session.load(Ordering::Acquire) == g).is_ok() {
        if let Some(d) = h.driver() {
            #[cfg(test)]
            super::testing::took(super::testing::Path::Quick);
            return Some(d);
        }
    }
    cold_path();
    h.state.store(from, Ordering::Release);
    None
}

/// A handle held in a transient state by a map ([`Transition::mapping`]) or an unmap
/// ([`Transition::unmapping`]): dropping it before the call's end (an error or a panic in
/// the backend) puts the handle back in the state it came from.
pub(super) struct Transition {
    h: &'static HandleRecord,
    back_to: u32,
}

impl Transition {
    /// A map of `h`, which the caller has moved from PINNED to MAPPING.
    #[inline(always)]
    pub(super) fn mapping(h: &'static HandleRecord) -> Transition {
        Transition { h, back_to: PINNED }
    }

    /// An unmap of `h`, which the caller has moved from MAPPED to UNMAPPING.
    #[inline(always)]
    pub(super) fn unmapping(h: &'static HandleRecord) -> Transition {
        Transition { h, back_to: MAPPED }
    }

    /// Ends a map: records `m` (made by a backend of this `kind`) and the handle becomes
    /// MAPPED. Returns the mapping's address.
    #[inline(always)]
    pub(super) fn mapped(mut self, m: &Mapping, kind: BackendKind) -> usize {
        self.h.record_mapping(m, kind);
        self.back_to = MAPPED;
        gdr_dbg!("ptr_va: {:#x}", m.addr);
        gdr_dbg!("mapping_type={}", m.kind as u32);
        m.addr
    }

    /// Ends an unmap: forgets `m`, now removed, and the handle becomes PINNED.
    #[inline(always)]
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
    #[inline(always)]
    pub(super) fn keep(self) -> &'static HandleRecord {
        let h = self.0;
        std::mem::forget(self);
        h
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        free_reserved(self.0);
    }
}

/// Frees a slot whose pin failed or panicked. Out of line, so that no inlinable function
/// names the handle registry: the registry then stays internal to the shared object and its
/// accesses need no GOT entry (see PERFORMANCE.md, "API calls").
#[cold]
#[inline(never)]
fn free_reserved(h: &'static HandleRecord) {
    h.free();
}
