//! The C ABI of `libgdrapi.so.2`: the 17 functions of gdrcopy 2.6 plus the
//! `gdr_copy_to_mapped` / `gdr_copy_from_mapped` aliases, and the public `#[repr(C)]` types.
//!
//! This is the only module with exported `extern "C"` items. Every entry runs inside
//! [`boundary::entry`] (a panic returns EINVAL or NULL and is logged), checks its pointer
//! arguments (a NULL output pointer is EINVAL, logged), hands `gdr_t` / `gdr_mh_t` values to
//! [`crate::session`], which validates them against the library's registry before use, and
//! turns [`crate::error::Error`] into a positive errno value.

pub mod types;

mod boundary;

use crate::backend::{Info, MappingType, PinRequest};
use crate::{copy, session};
use boundary::{entry, null_arg, status};
use std::os::raw::{c_char, c_int, c_uint, c_ulong, c_void};
use std::ptr::addr_of_mut;
pub use types::*;

/// Opens a session on gdrdrv (or the DMA-BUF backend); NULL on failure (logged).
#[no_mangle]
pub extern "C" fn gdr_open() -> gdr_t {
    entry("gdr_open", std::ptr::null_mut(), || match session::open() {
        Ok(addr) => addr as gdr_t,
        Err(_) => std::ptr::null_mut(),
    })
}

/// Unmaps and unpins every buffer `g` still holds, closes the driver and frees `g`.
/// Returns 0 or the first error; EINVAL for an invalid or already closed `g`.
#[no_mangle]
pub extern "C" fn gdr_close(g: gdr_t) -> c_int {
    entry("gdr_close", libc::EINVAL, || {
        status(session::close(g as usize))
    })
}

fn pin_common(func: &str, g: gdr_t, req: PinRequest, handle: *mut gdr_mh_t) -> c_int {
    if handle.is_null() {
        return null_arg(func, "handle");
    }
    match session::pin(g as usize, &req) {
        Ok(h) => {
            // SAFETY: `handle` is non-NULL and, by the API contract, points to a writable
            // gdr_mh_t.
            unsafe { handle.write(gdr_mh_t { h: h as c_ulong }) };
            0
        }
        Err(e) => e.errno(),
    }
}

/// Pins `size` bytes of GPU memory at `addr` (v1 API, with P2P tokens) and writes the new
/// handle to `*handle`. Returns 0 or an errno value.
///
/// # Safety
/// Pointer arguments must be NULL or valid for the access the C API documents.
#[no_mangle]
pub unsafe extern "C" fn gdr_pin_buffer(
    g: gdr_t,
    addr: c_ulong,
    size: usize,
    p2p_token: u64,
    va_space: u32,
    handle: *mut gdr_mh_t,
) -> c_int {
    entry("gdr_pin_buffer", libc::EINVAL, || {
        let req = PinRequest {
            addr,
            size: size as u64,
            flags: 0,
            p2p_token,
            va_space,
        };
        pin_common("gdr_pin_buffer", g, req, handle)
    })
}

/// Pins `size` bytes of GPU memory at `addr` with `gdr_pin_flags_t` `flags` and writes the
/// new handle to `*handle`. Returns 0 or an errno value.
///
/// # Safety
/// Pointer arguments must be NULL or valid for the access the C API documents.
#[no_mangle]
pub unsafe extern "C" fn gdr_pin_buffer_v2(
    g: gdr_t,
    addr: c_ulong,
    size: usize,
    flags: u32,
    handle: *mut gdr_mh_t,
) -> c_int {
    entry("gdr_pin_buffer_v2", libc::EINVAL, || {
        let req = PinRequest {
            addr,
            size: size as u64,
            flags,
            p2p_token: 0,
            va_space: 0,
        };
        pin_common("gdr_pin_buffer_v2", g, req, handle)
    })
}

/// Unpins `handle` (unmapping it first if still mapped); the handle is invalid afterwards,
/// even when the driver reports an error.
#[no_mangle]
pub extern "C" fn gdr_unpin_buffer(g: gdr_t, handle: gdr_mh_t) -> c_int {
    entry("gdr_unpin_buffer", libc::EINVAL, || {
        status(session::unpin(g as usize, handle.h))
    })
}

/// Writes 1 to `*flag` if the memory behind `handle` was invalidated, else 0.
///
/// # Safety
/// Pointer arguments must be NULL or valid for the access the C API documents.
#[no_mangle]
pub unsafe extern "C" fn gdr_get_callback_flag(
    g: gdr_t,
    handle: gdr_mh_t,
    flag: *mut c_int,
) -> c_int {
    entry("gdr_get_callback_flag", libc::EINVAL, || {
        if flag.is_null() {
            return null_arg("gdr_get_callback_flag", "flag");
        }
        match session::callback_flag(g as usize, handle.h) {
            Ok(f) => {
                // SAFETY: `flag` is non-NULL and points to a writable int (API contract).
                unsafe { flag.write(c_int::from(f)) };
                0
            }
            Err(e) => e.errno(),
        }
    })
}

/// Bits 0 (`mapped`) and 1 (`wc_mapping`) of `old`, replaced from `i`; other bits kept.
fn info_bits(old: c_uint, i: &Info) -> c_uint {
    let mut v = old & !(INFO_MAPPED_BIT | INFO_WC_MAPPING_BIT);
    if i.mapped {
        v |= INFO_MAPPED_BIT;
    }
    if i.wc_mapping {
        v |= INFO_WC_MAPPING_BIT;
    }
    v
}

/// An info struct the `gdr_get_info*` entries fill: the legacy 40-byte v1 layout, or v2,
/// which extends it with `mapping_type`.
trait InfoOut {
    /// Whether the driver is queried the legacy (v1) way.
    const LEGACY: bool;

    /// Writes `i` into `*out` field by field, so that the bitfield unit's bits other than
    /// `mapped` and `wc_mapping` keep the caller's value and nothing past the struct is touched.
    ///
    /// # Safety
    /// `out` is non-NULL and valid for reads and writes of `Self`.
    unsafe fn write(out: *mut Self, i: &Info);
}

impl InfoOut for gdr_info_v1_t {
    const LEGACY: bool = true;

    unsafe fn write(out: *mut Self, i: &Info) {
        // SAFETY: the caller guarantees `out` is valid for `gdr_info_v1_t`; every write stays
        // inside it.
        unsafe {
            addr_of_mut!((*out).va).write(i.va);
            addr_of_mut!((*out).mapped_size).write(i.mapped_size);
            addr_of_mut!((*out).page_size).write(i.page_size);
            addr_of_mut!((*out).tm_cycles).write(i.tm_cycles);
            addr_of_mut!((*out).cycles_per_ms).write(i.cycles_per_ms);
            let bits = addr_of_mut!((*out).flags);
            bits.write(info_bits(bits.read(), i));
        }
    }
}

impl InfoOut for gdr_info_v2_t {
    const LEGACY: bool = false;

    unsafe fn write(out: *mut Self, i: &Info) {
        // SAFETY: the caller guarantees `out` is valid for `gdr_info_v2_t`, whose first 40
        // bytes have `gdr_info_v1_t`'s layout (checked in `types`' tests); `mapping_type`
        // lies inside the v2 struct.
        unsafe {
            gdr_info_v1_t::write(out.cast(), i);
            addr_of_mut!((*out).mapping_type).write(i.mapping_type);
        }
    }
}

/// The body of `gdr_get_info` / `gdr_get_info_v2`: EINVAL (logged) for a NULL `info`, else
/// what the driver reports for `handle`, written into `*info`.
fn get_info<T: InfoOut>(func: &str, g: gdr_t, handle: gdr_mh_t, info: *mut T) -> c_int {
    if info.is_null() {
        return null_arg(func, "info");
    }
    match session::info(g as usize, handle.h, T::LEGACY) {
        Ok(i) => {
            // SAFETY: `info` is non-NULL and, by the API contract, points to a writable `T`.
            unsafe { T::write(info, &i) };
            0
        }
        Err(e) => e.errno(),
    }
}

/// Fills `*info` (48 bytes) with what the driver reports for `handle`.
///
/// # Safety
/// Pointer arguments must be NULL or valid for the access the C API documents.
#[no_mangle]
pub unsafe extern "C" fn gdr_get_info_v2(
    g: gdr_t,
    handle: gdr_mh_t,
    info: *mut gdr_info_v2_t,
) -> c_int {
    entry("gdr_get_info_v2", libc::EINVAL, || {
        get_info("gdr_get_info_v2", g, handle, info)
    })
}

/// The legacy `gdr_get_info` symbol (binaries built against gdrcopy ≤ 2.3 headers): fills
/// the 40-byte v1 struct, and only those 40 bytes.
///
/// # Safety
/// Pointer arguments must be NULL or valid for the access the C API documents.
#[no_mangle]
pub unsafe extern "C" fn gdr_get_info(
    g: gdr_t,
    handle: gdr_mh_t,
    info: *mut gdr_info_v1_t,
) -> c_int {
    entry("gdr_get_info", libc::EINVAL, || {
        get_info("gdr_get_info", g, handle, info)
    })
}

fn map_common(
    func: &str,
    g: gdr_t,
    handle: gdr_mh_t,
    ptr_va: *mut *mut c_void,
    size: usize,
    flags: c_int,
) -> c_int {
    if ptr_va.is_null() {
        return null_arg(func, "ptr_va");
    }
    match session::map(g as usize, handle.h, size, flags) {
        Ok(addr) => {
            // SAFETY: `ptr_va` is non-NULL and points to a writable `void *` (API contract).
            unsafe { ptr_va.write(addr as *mut c_void) };
            0
        }
        Err(e) => e.errno(),
    }
}

/// Maps the pinned buffer into the process with the driver's default mapping type; writes
/// the address of the start of the GPU-page-aligned range to `*va`.
///
/// # Safety
/// Pointer arguments must be NULL or valid for the access the C API documents.
#[no_mangle]
pub unsafe extern "C" fn gdr_map(
    g: gdr_t,
    handle: gdr_mh_t,
    va: *mut *mut c_void,
    size: usize,
) -> c_int {
    entry("gdr_map", libc::EINVAL, || {
        map_common("gdr_map", g, handle, va, size, 0)
    })
}

/// [`gdr_map`] with a `gdr_map_flags_t` requesting a mapping type.
///
/// # Safety
/// Pointer arguments must be NULL or valid for the access the C API documents.
#[no_mangle]
pub unsafe extern "C" fn gdr_map_v2(
    g: gdr_t,
    handle: gdr_mh_t,
    ptr_va: *mut *mut c_void,
    size: usize,
    flags: c_int,
) -> c_int {
    entry("gdr_map_v2", libc::EINVAL, || {
        map_common("gdr_map_v2", g, handle, ptr_va, size, flags)
    })
}

/// Removes the mapping `gdr_map` made; `va` and `size` must be what it returned and was given.
#[no_mangle]
pub extern "C" fn gdr_unmap(g: gdr_t, handle: gdr_mh_t, va: *mut c_void, size: usize) -> c_int {
    entry("gdr_unmap", libc::EINVAL, || {
        status(session::unmap(g as usize, handle.h, va as usize, size))
    })
}

/// Which way a copy goes, for [`copy_entry`]: [`ToMapping`] or [`FromMapping`].
trait Direction {
    /// Copies `n` bytes between the mapping at `dev` and host memory at `host`, fenced.
    ///
    /// # Safety
    /// `[dev, +n)` lies inside a live mapping of type `kind`; `[host, +n)` is host memory
    /// valid for the access this direction makes (read for [`ToMapping`], write for
    /// [`FromMapping`]).
    unsafe fn copy(kind: MappingType, dev: usize, host: usize, n: usize);
}

/// Host memory into the mapping (`gdr_copy_to_mapping`).
struct ToMapping;

impl Direction for ToMapping {
    #[inline(always)]
    unsafe fn copy(kind: MappingType, dev: usize, host: usize, n: usize) {
        // SAFETY: the caller's contract, with the host range readable.
        unsafe { copy::to_mapping(kind, dev as *mut u8, host as *const u8, n) }
    }
}

/// The mapping into host memory (`gdr_copy_from_mapping`).
struct FromMapping;

impl Direction for FromMapping {
    #[inline(always)]
    unsafe fn copy(kind: MappingType, dev: usize, host: usize, n: usize) {
        // SAFETY: the caller's contract, with the host range writable.
        unsafe { copy::from_mapping(kind, host as *mut u8, dev as *const u8, n) }
    }
}

/// The body of the copy entries: `size` bytes between the mapping at `dev`, which must lie
/// inside `handle`'s live mapping, and host memory at `host`, in direction `D`. Returns 0 or
/// an errno value; `func` names the entry in log lines.
#[inline(always)]
fn copy_entry<D: Direction>(
    func: &'static str,
    handle: gdr_mh_t,
    dev: usize,
    host: usize,
    size: usize,
) -> c_int {
    // The accepted case runs outside the panic boundary: the checks are atomic loads and
    // compares, the copy is loads, stores, kernel calls and fences, and the kernel table's
    // first-call resolver catches its own panics, so nothing on this path can panic, and it
    // does not pay for the boundary's out-of-line closure call.
    if size != 0 && host != 0 {
        if let Some(kind) = session::copy_target_accepted(handle.h, dev, size) {
            // SAFETY: `[dev, +size)` lies inside the handle's live mapping (checked just
            // above); `host` is non-NULL and, by the API contract, valid for `size` bytes of
            // the access direction `D` makes.
            unsafe { D::copy(kind, dev, host, size) };
            return 0;
        }
    }
    copy_checked::<D>(func, handle, dev, host, size)
}

/// [`copy_entry`] for everything the quick check did not accept, inside the panic boundary.
#[cold]
#[inline(never)]
fn copy_checked<D: Direction>(
    func: &'static str,
    handle: gdr_mh_t,
    dev: usize,
    host: usize,
    size: usize,
) -> c_int {
    entry(func, libc::EINVAL, move || {
        let kind = match session::copy_target(handle.h, dev, host, size, func) {
            Ok(k) => k,
            Err(e) => return e.errno(),
        };
        if size == 0 {
            return 0;
        }
        if host == 0 {
            return null_arg(func, "h_ptr");
        }
        // SAFETY: `[dev, +size)` lies inside the handle's live mapping (checked just above);
        // `host` is non-NULL and, by the API contract, valid for `size` bytes of the access
        // direction `D` makes.
        unsafe { D::copy(kind, dev, host, size) };
        0
    })
}

/// Copies `size` bytes from host memory `h_ptr` into the mapping at `map_d_ptr`, which must
/// lie inside `handle`'s live mapping. Takes no lock.
///
/// # Safety
/// Pointer arguments must be NULL or valid for the access the C API documents.
#[no_mangle]
pub unsafe extern "C" fn gdr_copy_to_mapping(
    handle: gdr_mh_t,
    map_d_ptr: *mut c_void,
    h_ptr: *const c_void,
    size: usize,
) -> c_int {
    let (dev, host) = (map_d_ptr as usize, h_ptr as usize);
    copy_entry::<ToMapping>("gdr_copy_to_mapping", handle, dev, host, size)
}

/// Copies `size` bytes from the mapping at `map_d_ptr` (inside `handle`'s live mapping) to
/// host memory `h_ptr`. Takes no lock.
///
/// # Safety
/// Pointer arguments must be NULL or valid for the access the C API documents.
#[no_mangle]
pub unsafe extern "C" fn gdr_copy_from_mapping(
    handle: gdr_mh_t,
    h_ptr: *mut c_void,
    map_d_ptr: *const c_void,
    size: usize,
) -> c_int {
    let (dev, host) = (map_d_ptr as usize, h_ptr as usize);
    copy_entry::<FromMapping>("gdr_copy_from_mapping", handle, dev, host, size)
}

/// Alias of [`gdr_copy_to_mapping`].
///
/// # Safety
/// Pointer arguments must be NULL or valid for the access the C API documents.
#[no_mangle]
pub unsafe extern "C" fn gdr_copy_to_mapped(
    handle: gdr_mh_t,
    map_d_ptr: *mut c_void,
    h_ptr: *const c_void,
    size: usize,
) -> c_int {
    let (dev, host) = (map_d_ptr as usize, h_ptr as usize);
    copy_entry::<ToMapping>("gdr_copy_to_mapped", handle, dev, host, size)
}

/// Alias of [`gdr_copy_from_mapping`].
///
/// # Safety
/// Pointer arguments must be NULL or valid for the access the C API documents.
#[no_mangle]
pub unsafe extern "C" fn gdr_copy_from_mapped(
    handle: gdr_mh_t,
    h_ptr: *mut c_void,
    map_d_ptr: *const c_void,
    size: usize,
) -> c_int {
    let (dev, host) = (map_d_ptr as usize, h_ptr as usize);
    copy_entry::<FromMapping>("gdr_copy_from_mapped", handle, dev, host, size)
}

/// Writes the library's version, 2.6; a NULL pointer is skipped (logged).
///
/// # Safety
/// Pointer arguments must be NULL or valid for the access the C API documents.
#[no_mangle]
pub unsafe extern "C" fn gdr_runtime_get_version(major: *mut c_int, minor: *mut c_int) {
    entry("gdr_runtime_get_version", (), || {
        for (p, v, name) in [
            (major, GDR_API_MAJOR_VERSION, "major"),
            (minor, GDR_API_MINOR_VERSION, "minor"),
        ] {
            if p.is_null() {
                null_arg("gdr_runtime_get_version", name);
            } else {
                // SAFETY: non-NULL and, by the API contract, a writable int.
                unsafe { p.write(v) };
            }
        }
    })
}

/// Writes the driver's version. Always fills both outputs: 0/0 (or what the backend
/// reports) with an errno value when the version cannot be read.
///
/// # Safety
/// Pointer arguments must be NULL or valid for the access the C API documents.
#[no_mangle]
pub unsafe extern "C" fn gdr_driver_get_version(
    g: gdr_t,
    major: *mut c_int,
    minor: *mut c_int,
) -> c_int {
    entry("gdr_driver_get_version", libc::EINVAL, || {
        let r = session::driver_version(g as usize);
        let (ma, mi) = r.unwrap_or((0, 0));
        for (p, v) in [(major, ma), (minor, mi)] {
            if !p.is_null() {
                // SAFETY: non-NULL and, by the API contract, a writable int.
                unsafe { p.write(v) };
            }
        }
        if major.is_null() || minor.is_null() {
            return null_arg(
                "gdr_driver_get_version",
                if major.is_null() { "major" } else { "minor" },
            );
        }
        status(r.map(|_| ()))
    })
}

/// Writes the value of attribute `attr` to `*v` (0 first, always). EINVAL for an unknown
/// attribute.
///
/// # Safety
/// Pointer arguments must be NULL or valid for the access the C API documents.
#[no_mangle]
pub unsafe extern "C" fn gdr_get_attribute(g: gdr_t, attr: gdr_attr_t, v: *mut c_int) -> c_int {
    entry("gdr_get_attribute", libc::EINVAL, || {
        if v.is_null() {
            return null_arg("gdr_get_attribute", "v");
        }
        // SAFETY: non-NULL and, by the API contract, a writable int.
        unsafe { v.write(0) };
        match session::attribute(g as usize, attr as i32) {
            Ok(val) => {
                // SAFETY: as above.
                unsafe { v.write(val) };
                0
            }
            Err(e) => e.errno(),
        }
    })
}

/// The name of a mapping type: "None", "Write Combining", "Caching" or "Device"; EINVAL
/// (and `*pstr` untouched) for anything else.
///
/// # Safety
/// Pointer arguments must be NULL or valid for the access the C API documents.
#[no_mangle]
pub unsafe extern "C" fn gdr_get_mapping_type_string(
    mapping_type: gdr_mapping_type_t,
    pstr: *mut *const c_char,
) -> c_int {
    entry("gdr_get_mapping_type_string", libc::EINVAL, || {
        let s: &'static std::ffi::CStr = match mapping_type {
            GDR_MAPPING_TYPE_NONE => c"None",
            GDR_MAPPING_TYPE_WC => c"Write Combining",
            GDR_MAPPING_TYPE_CACHING => c"Caching",
            GDR_MAPPING_TYPE_DEVICE => c"Device",
            _ => return libc::EINVAL,
        };
        if pstr.is_null() {
            return null_arg("gdr_get_mapping_type_string", "pstr");
        }
        // SAFETY: non-NULL and, by the API contract, a writable `const char *`; the string
        // is a static literal.
        unsafe { pstr.write(s.as_ptr()) };
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_type_strings_match_upstream() {
        let mut p: *const c_char = std::ptr::null();
        for (t, want) in [
            (0, "None"),
            (1, "Write Combining"),
            (2, "Caching"),
            (3, "Device"),
        ] {
            // SAFETY: `p` is a valid out pointer.
            assert_eq!(unsafe { gdr_get_mapping_type_string(t, &mut p) }, 0);
            // SAFETY: the library wrote a pointer to a static NUL-terminated literal.
            let s = unsafe { std::ffi::CStr::from_ptr(p) };
            assert_eq!(s.to_str().unwrap(), want);
        }
        let before = p;
        // SAFETY: `p` is a valid out pointer; NULL is allowed.
        unsafe {
            assert_eq!(gdr_get_mapping_type_string(4, &mut p), libc::EINVAL);
            assert_eq!(gdr_get_mapping_type_string(u32::MAX, &mut p), libc::EINVAL);
        }
        assert_eq!(p, before, "left untouched on error");
        // SAFETY: NULL is allowed.
        let r = unsafe { gdr_get_mapping_type_string(1, std::ptr::null_mut()) };
        assert_eq!(r, libc::EINVAL);
    }

    #[test]
    fn runtime_version_is_2_6_and_null_safe() {
        let (mut a, mut b) = (0, 0);
        // SAFETY: valid out pointers, then NULLs (allowed).
        unsafe { gdr_runtime_get_version(&mut a, &mut b) };
        assert_eq!((a, b), (2, 6));
        // SAFETY: NULL is allowed.
        unsafe { gdr_runtime_get_version(std::ptr::null_mut(), std::ptr::null_mut()) };
    }

    #[test]
    fn info_bits_keep_the_callers_padding() {
        let i = Info {
            mapped: true,
            wc_mapping: false,
            ..Default::default()
        };
        assert_eq!(info_bits(0xFFFF_FFFC, &i), 0xFFFF_FFFD);
        let i = Info {
            mapped: true,
            wc_mapping: true,
            ..Default::default()
        };
        assert_eq!(info_bits(0, &i), 3);
        assert_eq!(info_bits(3, &Info::default()), 0);
    }
}
