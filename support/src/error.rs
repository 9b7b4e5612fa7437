//! The error type of the Vulkan and CUDA steps: which step failed and why, as a value until
//! a caller prints it.

use crate::dl::DlError;
use std::fmt;

/// A failed step of opening, mapping, exporting, importing or copying.
#[derive(Debug)]
pub enum Error {
    /// A shared library could not be loaded, or lacks a function.
    Dl(DlError),
    /// A symbol was missing from the Vulkan loader (`vkGet*ProcAddr` returned NULL).
    Symbol { name: String },
    /// A Vulkan call returned a negative `VkResult`.
    Vulkan { call: &'static str, result: i32 },
    /// A CUDA driver call returned a non-zero `CUresult`; `name` is `cuGetErrorName`'s.
    Cuda {
        call: &'static str,
        result: i32,
        name: Option<String>,
    },
    /// No Vulkan physical device was found.
    NoDevice,
    /// The device has no memory type that is both device-local and host-visible.
    NoBarMemoryType,
    /// A device extension the step needs is not offered.
    MissingExtension(&'static std::ffi::CStr),
    /// An argument was out of range (size zero, copy past the end, ...).
    Invalid(String),
    /// Bytes read back differ from the bytes written.
    Mismatch {
        what: String,
        offset: usize,
        expected: u8,
        found: u8,
    },
    /// A system call or file read failed.
    Io {
        what: String,
        source: std::io::Error,
    },
}

impl From<DlError> for Error {
    fn from(e: DlError) -> Error {
        Error::Dl(e)
    }
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Dl(e) => e.fmt(f),
            Error::Symbol { name } => write!(f, "symbol {name} not found"),
            Error::Vulkan { call, result } => write!(f, "{call} failed: VkResult {result}"),
            Error::Cuda { call, result, name } => {
                write!(f, "{call} failed: CUresult {result}")?;
                match name {
                    Some(n) => write!(f, " ({n})"),
                    None => Ok(()),
                }
            }
            Error::NoDevice => write!(f, "no Vulkan physical device"),
            Error::NoBarMemoryType => {
                write!(f, "no memory type is both DEVICE_LOCAL and HOST_VISIBLE")
            }
            Error::MissingExtension(e) => {
                write!(f, "device extension {} not offered", e.to_string_lossy())
            }
            Error::Invalid(s) => write!(f, "invalid argument: {s}"),
            Error::Mismatch {
                what,
                offset,
                expected,
                found,
            } => write!(
                f,
                "{what}: byte {offset} is {found:#04x}, expected {expected:#04x}"
            ),
            Error::Io { what, source } => write!(f, "{what}: {source}"),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_calls_say_which_call_and_which_result() {
        let e = Error::Cuda {
            call: "cuInit",
            result: 100,
            name: None,
        };
        assert_eq!(e.to_string(), "cuInit failed: CUresult 100");
        let e = Error::Cuda {
            call: "cuMemHostAlloc",
            result: 2,
            name: Some("CUDA_ERROR_OUT_OF_MEMORY".into()),
        };
        assert_eq!(
            e.to_string(),
            "cuMemHostAlloc failed: CUresult 2 (CUDA_ERROR_OUT_OF_MEMORY)"
        );
    }
}
