//! What the workspace's C libraries share at their boundary with C, so that
//! `libgdrapi.so.2` and `libgdrapi_ext.so.0` behave alike where a caller can tell, and so that
//! no panic of any shared library of the workspace (the emulator's included) unwinds into C:
//!
//! - [`entry!`]: how an exported function is written (`#[no_mangle] pub unsafe extern "C"`,
//!   its C name as `FUNC`, its body inside [`guard`], which turns a panic into a log line and
//!   the return type's [`OnPanic`] failure value, or the value the entry names with
//!   `on_panic`, through [`guard_or`]); [`testing`] makes an entry panic in its crate's tests;
//! - [`log`]: upstream's logging (`GDRCOPY_ENABLE_LOGGING`, `GDRCOPY_LOG_LEVEL`, its prefixes),
//!   with the macros [`gdr_dbg!`], [`gdr_info!`], [`gdr_warn!`], [`gdr_err!`];
//! - [`errno`]: the errno a failed CUDA call is reported as.
//!
//! No item here is exported from a shared object by itself: only what a crate defines with
//! [`entry!`] is.

#[macro_use]
pub mod log;
pub mod errno;
mod guard;
pub mod testing;

pub use guard::{guard, guard_or, OnPanic};
