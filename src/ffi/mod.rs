//! The C ABI of `libgdrapi.so.2`: the 17 functions of gdrcopy 2.6 plus the
//! `gdr_copy_to_mapped` / `gdr_copy_from_mapped` aliases, and the public `#[repr(C)]` types.
//!
//! This is the only module with exported `extern "C"` items, each written with
//! [`boundary::entry!`]: a panic returns the return type's failure value (EINVAL, NULL) and
//! is logged; a NULL output pointer is EINVAL, logged ([`boundary::out`]). `gdr_t` and
//! `gdr_mh_t` values go to [`crate::session`], which validates them against the library's
//! registry before use, and [`crate::error::Error`] becomes a positive errno value here.
//!
//! `include/gdrapi.h` is written by hand and is the source of truth for the C declarations;
//! `tests/header_sync.rs` checks that it declares every function exported here with the
//! prototype cbindgen derives from this module.

pub mod types;

mod boundary;

use crate::backend::{Info, MappingType, PinRequest};
use crate::copy::{Direction, FromMapping, ToMapping};
use crate::session::{self, CopyRefusal};
use boundary::{entry, null_arg, out, status, Out};
use std::os::raw::{c_char, c_int, c_uint, c_ulong, c_void};
use std::ptr::addr_of_mut;
pub use types::*;

entry! {
    /// Opens a session on gdrdrv (or the DMA-BUF backend); NULL on failure (logged).
    fn gdr_open() -> gdr_t {
        match session::open() {
            Ok(addr) => addr as gdr_t,
            Err(_) => std::ptr::null_mut(),
        }
    }
}

entry! {
    /// Unmaps and unpins every buffer `g` still holds, closes the driver and frees `g`.
    /// Returns 0 or the first error; EINVAL for an invalid or already closed `g`.
    fn gdr_close(g: gdr_t) -> c_int {
        status(session::close(g as usize))
    }
}

/// The body of the pin entries: pins `req` and writes the new handle to `*handle`.
///
/// # Safety
/// `handle` is NULL or valid for writes of a `gdr_mh_t`.
unsafe fn pin(func: &str, g: gdr_t, req: PinRequest, handle: *mut gdr_mh_t) -> c_int {
    // SAFETY: the caller's contract.
    match unsafe { out(func, handle, "handle") } {
        Ok(handle) => {
            handle.fill(session::pin(g as usize, &req).map(|h| gdr_mh_t { h: h as c_ulong }))
        }
        Err(e) => e,
    }
}

entry! {
    /// Pins `size` bytes of GPU memory at `addr` (v1 API, with P2P tokens) and writes the new
    /// handle to `*handle`. Returns 0 or an errno value.
    fn gdr_pin_buffer(
        g: gdr_t,
        addr: c_ulong,
        size: usize,
        p2p_token: u64,
        va_space: u32,
        handle: *mut gdr_mh_t,
    ) -> c_int {
        let req = PinRequest {
            addr,
            size: size as u64,
            flags: GDR_PIN_FLAG_DEFAULT,
            p2p_token,
            va_space,
        };
        // SAFETY: `handle` is NULL or a writable gdr_mh_t (the API contract).
        unsafe { pin(FUNC, g, req, handle) }
    }
}

entry! {
    /// Pins `size` bytes of GPU memory at `addr` with `gdr_pin_flags_t` `flags` and writes the
    /// new handle to `*handle`. Returns 0 or an errno value.
    fn gdr_pin_buffer_v2(
        g: gdr_t,
        addr: c_ulong,
        size: usize,
        flags: u32,
        handle: *mut gdr_mh_t,
    ) -> c_int {
        let req = PinRequest {
            addr,
            size: size as u64,
            flags,
            p2p_token: 0,
            va_space: 0,
        };
        // SAFETY: `handle` is NULL or a writable gdr_mh_t (the API contract).
        unsafe { pin(FUNC, g, req, handle) }
    }
}

entry! {
    /// Unpins `handle` (unmapping it first if still mapped); the handle is invalid afterwards,
    /// even when the driver reports an error.
    fn gdr_unpin_buffer(g: gdr_t, handle: gdr_mh_t) -> c_int {
        status(session::unpin(g as usize, handle.h))
    }
}

entry! {
    /// Writes 1 to `*flag` if the memory behind `handle` was invalidated, else 0.
    fn gdr_get_callback_flag(g: gdr_t, handle: gdr_mh_t, flag: *mut c_int) -> c_int {
        // SAFETY: `flag` is NULL or a writable int (the API contract).
        match unsafe { out(FUNC, flag, "flag") } {
            Ok(flag) => flag.fill(session::callback_flag(g as usize, handle.h).map(c_int::from)),
            Err(e) => e,
        }
    }
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
trait InfoOut: Sized {
    /// Whether the driver is queried the legacy (v1) way.
    const LEGACY: bool;

    /// Writes `i` into `*p` field by field, so that the bitfield unit's bits other than
    /// `mapped` and `wc_mapping` keep the caller's value and nothing past the struct is touched.
    ///
    /// # Safety
    /// `p` is valid for reads and writes of a `Self`.
    unsafe fn store_at(p: *mut Self, i: &Info);
}

/// Writes `i` into the v1 fields at `p`, keeping the caller's bits of the bitfield unit other
/// than `mapped` and `wc_mapping`.
///
/// # Safety
/// `p` is valid for reads and writes of a `gdr_info_v1_t`.
unsafe fn store_v1(p: *mut gdr_info_v1_t, i: &Info) {
    // SAFETY: the caller's contract; every access stays inside the struct.
    unsafe {
        addr_of_mut!((*p).va).write(i.va);
        addr_of_mut!((*p).mapped_size).write(i.mapped_size);
        addr_of_mut!((*p).page_size).write(i.page_size);
        addr_of_mut!((*p).tm_cycles).write(i.tm_cycles);
        addr_of_mut!((*p).cycles_per_ms).write(i.cycles_per_ms);
        let bits = addr_of_mut!((*p).flags);
        bits.write(info_bits(bits.read(), i));
    }
}

impl InfoOut for gdr_info_v1_t {
    const LEGACY: bool = true;

    unsafe fn store_at(p: *mut Self, i: &Info) {
        // SAFETY: the caller's contract.
        unsafe { store_v1(p, i) }
    }
}

impl InfoOut for gdr_info_v2_t {
    const LEGACY: bool = false;

    unsafe fn store_at(p: *mut Self, i: &Info) {
        // SAFETY: `p` is valid for reads and writes of a `gdr_info_v2_t` (the caller's
        // contract), whose first 40 bytes have `gdr_info_v1_t`'s layout (checked by
        // gdrapi-abi's tests); `mapping_type` lies inside the v2 struct.
        unsafe {
            store_v1(p.cast(), i);
            addr_of_mut!((*p).mapping_type).write(i.mapping_type);
        }
    }
}

/// The body of `gdr_get_info` / `gdr_get_info_v2`: EINVAL (logged) for a NULL `info`, else
/// what the driver reports for `handle`, written into `*info`.
///
/// # Safety
/// `info` is NULL or valid for reads and writes of a `T`.
unsafe fn get_info<T: InfoOut>(func: &str, g: gdr_t, handle: gdr_mh_t, info: *mut T) -> c_int {
    // SAFETY: the caller's contract.
    let mut info = match unsafe { out(func, info, "info") } {
        Ok(info) => info,
        Err(e) => return e,
    };
    match session::info(g as usize, handle.h, T::LEGACY) {
        Ok(i) => {
            // SAFETY: `info` is non-NULL and valid for reads and writes of a `T`.
            unsafe { T::store_at(info.as_ptr(), &i) };
            0
        }
        Err(e) => e.errno(),
    }
}

entry! {
    /// Fills `*info` (48 bytes) with what the driver reports for `handle`.
    fn gdr_get_info_v2(g: gdr_t, handle: gdr_mh_t, info: *mut gdr_info_v2_t) -> c_int {
        // SAFETY: `info` is NULL or a writable gdr_info_v2_t (the API contract).
        unsafe { get_info(FUNC, g, handle, info) }
    }
}

entry! {
    /// The legacy `gdr_get_info` symbol (binaries built against gdrcopy ≤ 2.3 headers): fills
    /// the 40-byte v1 struct, and only those 40 bytes.
    fn gdr_get_info(g: gdr_t, handle: gdr_mh_t, info: *mut gdr_info_v1_t) -> c_int {
        // SAFETY: `info` is NULL or a writable 40-byte gdr_info_v1_t (the API contract of
        // gdrcopy ≤ 2.3).
        unsafe { get_info(FUNC, g, handle, info) }
    }
}

/// The body of the map entries: maps `handle` with the `gdr_map_flags_t` `flags` and writes
/// the mapping's address to `*ptr_va`.
///
/// # Safety
/// `ptr_va` is NULL or valid for writes of a `void *`.
unsafe fn map(
    func: &str,
    g: gdr_t,
    handle: gdr_mh_t,
    ptr_va: *mut *mut c_void,
    size: usize,
    flags: c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    match unsafe { out(func, ptr_va, "ptr_va") } {
        Ok(ptr_va) => ptr_va
            .fill(session::map(g as usize, handle.h, size, flags).map(|addr| addr as *mut c_void)),
        Err(e) => e,
    }
}

entry! {
    /// Maps the pinned buffer into the process with the driver's default mapping type; writes
    /// the address of the start of the GPU-page-aligned range to `*va`.
    fn gdr_map(g: gdr_t, handle: gdr_mh_t, va: *mut *mut c_void, size: usize) -> c_int {
        // SAFETY: `va` is NULL or a writable `void *` (the API contract).
        unsafe { map(FUNC, g, handle, va, size, GDR_MAP_FLAG_DEFAULT as c_int) }
    }
}

entry! {
    /// [`gdr_map`] with a `gdr_map_flags_t` requesting a mapping type.
    fn gdr_map_v2(
        g: gdr_t,
        handle: gdr_mh_t,
        ptr_va: *mut *mut c_void,
        size: usize,
        flags: c_int,
    ) -> c_int {
        // SAFETY: `ptr_va` is NULL or a writable `void *` (the API contract).
        unsafe { map(FUNC, g, handle, ptr_va, size, flags) }
    }
}

entry! {
    /// Removes the mapping `gdr_map` made; `va` and `size` must be what it returned and was
    /// given.
    fn gdr_unmap(g: gdr_t, handle: gdr_mh_t, va: *mut c_void, size: usize) -> c_int {
        status(session::unmap(g as usize, handle.h, va as usize, size))
    }
}

/// The body of the copy entries: `size` bytes between the mapping at `dev`, which must lie
/// inside `handle`'s live mapping, and host memory at `host`, in direction `D`. Returns 0 or
/// an errno value; `func` names the entry in log lines.
///
/// The accepted copy runs outside the panic guard: the check is atomic loads and compares,
/// the copy is loads, stores, kernel calls and fences, and the kernel table's first-call
/// resolver catches its own panics, so nothing on it can panic. Everything else goes to
/// [`copy_refused`], inside the guard.
///
/// # Safety
/// `host` is 0 or the address of `size` bytes of host memory valid for `D`'s access (read
/// for [`ToMapping`], write for [`FromMapping`]).
#[inline(always)]
unsafe fn copy<D: Direction>(
    func: &'static str,
    handle: gdr_mh_t,
    dev: usize,
    host: usize,
    size: usize,
) -> c_int {
    let checked = session::check_copy(handle.h, dev, size);
    if let Ok(kind) = checked {
        if size != 0 && host != 0 {
            // SAFETY: `[dev, +size)` lies inside the handle's live mapping (checked just
            // above); `host` is non-NULL and valid for `size` bytes of `D`'s access (the
            // caller's contract).
            unsafe { crate::copy::copy::<D>(kind, dev as *mut u8, host as *mut u8, size) };
            return 0;
        }
    }
    copy_refused(func, handle, dev, host, size, checked)
}

/// [`copy`] of what it did not copy, inside the panic guard: the refusal with its log line,
/// an empty copy (0), or a NULL host pointer (EINVAL).
#[cold]
#[inline(never)]
fn copy_refused(
    func: &'static str,
    handle: gdr_mh_t,
    dev: usize,
    host: usize,
    size: usize,
    checked: Result<MappingType, CopyRefusal>,
) -> c_int {
    boundary::guard(func, move || match checked {
        Err(refusal) => refusal.refuse(func, handle.h, dev, host, size).errno(),
        Ok(_) if size == 0 => 0,
        Ok(_) => null_arg(func, "h_ptr"),
    })
}

entry! {
    /// Copies `size` bytes from host memory `h_ptr` into the mapping at `map_d_ptr`, which
    /// must lie inside `handle`'s live mapping. Takes no lock.
    unguarded fn gdr_copy_to_mapping(
        handle: gdr_mh_t,
        map_d_ptr: *mut c_void,
        h_ptr: *const c_void,
        size: usize,
    ) -> c_int {
        // SAFETY: `h_ptr` is NULL or `size` readable bytes (the API contract).
        unsafe { copy::<ToMapping>(FUNC, handle, map_d_ptr as usize, h_ptr as usize, size) }
    }
}

entry! {
    /// Copies `size` bytes from the mapping at `map_d_ptr` (inside `handle`'s live mapping)
    /// to host memory `h_ptr`. Takes no lock.
    unguarded fn gdr_copy_from_mapping(
        handle: gdr_mh_t,
        h_ptr: *mut c_void,
        map_d_ptr: *const c_void,
        size: usize,
    ) -> c_int {
        // SAFETY: `h_ptr` is NULL or `size` writable bytes (the API contract).
        unsafe { copy::<FromMapping>(FUNC, handle, map_d_ptr as usize, h_ptr as usize, size) }
    }
}

entry! {
    /// Alias of [`gdr_copy_to_mapping`].
    unguarded fn gdr_copy_to_mapped(
        handle: gdr_mh_t,
        map_d_ptr: *mut c_void,
        h_ptr: *const c_void,
        size: usize,
    ) -> c_int {
        // SAFETY: `h_ptr` is NULL or `size` readable bytes (the API contract).
        unsafe { copy::<ToMapping>(FUNC, handle, map_d_ptr as usize, h_ptr as usize, size) }
    }
}

entry! {
    /// Alias of [`gdr_copy_from_mapping`].
    unguarded fn gdr_copy_from_mapped(
        handle: gdr_mh_t,
        h_ptr: *mut c_void,
        map_d_ptr: *const c_void,
        size: usize,
    ) -> c_int {
        // SAFETY: `h_ptr` is NULL or `size` writable bytes (the API contract).
        unsafe { copy::<FromMapping>(FUNC, handle, map_d_ptr as usize, h_ptr as usize, size) }
    }
}

entry! {
    /// Writes the library's version, 2.6; a NULL pointer is skipped (logged).
    fn gdr_runtime_get_version(major: *mut c_int, minor: *mut c_int) {
        for (p, v, name) in [
            (major, GDR_API_MAJOR_VERSION, "major"),
            (minor, GDR_API_MINOR_VERSION, "minor"),
        ] {
            // SAFETY: `p` is NULL or a writable int (the API contract).
            if let Ok(mut p) = unsafe { out(FUNC, p, name) } {
                p.write(v);
            }
        }
    }
}

entry! {
    /// Writes the driver's version. Always fills both outputs: 0/0 (or what the backend
    /// reports) with an errno value when the version cannot be read.
    fn gdr_driver_get_version(g: gdr_t, major: *mut c_int, minor: *mut c_int) -> c_int {
        let r = session::driver_version(g as usize);
        let (ma, mi) = r.unwrap_or((0, 0));
        // SAFETY: each is NULL or a writable int (the API contract).
        let (major, minor) = unsafe { (Out::new(major), Out::new(minor)) };
        let missing = match (major, minor) {
            (Some(mut major), Some(mut minor)) => {
                major.write(ma);
                minor.write(mi);
                return status(r.map(|_| ()));
            }
            (Some(mut major), None) => {
                major.write(ma);
                "minor"
            }
            (None, Some(mut minor)) => {
                minor.write(mi);
                "major"
            }
            (None, None) => "major",
        };
        null_arg(FUNC, missing)
    }
}

entry! {
    /// Writes the value of attribute `attr` to `*v` (0 first, always). EINVAL for an unknown
    /// attribute.
    fn gdr_get_attribute(g: gdr_t, attr: gdr_attr_t, v: *mut c_int) -> c_int {
        // SAFETY: `v` is NULL or a writable int (the API contract).
        let mut v = match unsafe { out(FUNC, v, "v") } {
            Ok(v) => v,
            Err(e) => return e,
        };
        v.write(0);
        v.fill(session::attribute(g as usize, attr))
    }
}

entry! {
    /// The name of a mapping type: "None", "Write Combining", "Caching" or "Device"; EINVAL
    /// (and `*pstr` untouched) for anything else.
    fn gdr_get_mapping_type_string(
        mapping_type: gdr_mapping_type_t,
        pstr: *mut *const c_char,
    ) -> c_int {
        let s: &'static std::ffi::CStr = match mapping_type {
            GDR_MAPPING_TYPE_NONE => c"None",
            GDR_MAPPING_TYPE_WC => c"Write Combining",
            GDR_MAPPING_TYPE_CACHING => c"Caching",
            GDR_MAPPING_TYPE_DEVICE => c"Device",
            _ => return libc::EINVAL,
        };
        // SAFETY: `pstr` is NULL or a writable `const char *` (the API contract).
        match unsafe { out(FUNC, pstr, "pstr") } {
            Ok(mut pstr) => {
                pstr.write(s.as_ptr());
                0
            }
            Err(e) => e,
        }
    }
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
