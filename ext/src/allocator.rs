//! Allocators: one device, one `gdr_t`, the chunks pinned and mapped for it, and the table
//! that turns a `gdrx_t` value into an allocator without trusting it.
//!
//! A chunk is one device allocation pinned and mapped whole. Small allocations share chunks
//! ([`Extents`]); an allocation larger than `small_max` gets a chunk of its own. A chunk that
//! empties is unmapped, unpinned and freed at once. Device memory whose free failed is kept
//! and freed again at the next chunk release or at close.
//!
//! Locks: the table's (a lookup, a clone of an `Arc`), then an allocator's `state` (held
//! across the driver calls of an allocation or a free), then the registry's (leaf).

use crate::cuda::{self, Backing, Cuda, GPU_PAGE};
use crate::error::{gdr_status, invalid, Errno, Result};
use crate::extents::{round_up, Extents, LINE};
use crate::gdr::{self, gdr_info_v2_t, gdr_mh_t, gdr_t};
use crate::registry::{self, Record};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

/// The largest alignment an allocation may ask for: a GPU page.
pub const MAX_ALIGNMENT: usize = GPU_PAGE;
/// The chunk size with `cuMemAlloc` memory, and the least with `cuMemCreate` memory.
pub const CHUNK: usize = 2 << 20;

/// How device memory is allocated (`GDRX_MEMORY_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    /// `cuMemAlloc`.
    Plain,
    /// `cuMemCreate`, exportable as a POSIX fd, in multiples of `granularity`; GPUDirect RDMA
    /// capable with `rdma`.
    Vmm { granularity: usize, rdma: bool },
}

impl Memory {
    /// `GDRX_MEMORY_*`.
    pub fn code(self) -> i32 {
        match self {
            Memory::Plain => 0,
            Memory::Vmm { .. } => 1,
        }
    }
}

/// One live allocation inside a chunk.
#[derive(Debug, Clone, Copy)]
struct Live {
    /// The size asked for.
    size: usize,
    /// The bytes taken (a multiple of [`LINE`]).
    taken: usize,
    /// Its registry handle.
    handle: u64,
}

/// A device allocation, pinned and mapped whole.
#[derive(Debug)]
struct Chunk {
    /// Device address of its first byte (64 KiB aligned).
    dev: u64,
    /// CPU address of that byte.
    cpu: usize,
    /// Bytes pinned and mapped.
    len: usize,
    /// The libgdrapi handle of the pin.
    mh: gdr_mh_t,
    /// What `gdr_map` returned.
    map: usize,
    /// The device memory.
    backing: Backing,
    /// Shared by small allocations (else it holds one large allocation).
    shared: bool,
    /// Free space.
    extents: Extents,
    /// Live allocations by offset.
    live: BTreeMap<usize, Live>,
}

impl Chunk {
    /// Whether device address `dev` lies in this chunk.
    fn holds_device(&self, dev: u64) -> bool {
        dev >= self.dev && dev - self.dev < self.len as u64
    }

    /// The offset of `addr` (a device or a CPU address) in this chunk.
    fn offset_of(&self, addr: u64) -> Option<usize> {
        let len = self.len as u64;
        if addr >= self.dev && addr - self.dev < len {
            return Some((addr - self.dev) as usize);
        }
        let cpu = self.cpu as u64;
        (addr >= cpu && addr - cpu < len).then(|| (addr - cpu) as usize)
    }
}

/// What an allocator changes under its lock.
#[derive(Debug, Default)]
struct State {
    open: bool,
    chunks: Vec<Chunk>,
    /// Device memory whose free failed, freed again later.
    leftovers: Vec<Backing>,
}

/// One allocator (`gdrx_t`).
pub struct Allocator {
    /// Its `gdrx_t` value.
    id: u64,
    /// The process that opened it.
    pid: i32,
    /// The session (`gdr_t`).
    g: usize,
    /// `GDRX_BACKEND_*`.
    backend: i32,
    device: i32,
    cu_device: i32,
    /// The device's primary context, retained.
    ctx: usize,
    cuda: &'static Cuda,
    memory: Memory,
    chunk_size: usize,
    small_max: usize,
    /// `gdr_mapping_type_t` of the first mapping (0 before).
    mapping_type: AtomicI32,
    state: Mutex<State>,
}

impl std::fmt::Debug for Allocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allocator")
            .field("id", &self.id)
            .field("device", &self.device)
            .field("backend", &self.backend)
            .field("memory", &self.memory)
            .finish_non_exhaustive()
    }
}

/// What `gdrx_info` reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub device: i32,
    pub backend: i32,
    pub memory: i32,
    pub mapping_type: i32,
    pub chunk_size: usize,
    pub small_max: usize,
    pub allocations: usize,
    pub pins: usize,
    pub bytes_pinned: usize,
    pub bytes_in_use: usize,
}

/// One allocation as C sees it (`gdrx_mem_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocation {
    pub dev: u64,
    pub cpu: usize,
    pub size: usize,
    pub handle: u64,
}

/// The name of a backend for log lines.
pub fn backend_name(b: i32) -> &'static str {
    match b {
        gdr::BACKEND_GDRDRV => "gdrdrv",
        gdr::BACKEND_DMABUF => "dma-buf",
        gdr::BACKEND_VULKAN => "vulkan",
        _ => "unknown",
    }
}

/// The calling process's id.
fn pid() -> i32 {
    // SAFETY: getpid has no preconditions (through the C library, as every system call here).
    unsafe { libc::getpid() }
}

/// `GDRX_OPEN_CUMEMALLOC`.
pub const OPEN_CUMEMALLOC: u32 = 1;

/// The allocators by table slot: a generation and the allocator, if open.
struct Table {
    slots: Vec<(u32, Option<Arc<Allocator>>)>,
    free: Vec<usize>,
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    slots: Vec::new(),
    free: Vec::new(),
});

fn split(id: u64) -> Option<(usize, u32)> {
    let low = id & 0xffff_ffff;
    (low != 0).then(|| ((low - 1) as usize, (id >> 32) as u32))
}

/// The open allocator `id` names, or `None`.
pub fn lookup(id: u64) -> Option<Arc<Allocator>> {
    let (i, generation) = split(id)?;
    let t = TABLE.lock();
    match t.slots.get(i) {
        Some((g, Some(a))) if *g == generation => Some(a.clone()),
        _ => None,
    }
}

/// Takes allocator `id` out of the table (so that no new call finds it).
fn take(id: u64) -> Option<Arc<Allocator>> {
    let (i, generation) = split(id)?;
    let mut t = TABLE.lock();
    let slot = t.slots.get_mut(i)?;
    if slot.0 != generation || slot.1.is_none() {
        return None;
    }
    let a = slot.1.take();
    slot.0 = slot.0.wrapping_add(1);
    t.free.push(i);
    a
}

/// Puts an allocator into the table; its id.
fn register(make: impl FnOnce(u64) -> Allocator) -> u64 {
    let mut t = TABLE.lock();
    let i = match t.free.pop() {
        Some(i) => i,
        None => {
            t.slots.push((0, None));
            t.slots.len() - 1
        }
    };
    let id = u64::from(t.slots[i].0) << 32 | (i as u64 + 1);
    t.slots[i].1 = Some(Arc::new(make(id)));
    id
}

impl Allocator {
    /// Refuses a call from another process than the opener (a forked child): EACCES.
    pub fn check_process(&self, func: &str) -> Result<()> {
        if self.pid == pid() {
            Ok(())
        } else {
            gdr_err!(
                "{func}: the allocator was opened by process {}, not this one (a forked child \
                 must open its own)",
                self.pid
            );
            Err(Errno(libc::EACCES))
        }
    }

    /// Opens an allocator on device ordinal `device`; its id.
    pub fn open(device: i32, flags: u32) -> Result<u64> {
        if flags & !OPEN_CUMEMALLOC != 0 {
            return Err(invalid(
                "gdrx_open",
                format_args!("unknown flags {flags:#x}"),
            ));
        }
        if device < 0 {
            return Err(invalid("gdrx_open", format_args!("device {device}")));
        }
        let cuda = cuda::load()?;
        let count = cuda.device_count()?;
        if device >= count {
            gdr_err!("gdrx_open: no CUDA device {device} ({count} present)");
            return Err(Errno(libc::ENODEV));
        }
        let cu_device = cuda.device(device)?;
        let ctx = cuda.retain_primary(cu_device)?;
        let opened = cuda
            .with_context(ctx, || Self::open_session(cuda, device, cu_device, flags))
            .and_then(|(g, backend, memory)| {
                let chunk_size = match memory {
                    Memory::Plain => CHUNK,
                    Memory::Vmm { granularity, .. } => {
                        round_up(CHUNK.max(granularity), granularity).ok_or(Errno(libc::ENOMEM))?
                    }
                };
                Ok((g, backend, memory, chunk_size))
            });
        let (g, backend, memory, chunk_size) = match opened {
            Ok(v) => v,
            Err(e) => {
                cuda.release_primary(cu_device).ok();
                return Err(e);
            }
        };
        gdr_info!(
            "gdrx_open: device {device}, {} backend, {} memory, {} KiB chunks",
            backend_name(backend),
            match memory {
                Memory::Plain => "cuMemAlloc",
                Memory::Vmm { rdma: true, .. } => "cuMemCreate (POSIX fd, GPUDirect RDMA)",
                Memory::Vmm { rdma: false, .. } => "cuMemCreate (POSIX fd)",
            },
            chunk_size >> 10
        );
        Ok(register(|id| Allocator {
            id,
            pid: pid(),
            g,
            backend,
            device,
            cu_device,
            ctx,
            cuda,
            memory,
            chunk_size,
            small_max: chunk_size / 4,
            mapping_type: AtomicI32::new(0),
            state: Mutex::new(State {
                open: true,
                ..State::default()
            }),
        }))
    }

    /// `gdr_open` and the memory its backend maps: `(gdr_t, backend, memory)`. The context
    /// is current.
    fn open_session(
        cuda: &Cuda,
        device: i32,
        cu_device: i32,
        flags: u32,
    ) -> Result<(usize, i32, Memory)> {
        let rdma = cuda.rdma_with_vmm(cu_device)?;
        // SAFETY: gdr_open has no preconditions.
        let g = unsafe { gdr::gdr_open() };
        if g.is_null() {
            gdr_err!(
                "gdrx_open: gdr_open failed: no backend of libgdrapi can map GPU memory here. \
                 Install and load the gdrdrv module (gdrcopy's gdrdrv-dkms), or use a CUDA \
                 driver with DMA-BUF mmap (13.3+); on a machine without the module (a cloud \
                 GPU, a container) set GDRAPI_USE_VULKAN=1 in the environment of the process. \
                 Run `gdrcopy doctor` for the cause"
            );
            return Err(Errno(libc::ENODEV));
        }
        // SAFETY: `g` is the open gdr_t gdr_open just returned.
        let backend = unsafe { gdr::backend_of(g) };
        let memory = (|| {
            let vulkan = backend == gdr::BACKEND_VULKAN;
            if flags & OPEN_CUMEMALLOC != 0 {
                if vulkan {
                    gdr_err!(
                        "gdrx_open: GDRX_OPEN_CUMEMALLOC: the vulkan backend maps only \
                         cuMemCreate memory exportable as a POSIX file descriptor"
                    );
                    return Err(Errno(libc::ENOTSUP));
                }
                return Ok(Memory::Plain);
            }
            if !(rdma || vulkan) || !cuda.has_vmm() {
                if vulkan {
                    gdr_err!("gdrx_open: the vulkan backend needs cuMemCreate, which this CUDA driver lacks");
                    return Err(Errno(libc::ENOTSUP));
                }
                return Ok(Memory::Plain);
            }
            let granularity = cuda.granularity(device, rdma)?;
            if !granularity.is_power_of_two() && !granularity.is_multiple_of(GPU_PAGE) {
                gdr_err!("gdrx_open: unexpected VMM granularity {granularity}");
                return Err(Errno(libc::ENOTSUP));
            }
            Ok(Memory::Vmm { granularity, rdma })
        })();
        match memory {
            Ok(m) => Ok((g as usize, backend, m)),
            Err(e) => {
                // SAFETY: the gdr_t opened above, closed once.
                unsafe { gdr::gdr_close(g) };
                Err(e)
            }
        }
    }

    fn gdr(&self) -> gdr_t {
        self.g as gdr_t
    }

    /// Allocates `size` bytes aligned to `align`.
    pub fn alloc(&self, size: usize, align: usize) -> Result<Allocation> {
        const FUNC: &str = "gdrx_alloc";
        self.check_process(FUNC)?;
        if size == 0 {
            return Err(invalid(FUNC, format_args!("size 0")));
        }
        let align = if align == 0 { LINE } else { align };
        if !align.is_power_of_two() || align > MAX_ALIGNMENT {
            return Err(invalid(
                FUNC,
                format_args!("alignment {align} is not a power of two up to {MAX_ALIGNMENT}"),
            ));
        }
        let align = align.max(LINE);
        let taken = round_up(size, LINE).ok_or(Errno(libc::ENOMEM))?;
        let mut st = self.state.lock();
        if !st.open {
            return Err(invalid(FUNC, format_args!("the allocator is closed")));
        }
        let (index, offset) = if taken <= self.small_max {
            let found = st.chunks.iter_mut().enumerate().rev().find_map(|(i, c)| {
                if !c.shared {
                    return None;
                }
                c.extents.take(taken, align).map(|o| (i, o))
            });
            match found {
                Some(f) => f,
                None => {
                    let c = self.new_chunk(&mut st, self.chunk_size, true)?;
                    st.chunks.push(c);
                    let i = st.chunks.len() - 1;
                    let o = st.chunks[i].extents.take(taken, align);
                    (i, o.ok_or(Errno(libc::ENOMEM))?)
                }
            }
        } else {
            let unit = match self.memory {
                Memory::Plain => GPU_PAGE,
                Memory::Vmm { granularity, .. } => granularity,
            };
            let len = round_up(taken, unit).ok_or(Errno(libc::ENOMEM))?;
            let mut c = self.new_chunk(&mut st, len, false)?;
            let o = c.extents.take(taken, align).ok_or(Errno(libc::ENOMEM))?;
            st.chunks.push(c);
            (st.chunks.len() - 1, o)
        };
        let c = &mut st.chunks[index];
        let a = Allocation {
            dev: c.dev + offset as u64,
            cpu: c.cpu + offset,
            size,
            handle: 0,
        };
        let handle = registry::insert(Record {
            owner: self.id,
            mh: c.mh.h,
            cpu: a.cpu,
            dev: a.dev,
            size,
        });
        let Some(handle) = handle else {
            c.extents.give(offset, taken);
            let r = self.release_if_empty(&mut st, index);
            gdr_err!("{FUNC}: too many live allocations");
            return r.and(Err(Errno(libc::ENOMEM)));
        };
        c.live.insert(
            offset,
            Live {
                size,
                taken,
                handle,
            },
        );
        Ok(Allocation { handle, ..a })
    }

    /// Allocates, pins and maps a chunk of `len` bytes (a multiple of the unit of the
    /// memory). Undoes its own work on failure.
    fn new_chunk(&self, st: &mut State, len: usize, shared: bool) -> Result<Chunk> {
        let cuda = self.cuda;
        let (mut backing, dev) = cuda.with_context(self.ctx, || match self.memory {
            Memory::Plain => cuda.alloc_plain(len),
            Memory::Vmm { granularity, rdma } => {
                cuda.alloc_vmm(self.device, len, granularity, rdma)
            }
        })?;
        match self.pin_and_map(dev, len) {
            Ok((mh, map, cpu)) => {
                gdr_dbg!(
                    "gdrx: chunk {dev:#x}+{len} pinned and mapped at {cpu:#x} ({})",
                    if shared { "shared" } else { "one allocation" }
                );
                Ok(Chunk {
                    dev,
                    cpu,
                    len,
                    mh,
                    map,
                    backing,
                    shared,
                    extents: Extents::new(len),
                    live: BTreeMap::new(),
                })
            }
            Err(e) => {
                if self.free_backing(&mut backing).is_err() {
                    st.leftovers.push(backing);
                }
                Err(e)
            }
        }
    }

    /// Pins `len` bytes at `dev` and maps them: `(handle, mapping, CPU address of dev)`.
    fn pin_and_map(&self, dev: u64, len: usize) -> Result<(gdr_mh_t, usize, usize)> {
        let g = self.gdr();
        let mut mh = gdr_mh_t::default();
        // SAFETY: `g` is this allocator's open gdr_t and `mh` is writable.
        let rc = unsafe { gdr::gdr_pin_buffer(g, dev as _, len, 0, 0, &mut mh) };
        gdr_status(|| format!("gdr_pin_buffer of {dev:#x}+{len}"), rc)?;
        let mapped = (|| {
            let mut p: *mut c_void = std::ptr::null_mut();
            // SAFETY: a pinned handle of `g`, mapped whole; `p` is writable.
            let rc = unsafe { gdr::gdr_map(g, mh, &mut p, len) };
            gdr_status(|| format!("gdr_map of {dev:#x}+{len}"), rc)?;
            let mut info = gdr_info_v2_t::default();
            // SAFETY: as above; `info` is a writable gdr_info_v2_t.
            let rc = unsafe { gdr::gdr_get_info_v2(g, mh, &mut info) };
            if let Err(e) = gdr_status(|| format!("gdr_get_info_v2 of {dev:#x}"), rc) {
                // SAFETY: the mapping made just above, unmapped once.
                unsafe { gdr::gdr_unmap(g, mh, p, len) };
                return Err(e);
            }
            self.mapping_type
                .compare_exchange(
                    0,
                    info.mapping_type as i32,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .ok();
            // The mapping starts at info.va, the pinned range's first GPU page.
            Ok((p as usize, p as usize + (dev - info.va) as usize))
        })();
        match mapped {
            Ok((map, cpu)) => Ok((mh, map, cpu)),
            Err(e) => {
                // SAFETY: the handle pinned above, unpinned once.
                unsafe { gdr::gdr_unpin_buffer(g, mh) };
                Err(e)
            }
        }
    }

    /// Frees device memory (and what failed to free before).
    fn free_backing(&self, b: &mut Backing) -> Result<()> {
        let r = self.cuda.with_context(self.ctx, || self.cuda.free(b));
        if r.is_err() && !b.is_freed() {
            gdr_warn!("gdrx: device memory kept to be freed again later");
        }
        r
    }

    /// Unmaps, unpins and frees chunk `index` if it holds no allocation. Returns the first
    /// error; the chunk is gone in any case.
    fn release_if_empty(&self, st: &mut State, index: usize) -> Result<()> {
        if !st.chunks[index].live.is_empty() {
            return Ok(());
        }
        let c = st.chunks.swap_remove(index);
        self.release(st, c)
    }

    fn release(&self, st: &mut State, mut c: Chunk) -> Result<()> {
        let g = self.gdr();
        // SAFETY: the chunk's own mapping and pin, released once; the registry holds none of
        // its allocations any more, so no copy of this library goes through them.
        let unmap = unsafe { gdr::gdr_unmap(g, c.mh, c.map as *mut c_void, c.len) };
        let mut first = gdr_status(|| format!("gdr_unmap of {:#x}+{}", c.dev, c.len), unmap);
        // SAFETY: as above; an unpin also removes a mapping the unmap could not.
        let unpin = unsafe { gdr::gdr_unpin_buffer(g, c.mh) };
        first = first.and(gdr_status(
            || format!("gdr_unpin_buffer of {:#x}", c.dev),
            unpin,
        ));
        gdr_dbg!("gdrx: chunk {:#x}+{} released", c.dev, c.len);
        if let Err(e) = self.free_backing(&mut c.backing) {
            first = first.and(Err(e));
            st.leftovers.push(c.backing);
        }
        // Memory whose free failed earlier.
        let mut kept = std::mem::take(&mut st.leftovers);
        kept.retain_mut(|b| self.free_backing(b).is_err());
        st.leftovers = kept;
        first
    }

    /// Frees allocation `a`.
    pub fn free(&self, a: &Allocation) -> Result<()> {
        const FUNC: &str = "gdrx_free";
        self.check_process(FUNC)?;
        let mut st = self.state.lock();
        let rec = registry::get(a.handle).filter(|r| r.owner == self.id);
        let Some(rec) = rec else {
            return Err(invalid(
                FUNC,
                format_args!("{:#x} is not a live allocation of this allocator", a.handle),
            ));
        };
        if rec.dev != a.dev || rec.cpu != a.cpu || rec.size != a.size {
            return Err(invalid(
                FUNC,
                format_args!("the gdrx_mem_t of {:#x} was changed", a.handle),
            ));
        }
        let found = st.chunks.iter().position(|c| c.holds_device(rec.dev));
        let Some(index) = found else {
            return Err(invalid(FUNC, format_args!("no chunk holds {:#x}", rec.dev)));
        };
        // Exactly one free wins; a racing one found no record above or loses here.
        if registry::remove(a.handle).is_none() {
            return Err(invalid(FUNC, format_args!("{:#x} was freed", a.handle)));
        }
        let c = &mut st.chunks[index];
        let offset = (rec.dev - c.dev) as usize;
        if let Some(l) = c.live.remove(&offset) {
            c.extents.give(offset, l.taken);
        }
        self.release_if_empty(&mut st, index)
    }

    /// The live allocation that holds `addr` (a device or a CPU address) and the offset of
    /// `addr` in it.
    pub fn lookup(&self, addr: u64) -> Result<(Allocation, usize)> {
        self.check_process("gdrx_lookup")?;
        let st = self.state.lock();
        for c in &st.chunks {
            let Some(off) = c.offset_of(addr) else {
                continue;
            };
            let Some((&start, l)) = c.live.range(..=off).next_back() else {
                break;
            };
            if off - start >= l.size {
                break;
            }
            let a = Allocation {
                dev: c.dev + start as u64,
                cpu: c.cpu + start,
                size: l.size,
                handle: l.handle,
            };
            return Ok((a, off - start));
        }
        gdr_dbg!("gdrx_lookup: {addr:#x} is in no live allocation");
        Err(Errno(libc::ENOENT))
    }

    /// The figures `gdrx_info` reports.
    pub fn stats(&self) -> Result<Stats> {
        self.check_process("gdrx_info")?;
        let st = self.state.lock();
        let mut s = Stats {
            device: self.device,
            backend: self.backend,
            memory: self.memory.code(),
            mapping_type: self.mapping_type.load(Ordering::Relaxed),
            chunk_size: self.chunk_size,
            small_max: self.small_max,
            ..Stats::default()
        };
        for c in &st.chunks {
            s.pins += 1;
            s.bytes_pinned += c.len;
            s.allocations += c.live.len();
            s.bytes_in_use += c.live.values().map(|l| l.taken).sum::<usize>();
        }
        Ok(s)
    }

    /// Frees everything, closes the session, releases the context. Returns the first error.
    fn close(&self) -> Result<()> {
        let mut st = self.state.lock();
        st.open = false;
        let mut first = Ok(());
        while let Some(mut c) = st.chunks.pop() {
            for l in std::mem::take(&mut c.live).values() {
                registry::remove(l.handle);
            }
            first = first.and(self.release(&mut st, c));
        }
        for mut b in std::mem::take(&mut st.leftovers) {
            if let Err(e) = self.free_backing(&mut b) {
                gdr_err!("gdrx_close: device memory could not be freed");
                first = first.and(Err(e));
            }
        }
        // SAFETY: this allocator's gdr_t, closed once (the allocator left the table).
        let rc = unsafe { gdr::gdr_close(self.gdr()) };
        first = first.and(gdr_status(|| "gdr_close".into(), rc));
        first.and(self.cuda.release_primary(self.cu_device))
    }
}

/// `gdrx_close`: takes allocator `id` out of the table and closes it.
pub fn close(id: u64) -> Result<()> {
    const FUNC: &str = "gdrx_close";
    let Some(a) = lookup(id) else {
        return Err(invalid(
            FUNC,
            format_args!("{id:#x} is not an open allocator"),
        ));
    };
    a.check_process(FUNC)?;
    let Some(a) = take(id) else {
        return Err(invalid(FUNC, format_args!("{id:#x} was closed")));
    };
    a.close()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_refused_once_closed_and_never_zero() {
        assert!(lookup(0).is_none());
        assert!(lookup(u64::MAX).is_none());
        assert!(take(12345).is_none());
        assert_eq!(close(0), Err(Errno(libc::EINVAL)));
        assert_eq!(split(0), None);
        assert_eq!(split(1 << 32 | 3), Some((2, 1)));
    }

    #[test]
    fn chunks_tell_device_and_cpu_addresses_apart() {
        let c = Chunk {
            dev: 0x10_0000,
            cpu: 0x7000_0000,
            len: 0x1000,
            mh: gdr_mh_t::default(),
            map: 0x7000_0000,
            backing: Backing::Plain {
                raw: 0,
                freed: true,
            },
            shared: true,
            extents: Extents::new(0x1000),
            live: BTreeMap::new(),
        };
        assert_eq!(c.offset_of(0x10_0040), Some(0x40));
        assert_eq!(c.offset_of(0x7000_0fff), Some(0xfff));
        assert_eq!(c.offset_of(0x10_1000), None);
        assert_eq!(c.offset_of(0xf_ffff), None);
    }

    #[test]
    fn backends_are_named_as_libgdrapi_logs_them() {
        assert_eq!(backend_name(0), "gdrdrv");
        assert_eq!(backend_name(1), "dma-buf");
        assert_eq!(backend_name(2), "vulkan");
        assert_eq!(backend_name(9), "unknown");
    }
}
