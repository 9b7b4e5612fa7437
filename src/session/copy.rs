//! A copy's check (`gdr_copy_to_mapping`, `gdr_copy_from_mapping`): lock-free, on the handle
//! record alone, since a small copy over real VRAM takes about 150 ns (PERFORMANCE.md,
//! "Small copies in one process"). The copy itself is the copy engine's ([`crate::copy`]).

use super::records::kind_of;
use super::{state, HANDLES};
use crate::backend::MappingType;
use crate::error::Error;
use std::sync::atomic::Ordering;

/// The whole check of a copy of `n` bytes at `dev` through the handle `mh`: the mapping's
/// type when `mh` is a handle of this library, mapped, and `[dev, dev+n)` lies inside its
/// mapping; else why not, for [`CopyRefusal::refuse`] to log. Atomic loads, compares and
/// wrapping arithmetic only: it takes no lock, and cannot panic, log or allocate.
#[inline]
pub fn check_copy(mh: u64, dev: usize, n: usize) -> Result<MappingType, CopyRefusal> {
    let Some(h) = usize::try_from(mh).ok().and_then(|a| HANDLES.lookup(a)) else {
        return Err(CopyRefusal::NotIssued);
    };
    let s = h.state.load(Ordering::Acquire);
    if s != state::MAPPED {
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
    if off <= len && n <= len - off {
        Ok(kind_of(h.map_kind.load(Ordering::Acquire).into()))
    } else {
        Err(CopyRefusal::Outside { addr, len })
    }
}

/// Why [`check_copy`] refused a copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyRefusal {
    /// Not a handle record of this library.
    NotIssued,
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
    pub fn refuse(self, what: &str, mh: u64, dev: usize, host: usize, n: usize) -> Error {
        match self {
            CopyRefusal::NotIssued => {
                gdr_err!(
                    "{}: invalid gdr_mh_t 0x{:x}: not a handle issued by this library",
                    what,
                    mh
                );
                Error::InvalidHandle
            }
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
                if swapped(host, addr, len) {
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

/// Whether `host`, the host pointer of a copy refused as outside the mapping `addr`+`len`, lies
/// inside that mapping: the caller likely swapped the two pointers.
pub(super) fn swapped(host: usize, addr: usize, len: usize) -> bool {
    host.wrapping_sub(addr) < len
}
