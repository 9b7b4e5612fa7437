//! The CUDA driver API as its callers in this workspace see it: the declarations of
//! `gdrapi_abi::cuda` (types, codes, constants, structures; re-exported here), every
//! function's prototype as an [`Entry`](crate::dl::Entry) (module [`fns`]), the loaded driver
//! ([`Driver`]) and a primary context on it with device and host memory ([`Cuda`]).
//!
//! The emulator exports functions of these names itself; it uses [`fns`] for the real driver
//! behind its Vulkan backing.

#![allow(non_camel_case_types)]

mod context;

pub use context::{Cuda, DeviceMemory, HostMemory, Imported};

use crate::dl::{DlError, Library};
use std::ffi::{c_char, c_int, c_uint, c_void};

pub use gdrapi_abi::cuda::*;

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
