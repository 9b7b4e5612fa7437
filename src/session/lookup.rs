//! Finding what a call names: the session record behind a `gdr_t` and the handle record behind
//! a `gdr_mh_t`, each checked before it is read (a registry lookup), the session's process
//! check, and the session's open state, held shared (the locked path of every call) or read
//! while the caller holds one of its records (the quick paths).

use super::records::{HandleRecord, Open, SessionRecord};
use super::refuse::accept_owned;
use super::{HANDLES, SESSIONS};
use crate::error::{Error, Result};
use crate::hint::cold_path;
use crate::{process, sys};
use parking_lot::{MappedRwLockReadGuard, RwLockReadGuard};
use std::sync::atomic::Ordering;

/// Refuses a closed session without reading the process token, a page of its own (enough
/// where the caller is known to be the opener, see [`session_and_handle`]); returns the
/// opener's token.
#[inline(always)]
pub(super) fn check_open(rec: &SessionRecord, g: usize) -> Result<u64> {
    let opener = rec.opener.load(Ordering::Acquire);
    if opener == 0 {
        cold_path();
        return Err(already_closed(g));
    }
    Ok(opener)
}

/// Checks, without taking any lock, that `rec` is open and owned by the calling process.
#[inline(always)]
pub(super) fn check_opener(rec: &SessionRecord, g: usize) -> Result<()> {
    if check_open(rec, g)? != process::token() {
        log_foreign(rec, g);
        return Err(Error::ForeignProcess);
    }
    Ok(())
}

#[cold]
fn log_foreign(rec: &SessionRecord, g: usize) {
    gdr_err!(
        "gdr_t {:#x} was opened by process {} and cannot be used in process {} (a forked child?): \
         call gdr_open in this process instead",
        g,
        rec.opener_pid.load(Ordering::Relaxed),
        sys::getpid()
    );
}

/// The open session behind the `gdr_t` value `g`, held shared until the guard drops, once
/// [`check_opener`] has refused a closed session or another process (no lock is taken
/// before that check).
#[inline(always)]
pub(super) fn session(g: usize) -> Result<OpenRef> {
    let rec = session_record(g)?;
    check_opener(rec, g)?;
    locked(rec, g)
}

/// [`session`] for a call on the handle `mh`, and that handle: the record behind `mh` once
/// the decision on a handle ([`super::refuse::accept_handle`]) accepts it, on its owner and
/// this session's serial. The record is looked up once. A live handle of this session in
/// wipe-on-fork memory already proves that the caller is the process that opened it (such
/// records read as free in every child, see [`crate::registry`] and
/// [`HandleRecord::proves_caller`]), so the process token is read only when the handle does
/// not prove it.
#[inline(always)]
pub(super) fn session_and_handle(g: usize, mh: u64) -> Result<(OpenRef, &'static HandleRecord)> {
    let rec = session_record(g)?;
    let h = usize::try_from(mh).ok().and_then(|a| HANDLES.lookup(a));
    let here = h.is_some_and(|h| {
        h.proves_caller() && accept_owned(h, rec.serial.load(Ordering::Acquire)).is_ok()
    });
    if here {
        check_open(rec, g)?;
    } else {
        cold_path();
        check_opener(rec, g)?;
    }
    let open = locked(rec, g)?;
    let Some(h) = h else {
        return Err(not_issued(mh));
    };
    match accept_owned(h, open.serial) {
        Ok(()) => Ok((open, h)),
        Err(r) => Err(r.refuse(mh)),
    }
}

/// Refuses `mh`, which is no handle record of this library.
#[cold]
#[inline(never)]
pub(super) fn not_issued(mh: u64) -> Error {
    gdr_err!(
        "invalid gdr_mh_t 0x{:x}: not a handle issued by this library",
        mh
    );
    Error::InvalidHandle
}

/// Refuses `g`, a session that was closed.
#[cold]
#[inline(never)]
pub(super) fn already_closed(g: usize) -> Error {
    gdr_err!("invalid gdr_t {:#x}: already closed", g);
    Error::InvalidHandle
}

/// The session record at `g`, or an error when `g` is not one.
#[inline(always)]
pub(super) fn session_record(g: usize) -> Result<&'static SessionRecord> {
    SESSIONS.lookup(g).ok_or_else(|| not_opened(g))
}

/// Refuses `g`, which is no session record of this library.
#[cold]
#[inline(never)]
fn not_opened(g: usize) -> Error {
    gdr_err!("invalid gdr_t {:#x}: not opened by this library", g);
    Error::InvalidHandle
}

/// A session's open state, held shared.
pub(super) type OpenRef = MappedRwLockReadGuard<'static, Open>;

/// The open state of `rec`, held shared.
#[inline(always)]
pub(super) fn locked(rec: &'static SessionRecord, g: usize) -> Result<OpenRef> {
    RwLockReadGuard::try_map(rec.open.read(), Option::as_ref).map_err(|_| already_closed(g))
}

/// The record at `mh` when it is a gdrdrv handle of the session `g` that proves its caller
/// ([`HandleRecord::proves_caller`]), and the page size a map or an unmap of it rounds to
/// (read from the same word): a map, an unmap or an unpin of it then needs no session lock
/// (see [`super::state::hold`]). `None` for anything else, valid or not, which goes through
/// the session: this chooses the path, the call's decision says what it accepts.
#[inline(always)]
pub(super) fn quick_handle(g: usize, mh: u64) -> Option<(&'static HandleRecord, usize)> {
    let h = usize::try_from(mh).ok().and_then(|a| HANDLES.lookup(a))?;
    let page_size = h.proven_page_size()?;
    (h.session.load(Ordering::Acquire) == g).then_some((h, page_size))
}

/// The session record at `g`, read without a registry lookup because the caller holds a
/// record that names it.
///
/// # Safety
/// The caller holds a record whose `session` is `g`, as [`open_unlocked`] requires: a pin
/// names only a session record that a lookup found, and records lie in slabs that are never
/// unmapped.
#[inline(always)]
pub(super) unsafe fn held_session(g: usize) -> &'static SessionRecord {
    // SAFETY: `g` is the address of a session record (the caller's contract, above), which
    // lives as long as the process.
    unsafe { &*(g as *const SessionRecord) }
}

/// The open state of `rec`, read without its lock.
///
/// # Safety
/// The caller holds a record of this session: a live handle counted in its `users` (see
/// [`super::query`]), a handle in a transient state (see [`super::state::hold`]), or the
/// record a pin has reserved (see [`super::pin()`]). The session's `Open` was stored before
/// any of its records was taken, and `gdr_close` reads it only through shared references
/// until every record of the session is released, which waits for each of these; only then
/// does it take the `Open` out. So the `Option` is `Some` and stays unchanged while the
/// caller holds the record.
#[inline(always)]
pub(super) unsafe fn open_unlocked(rec: &'static SessionRecord) -> Option<&'static Open> {
    // SAFETY: the caller's contract, above.
    unsafe { (*rec.open.data_ptr()).as_ref() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::testing::*;

    #[test]
    fn forged_and_foreign_values_are_refused_without_touching_them() {
        let (g1, _) = fake();
        let (g2, c2) = fake();
        let mh = pin(g1, &pin_req(0x7100_0000, 0x10000)).unwrap();
        // A handle of g1 used on g2.
        assert_eq!(unpin(g2, mh).unwrap_err(), Error::InvalidHandle);
        assert_eq!(info(g2, mh, false).unwrap_err(), Error::InvalidHandle);
        assert_eq!(c2.unpins.load(Ordering::SeqCst), 0);
        // A stack copy of a record, misaligned pointers, NULL, garbage.
        let copy = SessionRecord::new_free();
        let forged_g = &copy as *const SessionRecord as usize;
        assert_eq!(
            pin(forged_g, &pin_req(0x7100_0000, 1)).unwrap_err(),
            Error::InvalidHandle
        );
        assert_eq!(close(forged_g).unwrap_err(), Error::InvalidHandle);
        let hcopy = HandleRecord::new_free();
        let forged_h = &hcopy as *const HandleRecord as u64;
        assert_eq!(
            map(g1, forged_h, 4096, 0).unwrap_err(),
            Error::InvalidHandle
        );
        assert_eq!(
            copy_target(forged_h, 0, 0, 0, "t").unwrap_err(),
            Error::InvalidHandle
        );
        assert_eq!(unpin(g1, mh + 8).unwrap_err(), Error::InvalidHandle);
        assert_eq!(unpin(g1, 0).unwrap_err(), Error::InvalidHandle);
        assert_eq!(unpin(g1, u64::MAX).unwrap_err(), Error::InvalidHandle);
        assert_eq!(close(0).unwrap_err(), Error::InvalidHandle);
        assert_eq!(close(g1 + 4).unwrap_err(), Error::InvalidHandle);
        // A gdr_t used as a handle and the other way round.
        assert_eq!(unpin(g1, g2 as u64).unwrap_err(), Error::InvalidHandle);
        assert_eq!(close(mh as usize).unwrap_err(), Error::InvalidHandle);
        unpin(g1, mh).unwrap();
        close(g1).unwrap();
        close(g2).unwrap();
    }
}
