//! The test interface of `gdrsim.h`: counters and run-time fault injection.

use crate::counters::Counters;
use crate::state::STATE;
use libc::{c_char, c_int, size_t};
use std::ffi::CStr;

/// `gdrsim_get_counters`: copies `min(out_size, sizeof(struct gdrsim_counters))` bytes of the
/// current counters to `out`; 0, or EINVAL for a NULL `out`.
///
/// # Safety
///
/// `gdrsim.h`'s contract for `gdrsim_get_counters`: `out` is NULL or writable for one
/// `Counters`.
#[no_mangle]
pub unsafe extern "C" fn gdrsim_get_counters(out: *mut Counters, out_size: size_t) -> c_int {
    gdrapi_boundary::guard_or(
        "gdrsim_get_counters",
        || libc::EIO,
        || {
            if out.is_null() {
                return libc::EINVAL;
            }
            let snapshot = {
                let emulated = STATE.lock().counters();
                if crate::kernel::active() {
                    crate::kernel::counters::snapshot(emulated)
                } else {
                    emulated
                }
            };
            let n = out_size.min(std::mem::size_of::<Counters>());
            // SAFETY: the caller provides `out_size` writable bytes at `out`; we copy at most that.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (&snapshot as *const Counters).cast::<u8>(),
                    out.cast::<u8>(),
                    n,
                )
            };
            0
        },
    )
}

/// `gdrsim_set_fail`: replaces the fault-injection spec (NULL or "" clears it); 0, or EINVAL
/// for a bad spec (the previous spec then stays).
///
/// # Safety
///
/// `gdrsim.h`'s contract for `gdrsim_set_fail`: `spec` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn gdrsim_set_fail(spec: *const c_char) -> c_int {
    gdrapi_boundary::guard_or(
        "gdrsim_set_fail",
        || libc::EIO,
        || {
            let text = if spec.is_null() {
                None
            } else {
                // SAFETY: a non-NULL NUL-terminated string from the caller.
                match unsafe { CStr::from_ptr(spec) }.to_str() {
                    Ok(s) => Some(s),
                    Err(_) => return libc::EINVAL,
                }
            };
            match crate::fail::set(text) {
                Ok(()) => 0,
                Err(_) => libc::EINVAL,
            }
        },
    )
}
