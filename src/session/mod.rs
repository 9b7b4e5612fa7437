//! Sessions (`gdr_t`) and pinned-buffer records (`gdr_mh_t`): validation, bookkeeping and the
//! per-handle state machine, between the C entry points ([`crate::ffi`]) and a backend.
//!
//! A `gdr_t` is the address of a [`SessionRecord`]; a `gdr_mh_t.h` is the address of a
//! [`HandleRecord`]. Both live in [`Registry`] slabs, so every value C hands back is checked
//! ([`Registry::lookup`]) before it is read, and is then read only through atomics. The first
//! 48 bytes of a session record and the first 104 bytes of a handle record keep upstream's
//! `struct gdr` / `gdr_memh_t` layouts, which gdrcopy's own tests read.
//!
//! Every call but the copies takes one path: [`session`] (or [`session_and_handle`]) finds
//! the session, refuses another process and holds the session's lock shared; the call's
//! decision says what it accepts; the backend does it; the record is updated. Only `gdr_open`
//! and `gdr_close` take the lock exclusive, so `gdr_close` finds every handle of its session
//! settled (pinned or mapped) and releases them newest first. A map, an unmap or an unpin
//! moves its handle through a transient state by compare-and-swap ([`state`]), so two threads
//! cannot map, unmap or unpin one handle at once; a query confirms after the backend's
//! answer that its handle still names the pin it asked about. Copies take no lock:
//! [`check_copy`] reads the handle record with atomic loads only.
//!
//! Processes: a session names the process that opened it by its [`crate::process::token`],
//! which differs in every child however it was created, so a child is refused (EACCES) before
//! it reaches the driver or a lock; handle records live in wipe-on-fork memory, so in a child
//! every inherited handle reads as free and a copy through it is refused (EINVAL).
//!
//! One file per concern: [`records`] (the two records and their layout), [`state`] (handle
//! states and the holds on a handle), [`open`](mod@open) (`gdr_open`, `gdr_close`, fork
//! handlers), [`pin`](mod@pin), [`map`](mod@map) (map and unmap), [`unpin`](mod@unpin),
//! [`query`] (queries, attributes, versions) and [`copy`] (a copy's check); each call's
//! decision (`accept_*`) lives beside it, and the tests, with the session layer's fake
//! backend, in `tests.rs`.

mod copy;
mod map;
mod open;
mod pin;
mod query;
mod records;
pub mod state;
#[cfg(test)]
mod tests;
mod unpin;

pub use copy::{check_copy, CopyRefusal};
pub use map::{map, unmap};
pub use open::{close, open};
pub use pin::pin;
pub use query::{attribute, callback_flag, driver_version, info};
pub use records::{HandleRecord, SessionRecord};
pub use unpin::unpin;

use crate::error::{Error, Result};
use crate::registry::{Registry, WipedRegistry};
use crate::{process, sys};
use parking_lot::{MappedRwLockReadGuard, RwLockReadGuard};
use records::Open;
use std::sync::atomic::Ordering;

/// Every session record ever handed out.
static SESSIONS: Registry<SessionRecord> = Registry::new();
/// Every handle record ever handed out; all of them read as free in a child process, so that
/// a child's copy through an inherited handle is refused by the copy's state check.
// SAFETY: a `HandleRecord` is atomic integers only, and all of them are 0 in its free state
// (`state::FREE`; see `HandleRecord::new_free`).
static HANDLES: WipedRegistry<HandleRecord> = unsafe { WipedRegistry::wiped_in_children() };

/// A session's open state, held shared.
type OpenRef = MappedRwLockReadGuard<'static, Open>;

/// The session record at `g`, or its refusal when `g` is not one.
fn session_record(g: usize) -> Result<&'static SessionRecord> {
    SESSIONS.lookup(g).ok_or_else(|| {
        gdr_err!("invalid gdr_t {:#x}: not opened by this library", g);
        Error::InvalidHandle
    })
}

/// The opener's token of the open session `rec`, read without a lock (a child must not touch
/// a lock that a thread of its parent may have held at fork time).
fn opener(rec: &SessionRecord, g: usize) -> Result<u64> {
    match rec.opener.load(Ordering::Acquire) {
        0 => Err(already_closed(g)),
        token => Ok(token),
    }
}

/// The open session behind `g`, held shared, once a closed session and another process
/// (EACCES) are refused.
fn session(g: usize) -> Result<OpenRef> {
    let rec = session_record(g)?;
    if opener(rec, g)? != process::token() {
        gdr_err!(
            "gdr_t {:#x} was opened by process {} and cannot be used in process {} (a forked child?): \
             call gdr_open in this process instead",
            g,
            rec.opener_pid.load(Ordering::Relaxed),
            sys::getpid()
        );
        return Err(Error::ForeignProcess);
    }
    RwLockReadGuard::try_map(rec.open.read(), Option::as_ref).map_err(|_| already_closed(g))
}

/// The handle record at `mh`, live or not, or its refusal when `mh` is not one.
fn record(mh: u64) -> Result<&'static HandleRecord> {
    usize::try_from(mh)
        .ok()
        .and_then(|a| HANDLES.lookup(a))
        .ok_or_else(|| {
            gdr_err!(
                "invalid gdr_mh_t 0x{:x}: not a handle issued by this library",
                mh
            );
            Error::InvalidHandle
        })
}

/// [`session`] for a call on the handle `mh`, and that handle, once [`accept_handle`] takes
/// it.
fn session_and_handle(g: usize, mh: u64) -> Result<(OpenRef, &'static HandleRecord)> {
    let open = session(g)?;
    let h = record(mh)?;
    accept_handle(h, open.serial).map_err(|r| r.refuse(mh))?;
    Ok((open, h))
}

/// Refuses `g`, a session that was closed.
#[cold]
fn already_closed(g: usize) -> Error {
    gdr_err!("invalid gdr_t {:#x}: already closed", g);
    Error::InvalidHandle
}

/// The decision on the handle of every call that names one: it holds a pin that is not being
/// released (PINNED to UNMAPPING) and belongs to the session whose serial is `serial`.
fn accept_handle(h: &HandleRecord, serial: u64) -> std::result::Result<(), HandleRefusal> {
    if !state::is_pinned(h.state.load(Ordering::SeqCst)) {
        return Err(HandleRefusal::NotPinned);
    }
    if h.owner.load(Ordering::Acquire) != serial {
        return Err(HandleRefusal::OtherSession);
    }
    Ok(())
}

/// Why [`accept_handle`] refused a handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HandleRefusal {
    /// Free, reserved by a pin in progress, or being unpinned.
    NotPinned,
    /// Pinned through another `gdr_t`.
    OtherSession,
}

impl HandleRefusal {
    /// Logs why the handle `mh` is refused; the error for it.
    #[cold]
    fn refuse(self, mh: u64) -> Error {
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
