//! The emulated GPU's BAR1 aperture: `GDRSIM_BAR1_SIZE` bytes (default: the VRAM size, as on a
//! GPU with a resizable BAR), of which `GDRSIM_BAR1_RESERVED` stand for other users (other
//! processes, the driver). The pins of this process that are not invalidated use the rest,
//! rounded to 64 KiB as pinned, and so do its live dma-buf exports and the physical
//! allocations its Vulkan stand-in imports (each allocation with a live import once, at its
//! whole size; mappings use none); a pin that does not fit fails with ENOMEM, an export with
//! CUDA_ERROR_OUT_OF_MEMORY and an import with VK_ERROR_OUT_OF_DEVICE_MEMORY, the errors
//! users of a full BAR1 report. Like the GPU, the accounting is per process. The NVML library
//! beside the emulator (`gdrsim/nvml`) reads the figures through [`gdrsim_bar1_info`].

use crate::config;
use crate::state::STATE;
use libc::c_int;

/// BAR1 bytes in use now: `GDRSIM_BAR1_RESERVED` plus the live pins, dma-buf exports and
/// Vulkan stand-in imports (per allocation) of this process.
pub fn used() -> u64 {
    let st = STATE.lock();
    let pins = st.gpu().map_or(0, |g| st.bar1_used(g.gen));
    config::get().bar1_reserved.saturating_add(pins)
}

/// Whether `more` bytes still fit in BAR1 next to the pins' `pinned` bytes.
pub fn fits(pinned: u64, more: u64) -> bool {
    let cfg = config::get();
    pinned
        .checked_add(more)
        .and_then(|n| n.checked_add(cfg.bar1_reserved))
        .is_some_and(|n| n <= cfg.bar1_size())
}

/// `gdrsim_bar1_info`: the BAR1 size, the bytes of it in use (see the module) and the VRAM
/// size. Returns 0, or -1 when an out-pointer is NULL.
///
/// # Safety
///
/// Each pointer is NULL or valid for a write of a `u64`.
#[no_mangle]
pub unsafe extern "C" fn gdrsim_bar1_info(
    total: *mut u64,
    used_out: *mut u64,
    vram: *mut u64,
) -> c_int {
    gdrapi_boundary::guard_or(
        "gdrsim_bar1_info",
        || -1,
        || {
            if total.is_null() || used_out.is_null() || vram.is_null() {
                return -1;
            }
            let t = config::get().bar1_size();
            let u = used().min(t);
            // SAFETY: all are non-null and, by the contract, valid for a u64 write.
            unsafe {
                total.write_unaligned(t);
                used_out.write_unaligned(u);
                vram.write_unaligned(config::get().vram_size);
            }
            0
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_reports_the_configured_size_and_refuses_null() {
        let (mut t, mut u, mut v) = (0u64, u64::MAX, 0u64);
        // SAFETY: valid out-pointers.
        assert_eq!(unsafe { gdrsim_bar1_info(&mut t, &mut u, &mut v) }, 0);
        assert_eq!(t, config::get().bar1_size());
        assert_eq!(v, config::get().vram_size);
        assert!(u <= t);
        // SAFETY: NULL is allowed and refused.
        let r = unsafe { gdrsim_bar1_info(std::ptr::null_mut(), &mut u, &mut v) };
        assert_eq!(r, -1);
        assert!(fits(0, t - config::get().bar1_reserved));
        assert!(!fits(1, t));
    }
}
