//! mmap of pinned regions through the device file, and what munmap does to them.

use super::params::page_shift;
use super::{mr, mr_mut, release, Vma};
use crate::config::{self, Profile};
use crate::gpu::Seg;
use crate::real;
use crate::state::{pid, State};
use gdrapi_abi::gdrdrv::{MR_CACHING, MR_NONE, MR_WC};
use libc::{c_int, c_void};

/// Maps the first `len` bytes of `segs` after skipping `skip` bytes, at `hint` (honouring the
/// caller's MAP_FIXED flags), as one shared mapping of `memfd`.
pub fn map_segments(
    hint: *mut c_void,
    len: u64,
    prot: c_int,
    flags: c_int,
    memfd: c_int,
    segs: &[Seg],
    skip: u64,
) -> Result<u64, c_int> {
    let fixed = flags & (libc::MAP_FIXED | libc::MAP_FIXED_NOREPLACE);
    let mut pieces = Vec::new();
    let (mut skip, mut want) = (skip, len);
    for s in segs {
        if want == 0 {
            break;
        }
        if skip >= s.len {
            skip -= s.len;
            continue;
        }
        let n = (s.len - skip).min(want);
        pieces.push((s.phys + skip, n));
        skip = 0;
        want -= n;
    }
    if want != 0 || pieces.is_empty() {
        return Err(libc::EINVAL);
    }
    if pieces.len() == 1 {
        // SAFETY: a shared mapping of our VRAM memfd where the caller asked for one; with
        // MAP_FIXED the caller chose to replace its own range, as with any mmap.
        let p = unsafe {
            real::mmap(
                hint,
                len as usize,
                prot,
                libc::MAP_SHARED | fixed,
                memfd,
                pieces[0].0 as libc::off_t,
            )
        };
        return if p == libc::MAP_FAILED {
            Err(real::errno())
        } else {
            Ok(p as u64)
        };
    }
    // SAFETY: as above; first a placeholder of the whole length, then each piece over it.
    let base = unsafe {
        real::mmap(
            hint,
            len as usize,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | fixed,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(real::errno());
    }
    let mut at = base as u64;
    for (phys, n) in pieces {
        // SAFETY: [at, at+n) lies inside the placeholder made just above.
        let p = unsafe {
            real::mmap(
                at as *mut c_void,
                n as usize,
                prot,
                libc::MAP_SHARED | libc::MAP_FIXED,
                memfd,
                phys as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            let e = real::errno();
            // SAFETY: the placeholder is ours and not handed out yet.
            unsafe { real::munmap(base, len as usize) };
            return Err(e);
        }
        at += n;
    }
    Ok(base as u64)
}

/// mmap of the emulated file: maps the pinned region whose handle is `off >> PAGE_SHIFT`.
pub fn mmap(
    st: &mut State,
    file: u64,
    hint: *mut c_void,
    len: u64,
    prot: c_int,
    flags: c_int,
    off: i64,
) -> Result<u64, c_int> {
    let (owner, accmode) = st
        .drv
        .files
        .get(&file)
        .map(|f| (f.pid, f.accmode))
        .ok_or(libc::EIO)?;
    // The kernel's own checks first: any mapping needs read access, a shared writable one write
    // access.
    let shared_write = flags & libc::MAP_SHARED != 0 && prot & libc::PROT_WRITE != 0;
    if accmode == libc::O_WRONLY || (shared_write && accmode == libc::O_RDONLY) {
        return Err(libc::EACCES);
    }
    if owner != pid() {
        return Err(libc::EACCES);
    }
    let shift = page_shift();
    let page = 1u64 << shift;
    if len == 0 || off < 0 || (off as u64) & (page - 1) != 0 {
        return Err(libc::EINVAL);
    }
    let rlen = len.checked_add(page - 1).ok_or(libc::ENOMEM)? & !(page - 1);
    let handle = (off as u64) >> shift;
    let coherent = config::get().profile == Profile::Coherent;
    let m = mr(st, file, handle)?;
    if m.map_addr.is_some()
        || m.invalidated
        || m.segs.is_empty()
        || m.offset != 0
        || rlen > m.mapped_size
    {
        return Err(libc::EINVAL);
    }
    let kind = if m.req != MR_NONE {
        m.req
    } else if coherent && !m.force_pcie {
        MR_CACHING
    } else {
        MR_WC
    };
    let addr = match (m.memfd, m.segs.as_slice()) {
        (-1, [s]) => crate::vulkan::arena::map(s.phys, rlen, prot, flags)?,
        (-1, _) => return Err(libc::EINVAL),
        _ => map_segments(hint, rlen, prot, flags, m.memfd, &m.segs, 0)?,
    };
    crate::gpu::dontfork(addr, rlen);
    let me = pid();
    if let Ok(m) = mr_mut(st, file, handle) {
        m.map_addr = Some(addr);
        m.cur = kind;
    }
    if let Some(f) = st.drv.files.get_mut(&file) {
        f.vmas += 1;
    }
    st.drv.vmas.insert(
        addr,
        Vma {
            file,
            handle,
            len: rlen,
            pid: me,
        },
    );
    Ok(addr)
}

/// Whether `[addr, addr + len)` touches a mapping of the device.
pub fn touches_vma(st: &State, addr: u64, len: u64) -> bool {
    let end = addr.saturating_add(len);
    st.drv
        .vmas
        .range(..end)
        .next_back()
        .is_some_and(|(&a, v)| a + v.len > addr)
        || st.drv.vmas.range(addr..end).next().is_some()
}

/// The driver's side of munmap: every device mapping overlapping `[addr, addr + len)` goes
/// (its region becomes unmapped; a closed file whose last mapping this was is released).
pub fn munmap(st: &mut State, addr: u64, len: u64) {
    let end = addr.saturating_add(len);
    let hit: Vec<u64> = st
        .drv
        .vmas
        .iter()
        .filter(|(&a, v)| a < end && addr < a + v.len)
        .map(|(&a, _)| a)
        .collect();
    for a in hit {
        let Some(v) = st.drv.vmas.remove(&a) else {
            continue;
        };
        if let Some(f) = st.drv.files.get_mut(&v.file) {
            if let Some(m) = f.mrs.get_mut(&v.handle) {
                if m.map_addr == Some(a) {
                    m.map_addr = None;
                    m.cur = MR_NONE;
                }
            }
            f.vmas = f.vmas.saturating_sub(1);
            if !f.fd_open && f.vmas == 0 {
                release(st, v.file);
            }
        }
    }
}
