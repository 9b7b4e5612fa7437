//! The benchmarks' shared code: copy methods to compare ([`copiers`], [`upstream`]), checks of
//! a copy against a second view of the memory ([`verify`], [`pattern`]), the smaps line of a
//! mapping ([`smaps`]), and the write-combined host memory both programs time ([`hostwc`]).
//!
//! The Vulkan and CUDA loaders come from `gdrapi-support` (re-exported here as [`bar`],
//! [`cuda`], [`vk`]); everything is loaded at run time, so the crate builds anywhere and, on a
//! machine without a GPU, Mesa's lavapipe (a CPU Vulkan device) exercises the same code.

pub mod copiers;
pub mod hostwc;
pub mod pattern;
pub mod smaps;
pub mod upstream;
pub mod verify;

pub use gdrapi_support::{bar, cuda, error, vk, Error, Result};

/// A byte count as the programs take it (`gdrapi-support`'s [`size::parse`](gdrapi_support::size::parse):
/// digits with an optional binary `K`, `M`, `G` or `T`); `None` for anything else or a count
/// that does not fit a `usize`.
pub fn parse_size(s: &str) -> Option<usize> {
    gdrapi_support::size::parse(s).and_then(|n| usize::try_from(n).ok())
}
