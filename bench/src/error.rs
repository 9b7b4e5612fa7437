//! The crate's error type: which step failed and why, as a value until `main` prints it.

use std::fmt;

/// A failed step of opening, mapping, exporting, importing or copying.
#[derive(Debug)]
pub enum Error {
    /// A shared library could not be loaded (`dlopen` failed); `reason` is `dlerror()`.
    Load { library: String, reason: String },
    /// A symbol was missing from a loaded library or from the Vulkan loader.
    Symbol { name: String },
    /// A Vulkan call returned a negative `VkResult`.
    Vulkan { call: &'static str, result: i32 },
    /// A CUDA driver call returned a non-zero `CUresult`.
    Cuda { call: &'static str, result: i32 },
    /// No Vulkan physical device was found.
    NoDevice,
    /// The device has no memory type that is both device-local and host-visible.
    NoBarMemoryType,
    /// A device extension the step needs is not offered.
    MissingExtension(&'static str),
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

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Load { library, reason } => write!(f, "cannot load {library}: {reason}"),
            Error::Symbol { name } => write!(f, "symbol {name} not found"),
            Error::Vulkan { call, result } => write!(f, "{call} failed: VkResult {result}"),
            Error::Cuda { call, result } => write!(f, "{call} failed: CUresult {result}"),
            Error::NoDevice => write!(f, "no Vulkan physical device"),
            Error::NoBarMemoryType => {
                write!(f, "no memory type is both DEVICE_LOCAL and HOST_VISIBLE")
            }
            Error::MissingExtension(e) => write!(f, "device extension {e} not offered"),
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
