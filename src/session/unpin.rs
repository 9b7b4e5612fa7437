//! `gdr_unpin_buffer`, and the release of a handle that `gdr_close` makes for each record of
//! its session: unmap if mapped, unpin, free the record whatever the driver said.

use super::records::{HandleRecord, Open};
use super::session_and_handle;
use super::state;
use crate::error::{Error, Result};
use std::sync::atomic::Ordering;

/// `gdr_unpin_buffer`: unmaps if still mapped, unpins, and frees the handle even when the
/// driver refuses.
pub fn unpin(g: usize, mh: u64) -> Result<()> {
    let (open, h) = session_and_handle(g, mh)?;
    open.release(h, Release::Unpin)
}

/// How [`Open::release`] treats a mapping it cannot remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Release {
    /// `gdr_unpin_buffer`: the handle stays pinned and mapped, for the caller to retry.
    Unpin,
    /// `gdr_close`: one more try, then on without it.
    Close,
}

impl Open {
    /// Unmaps (if mapped) and unpins `h`, then frees its record whatever the driver said;
    /// returns the first error. The caller holds the session's lock: shared for an unpin,
    /// exclusive for `gdr_close`, which then finds every handle settled, pinned or mapped.
    pub(super) fn release(&self, h: &'static HandleRecord, how: Release) -> Result<()> {
        let mapped = loop {
            let s = h.state.load(Ordering::Acquire);
            let mapped = accept_unpin(s).map_err(|r| r.refuse(h))?;
            if h.state
                .compare_exchange(s, state::UNPINNING, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                break mapped;
            }
        };
        let pin = h.pin();
        let mut unmapped = Ok(());
        if mapped {
            let m = h.mapping();
            gdr_dbg!("unmapping va: {:#x} before unpinning", m.addr);
            unmapped = self.backend.unmap(&pin, &m);
            if let Err(e) = unmapped {
                if how == Release::Unpin {
                    gdr_err!(
                        "cannot unmap gdr_mh_t 0x{:x} before unpinning it ({}): it stays pinned and mapped",
                        h.address(),
                        e
                    );
                    h.state.store(state::MAPPED, Ordering::Release);
                    return Err(e);
                }
                unmapped = self.backend.unmap(&pin, &m).inspect_err(|e| {
                    gdr_err!(
                        "cannot unmap {:#x}+{} of gdr_mh_t 0x{:x} ({}): the address range stays reserved until the process exits",
                        m.addr,
                        m.len,
                        h.address(),
                        e
                    )
                });
            }
            h.forget_mapping(m.kind, self.backend.kind());
        }
        let unpinned = self.backend.unpin(&pin);
        self.live.fetch_sub(1, Ordering::Relaxed);
        h.free();
        unmapped.and(unpinned)
    }
}

/// The decision on an unpin of a handle in state `s`: whether it is mapped (then it is
/// unmapped first) when `s` is PINNED or MAPPED. A map or an unmap under way makes the unpin
/// lose the race (the handle stays as it is); anything else holds no pin.
fn accept_unpin(s: u32) -> std::result::Result<bool, UnpinRefusal> {
    match s {
        state::PINNED => Ok(false),
        state::MAPPED => Ok(true),
        state::MAPPING | state::UNMAPPING => Err(UnpinRefusal::LostRace),
        _ => Err(UnpinRefusal::NotPinned),
    }
}

/// Why [`accept_unpin`] refused an unpin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UnpinRefusal {
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
