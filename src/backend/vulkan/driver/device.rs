//! A Vulkan logical device: opaque fds imported as device memory, mapped for the CPU.

use super::{check, resolve_command, Failure, VkError};
use gdrapi_abi::vk;
use std::ffi::c_void;
use std::os::fd::{IntoRawFd, OwnedFd};
use std::ptr;

/// The device's entry points.
struct Fns {
    destroy_device: vk::PFN_vkDestroyDevice,
    allocate_memory: vk::PFN_vkAllocateMemory,
    free_memory: vk::PFN_vkFreeMemory,
    map_memory: vk::PFN_vkMapMemory,
    unmap_memory: vk::PFN_vkUnmapMemory,
}

/// A logical device with `VK_KHR_external_memory_fd` enabled; destroyed on drop, after every
/// memory object imported into it was freed. Shared between threads (ash's handles are `Send`
/// and `Sync`): vkAllocateMemory and vkFreeMemory need no external synchronisation on the
/// device, and the backend serialises vkMapMemory/vkUnmapMemory/vkFreeMemory of each memory
/// object (one handle state per pin); vkDestroyDevice runs once, in `drop`.
pub struct Device {
    handle: vk::Device,
    fns: Fns,
}

impl Device {
    /// Takes ownership of `handle`, resolving its entry points; destroys it if one is missing.
    ///
    /// # Safety
    /// `handle` is a live device, owned by nothing else, and `gdpa` its instance's
    /// `vkGetDeviceProcAddr`.
    pub(super) unsafe fn new(
        handle: vk::Device,
        gdpa: vk::PFN_vkGetDeviceProcAddr,
    ) -> Result<Device, Failure> {
        // SAFETY: the caller's contract; the type named is the entry point's own. Without it
        // the device can only be leaked.
        let destroy_device: vk::PFN_vkDestroyDevice =
            unsafe { resolve_command(gdpa, handle, c"vkDestroyDevice")? };
        // Each field's type is the entry point's own (`PFN_<name>`), on a live device.
        let fns = (|| {
            Ok::<_, Failure>(Fns {
                destroy_device,
                // SAFETY: see above.
                allocate_memory: unsafe { resolve_command(gdpa, handle, c"vkAllocateMemory")? },
                // SAFETY: see above.
                free_memory: unsafe { resolve_command(gdpa, handle, c"vkFreeMemory")? },
                // SAFETY: see above.
                map_memory: unsafe { resolve_command(gdpa, handle, c"vkMapMemory")? },
                // SAFETY: see above.
                unmap_memory: unsafe { resolve_command(gdpa, handle, c"vkUnmapMemory")? },
            })
        })();
        match fns {
            Ok(fns) => Ok(Device { handle, fns }),
            Err(e) => {
                // SAFETY: the device is live, owns nothing, and is destroyed once.
                unsafe { destroy_device(handle, ptr::null()) };
                Err(e)
            }
        }
    }

    /// Imports `fd`, an opaque fd of an allocation of `size` bytes, as memory of type
    /// `memory_type`. On success Vulkan owns the descriptor; on failure it is closed.
    pub fn import(
        &self,
        fd: OwnedFd,
        size: u64,
        memory_type: u32,
    ) -> Result<vk::DeviceMemory, VkError> {
        let mut import = vk::ImportMemoryFdInfoKHR::default()
            .handle_type(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD)
            .fd(std::os::fd::AsRawFd::as_raw_fd(&fd));
        let info = vk::MemoryAllocateInfo::default()
            .allocation_size(size)
            .memory_type_index(memory_type)
            .push_next(&mut import);
        let mut memory = vk::DeviceMemory::null();
        // SAFETY: `info` and the chained `import` live across the call; `memory` is writable.
        check("vkAllocateMemory", unsafe {
            (self.fns.allocate_memory)(self.handle, &info, ptr::null(), &mut memory)
        })?; // `fd` is closed on this path.
             // The implementation owns the descriptor now.
        let _ = fd.into_raw_fd();
        Ok(memory)
    }

    /// Maps `size` bytes of `memory` from `offset`; returns the address of byte `offset`.
    ///
    /// # Safety
    /// `memory` was imported into this device, is not freed and not mapped, and no other
    /// thread maps, unmaps or frees it during the call.
    pub unsafe fn map(
        &self,
        memory: vk::DeviceMemory,
        offset: u64,
        size: u64,
    ) -> Result<*mut c_void, VkError> {
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: the caller's contract; `p` is writable.
        check("vkMapMemory", unsafe {
            (self.fns.map_memory)(
                self.handle,
                memory,
                offset,
                size,
                vk::MemoryMapFlags::empty(),
                &mut p,
            )
        })?;
        if p.is_null() {
            return Err(VkError {
                call: "vkMapMemory",
                code: vk::Result::ERROR_MEMORY_MAP_FAILED,
            });
        }
        Ok(p)
    }

    /// Unmaps `memory`.
    ///
    /// # Safety
    /// `memory` was mapped by [`Device::map`] and nothing uses the mapping any more.
    pub unsafe fn unmap(&self, memory: vk::DeviceMemory) {
        // SAFETY: the caller's contract.
        unsafe { (self.fns.unmap_memory)(self.handle, memory) };
    }

    /// Frees `memory` (and its mapping, if it still has one).
    ///
    /// # Safety
    /// `memory` was imported into this device, is freed once, and nothing uses it after.
    pub unsafe fn free(&self, memory: vk::DeviceMemory) {
        // SAFETY: the caller's contract.
        unsafe { (self.fns.free_memory)(self.handle, memory, ptr::null()) };
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: the device is live and destroyed once; the backend freed its memory first.
        unsafe { (self.fns.destroy_device)(self.handle, ptr::null()) };
    }
}
