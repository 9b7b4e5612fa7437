//! Fake device memory of one process: a sparse memfd ("VRAM") whose first part is mapped once
//! and sub-allocated by `cuMemAlloc` (device pointer = host address), and whose second part
//! backs `cuMemCreate` handles that `cuMemMap` maps into reserved address ranges.

use crate::cuda::errors as cu;
use crate::cuda::CUresult;
use crate::ranges::RangeAlloc;
use crate::real;
use libc::{c_int, c_void, pid_t};
use std::collections::{BTreeMap, HashMap};

/// GPU page size: pins are rounded to it (gdrdrv's).
pub const GPU_PAGE: u64 = gdrapi_abi::gdrdrv::GPU_PAGE_SIZE;
/// Granularity of `cuMemCreate`/`cuMemAddressReserve`, as reported by
/// `cuMemGetAllocationGranularity`.
pub const VMM_GRANULARITY: u64 = 2 << 20;
/// Alignment of `cuMemAlloc` results (small allocations share GPU pages).
pub const ALLOC_ALIGN: u64 = 256;
/// Size of the backing allocations `cuMemAlloc` carves small allocations from, as the driver
/// does: a pin may cover any part of a live chunk, and no pin may leave its chunk.
pub const CHUNK: u64 = 2 << 20;

/// A piece of a device address range and the VRAM file offset behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seg {
    /// Device (= host) address.
    pub va: u64,
    /// Length in bytes.
    pub len: u64,
    /// Offset in the VRAM memfd.
    pub phys: u64,
}

#[derive(Debug)]
struct Alloc {
    size: u64,
    rsize: u64,
}

/// A backing allocation of `cuMemAlloc` memory: one 2 MiB chunk shared by small allocations
/// (`sub` sub-allocates its VRAM offsets), or a run of chunks holding one large allocation.
#[derive(Debug)]
struct Chunk {
    len: u64,
    sub: Option<RangeAlloc>,
    live: u32,
}

/// A physical allocation of `cuMemCreate`. Its VRAM goes back to the pool once no CUDA
/// reference, mapping, export fd, Vulkan import or pin holds it.
#[derive(Debug)]
struct PhysHandle {
    phys: u64,
    size: u64,
    /// `requestedHandleTypes` of the `CUmemAllocationProp` it was created with.
    handle_types: u32,
    /// CUDA references: one from `cuMemCreate`, one per `cuMemRetainAllocationHandle`, less one
    /// per `cuMemRelease`. At 0 the handle value is no longer valid for the CUDA API.
    refs: u32,
    maps: u32,
    /// Export fds not yet closed or imported, and Vulkan imports not yet freed.
    holds: u32,
}

/// `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`.
pub const HANDLE_TYPE_POSIX_FD: u32 =
    gdrapi_abi::cuda::MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR as u32;
/// The handle types `cuda.h` defines: POSIX fd, Win32, Win32 KMT, fabric.
const HANDLE_TYPES_KNOWN: u32 = 0xF;

/// What `cuMemExportToShareableHandle` answers for an allocation created without the POSIX fd
/// handle type. CUDA_ERROR_INVALID_VALUE is what the documentation suggests; the real driver's
/// code for this case is still to be confirmed on a GPU.
pub const EXPORT_NOT_REQUESTED: CUresult = cu::INVALID_VALUE;

#[derive(Debug)]
struct VMap {
    size: u64,
    handle: u64,
    phys: u64,
}

/// The fake GPU of one process.
#[derive(Debug)]
pub struct Gpu {
    /// The process that ran `cuInit`; any other process (a forked child) must init its own.
    pub pid: pid_t,
    /// Distinguishes this GPU from one a forked child's table may still mention.
    pub gen: u64,
    /// The VRAM memfd.
    pub memfd: c_int,
    base: u64,
    total: u64,
    linear_size: u64,
    align: u64,
    linear: RangeAlloc,
    phys: RangeAlloc,
    allocs: BTreeMap<u64, Alloc>,
    chunks: BTreeMap<u64, Chunk>,
    zombies: Vec<(u64, u64)>,
    handles: HashMap<u64, PhysHandle>,
    next_handle: u64,
    reservations: BTreeMap<u64, u64>,
    vmaps: BTreeMap<u64, VMap>,
}

/// Maps `len` bytes somewhere aligned to `align`, PROT_NONE, private and anonymous.
pub(crate) fn reserve_aligned(len: u64, align: u64) -> Option<u64> {
    let total = len.checked_add(align)?;
    // SAFETY: a fresh anonymous PROT_NONE mapping chosen by the kernel touches no existing memory.
    let p = unsafe {
        real::mmap(
            std::ptr::null_mut(),
            total as usize,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    let start = p as u64;
    let at = (start + align - 1) & !(align - 1);
    // SAFETY: both trimmed pieces lie inside the mapping made just above and nobody uses them.
    unsafe {
        if at > start {
            real::munmap(start as *mut c_void, (at - start) as usize);
        }
        let end = start + total;
        if at + len < end {
            real::munmap((at + len) as *mut c_void, (end - at - len) as usize);
        }
    }
    Some(at)
}

/// Maps `len` bytes of `fd` at `phys` over `[va, va + len)`, which the caller owns.
fn map_fixed(va: u64, len: u64, fd: c_int, phys: u64, prot: c_int) -> bool {
    // SAFETY: the caller owns [va, va+len) (a reservation or a mapping of its own), so replacing
    // it with MAP_FIXED cannot clobber anyone else's memory.
    let p = unsafe {
        real::mmap(
            va as *mut c_void,
            len as usize,
            prot,
            libc::MAP_SHARED | libc::MAP_FIXED,
            fd,
            phys as libc::off_t,
        )
    };
    p != libc::MAP_FAILED
}

/// Marks `[va, va + len)` as not inherited by forked children.
pub fn dontfork(va: u64, len: u64) {
    // SAFETY: madvise only changes the inheritance flag of mappings the caller made.
    unsafe { libc::madvise(va as *mut c_void, len as usize, libc::MADV_DONTFORK) };
}

impl Gpu {
    /// Creates the VRAM file of `size` bytes and maps its `cuMemAlloc` half.
    pub fn create(pid: pid_t, gen: u64, size: u64) -> Result<Gpu, CUresult> {
        // SAFETY: the name is a NUL-terminated literal.
        let memfd = unsafe { libc::memfd_create(c"gdrsim-vram".as_ptr(), libc::MFD_CLOEXEC) };
        if memfd < 0 {
            return Err(cu::OUT_OF_MEMORY);
        }
        let fail = |e| {
            // SAFETY: memfd was opened above and is not shared yet.
            unsafe { real::close(memfd) };
            Err(e)
        };
        // SAFETY: ftruncate on our own fresh memfd.
        if unsafe { libc::ftruncate(memfd, size as libc::off_t) } != 0 {
            return fail(cu::OUT_OF_MEMORY);
        }
        let linear_size = (size / 2) & !(VMM_GRANULARITY - 1);
        let Some(base) = reserve_aligned(linear_size, VMM_GRANULARITY) else {
            return fail(cu::OUT_OF_MEMORY);
        };
        if !map_fixed(
            base,
            linear_size,
            memfd,
            0,
            libc::PROT_READ | libc::PROT_WRITE,
        ) {
            return fail(cu::OUT_OF_MEMORY);
        }
        dontfork(base, linear_size);
        Ok(Gpu::empty(pid, gen, memfd, base, size, linear_size))
    }

    /// A GPU whose `cuMemAlloc` memory is `size` bytes at device address `base` that the
    /// emulator does not map itself (the Vulkan backing's arena; offsets are arena offsets).
    /// It has no memfd and no `cuMemCreate` memory.
    pub fn external(pid: pid_t, gen: u64, base: u64, size: u64) -> Gpu {
        Gpu::empty(pid, gen, -1, base, size, size)
    }

    /// As [`Gpu::external`], with `cuMemAlloc` results aligned to and rounded up to `align`
    /// (a power of two): the kernel backing's provider deals in whole 64 KiB pages.
    pub fn external_aligned(pid: pid_t, gen: u64, base: u64, size: u64, align: u64) -> Gpu {
        Gpu {
            align: align.max(ALLOC_ALIGN),
            ..Gpu::external(pid, gen, base, size)
        }
    }

    /// A GPU with nothing allocated: `size` bytes of VRAM whose first `linear_size` serve
    /// `cuMemAlloc` at device address `base` and the rest `cuMemCreate`.
    fn empty(pid: pid_t, gen: u64, memfd: c_int, base: u64, size: u64, linear_size: u64) -> Gpu {
        Gpu {
            pid,
            gen,
            memfd,
            base,
            total: size,
            linear_size,
            align: ALLOC_ALIGN,
            linear: RangeAlloc::new(0, linear_size),
            phys: RangeAlloc::new(linear_size, size - linear_size),
            allocs: BTreeMap::new(),
            chunks: BTreeMap::new(),
            zombies: Vec::new(),
            handles: HashMap::new(),
            next_handle: 1,
            reservations: BTreeMap::new(),
            vmaps: BTreeMap::new(),
        }
    }

    /// `cuMemAlloc`: a 256-byte aligned device pointer. Allocations of less than [`CHUNK`]
    /// bytes share 2 MiB chunks; larger ones get chunks of their own.
    pub fn mem_alloc(&mut self, size: u64) -> Result<u64, CUresult> {
        if size == 0 {
            return Err(cu::INVALID_VALUE);
        }
        let rsize = size.checked_add(self.align - 1).ok_or(cu::OUT_OF_MEMORY)? & !(self.align - 1);
        if rsize >= CHUNK {
            let clen = rsize.checked_add(CHUNK - 1).ok_or(cu::OUT_OF_MEMORY)? & !(CHUNK - 1);
            let off = self.linear.alloc(clen, CHUNK).ok_or(cu::OUT_OF_MEMORY)?;
            let va = self.base + off;
            let chunk = Chunk {
                len: clen,
                sub: None,
                live: 1,
            };
            self.chunks.insert(va, chunk);
            self.allocs.insert(va, Alloc { size, rsize: clen });
            return Ok(va);
        }
        let found = self.chunks.iter_mut().find_map(|(&cva, c)| {
            let off = c.sub.as_mut()?.alloc(rsize, self.align)?;
            c.live += 1;
            Some((cva, off))
        });
        let off = match found {
            Some((_, off)) => off,
            None => {
                let coff = self.linear.alloc(CHUNK, CHUNK).ok_or(cu::OUT_OF_MEMORY)?;
                let mut sub = RangeAlloc::new(coff, CHUNK);
                let off = sub.alloc(rsize, self.align).ok_or(cu::OUT_OF_MEMORY)?;
                let chunk = Chunk {
                    len: CHUNK,
                    sub: Some(sub),
                    live: 1,
                };
                self.chunks.insert(self.base + coff, chunk);
                off
            }
        };
        let va = self.base + off;
        self.allocs.insert(va, Alloc { size, rsize });
        Ok(va)
    }

    /// The chunk containing device address `va`: (its start, the chunk).
    fn chunk_of(&mut self, va: u64) -> Option<(u64, &mut Chunk)> {
        self.chunks
            .range_mut(..=va)
            .next_back()
            .filter(|(&cva, c)| va < cva + c.len)
            .map(|(&cva, c)| (cva, c))
    }

    /// Whether the driver accepts a pin of `[start, start + len)` (rounded to GPU pages) for
    /// the user address `addr`: within one live `cuMemAlloc` chunk, or starting in a live
    /// mapped `cuMemCreate` range that the whole range lies in fake VRAM of.
    pub fn pinnable(&self, addr: u64, start: u64, len: u64) -> bool {
        if addr >= self.base && addr < self.base + self.linear_size {
            let Some(end) = start.checked_add(len) else {
                return false;
            };
            return self
                .chunks
                .range(..=start)
                .next_back()
                .is_some_and(|(&cva, c)| c.live > 0 && end <= cva + c.len && addr < cva + c.len);
        }
        self.in_live_allocation(addr) && self.translate(start, len).is_some()
    }

    /// `cuMemFree`: forgets the allocation starting at `va`; its bytes return to the pool when
    /// [`Gpu::reclaim`] finds no pin holding them. Returns the freed byte range.
    pub fn mem_free(&mut self, va: u64) -> Result<(u64, u64), CUresult> {
        let a = self.allocs.remove(&va).ok_or(cu::INVALID_VALUE)?;
        if let Some((_, c)) = self.chunk_of(va) {
            c.live -= 1;
        }
        self.zombies.push((va - self.base, a.rsize));
        Ok((va, a.size))
    }

    /// Number of live `cuMemAlloc` allocations plus unreleased `cuMemCreate` handles.
    pub fn live_allocations(&self) -> u64 {
        (self.allocs.len() + self.handles.values().filter(|h| h.refs > 0).count()) as u64
    }

    /// Returns freed memory that no held range (VRAM offsets of live pins and dma-bufs)
    /// overlaps to the allocators.
    pub fn reclaim(&mut self, held: &[(u64, u64)]) {
        let overlaps = |s: u64, l: u64| held.iter().any(|&(hs, hl)| hs < s + l && s < hs + hl);
        let mut keep = Vec::new();
        for (s, l) in std::mem::take(&mut self.zombies) {
            if overlaps(s, l) {
                keep.push((s, l));
                continue;
            }
            match self.chunk_of(self.base + s) {
                Some((_, c)) if c.sub.is_some() => {
                    if let Some(sub) = c.sub.as_mut() {
                        sub.free(s, l);
                    }
                }
                Some((cva, _)) => {
                    self.chunks.remove(&cva);
                    self.linear.free(s, l);
                }
                None => self.linear.free(s, l),
            }
        }
        self.zombies = keep;
        // Shared chunks with nothing live and nothing held go back to the pool.
        let empty: Vec<(u64, u64)> = self
            .chunks
            .iter()
            .filter(|(_, c)| c.live == 0 && c.sub.as_ref().is_some_and(|r| r.free_bytes() == c.len))
            .map(|(&cva, c)| (cva, c.len))
            .collect();
        for (cva, len) in empty {
            self.chunks.remove(&cva);
            self.linear.free(cva - self.base, len);
        }
        let dead: Vec<u64> = self
            .handles
            .iter()
            .filter(|(_, h)| {
                h.refs == 0 && h.maps == 0 && h.holds == 0 && !overlaps(h.phys, h.size)
            })
            .map(|(&id, _)| id)
            .collect();
        for id in dead {
            if let Some(h) = self.handles.remove(&id) {
                self.phys.free(h.phys, h.size);
            }
        }
    }

    /// Whether `addr` lies inside a live allocation (cuMemAlloc'd or cuMemMap'd).
    pub fn in_live_allocation(&self, addr: u64) -> bool {
        if let Some((&va, a)) = self.allocs.range(..=addr).next_back() {
            if addr < va + a.size {
                return true;
            }
        }
        matches!(self.vmaps.range(..=addr).next_back(), Some((&va, m)) if addr < va + m.size)
    }

    /// The allocation (`cuMemAlloc`'d or `cuMemMap`'d) containing `addr`: (start, size).
    pub fn allocation_of(&self, addr: u64) -> Option<(u64, u64)> {
        if let Some((&va, a)) = self.allocs.range(..=addr).next_back() {
            if addr < va + a.size {
                return Some((va, a.size));
            }
        }
        match self.vmaps.range(..=addr).next_back() {
            Some((&va, m)) if addr < va + m.size => Some((va, m.size)),
            _ => None,
        }
    }

    /// Total and free bytes of fake VRAM.
    pub fn mem_info(&self) -> (u64, u64) {
        (
            self.linear.free_bytes() + self.phys.free_bytes(),
            self.total,
        )
    }

    /// The VRAM pieces behind `[va, va + len)`, or `None` if any byte is not fake VRAM.
    pub fn translate(&self, va: u64, len: u64) -> Option<Vec<Seg>> {
        let end = va.checked_add(len)?;
        let mut segs: Vec<Seg> = Vec::new();
        let mut at = va;
        while at < end {
            let (phys, run) = if at >= self.base && at < self.base + self.linear_size {
                (at - self.base, self.base + self.linear_size - at)
            } else {
                let (&mva, m) = self.vmaps.range(..=at).next_back()?;
                if at >= mva + m.size {
                    return None;
                }
                (m.phys + (at - mva), mva + m.size - at)
            };
            let n = run.min(end - at);
            match segs.last_mut() {
                Some(last) if last.phys + last.len == phys => last.len += n,
                _ => segs.push(Seg {
                    va: at,
                    len: n,
                    phys,
                }),
            }
            at += n;
        }
        Some(segs)
    }

    /// `cuMemCreate`: a handle for `size` bytes of VRAM that may be exported as the handle types
    /// `handle_types` (`requestedHandleTypes`): 0 or the POSIX fd type; the other types
    /// `cuda.h` defines are not offered by the device (CUDA_ERROR_NOT_SUPPORTED), unknown bits
    /// are CUDA_ERROR_INVALID_VALUE.
    pub fn vmm_create(&mut self, size: u64, handle_types: u32) -> Result<u64, CUresult> {
        if self.memfd < 0 {
            return Err(cu::NOT_SUPPORTED);
        }
        if size == 0 || !size.is_multiple_of(VMM_GRANULARITY) {
            return Err(cu::INVALID_VALUE);
        }
        if handle_types & !HANDLE_TYPES_KNOWN != 0 {
            return Err(cu::INVALID_VALUE);
        }
        if handle_types & !HANDLE_TYPE_POSIX_FD != 0 {
            return Err(cu::NOT_SUPPORTED);
        }
        let phys = self
            .phys
            .alloc(size, VMM_GRANULARITY)
            .ok_or(cu::OUT_OF_MEMORY)?;
        let id = self.next_handle;
        self.next_handle += 1;
        self.handles.insert(
            id,
            PhysHandle {
                phys,
                size,
                handle_types,
                refs: 1,
                maps: 0,
                holds: 0,
            },
        );
        Ok(id)
    }

    /// `cuMemRelease`: drops one CUDA reference; the memory goes once nothing holds it.
    pub fn vmm_release(&mut self, id: u64) -> Result<(), CUresult> {
        match self.handles.get_mut(&id) {
            Some(h) if h.refs > 0 => {
                h.refs -= 1;
                Ok(())
            }
            _ => Err(cu::INVALID_VALUE),
        }
    }

    /// `cuMemRetainAllocationHandle`: the handle mapped at `addr` (anywhere inside a
    /// `cuMemMap`'d range), with one more CUDA reference. The handle value is the one
    /// `cuMemCreate` returned.
    pub fn vmm_retain(&mut self, addr: u64) -> Result<u64, CUresult> {
        let id = match self.vmaps.range(..=addr).next_back() {
            Some((&va, m)) if addr < va + m.size => m.handle,
            _ => return Err(cu::INVALID_VALUE),
        };
        let h = self.handles.get_mut(&id).ok_or(cu::INVALID_VALUE)?;
        h.refs += 1;
        Ok(id)
    }

    /// The requested handle types of a handle the CUDA API may still use.
    pub fn vmm_handle_types(&self, id: u64) -> Result<u32, CUresult> {
        match self.handles.get(&id) {
            Some(h) if h.refs > 0 => Ok(h.handle_types),
            _ => Err(cu::INVALID_VALUE),
        }
    }

    /// The requested handle types of the allocation mapped at `addr`, if any.
    pub fn vmm_handle_types_at(&self, addr: u64) -> Option<u32> {
        match self.vmaps.range(..=addr).next_back() {
            Some((&va, m)) if addr < va + m.size => {
                self.handles.get(&m.handle).map(|h| h.handle_types)
            }
            _ => None,
        }
    }

    /// `cuMemExportToShareableHandle` of the POSIX fd type: the allocation gains a holder
    /// (the fd); returns its size. Unknown or released handles are CUDA_ERROR_INVALID_VALUE,
    /// an allocation created without the POSIX fd type [`EXPORT_NOT_REQUESTED`].
    pub fn vmm_export(&mut self, id: u64) -> Result<u64, CUresult> {
        let h = match self.handles.get_mut(&id) {
            Some(h) if h.refs > 0 => h,
            _ => return Err(cu::INVALID_VALUE),
        };
        if h.handle_types & HANDLE_TYPE_POSIX_FD == 0 {
            return Err(EXPORT_NOT_REQUESTED);
        }
        h.holds += 1;
        Ok(h.size)
    }

    /// The VRAM range `(offset in the memfd, size)` of a physical allocation that still
    /// exists (whether or not the CUDA API may still use its handle).
    pub fn vmm_range(&self, id: u64) -> Option<(u64, u64)> {
        self.handles.get(&id).map(|h| (h.phys, h.size))
    }

    /// Drops a holder (an export fd or a Vulkan import) of a physical allocation; the caller
    /// reclaims afterwards.
    pub fn vmm_unhold(&mut self, id: u64) {
        if let Some(h) = self.handles.get_mut(&id) {
            h.holds = h.holds.saturating_sub(1);
        }
    }

    /// `cuMemAddressReserve`.
    pub fn vmm_reserve(&mut self, size: u64, align: u64) -> Result<u64, CUresult> {
        let align = if align == 0 { VMM_GRANULARITY } else { align };
        if size == 0 || !size.is_multiple_of(VMM_GRANULARITY) || !align.is_power_of_two() {
            return Err(cu::INVALID_VALUE);
        }
        let va = reserve_aligned(size, align.max(VMM_GRANULARITY)).ok_or(cu::OUT_OF_MEMORY)?;
        dontfork(va, size);
        self.reservations.insert(va, size);
        Ok(va)
    }

    fn reservation_covers(&self, va: u64, size: u64) -> bool {
        matches!(self.reservations.range(..=va).next_back(), Some((&r, &rs)) if va + size <= r + rs)
    }

    /// `cuMemMap`: backs `[va, va + size)` with the handle's memory from `offset`.
    pub fn vmm_map(&mut self, va: u64, size: u64, offset: u64, id: u64) -> Result<(), CUresult> {
        if size == 0
            || !size.is_multiple_of(VMM_GRANULARITY)
            || !va.is_multiple_of(VMM_GRANULARITY)
            || !offset.is_multiple_of(VMM_GRANULARITY)
        {
            return Err(cu::INVALID_VALUE);
        }
        if !self.reservation_covers(va, size) {
            return Err(cu::INVALID_VALUE);
        }
        if self
            .vmaps
            .range(..va + size)
            .next_back()
            .is_some_and(|(&m, mm)| m + mm.size > va)
        {
            return Err(cu::INVALID_VALUE);
        }
        let h = self.handles.get_mut(&id).ok_or(cu::INVALID_HANDLE)?;
        if h.refs == 0 || offset.checked_add(size).is_none_or(|e| e > h.size) {
            return Err(cu::INVALID_VALUE);
        }
        let phys = h.phys + offset;
        if !map_fixed(
            va,
            size,
            self.memfd,
            phys,
            libc::PROT_READ | libc::PROT_WRITE,
        ) {
            return Err(cu::OUT_OF_MEMORY);
        }
        dontfork(va, size);
        h.maps += 1;
        self.vmaps.insert(
            va,
            VMap {
                size,
                handle: id,
                phys,
            },
        );
        Ok(())
    }

    /// `cuMemUnmap`: removes every mapping inside `[va, va + size)`; returns the removed ranges.
    pub fn vmm_unmap(&mut self, va: u64, size: u64) -> Result<Vec<(u64, u64)>, CUresult> {
        if size == 0 || !self.reservation_covers(va, size) {
            return Err(cu::INVALID_VALUE);
        }
        let inside: Vec<u64> = self.vmaps.range(va..va + size).map(|(&m, _)| m).collect();
        let mut out = Vec::new();
        for m in inside {
            let Some(vm) = self.vmaps.get(&m) else {
                continue;
            };
            if m + vm.size > va + size {
                continue;
            }
            let (len, id) = (vm.size, vm.handle);
            self.vmaps.remove(&m);
            // SAFETY: [m, m+len) is inside our own reservation; turning it back into PROT_NONE
            // anonymous memory keeps the reservation.
            unsafe {
                real::mmap(
                    m as *mut c_void,
                    len as usize,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            dontfork(m, len);
            if let Some(h) = self.handles.get_mut(&id) {
                h.maps = h.maps.saturating_sub(1);
            }
            out.push((m, len));
        }
        Ok(out)
    }

    /// `cuMemAddressFree`: gives a whole reservation back; anything still mapped in it is unmapped.
    pub fn vmm_address_free(&mut self, va: u64, size: u64) -> Result<Vec<(u64, u64)>, CUresult> {
        if self.reservations.get(&va) != Some(&size) {
            return Err(cu::INVALID_VALUE);
        }
        let removed = self.vmm_unmap(va, size)?;
        self.reservations.remove(&va);
        // SAFETY: the reservation is ours and nothing in it is in use any more.
        unsafe { real::munmap(va as *mut c_void, size as usize) };
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu() -> Gpu {
        Gpu::create(crate::state::pid(), 1, 64 << 20).expect("fake VRAM")
    }

    #[test]
    fn allocations_are_sub_page_and_translate_to_the_file() {
        let mut g = gpu();
        let a = g.mem_alloc(4).unwrap();
        let b = g.mem_alloc(GPU_PAGE + 4).unwrap();
        assert_eq!(b - a, ALLOC_ALIGN);
        assert_ne!(b % GPU_PAGE, 0);
        assert!(g.in_live_allocation(b + GPU_PAGE));
        assert!(!g.in_live_allocation(b + GPU_PAGE + 4));
        let segs = g.translate(a, 2 * GPU_PAGE).unwrap();
        assert_eq!(
            segs,
            vec![Seg {
                va: a,
                len: 2 * GPU_PAGE,
                phys: a - g.base
            }]
        );
        assert!(g.translate(g.base + g.linear_size - 8, 16).is_none());
        assert_eq!(g.mem_alloc(0), Err(cu::INVALID_VALUE));
        assert_eq!(g.mem_free(a + 1), Err(cu::INVALID_VALUE));
    }

    #[test]
    fn freed_memory_waits_for_its_holders() {
        let mut g = gpu();
        let a = g.mem_alloc(GPU_PAGE).unwrap();
        let (va, len) = g.mem_free(a).unwrap();
        assert_eq!((va, len), (a, GPU_PAGE));
        g.reclaim(&[(a - g.base, 16)]);
        let b = g.mem_alloc(GPU_PAGE).unwrap();
        assert_ne!(b, a, "pinned pages must not be handed out again");
        g.reclaim(&[]);
        assert_eq!(g.mem_alloc(GPU_PAGE).unwrap(), a);
        assert_eq!(g.live_allocations(), 2);
    }

    #[test]
    fn vmm_maps_handles_into_reservations() {
        let mut g = gpu();
        let h = g.vmm_create(2 * VMM_GRANULARITY, 0).unwrap();
        assert_eq!(g.vmm_create(VMM_GRANULARITY / 2, 0), Err(cu::INVALID_VALUE));
        let va = g.vmm_reserve(4 * VMM_GRANULARITY, 0).unwrap();
        assert_eq!(va % VMM_GRANULARITY, 0);
        g.vmm_map(va + VMM_GRANULARITY, 2 * VMM_GRANULARITY, 0, h)
            .unwrap();
        assert_eq!(
            g.vmm_map(va, VMM_GRANULARITY, 0, h + 7),
            Err(cu::INVALID_HANDLE)
        );
        assert!(g.translate(va, 16).is_none());
        let s = g.translate(va + VMM_GRANULARITY, 16).unwrap();
        assert_eq!(s.len(), 1);
        assert!(g.in_live_allocation(va + VMM_GRANULARITY));
        assert_eq!(
            g.vmm_unmap(va + VMM_GRANULARITY, 2 * VMM_GRANULARITY)
                .unwrap()
                .len(),
            1
        );
        assert!(g.translate(va + VMM_GRANULARITY, 16).is_none());
        g.vmm_release(h).unwrap();
        assert_eq!(g.vmm_release(h), Err(cu::INVALID_VALUE));
        g.vmm_address_free(va, 4 * VMM_GRANULARITY).unwrap();
        assert_eq!(g.live_allocations(), 0);
    }

    #[test]
    fn vmm_references_exports_and_holds() {
        let mut g = gpu();
        let size = 2 * VMM_GRANULARITY;
        let free0 = g.mem_info().0;
        assert_eq!(g.vmm_create(size, 2), Err(cu::NOT_SUPPORTED));
        assert_eq!(g.vmm_create(size, 0x10), Err(cu::INVALID_VALUE));
        let plain = g.vmm_create(size, 0).unwrap();
        let h = g.vmm_create(size, HANDLE_TYPE_POSIX_FD).unwrap();
        assert_eq!(g.vmm_export(plain), Err(EXPORT_NOT_REQUESTED));
        assert_eq!(g.vmm_handle_types(plain), Ok(0));
        assert_eq!(g.vmm_handle_types(h), Ok(HANDLE_TYPE_POSIX_FD));
        let va = g.vmm_reserve(size, 0).unwrap();
        assert_eq!(
            g.vmm_retain(va),
            Err(cu::INVALID_VALUE),
            "reserved, not mapped"
        );
        g.vmm_map(va, size, 0, h).unwrap();
        assert_eq!(g.vmm_retain(va + 12345), Ok(h));
        assert_eq!(g.vmm_retain(va + size), Err(cu::INVALID_VALUE));
        assert_eq!(g.vmm_handle_types_at(va + 5), Some(HANDLE_TYPE_POSIX_FD));
        // Two references: the first release leaves the handle usable.
        g.vmm_release(h).unwrap();
        assert_eq!(g.live_allocations(), 2);
        assert_eq!(g.vmm_export(h), Ok(size));
        g.vmm_release(h).unwrap();
        assert_eq!(g.vmm_release(h), Err(cu::INVALID_VALUE));
        assert_eq!(g.vmm_export(h), Err(cu::INVALID_VALUE));
        assert_eq!(g.vmm_handle_types(h), Err(cu::INVALID_VALUE));
        // Still mapped: a retain at the address gives the same handle value again.
        assert_eq!(g.vmm_retain(va), Ok(h));
        g.vmm_release(h).unwrap();
        g.vmm_address_free(va, size).unwrap();
        g.vmm_release(plain).unwrap();
        g.reclaim(&[]);
        // Released and unmapped, but the export still holds the memory.
        assert_eq!(g.live_allocations(), 0);
        assert_eq!(g.vmm_range(h).map(|r| r.1), Some(size));
        assert_eq!(g.mem_info().0, free0 - size);
        g.vmm_unhold(h);
        g.reclaim(&[]);
        assert_eq!(g.vmm_range(h), None);
        assert_eq!(g.mem_info().0, free0);
    }
}
