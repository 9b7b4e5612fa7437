//! `gdr_unmap`: a quick path that holds a gdrdrv handle in UNMAPPING instead of taking the
//! session's lock, and the path through the session for everything else; both take what
//! [`accept_unmap`] accepts.

use super::lookup::{quick_handle, session_and_handle};
use super::records::HandleRecord;
use super::refuse::{broken, Mutant};
use super::state::{self, hold, Transition};
use crate::backend::{gdrdrv, Backend, BackendKind};
use crate::error::{Error, Result};
use crate::sys;
use std::sync::atomic::Ordering;

/// `gdr_unmap`: `va` and `size` must be the address `gdr_map` returned and the size it was
/// given (compared after rounding to the host page).
#[inline(always)]
pub fn unmap(g: usize, mh: u64, va: usize, size: usize) -> Result<()> {
    match quick_unmap(g, mh, va, size) {
        Some(r) => r,
        None => unmap_through_session(g, mh, va, size),
    }
}

/// The decision on an unmap of `h`, a handle of the caller's session in state `s`, at `va` of
/// `size` bytes rounded up to `page_size`: accepted when `s` is MAPPED and `va` and the
/// rounded size are those of its mapping (read from `h` only then). A handle that is not
/// mapped is refused before its mapping is compared.
#[inline(always)]
pub(super) fn accept_unmap(
    s: u32,
    h: &HandleRecord,
    va: usize,
    size: usize,
    page_size: usize,
) -> std::result::Result<(), UnmapRefusal> {
    if s != state::MAPPED {
        return Err(UnmapRefusal::NotMapped);
    }
    let rounded = sys::round_up(size, page_size);
    let addr = h.map_addr.load(Ordering::Acquire);
    let len = h.map_len.load(Ordering::Acquire);
    if (addr != va && !broken(Mutant::UnmapVa))
        || (rounded != Some(len) && !broken(Mutant::UnmapSize))
    {
        return Err(UnmapRefusal::Mismatch { addr, len });
    }
    Ok(())
}

/// Why [`accept_unmap`] refused an unmap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum UnmapRefusal {
    /// Not mapped, or being mapped, unmapped or unpinned by another thread.
    NotMapped,
    /// `va` or the rounded size differ from the mapping's (`addr`, `len`).
    Mismatch { addr: usize, len: usize },
}

impl UnmapRefusal {
    /// Logs why the unmap of `va`, `size` is refused; the error for it.
    #[cold]
    #[inline(never)]
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

/// [`unmap`] in the quick case of [`quick_handle`], without the session's lock: what
/// [`accept_unmap`] accepts, before the handle is held (a refusal leaves the state alone, so
/// that copies through the mapping go on) and again once it is held in UNMAPPING (it may have
/// been remapped in between). `None` for anything else, valid or not.
#[inline(always)]
fn quick_unmap(g: usize, mh: u64, va: usize, size: usize) -> Option<Result<()>> {
    let (h, page_size) = quick_handle(g, mh)?;
    let accept = |s| accept_unmap(s, h, va, size, page_size);
    accept(h.state.load(Ordering::Acquire)).ok()?;
    hold(h, g, state::MAPPED, state::UNMAPPING)?;
    if accept(state::MAPPED).is_err() {
        // Remapped by another thread in between.
        h.state.store(state::MAPPED, Ordering::Release);
        return None;
    }
    let m = h.mapping();
    gdr_dbg!("unmapping va: {:#x}", m.addr);
    let busy = Transition::unmapping(h);
    // SAFETY: `m` is the mapping the driver made for this handle, which its UNMAPPING state
    // takes out of use.
    let r = unsafe { gdrdrv::unmap(h.pin_handle.load(Ordering::Acquire), &m) };
    Some(r.map(|()| busy.unmapped(&m, BackendKind::Gdrdrv)))
}

/// [`unmap`] through the session, held shared: every case but the quick one, with its
/// errors. [`accept_unmap`] decides before the handle is held, so that a bad call leaves
/// concurrent copies through the (still valid) mapping alone, and again once it is held.
#[cold]
#[inline(never)]
fn unmap_through_session(g: usize, mh: u64, va: usize, size: usize) -> Result<()> {
    let (open, h) = session_and_handle(g, mh)?;
    #[cfg(test)]
    super::testing::took(super::testing::Path::Locked);
    let accept = |s| accept_unmap(s, h, va, size, open.page_size);
    accept(h.state.load(Ordering::Acquire)).map_err(|r| r.refuse(va, size))?;
    if let Err(now) = h.state.compare_exchange(
        state::MAPPED,
        state::UNMAPPING,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        // `now` is not MAPPED, which the decision refuses.
        return Err(accept(now)
            .err()
            .unwrap_or(UnmapRefusal::NotMapped)
            .refuse(va, size));
    }
    if let Err(r) = accept(state::MAPPED) {
        // Remapped by another thread in between.
        h.state.store(state::MAPPED, Ordering::Release);
        return Err(r.refuse(va, size));
    }
    let m = h.mapping();
    gdr_dbg!("unmapping va: {:#x}", va);
    let busy = Transition::unmapping(h);
    open.backend.unmap(&h.pin(), &m)?;
    busy.unmapped(&m, open.backend.kind());
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::session::testing::*;

    /// Every refusal of an unmap on `path`, and an unmap it accepts; what came out wrong.
    pub(in crate::session) fn refusals(path: Path) -> Vec<String> {
        let mut f = Found::default();
        let (on, other) = (On::open(path), On::open(path));
        let Some(mh) = on.pin(0x7610_0000, 0x10000) else {
            return vec!["the pin was refused".into()];
        };
        let h = on.record(mh);
        f.eq(
            "not mapped",
            unmap(on.g, mh, 0x1000, 0x10000),
            Err(Error::NotMapped),
        );
        let Some(va) = on.map(mh, 0x10000) else {
            return vec!["the map was refused".into()];
        };
        // A va or a rounded size that is not the mapping's: EINVAL, and the mapping stays.
        let mismatch = Err(Error::InvalidArgument("va/size do not match the mapping"));
        let page = sys::page_size();
        for (what, at, size) in [
            ("another va", va + page, 0x10000),
            ("va - 1", va - 1, 0x10000),
            ("a larger size", va, 0x10000 + page),
            ("a smaller size", va, 0x10000 - page),
            ("a size that overflows", va, usize::MAX),
        ] {
            f.eq(what, unmap(on.g, mh, at, size), mismatch);
        }
        f.eq(
            "the mapping stays",
            h.state.load(Ordering::SeqCst),
            state::MAPPED,
        );
        let r = unmap(other.g, mh, va, 0x10000);
        f.eq("another gdr_t's handle", r, Err(Error::InvalidHandle));
        // Held by a map under way.
        if hold_as(h, state::MAPPED, state::MAPPING) {
            let r = unmap(on.g, mh, va, 0x10000);
            f.eq("being mapped", r, Err(Error::NotMapped));
            hold_as(h, state::MAPPING, state::MAPPED);
        }
        f.eq(
            "unmaps through the backend",
            on.calls.unmaps.load(Ordering::SeqCst),
            0,
        );
        // An unmap it accepts (its size rounds to the mapping's) takes the path; a quick one
        // unmaps without the backend.
        f.eq("the unmap", unmap(on.g, mh, va, 0x10000 - 5), Ok(()));
        f.eq("the path of the unmap", last_path(), Some(path));
        let unmaps = on.calls.unmaps.load(Ordering::SeqCst);
        f.eq(
            "unmaps through the backend",
            unmaps,
            u32::from(path == Path::Locked),
        );
        f.eq(
            "unmapped already",
            unmap(on.g, mh, va, 0x10000),
            Err(Error::NotMapped),
        );
        f.0
    }

    #[test]
    fn both_paths_refuse_the_same_unmaps() {
        for path in PATHS {
            assert_eq!(refusals(path), Vec::<String>::new(), "{path:?}");
        }
    }
}
