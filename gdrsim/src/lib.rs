//! gdrsim: an emulator of `/dev/gdrdrv` (gdrdrv 2.0 .. 2.6) and of the CUDA driver API, built
//! as `libcuda.so.1`. Loaded with `LD_PRELOAD`, it interposes the C library's
//! `open`/`ioctl`/`mmap`/`munmap`/`close` for the device node and provides a fake GPU whose
//! memory is a per-process memfd, so that gdrcopy's programs run on machines without a GPU.
//! Settings are `GDRSIM_*` environment variables (see the README); the test interface is
//! declared in `include/gdrsim.h`.

#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod bar1;
mod config;
mod counters;
mod cuda;
mod driver;
mod fail;
mod forklock;
mod gpu;
mod intercept;
mod kernel;
mod node;
mod procfs;
mod procmaps;
mod ranges;
mod real;
mod state;
mod testapi;
mod uaccess;
mod vkstandin;
mod vulkan;
