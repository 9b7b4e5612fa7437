//! BAR1 figures for the log line of a failed pin. NVML (`libnvidia-ml.so.1`) is dlopened only
//! after a pin has failed and only when that line will be printed, and closed again: never a
//! link dependency, and no cost on any other path.

use super::dl::Library;
use gdrapi_abi::nvml::{nvmlDevice_t, pfn, Memory, LIBNVML, NVML_SUCCESS};
use std::ffi::{c_uint, CString};

/// One GPU's BAR1 aperture, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bar1 {
    /// NVML's index of the GPU.
    pub gpu: u32,
    /// Size of the aperture.
    pub total: u64,
    /// Bytes of it in use.
    pub used: u64,
}

impl Bar1 {
    /// Bytes still free.
    pub fn free(&self) -> u64 {
        self.total.saturating_sub(self.used)
    }

    /// Less than `need` bytes, or less than a tenth of the aperture, is left.
    pub fn nearly_full(&self, need: u64) -> bool {
        self.free() < need || self.free() < self.total / 10
    }
}

/// What to add to the log line of a pin of `size` bytes that failed: the fullest GPU's BAR1
/// figures (`"BAR1 nearly full: X of Y MiB used"` when that is the likely cause), or `None`
/// without NVML or when ERR lines are not logged (NVML is loaded only for a line printed).
pub fn note_for_failed_pin(size: u64) -> Option<String> {
    if !crate::log::enabled(crate::log::Level::Error) {
        return None;
    }
    let bars = query()?;
    let b = bars.iter().min_by_key(|b| b.free())?;
    let which = if bars.len() > 1 {
        format!(" on GPU {}", b.gpu)
    } else {
        String::new()
    };
    let (used, total) = (b.used >> 20, b.total >> 20);
    Some(if b.nearly_full(size) {
        format!(
            "BAR1 nearly full: {used} of {total} MiB used{which}; unpin buffers, or use a GPU \
             with a larger (resizable) BAR1"
        )
    } else {
        format!("BAR1 is not the limit: {used} of {total} MiB used{which}")
    })
}

/// Every GPU's BAR1 figures from NVML, or `None` when NVML cannot be loaded or answers no GPU.
pub fn query() -> Option<Vec<Bar1>> {
    let lib = Library::open_first(&[&CString::new(LIBNVML).ok()?], libc::RTLD_NOW).ok()?;
    // SAFETY: each symbol is NVML's function of that name, whose C signature the type states;
    // they are called only before `lib` is closed, at the end of this function.
    let (init, shutdown, count, handle, bar1) = unsafe {
        (
            lib.function::<pfn::nvmlInit_v2>(c"nvmlInit_v2")?,
            lib.function::<pfn::nvmlShutdown>(c"nvmlShutdown")?,
            lib.function::<pfn::nvmlDeviceGetCount_v2>(c"nvmlDeviceGetCount_v2")?,
            lib.function::<pfn::nvmlDeviceGetHandleByIndex_v2>(c"nvmlDeviceGetHandleByIndex_v2")?,
            lib.function::<pfn::nvmlDeviceGetBAR1MemoryInfo>(c"nvmlDeviceGetBAR1MemoryInfo")?,
        )
    };
    // SAFETY: nvmlInit_v2 takes no arguments.
    if unsafe { init() } != NVML_SUCCESS {
        return None;
    }
    let mut n: c_uint = 0;
    let mut out = Vec::new();
    // SAFETY: `n` is a valid out-pointer.
    if unsafe { count(&mut n) } == NVML_SUCCESS {
        for i in 0..n {
            let mut dev: nvmlDevice_t = std::ptr::null_mut();
            let mut m = Memory::default();
            // SAFETY: valid out-pointers; `dev` is the handle NVML gave for index `i`.
            let ok =
                unsafe { handle(i, &mut dev) == NVML_SUCCESS && bar1(dev, &mut m) == NVML_SUCCESS };
            if ok {
                out.push(Bar1 {
                    gpu: i,
                    total: m.total,
                    used: m.used,
                });
            }
        }
    }
    // SAFETY: balances the successful nvmlInit_v2 above.
    unsafe { shutdown() };
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearly_full_when_the_request_or_a_tenth_does_not_fit() {
        let b = Bar1 {
            gpu: 0,
            total: 256 << 20,
            used: 200 << 20,
        };
        assert!(!b.nearly_full(32 << 20));
        assert!(b.nearly_full(64 << 20));
        let b = Bar1 {
            gpu: 0,
            total: 256 << 20,
            used: 240 << 20,
        };
        assert!(b.nearly_full(0));
        let b = Bar1 {
            gpu: 0,
            total: 1 << 20,
            used: 2 << 20,
        };
        assert_eq!(b.free(), 0);
    }
}
