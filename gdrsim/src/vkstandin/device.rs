//! Instances, the physical device and devices of the stand-in.

use super::{c_name, call, enumerate, me, quietly, result};
use crate::config::{self, VkSituation};
use crate::state::STATE;
use gdrapi_abi::vk::{self, Handle};
use libc::c_char;
use std::ffi::CStr;

/// `VK_KHR_get_physical_device_properties2` and `VK_KHR_external_memory_capabilities`, the
/// instance extensions NVIDIA's driver offers that concern this backend.
const INSTANCE_EXTENSIONS: [(&str, u32); 2] = [
    ("VK_KHR_get_physical_device_properties2", 2),
    ("VK_KHR_external_memory_capabilities", 1),
];

/// What the device reports: a name no real device has, NVIDIA's vendor id, an H200's device id.
pub const DEVICE_NAME: &str = "gdrsim Vulkan stand-in";
const VENDOR_NVIDIA: u32 = 0x10de;
const DEVICE_ID: u32 = 0x2335;
/// An NVIDIA-style driver version (580.95.5).
const DRIVER_VERSION: u32 = (580 << 22) | (95 << 14) | (5 << 6);
/// The UUID of `GDRSIM_VULKAN=otheruuid`: a device that is no CUDA device.
pub const OTHER_UUID: [u8; 16] = *b"gdrsim-other-gpu";
const DRIVER_UUID: [u8; 16] = *b"gdrsim-vkdriver0";
const PIPELINE_CACHE_UUID: [u8; 16] = *b"gdrsim-pipeline0";
/// Queues of the one queue family.
const QUEUES: u32 = 16;

/// The extension imports need.
const EXT_FD: &str = "VK_KHR_external_memory_fd";

/// The device extensions offered under the current situation: (name, spec version).
pub fn device_extensions() -> &'static [(&'static str, u32)] {
    const ALL: [(&str, u32); 2] = [("VK_KHR_external_memory", 1), (EXT_FD, 1)];
    if config::get().vulkan == VkSituation::NoExt {
        &ALL[..1]
    } else {
        &ALL
    }
}

/// The device's memory types, `(propertyFlags, heapIndex)`: VRAM only, VRAM through BAR1
/// (unless `GDRSIM_VULKAN=nohostvisible`), and cached system memory.
pub fn memory_types() -> &'static [(vk::MemoryPropertyFlags, u32)] {
    use vk::MemoryPropertyFlags as F;
    const VRAM: F = F::DEVICE_LOCAL;
    const BAR: F = F::from_raw(
        F::DEVICE_LOCAL.as_raw() | F::HOST_VISIBLE.as_raw() | F::HOST_COHERENT.as_raw(),
    );
    const SYSTEM: F =
        F::from_raw(F::HOST_VISIBLE.as_raw() | F::HOST_COHERENT.as_raw() | F::HOST_CACHED.as_raw());
    const ALL: [(F, u32); 3] = [(VRAM, 0), (BAR, 0), (SYSTEM, 1)];
    const NO_BAR: [(F, u32); 2] = [(VRAM, 0), (SYSTEM, 1)];
    if config::get().vulkan == VkSituation::NoHostVisible {
        &NO_BAR
    } else {
        &ALL
    }
}

/// The device's UUID: the emulated CUDA device's, unless `GDRSIM_VULKAN=otheruuid`.
pub fn device_uuid() -> [u8; 16] {
    if config::get().vulkan == VkSituation::OtherUuid {
        OTHER_UUID
    } else {
        crate::cuda::UUID
    }
}

/// Whether extension `name` is among `offered`.
fn offered(offered: &[(&str, u32)], name: *const c_char) -> bool {
    if name.is_null() {
        return false;
    }
    // SAFETY: a non-NULL extension name is NUL-terminated (the Vulkan contract).
    let name = unsafe { CStr::from_ptr(name) }.to_bytes();
    offered.iter().any(|(n, _)| n.as_bytes() == name)
}

/// The `count` strings at `names`, each checked with `ok`.
///
/// # Safety
///
/// `names` is NULL (then `count` must be 0) or points to `count` readable pointers.
unsafe fn all_names(
    names: *const *const c_char,
    count: u32,
    ok: impl Fn(*const c_char) -> bool,
) -> bool {
    if count == 0 {
        return true;
    }
    if names.is_null() {
        return false;
    }
    // SAFETY: `count` readable pointers (the contract).
    (0..count as usize).all(|i| ok(unsafe { names.add(i).read() }))
}

/// Whether one of the `count` strings at `names` passes `ok`.
///
/// # Safety
///
/// As [`all_names`].
unsafe fn any_name(
    names: *const *const c_char,
    count: u32,
    ok: impl Fn(*const c_char) -> bool,
) -> bool {
    // SAFETY: the contract, passed on.
    count != 0 && !unsafe { all_names(names, count, |n| !ok(n)) }
}

/// `vkCreateInstance`: any API version; no layers; the instance extensions above only.
pub(super) unsafe extern "system" fn create_instance(
    info: *const vk::InstanceCreateInfo,
    _alloc: *const vk::AllocationCallbacks,
    instance: *mut vk::Instance,
) -> vk::Result {
    call("vkCreateInstance", || {
        result((|| {
            if info.is_null() || instance.is_null() {
                return Err(vk::Result::ERROR_INITIALIZATION_FAILED);
            }
            // SAFETY: a non-NULL VkInstanceCreateInfo from the caller.
            let info = unsafe { &*info };
            if info.s_type != vk::StructureType::INSTANCE_CREATE_INFO {
                return Err(vk::Result::ERROR_INITIALIZATION_FAILED);
            }
            if config::get().vulkan == VkSituation::NoInstance {
                return Err(vk::Result::ERROR_INCOMPATIBLE_DRIVER);
            }
            if info.enabled_layer_count != 0 {
                return Err(vk::Result::ERROR_LAYER_NOT_PRESENT);
            }
            // SAFETY: the caller's extension name array of the count it gives.
            let exts = unsafe {
                all_names(
                    info.pp_enabled_extension_names,
                    info.enabled_extension_count,
                    |n| offered(&INSTANCE_EXTENSIONS, n),
                )
            };
            if !exts {
                return Err(vk::Result::ERROR_EXTENSION_NOT_PRESENT);
            }
            let h = STATE.lock().vk.create_instance(me());
            // SAFETY: non-NULL out-pointer from the caller.
            unsafe { instance.write(vk::Instance::from_raw(h as u64)) };
            Ok(vk::Result::SUCCESS)
        })())
    })
}

/// `vkEnumerateInstanceVersion`: 1.3.
pub(super) unsafe extern "system" fn enumerate_instance_version(version: *mut u32) -> vk::Result {
    call("vkEnumerateInstanceVersion", || {
        if version.is_null() {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        }
        // SAFETY: non-NULL out-pointer from the caller.
        unsafe { version.write(vk::API_VERSION_1_3) };
        vk::Result::SUCCESS
    })
}

/// `vkEnumerateInstanceExtensionProperties`.
pub(super) unsafe extern "system" fn enumerate_instance_extensions(
    layer: *const c_char,
    count: *mut u32,
    props: *mut vk::ExtensionProperties,
) -> vk::Result {
    call("vkEnumerateInstanceExtensionProperties", || {
        if !layer.is_null() {
            return vk::Result::ERROR_LAYER_NOT_PRESENT;
        }
        // SAFETY: the caller's count and array, as Vulkan's contract has them.
        unsafe {
            enumerate(count, props, INSTANCE_EXTENSIONS.len(), |i| {
                extension(INSTANCE_EXTENSIONS[i])
            })
        }
    })
}

/// `vkEnumerateInstanceLayerProperties`: none.
pub(super) unsafe extern "system" fn enumerate_instance_layers(
    count: *mut u32,
    props: *mut vk::LayerProperties,
) -> vk::Result {
    call("vkEnumerateInstanceLayerProperties", || {
        // SAFETY: the caller's count and array; nothing is written to the array.
        unsafe { enumerate(count, props, 0, |_| vk::LayerProperties::default()) }
    })
}

fn extension((name, version): (&str, u32)) -> vk::ExtensionProperties {
    vk::ExtensionProperties {
        extension_name: c_name(name),
        spec_version: version,
    }
}

/// Unmaps and lets go of memory objects that went with their device or instance; then, with
/// the lock released, takes the cost of freeing each, as `vkFreeMemory` would.
fn release_all(freed: Vec<super::objects::Memory>) {
    if freed.is_empty() {
        return;
    }
    let sizes: Vec<u64> = freed.iter().map(|m| m.size).collect();
    {
        let mut st = STATE.lock();
        for m in freed {
            super::memory::release(&mut st, m);
        }
        st.reclaim();
    }
    for size in sizes {
        super::memory::spend(size);
    }
}

/// `vkDestroyInstance`: also destroys the devices made from it that are still alive (a
/// valid-usage violation the stand-in cleans up after).
pub(super) unsafe extern "system" fn destroy_instance(
    instance: vk::Instance,
    _alloc: *const vk::AllocationCallbacks,
) {
    quietly("vkDestroyInstance", || {
        if instance == vk::Instance::null() {
            return;
        }
        let freed = STATE
            .lock()
            .vk
            .destroy_instance(instance.as_raw() as usize, me());
        release_all(freed);
    })
}

/// `vkEnumeratePhysicalDevices`: the one device, none under `GDRSIM_VULKAN=nodevice`.
pub(super) unsafe extern "system" fn enumerate_physical_devices(
    instance: vk::Instance,
    count: *mut u32,
    devices: *mut vk::PhysicalDevice,
) -> vk::Result {
    call("vkEnumeratePhysicalDevices", || {
        let st = STATE.lock();
        let Some(inst) = st.vk.instance(instance.as_raw() as usize, me()) else {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        };
        let n = usize::from(config::get().vulkan != VkSituation::NoDevice);
        let pd = vk::PhysicalDevice::from_raw(inst.physical as u64);
        // SAFETY: the caller's count and array, as Vulkan's contract has them.
        unsafe { enumerate(count, devices, n, |_| pd) }
    })
}

/// Whether `pd` is a live physical device of this process.
fn physical(pd: vk::PhysicalDevice) -> bool {
    STATE.lock().vk.physical(pd.as_raw() as usize, me())
}

/// Writes the device's `VkPhysicalDeviceProperties` at `p`: zero bytes first, so that what
/// no field names (padding included) reads the same from every call, then the fields.
///
/// # Safety
///
/// `p` is valid for writes of a `VkPhysicalDeviceProperties`.
unsafe fn write_properties(p: *mut vk::PhysicalDeviceProperties) {
    // SAFETY: writable (the contract), and all-zero bytes are a valid value of the structure
    // (integers, floats, arrays of them), so the reference made after it is to a valid value.
    let p = unsafe {
        p.write_bytes(0, 1);
        &mut *p
    };
    p.api_version = vk::API_VERSION_1_3 | 277;
    p.driver_version = DRIVER_VERSION;
    p.vendor_id = VENDOR_NVIDIA;
    p.device_id = DEVICE_ID;
    p.device_type = vk::PhysicalDeviceType::DISCRETE_GPU;
    p.device_name = c_name(DEVICE_NAME);
    p.pipeline_cache_uuid = PIPELINE_CACHE_UUID;
    p.limits.max_memory_allocation_count = u32::MAX;
    p.limits.min_memory_map_alignment = 64;
    p.limits.non_coherent_atom_size = 64;
}

/// `vkGetPhysicalDeviceProperties`.
pub(super) unsafe extern "system" fn properties(
    pd: vk::PhysicalDevice,
    props: *mut vk::PhysicalDeviceProperties,
) {
    quietly("vkGetPhysicalDeviceProperties", || {
        if props.is_null() || !physical(pd) {
            return;
        }
        // SAFETY: the caller's VkPhysicalDeviceProperties, writable.
        unsafe { write_properties(props) };
    })
}

/// `vkGetPhysicalDeviceProperties2`: the properties, and in the `pNext` chain a
/// `VkPhysicalDeviceIDProperties` (the UUIDs; no LUID); other structures are left alone.
pub(super) unsafe extern "system" fn properties2(
    pd: vk::PhysicalDevice,
    props: *mut vk::PhysicalDeviceProperties2,
) {
    quietly("vkGetPhysicalDeviceProperties2", || {
        if props.is_null() || !physical(pd) {
            return;
        }
        // SAFETY: the caller's VkPhysicalDeviceProperties2, whose `properties` member is
        // writable (its sType and pNext are only read).
        unsafe { write_properties(std::ptr::addr_of_mut!((*props).properties)) };
        // SAFETY: the caller's structure starts with sType and pNext, like every chained one.
        let mut next = unsafe { (*props.cast::<vk::BaseOutStructure>()).p_next };
        let mut hops = 0;
        while !next.is_null() && hops < 64 {
            hops += 1;
            // SAFETY: a chained structure of the caller; each starts with sType and pNext.
            let s = unsafe { &mut *next };
            if s.s_type == vk::StructureType::PHYSICAL_DEVICE_ID_PROPERTIES {
                let id = next.cast::<vk::PhysicalDeviceIDProperties>();
                // SAFETY: a VkPhysicalDeviceIDProperties (its sType says so) of the caller;
                // only its output fields are written.
                unsafe {
                    (*id).device_uuid = device_uuid();
                    (*id).driver_uuid = DRIVER_UUID;
                    (*id).device_luid = [0; 8];
                    (*id).device_node_mask = 0;
                    (*id).device_luid_valid = vk::FALSE;
                }
            }
            next = s.p_next;
        }
    })
}

/// The size of the system memory heap: the machine's memory.
fn system_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages.max(0) as u64).saturating_mul(size.max(0) as u64)
}

/// `vkGetPhysicalDeviceMemoryProperties`: heap 0 the VRAM (`GDRSIM_VRAM_SIZE`), heap 1 the
/// system memory; the types of [`memory_types`].
pub(super) unsafe extern "system" fn memory_properties(
    pd: vk::PhysicalDevice,
    props: *mut vk::PhysicalDeviceMemoryProperties,
) {
    quietly("vkGetPhysicalDeviceMemoryProperties", || {
        if props.is_null() || !physical(pd) {
            return;
        }
        let types = memory_types();
        let mut p = vk::PhysicalDeviceMemoryProperties {
            memory_type_count: types.len() as u32,
            memory_heap_count: 2,
            ..Default::default()
        };
        for (d, &(flags, heap)) in p.memory_types.iter_mut().zip(types) {
            *d = vk::MemoryType {
                property_flags: flags,
                heap_index: heap,
            };
        }
        p.memory_heaps[0] = vk::MemoryHeap {
            size: config::get().vram_size,
            flags: vk::MemoryHeapFlags::DEVICE_LOCAL,
        };
        p.memory_heaps[1] = vk::MemoryHeap {
            size: system_memory(),
            flags: vk::MemoryHeapFlags::empty(),
        };
        // SAFETY: the caller's VkPhysicalDeviceMemoryProperties, writable.
        unsafe { props.write(p) };
    })
}

/// `vkGetPhysicalDeviceQueueFamilyProperties`: one family for graphics, compute and transfer.
pub(super) unsafe extern "system" fn queue_families(
    pd: vk::PhysicalDevice,
    count: *mut u32,
    props: *mut vk::QueueFamilyProperties,
) {
    quietly("vkGetPhysicalDeviceQueueFamilyProperties", || {
        if !physical(pd) {
            return;
        }
        let family = vk::QueueFamilyProperties {
            queue_flags: vk::QueueFlags::GRAPHICS
                | vk::QueueFlags::COMPUTE
                | vk::QueueFlags::TRANSFER,
            queue_count: QUEUES,
            timestamp_valid_bits: 64,
            min_image_transfer_granularity: vk::Extent3D {
                width: 1,
                height: 1,
                depth: 1,
            },
        };
        // SAFETY: the caller's count and array, as Vulkan's contract has them. The command
        // has no result: a short array shows in the count alone.
        let _ = unsafe { enumerate(count, props, 1, |_| family) };
    })
}

/// `vkEnumerateDeviceExtensionProperties`: `VK_KHR_external_memory` and (unless
/// `GDRSIM_VULKAN=noext`) `VK_KHR_external_memory_fd`; no layers.
pub(super) unsafe extern "system" fn enumerate_device_extensions(
    pd: vk::PhysicalDevice,
    layer: *const c_char,
    count: *mut u32,
    props: *mut vk::ExtensionProperties,
) -> vk::Result {
    call("vkEnumerateDeviceExtensionProperties", || {
        if !physical(pd) {
            return vk::Result::ERROR_INITIALIZATION_FAILED;
        }
        if !layer.is_null() {
            return vk::Result::ERROR_LAYER_NOT_PRESENT;
        }
        let exts = device_extensions();
        // SAFETY: the caller's count and array, as Vulkan's contract has them.
        unsafe { enumerate(count, props, exts.len(), |i| extension(exts[i])) }
    })
}

/// `vkCreateDevice`: queue family 0 only (1 to 16 queues); enabled extensions must be among
/// those offered (else VK_ERROR_EXTENSION_NOT_PRESENT); device layers and features are ignored.
pub(super) unsafe extern "system" fn create_device(
    pd: vk::PhysicalDevice,
    info: *const vk::DeviceCreateInfo,
    _alloc: *const vk::AllocationCallbacks,
    device: *mut vk::Device,
) -> vk::Result {
    call("vkCreateDevice", || {
        result((|| {
            if info.is_null() || device.is_null() || !physical(pd) {
                return Err(vk::Result::ERROR_INITIALIZATION_FAILED);
            }
            // SAFETY: a non-NULL VkDeviceCreateInfo from the caller.
            let info = unsafe { &*info };
            if info.s_type != vk::StructureType::DEVICE_CREATE_INFO
                || info.queue_create_info_count == 0
                || info.p_queue_create_infos.is_null()
            {
                return Err(vk::Result::ERROR_INITIALIZATION_FAILED);
            }
            for i in 0..info.queue_create_info_count as usize {
                // SAFETY: the caller passes queueCreateInfoCount queue infos.
                let q = unsafe { &*info.p_queue_create_infos.add(i) };
                if q.s_type != vk::StructureType::DEVICE_QUEUE_CREATE_INFO
                    || q.queue_family_index != 0
                    || !(1..=QUEUES).contains(&q.queue_count)
                {
                    return Err(vk::Result::ERROR_INITIALIZATION_FAILED);
                }
            }
            let exts = device_extensions();
            // SAFETY: the caller's extension name array of the count it gives.
            let known = unsafe {
                all_names(
                    info.pp_enabled_extension_names,
                    info.enabled_extension_count,
                    |n| offered(exts, n),
                )
            };
            if !known {
                return Err(vk::Result::ERROR_EXTENSION_NOT_PRESENT);
            }
            // SAFETY: as above.
            let external_fd = unsafe {
                any_name(
                    info.pp_enabled_extension_names,
                    info.enabled_extension_count,
                    |n| offered(&[(EXT_FD, 1)], n),
                )
            };
            let h = STATE
                .lock()
                .vk
                .create_device(pd.as_raw() as usize, me(), external_fd);
            // SAFETY: non-NULL out-pointer from the caller.
            unsafe { device.write(vk::Device::from_raw(h as u64)) };
            Ok(vk::Result::SUCCESS)
        })())
    })
}

/// `vkDestroyDevice`: also frees the memory objects still allocated on it (unmapping them).
pub(super) unsafe extern "system" fn destroy_device(
    device: vk::Device,
    _alloc: *const vk::AllocationCallbacks,
) {
    quietly("vkDestroyDevice", || {
        if device == vk::Device::null() {
            return;
        }
        let freed = STATE
            .lock()
            .vk
            .destroy_device(device.as_raw() as usize, me());
        release_all(freed);
    })
}
