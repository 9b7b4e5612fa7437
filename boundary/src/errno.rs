//! `CUresult` to errno: the libraries' public functions return errno values only, never a raw
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

/// The errno a failed CUDA call with `CUresult` `res` is reported as (see the module table).
/// Never 0.
#[inline]
pub fn of_curesult(res: i32) -> i32 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_rows() {
        assert_eq!(of_curesult(1), libc::EINVAL);
        assert_eq!(of_curesult(2), libc::ENOMEM);
        assert_eq!(of_curesult(3), libc::ENODEV);
        assert_eq!(of_curesult(100), libc::ENODEV);
        assert_eq!(of_curesult(801), libc::ENOTSUP);
        assert_eq!(of_curesult(800), libc::EPERM);
        assert_eq!(of_curesult(500), libc::ENOENT);
        assert_eq!(of_curesult(999), libc::EIO);
        assert_eq!(of_curesult(123_456), libc::EIO);
        assert_eq!(of_curesult(-1), libc::EIO);
    }

    #[test]
    fn never_zero_and_never_the_raw_code() {
        for res in (1..1000).chain([-5, i32::MAX, i32::MIN]) {
            let e = of_curesult(res);
            assert_ne!(e, 0, "CUresult {res}");
        }
        // The collision upstream has: CUDA_ERROR_INVALID_VALUE (1) would read as EPERM (1).
        assert_ne!(of_curesult(1), libc::EPERM);
    }
}
