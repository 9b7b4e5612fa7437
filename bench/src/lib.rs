//! Real GPU memory seen through the PCIe BAR, without gdrdrv: Vulkan memory that is both
//! device-local and host-visible, mapped with `vkMapMemory` ([`bar`]), exported as an opaque
//! fd and imported into CUDA ([`cuda`]) so the GPU's view of the same bytes can be checked.
//!
//! Everything is loaded at run time (`libvulkan.so.1`, `libcuda.so.1`, and optionally
//! upstream's `libgdrapi.so.2.6` for [`upstream`] timings), so the crate builds anywhere; on a
//! machine without a GPU, Mesa's lavapipe (a CPU Vulkan device) exercises the same code.
//! The `barbench` binary checks and times copies through such a mapping.

pub mod bar;
#[cfg(feature = "copy")]
pub mod copiers;
pub mod cuda;
pub mod dl;
pub mod error;
pub mod pattern;
pub mod smaps;
pub mod upstream;
#[cfg(feature = "copy")]
pub mod verify;
pub mod vk;

pub use error::{Error, Result};
