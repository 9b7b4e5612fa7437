//! gdrdrv's parameter structs (`gdrapi_abi::gdrdrv`) read from and written to the caller's
//! memory, and what the emulated driver adds to its ABI: its handle limit and timings.

use crate::uaccess;
use gdrapi_abi::gdrdrv::{
    AttrParams, CbFlagParams, InfoParams, InfoV2Params, PinParams, PinV2Params,
    ReqMappingTypeParams, UnpinParams, VersionParams,
};
use libc::{c_int, c_void};

/// Handle numbers are page counts; beyond 52 bits the file is exhausted.
pub(super) const HANDLE_LIMIT: u64 = 1 << 52;

/// A parameter struct of gdrdrv's, copied whole between the caller and the driver.
///
/// # Safety
/// The type is `repr(C)` integers without implicit padding: every byte is a field's, and any
/// bytes are a valid value.
pub(super) unsafe trait Params: Copy + Default {}

// SAFETY: (this impl and the ones below) each is gdrapi_abi's `repr(C)` struct of u32 and u64
// fields with its padding named as a field (abi's tests check the sizes).
unsafe impl Params for PinParams {}
// SAFETY: see above.
unsafe impl Params for PinV2Params {}
// SAFETY: see above.
unsafe impl Params for UnpinParams {}
// SAFETY: see above.
unsafe impl Params for CbFlagParams {}
// SAFETY: see above.
unsafe impl Params for InfoParams {}
// SAFETY: see above.
unsafe impl Params for InfoV2Params {}
// SAFETY: see above.
unsafe impl Params for AttrParams {}
// SAFETY: see above.
unsafe impl Params for ReqMappingTypeParams {}
// SAFETY: see above.
unsafe impl Params for VersionParams {}

/// The bytes of `p`.
fn bytes_mut<T: Params>(p: &mut T) -> &mut [u8] {
    // SAFETY: `p` is a valid, exclusively borrowed `T` whose every byte belongs to a field and
    // may hold any value (the `Params` contract), so it may be viewed and written as bytes.
    unsafe { std::slice::from_raw_parts_mut((p as *mut T).cast::<u8>(), size_of::<T>()) }
}

/// Copies a whole parameter struct in from the caller (EFAULT where it cannot be read).
pub(super) fn copy_in<T: Params>(arg: *mut c_void) -> Result<T, c_int> {
    let mut p = T::default();
    uaccess::read(arg as u64, bytes_mut(&mut p))?;
    Ok(p)
}

/// Copies a whole parameter struct back to the caller (EFAULT where it cannot be written).
pub(super) fn copy_out<T: Params>(arg: *mut c_void, mut p: T) -> Result<(), c_int> {
    uaccess::write(arg as u64, bytes_mut(&mut p))
}

/// Host page size and its shift.
pub fn page_shift() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        (p as u64).trailing_zeros()
    } else {
        12
    }
}

pub(super) fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc is available on every x86-64 CPU and has no side effects.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    0
}
