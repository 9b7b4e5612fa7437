//! Memory objects of the stand-in: imports of the emulator's VMM export fds and their CPU
//! mappings of the fake VRAM.

use super::device::memory_types;
use super::objects::{Mapping, Memory};
use super::{call, me, quietly, result};
use crate::config;
use crate::gpu;
use crate::intercept::set_kind;
use crate::real;
use crate::state::{State, STATE};
use gdrapi_abi::vk::{self, Handle};
use libc::{c_int, c_void};
use std::time::Duration;

/// The `VkImportMemoryFdInfoKHR` in a `pNext` chain: (handleType, fd).
///
/// # Safety
///
/// `next` is NULL or the head of a chain of Vulkan structures, each starting with `sType`
/// and `pNext`.
unsafe fn find_import(
    mut next: *const c_void,
) -> Option<(vk::ExternalMemoryHandleTypeFlags, c_int)> {
    let mut hops = 0;
    while !next.is_null() && hops < 64 {
        hops += 1;
        // SAFETY: a chained structure of the caller (the contract).
        let s = unsafe { &*next.cast::<vk::BaseInStructure>() };
        if s.s_type == vk::StructureType::IMPORT_MEMORY_FD_INFO_KHR {
            // SAFETY: its sType says it is a VkImportMemoryFdInfoKHR.
            let i = unsafe { &*next.cast::<vk::ImportMemoryFdInfoKHR>() };
            return Some((i.handle_type, i.fd));
        }
        next = s.p_next.cast();
    }
    None
}

/// `vkAllocateMemory`: imports an fd of `cuMemExportToShareableHandle`
/// (`VkImportMemoryFdInfoKHR`, `VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT`) on a device
/// with `VK_KHR_external_memory_fd` enabled, into a device-local memory type, with
/// `allocationSize` the physical allocation's size. On success the stand-in owns the fd (it is
/// closed) and the memory object holds the physical allocation until `vkFreeMemory`, and
/// BAR1 for its whole size unless another live import of it already does; then, with the
/// lock released, the call takes the import's cost ([`spend`]). Any other fd, handle type,
/// memory type or size: VK_ERROR_INVALID_EXTERNAL_HANDLE, the fd left open. An import past
/// `GDRSIM_VK_IMPORT_LIMIT` ([`Objects::import_allowed`](super::Objects::import_allowed)) or
/// one whose allocation does not fit in what is left of BAR1: VK_ERROR_OUT_OF_DEVICE_MEMORY,
/// the fd left open. An allocation that imports nothing: VK_ERROR_OUT_OF_DEVICE_MEMORY (not
/// offered).
pub(super) unsafe extern "system" fn allocate(
    device: vk::Device,
    info: *const vk::MemoryAllocateInfo,
    _alloc: *const vk::AllocationCallbacks,
    memory: *mut vk::DeviceMemory,
) -> vk::Result {
    call("vkAllocateMemory", || {
        let imported = (|| {
            if info.is_null() || memory.is_null() {
                return Err(vk::Result::ERROR_INITIALIZATION_FAILED);
            }
            // SAFETY: a non-NULL VkMemoryAllocateInfo from the caller.
            let info = unsafe { &*info };
            if info.s_type != vk::StructureType::MEMORY_ALLOCATE_INFO {
                return Err(vk::Result::ERROR_INITIALIZATION_FAILED);
            }
            let mut st = STATE.lock();
            let pid = me();
            let external_fd = st
                .vk
                .device(device.as_raw() as usize, pid)
                .ok_or(vk::Result::ERROR_INITIALIZATION_FAILED)?
                .external_fd;
            // SAFETY: the caller's pNext chain.
            let import = unsafe { find_import(info.p_next) };
            let Some((kind, fd)) = import.filter(|&(kind, _)| !kind.is_empty()) else {
                return Err(vk::Result::ERROR_OUT_OF_DEVICE_MEMORY);
            };
            const INVALID: vk::Result = vk::Result::ERROR_INVALID_EXTERNAL_HANDLE;
            if kind != vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD || !external_fd {
                return Err(INVALID);
            }
            let gen = st.gpu().map(|g| g.gen);
            let (handle, size, gen) = match st.export_of(fd) {
                Some(e) if e.pid == pid && Some(e.gen) == gen => (e.handle, e.size, e.gen),
                _ => return Err(INVALID),
            };
            let flags = memory_types()
                .get(info.memory_type_index as usize)
                .map(|&(flags, _)| flags)
                .filter(|f| f.contains(vk::MemoryPropertyFlags::DEVICE_LOCAL))
                .ok_or(INVALID)?;
            if info.allocation_size != size {
                return Err(INVALID);
            }
            if !st
                .vk
                .import_allowed(gen, handle, size, config::get().vk_import_limit)
            {
                return Err(vk::Result::ERROR_OUT_OF_DEVICE_MEMORY);
            }
            if !st.vk.holds_bar1(gen, handle) && !crate::bar1::fits(st.bar1_used(gen), size) {
                return Err(vk::Result::ERROR_OUT_OF_DEVICE_MEMORY);
            }
            // The fd's hold on the physical allocation becomes the memory object's.
            st.drop_export(fd, true);
            set_kind(fd, 0);
            // SAFETY: the import owns the fd now (the Vulkan contract); it is ours to close.
            unsafe { real::close(fd) };
            let h = st.vk.add_memory(Memory {
                pid,
                device: device.as_raw() as usize,
                gen,
                handle,
                size,
                host_visible: flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE),
                map: None,
            });
            Ok((h, size))
        })();
        // The lock is released: the import's cost blocks only this thread.
        let (h, size) = match imported {
            Ok(made) => made,
            Err(e) => return e,
        };
        spend(size);
        // SAFETY: non-NULL out-pointer from the caller (checked above).
        unsafe { memory.write(vk::DeviceMemory::from_raw(h)) };
        vk::Result::SUCCESS
    })
}

/// How long an import of an allocation of `size` bytes takes, and so does its free:
/// `GDRSIM_VK_IMPORT_NS_PER_MIB` per MiB (on an H200, about 11 us per MiB both ways).
pub(super) fn cost(size: u64) -> Duration {
    let ns = (u128::from(config::get().vk_import_ns_per_mib) * u128::from(size)) >> 20;
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

/// Takes the cost of importing or freeing `size` bytes ([`cost`]) on the calling thread by
/// sleeping (at least that long; the timer may add some tens of microseconds). The caller
/// must not hold the emulator's lock: other threads' calls go on meanwhile.
pub(super) fn spend(size: u64) {
    let d = cost(size);
    #[cfg(test)]
    super::tests::cost_hook(size, d);
    if !d.is_zero() {
        std::thread::sleep(d);
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

/// `vkMapMemory`: maps bytes `[offset, offset + size)` (`VK_WHOLE_SIZE`: to the end) of a
/// host-visible memory object; `*data` is the address of byte `offset`, showing the same
/// bytes as the device. The mapping holds no BAR1 (the import does). VK_ERROR_MEMORY_MAP_FAILED
/// for a memory type that is not host-visible, a memory object already mapped, a range
/// outside the allocation (or empty), flags other than 0, and unknown objects.
pub(super) unsafe extern "system" fn map(
    device: vk::Device,
    memory: vk::DeviceMemory,
    offset: u64,
    size: u64,
    flags: vk::MemoryMapFlags,
    data: *mut *mut c_void,
) -> vk::Result {
    call("vkMapMemory", || {
        result((|| {
            const FAILED: vk::Result = vk::Result::ERROR_MEMORY_MAP_FAILED;
            if data.is_null() || !flags.is_empty() {
                return Err(FAILED);
            }
            let mut st = STATE.lock();
            let gpu = st.gpu().map(|g| (g.gen, g.memfd));
            let m = st
                .vk
                .memory_mut(device.as_raw() as usize, memory.as_raw(), me())
                .ok_or(FAILED)?;
            if !m.host_visible || m.map.is_some() {
                return Err(FAILED);
            }
            let len = if size == vk::WHOLE_SIZE {
                m.size.checked_sub(offset).filter(|&l| l > 0)
            } else {
                offset
                    .checked_add(size)
                    .filter(|&end| size > 0 && end <= m.size)
                    .map(|_| size)
            }
            .ok_or(FAILED)?;
            let (gen, handle) = (m.gen, m.handle);
            let (_, memfd) = gpu.filter(|&(g, _)| g == gen).ok_or(FAILED)?;
            let (phys, _) = st.gpu().and_then(|g| g.vmm_range(handle)).ok_or(FAILED)?;
            let page = page_size();
            let (start, end) = (offset & !(page - 1), round_up(offset + len, page));
            // SAFETY: a new shared mapping of our VRAM memfd where the kernel chooses; the
            // range [phys + start, phys + end) lies in the physical allocation.
            let p = unsafe {
                real::mmap(
                    std::ptr::null_mut(),
                    (end - start) as usize,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    memfd,
                    (phys + start) as libc::off_t,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(FAILED);
            }
            let base = p as u64;
            gpu::dontfork(base, end - start);
            if let Some(m) = st
                .vk
                .memory_mut(device.as_raw() as usize, memory.as_raw(), me())
            {
                m.map = Some(Mapping {
                    base,
                    len: end - start,
                });
            }
            // SAFETY: non-NULL out-pointer from the caller.
            unsafe { data.write((base + (offset - start)) as *mut c_void) };
            Ok(vk::Result::SUCCESS)
        })())
    })
}

/// Removes a mapping made by [`map`].
fn unmap_now(x: Mapping) {
    // SAFETY: [base, base + len) is a mapping vkMapMemory made and nobody else owns; the
    // caller of vkUnmapMemory/vkFreeMemory gives it up.
    unsafe { real::munmap(x.base as *mut c_void, x.len as usize) };
}

/// `vkUnmapMemory`: removes the memory object's mapping, if it has one.
pub(super) unsafe extern "system" fn unmap(device: vk::Device, memory: vk::DeviceMemory) {
    quietly("vkUnmapMemory", || {
        let mut st = STATE.lock();
        if let Some(m) = st
            .vk
            .memory_mut(device.as_raw() as usize, memory.as_raw(), me())
        {
            if let Some(x) = m.map.take() {
                unmap_now(x);
            }
        }
    })
}

/// Unmaps a memory object that is gone and drops its hold on the physical allocation (the
/// caller reclaims).
pub(super) fn release(st: &mut State, m: Memory) {
    if let Some(x) = m.map {
        unmap_now(x);
    }
    if let Some(g) = st.gpu_mut().filter(|g| g.gen == m.gen) {
        g.vmm_unhold(m.handle);
    }
}

/// `vkFreeMemory`: unmaps the memory object if it is mapped and lets go of its physical
/// allocation (freed now if CUDA released and unmapped it and nothing else holds it) and, if
/// it was the allocation's last live import, of its BAR1; then, with the lock released, the
/// call takes the free's cost ([`spend`]).
pub(super) unsafe extern "system" fn free(
    device: vk::Device,
    memory: vk::DeviceMemory,
    _alloc: *const vk::AllocationCallbacks,
) {
    quietly("vkFreeMemory", || {
        if memory == vk::DeviceMemory::null() {
            return;
        }
        let freed = {
            let mut st = STATE.lock();
            let m = st
                .vk
                .remove_memory(device.as_raw() as usize, memory.as_raw(), me());
            m.map(|m| {
                let size = m.size;
                release(&mut st, m);
                st.reclaim();
                size
            })
        };
        if let Some(size) = freed {
            spend(size);
        }
    })
}
