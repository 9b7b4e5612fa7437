//! Declarations of the foreign interfaces the workspace speaks, each written once: the
//! library, the emulator, the tools and the benchmarks take them from here. Plain data, `repr(C)`
//! structures and function pointer types only; nothing is linked or loaded here, so the
//! library can depend on this crate and still need only libc at run time.
//!
//! - [`cuda`]: the CUDA driver API's types, codes, constants and structures (checked against
//!   `cuda.h`);
//! - [`gdr`]: the C types and constants of `gdrapi.h`, the library's public API (checked
//!   against `include/gdrapi.h`);
//! - [`gdrdrv`]: the gdrdrv kernel driver's ioctl ABI (checked against `include/gdrdrv_abi.h`);
//! - [`nvml`]: NVML's memory figures and the prototypes loaded (checked against `nvml.h`);
//! - [`vk`]: Vulkan's declarations, from `ash`, and the choice of the memory type that maps
//!   VRAM through the PCIe BAR.

#![no_std]

pub mod cuda;
pub mod gdr;
pub mod gdrdrv;
pub mod nvml;
pub mod vk;
