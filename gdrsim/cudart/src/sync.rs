//! Streams and events.

use crate::driver::*;
use crate::error::{self, CudaError};
use crate::with_context;
use libc::{c_uint, c_void};

/// `cudaStreamCreate`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaStreamCreate(s: *mut Handle) -> CudaError {
    // SAFETY: same contract.
    unsafe { cudaStreamCreateWithFlags(s, 0) }
}

/// `cudaStreamCreateWithFlags`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaStreamCreateWithFlags(s: *mut Handle, flags: c_uint) -> CudaError {
    if s.is_null() {
        return error::record(error::INVALID_VALUE);
    }
    // SAFETY: s is a non-NULL out-pointer from the caller.
    with_context(|| unsafe { cuStreamCreate(s, flags) })
}

/// `cudaStreamDestroy`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaStreamDestroy(s: Handle) -> CudaError {
    // SAFETY: the driver checks the handle.
    with_context(|| unsafe { cuStreamDestroy_v2(s) })
}

/// `cudaStreamSynchronize`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaStreamSynchronize(s: Handle) -> CudaError {
    // SAFETY: the driver checks the handle.
    with_context(|| unsafe { cuStreamSynchronize(s) })
}

/// `cudaStreamQuery`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaStreamQuery(s: Handle) -> CudaError {
    // SAFETY: the driver checks the handle.
    with_context(|| unsafe { cuStreamQuery(s) })
}

/// `cudaLaunchHostFunc`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaLaunchHostFunc(s: Handle, f: HostFn, data: *mut c_void) -> CudaError {
    // SAFETY: the callback and its data are the caller's, as with the real runtime.
    with_context(|| unsafe { cuLaunchHostFunc(s, f, data) })
}

/// `cudaEventCreate`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaEventCreate(e: *mut Handle) -> CudaError {
    // SAFETY: same contract.
    unsafe { cudaEventCreateWithFlags(e, 0) }
}

/// `cudaEventCreateWithFlags`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaEventCreateWithFlags(e: *mut Handle, flags: c_uint) -> CudaError {
    if e.is_null() {
        return error::record(error::INVALID_VALUE);
    }
    // SAFETY: e is a non-NULL out-pointer from the caller.
    with_context(|| unsafe { cuEventCreate(e, flags) })
}

/// `cudaEventDestroy`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaEventDestroy(e: Handle) -> CudaError {
    // SAFETY: the driver checks the handle.
    with_context(|| unsafe { cuEventDestroy_v2(e) })
}

/// `cudaEventRecord`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaEventRecord(e: Handle, s: Handle) -> CudaError {
    // SAFETY: the driver checks the handles.
    with_context(|| unsafe { cuEventRecord(e, s) })
}

/// `cudaEventQuery`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaEventQuery(e: Handle) -> CudaError {
    // SAFETY: the driver checks the handle.
    with_context(|| unsafe { cuEventQuery(e) })
}

/// `cudaEventSynchronize`.
///
/// # Safety
///
/// Pointer arguments are NULL or valid for what the CUDA runtime reads or writes
/// through them.
#[no_mangle]
pub unsafe extern "C" fn cudaEventSynchronize(e: Handle) -> CudaError {
    // SAFETY: the driver checks the handle.
    with_context(|| unsafe { cuEventSynchronize(e) })
}
