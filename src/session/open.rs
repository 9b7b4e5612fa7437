//! `gdr_open` and `gdr_close` (also in a forked child, on its parent's `gdr_t`), and the fork
//! handlers that keep the record registries usable in a child.

use super::lookup::{already_closed, check_open, session_record};
use super::records::{HandleRecord, Open, SessionRecord};
use super::state;
use super::unpin::Release;
use super::{HANDLES, SESSIONS};
use crate::backend::{self, Backend, Opened};
use crate::error::{Error, Result};
use crate::{copy, process, sys};
use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};

/// Source of session serial numbers (never 0 for a live session).
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

impl Open {
    /// Every record of this session, newest first: the handles it has pinned and not
    /// released, those an unpin is releasing and those a pin has reserved. Called only under
    /// the session's write lock, once the session is marked closing, where no call that
    /// takes the lock is under way; pins, and calls that hold a handle instead (see
    /// [`state::hold`]), may be, and [`Open::release`] waits for them.
    pub(super) fn handles_newest_first(&self) -> Vec<&'static HandleRecord> {
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
    rec.serial.store(serial, Ordering::Relaxed);
    rec.opener.store(process::token(), Ordering::Release);
    Ok(rec as *const SessionRecord as usize)
}

/// `gdr_close`: unmaps and unpins every handle the session still owns (going on past
/// failures), closes the backend and frees the session. Returns the first error.
pub fn close(g: usize) -> Result<()> {
    let rec = session_record(g)?;
    if check_open(rec, g)? != process::token() {
        return close_foreign(rec, g);
    }
    let mut guard = rec.open.write();
    // Read through a shared reference until every handle is released: pins and calls on a
    // handle read the `Open` without the lock while they hold a record of this session.
    let Some(open) = guard.as_ref() else {
        return Err(already_closed(g));
    };
    // Before the records are looked for: a pin either sees this or is found (see `pin`).
    rec.closing.store(1, Ordering::Relaxed);
    fence(Ordering::SeqCst);
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
    drop(guard.take());
    rec.fd.store(-1, Ordering::Release);
    rec.gdrdrv_version.store(0, Ordering::Release);
    rec.opener.store(0, Ordering::Release);
    rec.opener_pid.store(0, Ordering::Relaxed);
    // The serial goes first: a late pin that reads the mark cleared then reads serial 0.
    rec.serial.store(0, Ordering::SeqCst);
    rec.closing.store(0, Ordering::SeqCst);
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
    rec.serial.store(0, Ordering::Relaxed);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::testing::*;

    #[test]
    fn close_goes_on_past_failures_and_returns_the_first() {
        let (g, calls) = fake();
        for i in 0..3 {
            pin(g, &pin_req(0x7200_0000 + i * 0x10000, 0x10000)).unwrap();
        }
        calls.fail_unpin.store(true, Ordering::SeqCst);
        assert_eq!(close(g).unwrap_err().errno(), libc::EIO);
        assert_eq!(calls.unpins.load(Ordering::SeqCst), 3);
        // Newest first, as upstream walks its list.
        assert_eq!(*calls.unpinned.lock(), vec![32, 16, 0]);
        assert_eq!(calls.closes.load(Ordering::SeqCst), 1);
        assert_eq!(close(g).unwrap_err(), Error::InvalidHandle);
    }

    #[test]
    fn close_waits_for_a_call_that_holds_a_handle() {
        // What a map, an unmap or an unpin that took no session lock holds while it calls the
        // driver, what it leaves, and the unpins close then still makes.
        for (busy, settled, unpins) in [
            (state::MAPPING, state::MAPPED, 1),
            (state::UNMAPPING, state::PINNED, 1),
            (state::UNPINNING, state::FREE, 0),
        ] {
            let (g, calls) = fake();
            let mh = pin(g, &pin_req(0x7340_0000, 0x10000)).unwrap();
            let va = map(g, mh, 0x10000, 0).unwrap();
            if settled != state::MAPPED {
                // The unmap that the call under way has made, or follows.
                unmap(g, mh, va, 0x10000).unwrap();
            }
            let h = HANDLES.lookup(mh as usize).unwrap();
            h.state.store(busy, Ordering::SeqCst);
            let closing = std::thread::spawn(move || close(g));
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(
                !closing.is_finished(),
                "close must wait for the state to settle"
            );
            assert_eq!(calls.unpins.load(Ordering::SeqCst), 0);
            if settled == state::FREE {
                h.free();
            } else {
                h.state.store(settled, Ordering::SeqCst);
            }
            closing.join().unwrap().unwrap();
            assert_eq!(calls.unmaps.load(Ordering::SeqCst), 1);
            assert_eq!(calls.unpins.load(Ordering::SeqCst), unpins);
            assert_eq!(h.state.load(Ordering::SeqCst), state::FREE);
        }
    }

    #[test]
    fn close_waits_for_its_pins_and_leaves_other_sessions_reserved_records() {
        let (g, _calls) = fake();
        let (other, _) = fake();
        let serial_of = |g: usize| SESSIONS.lookup(g).unwrap().serial.load(Ordering::Relaxed);
        // What a pin in flight holds: a reserved record that names its session.
        let (mine, _) = HANDLES.allocate().unwrap();
        mine.owner.store(serial_of(g), Ordering::Relaxed);
        mine.state.store(state::RESERVED, Ordering::Release);
        let (theirs, _) = HANDLES.allocate().unwrap();
        theirs.owner.store(serial_of(other), Ordering::Relaxed);
        theirs.state.store(state::RESERVED, Ordering::Release);
        let closing = std::thread::spawn(move || close(g));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !closing.is_finished(),
            "close must wait for a pin of its session"
        );
        // Once marked closing, the session takes no new pin.
        assert_eq!(
            pin(g, &pin_req(0x7350_0000, 0x10000)),
            Err(Error::InvalidHandle)
        );
        // The pin in flight fails and gives its record back.
        mine.free();
        closing.join().unwrap().unwrap();
        assert_eq!(theirs.state.load(Ordering::Acquire), state::RESERVED);
        theirs.free();
        assert_eq!(theirs.owner.load(Ordering::Relaxed), 0);
        close(other).unwrap();
    }
}
