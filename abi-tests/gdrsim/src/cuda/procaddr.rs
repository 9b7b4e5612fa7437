//! `cuGetProcAddress`: hands out the emulator's functions by their base names (as `cuda.h`
//! callers ask, e.g. `cuMemAlloc` for `cuMemAlloc_v2`) or by their exported names.

use super::legacy::*;
use super::*;
use std::ffi::CStr;

/// (name asked for, function).
fn table() -> Vec<(&'static str, usize)> {
    macro_rules! t {
        ($($name:literal => $f:expr),* $(,)?) => { vec![$(($name, $f as usize)),*] };
    }
    t![
        "cuInit" => cuInit as extern "C" fn(c_uint) -> CUresult,
        "cuDriverGetVersion" => cuDriverGetVersion as extern "C" fn(*mut c_int) -> CUresult,
        "cuDeviceGet" => cuDeviceGet as extern "C" fn(*mut CUdevice, c_int) -> CUresult,
        "cuDeviceGetCount" => cuDeviceGetCount as extern "C" fn(*mut c_int) -> CUresult,
        "cuDeviceGetName" => cuDeviceGetName as extern "C" fn(*mut c_char, c_int, CUdevice) -> CUresult,
        "cuDeviceGetAttribute" => cuDeviceGetAttribute as extern "C" fn(*mut c_int, c_int, CUdevice) -> CUresult,
        "cuDeviceTotalMem" => cuDeviceTotalMem_v2 as extern "C" fn(*mut size_t, CUdevice) -> CUresult,
        "cuDeviceTotalMem_v2" => cuDeviceTotalMem_v2 as extern "C" fn(*mut size_t, CUdevice) -> CUresult,
        "cuDevicePrimaryCtxRetain" => cuDevicePrimaryCtxRetain as extern "C" fn(*mut CUcontext, CUdevice) -> CUresult,
        "cuDevicePrimaryCtxRelease" => cuDevicePrimaryCtxRelease_v2 as extern "C" fn(CUdevice) -> CUresult,
        "cuDevicePrimaryCtxRelease_v2" => cuDevicePrimaryCtxRelease_v2 as extern "C" fn(CUdevice) -> CUresult,
        "cuCtxSetCurrent" => cuCtxSetCurrent as extern "C" fn(CUcontext) -> CUresult,
        "cuCtxGetCurrent" => cuCtxGetCurrent as extern "C" fn(*mut CUcontext) -> CUresult,
        "cuCtxGetDevice" => cuCtxGetDevice as extern "C" fn(*mut CUdevice) -> CUresult,
        "cuCtxSynchronize" => cuCtxSynchronize as extern "C" fn() -> CUresult,
        "cuStreamQuery" => cuStreamQuery as extern "C" fn(*mut c_void) -> CUresult,
        "cuStreamSynchronize" => cuStreamSynchronize as extern "C" fn(*mut c_void) -> CUresult,
        "cuGetErrorName" => cuGetErrorName as extern "C" fn(CUresult, *mut *const c_char) -> CUresult,
        "cuGetErrorString" => cuGetErrorString as extern "C" fn(CUresult, *mut *const c_char) -> CUresult,
        "cuMemAlloc" => cuMemAlloc_v2 as extern "C" fn(*mut CUdeviceptr, size_t) -> CUresult,
        "cuMemAlloc_v2" => cuMemAlloc_v2 as extern "C" fn(*mut CUdeviceptr, size_t) -> CUresult,
        "cuMemFree" => cuMemFree_v2 as extern "C" fn(CUdeviceptr) -> CUresult,
        "cuMemFree_v2" => cuMemFree_v2 as extern "C" fn(CUdeviceptr) -> CUresult,
        "cuMemGetInfo" => cuMemGetInfo as extern "C" fn(*mut size_t, *mut size_t) -> CUresult,
        "cuMemGetAddressRange" => cuMemGetAddressRange_v2 as extern "C" fn(*mut CUdeviceptr, *mut size_t, CUdeviceptr) -> CUresult,
        "cuMemAllocHost" => cuMemAllocHost as extern "C" fn(*mut *mut c_void, size_t) -> CUresult,
        "cuMemHostAlloc" => cuMemHostAlloc as extern "C" fn(*mut *mut c_void, size_t, c_uint) -> CUresult,
        "cuMemFreeHost" => cuMemFreeHost as extern "C" fn(*mut c_void) -> CUresult,
        "cuMemHostGetDevicePointer" => cuMemHostGetDevicePointer as extern "C" fn(*mut CUdeviceptr, *mut c_void, c_uint) -> CUresult,
        "cuMemcpy" => cuMemcpy as extern "C" fn(CUdeviceptr, CUdeviceptr, size_t) -> CUresult,
        "cuMemcpyHtoD" => cuMemcpyHtoD as extern "C" fn(CUdeviceptr, *const c_void, size_t) -> CUresult,
        "cuMemcpyDtoH" => cuMemcpyDtoH as extern "C" fn(*mut c_void, CUdeviceptr, size_t) -> CUresult,
        "cuMemcpyDtoD" => cuMemcpyDtoD_v2 as extern "C" fn(CUdeviceptr, CUdeviceptr, size_t) -> CUresult,
        "cuMemsetD8" => cuMemsetD8 as extern "C" fn(CUdeviceptr, u8, size_t) -> CUresult,
        "cuMemsetD32" => cuMemsetD32_v2 as extern "C" fn(CUdeviceptr, c_uint, size_t) -> CUresult,
        "cuPointerGetAttribute" => cuPointerGetAttribute as extern "C" fn(*mut c_void, c_int, CUdeviceptr) -> CUresult,
        "cuPointerSetAttribute" => cuPointerSetAttribute as extern "C" fn(*const c_void, c_int, CUdeviceptr) -> CUresult,
        "cuMemGetAllocationGranularity" => cuMemGetAllocationGranularity as extern "C" fn(*mut size_t, *const MemAllocationProp, c_int) -> CUresult,
        "cuMemCreate" => cuMemCreate as extern "C" fn(*mut u64, size_t, *const MemAllocationProp, c_ulonglong) -> CUresult,
        "cuMemRelease" => cuMemRelease as extern "C" fn(u64) -> CUresult,
        "cuMemAddressReserve" => cuMemAddressReserve as extern "C" fn(*mut CUdeviceptr, size_t, size_t, CUdeviceptr, c_ulonglong) -> CUresult,
        "cuMemAddressFree" => cuMemAddressFree as extern "C" fn(CUdeviceptr, size_t) -> CUresult,
        "cuMemMap" => cuMemMap as extern "C" fn(CUdeviceptr, size_t, size_t, u64, c_ulonglong) -> CUresult,
        "cuMemUnmap" => cuMemUnmap as extern "C" fn(CUdeviceptr, size_t) -> CUresult,
        "cuMemSetAccess" => cuMemSetAccess as extern "C" fn(CUdeviceptr, size_t, *const MemAccessDesc, size_t) -> CUresult,
        "cuMemGetHandleForAddressRange" => cuMemGetHandleForAddressRange as extern "C" fn(*mut c_void, CUdeviceptr, size_t, c_int, c_ulonglong) -> CUresult,
        "cuGetProcAddress" => cuGetProcAddress_v2 as extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> CUresult,
        "cuGetProcAddress_v2" => cuGetProcAddress_v2 as extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> CUresult,
    ]
}

/// The function a caller gets for `name`, if the emulator has it.
pub fn find(name: &str) -> Option<usize> {
    table()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| f)
}

/// Body of both `cuGetProcAddress` entry points; `status` may be NULL.
pub fn lookup(
    entry_name: &str,
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    _version: c_int,
    flags: u64,
    status: *mut c_int,
) -> CUresult {
    entry(entry_name, || {
        if symbol.is_null() || pfn.is_null() || flags > 2 {
            return Err(cu::INVALID_VALUE);
        }
        // SAFETY: symbol is a non-NULL NUL-terminated name from the caller.
        let name = unsafe { CStr::from_ptr(symbol) }.to_str().unwrap_or("");
        let f = find(name);
        // SAFETY: pfn is non-NULL (checked above).
        unsafe { *pfn = f.map_or(std::ptr::null_mut(), |p| p as *mut c_void) };
        if !status.is_null() {
            // SAFETY: a non-NULL CUdriverProcAddressQueryResult out-pointer (0 success,
            // 1 symbol not found).
            unsafe { *status = if f.is_some() { 0 } else { 1 } };
        }
        f.map(|_| ()).ok_or(cu::NOT_FOUND)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_dmabuf_backend_functions() {
        for n in [
            "cuInit",
            "cuDeviceGet",
            "cuDeviceGetCount",
            "cuDeviceGetAttribute",
            "cuMemGetHandleForAddressRange",
            "cuCtxGetCurrent",
            "cuCtxSetCurrent",
            "cuDevicePrimaryCtxRetain",
            "cuDevicePrimaryCtxRelease",
            "cuPointerGetAttribute",
            "cuGetErrorString",
            "cuGetErrorName",
        ] {
            assert!(find(n).is_some(), "{n}");
        }
        assert!(find("cuNoSuchThing").is_none());
    }
}
