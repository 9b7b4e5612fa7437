//! Queries on a handle (`gdr_get_info_v2`, the legacy `gdr_get_info`,
//! `gdr_get_callback_flag`), which hold it by counting themselves in its `users`, and the
//! session's own queries (`gdr_get_attribute`, `gdr_driver_get_version`).

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
/// the session's lock: `Ok` when the decision on a handle ([`accept_handle`]) takes `mh` as a
/// handle of `g` (by the session it recorded) and its queries go to gdrdrv, with what the
/// query needs of the driver and the handle held against an unpin for as long as the guard
/// lives. That also holds the session open, because `gdr_close` unpins every handle of the
/// session (waiting for their queries) before it takes the open state out of the record.
/// `Err` passes what was found to [`query_through_session`].
///
/// The quick case reads the handle record only: a pinned handle whose recorded session is
/// `g` proves that `g` is an open session (one that closed released its handles first), and,
/// in wipe-on-fork memory, that the caller is the process that opened it (see
/// [`super::lookup::session_and_handle`]); the record also keeps what the query needs of a
/// gdrdrv backend, which a pin stores only in wipe-on-fork memory. Every other case is cold,
/// so that the quick one is laid out as one straight run of code.
#[inline(always)]
fn quick_query(g: usize, mh: u64) -> std::result::Result<(gdrdrv::Driver, InUse), Option<InUse>> {
    quick_query_with(g, mh, HandleRecord::driver)
}

/// [`quick_query`] with the handle's driver taken by `driver` (`None`: not the quick case).
#[inline(always)]
fn quick_query_with(
    g: usize,
    mh: u64,
    driver: impl FnOnce(&HandleRecord) -> Option<gdrdrv::Driver>,
) -> std::result::Result<(gdrdrv::Driver, InUse), Option<InUse>> {
    let Some(h) = usize::try_from(mh).ok().and_then(|a| HANDLES.lookup(a)) else {
        cold_path();
        return Err(None);
    };
    // Counted before the state is read (both SeqCst), so that an unpin that moved the state
    // on after this read sees the count and waits (see `Open::release`).
    h.users.fetch_add(1, Ordering::SeqCst);
    let held = InUse(h);
    let mine = || h.session.load(Ordering::Acquire) == g;
    if accept_handle(h.state.load(Ordering::SeqCst), mine).is_ok() {
        if let Some(q) = driver(h) {
            #[cfg(test)]
            super::testing::took(super::testing::Path::Quick);
            return Ok((q, held));
        }
    }
    cold_path();
    Err(Some(held))
}

/// A query that [`quick_query`] did not accept: a handle whose queries go through the session
/// (DMA-BUF), or anything to refuse, with the checks and errors of
/// [`super::lookup::session_and_handle`] (the same decision, [`accept_handle`], on the
/// handle's owner). `held` is the record at `mh`, already counted in its `users`.
#[cold]
#[inline(never)]
fn query_through_session(g: usize, mh: u64, held: Option<InUse>) -> Result<(&'static Open, InUse)> {
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
        Ok((q, h)) => q.callback_flag(h.pin_handle.load(Ordering::Acquire)),
        Err(held) => callback_flag_through_session(g, mh, held),
    }
}

/// [`callback_flag`] outside the quick case (see [`query_through_session`]).
#[cold]
#[inline(never)]
fn callback_flag_through_session(g: usize, mh: u64, held: Option<InUse>) -> Result<bool> {
    let (open, h) = query_through_session(g, mh, held)?;
    open.backend.callback_flag(&h.pin())
}

/// `gdr_get_info_v2`'s quick case alone, for the C entry, which runs it outside the panic
/// guard: `None` when it does not apply (nothing held, nothing asked of the driver; [`info`]
/// then decides from the start), else what `store` made of the driver's answer, or what
/// `failed` made of its error (after the handle's release). It applies to [`quick_query`]'s
/// case when the driver has the v2 query; the legacy query and older drivers take [`info`].
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
    let Ok((q, h)) = quick_query_with(g, mh, HandleRecord::driver_with_info_v2) else {
        cold_path();
        return None;
    };
    Some(
        match q.info_v2_with(h.pin_handle.load(Ordering::Acquire), store) {
            Ok(r) => r,
            Err(e) => failed(release_failed(h, e)),
        },
    )
}

/// `gdr_get_info_v2` (`legacy` = false) or the legacy v1 `gdr_get_info` (`legacy` = true):
/// what the driver reports for `mh`, passed to `store`. (Storing here rather than returning
/// the `Info` keeps the quick case's result in registers, apart from the cold one's.)
#[inline(always)]
pub fn info(g: usize, mh: u64, legacy: bool, store: impl FnOnce(&Info)) -> Result<()> {
    match quick_query(g, mh) {
        Ok((q, h)) => match q.info_with(h.pin_handle.load(Ordering::Acquire), legacy, store) {
            Ok(()) => Ok(()),
            Err(e) => Err(release_failed(h, e)),
        },
        Err(held) => {
            cold_path();
            let i = info_through_session(g, mh, held, legacy)?;
            store(&i);
            Ok(())
        }
    }
}

/// Releases a query that the driver refused and returns its error. Out of line, so that
/// the quick case's release is not shared with it.
#[cold]
#[inline(never)]
fn release_failed(h: InUse, e: Error) -> Error {
    drop(h);
    e
}

/// [`info`] outside the quick case (see [`query_through_session`]).
#[cold]
#[inline(never)]
fn info_through_session(g: usize, mh: u64, held: Option<InUse>, legacy: bool) -> Result<Info> {
    let (open, h) = query_through_session(g, mh, held)?;
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
    fn both_paths_refuse_the_same_queries() {
        for path in PATHS {
            assert_eq!(refusals(path), Vec::<String>::new(), "{path:?}");
        }
    }
}
