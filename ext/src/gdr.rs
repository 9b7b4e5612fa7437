//! The public functions of `libgdrapi.so.2` this library calls, linked (`DT_NEEDED`, see
//! `build.rs`), and the one fact it reads beyond them: which backend a `gdr_t` uses, the
//! `cache_backend` field at offset 40 of `struct gdr` (gdrcopy's internal layout, which its
//! own tests read and the library keeps: 0 gdrdrv, 1 DMA-BUF, 2 the Vulkan import).
//!
//! In the crate's unit tests the functions are stand-ins that fail (EINVAL, NULL): the tests
//! exercise the pure parts and need no library at run time.

use gdrapi_support::gdr;
pub use gdrapi_support::gdr::{gdr_info_v2_t, gdr_mh_t, gdr_t};
use std::ffi::{c_int, c_ulong, c_void};

#[cfg(not(test))]
extern "C" {
    pub fn gdr_open() -> gdr_t;
    pub fn gdr_close(g: gdr_t) -> c_int;
    pub fn gdr_pin_buffer(
        g: gdr_t,
        addr: c_ulong,
        size: usize,
        p2p_token: u64,
        va_space: u32,
        handle: *mut gdr_mh_t,
    ) -> c_int;
    pub fn gdr_unpin_buffer(g: gdr_t, handle: gdr_mh_t) -> c_int;
    pub fn gdr_map(g: gdr_t, handle: gdr_mh_t, va: *mut *mut c_void, size: usize) -> c_int;
    pub fn gdr_unmap(g: gdr_t, handle: gdr_mh_t, va: *mut c_void, size: usize) -> c_int;
    pub fn gdr_get_info_v2(g: gdr_t, handle: gdr_mh_t, info: *mut gdr_info_v2_t) -> c_int;
    pub fn gdr_copy_to_mapping(
        handle: gdr_mh_t,
        map_d_ptr: *mut c_void,
        h_ptr: *const c_void,
        size: usize,
    ) -> c_int;
    pub fn gdr_copy_from_mapping(
        handle: gdr_mh_t,
        h_ptr: *mut c_void,
        map_d_ptr: *const c_void,
        size: usize,
    ) -> c_int;
}

/// Which backend a `gdr_t` uses: `struct gdr`'s `cache_backend` (GDRX_BACKEND_*).
pub const BACKEND_GDRDRV: i32 = gdr::CACHE_BACKEND_GDRDRV as i32;
/// The DMA-BUF backend.
pub const BACKEND_DMABUF: i32 = gdr::CACHE_BACKEND_DMABUF as i32;
/// The Vulkan import (this library's third backend).
pub const BACKEND_VULKAN: i32 = gdr::CACHE_BACKEND_VULKAN as i32;

/// The backend of `g`, a `gdr_t` that `gdr_open` returned and that is still open.
///
/// # Safety
/// `g` came from `gdr_open` and has not been closed: it points to the library's `struct gdr`
/// (48 bytes, gdrcopy's layout, which libgdrapi keeps for gdrcopy's tests).
pub unsafe fn backend_of(g: gdr_t) -> i32 {
    // SAFETY: the caller's contract; the field is a 4-byte enum at offset 40, aligned.
    unsafe {
        (g as *const u8)
            .add(gdr::CACHE_BACKEND_OFFSET)
            .cast::<i32>()
            .read()
    }
}

#[cfg(test)]
pub use stand_ins::*;

/// What the unit tests link instead of libgdrapi: every call fails.
#[cfg(test)]
#[allow(clippy::missing_safety_doc)]
mod stand_ins {
    use super::*;

    pub unsafe fn gdr_open() -> gdr_t {
        std::ptr::null_mut()
    }
    pub unsafe fn gdr_close(_: gdr_t) -> c_int {
        libc::EINVAL
    }
    pub unsafe fn gdr_pin_buffer(
        _: gdr_t,
        _: c_ulong,
        _: usize,
        _: u64,
        _: u32,
        _: *mut gdr_mh_t,
    ) -> c_int {
        libc::EINVAL
    }
    pub unsafe fn gdr_unpin_buffer(_: gdr_t, _: gdr_mh_t) -> c_int {
        libc::EINVAL
    }
    pub unsafe fn gdr_map(_: gdr_t, _: gdr_mh_t, _: *mut *mut c_void, _: usize) -> c_int {
        libc::EINVAL
    }
    pub unsafe fn gdr_unmap(_: gdr_t, _: gdr_mh_t, _: *mut c_void, _: usize) -> c_int {
        libc::EINVAL
    }
    pub unsafe fn gdr_get_info_v2(_: gdr_t, _: gdr_mh_t, _: *mut gdr_info_v2_t) -> c_int {
        libc::EINVAL
    }
    pub unsafe fn gdr_copy_to_mapping(
        _: gdr_mh_t,
        _: *mut c_void,
        _: *const c_void,
        _: usize,
    ) -> c_int {
        libc::EINVAL
    }
    pub unsafe fn gdr_copy_from_mapping(
        _: gdr_mh_t,
        _: *mut c_void,
        _: *const c_void,
        _: usize,
    ) -> c_int {
        libc::EINVAL
    }
}
