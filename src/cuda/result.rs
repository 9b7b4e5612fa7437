//! `CUresult` to errno: the library's public functions return errno values only, never a raw
//! `CUresult` (upstream's DMA-BUF pin returns the `CUresult` itself, so that
//! `CUDA_ERROR_INVALID_VALUE` = 1 reads as `EPERM`; this table removes that ambiguity).
//!
//! | `CUresult` | name | errno |
//! | --- | --- | --- |
//! | 1 | `CUDA_ERROR_INVALID_VALUE` | `EINVAL` |
//! | 2 | `CUDA_ERROR_OUT_OF_MEMORY` | `ENOMEM` |
//! | 3, 4 | `CUDA_ERROR_NOT_INITIALIZED`, `CUDA_ERROR_DEINITIALIZED` | `ENODEV` |
//! | 34 | `CUDA_ERROR_STUB_LIBRARY` | `ENODEV` |
//! | 35 | `CUDA_ERROR_INSUFFICIENT_DRIVER` | `ENOTSUP` |
//! | 46 | `CUDA_ERROR_DEVICE_UNAVAILABLE` | `EBUSY` |
//! | 100, 101 | `CUDA_ERROR_NO_DEVICE`, `CUDA_ERROR_INVALID_DEVICE` | `ENODEV` |
//! | 201, 709 | `CUDA_ERROR_INVALID_CONTEXT`, `CUDA_ERROR_CONTEXT_IS_DESTROYED` | `EINVAL` |
//! | 304 | `CUDA_ERROR_OPERATING_SYSTEM` | `EIO` |
//! | 400 | `CUDA_ERROR_INVALID_HANDLE` | `EINVAL` |
//! | 500 | `CUDA_ERROR_NOT_FOUND` | `ENOENT` |
//! | 700 | `CUDA_ERROR_ILLEGAL_ADDRESS` | `EFAULT` |
//! | 800 | `CUDA_ERROR_NOT_PERMITTED` | `EPERM` |
//! | 801 | `CUDA_ERROR_NOT_SUPPORTED` | `ENOTSUP` |
//! | 803, 804 | `CUDA_ERROR_SYSTEM_DRIVER_MISMATCH`, `CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE` | `ENOTSUP` |
//! | anything else (999 `CUDA_ERROR_UNKNOWN` included) | | `EIO` |

use super::types::CuResult;
use crate::error::Error;

/// The errno a failed CUDA call is reported as (see the module table). Never 0.
pub fn errno_of(res: CuResult) -> i32 {
    match res {
        1 => libc::EINVAL,
        2 => libc::ENOMEM,
        3 | 4 | 34 | 100 | 101 => libc::ENODEV,
        35 | 801 | 803 | 804 => libc::ENOTSUP,
        46 => libc::EBUSY,
        201 | 400 | 709 => libc::EINVAL,
        500 => libc::ENOENT,
        700 => libc::EFAULT,
        800 => libc::EPERM,
        _ => libc::EIO,
    }
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
    fn table_rows() {
        assert_eq!(errno_of(1), libc::EINVAL);
        assert_eq!(errno_of(2), libc::ENOMEM);
        assert_eq!(errno_of(3), libc::ENODEV);
        assert_eq!(errno_of(100), libc::ENODEV);
        assert_eq!(errno_of(801), libc::ENOTSUP);
        assert_eq!(errno_of(800), libc::EPERM);
        assert_eq!(errno_of(500), libc::ENOENT);
        assert_eq!(errno_of(999), libc::EIO);
        assert_eq!(errno_of(123_456), libc::EIO);
        assert_eq!(errno_of(-1), libc::EIO);
    }

    #[test]
    fn never_zero_and_never_the_raw_code() {
        for res in (1..1000).chain([-5, i32::MAX, i32::MIN]) {
            let e = errno_of(res);
            assert_ne!(e, 0, "CUresult {res}");
        }
        // The collision upstream has: CUDA_ERROR_INVALID_VALUE (1) would read as EPERM (1).
        assert_ne!(errno_of(1), libc::EPERM);
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
