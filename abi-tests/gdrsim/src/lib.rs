//! gdrsim: an emulator of `/dev/gdrdrv` and of the CUDA driver API.
