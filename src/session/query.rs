//! Queries on a handle (`gdr_get_info_v2`, the legacy `gdr_get_info`,
//! `gdr_get_callback_flag`) and the session's own queries (`gdr_get_attribute`,
//! `gdr_driver_get_version`).
//!
//! A query never returns an answer about a buffer its handle no longer names. The quick case
//! (a gdrdrv handle) holds nothing: it asks the driver with what it read of the handle record
//! and then confirms that the record still names that pin ([`Asked::confirmed`]); an unpin
//! moves the handle's state before it asks the driver, so a query whose answer came after
//! it sees that and starts again through the session. That path counts itself in the handle's
//! `users` ([`InUse`]) before it reads the state, and an unpin waits for the count to drop.

use super::lookup::{
    already_closed, check_opener, not_issued, open_unlocked, session, session_record,
};
use super::records::{HandleRecord, Open};
use super::refuse::{accept_handle, accept_owned};
use super::state::{self, InUse};
use super::HANDLES;
use crate::backend::{gdrdrv, Attr, Backend, BackendKind, Info};
use crate::error::{Error, Result};
use crate::hint::cold_path;
use std::sync::atomic::Ordering;

/// Validates `g` and `mh` for a query (get_info, callback flag) in the quick case, without
/// the session's lock and without holding the handle: `Ok` when the decision on a handle
/// ([`accept_handle`]) takes `mh` as a handle of `g` (by the session it recorded) and its
/// queries go to gdrdrv, with what the query needs of the driver and what it asks about,
/// which the caller confirms once the driver answered ([`Asked::confirmed`]). `Err` passes the
/// record found, if any, to [`query_through_session`].
///
/// The quick case reads the handle record only: a pinned handle whose recorded session is
/// `g` proves that `g` is an open session (one that closed released its handles first), and,
/// in wipe-on-fork memory, that the caller is the process that opened it (see
/// [`super::lookup::session_and_handle`]); the record also keeps what the query needs of a
/// gdrdrv backend, which a pin stores only in wipe-on-fork memory. Every other case is cold,
/// so that the quick one is laid out as one straight run of code.
#[inline(always)]
fn quick_query(g: usize, mh: u64) -> std::result::Result<(gdrdrv::Driver, Asked), Candidate> {
    quick_query_with(g, mh, HandleRecord::driver)
}

/// The record a query found at `mh`, if any, when the quick case does not apply.
type Candidate = Option<&'static HandleRecord>;

/// [`quick_query`] with the handle's driver taken by `driver` (`None`: not the quick case).
#[inline(always)]
fn quick_query_with(
    g: usize,
    mh: u64,
    driver: impl FnOnce(&HandleRecord) -> Option<gdrdrv::Driver>,
) -> std::result::Result<(gdrdrv::Driver, Asked), Candidate> {
    let Some(h) = usize::try_from(mh).ok().and_then(|a| HANDLES.lookup(a)) else {
        cold_path();
        return Err(None);
    };
    if accepted_as_mine(h, g) {
        if let Some(q) = driver(h) {
            #[cfg(test)]
            super::testing::took(super::testing::Path::Quick);
            let pin_handle = h.pin_handle.load(Ordering::Acquire);
            return Ok((q, Asked { h, g, pin_handle }));
        }
    }
    cold_path();
    Err(Some(h))
}

/// What a quick query asked the driver about: the pin `pin_handle` of the handle `h` of the
/// session `g`.
pub(super) struct Asked {
    h: &'static HandleRecord,
    g: usize,
    pin_handle: u64,
}

impl Asked {
    /// What `driver` answers about the pin asked about, given its driver handle, when the
    /// handle still names that pin once it answered ([`Asked::confirmed`]); `None` otherwise.
    #[inline(always)]
    fn ask<T>(&self, driver: impl FnOnce(u64) -> T) -> Option<T> {
        let answer = driver(self.pin_handle);
        self.confirmed().then_some(answer)
    }

    /// Whether, after the driver answered, the handle still names the pin it was asked about:
    /// pinned, in the session `g`, with the same driver handle. An unpin moves the state
    /// before it asks the driver to unpin, so an answer that came after that (perhaps about a
    /// buffer pinned since under the same driver handle) fails this check; a record is reused
    /// only after 1024 later frees, so it cannot name another pin of `g` in between. The same
    /// decision as the query's first ([`accepted_as_mine`]), and the same driver handle.
    #[inline(always)]
    fn confirmed(&self) -> bool {
        accepted_as_mine(self.h, self.g)
            && self.h.pin_handle.load(Ordering::Acquire) == self.pin_handle
    }
}

/// Whether the decision on a handle ([`accept_handle`]) takes `h`, as it stands now, as a
/// handle of the session `g` (by the session it recorded).
#[inline(always)]
fn accepted_as_mine(h: &HandleRecord, g: usize) -> bool {
    accept_handle(h.state.load(Ordering::SeqCst), || {
        h.session.load(Ordering::Acquire) == g
    })
    .is_ok()
}

/// A query that [`quick_query`] did not accept or could not confirm: a handle whose queries
/// go through the session (DMA-BUF), or anything to refuse, with the checks and errors of
/// [`super::lookup::session_and_handle`] (the same decision, [`accept_handle`], on the
/// handle's owner). `found` is the record at `mh`, which this path counts in its `users`
/// before it reads the state (see [`Open::release`]).
#[cold]
#[inline(never)]
fn query_through_session(g: usize, mh: u64, found: Candidate) -> Result<(&'static Open, InUse)> {
    let held = found.map(InUse::count);
    let rec = session_record(g)?;
    let serial = rec.serial.load(Ordering::Acquire);
    if rec.opener.load(Ordering::Acquire) == 0 || serial == 0 {
        return Err(already_closed(g));
    }
    let verdict = held.as_ref().map(|h| accept_owned(h, serial));
    let live = verdict == Some(Ok(()));
    // A live handle in wipe-on-fork memory proves the caller is the opener (see
    // `session_and_handle`); otherwise the process token decides, before the handle's own error.
    if !(live && held.as_ref().is_some_and(|h| h.proves_caller())) {
        check_opener(rec, g)?;
    }
    let Some(held) = held else {
        return Err(not_issued(mh));
    };
    if let Some(Err(r)) = verdict {
        return Err(r.refuse(mh));
    }
    // SAFETY: `held` is a live handle of this session, counted in its `users`.
    let Some(open) = (unsafe { open_unlocked(rec) }) else {
        return Err(already_closed(g));
    };
    #[cfg(test)]
    super::testing::took(super::testing::Path::Locked);
    Ok((open, held))
}

/// `gdr_get_callback_flag`.
#[inline(always)]
pub fn callback_flag(g: usize, mh: u64) -> Result<bool> {
    match quick_query(g, mh) {
        Ok((q, asked)) => match asked.ask(|p| q.callback_flag(p)) {
            Some(flag) => flag,
            None => {
                cold_path();
                callback_flag_through_session(g, mh, Some(asked.h))
            }
        },
        Err(found) => callback_flag_through_session(g, mh, found),
    }
}

/// [`callback_flag`] outside the quick case (see [`query_through_session`]).
#[cold]
#[inline(never)]
fn callback_flag_through_session(g: usize, mh: u64, found: Candidate) -> Result<bool> {
    let (open, h) = query_through_session(g, mh, found)?;
    open.backend.callback_flag(&h.pin())
}

/// `gdr_get_info_v2`'s quick case alone, for the C entry, which runs it outside the panic
/// guard: `None` when it does not apply or its answer is not confirmed (nothing held;
/// [`info`] then decides from the start), else what `store` made of the driver's answer, or
/// what `failed` made of its error. It applies to [`quick_query`]'s case when the driver has
/// the v2 query; the legacy query and older drivers take [`info`].
/// Nothing on it can panic: atomics, compares, the driver's `ioctl` (a C function), `store`
/// and `failed`, which must not panic either. (Taking the two closures keeps the result a
/// register, not an `Error` to move.)
#[inline(always)]
pub fn info_v2_quick<R>(
    g: usize,
    mh: u64,
    store: impl FnOnce(&Info) -> R,
    failed: impl FnOnce(Error) -> R,
) -> Option<R> {
    let Ok((q, asked)) = quick_query_with(g, mh, HandleRecord::driver_with_info_v2) else {
        cold_path();
        return None;
    };
    let Some(answer) = asked.ask(|p| q.info_v2(p)) else {
        cold_path();
        return None;
    };
    Some(match answer {
        Ok(i) => store(&i),
        Err(e) => failed(e),
    })
}

/// `gdr_get_info_v2` (`legacy` = false) or the legacy v1 `gdr_get_info` (`legacy` = true):
/// what the driver reports for `mh`, passed to `store` once confirmed. (Storing here rather
/// than returning the `Info` keeps the quick case's result apart from the cold one's.)
#[inline(always)]
pub fn info(g: usize, mh: u64, legacy: bool, store: impl FnOnce(&Info)) -> Result<()> {
    let found = match quick_query(g, mh) {
        Ok((q, asked)) => match asked.ask(|p| q.info_for(p, legacy)) {
            Some(answer) => return answer.map(|i| store(&i)),
            None => Some(asked.h),
        },
        Err(found) => found,
    };
    cold_path();
    let i = info_through_session(g, mh, found, legacy)?;
    store(&i);
    Ok(())
}

/// [`info`] outside the quick case (see [`query_through_session`]).
#[cold]
#[inline(never)]
fn info_through_session(g: usize, mh: u64, found: Candidate, legacy: bool) -> Result<Info> {
    let (open, h) = query_through_session(g, mh, found)?;
    let m = (h.state.load(Ordering::Acquire) == state::MAPPED).then(|| h.mapping());
    if legacy {
        open.backend.info_v1(&h.pin(), m.as_ref())
    } else {
        open.backend.info(&h.pin(), m.as_ref())
    }
}

/// `gdr_get_attribute`: the value of the `gdr_attr_t` `attr`.
pub fn attribute(g: usize, attr: u32) -> Result<i32> {
    let open = session(g)?;
    match Attr::from_raw(attr) {
        Some(Attr::UsingDmaBufMmap) => Ok(i32::from(open.backend.kind() == BackendKind::DmaBuf)),
        Some(a) => open.backend.attribute(a),
        None => {
            gdr_dbg!("undefined attribute");
            Err(Error::InvalidArgument("undefined attribute"))
        }
    }
}

/// `gdr_driver_get_version`: `(major, minor)` of the driver behind the session.
pub fn driver_version(g: usize) -> Result<(i32, i32)> {
    session(g)?.backend.driver_version()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::session::testing::info;
    use crate::session::testing::*;

    #[test]
    fn an_unpin_waits_for_a_query_of_the_same_handle() {
        let (g, calls) = fake();
        let keep = pin(g, &pin_req(0x7320_0000, 0x10000)).unwrap();
        let mh = pin(g, &pin_req(0x7330_0000, 0x10000)).unwrap();
        calls.slow_info.store(true, Ordering::SeqCst);
        let query = std::thread::spawn(move || info(g, mh, false));
        while !calls.in_info.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        unpin(g, mh).unwrap();
        let i = query.join().unwrap().unwrap();
        // The query described its own buffer, and the driver unpinned nothing under it.
        assert_eq!(i.va, 0x7330_0000);
        assert_eq!(calls.unpins_during_info.load(Ordering::SeqCst), 0);
        calls.slow_info.store(false, Ordering::SeqCst);
        // Once unpinned, a query fails with EINVAL and reaches no driver.
        assert_eq!(info(g, mh, false), Err(Error::InvalidHandle));
        assert_eq!(callback_flag(g, mh), Err(Error::InvalidHandle));
        assert_eq!(info(g, keep, true).unwrap().va, 0x7320_0000);
        close(g).unwrap();
    }

    #[test]
    fn attributes() {
        let (g, _) = fake();
        assert_eq!(attribute(g, 1).unwrap(), 1);
        assert_eq!(attribute(g, 3).unwrap(), 0);
        assert_eq!(attribute(g, 4).unwrap_err().errno(), libc::EINVAL);
        assert_eq!(attribute(g, 0).unwrap_err().errno(), libc::EINVAL);
        assert_eq!(attribute(g, u32::MAX).unwrap_err().errno(), libc::EINVAL);
        assert_eq!(driver_version(g).unwrap(), (2, 6));
        close(g).unwrap();
        assert_eq!(driver_version(g).unwrap_err(), Error::InvalidHandle);
    }

    /// Every refusal of a query on `path`, and a query it accepts; what came out wrong.
    pub(in crate::session) fn refusals(path: Path) -> Vec<String> {
        let mut f = Found::default();
        let (on, other) = (On::open(path), On::open(path));
        let Some(mh) = on.pin(0x7640_0000, 0x10000) else {
            return vec!["the pin was refused".into()];
        };
        // A query it accepts takes the path; a quick one ends at the descriptor-less driver.
        f.eq(
            "get_info",
            outcome(&info(on.g, mh, false)).as_str(),
            path.accepted(),
        );
        f.eq("the path of get_info", last_path(), Some(path));
        f.eq(
            "the callback flag",
            outcome(&callback_flag(on.g, mh)).as_str(),
            path.accepted(),
        );
        f.eq("the path of the callback flag", last_path(), Some(path));
        let refused = |f: &mut Found, what: &str, g: usize, mh: u64| {
            f.eq(
                &format!("get_info, {what}"),
                errno(&info(g, mh, false)),
                libc::EINVAL,
            );
            f.eq(
                &format!("legacy get_info, {what}"),
                errno(&info(g, mh, true)),
                libc::EINVAL,
            );
            f.eq(
                &format!("callback flag, {what}"),
                callback_flag(g, mh),
                Err(Error::InvalidHandle),
            );
        };
        refused(&mut f, "another gdr_t's handle", other.g, mh);
        // A record a pin of this session has reserved and not pinned yet.
        if let Some((r, _)) = HANDLES.allocate() {
            let serial = SESSIONS
                .lookup(on.g)
                .map_or(0, |s| s.serial.load(Ordering::SeqCst));
            r.owner.store(serial, Ordering::Relaxed);
            r.state.store(state::RESERVED, Ordering::Release);
            on.route(r);
            refused(&mut f, "a reserved record", on.g, r.address());
            r.free();
        }
        let _ = unpin(on.g, mh);
        refused(&mut f, "an unpinned handle", on.g, mh);
        f.0
    }

    /// [`info_v2_quick`] for `mh`: `None`, or the errno of its answer (0 when it stored one),
    /// and the count of queries it left on the record.
    fn quick(g: usize, mh: u64) -> (Option<i32>, u32) {
        let rc = info_v2_quick(g, mh, |_| 0, |e| e.errno());
        let users = HANDLES
            .lookup(mh as usize)
            .map_or(0, |h| h.users.load(Ordering::SeqCst));
        (rc, users)
    }

    #[test]
    fn the_quick_info_takes_only_the_quick_case_and_holds_nothing_after() {
        let on = On::open(Path::Quick);
        let other = On::open(Path::Quick);
        let locked = On::open(Path::Locked);
        let mh = on.pin(0x7650_0000, 0x10000).expect("pin");
        // The quick case: the test's driver has no descriptor, so its ioctl fails, with the
        // error of the full path (EBADF; ENOSYS under qemu-user), and the query is released.
        let full = errno(&info(on.g, mh, false));
        assert_ne!(full, 0);
        assert_eq!(quick(on.g, mh), (Some(full), 0));
        // Everything else is left to `info`, with nothing held and nothing asked.
        assert_eq!(quick(other.g, mh), (None, 0));
        assert_eq!(quick(on.g, mh + 8), (None, 0));
        assert_eq!(quick(on.g, 0), (None, 0));
        let through = locked.pin(0x7660_0000, 0x10000).expect("pin");
        assert_eq!(quick(locked.g, through), (None, 0));
        assert_eq!(
            info(locked.g, through, false).map(|i| i.va),
            Ok(0x7660_0000)
        );
        let _ = unpin(on.g, mh);
        assert_eq!(quick(on.g, mh), (None, 0));
    }

    #[test]
    fn a_quick_answer_is_confirmed_only_while_the_handle_names_the_pin_asked_about() {
        let on = On::open(Path::Quick);
        let mh = on.pin(0x7670_0000, 0x10000).expect("pin");
        let Ok((_, asked)) = quick_query(on.g, mh) else {
            panic!("the quick case did not apply");
        };
        assert!(asked.confirmed());
        let h = asked.h;
        // Mapped meanwhile: still the same pin.
        h.state.store(state::MAPPED, Ordering::SeqCst);
        assert!(asked.confirmed());
        h.state.store(state::PINNED, Ordering::SeqCst);
        // Another driver handle in the record: the driver was asked about another pin.
        let pin_handle = h.pin_handle.load(Ordering::SeqCst);
        h.pin_handle.store(pin_handle + 1, Ordering::SeqCst);
        assert!(!asked.confirmed());
        h.pin_handle.store(pin_handle, Ordering::SeqCst);
        // Being unpinned, or unpinned: the answer may describe another buffer.
        h.state.store(state::UNPINNING, Ordering::SeqCst);
        assert!(!asked.confirmed());
        h.state.store(state::PINNED, Ordering::SeqCst);
        assert!(asked.confirmed());
        let _ = unpin(on.g, mh);
        assert!(!asked.confirmed());
        // Unconfirmed, a query starts again through the session, which refuses the handle.
        assert_eq!(info(on.g, mh, false), Err(Error::InvalidHandle));
    }

    #[test]
    fn both_paths_refuse_the_same_queries() {
        for path in PATHS {
            assert_eq!(refusals(path), Vec::<String>::new(), "{path:?}");
        }
    }
}
