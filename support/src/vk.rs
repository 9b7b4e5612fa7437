//! The few Vulkan declarations this crate uses, written from the Vulkan 1.1 specification
//! (`vulkan_core.h` layouts and values for 64-bit Linux). Only plain data and function
//! pointer types: the entry points are resolved at run time through `vkGetInstanceProcAddr`.
//!
//! Hand-written rather than `ash`: 17 entry points and 15 structures, checked by the layout
//! test below, against generated bindings of the whole API compiled into the emulator that
//! every test target builds.

#![allow(non_camel_case_types, non_snake_case)]

use std::ffi::{c_char, c_int, c_void};

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
/// `VK_API_VERSION_1_1`.
pub const VK_API_VERSION_1_1: u32 = (1 << 22) | (1 << 12);
/// `VK_WHOLE_SIZE`.
pub const VK_WHOLE_SIZE: u64 = !0;

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
pub const EXT_EXTERNAL_MEMORY_FD: &str = "VK_KHR_external_memory_fd";
/// Device extension for external memory in general (core since 1.1, enabled when listed).
pub const EXT_EXTERNAL_MEMORY: &str = "VK_KHR_external_memory";

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_the_specification() {
        // Offsets of vulkan_core.h on LP64, the ones a wrong field order would move.
        assert_eq!(offset_of!(VkPhysicalDeviceProperties, deviceName), 20);
        assert_eq!(
            offset_of!(VkPhysicalDeviceProperties, pipelineCacheUUID),
            276
        );
        assert!(size_of::<VkPhysicalDeviceProperties>() >= 824);
        assert_eq!(offset_of!(VkPhysicalDeviceProperties2, properties), 16);
        assert_eq!(offset_of!(VkPhysicalDeviceIDProperties, deviceUUID), 16);
        assert_eq!(size_of::<VkPhysicalDeviceIDProperties>(), 64);
        assert_eq!(
            offset_of!(VkPhysicalDeviceMemoryProperties, memoryHeapCount),
            260
        );
        assert_eq!(
            offset_of!(VkPhysicalDeviceMemoryProperties, memoryHeaps),
            264
        );
        assert_eq!(size_of::<VkPhysicalDeviceMemoryProperties>(), 520);
        assert_eq!(size_of::<VkExtensionProperties>(), 260);
        assert_eq!(offset_of!(VkDeviceCreateInfo, pEnabledFeatures), 64);
        assert_eq!(size_of::<VkDeviceCreateInfo>(), 72);
        assert_eq!(offset_of!(VkMemoryAllocateInfo, memoryTypeIndex), 24);
        assert_eq!(offset_of!(VkImportMemoryFdInfoKHR, fd), 20);
        assert_eq!(offset_of!(VkMemoryGetFdInfoKHR, handleType), 24);
        assert_eq!(size_of::<VkInstanceCreateInfo>(), 64);
        assert_eq!(size_of::<VkApplicationInfo>(), 48);
    }
}
