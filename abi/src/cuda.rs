//! The CUDA driver API's declarations the workspace uses (`cuda.h`, LP64): handle and value
//! types, the `CUresult` codes with their names, device and pointer attributes, the VMM
//! (`cuMem*`) and external-memory structures and their constants. The library's DMA-BUF and
//! Vulkan backends, `support` (the tools, the benchmarks, the host-written memory library) and
//! the emulator use them; `tests/cuda_header.rs` compiles each against the real `cuda.h`.
//!
//! Module [`pfn`] holds the prototype of each driver function the workspace loads, named as
//! the function. Written by hand rather than taken from a generated binding, which types `CUresult` as a Rust enum (see [`CUresult`]) and ties
//! the build to one CUDA version.

#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void, CStr};

/// `CUresult`: 0 is success, anything else an error code.
///
/// `cuda.h` declares it as an enum (`cudaError_enum`), which C passes as a 32-bit integer.
/// Here it is a `c_int`, as every user in the workspace (the library, `libgdrapi_ext`, the
/// emulator and its runtime, the tools) treats it: any code a driver returns, a newer one's
/// included, is then a valid value, where a Rust enum would make an unlisted code undefined
/// behaviour; and it compares with the errno table and C's `int` without casts.
pub type CUresult = c_int;
/// `CUdevice`: a device ordinal's handle.
pub type CUdevice = c_int;
/// `CUdeviceptr`: a device virtual address.
pub type CUdeviceptr = c_ulonglong;
/// `CUcontext` (opaque); null means "no context".
pub type CUcontext = *mut c_void;
/// `CUstream` (opaque).
pub type CUstream = *mut c_void;
/// `CUexternalMemory` (opaque).
pub type CUexternalMemory = *mut c_void;
/// `CUmemGenericAllocationHandle`: a physical allocation made by `cuMemCreate`.
pub type CUmemGenericAllocationHandle = c_ulonglong;
/// `CUuuid`: 16 bytes (`struct CUuuid_st { char bytes[16]; }`), the UUID Vulkan reports as
/// `deviceUUID`.
pub type CUuuid = [u8; 16];

/// The soname of the driver.
pub const LIBCUDA: &str = "libcuda.so.1";

/// `CUresult` values named in the workspace (`CUDA_SUCCESS`, `CUDA_ERROR_*`); every code's
/// name is in [`ERROR_NAMES`].
pub mod status {
    use super::CUresult;
    /// `CUDA_SUCCESS`.
    pub const SUCCESS: CUresult = 0;
    /// `CUDA_ERROR_INVALID_VALUE`: an argument is out of range or a pointer is NULL; among
    /// others, what `cuMemRetainAllocationHandle` answers for an address no `cuMemMap` mapped.
    pub const INVALID_VALUE: CUresult = 1;
    /// `CUDA_ERROR_OUT_OF_MEMORY`.
    pub const OUT_OF_MEMORY: CUresult = 2;
    /// `CUDA_ERROR_NOT_INITIALIZED`: `cuInit` has not run.
    pub const NOT_INITIALIZED: CUresult = 3;
    /// `CUDA_ERROR_NO_DEVICE`.
    pub const NO_DEVICE: CUresult = 100;
    /// `CUDA_ERROR_INVALID_DEVICE`: ordinal out of range.
    pub const INVALID_DEVICE: CUresult = 101;
    /// `CUDA_ERROR_INVALID_CONTEXT`: no current context, or an unknown one.
    pub const INVALID_CONTEXT: CUresult = 201;
    /// `CUDA_ERROR_INVALID_HANDLE`.
    pub const INVALID_HANDLE: CUresult = 400;
    /// `CUDA_ERROR_NOT_FOUND`: a name, symbol or range was not found.
    pub const NOT_FOUND: CUresult = 500;
    /// `CUDA_ERROR_NOT_SUPPORTED`: not supported on this device or platform.
    pub const NOT_SUPPORTED: CUresult = 801;
    /// `CUDA_ERROR_UNKNOWN`.
    pub const UNKNOWN: CUresult = 999;
}

/// Every `CUresult` `cuda.h` (13.x) defines, with its name (what `cuGetErrorName` gives).
pub const ERROR_NAMES: &[(CUresult, &CStr)] = &[
    (0, c"CUDA_SUCCESS"),
    (1, c"CUDA_ERROR_INVALID_VALUE"),
    (2, c"CUDA_ERROR_OUT_OF_MEMORY"),
    (3, c"CUDA_ERROR_NOT_INITIALIZED"),
    (4, c"CUDA_ERROR_DEINITIALIZED"),
    (5, c"CUDA_ERROR_PROFILER_DISABLED"),
    (6, c"CUDA_ERROR_PROFILER_NOT_INITIALIZED"),
    (7, c"CUDA_ERROR_PROFILER_ALREADY_STARTED"),
    (8, c"CUDA_ERROR_PROFILER_ALREADY_STOPPED"),
    (34, c"CUDA_ERROR_STUB_LIBRARY"),
    (36, c"CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER"),
    (46, c"CUDA_ERROR_DEVICE_UNAVAILABLE"),
    (47, c"CUDA_ERROR_MULTICAST_RESOURCE_FULL"),
    (100, c"CUDA_ERROR_NO_DEVICE"),
    (101, c"CUDA_ERROR_INVALID_DEVICE"),
    (102, c"CUDA_ERROR_DEVICE_NOT_LICENSED"),
    (200, c"CUDA_ERROR_INVALID_IMAGE"),
    (201, c"CUDA_ERROR_INVALID_CONTEXT"),
    (202, c"CUDA_ERROR_CONTEXT_ALREADY_CURRENT"),
    (205, c"CUDA_ERROR_MAP_FAILED"),
    (206, c"CUDA_ERROR_UNMAP_FAILED"),
    (207, c"CUDA_ERROR_ARRAY_IS_MAPPED"),
    (208, c"CUDA_ERROR_ALREADY_MAPPED"),
    (209, c"CUDA_ERROR_NO_BINARY_FOR_GPU"),
    (210, c"CUDA_ERROR_ALREADY_ACQUIRED"),
    (211, c"CUDA_ERROR_NOT_MAPPED"),
    (212, c"CUDA_ERROR_NOT_MAPPED_AS_ARRAY"),
    (213, c"CUDA_ERROR_NOT_MAPPED_AS_POINTER"),
    (214, c"CUDA_ERROR_ECC_UNCORRECTABLE"),
    (215, c"CUDA_ERROR_UNSUPPORTED_LIMIT"),
    (216, c"CUDA_ERROR_CONTEXT_ALREADY_IN_USE"),
    (217, c"CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"),
    (218, c"CUDA_ERROR_INVALID_PTX"),
    (219, c"CUDA_ERROR_INVALID_GRAPHICS_CONTEXT"),
    (220, c"CUDA_ERROR_NVLINK_UNCORRECTABLE"),
    (221, c"CUDA_ERROR_JIT_COMPILER_NOT_FOUND"),
    (222, c"CUDA_ERROR_UNSUPPORTED_PTX_VERSION"),
    (223, c"CUDA_ERROR_JIT_COMPILATION_DISABLED"),
    (224, c"CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY"),
    (225, c"CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC"),
    (226, c"CUDA_ERROR_CONTAINED"),
    (227, c"CUDA_ERROR_INSUFFICIENT_LOADER_VERSION"),
    (300, c"CUDA_ERROR_INVALID_SOURCE"),
    (301, c"CUDA_ERROR_FILE_NOT_FOUND"),
    (302, c"CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND"),
    (303, c"CUDA_ERROR_SHARED_OBJECT_INIT_FAILED"),
    (304, c"CUDA_ERROR_OPERATING_SYSTEM"),
    (400, c"CUDA_ERROR_INVALID_HANDLE"),
    (401, c"CUDA_ERROR_ILLEGAL_STATE"),
    (402, c"CUDA_ERROR_LOSSY_QUERY"),
    (500, c"CUDA_ERROR_NOT_FOUND"),
    (600, c"CUDA_ERROR_NOT_READY"),
    (700, c"CUDA_ERROR_ILLEGAL_ADDRESS"),
    (701, c"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"),
    (702, c"CUDA_ERROR_LAUNCH_TIMEOUT"),
    (703, c"CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING"),
    (704, c"CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"),
    (705, c"CUDA_ERROR_PEER_ACCESS_NOT_ENABLED"),
    (708, c"CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE"),
    (709, c"CUDA_ERROR_CONTEXT_IS_DESTROYED"),
    (710, c"CUDA_ERROR_ASSERT"),
    (711, c"CUDA_ERROR_TOO_MANY_PEERS"),
    (712, c"CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"),
    (713, c"CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"),
    (714, c"CUDA_ERROR_HARDWARE_STACK_ERROR"),
    (715, c"CUDA_ERROR_ILLEGAL_INSTRUCTION"),
    (716, c"CUDA_ERROR_MISALIGNED_ADDRESS"),
    (717, c"CUDA_ERROR_INVALID_ADDRESS_SPACE"),
    (718, c"CUDA_ERROR_INVALID_PC"),
    (719, c"CUDA_ERROR_LAUNCH_FAILED"),
    (720, c"CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE"),
    (721, c"CUDA_ERROR_TENSOR_MEMORY_LEAK"),
    (800, c"CUDA_ERROR_NOT_PERMITTED"),
    (801, c"CUDA_ERROR_NOT_SUPPORTED"),
    (802, c"CUDA_ERROR_SYSTEM_NOT_READY"),
    (803, c"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"),
    (804, c"CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"),
    (805, c"CUDA_ERROR_MPS_CONNECTION_FAILED"),
    (806, c"CUDA_ERROR_MPS_RPC_FAILURE"),
    (807, c"CUDA_ERROR_MPS_SERVER_NOT_READY"),
    (808, c"CUDA_ERROR_MPS_MAX_CLIENTS_REACHED"),
    (809, c"CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED"),
    (810, c"CUDA_ERROR_MPS_CLIENT_TERMINATED"),
    (811, c"CUDA_ERROR_CDP_NOT_SUPPORTED"),
    (812, c"CUDA_ERROR_CDP_VERSION_MISMATCH"),
    (900, c"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"),
    (901, c"CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"),
    (902, c"CUDA_ERROR_STREAM_CAPTURE_MERGE"),
    (903, c"CUDA_ERROR_STREAM_CAPTURE_UNMATCHED"),
    (904, c"CUDA_ERROR_STREAM_CAPTURE_UNJOINED"),
    (905, c"CUDA_ERROR_STREAM_CAPTURE_ISOLATION"),
    (906, c"CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"),
    (907, c"CUDA_ERROR_CAPTURED_EVENT"),
    (908, c"CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD"),
    (909, c"CUDA_ERROR_TIMEOUT"),
    (910, c"CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE"),
    (911, c"CUDA_ERROR_EXTERNAL_DEVICE"),
    (912, c"CUDA_ERROR_INVALID_CLUSTER_SIZE"),
    (913, c"CUDA_ERROR_FUNCTION_NOT_LOADED"),
    (914, c"CUDA_ERROR_INVALID_RESOURCE_TYPE"),
    (915, c"CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION"),
    (916, c"CUDA_ERROR_KEY_ROTATION"),
    (917, c"CUDA_ERROR_STREAM_DETACHED"),
    (918, c"CUDA_ERROR_GRAPH_RECAPTURE_FAILURE"),
    (919, c"CUDA_ERROR_FABRIC_NOT_READY"),
    (999, c"CUDA_ERROR_UNKNOWN"),
];

/// The `cuda.h` name of `code`, if it is a known `CUresult`.
pub fn error_name(code: CUresult) -> Option<&'static CStr> {
    ERROR_NAMES
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, n)| *n)
}

/// The code named `name` in `cuda.h`, if any.
pub fn error_code(name: &str) -> Option<CUresult> {
    ERROR_NAMES
        .iter()
        .find(|(_, n)| n.to_bytes() == name.as_bytes())
        .map(|(c, _)| *c)
}

/// A CUDA version as `cuDriverGetVersion` reports it (`CUDA_VERSION`'s encoding).
pub const fn version(major: c_int, minor: c_int) -> c_int {
    1000 * major + 10 * minor
}

/// The first driver with `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED` (CUDA 11.3).
pub const VERSION_WITH_GPU_DIRECT_RDMA_ATTRIBUTE: c_int = version(11, 3);
/// The first driver with `cuDeviceGetUuid_v2` (CUDA 11.4), the last of the entry points the
/// Vulkan import calls (the VMM calls came before it).
pub const VERSION_WITH_DEVICE_GET_UUID_V2: c_int = version(11, 4);
/// The first driver whose dma-buf exports (`cuMemGetHandleForAddressRange`) the CPU can
/// mmap (CUDA 13.3).
pub const VERSION_WITH_DMA_BUF_MMAP: c_int = version(13, 3);

/// `CUdevice_attribute` values named in the workspace.
pub mod attr {
    use core::ffi::c_int;
    /// `CU_DEVICE_ATTRIBUTE_PCI_BUS_ID`.
    pub const PCI_BUS_ID: c_int = 33;
    /// `CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID`.
    pub const PCI_DEVICE_ID: c_int = 34;
    /// `CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID`.
    pub const PCI_DOMAIN_ID: c_int = 50;
    /// `CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED`.
    pub const VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: c_int = 102;
    /// `CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES`: non-zero on coherent
    /// platforms (Grace Hopper and the like), where dma-buf mappings are cached.
    pub const PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES: c_int = 100;
    /// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED`.
    pub const GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED: c_int = 110;
    /// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED`.
    pub const GPU_DIRECT_RDMA_SUPPORTED: c_int = 116;
    /// `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`.
    pub const DMA_BUF_SUPPORTED: c_int = 124;
}

/// `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS`.
pub const POINTER_ATTRIBUTE_SYNC_MEMOPS: c_int = 6;
/// `CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL`.
pub const POINTER_ATTRIBUTE_DEVICE_ORDINAL: c_int = 9;
/// `CU_MEMHOSTALLOC_DEVICEMAP`: the allocation also gets a device pointer.
pub const MEMHOSTALLOC_DEVICEMAP: c_uint = 0x02;
/// `CU_MEMHOSTALLOC_WRITECOMBINED`: the CPU maps the allocation write-combining.
pub const MEMHOSTALLOC_WRITECOMBINED: c_uint = 0x04;
/// `CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD`.
pub const EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD: c_uint = 1;
/// `CU_MEM_LOCATION_TYPE_DEVICE`.
pub const MEM_LOCATION_TYPE_DEVICE: c_int = 1;
/// `CU_MEM_ALLOCATION_TYPE_PINNED`.
pub const MEM_ALLOCATION_TYPE_PINNED: c_int = 1;
/// `CU_MEM_ACCESS_FLAGS_PROT_READWRITE`.
pub const MEM_ACCESS_FLAGS_PROT_READWRITE: c_int = 3;
/// `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`: a VMM allocation exportable as a file
/// descriptor (`cuMemExportToShareableHandle` writes an `int`).
pub const MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: c_int = 1;
/// `CU_MEM_ALLOC_GRANULARITY_RECOMMENDED`.
pub const MEM_ALLOC_GRANULARITY_RECOMMENDED: c_int = 1;
/// `CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD`.
pub const MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD: c_int = 1;
/// `CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE`: export the range through the PCIe BAR.
pub const MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE: u64 = 0x1;
/// `CU_GET_PROC_ADDRESS_DEFAULT`.
pub const GET_PROC_ADDRESS_DEFAULT: u64 = 0;

/// `CUmemLocation`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemLocation {
    /// `CUmemLocationType` ([`MEM_LOCATION_TYPE_DEVICE`]).
    pub kind: c_int,
    /// The device ordinal.
    pub id: c_int,
}

/// `CUmemAllocationProp` (32 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemAllocationProp {
    /// `CUmemAllocationType` ([`MEM_ALLOCATION_TYPE_PINNED`]).
    pub kind: c_int,
    /// `CUmemAllocationHandleType` bits the allocation can be exported as.
    pub requested_handle_types: c_int,
    /// Where the memory lives.
    pub location: MemLocation,
    /// Windows only.
    pub win32_handle_meta_data: *mut c_void,
    /// `allocFlags.compressionType`.
    pub compression_type: u8,
    /// `allocFlags.gpuDirectRDMACapable`.
    pub gpu_direct_rdma_capable: u8,
    /// `allocFlags.usage`.
    pub usage: u16,
    /// `allocFlags.reserved`.
    pub reserved: [u8; 4],
}

impl Default for MemAllocationProp {
    fn default() -> Self {
        MemAllocationProp {
            kind: 0,
            requested_handle_types: 0,
            location: MemLocation::default(),
            win32_handle_meta_data: core::ptr::null_mut(),
            compression_type: 0,
            gpu_direct_rdma_capable: 0,
            usage: 0,
            reserved: [0; 4],
        }
    }
}

/// `CUmemAccessDesc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MemAccessDesc {
    /// Which device gets access.
    pub location: MemLocation,
    /// `CUmemAccess_flags` ([`MEM_ACCESS_FLAGS_PROT_READWRITE`]).
    pub flags: c_int,
}

/// `CUDA_EXTERNAL_MEMORY_HANDLE_DESC`, with the handle union as an `int fd` (`OPAQUE_FD`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExternalMemoryHandleDesc {
    /// `CUexternalMemoryHandleType`.
    pub kind: c_uint,
    /// Padding before the 8-aligned union.
    pub _pad: c_uint,
    /// `handle.fd`.
    pub fd: c_int,
    /// The rest of the 16-byte union.
    pub _union_rest: [u32; 3],
    /// Size of the memory in bytes.
    pub size: u64,
    /// `CUDA_EXTERNAL_MEMORY_DEDICATED` or 0.
    pub flags: c_uint,
    /// Must be zero.
    pub reserved: [c_uint; 16],
}

/// `CUDA_EXTERNAL_MEMORY_BUFFER_DESC`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExternalMemoryBufferDesc {
    /// Offset into the memory.
    pub offset: u64,
    /// Size of the buffer.
    pub size: u64,
    /// Must be zero.
    pub flags: c_uint,
    /// Must be zero.
    pub reserved: [c_uint; 16],
}

/// The prototype of each driver function loaded in the workspace, named as the exported
/// function (`_v2` where the driver exports one; `cuda.h` `#define`s the plain name to it).
/// C enums (`CUdevice_attribute`, `CUpointer_attribute`, the handle and flag types) are
/// `c_int`, as [`CUresult`] is; `unsigned long long` and `cuuint64_t` flags are `u64`.
pub mod pfn {
    use super::*;
    /// `cuInit`: flags (0).
    pub type cuInit = unsafe extern "C" fn(c_uint) -> CUresult;
    /// `cuDriverGetVersion`: out version (`1000 * major + 10 * minor`).
    pub type cuDriverGetVersion = unsafe extern "C" fn(*mut c_int) -> CUresult;
    /// `cuGetErrorName`: code, out static string.
    pub type cuGetErrorName = unsafe extern "C" fn(CUresult, *mut *const c_char) -> CUresult;
    /// `cuGetErrorString`: code, out static string.
    pub type cuGetErrorString = unsafe extern "C" fn(CUresult, *mut *const c_char) -> CUresult;
    /// `cuGetProcAddress_v2` (CUDA >= 12.0): symbol, out pointer, version, flags, out status.
    pub type cuGetProcAddress_v2 =
        unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> CUresult;
    /// The legacy `cuGetProcAddress` (CUDA 11.3 to 11.8): symbol, out pointer, version, flags.
    pub type cuGetProcAddress =
        unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> CUresult;
    /// `cuDeviceGetCount`: out count.
    pub type cuDeviceGetCount = unsafe extern "C" fn(*mut c_int) -> CUresult;
    /// `cuDeviceGet`: out device, ordinal.
    pub type cuDeviceGet = unsafe extern "C" fn(*mut CUdevice, c_int) -> CUresult;
    /// `cuDeviceGetName`: buffer, its length, device.
    pub type cuDeviceGetName = unsafe extern "C" fn(*mut c_char, c_int, CUdevice) -> CUresult;
    /// `cuDeviceGetAttribute`: out value, attribute, device.
    pub type cuDeviceGetAttribute = unsafe extern "C" fn(*mut c_int, c_int, CUdevice) -> CUresult;
    /// The legacy `cuDeviceGetUuid` (before CUDA 11.4): out UUID, device.
    pub type cuDeviceGetUuid = unsafe extern "C" fn(*mut CUuuid, CUdevice) -> CUresult;
    /// `cuDeviceGetUuid_v2`: out UUID (Vulkan's `deviceUUID`), device.
    pub type cuDeviceGetUuid_v2 = unsafe extern "C" fn(*mut CUuuid, CUdevice) -> CUresult;
    /// `cuDevicePrimaryCtxRetain`: out context, device.
    pub type cuDevicePrimaryCtxRetain = unsafe extern "C" fn(*mut CUcontext, CUdevice) -> CUresult;
    /// The legacy `cuDevicePrimaryCtxRelease` (before CUDA 11.0): device.
    pub type cuDevicePrimaryCtxRelease = unsafe extern "C" fn(CUdevice) -> CUresult;
    /// `cuDevicePrimaryCtxRelease_v2`: device.
    pub type cuDevicePrimaryCtxRelease_v2 = unsafe extern "C" fn(CUdevice) -> CUresult;
    /// `cuCtxGetCurrent`: out context (null if none).
    pub type cuCtxGetCurrent = unsafe extern "C" fn(*mut CUcontext) -> CUresult;
    /// `cuCtxSetCurrent`: context (null to unbind).
    pub type cuCtxSetCurrent = unsafe extern "C" fn(CUcontext) -> CUresult;
    /// `cuCtxSynchronize`.
    pub type cuCtxSynchronize = unsafe extern "C" fn() -> CUresult;
    /// `cuMemAlloc_v2`: out address, size.
    pub type cuMemAlloc_v2 = unsafe extern "C" fn(*mut CUdeviceptr, usize) -> CUresult;
    /// `cuMemFree_v2`: address.
    pub type cuMemFree_v2 = unsafe extern "C" fn(CUdeviceptr) -> CUresult;
    /// `cuMemAllocHost_v2`: out pointer, size.
    pub type cuMemAllocHost_v2 = unsafe extern "C" fn(*mut *mut c_void, usize) -> CUresult;
    /// `cuMemHostAlloc`: out pointer, size, `CU_MEMHOSTALLOC_*` flags.
    pub type cuMemHostAlloc = unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> CUresult;
    /// `cuMemFreeHost`: pointer.
    pub type cuMemFreeHost = unsafe extern "C" fn(*mut c_void) -> CUresult;
    /// `cuMemHostGetDevicePointer_v2`: out device address, host pointer, flags (0).
    pub type cuMemHostGetDevicePointer_v2 =
        unsafe extern "C" fn(*mut CUdeviceptr, *mut c_void, c_uint) -> CUresult;
    /// `cuMemcpy`: destination, source, bytes.
    pub type cuMemcpy = unsafe extern "C" fn(CUdeviceptr, CUdeviceptr, usize) -> CUresult;
    /// `cuMemcpyHtoD_v2`: device destination, host source, bytes.
    pub type cuMemcpyHtoD_v2 = unsafe extern "C" fn(CUdeviceptr, *const c_void, usize) -> CUresult;
    /// `cuMemcpyDtoH_v2`: host destination, device source, bytes.
    pub type cuMemcpyDtoH_v2 = unsafe extern "C" fn(*mut c_void, CUdeviceptr, usize) -> CUresult;
    /// `cuMemsetD8_v2`: address, byte, count.
    pub type cuMemsetD8_v2 = unsafe extern "C" fn(CUdeviceptr, u8, usize) -> CUresult;
    /// `cuPointerGetAttribute`: out value, attribute, address.
    pub type cuPointerGetAttribute =
        unsafe extern "C" fn(*mut c_void, c_int, CUdeviceptr) -> CUresult;
    /// `cuPointerSetAttribute`: value, attribute, address.
    pub type cuPointerSetAttribute =
        unsafe extern "C" fn(*const c_void, c_int, CUdeviceptr) -> CUresult;
    /// `cuMemGetAddressRange_v2`: out base, out size, an address inside the range.
    pub type cuMemGetAddressRange_v2 =
        unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, CUdeviceptr) -> CUresult;
    /// `cuMemGetHandleForAddressRange`: out handle, address, size, handle type, flags.
    pub type cuMemGetHandleForAddressRange =
        unsafe extern "C" fn(*mut c_void, CUdeviceptr, usize, c_int, u64) -> CUresult;
    /// `cuMemGetAllocationGranularity`: out granularity, properties, which granularity.
    pub type cuMemGetAllocationGranularity =
        unsafe extern "C" fn(*mut usize, *const MemAllocationProp, c_int) -> CUresult;
    /// `cuMemAddressReserve`: out address, size, alignment, wanted address, flags.
    pub type cuMemAddressReserve =
        unsafe extern "C" fn(*mut CUdeviceptr, usize, usize, CUdeviceptr, u64) -> CUresult;
    /// `cuMemAddressFree`: address, size.
    pub type cuMemAddressFree = unsafe extern "C" fn(CUdeviceptr, usize) -> CUresult;
    /// `cuMemCreate`: out allocation, size, properties, flags.
    pub type cuMemCreate = unsafe extern "C" fn(
        *mut CUmemGenericAllocationHandle,
        usize,
        *const MemAllocationProp,
        u64,
    ) -> CUresult;
    /// `cuMemRelease`: allocation.
    pub type cuMemRelease = unsafe extern "C" fn(CUmemGenericAllocationHandle) -> CUresult;
    /// `cuMemMap`: address, size, offset, allocation, flags.
    pub type cuMemMap = unsafe extern "C" fn(
        CUdeviceptr,
        usize,
        usize,
        CUmemGenericAllocationHandle,
        u64,
    ) -> CUresult;
    /// `cuMemUnmap`: address, size.
    pub type cuMemUnmap = unsafe extern "C" fn(CUdeviceptr, usize) -> CUresult;
    /// `cuMemSetAccess`: address, size, descriptors, their count.
    pub type cuMemSetAccess =
        unsafe extern "C" fn(CUdeviceptr, usize, *const MemAccessDesc, usize) -> CUresult;
    /// `cuMemRetainAllocationHandle`: out allocation, any address inside a `cuMemMap`'d range.
    pub type cuMemRetainAllocationHandle =
        unsafe extern "C" fn(*mut CUmemGenericAllocationHandle, *mut c_void) -> CUresult;
    /// `cuMemGetAllocationPropertiesFromHandle`: out properties, allocation.
    pub type cuMemGetAllocationPropertiesFromHandle =
        unsafe extern "C" fn(*mut MemAllocationProp, CUmemGenericAllocationHandle) -> CUresult;
    /// `cuMemExportToShareableHandle`: out handle, allocation, handle type, flags.
    pub type cuMemExportToShareableHandle =
        unsafe extern "C" fn(*mut c_void, CUmemGenericAllocationHandle, c_int, u64) -> CUresult;
    /// `cuImportExternalMemory`: out external memory, its description.
    pub type cuImportExternalMemory =
        unsafe extern "C" fn(*mut CUexternalMemory, *const ExternalMemoryHandleDesc) -> CUresult;
    /// `cuExternalMemoryGetMappedBuffer`: out address, external memory, the buffer's range.
    pub type cuExternalMemoryGetMappedBuffer = unsafe extern "C" fn(
        *mut CUdeviceptr,
        CUexternalMemory,
        *const ExternalMemoryBufferDesc,
    ) -> CUresult;
    /// `cuDestroyExternalMemory`: external memory.
    pub type cuDestroyExternalMemory = unsafe extern "C" fn(CUexternalMemory) -> CUresult;
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    #[test]
    fn layouts_are_cuda_hs_on_lp64() {
        assert_eq!(size_of::<MemAllocationProp>(), 32);
        assert_eq!(offset_of!(MemAllocationProp, location), 8);
        assert_eq!(offset_of!(MemAllocationProp, win32_handle_meta_data), 16);
        assert_eq!(offset_of!(MemAllocationProp, gpu_direct_rdma_capable), 25);
        assert_eq!(size_of::<MemAccessDesc>(), 12);
        assert_eq!(offset_of!(ExternalMemoryHandleDesc, fd), 8);
        assert_eq!(offset_of!(ExternalMemoryHandleDesc, size), 24);
        assert_eq!(offset_of!(ExternalMemoryHandleDesc, flags), 32);
        assert_eq!(size_of::<ExternalMemoryHandleDesc>(), 104);
        assert_eq!(offset_of!(ExternalMemoryBufferDesc, flags), 16);
        assert_eq!(size_of::<ExternalMemoryBufferDesc>(), 88);
    }

    #[test]
    fn versions_use_the_drivers_encoding() {
        assert_eq!(VERSION_WITH_DMA_BUF_MMAP, 13030);
        assert_eq!(VERSION_WITH_DEVICE_GET_UUID_V2, 11040);
        assert_eq!(VERSION_WITH_GPU_DIRECT_RDMA_ATTRIBUTE, 11030);
    }

    #[test]
    fn error_names_both_ways() {
        assert_eq!(error_name(600), Some(c"CUDA_ERROR_NOT_READY"));
        assert_eq!(
            error_name(status::NOT_SUPPORTED),
            Some(c"CUDA_ERROR_NOT_SUPPORTED")
        );
        assert_eq!(
            error_code("CUDA_ERROR_INVALID_VALUE"),
            Some(status::INVALID_VALUE)
        );
        assert_eq!(error_name(12345), None);
        assert_eq!(error_code("CUDA_ERROR_"), None);
        let mut codes: [CUresult; 128] = [-1; 128];
        assert!(ERROR_NAMES.len() <= codes.len());
        for (i, (c, _)) in ERROR_NAMES.iter().enumerate() {
            codes[i] = *c;
        }
        let codes = &mut codes[..ERROR_NAMES.len()];
        codes.sort_unstable();
        assert!(codes.windows(2).all(|w| w[0] < w[1]), "one name per code");
    }
}
