//! Device, managed and page-locked host memory, copies and memsets.

use crate::driver::*;
use crate::error::{self, CudaError};
use crate::with_context;
use libc::{c_int, c_uint, c_void, size_t};

/// `cudaMalloc`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaMalloc(p: *mut *mut c_void, n: size_t) -> CudaError {
    if p.is_null() {
        return error::record(error::INVALID_VALUE);
    }
    if n == 0 {
        // SAFETY: p is a non-NULL out-pointer from the caller.
        unsafe { p.write(std::ptr::null_mut()) };
        return error::SUCCESS;
    }
    // SAFETY: p is a non-NULL out-pointer for a pointer-sized value.
    with_context(|| unsafe { cuMemAlloc_v2(p.cast(), n) })
}

/// `cudaMallocManaged`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaMallocManaged(
    p: *mut *mut c_void,
    n: size_t,
    flags: c_uint,
) -> CudaError {
    if p.is_null() {
        return error::record(error::INVALID_VALUE);
    }
    // SAFETY: p is a non-NULL out-pointer for a pointer-sized value.
    with_context(|| unsafe { cuMemAllocManaged(p.cast(), n, flags) })
}

/// `cudaMallocPitch`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaMallocPitch(
    p: *mut *mut c_void,
    pitch: *mut size_t,
    width: size_t,
    height: size_t,
) -> CudaError {
    if p.is_null() || pitch.is_null() {
        return error::record(error::INVALID_VALUE);
    }
    // SAFETY: both out-pointers are non-NULL.
    with_context(|| unsafe { cuMemAllocPitch_v2(p.cast(), pitch, width, height, 16) })
}

/// `cudaFree`: freeing NULL succeeds.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaFree(p: *mut c_void) -> CudaError {
    if p.is_null() {
        return error::SUCCESS;
    }
    // SAFETY: the driver checks the pointer.
    match with_context(|| unsafe { cuMemFree_v2(p as CUdeviceptr) }) {
        error::INVALID_VALUE => error::record(error::INVALID_DEVICE_POINTER),
        r => r,
    }
}

/// `cudaMallocHost`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaMallocHost(p: *mut *mut c_void, n: size_t) -> CudaError {
    // SAFETY: same contract.
    unsafe { cudaHostAlloc(p, n, 0) }
}

/// `cudaHostAlloc`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaHostAlloc(p: *mut *mut c_void, n: size_t, flags: c_uint) -> CudaError {
    if p.is_null() {
        return error::record(error::INVALID_VALUE);
    }
    // SAFETY: p is a non-NULL out-pointer from the caller.
    match with_context(|| unsafe { cuMemHostAlloc(p, n, flags) }) {
        error::INVALID_VALUE if n != 0 => error::record(error::MEMORY_ALLOCATION),
        r => r,
    }
}

/// `cudaFreeHost`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaFreeHost(p: *mut c_void) -> CudaError {
    if p.is_null() {
        return error::SUCCESS;
    }
    // SAFETY: the driver checks the pointer.
    with_context(|| unsafe { cuMemFreeHost(p) })
}

/// `cudaHostRegister`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaHostRegister(p: *mut c_void, n: size_t, flags: c_uint) -> CudaError {
    // SAFETY: the driver checks the range.
    with_context(|| unsafe { cuMemHostRegister_v2(p, n, flags) })
}

/// `cudaHostUnregister`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaHostUnregister(p: *mut c_void) -> CudaError {
    // SAFETY: the driver checks the pointer.
    with_context(|| unsafe { cuMemHostUnregister(p) })
}

/// `cudaMemcpy` (unified addressing: the kind does not change where bytes go).
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaMemcpy(
    dst: *mut c_void,
    src: *const c_void,
    n: size_t,
    kind: c_int,
) -> CudaError {
    if !(0..=4).contains(&kind) {
        return error::record(error::INVALID_VALUE);
    }
    // SAFETY: the caller vouches for both ranges, as with the real runtime.
    with_context(|| unsafe { cuMemcpy(dst as CUdeviceptr, src as CUdeviceptr, n) })
}

/// `cudaMemcpyAsync`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaMemcpyAsync(
    dst: *mut c_void,
    src: *const c_void,
    n: size_t,
    kind: c_int,
    stream: Handle,
) -> CudaError {
    if !(0..=4).contains(&kind) {
        return error::record(error::INVALID_VALUE);
    }
    // SAFETY: the caller vouches for both ranges, as with the real runtime.
    with_context(|| unsafe { cuMemcpyAsync(dst as CUdeviceptr, src as CUdeviceptr, n, stream) })
}

/// `cudaMemset`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaMemset(p: *mut c_void, v: c_int, n: size_t) -> CudaError {
    // SAFETY: the driver checks the range.
    with_context(|| unsafe { cuMemsetD8_v2(p as CUdeviceptr, v as u8, n) })
}

/// `cudaMemsetAsync`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaMemsetAsync(
    p: *mut c_void,
    v: c_int,
    n: size_t,
    stream: Handle,
) -> CudaError {
    // SAFETY: the driver checks the range.
    with_context(|| unsafe { cuMemsetD8Async(p as CUdeviceptr, v as u8, n, stream) })
}
