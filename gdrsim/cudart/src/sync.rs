//! Streams and events.

use crate::driver::*;
use crate::error::{self, CudaError};
use crate::with_context;
use gdrapi_boundary::entry;
use libc::{c_uint, c_void};

entry! {
    /// `cudaStreamCreate`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaStreamCreate(s: *mut Handle) -> CudaError {
        // SAFETY: same contract.
        unsafe { cudaStreamCreateWithFlags(s, 0) }
    }
}

entry! {
    /// `cudaStreamCreateWithFlags`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaStreamCreateWithFlags(s: *mut Handle, flags: c_uint) -> CudaError {
        if s.is_null() {
            return error::record(error::INVALID_VALUE);
        }
        // SAFETY: s is a non-NULL out-pointer from the caller.
        with_context(|| unsafe { cuStreamCreate(s, flags) })
    }
}

entry! {
    /// `cudaStreamDestroy`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaStreamDestroy(s: Handle) -> CudaError {
        // SAFETY: the driver checks the handle.
        with_context(|| unsafe { cuStreamDestroy_v2(s) })
    }
}

entry! {
    /// `cudaStreamSynchronize`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaStreamSynchronize(s: Handle) -> CudaError {
        // SAFETY: the driver checks the handle.
        with_context(|| unsafe { cuStreamSynchronize(s) })
    }
}

entry! {
    /// `cudaStreamQuery`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaStreamQuery(s: Handle) -> CudaError {
        // SAFETY: the driver checks the handle.
        with_context(|| unsafe { cuStreamQuery(s) })
    }
}

entry! {
    /// `cudaLaunchHostFunc`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaLaunchHostFunc(s: Handle, f: HostFn, data: *mut c_void) -> CudaError {
        // SAFETY: the callback and its data are the caller's, as with the real runtime.
        with_context(|| unsafe { cuLaunchHostFunc(s, f, data) })
    }
}

entry! {
    /// `cudaEventCreate`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaEventCreate(e: *mut Handle) -> CudaError {
        // SAFETY: same contract.
        unsafe { cudaEventCreateWithFlags(e, 0) }
    }
}

entry! {
    /// `cudaEventCreateWithFlags`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaEventCreateWithFlags(e: *mut Handle, flags: c_uint) -> CudaError {
        if e.is_null() {
            return error::record(error::INVALID_VALUE);
        }
        // SAFETY: e is a non-NULL out-pointer from the caller.
        with_context(|| unsafe { cuEventCreate(e, flags) })
    }
}

entry! {
    /// `cudaEventDestroy`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaEventDestroy(e: Handle) -> CudaError {
        // SAFETY: the driver checks the handle.
        with_context(|| unsafe { cuEventDestroy_v2(e) })
    }
}

entry! {
    /// `cudaEventRecord`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaEventRecord(e: Handle, s: Handle) -> CudaError {
        // SAFETY: the driver checks the handles.
        with_context(|| unsafe { cuEventRecord(e, s) })
    }
}

entry! {
    /// `cudaEventQuery`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaEventQuery(e: Handle) -> CudaError {
        // SAFETY: the driver checks the handle.
        with_context(|| unsafe { cuEventQuery(e) })
    }
}

entry! {
    /// `cudaEventSynchronize`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaEventSynchronize(e: Handle) -> CudaError {
        // SAFETY: the driver checks the handle.
        with_context(|| unsafe { cuEventSynchronize(e) })
    }
}
