//! A copy's checks (`gdr_copy_to_mapping`, `gdr_copy_from_mapping`): lock-free, on the handle
//! record alone. The copy itself is the copy engine's ([`crate::copy`]).

use super::records::{kind_of, HandleRecord};
use super::refuse::{broken, Mutant};
use super::state;
use super::HANDLES;
use crate::backend::MappingType;
use crate::error::{Error, Result};
use std::sync::atomic::Ordering;

/// For a copy of `n` bytes at `dev` through handle `mh`: checks that the handle is live and
/// mapped and that `[dev, dev+n)` lies inside its mapping, and returns the mapping type.
/// Lock-free (atomic loads only). `host` is only used to spot swapped arguments in the log
/// line; `what` names the C function.
///
/// The accepting path is inline and straight-line (the registry's first-slab check, the
/// state, the mapping's bounds); anything else goes to an out-of-line path that checks
/// again, logs and says why.
#[cfg(test)]
pub(super) fn copy_target(
    mh: u64,
    dev: usize,
    host: usize,
    n: usize,
    what: &str,
) -> Result<MappingType> {
    match copy_target_accepted(mh, dev, n) {
        Some(kind) => Ok(kind),
        None => copy_target_refused(mh, dev, host, n, what),
    }
}

/// The decision on a copy of `n` bytes at `dev` through `h`: the mapping's type when `h` is
/// MAPPED and `[dev, dev+n)` lies inside its mapping. Atomic loads, compares and wrapping
/// arithmetic only: it cannot panic, log or allocate. One line of the handle record.
#[inline(always)]
pub(super) fn accept_copy(
    h: &HandleRecord,
    dev: usize,
    n: usize,
) -> std::result::Result<MappingType, CopyRefusal> {
    let s = h.state.load(Ordering::Acquire);
    if s != state::MAPPED && !broken(Mutant::CopyState) {
        return Err(if s == state::FREE || s == state::RESERVED {
            CopyRefusal::NotPinned
        } else {
            CopyRefusal::NotMapped
        });
    }
    let addr = h.map_addr.load(Ordering::Acquire);
    let len = h.map_len.load(Ordering::Acquire);
    // `dev - addr` wraps for `dev < addr`; `addr + len` never exceeds the address space.
    let off = dev.wrapping_sub(addr);
    if off <= len && (n <= len - off || broken(Mutant::CopyRange)) {
        Ok(kind_of(h.map_kind.load(Ordering::Acquire).into()))
    } else {
        Err(CopyRefusal::Outside { addr, len })
    }
}

/// Why [`accept_copy`] refused a copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CopyRefusal {
    /// Free or reserved: unpinned, or pinned by a parent process.
    NotPinned,
    /// Pinned and not mapped, or being mapped, unmapped or unpinned.
    NotMapped,
    /// The range runs outside the mapping (`addr`, `len`).
    Outside { addr: usize, len: usize },
}

impl CopyRefusal {
    /// Logs why a copy of `n` bytes between `dev` and `host` through `mh`, by the C function
    /// `what`, is refused; the error for it.
    #[cold]
    #[inline(never)]
    fn refuse(self, what: &str, mh: u64, dev: usize, host: usize, n: usize) -> Error {
        match self {
            CopyRefusal::NotPinned => {
                gdr_err!(
                    "{}: invalid gdr_mh_t 0x{:x}: the buffer is not pinned (already unpinned, or \
                     pinned by a parent process: handles and mappings are not inherited)",
                    what,
                    mh
                );
                Error::InvalidHandle
            }
            CopyRefusal::NotMapped => {
                gdr_err!("mh is not mapped yet");
                Error::NotMapped
            }
            CopyRefusal::Outside { addr, len } => {
                if host >= addr && host < addr + len {
                    gdr_err!(
                        "{}: the host pointer {:#x} lies inside the mapping and the mapping pointer {:#x} does not: \
                         are the arguments swapped?",
                        what,
                        host,
                        dev
                    );
                }
                gdr_err!(
                    "{}: range {:#x}+{} is outside the mapping {:#x}+{} of gdr_mh_t 0x{:x}",
                    what,
                    dev,
                    n,
                    addr,
                    len,
                    mh
                );
                Error::InvalidArgument("copy range outside the mapping")
            }
        }
    }
}

/// The quick accepting half of a copy's checks: what [`accept_copy`] accepts of a handle in
/// the handle registry's first slab (which holds more records than the quarantine, so a
/// steady pin/unpin cycle stays in it); `None` for anything else, valid or not (the caller
/// then goes through [`copy_target_refused`], which decides and says why).
#[inline(always)]
pub fn copy_target_accepted(mh: u64, dev: usize, n: usize) -> Option<MappingType> {
    // First slab only (no call on this path); handles in later slabs take the full path.
    let h = HANDLES.lookup_first(usize::try_from(mh).ok()?)?;
    accept_copy(h, dev, n).ok()
}

/// A copy's checks when [`copy_target_accepted`] did not accept: the handle looked up in any
/// slab, [`accept_copy`] again, and the log line of a refusal.
#[cold]
#[inline(never)]
pub(crate) fn copy_target_refused(
    mh: u64,
    dev: usize,
    host: usize,
    n: usize,
    what: &str,
) -> Result<MappingType> {
    let Some(h) = usize::try_from(mh).ok().and_then(|a| HANDLES.lookup(a)) else {
        gdr_err!(
            "{}: invalid gdr_mh_t 0x{:x}: not a handle issued by this library",
            what,
            mh
        );
        return Err(Error::InvalidHandle);
    };
    accept_copy(h, dev, n).map_err(|r| r.refuse(what, mh, dev, host, n))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::session::testing::*;

    /// Every refusal of a copy's checks and some ranges they accept, on `path`: the inline
    /// check ([`copy_target_accepted`], which refuses by giving the copy to the full one) for
    /// [`Path::Quick`], the full one ([`copy_target_refused`]) for [`Path::Locked`]; what came
    /// out wrong.
    pub(in crate::session) fn refusals(path: Path) -> Vec<String> {
        let mut f = Found::default();
        let on = On::open(Path::Locked);
        // The inline check looks at the first slab of the registry only.
        let mut others = Vec::new();
        let mh = loop {
            match on.pin(0x7650_0000, 0x10000) {
                Some(mh) if HANDLES.lookup_first(mh as usize).is_some() => break Some(mh),
                Some(mh) if others.len() < 4096 => others.push(mh),
                _ => break None,
            }
        };
        for mh in others {
            let _ = unpin(on.g, mh);
        }
        let Some(mh) = mh else {
            return vec!["no handle in the registry's first slab".into()];
        };
        let h = on.record(mh);
        let Some(va) = on.map(mh, 0x10000) else {
            return vec!["the map was refused".into()];
        };
        let check = |dev: usize, n: usize| match path {
            Path::Quick => copy_target_accepted(mh, dev, n).ok_or(None),
            Path::Locked => copy_target_refused(mh, dev, 0, n, "t").map_err(Some),
        };
        let refused = |e: Error| Err((path == Path::Locked).then_some(e));
        let len = 0x10000;
        let at = |dev: usize, n: usize| match dev.checked_sub(va) {
            Some(off) => format!("va+{off:#x}, {n} bytes"),
            None => format!("va-{:#x}, {n} bytes", va - dev),
        };
        for (dev, n) in [(va, 1), (va, len), (va + len, 0), (va + len - 1, 1)] {
            f.eq(&at(dev, n), check(dev, n), Ok(MappingType::WriteCombining));
        }
        let outside = refused(Error::InvalidArgument("copy range outside the mapping"));
        for (dev, n) in [
            (va + len - 1, 2),
            (va + len, 1),
            (va - 1, 1),
            (va + 1, usize::MAX),
            (usize::MAX, 2),
        ] {
            f.eq(&at(dev, n), check(dev, n), outside);
        }
        for busy in [state::MAPPING, state::UNMAPPING] {
            if hold_as(h, state::MAPPED, busy) {
                f.eq(
                    &format!("state {busy}"),
                    check(va, 1),
                    refused(Error::NotMapped),
                );
                hold_as(h, busy, state::MAPPED);
            }
        }
        let _ = unmap(on.g, mh, va, len);
        f.eq("unmapped", check(va, 1), refused(Error::NotMapped));
        let _ = unpin(on.g, mh);
        f.eq("unpinned", check(va, 1), refused(Error::InvalidHandle));
        f.0
    }

    #[test]
    fn both_paths_refuse_the_same_copies() {
        for path in PATHS {
            assert_eq!(refusals(path), Vec::<String>::new(), "{path:?}");
        }
    }

    #[test]
    fn quick_copy_check_agrees_with_the_full_one() {
        let (g, _calls) = fake();
        let first = pin(g, &pin_req(0x7100_0000, 0x10000)).unwrap();
        let va = map(g, first, 0x10000, 0).unwrap();
        // Enough live handles that the registry grows newer slabs after `first`'s.
        let more: Vec<u64> = (0..300)
            .map(|i| pin(g, &pin_req(0x7200_0000 + i * 0x10000, 0x10000)).unwrap())
            .collect();
        let last = *more.last().unwrap();
        let va_last = map(g, last, 0x10000, 0).unwrap();
        for (mh, va) in [(first, va), (last, va_last)] {
            let first_slab = HANDLES.lookup_first(mh as usize).is_some();
            let cases = [
                (va, 1, true),
                (va, 0x10000, true),
                (va + 0x10000, 0, true),
                (va + 0xffff, 1, true),
                (va + 0xffff, 2, false),
                (va - 1, 1, false),
                (va + 1, usize::MAX, false),
                (usize::MAX, 2, false),
            ];
            for (dev, n, ok) in cases {
                let quick = copy_target_accepted(mh, dev, n);
                let full = copy_target(mh, dev, 0, n, "t");
                assert_eq!(full.is_ok(), ok, "{dev:#x}+{n}");
                // The quick check never accepts what the full one refuses, and accepts
                // every valid range of a handle in the first slab.
                assert_eq!(quick, if ok && first_slab { full.ok() } else { None });
            }
        }
        // A handle in an older slab (if the registry grew past `first`'s) is still accepted
        // by the full check.
        assert_eq!(
            copy_target(first, va, 0, 8, "t").unwrap(),
            MappingType::WriteCombining
        );
        assert!(copy_target_accepted(first + 8, va, 1).is_none());
        assert!(copy_target_accepted(0, va, 1).is_none());
        assert_eq!(close(g), Ok(()));
        assert!(copy_target_accepted(last, va_last, 1).is_none(), "closed");
    }

    #[test]
    fn random_api_sequences_never_crash_and_give_upstream_errnos() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let (g1, c1) = fake();
        let (g2, _) = fake();
        // Garbage, a gdr_t, and handle addresses plus offsets join the pool over time.
        let mut pool: Vec<u64> = vec![0, 1, u64::MAX, g1 as u64, g2 as u64 + 8];
        let mut maps: Vec<(u64, usize, usize)> = Vec::new();
        let allowed = [0, libc::EINVAL, libc::EAGAIN, libc::EOPNOTSUPP];
        let code = |r: Result<()>| r.err().map_or(0, |e| e.errno());
        for _ in 0..20_000 {
            let g = if rnd() % 8 == 0 { g2 } else { g1 };
            let h = pool[rnd() as usize % pool.len()];
            let rc = match rnd() % 7 {
                0 => {
                    let r = pin(
                        g,
                        &pin_req(0x8000_0000 + (rnd() % 64) * 0x10000, 1 + rnd() % 0x30000),
                    );
                    if let Ok(h) = r {
                        pool.push(h);
                        pool.push(h + 24);
                    }
                    code(r.map(|_| ()))
                }
                1 => {
                    let size = 1 + (rnd() % 0x20000) as usize;
                    let r = map(g, h, size, (rnd() % 5) as i32);
                    if let Ok(va) = r {
                        maps.push((h, va, size));
                    }
                    code(r.map(|_| ()))
                }
                2 if !maps.is_empty() => {
                    let (mh, va, size) = maps.swap_remove(rnd() as usize % maps.len());
                    let (va, size) = if rnd() % 4 == 0 {
                        (va + 4096, size)
                    } else {
                        (va, size)
                    };
                    code(unmap(g, mh, va, size))
                }
                3 => code(unpin(g, h)),
                4 => code(info(g, h, rnd() % 2 == 0).map(|_| ())),
                5 => {
                    let (mh, va, _) = maps
                        .get(rnd() as usize % maps.len().max(1))
                        .copied()
                        .unwrap_or((h, 0, 0));
                    let off = (rnd() % 0x21000) as usize;
                    let n = (rnd() % 0x1000) as usize;
                    let dev = va.wrapping_add(off);
                    let r = copy_target(mh, dev, 0, n, "t");
                    if r.is_ok() && n > 0 {
                        // The range was validated: touching both ends must be safe.
                        // SAFETY: copy_target checked [dev, dev+n) lies in a live mapping.
                        unsafe {
                            std::ptr::write_volatile(dev as *mut u8, 1);
                            std::ptr::write_volatile((dev + n - 1) as *mut u8, 2);
                        }
                    }
                    code(r.map(|_| ()))
                }
                _ => code(callback_flag(g, h).map(|_| ())),
            };
            assert!(allowed.contains(&rc), "unexpected errno {rc}");
        }
        close(g1).unwrap();
        close(g2).unwrap();
        assert_eq!(
            c1.pins.load(Ordering::SeqCst),
            c1.unpins.load(Ordering::SeqCst)
        );
        assert_eq!(
            c1.maps.load(Ordering::SeqCst),
            c1.unmaps.load(Ordering::SeqCst)
        );
    }
}
