//! The emulated gdrdrv 2.x: per-open-file state, the ioctls, mmap of pinned regions, and what
//! munmap and close do to them. Errors are errno values.

use crate::config::{self, Profile};
use crate::fail;
use crate::gpu::{Seg, GPU_PAGE};
use crate::real;
use crate::state::{pid, State};
use crate::uaccess;
use libc::{c_int, c_ulong, c_void, pid_t};
use std::collections::BTreeMap;

/// ioctl type of gdrdrv.
pub const IOCTL_TYPE: c_ulong = 0xDA;
/// Request values (x86-64 and aarch64 share the generic `_IOWR` encoding).
pub const PIN_BUFFER: c_ulong = 0xC028_DA01;
/// See [`PIN_BUFFER`].
pub const UNPIN_BUFFER: c_ulong = 0xC008_DA02;
/// See [`PIN_BUFFER`].
pub const GET_CB_FLAG: c_ulong = 0xC008_DA03;
/// See [`PIN_BUFFER`].
pub const GET_INFO: c_ulong = 0xC008_DA04;
/// See [`PIN_BUFFER`].
pub const GET_INFO_V2: c_ulong = 0xC008_DA05;
/// See [`PIN_BUFFER`].
pub const GET_ATTR: c_ulong = 0xC008_DA06;
/// See [`PIN_BUFFER`].
pub const PIN_BUFFER_V2: c_ulong = 0xC020_DA07;
/// See [`PIN_BUFFER`].
pub const REQ_MAPPING_TYPE: c_ulong = 0xC008_DA08;
/// See [`PIN_BUFFER`].
pub const GET_VERSION: c_ulong = 0xC008_DAFF;

/// Mapping types (`gdr_mr_type_t`).
pub const MR_NONE: u32 = 0;
/// Write-combining.
pub const MR_WC: u32 = 1;
/// Cached.
pub const MR_CACHING: u32 = 2;
/// Device (uncached).
pub const MR_DEVICE: u32 = 3;

const FLAG_FORCE_PCIE: u32 = 1;
const MIN_API_VERSION: u32 = 0x0002_0000;
const HANDLE_LIMIT: u64 = 1 << 52;

/// The request's name (for fault injection) and the driver minor version that introduced it.
fn request_info(req: c_ulong) -> Option<(&'static str, u32)> {
    Some(match req {
        PIN_BUFFER => ("PIN_BUFFER", 0),
        UNPIN_BUFFER => ("UNPIN_BUFFER", 0),
        GET_CB_FLAG => ("GET_CB_FLAG", 0),
        GET_INFO => ("GET_INFO", 0),
        GET_INFO_V2 => ("GET_INFO_V2", 4),
        GET_ATTR => ("GET_ATTR", 5),
        PIN_BUFFER_V2 => ("PIN_BUFFER_V2", 5),
        REQ_MAPPING_TYPE => ("REQ_MAPPING_TYPE", 5),
        GET_VERSION => ("GET_VERSION", 0),
        _ => return None,
    })
}

/// Host page size and its shift.
pub fn page_shift() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        (p as u64).trailing_zeros()
    } else {
        12
    }
}

/// One pinned region.
#[derive(Debug)]
struct Mr {
    va: u64,
    mapped_size: u64,
    offset: u64,
    segs: Vec<Seg>,
    memfd: c_int,
    gen: u64,
    force_pcie: bool,
    req: u32,
    cur: u32,
    map_addr: Option<u64>,
    invalidated: bool,
    tm_cycles: u64,
}

/// One open file of the device.
#[derive(Debug)]
struct File {
    pid: pid_t,
    next_handle: u64,
    exhausted: bool,
    mrs: BTreeMap<u64, Mr>,
    fd_open: bool,
    vmas: u32,
    /// `O_ACCMODE` bits the file was opened with.
    accmode: c_int,
}

/// One CPU mapping of the device (a VMA), which holds its file open.
#[derive(Debug)]
struct Vma {
    file: u64,
    handle: u64,
    len: u64,
    pid: pid_t,
}

/// All files and mappings of the emulated device known to this process.
#[derive(Debug, Default)]
pub struct Driver {
    files: BTreeMap<u64, File>,
    fds: BTreeMap<c_int, (u64, u64)>,
    vmas: BTreeMap<u64, Vma>,
    next_file: u64,
}

/// Copies the first `N` bytes of a parameter struct in.
fn copy_in<const N: usize>(arg: *mut c_void) -> Result<[u8; N], c_int> {
    let mut b = [0u8; N];
    uaccess::read(arg as u64, &mut b)?;
    Ok(b)
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[off..off + 8]);
    u64::from_ne_bytes(x)
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[off..off + 4]);
    u32::from_ne_bytes(x)
}

fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_ne_bytes());
}

fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
}

fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc is available on every x86-64 CPU and has no side effects.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    0
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

/// Handles an ioctl on the emulated file `file` (found through `fd`).
pub fn ioctl(st: &mut State, file: u64, req: c_ulong, arg: *mut c_void) -> Result<c_int, c_int> {
    crate::counters::count_ioctl();
    if (req >> 8) & 0xff != IOCTL_TYPE {
        return Err(libc::EINVAL);
    }
    let owner = st.drv.files.get(&file).map(|f| f.pid).ok_or(libc::EIO)?;
    if owner != pid() {
        return Err(libc::EACCES);
    }
    let cfg = config::get();
    let (name, since) = request_info(req).ok_or(libc::ENOTTY)?;
    if cfg.driver_minor < since {
        return Err(libc::ENOTTY);
    }
    if let Some(e) = fail::check(name) {
        return Err(e);
    }
    match req {
        PIN_BUFFER => {
            let mut b = copy_in::<40>(arg)?;
            let tokens = u64_at(&b, 16) != 0 || u32_at(&b, 24) != 0;
            let h = pin(st, file, u64_at(&b, 0), u64_at(&b, 8), 0, tokens)?;
            put_u64(&mut b, 32, h);
            copy_out_or_unpin(st, file, h, arg, &b)
        }
        PIN_BUFFER_V2 => {
            let mut b = copy_in::<32>(arg)?;
            let flags = u32_at(&b, 16);
            if flags & !FLAG_FORCE_PCIE != 0 {
                return Err(libc::EINVAL);
            }
            let h = pin(st, file, u64_at(&b, 0), u64_at(&b, 8), flags, false)?;
            put_u64(&mut b, 24, h);
            copy_out_or_unpin(st, file, h, arg, &b)
        }
        UNPIN_BUFFER => {
            let b = copy_in::<8>(arg)?;
            unpin(st, file, u64_at(&b, 0))?;
            Ok(0)
        }
        GET_CB_FLAG => {
            let mut b = copy_in::<16>(arg)?;
            let m = mr(st, file, u64_at(&b, 0))?;
            put_u32(&mut b, 8, m.invalidated as u32);
            uaccess::write(arg as u64, &b)?;
            Ok(0)
        }
        GET_INFO | GET_INFO_V2 => {
            let mut b = copy_in::<48>(arg)?;
            let m = mr(st, file, u64_at(&b, 0))?;
            put_u64(&mut b, 8, m.va);
            put_u64(&mut b, 16, m.mapped_size);
            put_u32(&mut b, 24, GPU_PAGE as u32);
            put_u32(
                &mut b,
                28,
                if cfg!(target_arch = "x86_64") {
                    2_000_000
                } else {
                    0
                },
            );
            put_u64(&mut b, 32, m.tm_cycles);
            if req == GET_INFO {
                put_u32(&mut b, 40, (m.cur != MR_NONE) as u32);
                put_u32(&mut b, 44, (m.cur == MR_WC) as u32);
            } else {
                put_u32(&mut b, 40, m.cur);
            }
            uaccess::write(arg as u64, &b)?;
            Ok(0)
        }
        GET_ATTR => {
            let mut b = copy_in::<8>(arg)?;
            let persistent = cfg.persistent();
            let val = match u32_at(&b, 0) {
                1 => Some(persistent as u32),
                2 => Some(persistent as u32),
                _ => None,
            };
            if let Some(v) = val {
                put_u32(&mut b, 4, v);
            }
            uaccess::write(arg as u64, &b)?;
            val.map(|_| 0).ok_or(libc::EINVAL)
        }
        REQ_MAPPING_TYPE => {
            let b = copy_in::<16>(arg)?;
            let t = u32_at(&b, 8);
            if t > MR_DEVICE {
                return Err(libc::EINVAL);
            }
            let coherent = cfg.profile == Profile::Coherent;
            let m = mr_mut(st, file, u64_at(&b, 0))?;
            if m.map_addr.is_some() {
                return Err(libc::EBUSY);
            }
            let ok = match t {
                MR_NONE | MR_WC => true,
                MR_CACHING => coherent && !m.force_pcie && !m.invalidated,
                _ => false,
            };
            if !ok {
                return Err(libc::EOPNOTSUPP);
            }
            m.req = t;
            Ok(0)
        }
        GET_VERSION => {
            let mut b = [0u8; 8];
            put_u32(&mut b, 0, cfg.version_word());
            put_u32(&mut b, 4, MIN_API_VERSION);
            uaccess::write(arg as u64, &b)?;
            Ok(0)
        }
        _ => Err(libc::ENOTTY),
    }
}

fn copy_out_or_unpin(
    st: &mut State,
    file: u64,
    h: u64,
    arg: *mut c_void,
    b: &[u8],
) -> Result<c_int, c_int> {
    if let Err(e) = uaccess::write(arg as u64, b) {
        let _ = unpin(st, file, h);
        return Err(e);
    }
    Ok(0)
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

fn pin(
    st: &mut State,
    file: u64,
    addr: u64,
    size: u64,
    flags: u32,
    tokens: bool,
) -> Result<u64, c_int> {
    let t0 = tsc();
    let cfg = config::get();
    if addr == 0 {
        return Err(libc::EINVAL);
    }
    let force_pcie = flags & FLAG_FORCE_PCIE != 0;
    if cfg.persistent() {
        if tokens {
            return Err(libc::EINVAL);
        }
    } else if flags != 0 {
        return Err(libc::EINVAL);
    }
    let start = addr & !(GPU_PAGE - 1);
    let end = addr
        .checked_add(size)
        .and_then(|e| e.checked_add(GPU_PAGE - 1))
        .ok_or(libc::EINVAL)?
        & !(GPU_PAGE - 1);
    let mapped_size = end - start;
    if mapped_size == 0 {
        return Err(libc::EINVAL);
    }
    let gpu = st.gpu().ok_or(libc::EINVAL)?;
    if !gpu.in_live_allocation(addr) {
        return Err(libc::EINVAL);
    }
    let segs = gpu.translate(start, mapped_size).ok_or(libc::EINVAL)?;
    let (memfd, gen) = (gpu.memfd, gpu.gen);
    let f = st.drv.files.get_mut(&file).ok_or(libc::EIO)?;
    let inc = (mapped_size >> page_shift()).max(1);
    if f.exhausted || f.next_handle + inc > HANDLE_LIMIT {
        f.exhausted = true;
        return Err(libc::ENOMEM);
    }
    let handle = f.next_handle;
    f.next_handle += inc;
    f.mrs.insert(
        handle,
        Mr {
            va: start,
            mapped_size,
            offset: addr & (GPU_PAGE - 1),
            segs,
            memfd,
            gen,
            force_pcie,
            req: MR_NONE,
            cur: MR_NONE,
            map_addr: None,
            invalidated: false,
            tm_cycles: tsc().wrapping_sub(t0),
        },
    );
    Ok(handle)
}

fn unpin(st: &mut State, file: u64, handle: u64) -> Result<(), c_int> {
    let m = st
        .drv
        .files
        .get_mut(&file)
        .and_then(|f| f.mrs.remove(&handle))
        .ok_or(libc::EINVAL)?;
    if let Some(a) = m.map_addr {
        let len = st.drv.vmas.get(&a).map_or(0, |v| v.len);
        st.zap(a, len);
    }
    st.reclaim();
    Ok(())
}

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
    let addr = map_segments(hint, rlen, prot, flags, m.memfd, &m.segs, 0)?;
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
