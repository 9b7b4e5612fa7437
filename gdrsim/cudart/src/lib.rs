//! A minimal CUDA runtime (`libcudart.so.12`) on the driver API: the `cuda*` functions UCX's
//! CUDA transports, `ucx_perftest` and UCX's gtests call, for programs run on the emulator.
//!
//! NVIDIA's runtime reaches the driver through an undocumented export table the emulator does
//! not have; this one calls the documented driver functions only. Each thread binds the
//! primary context of its device (0 unless `cudaSetDevice` says otherwise) on its first call
//! that needs one, as the real runtime does.
//!
//! Every exported function is an [`entry!`] of `gdrapi-boundary`: a panic in it returns (and
//! records as the thread's last error) `cudaErrorUnknown` instead of unwinding into C.
//!
//! # Safety
//!
//! Every exported function has the C contract of the CUDA runtime function of the same name.

mod driver;
mod error;
mod memory;
mod sync;

use driver::*;
use error::CudaError;
use gdrapi_boundary::entry;
use libc::{c_char, c_int};
use std::cell::Cell;

thread_local! {
    /// The device `cudaSetDevice` chose for this thread.
    static DEVICE: Cell<c_int> = const { Cell::new(0) };
}

/// Runs a driver call, converting and recording its result.
fn check(r: CUresult) -> CudaError {
    error::record(error::from_driver(r))
}

/// Initializes the driver and makes sure this thread has a current context.
fn context() -> Result<(), CudaError> {
    // SAFETY: cuInit takes no pointers.
    let r = unsafe { cuInit(0) };
    if r != 0 {
        return Err(if r == 100 {
            error::NO_DEVICE
        } else {
            error::from_driver(r)
        });
    }
    let mut ctx: Handle = std::ptr::null_mut();
    // SAFETY: ctx is a valid out-pointer.
    let r = unsafe { cuCtxGetCurrent(&mut ctx) };
    if r == 0 && !ctx.is_null() {
        return Ok(());
    }
    // SAFETY: ctx is a valid out-pointer.
    let r = unsafe { cuDevicePrimaryCtxRetain(&mut ctx, DEVICE.with(Cell::get)) };
    if r != 0 {
        return Err(error::from_driver(r));
    }
    // SAFETY: ctx was just returned by the driver.
    match unsafe { cuCtxSetCurrent(ctx) } {
        0 => Ok(()),
        r => Err(error::from_driver(r)),
    }
}

/// Runs `f` with a current context, recording the error it returns.
fn with_context(f: impl FnOnce() -> CUresult) -> CudaError {
    match context() {
        Ok(()) => check(f()),
        Err(e) => error::record(e),
    }
}

entry! {
    /// `cudaGetDeviceCount`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaGetDeviceCount(count: *mut c_int) -> CudaError {
        if count.is_null() {
            return error::record(error::INVALID_VALUE);
        }
        // SAFETY: cuInit takes no pointers.
        match unsafe { cuInit(0) } {
            0 => {}
            100 => return error::record(error::NO_DEVICE),
            r => return check(r),
        }
        // SAFETY: count is a non-NULL out-pointer from the caller.
        check(unsafe { cuDeviceGetCount(count) })
    }
}

entry! {
    /// `cudaSetDevice`: binds the device's primary context to this thread.
    on_panic(error::record(error::UNKNOWN))
    fn cudaSetDevice(dev: c_int) -> CudaError {
        let mut n = 0;
        // SAFETY: n is a valid out-pointer.
        let r = unsafe { cudaGetDeviceCount(&mut n) };
        if r != error::SUCCESS {
            return r;
        }
        if dev < 0 || dev >= n {
            return error::record(error::INVALID_DEVICE);
        }
        DEVICE.with(|d| d.set(dev));
        let mut ctx: Handle = std::ptr::null_mut();
        // SAFETY: ctx is a valid out-pointer.
        let r = unsafe { cuDevicePrimaryCtxRetain(&mut ctx, dev) };
        if r != 0 {
            return check(r);
        }
        // SAFETY: ctx was just returned by the driver.
        check(unsafe { cuCtxSetCurrent(ctx) })
    }
}

entry! {
    /// `cudaGetDevice`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaGetDevice(dev: *mut c_int) -> CudaError {
        if dev.is_null() {
            return error::record(error::INVALID_VALUE);
        }
        // SAFETY: dev is a non-NULL out-pointer from the caller.
        with_context(|| unsafe { cuCtxGetDevice(dev) })
    }
}

entry! {
    /// `cudaDeviceSynchronize`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaDeviceSynchronize() -> CudaError {
        // SAFETY: no arguments.
        with_context(|| unsafe { cuCtxSynchronize() })
    }
}

entry! {
    /// `cudaDriverGetVersion`.
    on_panic(error::record(error::UNKNOWN))
    fn cudaDriverGetVersion(v: *mut c_int) -> CudaError {
        if v.is_null() {
            return error::record(error::INVALID_VALUE);
        }
        // SAFETY: v is a non-NULL out-pointer from the caller.
        check(unsafe { cuDriverGetVersion(v) })
    }
}

entry! {
    /// `cudaRuntimeGetVersion`: 12.0, the runtime whose soname this library has.
    on_panic(error::record(error::UNKNOWN))
    fn cudaRuntimeGetVersion(v: *mut c_int) -> CudaError {
        if v.is_null() {
            return error::record(error::INVALID_VALUE);
        }
        // SAFETY: v is a non-NULL out-pointer from the caller.
        unsafe { v.write(12000) };
        error::SUCCESS
    }
}

entry! {
    /// `cudaGetLastError`: this thread's last error, which is reset.
    on_panic(error::record(error::UNKNOWN))
    fn cudaGetLastError() -> CudaError {
        error::last(true)
    }
}

entry! {
    /// `cudaPeekAtLastError`: this thread's last error, which is kept.
    on_panic(error::record(error::UNKNOWN))
    fn cudaPeekAtLastError() -> CudaError {
        error::last(false)
    }
}

entry! {
    /// `cudaGetErrorName`.
    on_panic(error::name(error::UNKNOWN).as_ptr().cast())
    fn cudaGetErrorName(e: CudaError) -> *const c_char {
        error::name(e).as_ptr().cast()
    }
}

entry! {
    /// `cudaGetErrorString` (errors are described by their names).
    on_panic(error::name(error::UNKNOWN).as_ptr().cast())
    fn cudaGetErrorString(e: CudaError) -> *const c_char {
        error::name(e).as_ptr().cast()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gdrapi_boundary::testing::panic_next;

    #[test]
    fn a_panic_is_cuda_error_unknown_and_the_last_error() {
        let mut v = 0;
        panic_next("cudaRuntimeGetVersion");
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { cudaRuntimeGetVersion(&mut v) }, error::UNKNOWN);
        assert_eq!(v, 0, "the panic came before the write");
        // SAFETY: no arguments.
        assert_eq!(unsafe { cudaGetLastError() }, error::UNKNOWN);
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { cudaRuntimeGetVersion(&mut v) }, error::SUCCESS);
        assert_eq!(v, 12000);
        panic_next("cudaGetErrorName");
        // SAFETY: no pointer arguments; the result is a static NUL-terminated string.
        let name = unsafe { std::ffi::CStr::from_ptr(cudaGetErrorName(error::SUCCESS)) };
        assert_eq!(name.to_bytes(), b"cudaErrorUnknown");
    }
}
