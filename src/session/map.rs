//! `gdr_map_v2` (and `gdr_map`) and `gdr_unmap`, each with its decision.

use super::records::HandleRecord;
use super::session_and_handle;
use super::state::{self, Transition};
use crate::backend::MappingType;
use crate::error::{Error, Result};
use crate::sys;
use std::sync::atomic::Ordering;

/// `gdr_map_v2`: maps `size` bytes (rounded up to the host page) of the pinned buffer with
/// the mapping type `flags` asks for; returns the mapping's address.
pub fn map(g: usize, mh: u64, size: usize, flags: i32) -> Result<usize> {
    let (open, h) = session_and_handle(g, mh)?;
    let decide = |s| accept_map(s, flags, size, open.page_size);
    let (request, rounded) =
        decide(h.state.load(Ordering::Acquire)).map_err(|r| r.refuse(mh, size))?;
    // Another thread may have moved the handle since: decide again on the state found.
    let busy = Transition::start(h, state::PINNED, state::MAPPING).map_err(|now| {
        let refusal = decide(now).err().unwrap_or(MapRefusal::Busy);
        refusal.refuse(mh, size)
    })?;
    let m = open.backend.map(&h.pin(), rounded, request)?;
    Ok(busy.mapped(&m, open.backend.kind()))
}

/// The decision on a map of a handle in state `s` with `flags`, of `size` bytes rounded up
/// to `page_size`: the mapping type asked for and the rounded size, when `s` is not mapped,
/// the flags name a mapping type and the size does not overflow. A mapped handle is refused
/// first, before the flags are looked at (upstream's order). The map then holds the handle
/// only from PINNED ([`MapRefusal::Busy`] otherwise).
fn accept_map(
    s: u32,
    flags: i32,
    size: usize,
    page_size: usize,
) -> std::result::Result<(MappingType, usize), MapRefusal> {
    if s == state::MAPPED || s == state::MAPPING {
        return Err(MapRefusal::AlreadyMapped);
    }
    let request = u32::try_from(flags)
        .ok()
        .and_then(MappingType::from_raw)
        .ok_or(MapRefusal::UnknownFlags)?;
    let rounded = sys::round_up(size, page_size).ok_or(MapRefusal::TooLarge)?;
    Ok((request, rounded))
}

/// Why [`accept_map`] refused a map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MapRefusal {
    /// Mapped, or being mapped by another thread (EAGAIN).
    AlreadyMapped,
    /// The flags name no mapping type.
    UnknownFlags,
    /// The size, rounded up to the page, overflows.
    TooLarge,
    /// Being unmapped or unpinned by another thread.
    Busy,
}

impl MapRefusal {
    /// Logs why a map of `size` bytes of the handle `mh` is refused; the error for it.
    #[cold]
    fn refuse(self, mh: u64, size: usize) -> Error {
        match self {
            MapRefusal::AlreadyMapped => {
                gdr_err!("mh is mapped already");
                Error::AlreadyMapped
            }
            MapRefusal::UnknownFlags => {
                gdr_err!("encounter unsupported gdr_map_flags");
                Error::InvalidArgument("unknown gdr_map_flags")
            }
            MapRefusal::TooLarge => {
                gdr_err!("gdr_map: size {} is too large", size);
                Error::InvalidArgument("map size overflows")
            }
            MapRefusal::Busy => {
                gdr_err!(
                    "gdr_mh_t 0x{:x} is being unmapped or unpinned by another thread",
                    mh
                );
                Error::InvalidHandle
            }
        }
    }
}

/// `gdr_unmap`: `va` and `size` must be the address `gdr_map` returned and the size it was
/// given (compared after rounding to the host page).
pub fn unmap(g: usize, mh: u64, va: usize, size: usize) -> Result<()> {
    let (open, h) = session_and_handle(g, mh)?;
    let decide = |s| accept_unmap(s, h, va, size, open.page_size);
    // Decided before the handle is held, so that a bad call leaves the copies through the
    // (still valid) mapping alone.
    decide(h.state.load(Ordering::Acquire)).map_err(|r| r.refuse(va, size))?;
    let busy = Transition::start(h, state::MAPPED, state::UNMAPPING).map_err(|now| {
        let refusal = decide(now).err().unwrap_or(UnmapRefusal::NotMapped);
        refusal.refuse(va, size)
    })?;
    // Again once held: another thread may have unmapped and mapped it in between.
    decide(state::MAPPED).map_err(|r| r.refuse(va, size))?;
    let m = h.mapping();
    gdr_dbg!("unmapping va: {:#x}", va);
    open.backend.unmap(&h.pin(), &m)?;
    busy.unmapped(&m, open.backend.kind());
    Ok(())
}

/// The decision on an unmap of `h`, in state `s`, at `va` of `size` bytes rounded up to
/// `page_size`: accepted when `s` is MAPPED and `va` and the rounded size are those of its
/// mapping. A handle that is not mapped is refused before its mapping is compared.
fn accept_unmap(
    s: u32,
    h: &HandleRecord,
    va: usize,
    size: usize,
    page_size: usize,
) -> std::result::Result<(), UnmapRefusal> {
    if s != state::MAPPED {
        return Err(UnmapRefusal::NotMapped);
    }
    let addr = h.map_addr.load(Ordering::Acquire);
    let len = h.map_len.load(Ordering::Acquire);
    if addr != va || sys::round_up(size, page_size) != Some(len) {
        return Err(UnmapRefusal::Mismatch { addr, len });
    }
    Ok(())
}

/// Why [`accept_unmap`] refused an unmap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UnmapRefusal {
    /// Not mapped, or being mapped, unmapped or unpinned by another thread.
    NotMapped,
    /// `va` or the rounded size differ from the mapping's (`addr`, `len`).
    Mismatch { addr: usize, len: usize },
}

impl UnmapRefusal {
    /// Logs why the unmap of `va`, `size` is refused; the error for it.
    #[cold]
    fn refuse(self, va: usize, size: usize) -> Error {
        match self {
            UnmapRefusal::NotMapped => {
                gdr_err!("mh is not mapped yet");
                Error::NotMapped
            }
            UnmapRefusal::Mismatch { addr, len } => {
                gdr_err!(
                    "gdr_unmap: va {:#x} size {} do not match the mapping of this handle (va {:#x}, rounded size {})",
                    va,
                    size,
                    addr,
                    len
                );
                Error::InvalidArgument("va/size do not match the mapping")
            }
        }
    }
}
