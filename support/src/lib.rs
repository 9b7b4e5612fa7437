//! Plumbing shared by the tools, the benchmarks and the emulator, kept apart from the library
//! so that none of them pulls `libgdrapi`'s exported symbols in:
//!
//! - [`dl`]: run-time loading (`dlopen`/`dlsym` through libloading) and typed function lookup;
//! - [`cuda`]: the CUDA driver API's declarations, the loaded driver and a primary context;
//! - [`vk`], [`bar`]: the Vulkan declarations and BAR memory from the Vulkan loader;
//! - [`gdr`]: libgdrapi's C types and functions as a program that loads it sees them;
//! - [`nvml`]: NVML's BAR1 and memory figures per GPU (declarations from `gdrapi_abi::nvml`);
//! - [`size`]: byte counts with binary suffixes (`16M`), as the programs and settings take them;
//! - [`error`]: the error type of the Vulkan and CUDA steps.

pub mod bar;
pub mod cuda;
pub mod dl;
pub mod error;
pub mod gdr;
pub mod nvml;
pub mod size;
pub use gdrapi_abi::vk;

pub use error::{Error, Result};
