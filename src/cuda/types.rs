//! The few CUDA driver API types and constants the library uses, with the values of `cuda.h`.
//! Only what the DMA-BUF backend needs; nothing here links against libcuda.

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
