//! The library's error type. Errors stay typed inside the crate; only the C boundary
//! ([`crate::ffi`]) turns them into the positive errno values upstream returns.

use std::fmt;

/// Why a library operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// A C library call (`open`, `ioctl`, `mmap`, `munmap`, `close`, ...) failed with `errno`.
    /// `call` names it for the log line.
    Sys { call: &'static str, errno: i32 },
    /// An argument is invalid: a NULL output pointer, an unknown flag, a range outside the
    /// mapping. The text says which, for the log.
    InvalidArgument(&'static str),
    /// A `gdr_t` or `gdr_mh_t` that this library did not hand out, or no longer owns.
    InvalidHandle,
    /// The handle is mapped already (upstream answers EAGAIN).
    AlreadyMapped,
    /// The handle is not mapped (EINVAL).
    NotMapped,
    /// The driver granted no mapping (upstream answers EAGAIN).
    MappingRefused,
    /// Another thread is mapping or unmapping this handle right now, so the call lost the
    /// race and changed nothing; it may be retried (EAGAIN).
    LostRace,
    /// A `gdr_t` used by a process other than the one that opened it (after `fork`).
    ForeignProcess,
    /// Out of memory.
    NoMemory,
    /// The backend cannot do this (old driver, no device support).
    NotSupported(&'static str),
    /// The backend is not usable on this machine (no driver node, no libcuda).
    NoDevice(&'static str),
}

/// Result alias used throughout the crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Builds [`Error::Sys`] from the calling thread's current `errno`.
    #[cold]
    #[inline(never)]
    pub fn last_os(call: &'static str) -> Error {
        let errno = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        Error::Sys {
            call,
            errno: if errno == 0 { libc::EIO } else { errno },
        }
    }

    /// The positive errno value returned to C for this error.
    // Out of line: inlined, its table of cases would join the `Ok` case of every C entry's
    // return into one jump table, read from a page of its own on the success path too.
    #[inline(never)]
    pub fn errno(&self) -> i32 {
        match *self {
            Error::Sys { errno, .. } => errno,
            Error::InvalidArgument(_) | Error::InvalidHandle | Error::NotMapped => libc::EINVAL,
            Error::AlreadyMapped | Error::MappingRefused | Error::LostRace => libc::EAGAIN,
            Error::ForeignProcess => libc::EACCES,
            Error::NoMemory => libc::ENOMEM,
            Error::NotSupported(_) => libc::ENOTSUP,
            Error::NoDevice(_) => libc::ENODEV,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Sys { call, errno } => {
                write!(
                    f,
                    "{call} failed (errno={errno}/{})",
                    std::io::Error::from_raw_os_error(errno)
                )
            }
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::InvalidHandle => {
                f.write_str("handle was not issued by this library or is no longer live")
            }
            Error::AlreadyMapped => f.write_str("mh is mapped already"),
            Error::NotMapped => f.write_str("mh is not mapped yet"),
            Error::MappingRefused => f.write_str("mh is not mapped"),
            Error::LostRace => {
                f.write_str("another thread is mapping or unmapping this handle: try again")
            }
            Error::ForeignProcess => f.write_str(
                "gdr_t used in a process other than the one that opened it (after fork?)",
            ),
            Error::NoMemory => f.write_str("out of memory"),
            Error::NotSupported(what) => write!(f, "not supported: {what}"),
            Error::NoDevice(what) => write!(f, "no device: {what}"),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_values_match_upstream() {
        assert_eq!(Error::AlreadyMapped.errno(), libc::EAGAIN);
        assert_eq!(Error::MappingRefused.errno(), libc::EAGAIN);
        assert_eq!(Error::LostRace.errno(), libc::EAGAIN);
        assert_eq!(Error::NotMapped.errno(), libc::EINVAL);
        assert_eq!(Error::InvalidHandle.errno(), libc::EINVAL);
        assert_eq!(Error::NotSupported("x").errno(), 95);
        assert_eq!(
            Error::Sys {
                call: "ioctl",
                errno: libc::EACCES
            }
            .errno(),
            libc::EACCES
        );
    }
}
