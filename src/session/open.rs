//! `gdr_open` and `gdr_close` (also in a forked child, on its parent's `gdr_t`), and the fork
//! handlers that keep the record registries usable in a child.

use super::records::{HandleRecord, Open, SessionRecord};
use super::state;
use super::unpin::Release;
use super::{already_closed, opener, session_record, HANDLES, SESSIONS};
use crate::backend::{self, Opened};
use crate::error::{Error, Result};
use crate::{copy, process, sys};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Source of session serial numbers (never 0 for a live session).
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

impl Open {
    /// Every handle of this session, newest first. Called under the session's write lock,
    /// where no other call on the session is under way, so each is pinned or mapped.
    fn handles_newest_first(&self) -> Vec<&'static HandleRecord> {
        let mut mine = Vec::new();
        HANDLES.for_each(|h| {
            if h.state.load(Ordering::Acquire) != state::FREE
                && h.owner.load(Ordering::Acquire) == self.serial
            {
                mine.push(h);
            }
        });
        mine.sort_unstable_by_key(|h| std::cmp::Reverse(h.seq.load(Ordering::Relaxed)));
        mine
    }
}

/// `gdr_open`: opens a backend and returns the new session's address.
pub fn open() -> Result<usize> {
    let backend = backend::open()?;
    copy::log_cpu_flags();
    open_with(backend)
}

thread_local! {
    /// The registry locks the forking thread holds between the fork handlers.
    static FORK_HELD: std::cell::RefCell<Vec<crate::registry::ForkGuard>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

extern "C" fn registries_before_fork() {
    let guards = [SESSIONS.hold_for_fork(), HANDLES.hold_for_fork()];
    FORK_HELD.with(|held| held.borrow_mut().extend(guards));
}

extern "C" fn registries_after_fork() {
    // Newest first: HANDLES, then SESSIONS.
    FORK_HELD.with(|held| {
        let mut held = held.borrow_mut();
        while held.pop().is_some() {}
    });
}

extern "C" fn child_after_fork() {
    process::forget_after_fork();
    registries_after_fork();
    // Where the kernel cannot wipe the handle records in a child, a child made by fork
    // forgets them here, so that its copies through them are refused as well.
    if !HANDLES.wiped_by_the_kernel() {
        HANDLES.for_each(|h| h.state.store(state::FREE, Ordering::Relaxed));
    }
}

/// Makes the record registries fork-safe once per process (their allocation locks are taken
/// around `fork`, so a child never inherits one held by a thread that does not exist there),
/// and clears the process token in a child where the kernel cannot (see [`crate::process`]).
fn register_fork_handlers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Err(e) = sys::at_fork(
            registries_before_fork,
            registries_after_fork,
            child_after_fork,
        ) {
            gdr_warn!(
                "cannot register fork handlers ({}): gdr_open in a forked child may block",
                e
            );
        }
    });
}

/// `gdr_open` on a given backend.
pub(crate) fn open_with(backend: Opened) -> Result<usize> {
    register_fork_handlers();
    let Some((rec, _)) = SESSIONS.allocate() else {
        gdr_err!("error while allocating memory");
        let _ = backend.close();
        return Err(Error::NoMemory);
    };
    let page_size = sys::page_size();
    rec.fd.store(backend.fd(), Ordering::Release);
    rec.memhs.store(0, Ordering::Release);
    rec.page_size.store(page_size, Ordering::Release);
    rec.page_mask.store(!(page_size - 1), Ordering::Release);
    rec.page_shift
        .store(page_size.trailing_zeros() as u8, Ordering::Release);
    rec.gdrdrv_version
        .store(backend.driver_version_word(), Ordering::Release);
    rec.cache_backend
        .store(backend.kind() as u32, Ordering::Release);
    let serial = NEXT_SERIAL.fetch_add(1, Ordering::Relaxed);
    *rec.open.write() = Some(Open {
        backend,
        serial,
        page_size,
        live: AtomicUsize::new(0),
    });
    rec.opener_pid.store(sys::getpid(), Ordering::Relaxed);
    rec.opener.store(process::token(), Ordering::Release);
    Ok(rec as *const SessionRecord as usize)
}

/// `gdr_close`: unmaps and unpins every handle the session still owns (going on past
/// failures), closes the backend and frees the session. Returns the first error.
pub fn close(g: usize) -> Result<()> {
    let rec = session_record(g)?;
    if opener(rec, g)? != process::token() {
        return close_foreign(rec, g);
    }
    let mut guard = rec.open.write();
    let Some(open) = guard.take() else {
        return Err(already_closed(g));
    };
    let mut first: Result<()> = Ok(());
    // Most recently pinned first, as upstream walks its list.
    for h in open.handles_newest_first() {
        if let Err(e) = open.release(h, Release::Close) {
            gdr_err!(
                "error unpinning buffer inside gdr_close (errno={}/{})",
                e.errno(),
                sys::strerror(e.errno())
            );
            first = first.and(Err(e));
        }
    }
    first = first.and(open.backend.close());
    drop(open);
    rec.fd.store(-1, Ordering::Release);
    rec.gdrdrv_version.store(0, Ordering::Release);
    rec.opener.store(0, Ordering::Release);
    rec.opener_pid.store(0, Ordering::Relaxed);
    drop(guard);
    SESSIONS.release(rec);
    first
}

/// `gdr_close` in a forked child on its parent's `gdr_t`: issues no ioctl and never waits on
/// a lock a parent thread may have held at fork time. The child's copy of the driver fd is
/// closed (it would otherwise keep the parent's pins alive after the parent closes); the
/// pins stay with the parent. Returns 0 when the child's copy owned no buffers, else EACCES.
fn close_foreign(rec: &'static SessionRecord, g: usize) -> Result<()> {
    let me = sys::getpid();
    let opener = rec.opener_pid.load(Ordering::Relaxed);
    let Some(mut guard) = rec.open.try_write() else {
        gdr_err!(
            "gdr_close in process {} of gdr_t {:#x}, opened by process {} that was inside a call on it \
             at fork time: only this process's copy of the driver fd is closed",
            me,
            g,
            opener
        );
        let fd = rec.fd.swap(-1, Ordering::AcqRel);
        if fd >= 0 {
            let _ = sys::close(fd);
        }
        return Err(Error::ForeignProcess);
    };
    let Some(open) = guard.take() else {
        return Err(already_closed(g));
    };
    let owned = open.live.load(Ordering::Relaxed);
    let fd = open.backend.fd();
    // The backend's teardown (driver handles, CUDA contexts) belongs to the opener; this
    // process only drops its own copies.
    std::mem::forget(open);
    if fd >= 0 {
        let _ = sys::close(fd);
    }
    rec.fd.store(-1, Ordering::Release);
    rec.opener.store(0, Ordering::Release);
    drop(guard);
    SESSIONS.release(rec);
    if owned == 0 {
        return Ok(());
    }
    gdr_err!(
        "gdr_close in process {} of gdr_t {:#x} opened by process {}: its pinned buffers stay with the opener",
        me,
        g,
        opener
    );
    Err(Error::ForeignProcess)
}
