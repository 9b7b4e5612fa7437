//! Instances, the physical device and devices of the stand-in.

use super::{c_name, call, enumerate, me, quietly, result};
use crate::config::{self, VkSituation};
use crate::state::STATE;
use gdrapi_abi::vk::*;
use libc::{c_char, c_void};
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
pub fn memory_types() -> &'static [(u32, u32)] {
    const DL: u32 = MEMORY_PROPERTY_DEVICE_LOCAL;
    const HV: u32 = MEMORY_PROPERTY_HOST_VISIBLE | MEMORY_PROPERTY_HOST_COHERENT;
    const ALL: [(u32, u32); 3] = [(DL, 0), (DL | HV, 0), (HV | MEMORY_PROPERTY_HOST_CACHED, 1)];
    const NO_BAR: [(u32, u32); 2] = [(DL, 0), (HV | MEMORY_PROPERTY_HOST_CACHED, 1)];
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
pub(super) unsafe extern "C" fn create_instance(
    info: *const VkInstanceCreateInfo,
    _alloc: *const c_void,
    instance: *mut VkInstance,
) -> VkResult {
    call("vkCreateInstance", || {
        result((|| {
            if info.is_null() || instance.is_null() {
                return Err(VK_ERROR_INITIALIZATION_FAILED);
            }
            // SAFETY: a non-NULL VkInstanceCreateInfo from the caller.
            let info = unsafe { &*info };
            if info.sType != STYPE_INSTANCE_CREATE_INFO {
                return Err(VK_ERROR_INITIALIZATION_FAILED);
            }
            if config::get().vulkan == VkSituation::NoInstance {
                return Err(VK_ERROR_INCOMPATIBLE_DRIVER);
            }
            if info.enabledLayerCount != 0 {
                return Err(VK_ERROR_LAYER_NOT_PRESENT);
            }
            // SAFETY: the caller's extension name array of the count it gives.
            let exts = unsafe {
                all_names(
                    info.ppEnabledExtensionNames,
                    info.enabledExtensionCount,
                    |n| offered(&INSTANCE_EXTENSIONS, n),
                )
            };
            if !exts {
                return Err(VK_ERROR_EXTENSION_NOT_PRESENT);
            }
            let h = STATE.lock().vk.create_instance(me());
            // SAFETY: non-NULL out-pointer from the caller.
            unsafe { instance.write(h as VkInstance) };
            Ok(VK_SUCCESS)
        })())
    })
}

/// `vkEnumerateInstanceVersion`: 1.3.
pub(super) unsafe extern "C" fn enumerate_instance_version(version: *mut u32) -> VkResult {
    call("vkEnumerateInstanceVersion", || {
        if version.is_null() {
            return VK_ERROR_INITIALIZATION_FAILED;
        }
        // SAFETY: non-NULL out-pointer from the caller.
        unsafe { version.write(VK_API_VERSION_1_3) };
        VK_SUCCESS
    })
}

/// `vkEnumerateInstanceExtensionProperties`.
pub(super) unsafe extern "C" fn enumerate_instance_extensions(
    layer: *const c_char,
    count: *mut u32,
    props: *mut VkExtensionProperties,
) -> VkResult {
    call("vkEnumerateInstanceExtensionProperties", || {
        if !layer.is_null() {
            return VK_ERROR_LAYER_NOT_PRESENT;
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
pub(super) unsafe extern "C" fn enumerate_instance_layers(
    count: *mut u32,
    props: *mut VkLayerProperties,
) -> VkResult {
    call("vkEnumerateInstanceLayerProperties", || {
        // SAFETY: the caller's count and array; nothing is written to the array.
        unsafe {
            enumerate(count, props, 0, |_| VkLayerProperties {
                layerName: [0; 256],
                specVersion: 0,
                implementationVersion: 0,
                description: [0; 256],
            })
        }
    })
}

fn extension((name, version): (&str, u32)) -> VkExtensionProperties {
    VkExtensionProperties {
        extensionName: c_name(name),
        specVersion: version,
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
pub(super) unsafe extern "C" fn destroy_instance(instance: VkInstance, _alloc: *const c_void) {
    quietly("vkDestroyInstance", || {
        if instance.is_null() {
            return;
        }
        let freed = STATE.lock().vk.destroy_instance(instance as usize, me());
        release_all(freed);
    })
}

/// `vkEnumeratePhysicalDevices`: the one device, none under `GDRSIM_VULKAN=nodevice`.
pub(super) unsafe extern "C" fn enumerate_physical_devices(
    instance: VkInstance,
    count: *mut u32,
    devices: *mut VkPhysicalDevice,
) -> VkResult {
    call("vkEnumeratePhysicalDevices", || {
        let st = STATE.lock();
        let Some(inst) = st.vk.instance(instance as usize, me()) else {
            return VK_ERROR_INITIALIZATION_FAILED;
        };
        let n = usize::from(config::get().vulkan != VkSituation::NoDevice);
        let pd = inst.physical as VkPhysicalDevice;
        // SAFETY: the caller's count and array, as Vulkan's contract has them.
        unsafe { enumerate(count, devices, n, |_| pd) }
    })
}

/// Whether `pd` is a live physical device of this process.
fn physical(pd: VkPhysicalDevice) -> bool {
    STATE.lock().vk.physical(pd as usize, me())
}

/// The device's `VkPhysicalDeviceProperties`, in the specification's size.
fn properties_bytes() -> [u8; PHYSICAL_DEVICE_PROPERTIES_SIZE] {
    // SAFETY: all-zero bytes are a valid VkPhysicalDeviceProperties (integers and arrays).
    let mut p: VkPhysicalDeviceProperties = unsafe { std::mem::zeroed() };
    p.apiVersion = VK_API_VERSION_1_3 | 277;
    p.driverVersion = DRIVER_VERSION;
    p.vendorID = VENDOR_NVIDIA;
    p.deviceID = DEVICE_ID;
    p.deviceType = PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
    p.deviceName = c_name(DEVICE_NAME);
    p.pipelineCacheUUID = PIPELINE_CACHE_UUID;
    let mut b = [0u8; PHYSICAL_DEVICE_PROPERTIES_SIZE];
    // SAFETY: the declaration is at least PHYSICAL_DEVICE_PROPERTIES_SIZE bytes (abi's tests).
    let src = unsafe {
        std::slice::from_raw_parts(
            (&p as *const VkPhysicalDeviceProperties).cast::<u8>(),
            b.len(),
        )
    };
    b.copy_from_slice(src);
    let limit = |off: usize, v: &[u8]| PROPERTIES_LIMITS + off..PROPERTIES_LIMITS + off + v.len();
    let count = u32::MAX.to_ne_bytes();
    b[limit(LIMITS_MAX_MEMORY_ALLOCATION_COUNT, &count)].copy_from_slice(&count);
    let align = 64u64.to_ne_bytes();
    b[limit(LIMITS_MIN_MEMORY_MAP_ALIGNMENT, &align)].copy_from_slice(&align);
    b[limit(LIMITS_NON_COHERENT_ATOM_SIZE, &align)].copy_from_slice(&align);
    b
}

/// Writes the properties at `dst`.
///
/// # Safety
///
/// `dst` is writable for [`PHYSICAL_DEVICE_PROPERTIES_SIZE`] bytes.
unsafe fn write_properties(dst: *mut u8) {
    let b = properties_bytes();
    // SAFETY: the contract.
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), dst, b.len()) };
}

/// `vkGetPhysicalDeviceProperties`.
pub(super) unsafe extern "C" fn properties(
    pd: VkPhysicalDevice,
    props: *mut VkPhysicalDeviceProperties,
) {
    quietly("vkGetPhysicalDeviceProperties", || {
        if props.is_null() || !physical(pd) {
            return;
        }
        // SAFETY: a VkPhysicalDeviceProperties of the caller, the specification's size.
        unsafe { write_properties(props.cast()) };
    })
}

/// `vkGetPhysicalDeviceProperties2`: the properties, and in the `pNext` chain a
/// `VkPhysicalDeviceIDProperties` (the UUIDs; no LUID); other structures are left alone.
pub(super) unsafe extern "C" fn properties2(
    pd: VkPhysicalDevice,
    props: *mut VkPhysicalDeviceProperties2,
) {
    quietly("vkGetPhysicalDeviceProperties2", || {
        if props.is_null() || !physical(pd) {
            return;
        }
        let base = props.cast::<u8>();
        // SAFETY: the caller's VkPhysicalDeviceProperties2: its `properties` member lies at
        // the declared offset and has the specification's size.
        unsafe {
            write_properties(base.add(std::mem::offset_of!(
                VkPhysicalDeviceProperties2,
                properties
            )))
        };
        // SAFETY: the caller's structure starts with sType and pNext, like every chained one.
        let mut next = unsafe { (*props.cast::<VkBaseOutStructure>()).pNext };
        let mut hops = 0;
        while !next.is_null() && hops < 64 {
            hops += 1;
            // SAFETY: a chained structure of the caller; each starts with sType and pNext.
            let s = unsafe { &mut *next };
            if s.sType == STYPE_PHYSICAL_DEVICE_ID_PROPERTIES {
                let id = next.cast::<VkPhysicalDeviceIDProperties>();
                // SAFETY: a VkPhysicalDeviceIDProperties (its sType says so) of the caller;
                // only its output fields are written.
                unsafe {
                    (*id).deviceUUID = device_uuid();
                    (*id).driverUUID = DRIVER_UUID;
                    (*id).deviceLUID = [0; 8];
                    (*id).deviceNodeMask = 0;
                    (*id).deviceLUIDValid = 0;
                }
            }
            next = s.pNext;
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
pub(super) unsafe extern "C" fn memory_properties(
    pd: VkPhysicalDevice,
    props: *mut VkPhysicalDeviceMemoryProperties,
) {
    quietly("vkGetPhysicalDeviceMemoryProperties", || {
        if props.is_null() || !physical(pd) {
            return;
        }
        let types = memory_types();
        let mut p = VkPhysicalDeviceMemoryProperties {
            memoryTypeCount: types.len() as u32,
            memoryTypes: [VkMemoryType::default(); 32],
            memoryHeapCount: 2,
            memoryHeaps: [VkMemoryHeap::default(); 16],
        };
        for (d, &(flags, heap)) in p.memoryTypes.iter_mut().zip(types) {
            *d = VkMemoryType {
                propertyFlags: flags,
                heapIndex: heap,
            };
        }
        p.memoryHeaps[0] = VkMemoryHeap {
            size: config::get().vram_size,
            flags: MEMORY_HEAP_DEVICE_LOCAL,
        };
        p.memoryHeaps[1] = VkMemoryHeap {
            size: system_memory(),
            flags: 0,
        };
        // SAFETY: the caller's VkPhysicalDeviceMemoryProperties (the declaration has the
        // specification's layout, abi's tests).
        unsafe { props.write(p) };
    })
}

/// `vkGetPhysicalDeviceQueueFamilyProperties`: one family for graphics, compute and transfer.
pub(super) unsafe extern "C" fn queue_families(
    pd: VkPhysicalDevice,
    count: *mut u32,
    props: *mut VkQueueFamilyProperties,
) {
    quietly("vkGetPhysicalDeviceQueueFamilyProperties", || {
        if !physical(pd) {
            return;
        }
        let family = VkQueueFamilyProperties {
            queueFlags: QUEUE_GRAPHICS | QUEUE_COMPUTE | QUEUE_TRANSFER,
            queueCount: QUEUES,
            timestampValidBits: 64,
            minImageTransferGranularity: [1, 1, 1],
        };
        // SAFETY: the caller's count and array, as Vulkan's contract has them.
        unsafe { enumerate(count, props, 1, |_| family) };
    })
}

/// `vkEnumerateDeviceExtensionProperties`: `VK_KHR_external_memory` and (unless
/// `GDRSIM_VULKAN=noext`) `VK_KHR_external_memory_fd`; no layers.
pub(super) unsafe extern "C" fn enumerate_device_extensions(
    pd: VkPhysicalDevice,
    layer: *const c_char,
    count: *mut u32,
    props: *mut VkExtensionProperties,
) -> VkResult {
    call("vkEnumerateDeviceExtensionProperties", || {
        if !physical(pd) {
            return VK_ERROR_INITIALIZATION_FAILED;
        }
        if !layer.is_null() {
            return VK_ERROR_LAYER_NOT_PRESENT;
        }
        let exts = device_extensions();
        // SAFETY: the caller's count and array, as Vulkan's contract has them.
        unsafe { enumerate(count, props, exts.len(), |i| extension(exts[i])) }
    })
}

/// `vkCreateDevice`: queue family 0 only (1 to 16 queues); enabled extensions must be among
/// those offered (else VK_ERROR_EXTENSION_NOT_PRESENT); device layers and features are ignored.
pub(super) unsafe extern "C" fn create_device(
    pd: VkPhysicalDevice,
    info: *const VkDeviceCreateInfo,
    _alloc: *const c_void,
    device: *mut VkDevice,
) -> VkResult {
    call("vkCreateDevice", || {
        result((|| {
            if info.is_null() || device.is_null() || !physical(pd) {
                return Err(VK_ERROR_INITIALIZATION_FAILED);
            }
            // SAFETY: a non-NULL VkDeviceCreateInfo from the caller.
            let info = unsafe { &*info };
            if info.sType != STYPE_DEVICE_CREATE_INFO
                || info.queueCreateInfoCount == 0
                || info.pQueueCreateInfos.is_null()
            {
                return Err(VK_ERROR_INITIALIZATION_FAILED);
            }
            for i in 0..info.queueCreateInfoCount as usize {
                // SAFETY: the caller passes queueCreateInfoCount queue infos.
                let q = unsafe { &*info.pQueueCreateInfos.add(i) };
                if q.sType != STYPE_DEVICE_QUEUE_CREATE_INFO
                    || q.queueFamilyIndex != 0
                    || !(1..=QUEUES).contains(&q.queueCount)
                {
                    return Err(VK_ERROR_INITIALIZATION_FAILED);
                }
            }
            let exts = device_extensions();
            // SAFETY: the caller's extension name array of the count it gives.
            let known = unsafe {
                all_names(
                    info.ppEnabledExtensionNames,
                    info.enabledExtensionCount,
                    |n| offered(exts, n),
                )
            };
            if !known {
                return Err(VK_ERROR_EXTENSION_NOT_PRESENT);
            }
            // SAFETY: as above.
            let external_fd = unsafe {
                any_name(
                    info.ppEnabledExtensionNames,
                    info.enabledExtensionCount,
                    |n| offered(&[(EXT_FD, 1)], n),
                )
            };
            let h = STATE
                .lock()
                .vk
                .create_device(pd as usize, me(), external_fd);
            // SAFETY: non-NULL out-pointer from the caller.
            unsafe { device.write(h as VkDevice) };
            Ok(VK_SUCCESS)
        })())
    })
}

/// `vkDestroyDevice`: also frees the memory objects still allocated on it (unmapping them).
pub(super) unsafe extern "C" fn destroy_device(device: VkDevice, _alloc: *const c_void) {
    quietly("vkDestroyDevice", || {
        if device.is_null() {
            return;
        }
        let freed = STATE.lock().vk.destroy_device(device as usize, me());
        release_all(freed);
    })
}
