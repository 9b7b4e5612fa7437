//! `gdr_unpin_buffer`, and the release of a handle that `gdr_close` makes for each record of
//! its session: unmap if mapped, unpin, free the record whatever the driver said.

use super::lookup::{held_session, open_unlocked, quick_handle, session_and_handle};
use super::records::{HandleRecord, Open, SessionRecord};
use super::refuse::{broken, Mutant};
use super::state::{self, hold};
use super::HANDLES;
use crate::backend::{Backend, Pin};
use crate::error::{Error, Result};
use crate::hint::cold_path;
use std::sync::atomic::Ordering;

impl Open {
    /// Unmaps (if mapped) and unpins `h`, then frees its record whatever the driver said.
    /// Returns the first error. If the mapping cannot be removed, `gdr_unpin_buffer`
    /// ([`Release::Unpin`]) leaves the handle pinned and mapped so the caller can retry;
    /// `gdr_close` ([`Release::Close`]) tries once more and then goes on without it.
    #[inline(always)]
    pub(super) fn release(&self, h: &'static HandleRecord, how: Release) -> Result<()> {
        // Pinned and not mapped: the straight path, one compare-and-swap.
        let mapped = match h.state.compare_exchange(
            state::PINNED,
            state::UNPINNING,
            Ordering::SeqCst,
            Ordering::SeqCst,
        ) {
            // PINNED, which `accept_unpin` takes as not mapped.
            Ok(_) => false,
            Err(_) => {
                cold_path();
                match start_release_mapped(h, how, self.serial)? {
                    Some(mapped) => mapped,
                    // Released meanwhile by an unpin that took no lock.
                    None => return Ok(()),
                }
            }
        };
        self.release_held(h, mapped, how)
    }

    /// The end of [`Open::release`], with `h` held in UNPINNING (`mapped`: it was mapped).
    #[inline(always)]
    fn release_held(&self, h: &'static HandleRecord, mapped: bool, how: Release) -> Result<()> {
        finish_queries(h);
        if mapped {
            // Users unmap first (UCX, NCCL, NVIDIA's tests): the unpin of an unmapped handle
            // is the straight path.
            cold_path();
            return self.release_mapped(h, how);
        }
        self.unpin_and_free(h, || h.pin())
    }

    /// [`Open::release`] of a handle that is still mapped: unmaps it first.
    #[cold]
    #[inline(never)]
    fn release_mapped(&self, h: &'static HandleRecord, how: Release) -> Result<()> {
        let pin = h.pin();
        let m = h.mapping();
        gdr_dbg!("unmapping va: {:#x} before unpinning", m.addr);
        let mut r = self.backend.unmap(&pin, &m);
        if let Err(e) = r {
            if how == Release::Unpin {
                gdr_err!(
                    "cannot unmap gdr_mh_t 0x{:x} before unpinning it ({}): it stays pinned and mapped",
                    h.address(),
                    e
                );
                h.state.store(state::MAPPED, Ordering::Release);
                return Err(e);
            }
            r = self.backend.unmap(&pin, &m);
            if let Err(e) = r {
                gdr_err!(
                    "cannot unmap {:#x}+{} of gdr_mh_t 0x{:x} ({}): the address range stays reserved until the process exits",
                    m.addr,
                    m.len,
                    h.address(),
                    e
                );
            }
        }
        h.forget_mapping(m.kind, self.backend.kind());
        let unpinned = self.unpin_and_free(h, || pin);
        r.and(unpinned)
    }

    /// The end of [`Open::release`]: unpins, then forgets the handle whatever the driver
    /// said; `pin` gives the whole pin, for the backends other than gdrdrv.
    #[inline(always)]
    fn unpin_and_free(&self, h: &'static HandleRecord, pin: impl FnOnce() -> Pin) -> Result<()> {
        let r = self
            .backend
            .unpin_with(h.pin_handle.load(Ordering::Acquire), pin);
        self.forget(h);
        r
    }

    /// The end of every release, once the driver has answered, whatever it said: the session
    /// stops counting `h` and its record is freed.
    #[inline(always)]
    fn forget(&self, h: &'static HandleRecord) {
        self.live.fetch_sub(1, Ordering::Relaxed);
        h.free();
    }
}

/// The decision on an unpin of a handle of the caller's session in state `s`: whether it is
/// mapped (then it is unmapped first) when `s` is PINNED or MAPPED. A map or an unmap under
/// way makes the unpin lose the race (the handle stays as it is); anything else holds no pin.
/// Compares rather than a `match`, which would become a jump table in a page of its own.
#[inline(always)]
pub(super) fn accept_unpin(s: u32) -> std::result::Result<bool, UnpinRefusal> {
    if s == state::PINNED {
        return Ok(false);
    }
    if s == state::MAPPED {
        return Ok(!broken(Mutant::UnpinMapped));
    }
    if s == state::MAPPING || s == state::UNMAPPING {
        if broken(Mutant::UnpinBusy) {
            return Ok(false);
        }
        return Err(UnpinRefusal::LostRace);
    }
    Err(UnpinRefusal::NotPinned)
}

/// Why [`accept_unpin`] refused an unpin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum UnpinRefusal {
    /// Being mapped or unmapped by another thread (EAGAIN, nothing changed).
    LostRace,
    /// Free, reserved by a pin in progress, or being unpinned.
    NotPinned,
}

impl UnpinRefusal {
    /// Logs why the unpin of `h` is refused; the error for it.
    #[cold]
    fn refuse(self, h: &'static HandleRecord) -> Error {
        match self {
            UnpinRefusal::LostRace => {
                gdr_err!(
                    "gdr_mh_t 0x{:x} is being mapped or unmapped by another thread: \
                     it stays pinned, unpin it again once that call has returned",
                    h.address()
                );
                Error::LostRace
            }
            UnpinRefusal::NotPinned => {
                gdr_err!(
                    "invalid gdr_mh_t 0x{:x}: the buffer is not pinned (already unpinned?)",
                    h.address()
                );
                Error::InvalidHandle
            }
        }
    }
}

/// Moves `h`, found not simply pinned by [`Open::release`] of the session whose serial is
/// `serial`, to unpinning, when [`accept_unpin`] accepts its state; returns whether it was
/// mapped, or refuses it. A map, an unmap or an unpin under way makes an unpin lose the
/// race; `gdr_close` waits for it instead, and for a pin under way (none of them takes the
/// session lock, so each ends without waiting for anything), and returns `None` for a record
/// that such an unpin released or such a pin gave back.
#[cold]
#[inline(never)]
fn start_release_mapped(
    h: &'static HandleRecord,
    how: Release,
    serial: u64,
) -> Result<Option<bool>> {
    loop {
        let s = h.state.load(Ordering::Acquire);
        if how == Release::Close {
            if s == state::RESERVED
                || s == state::MAPPING
                || s == state::UNMAPPING
                || s == state::UNPINNING
            {
                std::thread::yield_now();
                continue;
            }
            if h.owner.load(Ordering::Acquire) != serial {
                return Ok(None);
            }
        }
        let mapped = accept_unpin(s).map_err(|r| r.refuse(h))?;
        if h.state
            .compare_exchange(s, state::UNPINNING, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return Ok(Some(mapped));
        }
    }
}

/// Lets the queries that hold `h`, which the caller holds in UNPINNING, finish. Queries
/// through the session that counted themselves in before the state changed finish with the
/// pin they read; later ones see UNPINNING and refuse. Quick queries hold nothing: they see
/// the state change after the driver's answer and start again through the session (see
/// `query::Asked`).
#[inline(always)]
fn finish_queries(h: &HandleRecord) {
    if h.users.load(Ordering::SeqCst) != 0 {
        wait_for_queries(h);
    }
}

/// Yields until no query holds `h` (see [`finish_queries`]).
#[cold]
#[inline(never)]
fn wait_for_queries(h: &HandleRecord) {
    while h.users.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
}

/// How [`Open::release`] treats a mapping it cannot remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Release {
    Unpin,
    Close,
}

/// [`unpin_then`] returning the result itself, for the tests.
#[cfg(test)]
pub fn unpin(g: usize, mh: u64) -> Result<()> {
    unpin_then(g, mh, |r| r)
}

/// `gdr_unpin_buffer`: unmaps if still mapped, unpins, and frees the handle even when the
/// driver refuses; what `done` makes of the result on each path (the C entry's errno), so
/// that the straight path hands back a register rather than moving a `Result` out of the
/// quick case.
#[inline(always)]
pub fn unpin_then<R>(g: usize, mh: u64, done: impl FnOnce(Result<()>) -> R) -> R {
    match quick_unpin(g, mh, done) {
        Ok(r) => r,
        Err(done) => done(unpin_through_session(g, mh)),
    }
}

/// [`unpin_then`] in the quick case of [`quick_handle`], without the session's lock: what
/// [`accept_unpin`] accepts of a PINNED handle (not mapped), the state it then holds the
/// handle from, unpinned through the handle's own driver as a query or a map is; what `done`
/// makes of its result. `Err(done)`, untouched, for anything else, valid or not.
#[inline(always)]
fn quick_unpin<R, F: FnOnce(Result<()>) -> R>(
    g: usize,
    mh: u64,
    done: F,
) -> std::result::Result<R, F> {
    // Before the driver's call this path reads the handle's record only. The lines it reads
    // after it (the session's open state and `live` count) and locks (the handles'
    // quarantine) start loading now, and have arrived by then.
    SessionRecord::prefetch_open(g);
    HANDLES.prefetch();
    let Some((h, _)) = quick_handle(g, mh) else {
        return Err(done);
    };
    let Ok(false) = accept_unpin(state::PINNED) else {
        return Err(done);
    };
    let Some(driver) = hold(h, g, state::PINNED, state::UNPINNING) else {
        return Err(done);
    };
    finish_queries(h);
    let r = driver.unpin(h.pin_handle.load(Ordering::Acquire));
    // SAFETY: `h`, a handle of the session `g` (its `session`), is held in UNPINNING, so
    // the session is open and stays so until `h` is freed.
    match unsafe { open_unlocked(held_session(g)) } {
        Some(open) => open.forget(h),
        // Not reached (see `open_unlocked`); a session that is not open counts nothing.
        None => {
            cold_path();
            h.free();
        }
    }
    Ok(done(r))
}

/// [`unpin_then`] through the session, held shared: every case but the quick one, with its
/// errors.
#[cold]
#[inline(never)]
fn unpin_through_session(g: usize, mh: u64) -> Result<()> {
    let (open, h) = session_and_handle(g, mh)?;
    #[cfg(test)]
    super::testing::took(super::testing::Path::Locked);
    open.release(h, Release::Unpin)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::session::testing::*;

    /// Every refusal of an unpin on `path`, and two unpins it accepts (of a mapped and of an
    /// unmapped handle); what came out wrong.
    pub(in crate::session) fn refusals(path: Path) -> Vec<String> {
        let mut f = Found::default();
        let (on, other) = (On::open(path), On::open(path));
        let Some(mh) = on.pin(0x7620_0000, 0x10000) else {
            return vec!["the pin was refused".into()];
        };
        let h = on.record(mh);
        if on.map(mh, 0x10000).is_none() {
            return vec!["the map was refused".into()];
        }
        // A map or an unmap under way: EAGAIN, and the handle stays as it was.
        for busy in [state::MAPPING, state::UNMAPPING] {
            if hold_as(h, state::MAPPED, busy) {
                f.eq(
                    &format!("state {busy}"),
                    unpin(on.g, mh),
                    Err(Error::LostRace),
                );
                f.eq("left as it was", h.state.load(Ordering::SeqCst), busy);
                hold_as(h, busy, state::MAPPED);
            }
        }
        f.eq(
            "another gdr_t's handle",
            unpin(other.g, mh),
            Err(Error::InvalidHandle),
        );
        let calls = |on: &On| {
            let c = &on.calls;
            (
                c.unmaps.load(Ordering::SeqCst),
                c.unpins.load(Ordering::SeqCst),
            )
        };
        f.eq(
            "what reached the backends",
            (calls(&on), calls(&other)),
            ((0, 0), (0, 0)),
        );
        // Mapped: unmapped first, then unpinned.
        f.eq("a mapped handle", unpin(on.g, mh), Ok(()));
        f.eq("unmapped and unpinned", calls(&on), (1, 1));
        f.eq(
            "unpinned already",
            unpin(on.g, mh),
            Err(Error::InvalidHandle),
        );
        f.eq("what reached the backend", calls(&on), (1, 1));
        // The unpin of an unmapped handle takes the path.
        let Some(second) = on.pin(0x7630_0000, 0x10000) else {
            return vec!["the second pin was refused".into()];
        };
        // The quick path's unpin ends at the descriptor-less driver, the other's at the fake
        // backend; both free the record whatever the driver said.
        let second_record = on.record(second);
        let r = unpin(on.g, second);
        f.eq(
            "an unmapped handle",
            outcome(&r),
            path.accepted().to_string(),
        );
        f.eq("the path of its unpin", last_path(), Some(path));
        let at_fake = if path == Path::Quick { 1 } else { 2 };
        f.eq("unpinned", calls(&on), (1, at_fake));
        f.eq(
            "its record",
            second_record.state.load(Ordering::SeqCst),
            state::FREE,
        );
        f.0
    }

    #[test]
    fn both_paths_refuse_the_same_unpins() {
        for path in PATHS {
            assert_eq!(refusals(path), Vec::<String>::new(), "{path:?}");
        }
    }

    #[test]
    fn unpin_frees_the_handle_even_when_the_driver_refuses() {
        let (g, calls) = fake();
        let mh = pin(g, &pin_req(0x7300_0000, 0x10000)).unwrap();
        calls.fail_unpin.store(true, Ordering::SeqCst);
        assert_eq!(unpin(g, mh).unwrap_err().errno(), libc::EIO);
        assert_eq!(unpin(g, mh).unwrap_err(), Error::InvalidHandle);
        calls.fail_unpin.store(false, Ordering::SeqCst);
        close(g).unwrap();
        assert_eq!(calls.unpins.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn an_unpin_that_loses_to_a_map_or_unmap_is_eagain_and_changes_nothing() {
        let (g, calls) = fake();
        let mh = pin(g, &pin_req(0x7310_0000, 0x10000)).unwrap();
        let va = map(g, mh, 0x10000, 0).unwrap();
        let h = HANDLES.lookup(mh as usize).unwrap();
        for busy in [state::MAPPING, state::UNMAPPING] {
            h.state.store(busy, Ordering::SeqCst);
            assert_eq!(unpin(g, mh), Err(Error::LostRace));
            assert_eq!(unpin(g, mh).unwrap_err().errno(), libc::EAGAIN);
            assert_eq!(h.state.load(Ordering::SeqCst), busy, "left as it was");
        }
        h.state.store(state::MAPPED, Ordering::SeqCst);
        assert_eq!(calls.unpins.load(Ordering::SeqCst), 0);
        assert_eq!(calls.unmaps.load(Ordering::SeqCst), 0);
        copy_target(mh, va, 0, 8, "t").unwrap();
        unpin(g, mh).unwrap();
        close(g).unwrap();
    }
}
