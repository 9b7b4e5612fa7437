//! Write-combined, page-locked host memory from the CUDA driver: `cuMemHostAlloc` with
//! `CU_MEMHOSTALLOC_WRITECOMBINED | CU_MEMHOSTALLOC_DEVICEMAP`. The CPU maps such pages
//! write-combining, much as it maps a BAR, so the copy kernels can be timed on them without
//! gdrdrv; the device pointer lets the bytes be checked from the GPU's side. `barbench
//! --host-wc` and `gdrapi-bench`'s second table both allocate it here.
//!
//! Known limit: a virtual machine may map this memory cached (reads then run at cached speed),
//! so it is no stand-in for a BAR there.

use crate::cuda::{Cuda, HostMemory, MEMHOSTALLOC_DEVICEMAP, MEMHOSTALLOC_WRITECOMBINED};
use crate::Result;
use std::ffi::c_uint;

/// The `cuMemHostAlloc` flags used.
pub const FLAGS: c_uint = MEMHOSTALLOC_WRITECOMBINED | MEMHOSTALLOC_DEVICEMAP;

/// Allocates `len` bytes (rounded up to whole pages) through `cuda`'s context and fills them
/// with `0x5c`, so that reads have defined contents and no timed copy pays a first touch.
pub fn alloc(cuda: &Cuda, len: usize) -> Result<HostMemory<'_>> {
    let len = len.div_ceil(4096).max(1) * 4096;
    let mem = cuda.host_alloc(len, FLAGS)?;
    // SAFETY: `len` writable bytes were just allocated at `mem.as_ptr()`.
    unsafe { std::ptr::write_bytes(mem.as_ptr(), 0x5c, mem.len()) };
    Ok(mem)
}

/// Opens the system's `libcuda.so.1` on device 0 for [`alloc`]; the error says what is
/// missing (the library, a function, a device).
pub fn open_driver() -> Result<Cuda> {
    Cuda::open(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_are_write_combined_and_device_mapped() {
        assert_eq!(FLAGS, 0x6);
    }

    #[test]
    fn without_a_driver_the_error_names_it() {
        let e = Cuda::open_at("libcuda-missing-for-this-test.so.1", None)
            .err()
            .expect("no such library");
        assert!(
            e.to_string().contains("libcuda-missing-for-this-test.so.1"),
            "{e}"
        );
    }
}
