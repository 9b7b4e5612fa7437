//! The few CUDA driver API types and constants the library uses, with the values of `cuda.h`.
//! Only what the DMA-BUF and Vulkan backends need; nothing here links against libcuda.

use std::ffi::{c_char, c_int, c_uint, c_void};

/// `CUresult`: 0 is success, anything else an error code.
pub type CuResult = c_int;
/// `CUdevice`: a device handle (an ordinal in practice).
pub type CuDevice = c_int;
/// `CUcontext`: an opaque context pointer; null means "no context".
pub type CuContext = *mut c_void;
/// `CUdeviceptr`: a device virtual address.
pub type CuDevicePtr = u64;

/// `CUDA_SUCCESS`.
pub const CUDA_SUCCESS: CuResult = 0;
/// `CUDA_ERROR_INVALID_VALUE`: among others, what `cuMemRetainAllocationHandle` answers for an
/// address that no `cuMemMap` mapped.
pub const INVALID_VALUE: CuResult = 1;
/// `CUDA_ERROR_NOT_FOUND`.
pub const NOT_FOUND: CuResult = 500;

/// `CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES`: non-zero on coherent
/// platforms (Grace Hopper and the like), where dma-buf mappings are cached.
pub const ATTR_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES: c_int = 100;
/// `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`.
pub const ATTR_DMA_BUF_SUPPORTED: c_int = 124;
/// `CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL`.
pub const POINTER_ATTRIBUTE_DEVICE_ORDINAL: c_int = 9;
/// `CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD`.
pub const MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD: c_int = 1;
/// `CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE`: export the range through the PCIe BAR.
pub const MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE: u64 = 0x1;
/// `CU_GET_PROC_ADDRESS_DEFAULT`.
pub const GET_PROC_ADDRESS_DEFAULT: u64 = 0;
/// The CUDA version (`cuDriverGetVersion` encoding, 1000 * major + 10 * minor) the first
/// driver with CPU-mappable dma-buf exports reports: CUDA 13.3.
pub const MIN_DMABUF_MMAP_VERSION: c_int = 13030;

/// `cuDriverGetVersion`.
pub type FnDriverGetVersion = unsafe extern "C" fn(*mut c_int) -> CuResult;
/// `cuGetProcAddress_v2` (CUDA >= 12.0): symbol, out pointer, version, flags, out status.
pub type FnGetProcAddressV2 =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> CuResult;
/// The legacy `cuGetProcAddress` (CUDA 11.3 to 11.8): symbol, out pointer, version, flags.
pub type FnGetProcAddressV1 =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> CuResult;
/// `cuInit`.
pub type FnInit = unsafe extern "C" fn(c_uint) -> CuResult;
/// `cuDeviceGet`.
pub type FnDeviceGet = unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult;
/// `cuDeviceGetCount`.
pub type FnDeviceGetCount = unsafe extern "C" fn(*mut c_int) -> CuResult;
/// `cuDeviceGetAttribute`: out value, attribute, device.
pub type FnDeviceGetAttribute = unsafe extern "C" fn(*mut c_int, c_int, CuDevice) -> CuResult;
/// `cuMemGetHandleForAddressRange`: out handle, address, size, handle type, flags.
pub type FnMemGetHandleForAddressRange =
    unsafe extern "C" fn(*mut c_void, CuDevicePtr, usize, c_int, u64) -> CuResult;
/// `cuCtxGetCurrent`.
pub type FnCtxGetCurrent = unsafe extern "C" fn(*mut CuContext) -> CuResult;
/// `cuCtxSetCurrent`.
pub type FnCtxSetCurrent = unsafe extern "C" fn(CuContext) -> CuResult;
/// `cuDevicePrimaryCtxRetain`.
pub type FnDevicePrimaryCtxRetain = unsafe extern "C" fn(*mut CuContext, CuDevice) -> CuResult;
/// `cuDevicePrimaryCtxRelease`.
pub type FnDevicePrimaryCtxRelease = unsafe extern "C" fn(CuDevice) -> CuResult;
/// `cuPointerGetAttribute`: out value, attribute, pointer.
pub type FnPointerGetAttribute = unsafe extern "C" fn(*mut c_void, c_int, CuDevicePtr) -> CuResult;
/// `cuGetErrorName` / `cuGetErrorString`.
pub type FnGetErrorText = unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult;

/// `CUmemGenericAllocationHandle`: a physical allocation made by `cuMemCreate`.
pub type CuMemHandle = u64;

/// `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`: `cuMemExportToShareableHandle` writes an `int` fd.
pub const MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: c_int = 1;
/// `CU_MEM_LOCATION_TYPE_DEVICE`.
pub const MEM_LOCATION_TYPE_DEVICE: c_int = 1;
/// The oldest CUDA version (`cuDriverGetVersion` encoding) with every entry point the Vulkan
/// backend calls: `cuDeviceGetUuid_v2` came with CUDA 11.4, the VMM calls before it.
pub const MIN_VMM_EXPORT_VERSION: c_int = 11040;
/// The CUDA version whose `cuda.h` declares the signatures in this file: entry points are
/// asked for at this version, or at the driver's own where that is older.
pub const API_VERSION: c_int = MIN_DMABUF_MMAP_VERSION;

/// `CUmemLocation`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemLocation {
    /// `CUmemLocationType`.
    pub kind: c_int,
    /// The device ordinal for [`MEM_LOCATION_TYPE_DEVICE`].
    pub id: c_int,
}

/// `CUmemAllocationProp` (32 bytes on LP64).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemAllocationProp {
    /// `CUmemAllocationType`.
    pub kind: c_int,
    /// `CUmemAllocationHandleType` bits the allocation can be exported as.
    pub requested_handle_types: c_int,
    /// Where the memory lives.
    pub location: MemLocation,
    /// Windows only.
    pub win32_handle_meta_data: *mut c_void,
    /// `allocFlags`: compression type, GPUDirect RDMA capable, usage, reserved.
    pub alloc_flags: [u8; 8],
}

impl Default for MemAllocationProp {
    fn default() -> Self {
        MemAllocationProp {
            kind: 0,
            requested_handle_types: 0,
            location: MemLocation::default(),
            win32_handle_meta_data: std::ptr::null_mut(),
            alloc_flags: [0; 8],
        }
    }
}

/// `cuMemRetainAllocationHandle`: out handle, any address inside a `cuMemMap`'d range.
pub type FnMemRetainAllocationHandle =
    unsafe extern "C" fn(*mut CuMemHandle, *mut c_void) -> CuResult;
/// `cuMemGetAllocationPropertiesFromHandle`.
pub type FnMemGetAllocationPropertiesFromHandle =
    unsafe extern "C" fn(*mut MemAllocationProp, CuMemHandle) -> CuResult;
/// `cuMemExportToShareableHandle`: out handle, allocation, handle type, flags.
pub type FnMemExportToShareableHandle =
    unsafe extern "C" fn(*mut c_void, CuMemHandle, c_int, u64) -> CuResult;
/// `cuMemRelease`.
pub type FnMemRelease = unsafe extern "C" fn(CuMemHandle) -> CuResult;
/// `cuMemGetAddressRange_v2`: out base, out size, an address inside the range.
pub type FnMemGetAddressRange =
    unsafe extern "C" fn(*mut CuDevicePtr, *mut usize, CuDevicePtr) -> CuResult;
/// `cuDeviceGetUuid_v2`: the 16-byte UUID Vulkan reports as `deviceUUID`.
pub type FnDeviceGetUuid = unsafe extern "C" fn(*mut [u8; 16], CuDevice) -> CuResult;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn allocation_properties_have_cuda_h_layout() {
        assert_eq!(size_of::<MemAllocationProp>(), 32);
        assert_eq!(offset_of!(MemAllocationProp, requested_handle_types), 4);
        assert_eq!(offset_of!(MemAllocationProp, location), 8);
        assert_eq!(offset_of!(MemAllocationProp, win32_handle_meta_data), 16);
        assert_eq!(offset_of!(MemAllocationProp, alloc_flags), 24);
    }
}
