//! The emulated gdrdrv 2.x: per-open-file state (this module), the ioctls ([`ioctl`]), and
//! mmap/munmap of pinned regions ([`mapping`]). Errors are errno values.

mod ioctl;
mod mapping;
mod params;

pub use ioctl::ioctl;
pub use mapping::{map_segments, mmap, munmap, touches_vma};
pub use params::page_shift;

/// gdrdrv's ioctl type, as the `(request >> 8) & 0xff` of a request.
pub const IOCTL_TYPE: c_ulong = gdrdrv::IOCTL_TYPE as c_ulong;

use crate::config;
use crate::gpu::Seg;
use crate::state::{pid, State};
use gdrapi_abi::gdrdrv::{self, MR_NONE};
use libc::{c_int, c_ulong, pid_t};
use std::collections::BTreeMap;

/// One pinned region.
#[derive(Debug)]
struct Mr {
    /// Start of the rounded range (64 KiB aligned).
    va: u64,
    /// Length of the rounded range.
    mapped_size: u64,
    /// `addr & 0xFFFF` at pin time; a region with a non-zero offset cannot be mapped.
    offset: u64,
    /// The VRAM behind the range, fixed at pin time (kept alive while pinned).
    segs: Vec<Seg>,
    /// The VRAM memfd `segs` refer to.
    memfd: c_int,
    /// GPU generation `segs` belong to.
    gen: u64,
    /// Pinned with FORCE_PCIE: never mapped cached.
    force_pcie: bool,
    /// Mapping type asked for by REQ_MAPPING_TYPE (used by the next mmap).
    req: u32,
    /// Current CPU mapping type (NONE when not mapped or invalidated).
    cur: u32,
    /// Start of the CPU mapping, while one exists and still shows the region.
    map_addr: Option<u64>,
    /// The invalidation callback has run (non-persistent mode).
    invalidated: bool,
    /// TSC ticks the pin took.
    tm_cycles: u64,
}

/// One open file of the device.
#[derive(Debug)]
struct File {
    /// The process that opened it; any other gets EACCES.
    pid: pid_t,
    /// The handle the next pin gets.
    next_handle: u64,
    /// The handle counter overflowed: every later pin fails with ENOMEM.
    exhausted: bool,
    /// Pinned regions by handle.
    mrs: BTreeMap<u64, Mr>,
    /// The fd is still open (else only mappings keep the file alive).
    fd_open: bool,
    /// Number of CPU mappings of this file.
    vmas: u32,
    /// `O_ACCMODE` bits the file was opened with.
    accmode: c_int,
}

/// One CPU mapping of the device (a VMA), which holds its file open.
#[derive(Debug)]
struct Vma {
    /// The file it maps.
    file: u64,
    /// The region it was made for (it may have been unpinned since).
    handle: u64,
    /// Length in bytes (page-rounded).
    len: u64,
    /// The process it belongs to (forked children do not inherit it).
    pid: pid_t,
}

/// All files and mappings of the emulated device known to this process.
#[derive(Debug, Default)]
pub struct Driver {
    /// Open files by id (a file outlives its fd while mapped).
    files: BTreeMap<u64, File>,
    /// fd -> (file id, inode of the fd's memfd).
    fds: BTreeMap<c_int, (u64, u64)>,
    /// CPU mappings by start address.
    vmas: BTreeMap<u64, Vma>,
    next_file: u64,
}

impl Driver {
    /// An empty driver.
    pub const fn new() -> Self {
        Driver {
            files: BTreeMap::new(),
            fds: BTreeMap::new(),
            vmas: BTreeMap::new(),
            next_file: 0,
        }
    }

    /// Records a new open of the device on `fd` (whose backing file has inode `ino`) by the
    /// calling process.
    pub fn add_file(&mut self, fd: c_int, ino: u64, accmode: c_int) {
        self.next_file += 1;
        let id = self.next_file;
        self.files.insert(
            id,
            File {
                pid: pid(),
                next_handle: 0,
                exhausted: false,
                mrs: BTreeMap::new(),
                fd_open: true,
                vmas: 0,
                accmode,
            },
        );
        self.fds.insert(fd, (id, ino));
    }

    /// The file behind `fd`, if it is an emulated device fd of this process's table.
    pub fn file_of(&self, fd: c_int) -> Option<u64> {
        self.fds.get(&fd).map(|&(id, _)| id)
    }

    /// Whether any CPU mapping of the device exists.
    pub fn has_vmas(&self) -> bool {
        !self.vmas.is_empty()
    }

    /// (open files, pins, mappings) belonging to process `me`.
    pub fn counts(&self, me: pid_t) -> (u64, u64, u64) {
        let mine = self.files.values().filter(|f| f.pid == me);
        let files = mine.clone().count() as u64;
        let pins = mine.map(|f| f.mrs.len() as u64).sum();
        let maps = self.vmas.values().filter(|v| v.pid == me).count() as u64;
        (files, pins, maps)
    }

    /// Pins of every file that still hold their pages (not invalidated): what gdrdrv's
    /// `nv_get_pages_refcount` counts.
    pub fn pages_refcount(&self) -> u64 {
        self.files
            .values()
            .flat_map(|f| f.mrs.values())
            .filter(|m| !m.invalidated)
            .count() as u64
    }

    /// BAR1 bytes the live (not invalidated) pins of GPU generation `gen` use.
    pub fn bar1_used(&self, gen: u64) -> u64 {
        self.files
            .values()
            .flat_map(|f| f.mrs.values())
            .filter(|m| m.gen == gen && !m.invalidated)
            .map(|m| m.mapped_size)
            .sum()
    }

    /// VRAM offsets held by live (not invalidated) pins of GPU generation `gen`.
    pub fn held(&self, gen: u64) -> Vec<(u64, u64)> {
        self.files
            .values()
            .flat_map(|f| f.mrs.values())
            .filter(|m| m.gen == gen && !m.invalidated)
            .flat_map(|m| m.segs.iter().map(|s| (s.phys, s.len)))
            .collect()
    }

    /// Invalidates every live pin of generation `gen` overlapping `[va, va + len)`; returns the
    /// CPU mappings to zap.
    pub fn invalidate(&mut self, gen: u64, va: u64, len: u64) -> Vec<(u64, u64)> {
        let mut zap = Vec::new();
        let me = pid();
        for f in self.files.values_mut().filter(|f| f.pid == me) {
            for m in f.mrs.values_mut() {
                if m.gen == gen && !m.invalidated && m.va < va + len && va < m.va + m.mapped_size {
                    m.invalidated = true;
                    m.cur = MR_NONE;
                    if let Some(a) = m.map_addr.take() {
                        let l = self.vmas.get(&a).map_or(0, |v| v.len);
                        zap.push((a, l));
                    }
                }
            }
        }
        zap
    }
}

fn mr(st: &State, file: u64, handle: u64) -> Result<&Mr, c_int> {
    st.drv
        .files
        .get(&file)
        .and_then(|f| f.mrs.get(&handle))
        .ok_or(libc::EINVAL)
}

fn mr_mut(st: &mut State, file: u64, handle: u64) -> Result<&mut Mr, c_int> {
    st.drv
        .files
        .get_mut(&file)
        .and_then(|f| f.mrs.get_mut(&handle))
        .ok_or(libc::EINVAL)
}

/// The inode of the file behind `fd`, if `fd` is open.
pub fn inode_of(fd: c_int) -> Option<u64> {
    // SAFETY: fstat writes only into the zeroed stat buffer we pass.
    unsafe {
        let mut sb: libc::stat = std::mem::zeroed();
        (libc::fstat(fd, &mut sb) == 0).then_some(sb.st_ino)
    }
}

/// The emulated file behind `fd`. An entry whose fd now refers to something else (closed
/// behind the emulator's back, e.g. by `close_range`, and reused) is dropped as if closed.
pub fn lookup_fd(st: &mut State, fd: c_int) -> Option<u64> {
    let &(id, ino) = st.drv.fds.get(&fd)?;
    if inode_of(fd) == Some(ino) {
        return Some(id);
    }
    close_fd(st, fd);
    None
}

/// close of an emulated fd: the file is released now, or when its last mapping goes.
pub fn close_fd(st: &mut State, fd: c_int) {
    let Some((id, _)) = st.drv.fds.remove(&fd) else {
        return;
    };
    let Some(f) = st.drv.files.get_mut(&id) else {
        return;
    };
    f.fd_open = false;
    if f.vmas == 0 {
        release(st, id);
    }
}

/// The driver's release: unpins everything left on the file and forgets it.
fn release(st: &mut State, id: u64) {
    let Some(f) = st.drv.files.remove(&id) else {
        return;
    };
    for m in f.mrs.values() {
        if let Some(a) = m.map_addr {
            let len = st.drv.vmas.get(&a).map_or(0, |v| v.len);
            st.zap(a, len);
        }
    }
    st.reclaim();
}

/// Forgets the mappings a forked child did not inherit (they were MADV_DONTFORK).
pub fn forget_vmas_after_fork(st: &mut State) {
    let me = pid();
    let gone: Vec<(u64, u64)> = st
        .drv
        .vmas
        .iter()
        .filter(|(_, v)| v.pid != me)
        .map(|(&a, v)| (a, v.file))
        .collect();
    for (a, file) in gone {
        st.drv.vmas.remove(&a);
        if let Some(f) = st.drv.files.get_mut(&file) {
            f.vmas = f.vmas.saturating_sub(1);
            for m in f.mrs.values_mut() {
                if m.map_addr == Some(a) {
                    m.map_addr = None;
                }
            }
        }
    }
}

/// The device's "is this process allowed to open it" check (`GDRSIM_DEVICE_MODE`).
pub fn may_open(flags: c_int) -> bool {
    let cfg = config::get();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0 && !cfg.as_user;
    if root {
        return true;
    }
    let need = match flags & libc::O_ACCMODE {
        libc::O_RDONLY => 4,
        libc::O_WRONLY => 2,
        _ => 6,
    };
    cfg.device_mode & need == need
}
