//! gdrdrv's user-space ABI: request values, mapping types, and reading and writing the
//! parameter structs in the caller's memory.

use crate::uaccess;
use libc::{c_int, c_ulong, c_void};

/// ioctl type of gdrdrv.
pub const IOCTL_TYPE: c_ulong = 0xDA;

/// Request values (x86-64 and aarch64 share the generic `_IOWR` encoding).
pub const PIN_BUFFER: c_ulong = 0xC028_DA01;

/// See [`PIN_BUFFER`].
pub const UNPIN_BUFFER: c_ulong = 0xC008_DA02;

/// See [`PIN_BUFFER`].
pub const GET_CB_FLAG: c_ulong = 0xC008_DA03;

/// See [`PIN_BUFFER`].
pub const GET_INFO: c_ulong = 0xC008_DA04;

/// See [`PIN_BUFFER`].
pub const GET_INFO_V2: c_ulong = 0xC008_DA05;

/// See [`PIN_BUFFER`].
pub const GET_ATTR: c_ulong = 0xC008_DA06;

/// See [`PIN_BUFFER`].
pub const PIN_BUFFER_V2: c_ulong = 0xC020_DA07;

/// See [`PIN_BUFFER`].
pub const REQ_MAPPING_TYPE: c_ulong = 0xC008_DA08;

/// See [`PIN_BUFFER`].
pub const GET_VERSION: c_ulong = 0xC008_DAFF;

/// Mapping types (`gdr_mr_type_t`).
pub const MR_NONE: u32 = 0;

/// Write-combining.
pub const MR_WC: u32 = 1;

/// Cached.
pub const MR_CACHING: u32 = 2;

/// Device (uncached).
pub const MR_DEVICE: u32 = 3;

/// PIN_BUFFER_V2 flag: pin through BAR1 (PCIe) even on coherent platforms.
pub(super) const FLAG_FORCE_PCIE: u32 = 1;

/// The oldest library version the driver accepts (GET_VERSION).
pub(super) const MIN_API_VERSION: u32 = 0x0002_0000;

/// Handle numbers are page counts; beyond 52 bits the file is exhausted.
pub(super) const HANDLE_LIMIT: u64 = 1 << 52;

/// The request's name (for fault injection) and the driver minor version that introduced it.
pub(super) fn request_info(req: c_ulong) -> Option<(&'static str, u32)> {
    Some(match req {
        PIN_BUFFER => ("PIN_BUFFER", 0),
        UNPIN_BUFFER => ("UNPIN_BUFFER", 0),
        GET_CB_FLAG => ("GET_CB_FLAG", 0),
        GET_INFO => ("GET_INFO", 0),
        GET_INFO_V2 => ("GET_INFO_V2", 4),
        GET_ATTR => ("GET_ATTR", 5),
        PIN_BUFFER_V2 => ("PIN_BUFFER_V2", 5),
        REQ_MAPPING_TYPE => ("REQ_MAPPING_TYPE", 5),
        GET_VERSION => ("GET_VERSION", 0),
        _ => return None,
    })
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

/// Copies the first `N` bytes of a parameter struct in.
pub(super) fn copy_in<const N: usize>(arg: *mut c_void) -> Result<[u8; N], c_int> {
    let mut b = [0u8; N];
    uaccess::read(arg as u64, &mut b)?;
    Ok(b)
}

pub(super) fn u64_at(b: &[u8], off: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[off..off + 8]);
    u64::from_ne_bytes(x)
}

pub(super) fn u32_at(b: &[u8], off: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[off..off + 4]);
    u32::from_ne_bytes(x)
}

pub(super) fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_ne_bytes());
}

pub(super) fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
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
