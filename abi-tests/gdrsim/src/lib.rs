//! gdrsim: an emulator of `/dev/gdrdrv` (gdrdrv 2.0 .. 2.6) and of the CUDA driver API, built
//! as `libcuda.so.1`. Loaded with `LD_PRELOAD`, it interposes the C library's
//! `open`/`ioctl`/`mmap`/`munmap`/`close` for the device node and provides a fake GPU whose
//! memory is a per-process memfd, so that gdrcopy's programs run on machines without a GPU.
//! Settings are `GDRSIM_*` environment variables (see the README); the test interface is
//! declared in `include/gdrsim.h`.

pub mod config;
pub mod counters;
pub mod cuda;
pub mod driver;
pub mod fail;
pub mod gpu;
pub mod intercept;
pub mod ranges;
pub mod real;
pub mod state;
pub mod testapi;
pub mod uaccess;
