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
//!
//! In tests, [`broken`] can break one part of a decision ([`Mutant`]); the tests at the end
//! show that every such break makes the checks of both paths fail.

use super::state::is_pinned;
use super::HandleRecord;
use crate::error::Error;
use std::sync::atomic::Ordering;

/// A way to break one part of a shared decision, for the tests that show that both paths of
/// a call rely on it (see [`broken`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mutant {
    /// [`accept_handle`] takes a handle in any state.
    HandleState,
    /// [`accept_handle`] takes a handle of any session.
    HandleOwner,
    /// `accept_map` takes a handle that is mapped already.
    MapMapped,
    /// `accept_map` takes unknown flags (as the default mapping type).
    MapFlags,
    /// `accept_map` rounds a size that overflows (wrapping).
    MapSize,
    /// `accept_unmap` takes any `va`.
    UnmapVa,
    /// `accept_unmap` takes any size.
    UnmapSize,
    /// `accept_unpin` takes a handle that another thread is mapping or unmapping.
    UnpinBusy,
    /// `accept_unpin` takes a mapped handle as not mapped.
    UnpinMapped,
    /// `accept_copy` takes a handle in any state.
    CopyState,
    /// `accept_copy` takes a range that runs past the end of the mapping.
    CopyRange,
}

#[cfg(test)]
impl Mutant {
    /// Every mutant.
    pub(super) const ALL: [Mutant; 11] = [
        Mutant::HandleState,
        Mutant::HandleOwner,
        Mutant::MapMapped,
        Mutant::MapFlags,
        Mutant::MapSize,
        Mutant::UnmapVa,
        Mutant::UnmapSize,
        Mutant::UnpinBusy,
        Mutant::UnpinMapped,
        Mutant::CopyState,
        Mutant::CopyRange,
    ];

    /// The call whose decision it breaks (the one whose check must notice on both paths).
    pub(super) fn call(self) -> &'static str {
        match self {
            Mutant::HandleState | Mutant::HandleOwner => "query",
            Mutant::MapMapped | Mutant::MapFlags | Mutant::MapSize => "map",
            Mutant::UnmapVa | Mutant::UnmapSize => "unmap",
            Mutant::UnpinBusy | Mutant::UnpinMapped => "unpin",
            Mutant::CopyState | Mutant::CopyRange => "copy",
        }
    }
}

/// Whether the test running on this thread broke `m`: never outside tests, where this is a
/// constant the decisions fold away.
#[cfg(not(test))]
#[inline(always)]
pub(super) const fn broken(_: Mutant) -> bool {
    false
}

#[cfg(test)]
pub(super) use super::testing::broken;

/// The decision on the handle of any call that names one: accepted when its state `s` holds a
/// pin that is not being released (PINNED to UNMAPPING) and it is the calling session's
/// (`mine`, asked only then: the quick paths compare the session address the handle recorded
/// with `g`, the paths through the session its owner with the session's serial). A query's
/// whole decision; the first part of those of map, unmap and unpin through the session,
/// whose quick paths pass the state they hold the handle from (see [`super::state::hold`]).
#[inline(always)]
pub(super) fn accept_handle(s: u32, mine: impl FnOnce() -> bool) -> Result<(), HandleRefusal> {
    if !is_pinned(s) && !broken(Mutant::HandleState) {
        return Err(HandleRefusal::NotPinned);
    }
    if !broken(Mutant::HandleOwner) && !mine() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::testing::{with_broken, Path, PATHS};

    /// A call's check of its refusals (and of a call it accepts) on one path: what came out
    /// wrong.
    type Check = fn(Path) -> Vec<String>;

    /// Each call's check.
    const CHECKS: [(&str, Check); 5] = [
        ("query", super::super::query::tests::refusals),
        ("map", super::super::map::tests::refusals),
        ("unmap", super::super::unmap::tests::refusals),
        ("unpin", super::super::unpin::tests::refusals),
        ("copy", super::super::copy::tests::refusals),
    ];

    /// Breaks each part of the shared decisions in turn ([`Mutant`]): the check of the call
    /// it belongs to must then fail on the quick path and on the path through the session
    /// alike. Prints which checks fail for each (`--nocapture`).
    #[test]
    fn breaking_a_shared_decision_fails_the_checks_of_both_paths() {
        for (call, check) in CHECKS {
            for path in PATHS {
                let found = check(path);
                assert!(found.is_empty(), "{call} on {path:?}, unbroken: {found:#?}");
            }
        }
        let mut survivors = Vec::new();
        for m in Mutant::ALL {
            for path in PATHS {
                let failing: Vec<_> = CHECKS
                    .iter()
                    .map(|(call, check)| (*call, with_broken(m, || check(path))))
                    .filter(|(_, found)| !found.is_empty())
                    .collect();
                let calls: Vec<_> = failing.iter().map(|(call, _)| *call).collect();
                let own = failing.iter().find(|(call, _)| *call == m.call());
                println!(
                    "{:<12} {:<7} fails: {:<22} first: {}",
                    format!("{m:?}"),
                    format!("{path:?}"),
                    calls.join(" "),
                    own.map_or("-", |(_, found)| found[0].as_str())
                );
                if own.is_none() {
                    survivors.push(format!("{m:?} on {path:?}"));
                }
            }
        }
        assert!(
            survivors.is_empty(),
            "the checks of their call pass: {survivors:?}"
        );
    }
}
