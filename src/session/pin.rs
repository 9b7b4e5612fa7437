//! `gdr_pin_buffer(_v2)`.

use super::state::{self, Reserved};
use super::{session, HANDLES};
use crate::backend::PinRequest;
use crate::error::{Error, Result};
use std::sync::atomic::Ordering;

/// `gdr_pin_buffer(_v2)`: pins and returns the new `gdr_mh_t.h`.
pub fn pin(g: usize, req: &PinRequest) -> Result<u64> {
    let open = session(g)?;
    // The allocation number orders the pins, so that `gdr_close` releases the newest first
    // as upstream does.
    let Some((h, seq)) = HANDLES.allocate() else {
        gdr_err!("error while allocating memory");
        return Err(Error::NoMemory);
    };
    h.owner.store(open.serial, Ordering::Relaxed);
    h.state.store(state::RESERVED, Ordering::Release);
    // Gives the slot back if the pin fails or the backend panics.
    let reserved = Reserved(h);
    let p = open.backend.pin(req)?;
    let h = reserved.keep();
    h.set_pin(&p, open.serial, open.backend.kind(), open.page_size);
    h.seq.store(seq, Ordering::Relaxed);
    open.live.fetch_add(1, Ordering::Relaxed);
    h.state.store(state::PINNED, Ordering::Release);
    Ok(h.address())
}
