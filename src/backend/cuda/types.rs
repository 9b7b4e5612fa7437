//! The CUDA driver API as the library's backends call it: the declarations of
//! `gdrapi_abi::cuda` they use (re-exported), the prototypes of the entry points they resolve
//! (`pfn`), and the driver versions they require. Nothing here links against libcuda.

use std::ffi::c_int;

pub use gdrapi_abi::cuda::{
    attr, pfn, status, CUcontext, CUdevice, CUdeviceptr, CUmemGenericAllocationHandle, CUresult,
    MemAllocationProp, MemLocation, GET_PROC_ADDRESS_DEFAULT,
    MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, MEM_LOCATION_TYPE_DEVICE,
    MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE, MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
    POINTER_ATTRIBUTE_DEVICE_ORDINAL,
};

/// The oldest CUDA version (`cuDriverGetVersion` encoding) the DMA-BUF backend works with:
/// the first with CPU-mappable dma-buf exports, 13.3.
pub const MIN_DMABUF_MMAP_VERSION: c_int = gdrapi_abi::cuda::VERSION_WITH_DMA_BUF_MMAP;

/// The oldest CUDA version (`cuDriverGetVersion` encoding) with every entry point the Vulkan
/// backend calls: `cuDeviceGetUuid_v2` came with CUDA 11.4, the VMM calls before it.
pub const MIN_VMM_EXPORT_VERSION: c_int = gdrapi_abi::cuda::VERSION_WITH_DEVICE_GET_UUID_V2;
/// The CUDA version whose `cuda.h` declares the signatures of `pfn`: entry points are
/// asked for at this version, or at the driver's own where that is older.
pub const API_VERSION: c_int = MIN_DMABUF_MMAP_VERSION;
