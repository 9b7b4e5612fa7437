//! `cudaError_t`: the driver's codes where the runtime uses the same numbers, its names, and
//! the per-thread last error.

use crate::driver::CUresult;
use std::cell::Cell;

/// `cudaError_t`.
pub type CudaError = libc::c_int;

pub const SUCCESS: CudaError = 0;
pub const INVALID_VALUE: CudaError = 1;
pub const MEMORY_ALLOCATION: CudaError = 2;
pub const INITIALIZATION_ERROR: CudaError = 3;
pub const INVALID_DEVICE_POINTER: CudaError = 17;
pub const NO_DEVICE: CudaError = 100;
pub const INVALID_DEVICE: CudaError = 101;
/// `cudaErrorUnknown`: what an exported function returns when it panicked.
pub const UNKNOWN: CudaError = 999;

/// Names of the codes the runtime can return (the others print as unrecognized).
const NAMES: &[(CudaError, &str)] = &[
    (0, "cudaSuccess\0"),
    (1, "cudaErrorInvalidValue\0"),
    (2, "cudaErrorMemoryAllocation\0"),
    (3, "cudaErrorInitializationError\0"),
    (4, "cudaErrorCudartUnloading\0"),
    (17, "cudaErrorInvalidDevicePointer\0"),
    (34, "cudaErrorStubLibrary\0"),
    (35, "cudaErrorInsufficientDriver\0"),
    (100, "cudaErrorNoDevice\0"),
    (101, "cudaErrorInvalidDevice\0"),
    (201, "cudaErrorDeviceUninitialized\0"),
    (400, "cudaErrorInvalidResourceHandle\0"),
    (500, "cudaErrorSymbolNotFound\0"),
    (600, "cudaErrorNotReady\0"),
    (700, "cudaErrorIllegalAddress\0"),
    (712, "cudaErrorHostMemoryAlreadyRegistered\0"),
    (713, "cudaErrorHostMemoryNotRegistered\0"),
    (801, "cudaErrorNotSupported\0"),
    (999, "cudaErrorUnknown\0"),
];

const UNRECOGNIZED: &str = "unrecognized error code\0";

/// The NUL-terminated name of `e`.
pub fn name(e: CudaError) -> &'static str {
    NAMES
        .iter()
        .find(|(c, _)| *c == e)
        .map_or(UNRECOGNIZED, |(_, n)| n)
}

thread_local! {
    static LAST: Cell<CudaError> = const { Cell::new(SUCCESS) };
}

/// Records `e` as this thread's last error unless it is success, and returns it.
pub fn record(e: CudaError) -> CudaError {
    if e != SUCCESS {
        LAST.with(|l| l.set(e));
    }
    e
}

/// This thread's last error; `reset` clears it (`cudaGetLastError`).
pub fn last(reset: bool) -> CudaError {
    LAST.with(|l| if reset { l.replace(SUCCESS) } else { l.get() })
}

/// The runtime code for a driver result: the numbers agree for every code the runtime passes on.
pub fn from_driver(r: CUresult) -> CudaError {
    match r {
        // CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_DEINITIALIZED
        3 | 4 => INITIALIZATION_ERROR,
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_last_error() {
        assert_eq!(name(0), "cudaSuccess\0");
        assert_eq!(name(12345), UNRECOGNIZED);
        assert_eq!(from_driver(2), MEMORY_ALLOCATION);
        assert_eq!(record(INVALID_VALUE), INVALID_VALUE);
        assert_eq!(record(SUCCESS), SUCCESS);
        assert_eq!(last(false), INVALID_VALUE);
        assert_eq!(last(true), INVALID_VALUE);
        assert_eq!(last(false), SUCCESS);
    }
}
