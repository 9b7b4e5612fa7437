//! `CUresult` to errno: the table is shared with `libgdrapi_ext.so.0`
//! ([`gdrapi_boundary::errno`], which lists it); this module adds the crate error and the
//! names used in log lines.

use super::types::CuResult;
use crate::error::Error;

/// The errno a failed CUDA call is reported as (the table of [`gdrapi_boundary::errno`]).
/// Never 0.
pub fn errno_of(res: CuResult) -> i32 {
    gdrapi_boundary::errno::of_curesult(res)
}

/// The crate error for CUDA call `call` failing with `res`.
pub fn error_of(call: &'static str, res: CuResult) -> Error {
    Error::Sys {
        call,
        errno: errno_of(res),
    }
}

/// The `cuda.h` name of the codes this library expects to meet, for log lines when the driver
/// cannot name them itself (`cuGetErrorName` missing or failing).
pub fn fallback_name(res: CuResult) -> &'static str {
    match res {
        0 => "CUDA_SUCCESS",
        1 => "CUDA_ERROR_INVALID_VALUE",
        2 => "CUDA_ERROR_OUT_OF_MEMORY",
        3 => "CUDA_ERROR_NOT_INITIALIZED",
        4 => "CUDA_ERROR_DEINITIALIZED",
        34 => "CUDA_ERROR_STUB_LIBRARY",
        35 => "CUDA_ERROR_INSUFFICIENT_DRIVER",
        46 => "CUDA_ERROR_DEVICE_UNAVAILABLE",
        100 => "CUDA_ERROR_NO_DEVICE",
        101 => "CUDA_ERROR_INVALID_DEVICE",
        201 => "CUDA_ERROR_INVALID_CONTEXT",
        304 => "CUDA_ERROR_OPERATING_SYSTEM",
        400 => "CUDA_ERROR_INVALID_HANDLE",
        500 => "CUDA_ERROR_NOT_FOUND",
        700 => "CUDA_ERROR_ILLEGAL_ADDRESS",
        709 => "CUDA_ERROR_CONTEXT_IS_DESTROYED",
        800 => "CUDA_ERROR_NOT_PERMITTED",
        801 => "CUDA_ERROR_NOT_SUPPORTED",
        803 => "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        804 => "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
        999 => "CUDA_ERROR_UNKNOWN",
        _ => "CUDA_ERROR_?",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_of_is_the_shared_table() {
        assert_eq!(errno_of(1), libc::EINVAL);
        assert_eq!(errno_of(801), libc::ENOTSUP);
        assert_eq!(errno_of(123_456), libc::EIO);
    }

    #[test]
    fn error_names_the_call() {
        assert_eq!(
            error_of("cuMemGetHandleForAddressRange", 801),
            Error::Sys {
                call: "cuMemGetHandleForAddressRange",
                errno: libc::ENOTSUP
            }
        );
        assert_eq!(fallback_name(801), "CUDA_ERROR_NOT_SUPPORTED");
        assert_eq!(fallback_name(4242), "CUDA_ERROR_?");
    }
}
