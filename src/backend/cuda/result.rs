//! `CUresult` to errno: the table is shared with `libgdrapi_ext.so.0`
//! ([`gdrapi_boundary::errno`], which lists it); this module adds the crate error and the
//! names used in log lines (from `gdrapi_abi::cuda`'s table).

use super::types::CUresult;
use crate::error::Error;

/// The errno a failed CUDA call is reported as (the table of [`gdrapi_boundary::errno`]).
/// Never 0.
pub fn errno_of(res: CUresult) -> i32 {
    gdrapi_boundary::errno::of_curesult(res)
}

/// The crate error for CUDA call `call` failing with `res`.
pub fn error_of(call: &'static str, res: CUresult) -> Error {
    Error::Sys {
        call,
        errno: errno_of(res),
    }
}

/// The `cuda.h` name of `res` (`gdrapi_abi::cuda`'s table), for log lines when the driver
/// cannot name it itself (`cuGetErrorName` missing or failing); `CUDA_ERROR_?` for a code the
/// table does not list.
pub fn fallback_name(res: CUresult) -> &'static str {
    gdrapi_abi::cuda::error_name(res)
        .and_then(|n| n.to_str().ok())
        .unwrap_or("CUDA_ERROR_?")
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
