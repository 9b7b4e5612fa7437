//! Device, managed and page-locked host memory, copies and memsets.

use crate::driver::*;
use crate::error::{self, CudaError};
use crate::with_context;
use gdrapi_boundary::entry;
use libc::{c_int, c_uint, c_void, size_t};

entry! {
    /// `cudaMalloc`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaMalloc(p: *mut *mut c_void, n: size_t) -> CudaError {
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
}

entry! {
    /// `cudaMallocManaged`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaMallocManaged(
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
}

entry! {
    /// `cudaMallocPitch`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaMallocPitch(
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
}

entry! {
    /// `cudaFree`: freeing NULL succeeds.
    on_panic(error::record(error::UNKNOWN))
    fn cudaFree(p: *mut c_void) -> CudaError {
        if p.is_null() {
            return error::SUCCESS;
        }
        // SAFETY: the driver checks the pointer.
        match with_context(|| unsafe { cuMemFree_v2(p as CUdeviceptr) }) {
            error::INVALID_VALUE => error::record(error::INVALID_DEVICE_POINTER),
            r => r,
        }
    }
}

entry! {
    /// `cudaMallocHost`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaMallocHost(p: *mut *mut c_void, n: size_t) -> CudaError {
        // SAFETY: same contract.
        unsafe { cudaHostAlloc(p, n, 0) }
    }
}

entry! {
    /// `cudaHostAlloc`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaHostAlloc(p: *mut *mut c_void, n: size_t, flags: c_uint) -> CudaError {
        if p.is_null() {
            return error::record(error::INVALID_VALUE);
        }
        // SAFETY: p is a non-NULL out-pointer from the caller.
        match with_context(|| unsafe { cuMemHostAlloc(p, n, flags) }) {
            error::INVALID_VALUE if n != 0 => error::record(error::MEMORY_ALLOCATION),
            r => r,
        }
    }
}

entry! {
    /// `cudaFreeHost`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaFreeHost(p: *mut c_void) -> CudaError {
        if p.is_null() {
            return error::SUCCESS;
        }
        // SAFETY: the driver checks the pointer.
        with_context(|| unsafe { cuMemFreeHost(p) })
    }
}

entry! {
    /// `cudaHostRegister`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaHostRegister(p: *mut c_void, n: size_t, flags: c_uint) -> CudaError {
        // SAFETY: the driver checks the range.
        with_context(|| unsafe { cuMemHostRegister_v2(p, n, flags) })
    }
}

entry! {
    /// `cudaHostUnregister`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaHostUnregister(p: *mut c_void) -> CudaError {
        // SAFETY: the driver checks the pointer.
        with_context(|| unsafe { cuMemHostUnregister(p) })
    }
}

entry! {
    /// `cudaMemcpy` (unified addressing: the kind does not change where bytes go).
    on_panic(error::record(error::UNKNOWN))
    fn cudaMemcpy(
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
}

entry! {
    /// `cudaMemcpyAsync`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaMemcpyAsync(
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
}

entry! {
    /// `cudaMemset`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaMemset(p: *mut c_void, v: c_int, n: size_t) -> CudaError {
        // SAFETY: the driver checks the range.
        with_context(|| unsafe { cuMemsetD8_v2(p as CUdeviceptr, v as u8, n) })
    }
}

entry! {
    /// `cudaMemsetAsync`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaMemsetAsync(
        p: *mut c_void,
        v: c_int,
        n: size_t,
        stream: Handle,
    ) -> CudaError {
        // SAFETY: the driver checks the range.
        with_context(|| unsafe { cuMemsetD8Async(p as CUdeviceptr, v as u8, n, stream) })
    }
}
