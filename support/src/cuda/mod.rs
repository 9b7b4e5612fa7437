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
use std::ffi::{c_char, c_int};

pub use gdrapi_abi::cuda::*;

/// The driver functions called in this workspace, each its exported name and `cuda.h`'s
/// prototype, `gdrapi_abi::cuda::pfn`'s (resolve with [`Library::get`]).
pub mod fns {
    use super::*;

    crate::entries! {
        cuInit: pfn::cuInit;
        cuDriverGetVersion: pfn::cuDriverGetVersion;
        cuGetErrorName: pfn::cuGetErrorName;
        cuDeviceGetCount: pfn::cuDeviceGetCount;
        cuDeviceGet: pfn::cuDeviceGet;
        cuDeviceGetName: pfn::cuDeviceGetName;
        cuDeviceGetAttribute: pfn::cuDeviceGetAttribute;
        cuDeviceGetUuid: pfn::cuDeviceGetUuid;
        cuDeviceGetUuid_v2: pfn::cuDeviceGetUuid_v2;
        cuDevicePrimaryCtxRetain: pfn::cuDevicePrimaryCtxRetain;
        cuDevicePrimaryCtxRelease: pfn::cuDevicePrimaryCtxRelease;
        cuDevicePrimaryCtxRelease_v2: pfn::cuDevicePrimaryCtxRelease_v2;
        cuCtxGetCurrent: pfn::cuCtxGetCurrent;
        cuCtxSetCurrent: pfn::cuCtxSetCurrent;
        cuCtxSynchronize: pfn::cuCtxSynchronize;
        cuGetProcAddress: pfn::cuGetProcAddress;
        cuGetProcAddress_v2: pfn::cuGetProcAddress_v2;
        cuMemAlloc_v2: pfn::cuMemAlloc_v2;
        cuMemFree_v2: pfn::cuMemFree_v2;
        cuMemAllocHost_v2: pfn::cuMemAllocHost_v2;
        cuMemHostAlloc: pfn::cuMemHostAlloc;
        cuMemFreeHost: pfn::cuMemFreeHost;
        cuMemHostGetDevicePointer_v2: pfn::cuMemHostGetDevicePointer_v2;
        cuMemcpy: pfn::cuMemcpy;
        cuMemcpyHtoD_v2: pfn::cuMemcpyHtoD_v2;
        cuMemcpyDtoH_v2: pfn::cuMemcpyDtoH_v2;
        cuMemsetD8_v2: pfn::cuMemsetD8_v2;
        cuPointerSetAttribute: pfn::cuPointerSetAttribute;
        cuMemGetAllocationGranularity: pfn::cuMemGetAllocationGranularity;
        cuMemAddressReserve: pfn::cuMemAddressReserve;
        cuMemAddressFree: pfn::cuMemAddressFree;
        cuMemCreate: pfn::cuMemCreate;
        cuMemRelease: pfn::cuMemRelease;
        cuMemMap: pfn::cuMemMap;
        cuMemUnmap: pfn::cuMemUnmap;
        cuMemSetAccess: pfn::cuMemSetAccess;
        cuImportExternalMemory: pfn::cuImportExternalMemory;
        cuExternalMemoryGetMappedBuffer: pfn::cuExternalMemoryGetMappedBuffer;
        cuDestroyExternalMemory: pfn::cuDestroyExternalMemory;
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
