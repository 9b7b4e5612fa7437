//! `gdr_map_v2` (and `gdr_map`): a quick path that holds a gdrdrv handle in MAPPING instead of
//! taking the session's lock, and the path through the session for everything else; both take
//! what [`accept_map`] accepts.

use super::lookup::{quick_handle, session_and_handle};
use super::refuse::{broken, Mutant};
use super::state::{self, hold, Transition};
use crate::backend::{Backend, BackendKind, MappingType};
use crate::error::{Error, Result};
use crate::sys;
use std::sync::atomic::Ordering;

/// `gdr_map_v2`: maps `size` bytes (rounded up to the host page) of the pinned buffer with
/// the mapping type `flags` asks for; returns the mapping's address. On the quick path,
/// `granted` asks the driver after the mmap which mapping type (a raw `gdr_mapping_type_t`)
/// it granted, as upstream's `gdr_map` asks its own `gdr_get_info_v2` (the C entries pass
/// theirs); the path through the session asks its backend.
#[inline(always)]
pub fn map(
    g: usize,
    mh: u64,
    size: usize,
    flags: i32,
    granted: impl FnOnce() -> Result<u32>,
) -> Result<usize> {
    match quick_map(g, mh, size, flags, granted) {
        Some(r) => r,
        None => map_through_session(g, mh, size, flags),
    }
}

/// The decision on a map of a handle of the caller's session in state `s`, with `flags`, of
/// `size` bytes rounded up to `page_size`: the mapping type asked for and the rounded size,
/// when `s` is PINNED, the flags name a mapping type and the size does not overflow. A
/// mapped handle is refused first, before the flags are looked at (upstream's order), and a
/// handle another call holds (being unmapped or unpinned) last.
#[inline(always)]
pub(super) fn accept_map(
    s: u32,
    flags: i32,
    size: usize,
    page_size: usize,
) -> std::result::Result<(MappingType, usize), MapRefusal> {
    if (s == state::MAPPED || s == state::MAPPING) && !broken(Mutant::MapMapped) {
        return Err(MapRefusal::AlreadyMapped);
    }
    let request = match u32::try_from(flags).ok().and_then(MappingType::from_raw) {
        Some(t) => t,
        None if broken(Mutant::MapFlags) => MappingType::None,
        None => return Err(MapRefusal::UnknownFlags),
    };
    let rounded = match sys::round_up(size, page_size) {
        Some(r) => r,
        // Wrapping, an overflowing size rounds to 0.
        None if broken(Mutant::MapSize) => 0,
        None => return Err(MapRefusal::TooLarge),
    };
    if s != state::PINNED {
        return Err(MapRefusal::Busy);
    }
    Ok((request, rounded))
}

/// Why [`accept_map`] refused a map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MapRefusal {
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
    /// Logs why a map of the handle `mh` is refused; the error for it.
    #[cold]
    #[inline(never)]
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

/// [`map`] in the quick case of [`quick_handle`], without the session's lock: what
/// [`accept_map`] accepts of a PINNED handle, the state it then holds the handle from. `None`
/// for anything else, valid or not.
#[inline(always)]
fn quick_map(
    g: usize,
    mh: u64,
    size: usize,
    flags: i32,
    granted: impl FnOnce() -> Result<u32>,
) -> Option<Result<usize>> {
    let (h, page_size) = quick_handle(g, mh)?;
    let (request, rounded) = accept_map(state::PINNED, flags, size, page_size).ok()?;
    let d = hold(h, g, state::PINNED, state::MAPPING)?;
    let busy = Transition::mapping(h);
    Some(
        d.map_asking(
            h.pin_handle.load(Ordering::Acquire),
            rounded,
            request,
            granted,
        )
        .map(|m| busy.mapped(&m, BackendKind::Gdrdrv)),
    )
}

/// [`map`] through the session, held shared: every case but the quick one, with its errors.
/// [`accept_map`] decides on the state read, and again on the state found if the handle
/// changed before this call could hold it.
#[cold]
#[inline(never)]
fn map_through_session(g: usize, mh: u64, size: usize, flags: i32) -> Result<usize> {
    let (open, h) = session_and_handle(g, mh)?;
    #[cfg(test)]
    super::testing::took(super::testing::Path::Locked);
    let accept = |s| accept_map(s, flags, size, open.page_size);
    let (request, rounded) =
        accept(h.state.load(Ordering::Acquire)).map_err(|r| r.refuse(mh, size))?;
    if let Err(now) = h.state.compare_exchange(
        state::PINNED,
        state::MAPPING,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        // `now` is not PINNED, which the decision refuses.
        return Err(accept(now)
            .err()
            .unwrap_or(MapRefusal::Busy)
            .refuse(mh, size));
    }
    let busy = Transition::mapping(h);
    let m = open.backend.map(&h.pin(), rounded, request)?;
    Ok(busy.mapped(&m, open.backend.kind()))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::session::testing::map;
    use crate::session::testing::*;

    /// Every refusal of a map on `path`, and a map it accepts; what came out wrong.
    pub(in crate::session) fn refusals(path: Path) -> Vec<String> {
        let mut f = Found::default();
        let (on, other) = (On::open(path), On::open(path));
        let Some(mh) = on.pin(0x7600_0000, 0x10000) else {
            return vec!["the pin was refused".into()];
        };
        let h = on.record(mh);
        // A map it accepts takes the path; a quick one ends at the descriptor-less driver.
        let r = map(on.g, mh, 0x10000, 0);
        f.eq("the path of a map", last_path(), Some(path));
        f.eq("a map", outcome(&r).as_str(), path.accepted());
        if let Ok(va) = r {
            let _ = unmap(on.g, mh, va, 0x10000);
        }
        let unknown = Err(Error::InvalidArgument("unknown gdr_map_flags"));
        for flags in [4, 9, -1, i32::MAX] {
            f.eq(
                &format!("flags {flags}"),
                map(on.g, mh, 0x10000, flags),
                unknown,
            );
        }
        let too_large = Err(Error::InvalidArgument("map size overflows"));
        for size in [usize::MAX, usize::MAX - sys::page_size() + 2] {
            f.eq(
                &format!("size {size:#x}"),
                map(on.g, mh, size, 0),
                too_large,
            );
        }
        let other_gdr = map(other.g, mh, 0x10000, 0);
        f.eq(
            "another gdr_t's handle",
            other_gdr,
            Err(Error::InvalidHandle),
        );
        // Mapped: EAGAIN, before the flags are looked at.
        let va = on.map(mh, 0x10000);
        f.eq(
            "mapped already",
            map(on.g, mh, 0x10000, 0),
            Err(Error::AlreadyMapped),
        );
        let r = map(on.g, mh, 0x10000, 9);
        f.eq(
            "mapped already, unknown flags",
            r,
            Err(Error::AlreadyMapped),
        );
        // Held by an unmap under way.
        if hold_as(h, state::MAPPED, state::UNMAPPING) {
            let r = map(on.g, mh, 0x10000, 0);
            f.eq("being unmapped", r, Err(Error::InvalidHandle));
            hold_as(h, state::UNMAPPING, state::MAPPED);
        }
        let maps = on.calls.maps.load(Ordering::SeqCst);
        f.eq(
            "maps that reached the backend",
            maps,
            1 + u32::from(path == Path::Locked),
        );
        if let Some(va) = va {
            let _ = unmap(on.g, mh, va, 0x10000);
        }
        f.0
    }

    #[test]
    fn both_paths_refuse_the_same_maps() {
        for path in PATHS {
            assert_eq!(refusals(path), Vec::<String>::new(), "{path:?}");
        }
    }

    #[test]
    fn full_cycle_and_layout_values() {
        let (g, calls) = fake();
        let rec = SESSIONS.lookup(g).unwrap();
        assert_eq!(rec.fd.load(Ordering::Relaxed), 1000);
        assert_eq!(rec.gdrdrv_version.load(Ordering::Relaxed), 0x20006);
        assert_eq!(
            1usize << rec.page_shift.load(Ordering::Relaxed),
            sys::page_size()
        );
        let mh = pin(g, &pin_req(0x7000_0000, 0x10000)).unwrap();
        assert_ne!(mh, 0);
        let second = pin(g, &pin_req(0x7000_0000, 0x10000)).unwrap();
        // The driver handle sits at offset 24 as a u32 (16 for the second pin).
        let hr = HANDLES.lookup(second as usize).unwrap();
        assert_eq!(hr.driver_handle.load(Ordering::Relaxed), 16);
        let va = map(g, mh, 0x10000, 0).unwrap();
        assert_eq!(map(g, mh, 0x10000, 0).unwrap_err(), Error::AlreadyMapped);
        // Already-mapped is reported before the flags are looked at.
        assert_eq!(map(g, mh, 0x10000, 9).unwrap_err(), Error::AlreadyMapped);
        assert_eq!(
            map(g, second, 0x10000, 9).unwrap_err().errno(),
            libc::EINVAL
        );
        assert_eq!(
            map(g, second, 0x10000, 2).unwrap_err().errno(),
            libc::EOPNOTSUPP
        );
        let i = info(g, mh, false).unwrap();
        assert!(i.mapped && i.wc_mapping && i.mapping_type == 1);
        assert_eq!(
            copy_target(mh, va, 0, 0x10000, "t").unwrap(),
            MappingType::WriteCombining
        );
        assert_eq!(
            copy_target(mh, va + 1, 0, 0x10000, "t")
                .unwrap_err()
                .errno(),
            libc::EINVAL
        );
        assert_eq!(
            copy_target(mh, va - 1, 0, 1, "t").unwrap_err().errno(),
            libc::EINVAL
        );
        assert_eq!(
            copy_target(mh, usize::MAX, 0, 2, "t").unwrap_err().errno(),
            libc::EINVAL
        );
        assert_eq!(
            copy_target(second, 0, 0, 0, "t").unwrap_err(),
            Error::NotMapped
        );
        // Wrong va or size on unmap is refused and the mapping stays.
        assert_eq!(
            unmap(g, mh, va + 4096, 0x10000).unwrap_err().errno(),
            libc::EINVAL
        );
        assert_eq!(unmap(g, mh, va, 0x20000).unwrap_err().errno(), libc::EINVAL);
        unmap(g, mh, va, 0x10000 - 5).unwrap();
        assert_eq!(unmap(g, mh, va, 0x10000).unwrap_err(), Error::NotMapped);
        assert_eq!(
            copy_target(mh, va, 0, 0, "t").unwrap_err(),
            Error::NotMapped
        );
        unpin(g, mh).unwrap();
        // Stale handle: EINVAL, no driver call.
        let before = calls.unpins.load(Ordering::SeqCst);
        assert_eq!(unpin(g, mh).unwrap_err(), Error::InvalidHandle);
        assert_eq!(map(g, mh, 4096, 0).unwrap_err(), Error::InvalidHandle);
        assert_eq!(
            copy_target(mh, va, 0, 0, "t").unwrap_err(),
            Error::InvalidHandle
        );
        assert_eq!(calls.unpins.load(Ordering::SeqCst), before);
        // Close unpins what is left (still mapped -> unmapped first).
        map(g, second, 100, 1).unwrap();
        close(g).unwrap();
        assert_eq!(calls.unmaps.load(Ordering::SeqCst), 2);
        assert_eq!(calls.unpins.load(Ordering::SeqCst), 2);
        assert_eq!(calls.closes.load(Ordering::SeqCst), 1);
        // Stale and double-closed gdr_t.
        assert_eq!(close(g).unwrap_err(), Error::InvalidHandle);
        assert_eq!(
            pin(g, &pin_req(0x7000_0000, 1)).unwrap_err(),
            Error::InvalidHandle
        );
        assert_eq!(rec.fd.load(Ordering::Relaxed), -1);
    }
}
