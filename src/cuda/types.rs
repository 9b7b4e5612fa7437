//! The CUDA driver API as the library's backends call it: the declarations of
//! `gdrapi_abi::cuda` they use (re-exported), the prototypes of the entry points they resolve,
//! and the driver versions they require. Nothing here links against libcuda.

use std::ffi::{c_char, c_int, c_uint, c_void};

pub use gdrapi_abi::cuda::{
    attr, status, CUcontext, CUdevice, CUdeviceptr, CUmemGenericAllocationHandle, CUresult,
    MemAllocationProp, MemLocation, GET_PROC_ADDRESS_DEFAULT,
    MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, MEM_LOCATION_TYPE_DEVICE,
    MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE, MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
    POINTER_ATTRIBUTE_DEVICE_ORDINAL,
};

/// The oldest CUDA version (`cuDriverGetVersion` encoding) the DMA-BUF backend works with:
/// the first with CPU-mappable dma-buf exports, 13.3.
pub const MIN_DMABUF_MMAP_VERSION: c_int = gdrapi_abi::cuda::VERSION_WITH_DMA_BUF_MMAP;

/// `cuDriverGetVersion`.
pub type FnDriverGetVersion = unsafe extern "C" fn(*mut c_int) -> CUresult;
/// `cuGetProcAddress_v2` (CUDA >= 12.0): symbol, out pointer, version, flags, out status.
pub type FnGetProcAddressV2 =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> CUresult;
/// The legacy `cuGetProcAddress` (CUDA 11.3 to 11.8): symbol, out pointer, version, flags.
pub type FnGetProcAddressV1 =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> CUresult;
/// `cuInit`.
pub type FnInit = unsafe extern "C" fn(c_uint) -> CUresult;
/// `cuDeviceGet`.
pub type FnDeviceGet = unsafe extern "C" fn(*mut CUdevice, c_int) -> CUresult;
/// `cuDeviceGetCount`.
pub type FnDeviceGetCount = unsafe extern "C" fn(*mut c_int) -> CUresult;
/// `cuDeviceGetAttribute`: out value, attribute, device.
pub type FnDeviceGetAttribute = unsafe extern "C" fn(*mut c_int, c_int, CUdevice) -> CUresult;
/// `cuMemGetHandleForAddressRange`: out handle, address, size, handle type, flags.
pub type FnMemGetHandleForAddressRange =
    unsafe extern "C" fn(*mut c_void, CUdeviceptr, usize, c_int, u64) -> CUresult;
/// `cuCtxGetCurrent`.
pub type FnCtxGetCurrent = unsafe extern "C" fn(*mut CUcontext) -> CUresult;
/// `cuCtxSetCurrent`.
pub type FnCtxSetCurrent = unsafe extern "C" fn(CUcontext) -> CUresult;
/// `cuDevicePrimaryCtxRetain`.
pub type FnDevicePrimaryCtxRetain = unsafe extern "C" fn(*mut CUcontext, CUdevice) -> CUresult;
/// `cuDevicePrimaryCtxRelease`.
pub type FnDevicePrimaryCtxRelease = unsafe extern "C" fn(CUdevice) -> CUresult;
/// `cuPointerGetAttribute`: out value, attribute, pointer.
pub type FnPointerGetAttribute = unsafe extern "C" fn(*mut c_void, c_int, CUdeviceptr) -> CUresult;
/// `cuGetErrorName` / `cuGetErrorString`.
pub type FnGetErrorText = unsafe extern "C" fn(CUresult, *mut *const c_char) -> CUresult;

/// The oldest CUDA version (`cuDriverGetVersion` encoding) with every entry point the Vulkan
/// backend calls: `cuDeviceGetUuid_v2` came with CUDA 11.4, the VMM calls before it.
pub const MIN_VMM_EXPORT_VERSION: c_int = gdrapi_abi::cuda::VERSION_WITH_DEVICE_GET_UUID_V2;
/// The CUDA version whose `cuda.h` declares the signatures in this file: entry points are
/// asked for at this version, or at the driver's own where that is older.
pub const API_VERSION: c_int = MIN_DMABUF_MMAP_VERSION;

/// `cuMemRetainAllocationHandle`: out handle, any address inside a `cuMemMap`'d range.
pub type FnMemRetainAllocationHandle =
    unsafe extern "C" fn(*mut CUmemGenericAllocationHandle, *mut c_void) -> CUresult;
/// `cuMemGetAllocationPropertiesFromHandle`.
pub type FnMemGetAllocationPropertiesFromHandle =
    unsafe extern "C" fn(*mut MemAllocationProp, CUmemGenericAllocationHandle) -> CUresult;
/// `cuMemExportToShareableHandle`: out handle, allocation, handle type, flags.
pub type FnMemExportToShareableHandle =
    unsafe extern "C" fn(*mut c_void, CUmemGenericAllocationHandle, c_int, u64) -> CUresult;
/// `cuMemRelease`.
pub type FnMemRelease = unsafe extern "C" fn(CUmemGenericAllocationHandle) -> CUresult;
/// `cuMemGetAddressRange_v2`: out base, out size, an address inside the range.
pub type FnMemGetAddressRange =
    unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, CUdeviceptr) -> CUresult;
/// `cuDeviceGetUuid_v2`: the 16-byte UUID Vulkan reports as `deviceUUID`.
pub type FnDeviceGetUuid = unsafe extern "C" fn(*mut [u8; 16], CUdevice) -> CUresult;
