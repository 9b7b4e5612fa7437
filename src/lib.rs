//! gdrapi-rs: a drop-in Rust implementation of `libgdrapi.so.2` (NVIDIA gdrcopy 2.6).
//!
//! One call reads straight down: C entry ([`ffi`]) -> argument and handle validation
//! ([`session`], against the records of [`registry`]) -> backend ([`backend`]) or copy
//! engine ([`copy`]) -> [`error::Error`] turned into an errno back at the C boundary.
//!
//! Modules:
//! - [`ffi`]: the exported C functions and `#[repr(C)]` types of `gdrapi.h`, each entry
//!   behind a panic boundary.
//! - [`session`]: `gdr_t` and `gdr_mh_t` records (with upstream's layouts), their
//!   validation, the per-handle state machine, fork detection.
//! - [`registry`]: never-freed slabs of records with a FIFO quarantine, so that any pointer
//!   C hands back can be checked without dereferencing foreign memory.
//! - [`backend`]: the pin/map mechanisms: [`backend::gdrdrv`] (ioctl + mmap on
//!   `/dev/gdrdrv`), [`backend::dmabuf`] (CUDA dma-buf export) and [`backend::vulkan`]
//!   (CUDA VMM memory exported as an fd, imported and mapped through Vulkan), with the drivers
//!   only they load at run time: [`backend::cuda`], the Vulkan driver of [`backend::vulkan`],
//!   and NVML ([`backend::nvml`], BAR1 figures for the log line of a failed pin).
//! - [`copy`]: the MMIO-safe copy kernels and fences of `gdr_copy_to/from_mapping`.
//! - [`process`]: which process is calling (a token a child never shares with its parent).
//! - [`sys`]: thin `Result` wrappers over the C library's `open`, `ioctl`, `mmap`,
//!   `munmap`, `madvise`, `close`, `sysconf`.
//! - [`log`]: upstream's `GDRCOPY_ENABLE_LOGGING` / `GDRCOPY_LOG_LEVEL` logging (from
//!   `gdrapi-boundary`, shared with `libgdrapi_ext.so.0`, as is the `entry!` macro).
//! - [`error`]: the typed error and its errno mapping.

#[macro_use]
extern crate gdrapi_boundary;
pub use gdrapi_boundary::log;
pub use gdrapi_boundary::{gdr_dbg, gdr_err, gdr_info, gdr_warn};
pub mod backend;
pub mod copy;
pub mod error;
pub mod ffi;
pub(crate) mod hint;
pub mod process;
pub(crate) mod registry;
pub(crate) mod session;
pub mod sys;
