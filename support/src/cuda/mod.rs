//! The CUDA driver API as its callers in this workspace see it, written from `cuda.h` (LP64
//! layouts): types, the constants and structures used, every function's prototype as an
//! [`Entry`](crate::dl::Entry) (module [`fns`]), the loaded driver ([`Driver`]) and a primary
//! context on it with device and host memory ([`Cuda`]).
//!
//! The emulator exports functions of these names itself; it takes its types from here and
//! uses [`fns`] for the real driver behind its Vulkan backing.
//!
//! Hand-written rather than `cudarc`'s bindings: those type `CUresult` as a Rust enum, for which
//! a code the enum does not list (any newer driver's, or an emulator's) is undefined behaviour,
//! and they tie the build to one CUDA version.

#![allow(non_camel_case_types)]

mod context;

pub use context::{Cuda, DeviceMemory, HostMemory, Imported};

use crate::dl::{DlError, Library};
use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};

/// `CUresult`: 0 is success.
pub type CUresult = c_int;
/// `CUdevice`: a device ordinal's handle.
pub type CUdevice = c_int;
/// `CUdeviceptr`.
pub type CUdeviceptr = c_ulonglong;
/// `CUcontext` (opaque).
pub type CUcontext = *mut c_void;
/// `CUstream` (opaque).
pub type CUstream = *mut c_void;
/// `CUexternalMemory` (opaque).
pub type CUexternalMemory = *mut c_void;
/// `CUmemGenericAllocationHandle`.
pub type CUmemGenericAllocationHandle = c_ulonglong;
/// `CUuuid`.
pub type CUuuid = [u8; 16];

/// The soname of the driver.
pub const LIBCUDA: &str = "libcuda.so.1";

/// `CUresult` values named in this workspace (`CUDA_SUCCESS`, `CUDA_ERROR_*`).
pub mod status {
    use super::CUresult;
    /// `CUDA_SUCCESS`.
    pub const SUCCESS: CUresult = 0;
    /// An argument is out of range or a pointer is NULL.
    pub const INVALID_VALUE: CUresult = 1;
    /// Out of device (or pinned host) memory.
    pub const OUT_OF_MEMORY: CUresult = 2;
    /// `cuInit` has not run.
    pub const NOT_INITIALIZED: CUresult = 3;
    /// No CUDA device.
    pub const NO_DEVICE: CUresult = 100;
    /// Ordinal out of range.
    pub const INVALID_DEVICE: CUresult = 101;
    /// No current context, or an unknown one.
    pub const INVALID_CONTEXT: CUresult = 201;
    /// An unknown handle.
    pub const INVALID_HANDLE: CUresult = 400;
    /// A name or symbol was not found.
    pub const NOT_FOUND: CUresult = 500;
    /// The operation is not supported on this device or platform.
    pub const NOT_SUPPORTED: CUresult = 801;
    /// An unknown internal error.
    pub const UNKNOWN: CUresult = 999;
}

/// `CUdevice_attribute` values named in this workspace.
pub mod attr {
    use std::ffi::c_int;
    /// `CU_DEVICE_ATTRIBUTE_PCI_BUS_ID`.
    pub const PCI_BUS_ID: c_int = 33;
    /// `CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID`.
    pub const PCI_DEVICE_ID: c_int = 34;
    /// `CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID`.
    pub const PCI_DOMAIN_ID: c_int = 50;
    /// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED`.
    pub const GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED: c_int = 110;
    /// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED`.
    pub const GPU_DIRECT_RDMA_SUPPORTED: c_int = 116;
    /// `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`.
    pub const DMA_BUF_SUPPORTED: c_int = 124;
}

/// `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS`.
pub const POINTER_ATTRIBUTE_SYNC_MEMOPS: c_int = 6;
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
/// `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`: a VMM allocation exportable as a file descriptor.
pub const MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: c_int = 1;
/// `CU_MEM_ALLOC_GRANULARITY_RECOMMENDED`.
pub const MEM_ALLOC_GRANULARITY_RECOMMENDED: c_int = 1;

/// `CUmemLocation`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MemLocation {
    /// `CUmemLocationType` ([`MEM_LOCATION_TYPE_DEVICE`]).
    pub kind: c_int,
    /// Device ordinal.
    pub id: c_int,
}

/// `CUmemAllocationProp` (32 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemAllocationProp {
    /// `CUmemAllocationType` ([`MEM_ALLOCATION_TYPE_PINNED`]).
    pub kind: c_int,
    /// `CUmemAllocationHandleType`.
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

/// The driver functions called in this workspace, each its exported name and `cuda.h`'s
/// prototype (resolve with [`Library::get`]).
pub mod fns {
    use super::*;

    crate::entries! {
        cuInit = fn(c_uint) -> CUresult;
        cuDriverGetVersion = fn(*mut c_int) -> CUresult;
        cuGetErrorName = fn(CUresult, *mut *const c_char) -> CUresult;
        cuDeviceGetCount = fn(*mut c_int) -> CUresult;
        cuDeviceGet = fn(*mut CUdevice, c_int) -> CUresult;
        cuDeviceGetName = fn(*mut c_char, c_int, CUdevice) -> CUresult;
        cuDeviceGetAttribute = fn(*mut c_int, c_int, CUdevice) -> CUresult;
        cuDeviceGetUuid = fn(*mut CUuuid, CUdevice) -> CUresult;
        cuDeviceGetUuid_v2 = fn(*mut CUuuid, CUdevice) -> CUresult;
        cuDevicePrimaryCtxRetain = fn(*mut CUcontext, CUdevice) -> CUresult;
        cuDevicePrimaryCtxRelease = fn(CUdevice) -> CUresult;
        cuDevicePrimaryCtxRelease_v2 = fn(CUdevice) -> CUresult;
        cuCtxGetCurrent = fn(*mut CUcontext) -> CUresult;
        cuCtxSetCurrent = fn(CUcontext) -> CUresult;
        cuCtxSynchronize = fn() -> CUresult;
        cuGetProcAddress = fn(*const c_char, *mut *mut c_void, c_int, u64) -> CUresult;
        cuGetProcAddress_v2 = fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> CUresult;
        cuMemAlloc_v2 = fn(*mut CUdeviceptr, usize) -> CUresult;
        cuMemFree_v2 = fn(CUdeviceptr) -> CUresult;
        cuMemAllocHost_v2 = fn(*mut *mut c_void, usize) -> CUresult;
        cuMemHostAlloc = fn(*mut *mut c_void, usize, c_uint) -> CUresult;
        cuMemFreeHost = fn(*mut c_void) -> CUresult;
        cuMemHostGetDevicePointer_v2 = fn(*mut CUdeviceptr, *mut c_void, c_uint) -> CUresult;
        cuMemcpy = fn(CUdeviceptr, CUdeviceptr, usize) -> CUresult;
        cuMemcpyHtoD_v2 = fn(CUdeviceptr, *const c_void, usize) -> CUresult;
        cuMemcpyDtoH_v2 = fn(*mut c_void, CUdeviceptr, usize) -> CUresult;
        cuMemsetD8_v2 = fn(CUdeviceptr, u8, usize) -> CUresult;
        cuPointerSetAttribute = fn(*const c_void, c_int, CUdeviceptr) -> CUresult;
        cuMemGetAllocationGranularity = fn(*mut usize, *const MemAllocationProp, c_int) -> CUresult;
        cuMemAddressReserve = fn(*mut CUdeviceptr, usize, usize, CUdeviceptr, u64) -> CUresult;
        cuMemAddressFree = fn(CUdeviceptr, usize) -> CUresult;
        cuMemCreate = fn(*mut CUmemGenericAllocationHandle, usize, *const MemAllocationProp, u64) -> CUresult;
        cuMemRelease = fn(CUmemGenericAllocationHandle) -> CUresult;
        cuMemMap = fn(CUdeviceptr, usize, usize, CUmemGenericAllocationHandle, u64) -> CUresult;
        cuMemUnmap = fn(CUdeviceptr, usize) -> CUresult;
        cuMemSetAccess = fn(CUdeviceptr, usize, *const MemAccessDesc, usize) -> CUresult;
        cuImportExternalMemory = fn(*mut CUexternalMemory, *const ExternalMemoryHandleDesc) -> CUresult;
        cuExternalMemoryGetMappedBuffer = fn(*mut CUdeviceptr, CUexternalMemory, *const ExternalMemoryBufferDesc) -> CUresult;
        cuDestroyExternalMemory = fn(CUexternalMemory) -> CUresult;
    }
}

/// The driver loaded, with the functions every caller needs resolved; the others are
/// resolved on use ([`Driver::get`]).
#[derive(Debug)]
pub struct Driver {
    lib: Library,
    /// `cuInit`.
    pub init: <fns::cuInit as crate::dl::Entry>::Fn,
    /// `cuDriverGetVersion`.
    pub driver_get_version: <fns::cuDriverGetVersion as crate::dl::Entry>::Fn,
    /// `cuDeviceGetCount`.
    pub device_get_count: <fns::cuDeviceGetCount as crate::dl::Entry>::Fn,
    /// `cuDeviceGet`.
    pub device_get: <fns::cuDeviceGet as crate::dl::Entry>::Fn,
    /// `cuDeviceGetName`.
    pub device_get_name: <fns::cuDeviceGetName as crate::dl::Entry>::Fn,
    /// `cuDeviceGetAttribute`.
    pub device_get_attribute: <fns::cuDeviceGetAttribute as crate::dl::Entry>::Fn,
    /// `cuGetErrorName`.
    pub get_error_name: <fns::cuGetErrorName as crate::dl::Entry>::Fn,
}

impl Driver {
    /// Loads the driver from `library` (a soname or a path) with `flags` of
    /// [`Library::open`] (`global` false) or [`Library::open_global`].
    pub fn load(library: &str, global: bool) -> Result<Driver, DlError> {
        let lib = if global {
            Library::open_global(library)?
        } else {
            Library::open(library)?
        };
        Ok(Driver {
            init: lib.get::<fns::cuInit>()?,
            driver_get_version: lib.get::<fns::cuDriverGetVersion>()?,
            device_get_count: lib.get::<fns::cuDeviceGetCount>()?,
            device_get: lib.get::<fns::cuDeviceGet>()?,
            device_get_name: lib.get::<fns::cuDeviceGetName>()?,
            device_get_attribute: lib.get::<fns::cuDeviceGetAttribute>()?,
            get_error_name: lib.get::<fns::cuGetErrorName>()?,
            lib,
        })
    }

    /// The library the driver was loaded from.
    pub fn library(&self) -> &Library {
        &self.lib
    }

    /// Function `E` of the driver.
    pub fn get<E: crate::dl::Entry>(&self) -> Result<E::Fn, DlError> {
        self.lib.get::<E>()
    }

    /// `cuGetErrorName(code)`, when the driver knows the code.
    pub fn error_name(&self, code: CUresult) -> Option<String> {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: `p` is a valid out-pointer; the driver stores a static string or nothing.
        let ok = unsafe { (self.get_error_name)(code, &mut p) } == status::SUCCESS;
        (ok && !p.is_null()).then(|| {
            // SAFETY: a non-NULL NUL-terminated string the driver owns for the process's life.
            unsafe { std::ffi::CStr::from_ptr(p) }
                .to_string_lossy()
                .into_owned()
        })
    }
}

/// Formats a CUDA driver version number (13030 -> "13.3").
pub fn version_string(v: c_int) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_cuda_h() {
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
    fn version_numbers_format_like_nvidia_smi() {
        assert_eq!(version_string(13030), "13.3");
        assert_eq!(version_string(12080), "12.8");
        assert_eq!(version_string(11000), "11.0");
    }

    #[test]
    fn a_library_without_the_driver_api_names_the_first_missing_function() {
        let e = Driver::load("libc.so.6", false).unwrap_err();
        assert_eq!(e.to_string(), "libc.so.6 does not export cuInit");
        let e = Driver::load("libcuda-missing-for-this-test.so.1", false).unwrap_err();
        assert!(
            e.to_string().contains("libcuda-missing-for-this-test.so.1"),
            "{e}"
        );
    }
}
