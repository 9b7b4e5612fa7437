//! What a call accepts. Map, unmap, unpin and the queries each have two paths: a quick one,
//! lock-free, that holds a gdrdrv handle by a compare-and-swap into a transient state (or, for
//! a query, by its count of users), and one through the session, under its lock, for every
//! other case. Copies have an inline check and a full one (neither locks). Both paths ask one
//! decision what to accept, so that they can differ only in how they hold the handle and in
//! where they fall back, never in what they take:
//!
//! | call | decision | what it decides |
//! | --- | --- | --- |
//! | a call on a handle | [`accept_handle`] | pinned (not being unpinned), the caller's session's |
//! | queries | [`accept_handle`] | that alone |
//! | map | [`super::map::accept_map`] | already mapped, the flags, the size rounded to the page |
//! | unmap | [`super::unmap::accept_unmap`] | mapped, `va` and rounded size the mapping's |
//! | unpin | [`super::unpin::accept_unpin`] | pinned or mapped, or being mapped or unmapped |
//! | copies | [`super::copy::accept_copy`] | mapped, the range inside the mapping |
//!
//! A decision is a small `#[inline(always)]` function of what the path read (a quick path
//! passes the state its compare-and-swap will require, so that part folds away there); it
//! returns what it accepted or a refusal, a small enum whose `refuse` method, `#[cold]`,
//! logs upstream's line and gives the error: the one place a call's refusals are worded. A
//! quick path that a decision refuses falls back to the path through the session, which asks
//! the same decision and refuses.

use super::state::is_pinned;
use super::HandleRecord;
use crate::error::Error;
use std::sync::atomic::Ordering;

/// The decision on the handle of any call that names one: accepted when its state `s` holds a
/// pin that is not being released (PINNED to UNMAPPING) and it is the calling session's
/// (`mine`, asked only then: the quick paths compare the session address the handle recorded
/// with `g`, the paths through the session its owner with the session's serial). A query's
/// whole decision; the first part of those of map, unmap and unpin through the session,
/// whose quick paths pass the state they hold the handle from (see [`super::state::hold`]).
#[inline(always)]
pub(super) fn accept_handle(s: u32, mine: impl FnOnce() -> bool) -> Result<(), HandleRefusal> {
    if !is_pinned(s) {
        return Err(HandleRefusal::NotPinned);
    }
    if !mine() {
        return Err(HandleRefusal::OtherSession);
    }
    Ok(())
}

/// Why [`accept_handle`] refused a handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HandleRefusal {
    /// Free, reserved by a pin in progress, or being unpinned.
    NotPinned,
    /// Pinned through another `gdr_t`.
    OtherSession,
}

impl HandleRefusal {
    /// Logs why the handle `mh` is refused; the error for it.
    #[cold]
    pub(super) fn refuse(self, mh: u64) -> Error {
        match self {
            HandleRefusal::NotPinned => gdr_err!(
                "invalid gdr_mh_t 0x{:x}: the buffer is not pinned (already unpinned?)",
                mh
            ),
            HandleRefusal::OtherSession => {
                gdr_err!("invalid gdr_mh_t 0x{:x}: it belongs to another gdr_t", mh)
            }
        }
        Error::InvalidHandle
    }
}

/// [`accept_handle`] on the paths through the session: `h`'s state and its owner against the
/// session's `serial`.
#[inline(always)]
pub(super) fn accept_owned(h: &HandleRecord, serial: u64) -> Result<(), HandleRefusal> {
    accept_handle(h.state.load(Ordering::SeqCst), || {
        h.owner.load(Ordering::Acquire) == serial
    })
}
