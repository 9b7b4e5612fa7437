//! The Vulkan declarations the workspace uses, written from the Vulkan 1.1 specification
//! (`vulkan_core.h` layouts and values for 64-bit Linux). Only plain data and function
//! pointer types: the entry points are resolved at run time through `vkGetInstanceProcAddr`.
//!
//! Hand-written rather than `ash`, because the library itself uses them and its only run-time
//! dependency is libc: about 20 entry points and 15 structures. The tests below compare every
//! structure's size and field offsets, and every constant, with ash's generated bindings.

#![allow(non_camel_case_types, non_snake_case)]

use core::ffi::{c_char, c_int, c_void};

/// `VkResult`: 0 is success, negative values are errors.
pub type VkResult = i32;
/// `VkInstance` (dispatchable handle).
pub type VkInstance = *mut c_void;
/// `VkPhysicalDevice` (dispatchable handle).
pub type VkPhysicalDevice = *mut c_void;
/// `VkDevice` (dispatchable handle).
pub type VkDevice = *mut c_void;
/// `VkDeviceMemory` (non-dispatchable handle).
pub type VkDeviceMemory = u64;

/// `VK_SUCCESS`.
pub const VK_SUCCESS: VkResult = 0;
/// `VK_INCOMPLETE`: an enumeration had more entries than room.
pub const VK_INCOMPLETE: VkResult = 5;
/// `VK_ERROR_OUT_OF_HOST_MEMORY`.
pub const VK_ERROR_OUT_OF_HOST_MEMORY: VkResult = -1;
/// `VK_ERROR_OUT_OF_DEVICE_MEMORY`.
pub const VK_ERROR_OUT_OF_DEVICE_MEMORY: VkResult = -2;
/// `VK_ERROR_INITIALIZATION_FAILED`.
pub const VK_ERROR_INITIALIZATION_FAILED: VkResult = -3;
/// `VK_ERROR_DEVICE_LOST`.
pub const VK_ERROR_DEVICE_LOST: VkResult = -4;
/// `VK_ERROR_MEMORY_MAP_FAILED`.
pub const VK_ERROR_MEMORY_MAP_FAILED: VkResult = -5;
/// `VK_ERROR_LAYER_NOT_PRESENT`.
pub const VK_ERROR_LAYER_NOT_PRESENT: VkResult = -6;
/// `VK_ERROR_EXTENSION_NOT_PRESENT`.
pub const VK_ERROR_EXTENSION_NOT_PRESENT: VkResult = -7;
/// `VK_ERROR_FEATURE_NOT_PRESENT`.
pub const VK_ERROR_FEATURE_NOT_PRESENT: VkResult = -8;
/// `VK_ERROR_INCOMPATIBLE_DRIVER`: no installable client driver (ICD) answered.
pub const VK_ERROR_INCOMPATIBLE_DRIVER: VkResult = -9;
/// `VK_ERROR_TOO_MANY_OBJECTS`.
pub const VK_ERROR_TOO_MANY_OBJECTS: VkResult = -10;
/// `VK_ERROR_UNKNOWN`.
pub const VK_ERROR_UNKNOWN: VkResult = -13;
/// `VK_ERROR_INVALID_EXTERNAL_HANDLE`: an imported handle is not one the driver can use.
pub const VK_ERROR_INVALID_EXTERNAL_HANDLE: VkResult = -1000072003;
/// `VK_API_VERSION_1_1`.
pub const VK_API_VERSION_1_1: u32 = (1 << 22) | (1 << 12);
/// `VK_WHOLE_SIZE`.
pub const VK_WHOLE_SIZE: u64 = !0;
/// `VK_API_VERSION_1_3`.
pub const VK_API_VERSION_1_3: u32 = (1 << 22) | (3 << 12);
/// `VK_QUEUE_GRAPHICS_BIT`.
pub const QUEUE_GRAPHICS: u32 = 0x1;
/// `VK_QUEUE_COMPUTE_BIT`.
pub const QUEUE_COMPUTE: u32 = 0x2;
/// `VK_QUEUE_TRANSFER_BIT`.
pub const QUEUE_TRANSFER: u32 = 0x4;

/// Size of `VkPhysicalDeviceProperties` in the specification's layout: what a driver writes
/// (the declaration below is larger, with room to spare).
pub const PHYSICAL_DEVICE_PROPERTIES_SIZE: usize = 824;
/// Offset of `limits` (a `VkPhysicalDeviceLimits`) in `VkPhysicalDeviceProperties`.
pub const PROPERTIES_LIMITS: usize = 296;
/// Offset of `maxMemoryAllocationCount` (`u32`) in `VkPhysicalDeviceLimits`.
pub const LIMITS_MAX_MEMORY_ALLOCATION_COUNT: usize = 36;
/// Offset of `minMemoryMapAlignment` (`size_t`) in `VkPhysicalDeviceLimits`.
pub const LIMITS_MIN_MEMORY_MAP_ALIGNMENT: usize = 304;
/// Offset of `nonCoherentAtomSize` (`VkDeviceSize`) in `VkPhysicalDeviceLimits`.
pub const LIMITS_NON_COHERENT_ATOM_SIZE: usize = 496;

/// `VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT`.
pub const MEMORY_PROPERTY_DEVICE_LOCAL: u32 = 0x1;
/// `VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT`.
pub const MEMORY_PROPERTY_HOST_VISIBLE: u32 = 0x2;
/// `VK_MEMORY_PROPERTY_HOST_COHERENT_BIT`.
pub const MEMORY_PROPERTY_HOST_COHERENT: u32 = 0x4;
/// `VK_MEMORY_PROPERTY_HOST_CACHED_BIT`.
pub const MEMORY_PROPERTY_HOST_CACHED: u32 = 0x8;
/// `VK_MEMORY_HEAP_DEVICE_LOCAL_BIT`.
pub const MEMORY_HEAP_DEVICE_LOCAL: u32 = 0x1;
/// `VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT`.
pub const EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD: u32 = 0x1;

/// `VK_PHYSICAL_DEVICE_TYPE_*` values.
pub const PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: u32 = 1;
/// `VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU`.
pub const PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: u32 = 2;
/// `VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU`.
pub const PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: u32 = 3;
/// `VK_PHYSICAL_DEVICE_TYPE_CPU`.
pub const PHYSICAL_DEVICE_TYPE_CPU: u32 = 4;

/// `VkStructureType` values used here.
pub const STYPE_APPLICATION_INFO: u32 = 0;
/// `VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO`.
pub const STYPE_INSTANCE_CREATE_INFO: u32 = 1;
/// `VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO`.
pub const STYPE_DEVICE_QUEUE_CREATE_INFO: u32 = 2;
/// `VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO`.
pub const STYPE_DEVICE_CREATE_INFO: u32 = 3;
/// `VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO`.
pub const STYPE_MEMORY_ALLOCATE_INFO: u32 = 5;
/// `VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2`.
pub const STYPE_PHYSICAL_DEVICE_PROPERTIES_2: u32 = 1000059001;
/// `VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES`.
pub const STYPE_PHYSICAL_DEVICE_ID_PROPERTIES: u32 = 1000071004;
/// `VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO`.
pub const STYPE_EXPORT_MEMORY_ALLOCATE_INFO: u32 = 1000072002;
/// `VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR`.
pub const STYPE_IMPORT_MEMORY_FD_INFO_KHR: u32 = 1000074000;
/// `VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR`.
pub const STYPE_MEMORY_GET_FD_INFO_KHR: u32 = 1000074002;

/// Device extension for exporting and importing memory as POSIX file descriptors.
pub const EXT_EXTERNAL_MEMORY_FD: &core::ffi::CStr = c"VK_KHR_external_memory_fd";
/// Device extension for external memory in general (core since 1.1, enabled when listed).
pub const EXT_EXTERNAL_MEMORY: &core::ffi::CStr = c"VK_KHR_external_memory";

/// `VkApplicationInfo`.
#[repr(C)]
pub struct VkApplicationInfo {
    pub sType: u32,
    pub pNext: *const c_void,
    pub pApplicationName: *const c_char,
    pub applicationVersion: u32,
    pub pEngineName: *const c_char,
    pub engineVersion: u32,
    pub apiVersion: u32,
}

impl VkApplicationInfo {
    /// An application and engine both named `name` (null: unnamed), version 1, asking for
    /// API version 1.1.
    pub const fn named(name: Option<&'static core::ffi::CStr>) -> Self {
        let name = match name {
            Some(n) => n.as_ptr(),
            None => core::ptr::null(),
        };
        VkApplicationInfo {
            sType: STYPE_APPLICATION_INFO,
            pNext: core::ptr::null(),
            pApplicationName: name,
            applicationVersion: 1,
            pEngineName: name,
            engineVersion: 1,
            apiVersion: VK_API_VERSION_1_1,
        }
    }
}

/// `VkInstanceCreateInfo`.
#[repr(C)]
pub struct VkInstanceCreateInfo {
    pub sType: u32,
    pub pNext: *const c_void,
    pub flags: u32,
    pub pApplicationInfo: *const VkApplicationInfo,
    pub enabledLayerCount: u32,
    pub ppEnabledLayerNames: *const *const c_char,
    pub enabledExtensionCount: u32,
    pub ppEnabledExtensionNames: *const *const c_char,
}

impl VkInstanceCreateInfo {
    /// An instance for `app` with no layers and no instance extensions, which is what the
    /// workspace creates; `app` must outlive the `vkCreateInstance` call.
    pub const fn plain(app: &VkApplicationInfo) -> Self {
        VkInstanceCreateInfo {
            sType: STYPE_INSTANCE_CREATE_INFO,
            pNext: core::ptr::null(),
            flags: 0,
            pApplicationInfo: app,
            enabledLayerCount: 0,
            ppEnabledLayerNames: core::ptr::null(),
            enabledExtensionCount: 0,
            ppEnabledExtensionNames: core::ptr::null(),
        }
    }
}

/// The leading fields of `VkPhysicalDeviceProperties`, followed by room for the rest
/// (`limits` and `sparseProperties`, 552 bytes in the specification's layout, rounded up).
#[repr(C)]
pub struct VkPhysicalDeviceProperties {
    pub apiVersion: u32,
    pub driverVersion: u32,
    pub vendorID: u32,
    pub deviceID: u32,
    pub deviceType: u32,
    pub deviceName: [c_char; 256],
    pub pipelineCacheUUID: [u8; 16],
    pub rest: [u64; 96],
}

/// `VkPhysicalDeviceProperties2`.
#[repr(C)]
pub struct VkPhysicalDeviceProperties2 {
    pub sType: u32,
    pub pNext: *mut c_void,
    pub properties: VkPhysicalDeviceProperties,
}

/// `VkPhysicalDeviceIDProperties`: the UUID that CUDA's `cuDeviceGetUuid` also reports.
#[repr(C)]
pub struct VkPhysicalDeviceIDProperties {
    pub sType: u32,
    pub pNext: *mut c_void,
    pub deviceUUID: [u8; 16],
    pub driverUUID: [u8; 16],
    pub deviceLUID: [u8; 8],
    pub deviceNodeMask: u32,
    pub deviceLUIDValid: u32,
}

/// `VkMemoryType`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct VkMemoryType {
    pub propertyFlags: u32,
    pub heapIndex: u32,
}

/// `VkMemoryHeap`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct VkMemoryHeap {
    pub size: u64,
    pub flags: u32,
}

/// `VkPhysicalDeviceMemoryProperties`.
#[repr(C)]
pub struct VkPhysicalDeviceMemoryProperties {
    pub memoryTypeCount: u32,
    pub memoryTypes: [VkMemoryType; 32],
    pub memoryHeapCount: u32,
    pub memoryHeaps: [VkMemoryHeap; 16],
}

/// `VkExtensionProperties`.
#[repr(C)]
pub struct VkExtensionProperties {
    pub extensionName: [c_char; 256],
    pub specVersion: u32,
}

/// `VkDeviceQueueCreateInfo`.
#[repr(C)]
pub struct VkDeviceQueueCreateInfo {
    pub sType: u32,
    pub pNext: *const c_void,
    pub flags: u32,
    pub queueFamilyIndex: u32,
    pub queueCount: u32,
    pub pQueuePriorities: *const f32,
}

impl VkDeviceQueueCreateInfo {
    /// One queue of family 0, which every device has, at `priority`; `priority` must outlive
    /// the `vkCreateDevice` call.
    pub const fn one_of_family_0(priority: &f32) -> Self {
        VkDeviceQueueCreateInfo {
            sType: STYPE_DEVICE_QUEUE_CREATE_INFO,
            pNext: core::ptr::null(),
            flags: 0,
            queueFamilyIndex: 0,
            queueCount: 1,
            pQueuePriorities: priority,
        }
    }
}

/// `VkDeviceCreateInfo`.
#[repr(C)]
pub struct VkDeviceCreateInfo {
    pub sType: u32,
    pub pNext: *const c_void,
    pub flags: u32,
    pub queueCreateInfoCount: u32,
    pub pQueueCreateInfos: *const VkDeviceQueueCreateInfo,
    pub enabledLayerCount: u32,
    pub ppEnabledLayerNames: *const *const c_char,
    pub enabledExtensionCount: u32,
    pub ppEnabledExtensionNames: *const *const c_char,
    pub pEnabledFeatures: *const c_void,
}

impl VkDeviceCreateInfo {
    /// A device with the one queue `queue` and the device extensions `extensions`, no layers
    /// and no features, which is what the workspace creates; both must outlive the
    /// `vkCreateDevice` call.
    pub const fn with_extensions(
        queue: &VkDeviceQueueCreateInfo,
        extensions: &[*const c_char],
    ) -> Self {
        VkDeviceCreateInfo {
            sType: STYPE_DEVICE_CREATE_INFO,
            pNext: core::ptr::null(),
            flags: 0,
            queueCreateInfoCount: 1,
            pQueueCreateInfos: queue,
            enabledLayerCount: 0,
            ppEnabledLayerNames: core::ptr::null(),
            enabledExtensionCount: extensions.len() as u32,
            ppEnabledExtensionNames: extensions.as_ptr(),
            pEnabledFeatures: core::ptr::null(),
        }
    }
}

/// `VkMemoryAllocateInfo`.
#[repr(C)]
pub struct VkMemoryAllocateInfo {
    pub sType: u32,
    pub pNext: *const c_void,
    pub allocationSize: u64,
    pub memoryTypeIndex: u32,
}

/// `VkExportMemoryAllocateInfo`.
#[repr(C)]
pub struct VkExportMemoryAllocateInfo {
    pub sType: u32,
    pub pNext: *const c_void,
    pub handleTypes: u32,
}

/// `VkImportMemoryFdInfoKHR`.
#[repr(C)]
pub struct VkImportMemoryFdInfoKHR {
    pub sType: u32,
    pub pNext: *const c_void,
    pub handleType: u32,
    pub fd: c_int,
}

/// `VkMemoryGetFdInfoKHR`.
#[repr(C)]
pub struct VkMemoryGetFdInfoKHR {
    pub sType: u32,
    pub pNext: *const c_void,
    pub memory: VkDeviceMemory,
    pub handleType: u32,
}

/// `VkQueueFamilyProperties`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct VkQueueFamilyProperties {
    pub queueFlags: u32,
    pub queueCount: u32,
    pub timestampValidBits: u32,
    pub minImageTransferGranularity: [u32; 3],
}

/// `VkLayerProperties`.
#[repr(C)]
pub struct VkLayerProperties {
    pub layerName: [c_char; 256],
    pub specVersion: u32,
    pub implementationVersion: u32,
    pub description: [c_char; 256],
}

/// `VkBaseOutStructure`: the head of every structure in a `pNext` chain.
#[repr(C)]
pub struct VkBaseOutStructure {
    pub sType: u32,
    pub pNext: *mut VkBaseOutStructure,
}

/// `vkEnumerateInstanceVersion` (Vulkan 1.1).
pub type PFN_vkEnumerateInstanceVersion = unsafe extern "C" fn(*mut u32) -> VkResult;
/// `vkEnumerateInstanceExtensionProperties`.
pub type PFN_vkEnumerateInstanceExtensionProperties =
    unsafe extern "C" fn(*const c_char, *mut u32, *mut VkExtensionProperties) -> VkResult;
/// `vkEnumerateInstanceLayerProperties`.
pub type PFN_vkEnumerateInstanceLayerProperties =
    unsafe extern "C" fn(*mut u32, *mut VkLayerProperties) -> VkResult;
/// `vkGetPhysicalDeviceQueueFamilyProperties`.
pub type PFN_vkGetPhysicalDeviceQueueFamilyProperties =
    unsafe extern "C" fn(VkPhysicalDevice, *mut u32, *mut VkQueueFamilyProperties);

/// `PFN_vkVoidFunction` as returned by the `Get*ProcAddr` functions.
pub type PFN_vkVoidFunction = Option<unsafe extern "C" fn()>;
/// `vkGetInstanceProcAddr`.
pub type PFN_vkGetInstanceProcAddr =
    unsafe extern "C" fn(VkInstance, *const c_char) -> PFN_vkVoidFunction;
/// `vkGetDeviceProcAddr`.
pub type PFN_vkGetDeviceProcAddr =
    unsafe extern "C" fn(VkDevice, *const c_char) -> PFN_vkVoidFunction;
/// `vkCreateInstance`.
pub type PFN_vkCreateInstance =
    unsafe extern "C" fn(*const VkInstanceCreateInfo, *const c_void, *mut VkInstance) -> VkResult;
/// `vkDestroyInstance`.
pub type PFN_vkDestroyInstance = unsafe extern "C" fn(VkInstance, *const c_void);
/// `vkEnumeratePhysicalDevices`.
pub type PFN_vkEnumeratePhysicalDevices =
    unsafe extern "C" fn(VkInstance, *mut u32, *mut VkPhysicalDevice) -> VkResult;
/// `vkGetPhysicalDeviceProperties`.
pub type PFN_vkGetPhysicalDeviceProperties =
    unsafe extern "C" fn(VkPhysicalDevice, *mut VkPhysicalDeviceProperties);
/// `vkGetPhysicalDeviceProperties2`.
pub type PFN_vkGetPhysicalDeviceProperties2 =
    unsafe extern "C" fn(VkPhysicalDevice, *mut VkPhysicalDeviceProperties2);
/// `vkGetPhysicalDeviceMemoryProperties`.
pub type PFN_vkGetPhysicalDeviceMemoryProperties =
    unsafe extern "C" fn(VkPhysicalDevice, *mut VkPhysicalDeviceMemoryProperties);
/// `vkEnumerateDeviceExtensionProperties`.
pub type PFN_vkEnumerateDeviceExtensionProperties = unsafe extern "C" fn(
    VkPhysicalDevice,
    *const c_char,
    *mut u32,
    *mut VkExtensionProperties,
) -> VkResult;
/// `vkCreateDevice`.
pub type PFN_vkCreateDevice = unsafe extern "C" fn(
    VkPhysicalDevice,
    *const VkDeviceCreateInfo,
    *const c_void,
    *mut VkDevice,
) -> VkResult;
/// `vkDestroyDevice`.
pub type PFN_vkDestroyDevice = unsafe extern "C" fn(VkDevice, *const c_void);
/// `vkAllocateMemory`.
pub type PFN_vkAllocateMemory = unsafe extern "C" fn(
    VkDevice,
    *const VkMemoryAllocateInfo,
    *const c_void,
    *mut VkDeviceMemory,
) -> VkResult;
/// `vkFreeMemory`.
pub type PFN_vkFreeMemory = unsafe extern "C" fn(VkDevice, VkDeviceMemory, *const c_void);
/// `vkMapMemory`.
pub type PFN_vkMapMemory =
    unsafe extern "C" fn(VkDevice, VkDeviceMemory, u64, u64, u32, *mut *mut c_void) -> VkResult;
/// `vkUnmapMemory`.
pub type PFN_vkUnmapMemory = unsafe extern "C" fn(VkDevice, VkDeviceMemory);
/// `vkGetMemoryFdKHR`.
pub type PFN_vkGetMemoryFdKHR =
    unsafe extern "C" fn(VkDevice, *const VkMemoryGetFdInfoKHR, *mut c_int) -> VkResult;

/// One memory type of the device, with its heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryType {
    /// Index in the device's memory type list.
    pub index: u32,
    /// `VkMemoryPropertyFlags`.
    pub flags: u32,
    /// Index of its heap.
    pub heap_index: u32,
    /// Size of its heap in bytes.
    pub heap_size: u64,
}

/// Picks the memory type that maps VRAM through the BAR: DEVICE_LOCAL and HOST_VISIBLE are
/// required; HOST_COHERENT is preferred, HOST_CACHED avoided, then the largest heap wins and
/// then the lowest index. `None` when no type qualifies.
pub fn choose_memory_type(types: &[MemoryType]) -> Option<MemoryType> {
    let need = MEMORY_PROPERTY_DEVICE_LOCAL | MEMORY_PROPERTY_HOST_VISIBLE;
    types
        .iter()
        .filter(|t| t.flags & need == need)
        .max_by_key(|t| {
            let coherent = t.flags & MEMORY_PROPERTY_HOST_COHERENT != 0;
            let uncached = t.flags & MEMORY_PROPERTY_HOST_CACHED == 0;
            (coherent, uncached, t.heap_size, core::cmp::Reverse(t.index))
        })
        .copied()
}

#[cfg(test)]
// DeviceCreateInfo's layer fields are deprecated in ash, yet still part of the layout.
#[allow(deprecated)]
mod tests {
    use super::*;
    use ash::vk as ash;
    use core::mem::{offset_of, size_of};

    /// Asserts that `$ours` has `$theirs`'s size and, field by field, its offsets.
    macro_rules! same_layout {
        ($ours:ty, $theirs:ty, [$($a:ident = $b:ident),* $(,)?]) => {{
            assert_eq!(size_of::<$ours>(), size_of::<$theirs>(), stringify!($ours));
            $(assert_eq!(
                offset_of!($ours, $a),
                offset_of!($theirs, $b),
                concat!(stringify!($ours), ".", stringify!($a))
            );)*
        }};
    }

    #[test]
    fn structures_match_ashs() {
        same_layout!(
            VkApplicationInfo,
            ash::ApplicationInfo<'static>,
            [
                sType = s_type,
                pNext = p_next,
                pApplicationName = p_application_name,
                applicationVersion = application_version,
                pEngineName = p_engine_name,
                engineVersion = engine_version,
                apiVersion = api_version,
            ]
        );
        same_layout!(
            VkInstanceCreateInfo,
            ash::InstanceCreateInfo<'static>,
            [
                sType = s_type,
                pNext = p_next,
                flags = flags,
                pApplicationInfo = p_application_info,
                enabledLayerCount = enabled_layer_count,
                ppEnabledLayerNames = pp_enabled_layer_names,
                enabledExtensionCount = enabled_extension_count,
                ppEnabledExtensionNames = pp_enabled_extension_names,
            ]
        );
        same_layout!(
            VkPhysicalDeviceIDProperties,
            ash::PhysicalDeviceIDProperties<'static>,
            [
                sType = s_type,
                pNext = p_next,
                deviceUUID = device_uuid,
                driverUUID = driver_uuid,
                deviceLUID = device_luid,
                deviceNodeMask = device_node_mask,
                deviceLUIDValid = device_luid_valid,
            ]
        );
        same_layout!(
            VkMemoryType,
            ash::MemoryType,
            [propertyFlags = property_flags, heapIndex = heap_index]
        );
        same_layout!(VkMemoryHeap, ash::MemoryHeap, [size = size, flags = flags]);
        same_layout!(
            VkPhysicalDeviceMemoryProperties,
            ash::PhysicalDeviceMemoryProperties,
            [
                memoryTypeCount = memory_type_count,
                memoryTypes = memory_types,
                memoryHeapCount = memory_heap_count,
                memoryHeaps = memory_heaps,
            ]
        );
        same_layout!(
            VkExtensionProperties,
            ash::ExtensionProperties,
            [extensionName = extension_name, specVersion = spec_version,]
        );
        same_layout!(
            VkDeviceQueueCreateInfo,
            ash::DeviceQueueCreateInfo<'static>,
            [
                sType = s_type,
                pNext = p_next,
                flags = flags,
                queueFamilyIndex = queue_family_index,
                queueCount = queue_count,
                pQueuePriorities = p_queue_priorities,
            ]
        );
        same_layout!(
            VkDeviceCreateInfo,
            ash::DeviceCreateInfo<'static>,
            [
                sType = s_type,
                pNext = p_next,
                flags = flags,
                queueCreateInfoCount = queue_create_info_count,
                pQueueCreateInfos = p_queue_create_infos,
                enabledLayerCount = enabled_layer_count,
                ppEnabledLayerNames = pp_enabled_layer_names,
                enabledExtensionCount = enabled_extension_count,
                ppEnabledExtensionNames = pp_enabled_extension_names,
                pEnabledFeatures = p_enabled_features,
            ]
        );
        same_layout!(
            VkMemoryAllocateInfo,
            ash::MemoryAllocateInfo<'static>,
            [
                sType = s_type,
                pNext = p_next,
                allocationSize = allocation_size,
                memoryTypeIndex = memory_type_index,
            ]
        );
        same_layout!(
            VkExportMemoryAllocateInfo,
            ash::ExportMemoryAllocateInfo<'static>,
            [sType = s_type, pNext = p_next, handleTypes = handle_types,]
        );
        same_layout!(
            VkImportMemoryFdInfoKHR,
            ash::ImportMemoryFdInfoKHR<'static>,
            [
                sType = s_type,
                pNext = p_next,
                handleType = handle_type,
                fd = fd,
            ]
        );
        same_layout!(
            VkMemoryGetFdInfoKHR,
            ash::MemoryGetFdInfoKHR<'static>,
            [
                sType = s_type,
                pNext = p_next,
                memory = memory,
                handleType = handle_type,
            ]
        );
        same_layout!(
            VkQueueFamilyProperties,
            ash::QueueFamilyProperties,
            [
                queueFlags = queue_flags,
                queueCount = queue_count,
                timestampValidBits = timestamp_valid_bits,
                minImageTransferGranularity = min_image_transfer_granularity,
            ]
        );
        same_layout!(
            VkLayerProperties,
            ash::LayerProperties,
            [
                layerName = layer_name,
                specVersion = spec_version,
                implementationVersion = implementation_version,
                description = description,
            ]
        );
        same_layout!(
            VkBaseOutStructure,
            ash::BaseOutStructure<'static>,
            [sType = s_type, pNext = p_next]
        );
    }

    #[test]
    fn property_offsets_match_ashs() {
        type P = ash::PhysicalDeviceProperties;
        type L = ash::PhysicalDeviceLimits;
        assert_eq!(PHYSICAL_DEVICE_PROPERTIES_SIZE, size_of::<P>());
        assert_eq!(PROPERTIES_LIMITS, offset_of!(P, limits));
        assert_eq!(
            LIMITS_MAX_MEMORY_ALLOCATION_COUNT,
            offset_of!(L, max_memory_allocation_count)
        );
        assert_eq!(
            LIMITS_MIN_MEMORY_MAP_ALIGNMENT,
            offset_of!(L, min_memory_map_alignment)
        );
        assert_eq!(
            LIMITS_NON_COHERENT_ATOM_SIZE,
            offset_of!(L, non_coherent_atom_size)
        );
        assert_eq!(
            size_of::<usize>(),
            8,
            "minMemoryMapAlignment is a 64-bit size_t"
        );
    }

    #[test]
    fn device_properties_hold_ashs_leading_fields_and_room_for_the_rest() {
        // Only the leading fields are declared; the rest is room the driver writes into.
        same_prefix();
        fn same_prefix() {
            type T = ash::PhysicalDeviceProperties;
            assert_eq!(
                offset_of!(VkPhysicalDeviceProperties, apiVersion),
                offset_of!(T, api_version)
            );
            assert_eq!(
                offset_of!(VkPhysicalDeviceProperties, driverVersion),
                offset_of!(T, driver_version)
            );
            assert_eq!(
                offset_of!(VkPhysicalDeviceProperties, vendorID),
                offset_of!(T, vendor_id)
            );
            assert_eq!(
                offset_of!(VkPhysicalDeviceProperties, deviceID),
                offset_of!(T, device_id)
            );
            assert_eq!(
                offset_of!(VkPhysicalDeviceProperties, deviceType),
                offset_of!(T, device_type)
            );
            assert_eq!(
                offset_of!(VkPhysicalDeviceProperties, deviceName),
                offset_of!(T, device_name)
            );
            assert_eq!(
                offset_of!(VkPhysicalDeviceProperties, pipelineCacheUUID),
                offset_of!(T, pipeline_cache_uuid)
            );
            assert!(size_of::<VkPhysicalDeviceProperties>() >= size_of::<T>());
            assert_eq!(
                offset_of!(VkPhysicalDeviceProperties2, properties),
                offset_of!(ash::PhysicalDeviceProperties2<'static>, properties)
            );
        }
    }

    #[test]
    fn constants_match_ashs() {
        assert_eq!(VK_SUCCESS, ash::Result::SUCCESS.as_raw());
        assert_eq!(VK_INCOMPLETE, ash::Result::INCOMPLETE.as_raw());
        for (ours, theirs) in [
            (
                VK_ERROR_OUT_OF_HOST_MEMORY,
                ash::Result::ERROR_OUT_OF_HOST_MEMORY,
            ),
            (
                VK_ERROR_OUT_OF_DEVICE_MEMORY,
                ash::Result::ERROR_OUT_OF_DEVICE_MEMORY,
            ),
            (
                VK_ERROR_INITIALIZATION_FAILED,
                ash::Result::ERROR_INITIALIZATION_FAILED,
            ),
            (VK_ERROR_DEVICE_LOST, ash::Result::ERROR_DEVICE_LOST),
            (
                VK_ERROR_MEMORY_MAP_FAILED,
                ash::Result::ERROR_MEMORY_MAP_FAILED,
            ),
            (
                VK_ERROR_LAYER_NOT_PRESENT,
                ash::Result::ERROR_LAYER_NOT_PRESENT,
            ),
            (
                VK_ERROR_EXTENSION_NOT_PRESENT,
                ash::Result::ERROR_EXTENSION_NOT_PRESENT,
            ),
            (
                VK_ERROR_FEATURE_NOT_PRESENT,
                ash::Result::ERROR_FEATURE_NOT_PRESENT,
            ),
            (
                VK_ERROR_INCOMPATIBLE_DRIVER,
                ash::Result::ERROR_INCOMPATIBLE_DRIVER,
            ),
            (
                VK_ERROR_TOO_MANY_OBJECTS,
                ash::Result::ERROR_TOO_MANY_OBJECTS,
            ),
            (VK_ERROR_UNKNOWN, ash::Result::ERROR_UNKNOWN),
            (
                VK_ERROR_INVALID_EXTERNAL_HANDLE,
                ash::Result::ERROR_INVALID_EXTERNAL_HANDLE,
            ),
        ] {
            assert_eq!(ours, theirs.as_raw());
        }
        assert_eq!(VK_API_VERSION_1_1, ash::API_VERSION_1_1);
        assert_eq!(VK_API_VERSION_1_3, ash::API_VERSION_1_3);
        use ash::QueueFlags as Q;
        assert_eq!(QUEUE_GRAPHICS, Q::GRAPHICS.as_raw());
        assert_eq!(QUEUE_COMPUTE, Q::COMPUTE.as_raw());
        assert_eq!(QUEUE_TRANSFER, Q::TRANSFER.as_raw());
        assert_eq!(VK_WHOLE_SIZE, ash::WHOLE_SIZE);
        use ash::MemoryPropertyFlags as M;
        assert_eq!(MEMORY_PROPERTY_DEVICE_LOCAL, M::DEVICE_LOCAL.as_raw());
        assert_eq!(MEMORY_PROPERTY_HOST_VISIBLE, M::HOST_VISIBLE.as_raw());
        assert_eq!(MEMORY_PROPERTY_HOST_COHERENT, M::HOST_COHERENT.as_raw());
        assert_eq!(MEMORY_PROPERTY_HOST_CACHED, M::HOST_CACHED.as_raw());
        assert_eq!(
            MEMORY_HEAP_DEVICE_LOCAL,
            ash::MemoryHeapFlags::DEVICE_LOCAL.as_raw()
        );
        assert_eq!(
            EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
            ash::ExternalMemoryHandleTypeFlags::OPAQUE_FD.as_raw()
        );
        use ash::PhysicalDeviceType as P;
        assert_eq!(
            PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU,
            P::INTEGRATED_GPU.as_raw() as u32
        );
        assert_eq!(
            PHYSICAL_DEVICE_TYPE_DISCRETE_GPU,
            P::DISCRETE_GPU.as_raw() as u32
        );
        assert_eq!(
            PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU,
            P::VIRTUAL_GPU.as_raw() as u32
        );
        assert_eq!(PHYSICAL_DEVICE_TYPE_CPU, P::CPU.as_raw() as u32);
        use ash::StructureType as S;
        for (ours, theirs) in [
            (STYPE_APPLICATION_INFO, S::APPLICATION_INFO),
            (STYPE_INSTANCE_CREATE_INFO, S::INSTANCE_CREATE_INFO),
            (STYPE_DEVICE_QUEUE_CREATE_INFO, S::DEVICE_QUEUE_CREATE_INFO),
            (STYPE_DEVICE_CREATE_INFO, S::DEVICE_CREATE_INFO),
            (STYPE_MEMORY_ALLOCATE_INFO, S::MEMORY_ALLOCATE_INFO),
            (
                STYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                S::PHYSICAL_DEVICE_PROPERTIES_2,
            ),
            (
                STYPE_PHYSICAL_DEVICE_ID_PROPERTIES,
                S::PHYSICAL_DEVICE_ID_PROPERTIES,
            ),
            (
                STYPE_EXPORT_MEMORY_ALLOCATE_INFO,
                S::EXPORT_MEMORY_ALLOCATE_INFO,
            ),
            (
                STYPE_IMPORT_MEMORY_FD_INFO_KHR,
                S::IMPORT_MEMORY_FD_INFO_KHR,
            ),
            (STYPE_MEMORY_GET_FD_INFO_KHR, S::MEMORY_GET_FD_INFO_KHR),
        ] {
            assert_eq!(ours as i32, theirs.as_raw());
        }
        assert_eq!(EXT_EXTERNAL_MEMORY_FD, ::ash::khr::external_memory_fd::NAME);
        assert_eq!(EXT_EXTERNAL_MEMORY, ::ash::khr::external_memory::NAME);
    }

    fn t(index: u32, flags: u32, heap_size: u64) -> MemoryType {
        MemoryType {
            index,
            flags,
            heap_index: 0,
            heap_size,
        }
    }

    #[test]
    fn memory_type_needs_device_local_and_host_visible() {
        assert_eq!(
            choose_memory_type(&[t(0, 0x1, 1 << 30), t(1, 0x6, 1 << 30), t(2, 0xE, 1 << 30)]),
            None
        );
        assert_eq!(choose_memory_type(&[]), None);
    }

    #[test]
    fn memory_type_prefers_coherent_uncached_then_largest_heap() {
        // An NVIDIA-like list: VRAM only (0x1), system memory (0x6, 0xE), BAR (0x7) twice.
        let types = [
            t(0, 0x1, 140 << 30),
            t(1, 0x6, 64 << 30),
            t(2, 0x3, 140 << 30),
            t(3, 0x7, 256 << 20),
            t(4, 0x7, 140 << 30),
            t(5, 0xF, 140 << 30),
        ];
        assert_eq!(choose_memory_type(&types).map(|m| m.index), Some(4));
        // Without any coherent one, the non-coherent BAR type qualifies.
        assert_eq!(choose_memory_type(&types[..3]).map(|m| m.index), Some(2));
        // A cached one is taken when it is all there is (lavapipe: 0xF).
        assert_eq!(
            choose_memory_type(&[t(0, 0xF, 1 << 30)]).map(|m| m.index),
            Some(0)
        );
        // Equal candidates: the lowest index.
        assert_eq!(
            choose_memory_type(&[t(0, 0x1, 9), t(1, 0x7, 9), t(2, 0x7, 9)]).map(|m| m.index),
            Some(1)
        );
    }
}
