//! gdrapi-rs: a drop-in Rust implementation of `libgdrapi.so.2` (NVIDIA gdrcopy 2.6).
//!
//! One call reads straight down: C entry (`ffi`) -> argument and handle validation
//! (`registry`) -> session (`session`) -> backend ([`backend`]) or copy engine ([`copy`])
//! -> [`error::Error`] turned into an errno back at the C boundary.

#[macro_use]
pub mod log;
pub mod backend;
pub mod copy;
pub mod cuda;
pub mod error;
