//! The exported functions of `libgdrapi_ext.so.0` (`include/gdrapi_ext.h`) and their C types.
//! Each is written with libgdrapi's `entry!` macro: a panic is logged and returns EINVAL. A
//! `gdrx_t` is a value of the allocator table, a `gdrx_mem_t`'s handle one of the allocation
//! registry: both are looked up, never dereferenced.

#![allow(non_camel_case_types)]

use crate::allocator::{self, Allocation, Allocator};
use crate::error::{invalid, Errno, Result};
use crate::gdr::{self, gdr_mh_t};
use crate::registry;
use gdrapi_boundary::entry;
use std::ffi::{c_int, c_uint, c_ulonglong, c_void};
use std::sync::Arc;

/// `GDRX_API_MAJOR_VERSION`.
pub const API_MAJOR: c_int = 0;
/// `GDRX_API_MINOR_VERSION`.
pub const API_MINOR: c_int = 1;

/// `gdrx_t`: an allocator's table value, as an opaque pointer.
pub type gdrx_t = *mut c_void;

/// `gdrx_mem_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gdrx_mem_t {
    pub dev_ptr: c_ulonglong,
    pub cpu_ptr: *mut c_void,
    pub size: usize,
    pub handle: u64,
}

impl From<Allocation> for gdrx_mem_t {
    fn from(a: Allocation) -> gdrx_mem_t {
        gdrx_mem_t {
            dev_ptr: a.dev,
            cpu_ptr: a.cpu as *mut c_void,
            size: a.size,
            handle: a.handle,
        }
    }
}

impl From<gdrx_mem_t> for Allocation {
    fn from(m: gdrx_mem_t) -> Allocation {
        Allocation {
            dev: m.dev_ptr,
            cpu: m.cpu_ptr as usize,
            size: m.size,
            handle: m.handle,
        }
    }
}

/// `gdrx_info_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct gdrx_info_t {
    pub device: c_int,
    pub backend: c_int,
    pub memory: c_int,
    pub mapping_type: c_int,
    pub chunk_size: usize,
    pub small_max: usize,
    pub allocations: usize,
    pub pins: usize,
    pub bytes_pinned: usize,
    pub bytes_in_use: usize,
    pub reserved: [u64; 4],
}

/// 0 or the errno of `r`.
fn status(r: Result<()>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(Errno(e)) => e,
    }
}

/// EINVAL, logged: argument `arg` of `func` is NULL.
#[cold]
fn null(func: &str, arg: &str) -> c_int {
    invalid(func, format_args!("{arg} is NULL")).0
}

/// The open allocator `x` names, or EINVAL (logged).
fn open_allocator(func: &str, x: gdrx_t) -> std::result::Result<Arc<Allocator>, c_int> {
    allocator::lookup(x as usize as u64)
        .ok_or_else(|| invalid(func, format_args!("{x:p} is not an open allocator")).0)
}

/// The live allocation `*mem` names and the address range `[offset, offset + len)` of it, or
/// EINVAL (logged): the record, for the copy.
///
/// # Safety
/// `mem` is NULL or valid for reads of a `gdrx_mem_t`.
unsafe fn accessed(
    func: &str,
    mem: *const gdrx_mem_t,
    offset: usize,
    len: usize,
) -> std::result::Result<registry::Record, c_int> {
    // SAFETY: the caller's contract.
    let Some(m) = (unsafe { mem.as_ref() }) else {
        return Err(null(func, "mem"));
    };
    let Some(r) = registry::get(m.handle) else {
        return Err(invalid(
            func,
            format_args!("{:#x} is not a live allocation", m.handle),
        )
        .0);
    };
    if r.dev != m.dev_ptr || r.cpu != m.cpu_ptr as usize || r.size != m.size {
        return Err(invalid(
            func,
            format_args!("the gdrx_mem_t of {:#x} was changed", m.handle),
        )
        .0);
    }
    if offset.checked_add(len).is_none_or(|end| end > r.size) {
        return Err(invalid(
            func,
            format_args!(
                "offset {offset} + {len} bytes is outside the {} bytes allocated",
                r.size
            ),
        )
        .0);
    }
    Ok(r)
}

entry! {
    /// The version of this API.
    fn gdrx_runtime_get_version(major: *mut c_int, minor: *mut c_int) {
        // SAFETY: each is NULL or a writable int (the API contract).
        unsafe {
            if let Some(m) = major.as_mut() {
                *m = API_MAJOR;
            }
            if let Some(m) = minor.as_mut() {
                *m = API_MINOR;
            }
        }
    }
}

entry! {
    /// Opens an allocator on device ordinal `device`.
    fn gdrx_open(allocator: *mut gdrx_t, device: c_int, flags: c_uint) -> c_int {
        if allocator.is_null() {
            return null(FUNC, "allocator");
        }
        match Allocator::open(device, flags) {
            Ok(id) => {
                // SAFETY: `allocator` is a writable gdrx_t (the API contract).
                unsafe { *allocator = id as usize as gdrx_t };
                0
            }
            Err(Errno(e)) => e,
        }
    }
}

entry! {
    /// Frees everything the allocator holds and closes it.
    fn gdrx_close(allocator: gdrx_t) -> c_int {
        status(allocator::close(allocator as usize as u64))
    }
}

entry! {
    /// Allocates `size` bytes aligned to `alignment` and fills `*mem`.
    fn gdrx_alloc(allocator: gdrx_t, size: usize, alignment: usize, mem: *mut gdrx_mem_t) -> c_int {
        if mem.is_null() {
            return null(FUNC, "mem");
        }
        let a = match open_allocator(FUNC, allocator) {
            Ok(a) => a,
            Err(e) => return e,
        };
        match a.alloc(size, alignment) {
            Ok(m) => {
                // SAFETY: `mem` is a writable gdrx_mem_t (the API contract).
                unsafe { mem.write(m.into()) };
                0
            }
            Err(Errno(e)) => e,
        }
    }
}

entry! {
    /// Frees the allocation `*mem` names.
    fn gdrx_free(allocator: gdrx_t, mem: *const gdrx_mem_t) -> c_int {
        // SAFETY: `mem` is NULL or a readable gdrx_mem_t (the API contract).
        let Some(m) = (unsafe { mem.as_ref() }) else {
            return null(FUNC, "mem");
        };
        match open_allocator(FUNC, allocator) {
            Ok(a) => status(a.free(&Allocation::from(*m))),
            Err(e) => e,
        }
    }
}

entry! {
    /// Copies `len` bytes from `src` into the allocation at `offset`.
    fn gdrx_copy_to(mem: *const gdrx_mem_t, offset: usize, src: *const c_void, len: usize) -> c_int {
        // SAFETY: `mem` is NULL or a readable gdrx_mem_t (the API contract).
        let r = match unsafe { accessed(FUNC, mem, offset, len) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        if len == 0 {
            return 0;
        }
        if src.is_null() {
            return null(FUNC, "src");
        }
        // SAFETY: `[r.cpu + offset, +len)` lies inside the allocation, which lies inside the
        // mapping of handle `r.mh` (libgdrapi checks both again); `src` is valid for `len`
        // bytes (the API contract).
        unsafe {
            gdr::gdr_copy_to_mapping(gdr_mh_t { h: r.mh as _ }, (r.cpu + offset) as *mut c_void, src, len)
        }
    }
}

entry! {
    /// Copies `len` bytes of the allocation from `offset` into `dst`.
    fn gdrx_copy_from(mem: *const gdrx_mem_t, offset: usize, dst: *mut c_void, len: usize) -> c_int {
        // SAFETY: `mem` is NULL or a readable gdrx_mem_t (the API contract).
        let r = match unsafe { accessed(FUNC, mem, offset, len) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        if len == 0 {
            return 0;
        }
        if dst.is_null() {
            return null(FUNC, "dst");
        }
        // SAFETY: as in gdrx_copy_to; `dst` is valid for writes of `len` bytes.
        unsafe {
            gdr::gdr_copy_from_mapping(gdr_mh_t { h: r.mh as _ }, dst, (r.cpu + offset) as *const c_void, len)
        }
    }
}

entry! {
    /// The live allocation of the allocator that holds `addr`.
    fn gdrx_lookup(allocator: gdrx_t, addr: c_ulonglong, mem: *mut gdrx_mem_t, offset: *mut usize) -> c_int {
        if mem.is_null() {
            return null(FUNC, "mem");
        }
        let a = match open_allocator(FUNC, allocator) {
            Ok(a) => a,
            Err(e) => return e,
        };
        match a.lookup(addr) {
            Ok((m, off)) => {
                // SAFETY: `mem` is a writable gdrx_mem_t, `offset` NULL or a writable size_t
                // (the API contract).
                unsafe {
                    mem.write(m.into());
                    if let Some(o) = offset.as_mut() {
                        *o = off;
                    }
                }
                0
            }
            Err(Errno(e)) => e,
        }
    }
}

entry! {
    /// The allocator's figures.
    fn gdrx_info(allocator: gdrx_t, info: *mut gdrx_info_t) -> c_int {
        if info.is_null() {
            return null(FUNC, "info");
        }
        let a = match open_allocator(FUNC, allocator) {
            Ok(a) => a,
            Err(e) => return e,
        };
        match a.stats() {
            Ok(s) => {
                let out = gdrx_info_t {
                    device: s.device,
                    backend: s.backend,
                    memory: s.memory,
                    mapping_type: s.mapping_type,
                    chunk_size: s.chunk_size,
                    small_max: s.small_max,
                    allocations: s.allocations,
                    pins: s.pins,
                    bytes_pinned: s.bytes_pinned,
                    bytes_in_use: s.bytes_in_use,
                    reserved: [0; 4],
                };
                // SAFETY: `info` is a writable gdrx_info_t (the API contract).
                unsafe { info.write(out) };
                0
            }
            Err(Errno(e)) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_are_the_headers() {
        assert_eq!(size_of::<gdrx_mem_t>(), 32);
        assert_eq!(offset_of!(gdrx_mem_t, cpu_ptr), 8);
        assert_eq!(offset_of!(gdrx_mem_t, size), 16);
        assert_eq!(offset_of!(gdrx_mem_t, handle), 24);
        assert_eq!(size_of::<gdrx_info_t>(), 96);
        assert_eq!(offset_of!(gdrx_info_t, chunk_size), 16);
        assert_eq!(offset_of!(gdrx_info_t, reserved), 64);
    }

    #[test]
    fn bad_arguments_are_einval_never_a_crash() {
        let mut m = gdrx_mem_t {
            dev_ptr: 0,
            cpu_ptr: std::ptr::null_mut(),
            size: 0,
            handle: 0,
        };
        let mut buf = [0u8; 8];
        // SAFETY: every pointer is NULL or valid.
        unsafe {
            assert_eq!(gdrx_alloc(std::ptr::null_mut(), 8, 0, &mut m), libc::EINVAL);
            assert_eq!(
                gdrx_alloc(0x1234 as gdrx_t, 8, 0, std::ptr::null_mut()),
                libc::EINVAL
            );
            assert_eq!(gdrx_free(0x1234 as gdrx_t, &m), libc::EINVAL);
            assert_eq!(gdrx_free(0x1234 as gdrx_t, std::ptr::null()), libc::EINVAL);
            assert_eq!(gdrx_close(std::ptr::null_mut()), libc::EINVAL);
            assert_eq!(gdrx_copy_to(&m, 0, buf.as_ptr().cast(), 8), libc::EINVAL);
            assert_eq!(
                gdrx_copy_from(std::ptr::null(), 0, buf.as_mut_ptr().cast(), 8),
                libc::EINVAL
            );
            assert_eq!(gdrx_open(std::ptr::null_mut(), 0, 0), libc::EINVAL);
            let mut x: gdrx_t = std::ptr::null_mut();
            assert_eq!(gdrx_open(&mut x, 0, 0x80), libc::EINVAL);
            assert_eq!(gdrx_open(&mut x, -1, 0), libc::EINVAL);
            assert!(x.is_null());
            let (mut a, mut b) = (-1, -1);
            gdrx_runtime_get_version(&mut a, &mut b);
            assert_eq!((a, b), (API_MAJOR, API_MINOR));
            gdrx_runtime_get_version(std::ptr::null_mut(), std::ptr::null_mut());
        }
    }

    #[test]
    fn copies_check_the_record_and_the_range() {
        let h = registry::insert(registry::Record {
            owner: 1,
            mh: 5,
            cpu: 0x1000,
            dev: 0x9000,
            size: 100,
        })
        .unwrap();
        let m = gdrx_mem_t {
            dev_ptr: 0x9000,
            cpu_ptr: 0x1000 as *mut c_void,
            size: 100,
            handle: h,
        };
        // SAFETY: `m` is readable.
        unsafe {
            assert!(accessed("t", &m, 0, 100).is_ok());
            assert!(accessed("t", &m, 100, 0).is_ok());
            assert_eq!(accessed("t", &m, 99, 2).err(), Some(libc::EINVAL));
            assert_eq!(accessed("t", &m, usize::MAX, 2).err(), Some(libc::EINVAL));
            let forged = gdrx_mem_t { size: 200, ..m };
            assert_eq!(accessed("t", &forged, 150, 2).err(), Some(libc::EINVAL));
            let moved = gdrx_mem_t {
                cpu_ptr: 0x2000 as *mut c_void,
                ..m
            };
            assert_eq!(accessed("t", &moved, 0, 2).err(), Some(libc::EINVAL));
            registry::remove(h);
            assert_eq!(accessed("t", &m, 0, 1).err(), Some(libc::EINVAL), "freed");
        }
    }
}
