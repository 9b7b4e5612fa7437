//! `gdr_pin_buffer(_v2)`: no session lock; the record the pin reserves names its session and
//! holds it open (see [`open`](mod@super::open) for the other side).

use super::lookup::{already_closed, check_opener, open_unlocked, session_record};
use super::state::{self, Reserved};
use super::HANDLES;
use crate::backend::{Backend, PinRequest};
use crate::error::{Error, Result};
use crate::hint::cold_path;
use std::sync::atomic::{fence, Ordering};

/// `gdr_pin_buffer(_v2)`: pins and returns the new `gdr_mh_t.h`.
#[inline(always)]
pub fn pin(g: usize, req: &PinRequest) -> Result<u64> {
    let rec = session_record(g)?;
    check_opener(rec, g)?;
    let serial = rec.serial.load(Ordering::Acquire);
    // The allocation number orders the pins, so that `gdr_close` releases the newest first
    // as upstream does.
    let Some((h, seq)) = HANDLES.allocate() else {
        gdr_err!("error while allocating memory");
        return Err(Error::NoMemory);
    };
    // The record names its session before the pin looks at the session again, and
    // `gdr_close` marks the session closing before it looks for its records (both sides
    // fenced): either this pin sees the mark, or `gdr_close` finds the record and waits for
    // the pin to end (see `start_release_mapped`). So the pin needs no session lock.
    h.owner.store(serial, Ordering::Relaxed);
    h.state.store(state::RESERVED, Ordering::Relaxed);
    // Gives the slot back if the pin fails or the backend panics.
    let reserved = Reserved(h);
    fence(Ordering::SeqCst);
    if rec.closing.load(Ordering::Relaxed) != 0
        || serial == 0
        || rec.serial.load(Ordering::Relaxed) != serial
    {
        cold_path();
        return Err(already_closed(g));
    }
    // SAFETY: this pin holds the record it reserved for the session, which was open and not
    // closing after the record named it (above).
    let Some(open) = (unsafe { open_unlocked(rec) }) else {
        cold_path();
        return Err(already_closed(g));
    };
    let p = open.backend.pin(req)?;
    let h = reserved.keep();
    h.set_pin(&p, open.serial, open.backend.kind(), open.page_size);
    // A record outside wipe-on-fork memory does not prove its caller: calls on it go
    // through the session, which checks the process.
    h.set_session(
        g,
        open.backend
            .driver()
            .filter(|_| HANDLES.wiped_by_the_kernel()),
    );
    h.seq.store(seq, Ordering::Relaxed);
    open.live.fetch_add(1, Ordering::Relaxed);
    h.state.store(state::PINNED, Ordering::Release);
    Ok(h.address())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::testing::*;

    #[test]
    fn failed_pin_leaves_no_handle() {
        let (g, calls) = fake();
        assert_eq!(pin(g, &pin_req(0, 1)).unwrap_err().errno(), libc::EINVAL);
        close(g).unwrap();
        assert_eq!(calls.unpins.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_panicking_backend_leaves_the_session_usable() {
        let (g, calls) = fake();
        let r = std::panic::catch_unwind(|| pin(g, &pin_req(0xdead_0000, 1)));
        assert!(r.is_err(), "the injected panic propagates to the boundary");
        // No lock is poisoned or held: the session works and closes.
        let mh = pin(g, &pin_req(0x7a00_0000, 0x10000)).unwrap();
        let r = std::panic::catch_unwind(|| map(g, mh, 0x5_0000_0000, 0));
        assert!(r.is_err());
        // The handle went back to "pinned" and maps again.
        let va = map(g, mh, 0x10000, 0).unwrap();
        unmap(g, mh, va, 0x10000).unwrap();
        close(g).unwrap();
        assert_eq!(calls.unpins.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn concurrent_use_of_one_session() {
        let (g, calls) = fake();
        let threads: Vec<_> = (0..8)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..50u64 {
                        let mh = pin(g, &pin_req(0x7400_0000 + (t * 64 + i) * 0x10000, 0x10000))
                            .unwrap();
                        let va = map(g, mh, 0x10000, 0).unwrap();
                        copy_target(mh, va, 0, 0x10000, "t").unwrap();
                        unmap(g, mh, va, 0x10000).unwrap();
                        unpin(g, mh).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // Racing map/unpin on one handle: exactly one unpin wins.
        let mh = pin(g, &pin_req(0x7500_0000, 0x10000)).unwrap();
        let results: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(move || unpin(g, mh).is_ok()))
            .collect();
        let wins = results
            .into_iter()
            .map(|t| t.join().unwrap())
            .filter(|w| *w)
            .count();
        assert_eq!(wins, 1);
        close(g).unwrap();
        assert_eq!(calls.pins.load(Ordering::SeqCst), 401);
        assert_eq!(calls.unpins.load(Ordering::SeqCst), 401);
        assert_eq!(
            calls.maps.load(Ordering::SeqCst),
            calls.unmaps.load(Ordering::SeqCst)
        );
    }
}
