//! `cuGetProcAddress`: hands out the emulator's functions by their base names (as `cuda.h`
//! callers ask, e.g. `cuMemAlloc` for `cuMemAlloc_v2`) or by their exported names.

use super::context::*;
use super::device::*;
use super::dmabuf::*;
use super::events::*;
use super::ipc::*;
use super::legacy::*;
use super::managed::*;
use super::memory::*;
use super::pointer::*;
use super::vmm::*;
use super::*;
use std::ffi::CStr;

/// `cuGetProcAddress` (the 4-argument ABI; a fifth argument is ignored).
///
/// # Safety
///
/// `cuda.h`'s contract for `cuGetProcAddress`: `symbol` is NULL or a NUL-terminated string;
/// `pfn` is NULL or writable for one pointer.
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
) -> CUresult {
    guarded("cuGetProcAddress", || {
        // SAFETY: the caller's pointers, under the same contract; no status pointer.
        unsafe {
            procaddr::lookup(
                "cuGetProcAddress",
                symbol,
                pfn,
                version,
                flags,
                std::ptr::null_mut(),
            )
        }
    })
}

/// `cuGetProcAddress_v2` (with the symbol status out-parameter).
///
/// # Safety
///
/// `cuda.h`'s contract for `cuGetProcAddress_v2`: `symbol` is NULL or a NUL-terminated string;
/// `pfn` is NULL or writable for one pointer; `status` is NULL or writable for one `c_int`.
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut c_int,
) -> CUresult {
    guarded("cuGetProcAddress_v2", || {
        // SAFETY: the caller's pointers, under the same contract.
        unsafe { procaddr::lookup("cuGetProcAddress_v2", symbol, pfn, version, flags, status) }
    })
}

/// (name asked for, function).
fn table() -> Vec<(&'static str, usize)> {
    macro_rules! t {
        ($($name:literal => $f:expr),* $(,)?) => { vec![$(($name, $f)),*] };
    }
    t![
        "cuInit" => cuInit as *const () as usize,
        "cuDriverGetVersion" => cuDriverGetVersion as *const () as usize,
        "cuDeviceGet" => cuDeviceGet as *const () as usize,
        "cuDeviceGetCount" => cuDeviceGetCount as *const () as usize,
        "cuDeviceGetName" => cuDeviceGetName as *const () as usize,
        "cuDeviceGetAttribute" => cuDeviceGetAttribute as *const () as usize,
        "cuDeviceTotalMem" => cuDeviceTotalMem_v2 as *const () as usize,
        "cuDeviceTotalMem_v2" => cuDeviceTotalMem_v2 as *const () as usize,
        "cuDevicePrimaryCtxRetain" => cuDevicePrimaryCtxRetain as *const () as usize,
        "cuDevicePrimaryCtxRelease" => cuDevicePrimaryCtxRelease_v2 as *const () as usize,
        "cuDevicePrimaryCtxRelease_v2" => cuDevicePrimaryCtxRelease_v2 as *const () as usize,
        "cuDevicePrimaryCtxGetState" => cuDevicePrimaryCtxGetState as *const () as usize,
        "cuDeviceGetPCIBusId" => cuDeviceGetPCIBusId as *const () as usize,
        "cuDeviceGetUuid" => cuDeviceGetUuid_v2 as *const () as usize,
        "cuDeviceGetUuid_v2" => cuDeviceGetUuid_v2 as *const () as usize,
        "cuStreamCreate" => cuStreamCreate as *const () as usize,
        "cuStreamDestroy" => cuStreamDestroy_v2 as *const () as usize,
        "cuPointerGetAttributes" => cuPointerGetAttributes as *const () as usize,
        "cuMemcpyAsync" => cuMemcpyAsync as *const () as usize,
        "cuMemcpyHtoDAsync" => cuMemcpyHtoDAsync_v2 as *const () as usize,
        "cuMemcpyDtoHAsync" => cuMemcpyDtoHAsync_v2 as *const () as usize,
        "cuMemsetD8Async" => cuMemsetD8Async as *const () as usize,
        "cuCtxSetCurrent" => cuCtxSetCurrent as *const () as usize,
        "cuCtxGetCurrent" => cuCtxGetCurrent as *const () as usize,
        "cuCtxGetDevice" => cuCtxGetDevice as *const () as usize,
        "cuCtxSynchronize" => cuCtxSynchronize as *const () as usize,
        "cuStreamQuery" => cuStreamQuery as *const () as usize,
        "cuStreamSynchronize" => cuStreamSynchronize as *const () as usize,
        "cuGetErrorName" => cuGetErrorName as *const () as usize,
        "cuGetErrorString" => cuGetErrorString as *const () as usize,
        "cuMemAlloc" => cuMemAlloc_v2 as *const () as usize,
        "cuMemAlloc_v2" => cuMemAlloc_v2 as *const () as usize,
        "cuMemFree" => cuMemFree_v2 as *const () as usize,
        "cuMemFree_v2" => cuMemFree_v2 as *const () as usize,
        "cuMemGetInfo" => cuMemGetInfo as *const () as usize,
        "cuMemGetAddressRange" => cuMemGetAddressRange_v2 as *const () as usize,
        "cuMemAllocHost" => cuMemAllocHost as *const () as usize,
        "cuMemHostAlloc" => cuMemHostAlloc as *const () as usize,
        "cuMemFreeHost" => cuMemFreeHost as *const () as usize,
        "cuMemHostGetDevicePointer" => cuMemHostGetDevicePointer as *const () as usize,
        "cuMemcpy" => cuMemcpy as *const () as usize,
        "cuMemcpyHtoD" => cuMemcpyHtoD as *const () as usize,
        "cuMemcpyDtoH" => cuMemcpyDtoH as *const () as usize,
        "cuMemcpyDtoD" => cuMemcpyDtoD_v2 as *const () as usize,
        "cuMemsetD8" => cuMemsetD8 as *const () as usize,
        "cuMemsetD32" => cuMemsetD32_v2 as *const () as usize,
        "cuPointerGetAttribute" => cuPointerGetAttribute as *const () as usize,
        "cuPointerSetAttribute" => cuPointerSetAttribute as *const () as usize,
        "cuMemGetAllocationGranularity" => cuMemGetAllocationGranularity as *const () as usize,
        "cuMemCreate" => cuMemCreate as *const () as usize,
        "cuMemRelease" => cuMemRelease as *const () as usize,
        "cuMemAddressReserve" => cuMemAddressReserve as *const () as usize,
        "cuMemAddressFree" => cuMemAddressFree as *const () as usize,
        "cuMemMap" => cuMemMap as *const () as usize,
        "cuMemUnmap" => cuMemUnmap as *const () as usize,
        "cuMemSetAccess" => cuMemSetAccess as *const () as usize,
        "cuMemGetHandleForAddressRange" => cuMemGetHandleForAddressRange as *const () as usize,
        "cuCtxPushCurrent" => cuCtxPushCurrent_v2 as *const () as usize,
        "cuCtxPushCurrent_v2" => cuCtxPushCurrent_v2 as *const () as usize,
        "cuCtxPopCurrent" => cuCtxPopCurrent_v2 as *const () as usize,
        "cuCtxPopCurrent_v2" => cuCtxPopCurrent_v2 as *const () as usize,
        "cuCtxCreate" => cuCtxCreate_v2 as *const () as usize,
        "cuCtxCreate_v2" => cuCtxCreate_v2 as *const () as usize,
        "cuCtxDestroy" => cuCtxDestroy_v2 as *const () as usize,
        "cuCtxDestroy_v2" => cuCtxDestroy_v2 as *const () as usize,
        "cuCtxGetId" => cuCtxGetId as *const () as usize,
        "cuEventCreate" => cuEventCreate as *const () as usize,
        "cuEventDestroy" => cuEventDestroy_v2 as *const () as usize,
        "cuEventDestroy_v2" => cuEventDestroy_v2 as *const () as usize,
        "cuEventRecord" => cuEventRecord as *const () as usize,
        "cuEventQuery" => cuEventQuery as *const () as usize,
        "cuEventSynchronize" => cuEventSynchronize as *const () as usize,
        "cuStreamWaitEvent" => cuStreamWaitEvent as *const () as usize,
        "cuStreamAddCallback" => cuStreamAddCallback as *const () as usize,
        "cuLaunchHostFunc" => cuLaunchHostFunc as *const () as usize,
        "cuIpcGetMemHandle" => cuIpcGetMemHandle as *const () as usize,
        "cuIpcOpenMemHandle" => cuIpcOpenMemHandle_v2 as *const () as usize,
        "cuIpcOpenMemHandle_v2" => cuIpcOpenMemHandle_v2 as *const () as usize,
        "cuIpcCloseMemHandle" => cuIpcCloseMemHandle as *const () as usize,
        "cuMemAllocManaged" => cuMemAllocManaged as *const () as usize,
        "cuMemAllocPitch" => cuMemAllocPitch_v2 as *const () as usize,
        "cuMemAllocPitch_v2" => cuMemAllocPitch_v2 as *const () as usize,
        "cuMemHostRegister" => cuMemHostRegister_v2 as *const () as usize,
        "cuMemHostRegister_v2" => cuMemHostRegister_v2 as *const () as usize,
        "cuMemHostUnregister" => cuMemHostUnregister as *const () as usize,
        "cuMemRangeGetAttribute" => cuMemRangeGetAttribute as *const () as usize,
        "cuMemcpyDtoDAsync" => cuMemcpyDtoDAsync_v2 as *const () as usize,
        "cuMemcpyDtoDAsync_v2" => cuMemcpyDtoDAsync_v2 as *const () as usize,
        "cuMemRetainAllocationHandle" => cuMemRetainAllocationHandle as *const () as usize,
        "cuMemGetAllocationPropertiesFromHandle" => cuMemGetAllocationPropertiesFromHandle as *const () as usize,
        "cuMemExportToShareableHandle" => cuMemExportToShareableHandle as *const () as usize,
        "cuMemImportFromShareableHandle" => cuMemImportFromShareableHandle as *const () as usize,
        "cuMemPoolDestroy" => cuMemPoolDestroy as *const () as usize,
        "cuMemPoolSetAccess" => cuMemPoolSetAccess as *const () as usize,
        "cuMemPoolExportPointer" => cuMemPoolExportPointer as *const () as usize,
        "cuMemPoolImportPointer" => cuMemPoolImportPointer as *const () as usize,
        "cuMemPoolExportToShareableHandle" => cuMemPoolExportToShareableHandle as *const () as usize,
        "cuMemPoolImportFromShareableHandle" => cuMemPoolImportFromShareableHandle as *const () as usize,
        "cuGetProcAddress" => cuGetProcAddress_v2 as *const () as usize,
        "cuGetProcAddress_v2" => cuGetProcAddress_v2 as *const () as usize,
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
///
/// # Safety
///
/// `symbol` must be NULL or a NUL-terminated string; `pfn` and `status` NULL or writable.
pub unsafe fn lookup(
    entry_name: &'static str,
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    _version: c_int,
    flags: u64,
    status: *mut c_int,
) -> CUresult {
    // SAFETY: the caller's pointers, under the same contract.
    if let Some(r) = unsafe {
        crate::vulkan::get_proc_address(entry_name, symbol, pfn, _version, flags, status, find)
    } {
        return r;
    }
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
