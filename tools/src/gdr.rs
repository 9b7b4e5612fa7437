//! libgdrapi through its C ABI, loaded at run time (`dlopen("libgdrapi.so.2")`), so the tools
//! work with any compatible implementation and can report which file they loaded.

use crate::dl::{self, DlError, Library};
use std::ffi::{c_int, c_ulong, c_void};
use std::fmt;

/// The soname the tools load.
pub const LIBGDRAPI: &str = "libgdrapi.so.2";

/// `gdr_map_flags_t`: default mapping.
pub const MAP_FLAG_DEFAULT: c_int = 0;
/// `GDR_MAP_FLAG_REQ_WC_MAPPING`.
pub const MAP_FLAG_REQ_WC: c_int = 1;
/// `GDR_MAP_FLAG_REQ_CACHE_MAPPING`.
pub const MAP_FLAG_REQ_CACHE: c_int = 2;
/// `GDR_MAP_FLAG_REQ_DEVICE_MAPPING`.
pub const MAP_FLAG_REQ_DEVICE: c_int = 3;
/// `GDR_MAPPING_TYPE_CACHING`.
pub const MAPPING_TYPE_CACHING: c_int = 2;
/// `GDR_ATTR_USE_PERSISTENT_MAPPING`.
pub const ATTR_USE_PERSISTENT_MAPPING: c_int = 1;
/// `GDR_ATTR_USING_DMA_BUF_MMAP` (2.6).
pub const ATTR_USING_DMA_BUF_MMAP: c_int = 3;
/// GPU page size (`GPU_PAGE_SIZE`).
pub const GPU_PAGE_SIZE: usize = 1 << 16;

/// `gdr_t`.
pub type GdrT = *mut c_void;

/// `gdr_mh_t`, passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemHandle {
    /// Opaque value; never 0 for a live pin.
    pub h: c_ulong,
}

/// `gdr_info_v2_t` (48 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Info {
    /// 64 KiB-aligned start of the pinned range.
    pub va: u64,
    /// Pinned bytes from `va`.
    pub mapped_size: u64,
    /// GPU page size.
    pub page_size: u32,
    /// Deprecated.
    pub tm_cycles: u64,
    /// Deprecated.
    pub cycles_per_ms: u32,
    /// Bit 0: mapped; bit 1: write-combining.
    pub bits: u32,
    /// `gdr_mapping_type_t`.
    pub mapping_type: c_int,
}

impl Info {
    /// The `mapped` bitfield.
    pub fn mapped(&self) -> u32 {
        self.bits & 1
    }
    /// The `wc_mapping` bitfield.
    pub fn wc_mapping(&self) -> u32 {
        (self.bits >> 1) & 1
    }
}

/// A libgdrapi call that returned an error number (or `gdr_open` returning NULL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GdrError {
    /// The function that failed.
    pub func: &'static str,
    /// Its return value (an errno value, 0 for `gdr_open`).
    pub code: c_int,
}

impl fmt::Display for GdrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.func == "gdr_open" {
            return write!(
                f,
                "gdr_open failed: neither gdrdrv nor CUDA DMA-BUF mmap is usable"
            );
        }
        write!(f, "{} failed: {}", self.func, errno_text(self.code))
    }
}

impl std::error::Error for GdrError {}

/// "Invalid argument (errno 22)" for an errno value.
pub fn errno_text(code: c_int) -> String {
    format!("{} (errno {code})", std::io::Error::from_raw_os_error(code))
}

/// The loaded library with the public functions the tools call.
pub struct Gdr {
    lib: Library,
    open: unsafe extern "C" fn() -> GdrT,
    close: unsafe extern "C" fn(GdrT) -> c_int,
    pin_buffer: unsafe extern "C" fn(GdrT, c_ulong, usize, u64, u32, *mut MemHandle) -> c_int,
    unpin_buffer: unsafe extern "C" fn(GdrT, MemHandle) -> c_int,
    map_v2: unsafe extern "C" fn(GdrT, MemHandle, *mut *mut c_void, usize, c_int) -> c_int,
    unmap: unsafe extern "C" fn(GdrT, MemHandle, *mut c_void, usize) -> c_int,
    get_info_v2: unsafe extern "C" fn(GdrT, MemHandle, *mut Info) -> c_int,
    copy_to_mapping: unsafe extern "C" fn(MemHandle, *mut c_void, *const c_void, usize) -> c_int,
    copy_from_mapping: unsafe extern "C" fn(MemHandle, *mut c_void, *const c_void, usize) -> c_int,
    runtime_get_version: unsafe extern "C" fn(*mut c_int, *mut c_int),
    driver_get_version: unsafe extern "C" fn(GdrT, *mut c_int, *mut c_int) -> c_int,
    get_attribute: unsafe extern "C" fn(GdrT, c_int, *mut c_int) -> c_int,
}

impl fmt::Debug for Gdr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gdr")
            .field("lib", &self.lib.name())
            .finish()
    }
}

impl Gdr {
    /// Loads `libgdrapi.so.2` and resolves its public functions by name.
    pub fn load() -> Result<Gdr, DlError> {
        let lib = Library::open(LIBGDRAPI)?;
        // SAFETY: each type is the C signature of the named function in gdrapi.h 2.6.
        unsafe {
            Ok(Gdr {
                open: dl::function(&lib, "gdr_open")?,
                close: dl::function(&lib, "gdr_close")?,
                pin_buffer: dl::function(&lib, "gdr_pin_buffer")?,
                unpin_buffer: dl::function(&lib, "gdr_unpin_buffer")?,
                map_v2: dl::function(&lib, "gdr_map_v2")?,
                unmap: dl::function(&lib, "gdr_unmap")?,
                get_info_v2: dl::function(&lib, "gdr_get_info_v2")?,
                copy_to_mapping: dl::function(&lib, "gdr_copy_to_mapping")?,
                copy_from_mapping: dl::function(&lib, "gdr_copy_from_mapping")?,
                runtime_get_version: dl::function(&lib, "gdr_runtime_get_version")?,
                driver_get_version: dl::function(&lib, "gdr_driver_get_version")?,
                get_attribute: dl::function(&lib, "gdr_get_attribute")?,
                lib,
            })
        }
    }

    /// The file the library was actually loaded from (via `dladdr` on `gdr_open`).
    pub fn path(&self) -> Option<String> {
        self.lib.path_of("gdr_open")
    }

    /// `gdr_runtime_get_version`: the library's (major, minor).
    pub fn runtime_version(&self) -> (c_int, c_int) {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: two valid out pointers.
        unsafe { (self.runtime_get_version)(&mut major, &mut minor) };
        (major, minor)
    }

    /// `gdr_open`; the session is closed on drop.
    pub fn open(&self) -> Result<Session<'_>, GdrError> {
        // SAFETY: no arguments.
        let g = unsafe { (self.open)() };
        if g.is_null() {
            return Err(GdrError {
                func: "gdr_open",
                code: 0,
            });
        }
        Ok(Session { gdr: self, g })
    }
}

fn rc(func: &'static str, code: c_int) -> Result<(), GdrError> {
    if code == 0 {
        Ok(())
    } else {
        Err(GdrError { func, code })
    }
}

/// An open `gdr_t`. Pins and mappings borrow it; `gdr_close` runs on drop (or via [`Session::close`]).
pub struct Session<'a> {
    gdr: &'a Gdr,
    g: GdrT,
}

impl<'a> Session<'a> {
    /// `gdr_close`, reporting its result.
    pub fn close(mut self) -> Result<(), GdrError> {
        let g = std::mem::replace(&mut self.g, std::ptr::null_mut());
        // SAFETY: g came from gdr_open and is closed exactly once (Drop sees NULL).
        rc("gdr_close", unsafe { (self.gdr.close)(g) })
    }

    /// `gdr_driver_get_version`.
    pub fn driver_version(&self) -> Result<(c_int, c_int), GdrError> {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: g is open; two valid out pointers.
        rc("gdr_driver_get_version", unsafe {
            (self.gdr.driver_get_version)(self.g, &mut major, &mut minor)
        })?;
        Ok((major, minor))
    }

    /// `gdr_get_attribute`.
    pub fn attribute(&self, attr: c_int) -> Result<c_int, GdrError> {
        let mut v = 0;
        // SAFETY: g is open; v is a valid out pointer.
        rc("gdr_get_attribute", unsafe {
            (self.gdr.get_attribute)(self.g, attr, &mut v)
        })?;
        Ok(v)
    }

    /// `gdr_pin_buffer(addr, size, 0, 0)`; unpinned on drop.
    pub fn pin(&self, addr: u64, size: usize) -> Result<Pin<'_, 'a>, GdrError> {
        let mut mh = MemHandle::default();
        // SAFETY: g is open; mh is a valid out pointer. The address is only handed to the driver.
        rc("gdr_pin_buffer", unsafe {
            (self.gdr.pin_buffer)(self.g, addr as c_ulong, size, 0, 0, &mut mh)
        })?;
        if mh.h == 0 {
            return Err(GdrError {
                func: "gdr_pin_buffer",
                code: libc::EINVAL,
            });
        }
        Ok(Pin {
            session: self,
            mh,
            size,
            live: true,
        })
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        if !self.g.is_null() {
            // SAFETY: g came from gdr_open and is closed exactly once.
            unsafe { (self.gdr.close)(self.g) };
        }
    }
}

/// A pinned range; `gdr_unpin_buffer` on drop (or via [`Pin::unpin`]).
pub struct Pin<'s, 'a> {
    session: &'s Session<'a>,
    mh: MemHandle,
    size: usize,
    live: bool,
}

impl<'s, 'a> Pin<'s, 'a> {
    /// The library's handle.
    pub fn handle(&self) -> MemHandle {
        self.mh
    }

    /// `gdr_get_info_v2`.
    pub fn info(&self) -> Result<Info, GdrError> {
        let mut info = Info::default();
        // SAFETY: g open, mh live, info is a valid out pointer of the C layout.
        rc("gdr_get_info", unsafe {
            (self.session.gdr.get_info_v2)(self.session.g, self.mh, &mut info)
        })?;
        Ok(info)
    }

    /// `gdr_map_v2` of the whole pinned size with `flags`; unmapped on drop.
    pub fn map(&self, flags: c_int) -> Result<Mapping<'_, 's, 'a>, GdrError> {
        let mut va: *mut c_void = std::ptr::null_mut();
        // SAFETY: g open, mh live, va is a valid out pointer.
        rc("gdr_map", unsafe {
            (self.session.gdr.map_v2)(self.session.g, self.mh, &mut va, self.size, flags)
        })?;
        Ok(Mapping {
            pin: self,
            va,
            live: true,
        })
    }

    /// `gdr_unpin_buffer`, reporting its result.
    pub fn unpin(mut self) -> Result<(), GdrError> {
        self.live = false;
        // SAFETY: g open, mh live and unpinned exactly once.
        rc("gdr_unpin_buffer", unsafe {
            (self.session.gdr.unpin_buffer)(self.session.g, self.mh)
        })
    }
}

impl Drop for Pin<'_, '_> {
    fn drop(&mut self) {
        if self.live {
            // SAFETY: as in unpin; runs only if unpin was not called.
            unsafe { (self.session.gdr.unpin_buffer)(self.session.g, self.mh) };
        }
    }
}

/// A CPU mapping of a pin, starting at the pin's 64 KiB-aligned `info.va`.
pub struct Mapping<'p, 's, 'a> {
    pin: &'p Pin<'s, 'a>,
    va: *mut c_void,
    live: bool,
}

impl Mapping<'_, '_, '_> {
    /// Start of the mapping.
    pub fn ptr(&self) -> *mut u8 {
        self.va as *mut u8
    }

    /// Mapped length in bytes (the pinned size).
    pub fn len(&self) -> usize {
        self.pin.size
    }

    /// Whether the mapping is empty.
    pub fn is_empty(&self) -> bool {
        self.pin.size == 0
    }

    /// `gdr_copy_to_mapping(dst = mapping + offset, src)`; bounds are checked here.
    pub fn copy_to(&self, offset: usize, src: &[u8]) -> Result<(), GdrError> {
        self.check_range(offset, src.len())?;
        // SAFETY: offset..offset+len lies inside the live mapping (checked); src is a valid slice.
        rc("gdr_copy_to_mapping", unsafe {
            (self.pin.session.gdr.copy_to_mapping)(
                self.pin.mh,
                self.ptr().add(offset) as *mut c_void,
                src.as_ptr() as *const c_void,
                src.len(),
            )
        })
    }

    /// `gdr_copy_from_mapping(dst, src = mapping + offset)`; bounds are checked here.
    pub fn copy_from(&self, offset: usize, dst: &mut [u8]) -> Result<(), GdrError> {
        self.check_range(offset, dst.len())?;
        // SAFETY: offset..offset+len lies inside the live mapping (checked); dst is a valid slice.
        rc("gdr_copy_from_mapping", unsafe {
            (self.pin.session.gdr.copy_from_mapping)(
                self.pin.mh,
                dst.as_mut_ptr() as *mut c_void,
                self.ptr().add(offset) as *const c_void,
                dst.len(),
            )
        })
    }

    fn check_range(&self, offset: usize, len: usize) -> Result<(), GdrError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.pin.size => Ok(()),
            _ => Err(GdrError {
                func: "copy range check",
                code: libc::ERANGE,
            }),
        }
    }

    /// `gdr_unmap`, reporting its result.
    pub fn unmap(mut self) -> Result<(), GdrError> {
        self.live = false;
        let p = self.pin;
        // SAFETY: the mapping is live and unmapped exactly once with the size it was mapped with.
        rc("gdr_unmap", unsafe {
            (p.session.gdr.unmap)(p.session.g, p.mh, self.va, p.size)
        })
    }
}

impl Drop for Mapping<'_, '_, '_> {
    fn drop(&mut self) {
        if self.live {
            let p = self.pin;
            // SAFETY: as in unmap; runs only if unmap was not called.
            unsafe { (p.session.gdr.unmap)(p.session.g, p.mh, self.va, p.size) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_has_the_c_layout_and_bitfields() {
        assert_eq!(std::mem::size_of::<Info>(), 48);
        assert_eq!(std::mem::offset_of!(Info, tm_cycles), 24);
        assert_eq!(std::mem::offset_of!(Info, cycles_per_ms), 32);
        assert_eq!(std::mem::offset_of!(Info, bits), 36);
        assert_eq!(std::mem::offset_of!(Info, mapping_type), 40);
        let info = Info {
            bits: 0b10,
            ..Info::default()
        };
        assert_eq!((info.mapped(), info.wc_mapping()), (0, 1));
        let info = Info {
            bits: 0b01,
            ..Info::default()
        };
        assert_eq!((info.mapped(), info.wc_mapping()), (1, 0));
    }

    #[test]
    fn errors_name_the_function_and_errno() {
        let e = GdrError {
            func: "gdr_map",
            code: libc::EINVAL,
        };
        let s = e.to_string();
        assert!(s.starts_with("gdr_map failed: "), "{s}");
        assert!(s.contains("errno 22"), "{s}");
        let e = GdrError {
            func: "gdr_open",
            code: 0,
        };
        assert!(e.to_string().contains("gdrdrv"));
    }
}
