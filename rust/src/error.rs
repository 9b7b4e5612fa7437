//! Errors: what a call of the C libraries returned (a positive errno value, as `gdrapi.h` and
//! `gdrapi_ext.h` define them), named, or why a library could not be used at all.

use std::fmt;

/// An error of this crate: a library that could not be loaded, no backend, or the errno a
/// call returned. [`Error::errno`] gives the errno in every case.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// `libgdrapi.so.2` or `libgdrapi_ext.so.0` could not be loaded, or lacks a function
    /// (install gdrapi-rs, or put its `lib` directory on `LD_LIBRARY_PATH`).
    Load {
        /// The soname.
        library: &'static str,
        /// The loader's message.
        reason: String,
    },
    /// `gdr_open` found no backend that can map GPU memory: no gdrdrv module, no CUDA driver
    /// with DMA-BUF mmap, and (on machines without the module) `GDRAPI_USE_VULKAN=1` not set.
    /// With `GDRCOPY_ENABLE_LOGGING=1` the library says why; `gdrcopy doctor` too.
    NoBackend,
    /// EINVAL: an argument, handle or range the library refused (it logs which).
    InvalidArgument,
    /// EACCES: a session or allocator used in a child process (open your own), or the device
    /// file's permissions.
    PermissionDenied,
    /// EAGAIN: the pin is already mapped, or another thread holds it mid-call.
    Again,
    /// ENOMEM: out of device memory, BAR1 space or host memory.
    OutOfMemory,
    /// ENODEV: no CUDA driver, no such device, or no backend for the allocator.
    NoDevice,
    /// ENOTSUP or EOPNOTSUPP: not available with this backend or device.
    NotSupported,
    /// ENOENT: no allocation holds the address.
    NotFound,
    /// Any other errno.
    Other(i32),
}

impl Error {
    /// The error for a positive errno value.
    pub fn from_errno(errno: i32) -> Error {
        match errno {
            libc::EINVAL => Error::InvalidArgument,
            libc::EACCES => Error::PermissionDenied,
            libc::EAGAIN => Error::Again,
            libc::ENOMEM => Error::OutOfMemory,
            libc::ENODEV => Error::NoDevice,
            libc::ENOTSUP => Error::NotSupported,
            libc::ENOENT => Error::NotFound,
            e => Error::Other(e),
        }
    }

    /// The errno value: what the C call returned; ENOENT for a library that could not be
    /// loaded, ENODEV for [`Error::NoBackend`].
    pub fn errno(&self) -> i32 {
        match self {
            Error::Load { .. } => libc::ENOENT,
            Error::NoBackend => libc::ENODEV,
            Error::InvalidArgument => libc::EINVAL,
            Error::PermissionDenied => libc::EACCES,
            Error::Again => libc::EAGAIN,
            Error::OutOfMemory => libc::ENOMEM,
            Error::NoDevice => libc::ENODEV,
            Error::NotSupported => libc::ENOTSUP,
            Error::NotFound => libc::ENOENT,
            Error::Other(e) => *e,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Load { library, reason } => write!(f, "cannot load {library}: {reason}"),
            Error::NoBackend => f.write_str(
                "gdr_open failed: no backend can map GPU memory (load the gdrdrv module, or set \
                 GDRAPI_USE_VULKAN=1 on machines without it; GDRCOPY_ENABLE_LOGGING=1 says why)",
            ),
            e => {
                let errno = e.errno();
                let text = std::io::Error::from_raw_os_error(errno).to_string();
                let text = text.split(" (os error").next().unwrap_or_default();
                write!(f, "{text} (errno {errno})")
            }
        }
    }
}

impl std::error::Error for Error {}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        match e {
            Error::Load { .. } | Error::NoBackend => {
                std::io::Error::new(std::io::ErrorKind::NotFound, e)
            }
            e => std::io::Error::from_raw_os_error(e.errno()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_round_trip() {
        for e in [
            libc::EINVAL,
            libc::EACCES,
            libc::EAGAIN,
            libc::ENOMEM,
            libc::ENODEV,
            libc::ENOTSUP,
            libc::ENOENT,
            libc::EIO,
            libc::EBUSY,
        ] {
            assert_eq!(Error::from_errno(e).errno(), e);
        }
        assert_eq!(Error::from_errno(libc::EIO), Error::Other(libc::EIO));
        assert_eq!(Error::NoBackend.errno(), libc::ENODEV);
    }

    #[test]
    fn messages_name_the_cause() {
        assert_eq!(
            Error::InvalidArgument.to_string(),
            "Invalid argument (errno 22)"
        );
        let e = Error::Load {
            library: "libgdrapi_ext.so.0",
            reason: "not found".into(),
        };
        assert_eq!(e.to_string(), "cannot load libgdrapi_ext.so.0: not found");
        assert!(Error::NoBackend.to_string().contains("GDRAPI_USE_VULKAN=1"));
        let io: std::io::Error = Error::OutOfMemory.into();
        assert_eq!(io.raw_os_error(), Some(libc::ENOMEM));
    }
}
