//! The old unversioned names of the `_v2` functions, which old binaries link against.

use super::device::*;
use super::memory::*;
use super::*;

/// `cuMemAlloc` (pre-3.2 ABI name).
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemAlloc`: `dptr` is NULL or writable for one `CUdeviceptr`.
#[no_mangle]
pub unsafe extern "C" fn cuMemAlloc(dptr: *mut CUdeviceptr, size: size_t) -> CUresult {
    // SAFETY: same contract as this function, passed through unchanged.
    unsafe { cuMemAlloc_v2(dptr, size) }
}

/// `cuMemFree`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemFree`; no argument is dereferenced, so every value is accepted.
#[no_mangle]
pub unsafe extern "C" fn cuMemFree(dptr: CUdeviceptr) -> CUresult {
    // SAFETY: same contract as this function, passed through unchanged.
    unsafe { cuMemFree_v2(dptr) }
}

/// `cuMemAllocHost`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemAllocHost`: `pp` is NULL or writable for one pointer.
#[no_mangle]
pub unsafe extern "C" fn cuMemAllocHost(pp: *mut *mut c_void, size: size_t) -> CUresult {
    // SAFETY: same contract as this function, passed through unchanged.
    unsafe { cuMemAllocHost_v2(pp, size) }
}

/// `cuMemcpyHtoD`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemcpyHtoD`: `src` is valid for every byte the call reads through
/// it.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyHtoD(dst: CUdeviceptr, src: *const c_void, n: size_t) -> CUresult {
    // SAFETY: same contract as this function, passed through unchanged.
    unsafe { cuMemcpyHtoD_v2(dst, src, n) }
}

/// `cuMemcpyDtoH`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemcpyDtoH`: `dst` is valid for every byte the call writes
/// through it.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoH(dst: *mut c_void, src: CUdeviceptr, n: size_t) -> CUresult {
    // SAFETY: same contract as this function, passed through unchanged.
    unsafe { cuMemcpyDtoH_v2(dst, src, n) }
}

/// `cuMemsetD8`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemsetD8`; no argument is dereferenced, so every value is accepted.
#[no_mangle]
pub unsafe extern "C" fn cuMemsetD8(dst: CUdeviceptr, v: u8, n: size_t) -> CUresult {
    // SAFETY: same contract as this function, passed through unchanged.
    unsafe { cuMemsetD8_v2(dst, v, n) }
}

/// `cuMemHostGetDevicePointer`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemHostGetDevicePointer`: `dptr` is NULL or writable for one
/// `CUdeviceptr`; `p` is only looked up, not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuMemHostGetDevicePointer(
    dptr: *mut CUdeviceptr,
    p: *mut c_void,
    flags: c_uint,
) -> CUresult {
    // SAFETY: same contract as this function, passed through unchanged.
    unsafe { cuMemHostGetDevicePointer_v2(dptr, p, flags) }
}

/// `cuDeviceTotalMem`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuDeviceTotalMem`: `bytes` is NULL or writable for one `size_t`.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceTotalMem(bytes: *mut size_t, dev: CUdevice) -> CUresult {
    // SAFETY: same contract as this function, passed through unchanged.
    unsafe { cuDeviceTotalMem_v2(bytes, dev) }
}

/// `cuMemGetInfo`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemGetInfo`: `free` is NULL or writable for one `size_t`; `total`
/// is NULL or writable for one `size_t`.
#[no_mangle]
pub unsafe extern "C" fn cuMemGetInfo(free: *mut size_t, total: *mut size_t) -> CUresult {
    // SAFETY: same contract as this function, passed through unchanged.
    unsafe { cuMemGetInfo_v2(free, total) }
}
