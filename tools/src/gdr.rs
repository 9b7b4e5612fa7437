//! libgdrapi through its C ABI, loaded at run time (`dlopen("libgdrapi.so.2")`), so the tools
//! work with any compatible implementation and can report which file they loaded.

use gdrapi_support::dl::{DlError, Library};
use gdrapi_support::gdr::Api;
use std::ffi::{c_int, c_ulong, c_void};
use std::fmt;

pub use gdrapi_support::gdr::{
    gdr_attr_t, gdr_info_v2_t, gdr_map_flags_t, gdr_mh_t, gdr_t, GDR_ATTR_USING_DMA_BUF_MMAP,
    GDR_MAPPING_TYPE_CACHING, GDR_MAP_FLAG_DEFAULT, GDR_MAP_FLAG_REQ_CACHE_MAPPING,
    GDR_MAP_FLAG_REQ_DEVICE_MAPPING, GDR_MAP_FLAG_REQ_WC_MAPPING, GPU_PAGE_SIZE, LIBGDRAPI,
};

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
                "gdr_open failed: neither gdrdrv nor CUDA DMA-BUF mmap is usable \
                 (nor, with GDRAPI_USE_VULKAN=1, the Vulkan import)"
            );
        }
        write!(f, "{} failed: {}", self.func, errno_text(self.code))
    }
}

impl std::error::Error for GdrError {}

/// The backend a session uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `/dev/gdrdrv`.
    Gdrdrv,
    /// CUDA's DMA-BUF export, mmapped (CUDA 13.3 and later).
    DmaBuf,
    /// CUDA VMM memory imported into Vulkan (gdrapi-rs with `GDRAPI_USE_VULKAN=1`).
    Vulkan,
}

impl Backend {
    /// The name the doctor prints: `gdrdrv`, `dmabuf`, `vulkan`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Gdrdrv => "gdrdrv",
            Backend::DmaBuf => "dmabuf",
            Backend::Vulkan => "vulkan",
        }
    }

    /// The backend a session reports: DMA-BUF when `GDR_ATTR_USING_DMA_BUF_MMAP` is set, else
    /// what `cache_backend` says (2: the Vulkan import), else gdrdrv.
    pub fn from_session(using_dma_buf_mmap: bool, cache_backend: u32) -> Backend {
        match (using_dma_buf_mmap, cache_backend) {
            (true, _) | (false, CACHE_BACKEND_DMABUF) => Backend::DmaBuf,
            (false, CACHE_BACKEND_VULKAN) => Backend::Vulkan,
            _ => Backend::Gdrdrv,
        }
    }
}

pub use gdrapi_support::gdr::{CACHE_BACKEND_DMABUF, CACHE_BACKEND_OFFSET, CACHE_BACKEND_VULKAN};

/// "Invalid argument (errno 22)" for an errno value.
pub fn errno_text(code: c_int) -> String {
    format!("{} (errno {code})", std::io::Error::from_raw_os_error(code))
}

/// The loaded library with the public functions the tools call.
pub struct Gdr {
    lib: Library,
    api: Api,
}

impl fmt::Debug for Gdr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gdr")
            .field("lib", &self.lib.name())
            .finish()
    }
}

impl Gdr {
    /// Loads `libgdrapi.so.2` (`RTLD_GLOBAL`) and resolves its public functions by name.
    pub fn load() -> Result<Gdr, DlError> {
        let lib = Library::open_global(LIBGDRAPI)?;
        let api = Api::load(&lib)?;
        Ok(Gdr { lib, api })
    }

    /// The file the library was actually loaded from (via `dladdr` on `gdr_open`).
    pub fn path(&self) -> Option<String> {
        self.lib.path_of("gdr_open")
    }

    /// `gdr_runtime_get_version`: the library's (major, minor).
    pub fn runtime_version(&self) -> (c_int, c_int) {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: two valid out pointers.
        unsafe { (self.api.runtime_get_version)(&mut major, &mut minor) };
        (major, minor)
    }

    /// `gdr_open`; the session is closed on drop.
    pub fn open(&self) -> Result<Session<'_>, GdrError> {
        // SAFETY: no arguments.
        let g = unsafe { (self.api.open)() };
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
    g: gdr_t,
}

impl<'a> Session<'a> {
    /// `gdr_close`, reporting its result.
    pub fn close(mut self) -> Result<(), GdrError> {
        let g = std::mem::replace(&mut self.g, std::ptr::null_mut());
        // SAFETY: g came from gdr_open and is closed exactly once (Drop sees NULL).
        rc("gdr_close", unsafe { (self.gdr.api.close)(g) })
    }

    /// `gdr_driver_get_version`.
    pub fn driver_version(&self) -> Result<(c_int, c_int), GdrError> {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: g is open; two valid out pointers.
        rc("gdr_driver_get_version", unsafe {
            (self.gdr.api.driver_get_version)(self.g, &mut major, &mut minor)
        })?;
        Ok((major, minor))
    }

    /// `gdr_get_attribute`.
    pub fn attribute(&self, attr: gdr_attr_t) -> Result<c_int, GdrError> {
        let mut v = 0;
        // SAFETY: g is open; v is a valid out pointer.
        rc("gdr_get_attribute", unsafe {
            (self.gdr.api.get_attribute)(self.g, attr, &mut v)
        })?;
        Ok(v)
    }

    /// The `cache_backend` field of the `struct gdr` that `gdr_open` returned.
    pub fn cache_backend(&self) -> u32 {
        // SAFETY: g came from gdr_open and is open; upstream's `struct gdr` is 48 bytes,
        // 8-aligned (it holds pointers), with the 4-byte `cache_backend` at offset 40, a
        // layout gdrcopy's own tests read and gdrapi-rs keeps.
        unsafe {
            (self.g as *const u8)
                .add(CACHE_BACKEND_OFFSET)
                .cast::<u32>()
                .read()
        }
    }

    /// The backend the session uses, from `GDR_ATTR_USING_DMA_BUF_MMAP` and `cache_backend`.
    pub fn backend(&self) -> Backend {
        let dmabuf = self.attribute(GDR_ATTR_USING_DMA_BUF_MMAP).unwrap_or(0) != 0;
        Backend::from_session(dmabuf, self.cache_backend())
    }

    /// `gdr_pin_buffer(addr, size, 0, 0)`; unpinned on drop.
    pub fn pin(&self, addr: u64, size: usize) -> Result<Pin<'_, 'a>, GdrError> {
        let mut mh = gdr_mh_t::default();
        // SAFETY: g is open; mh is a valid out pointer. The address is only handed to the driver.
        rc("gdr_pin_buffer", unsafe {
            (self.gdr.api.pin_buffer)(self.g, addr as c_ulong, size, 0, 0, &mut mh)
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
            unsafe { (self.gdr.api.close)(self.g) };
        }
    }
}

/// A pinned range; `gdr_unpin_buffer` on drop (or via [`Pin::unpin`]).
pub struct Pin<'s, 'a> {
    session: &'s Session<'a>,
    mh: gdr_mh_t,
    size: usize,
    live: bool,
}

impl<'s, 'a> Pin<'s, 'a> {
    /// The library's handle.
    pub fn handle(&self) -> gdr_mh_t {
        self.mh
    }

    /// `gdr_get_info_v2`.
    pub fn info(&self) -> Result<gdr_info_v2_t, GdrError> {
        let mut info = gdr_info_v2_t::default();
        // SAFETY: g open, mh live, info is a valid out pointer of the C layout.
        rc("gdr_get_info", unsafe {
            (self.session.gdr.api.get_info_v2)(self.session.g, self.mh, &mut info)
        })?;
        Ok(info)
    }

    /// `gdr_map_v2` of the whole pinned size with `flags`; unmapped on drop.
    pub fn map(&self, flags: gdr_map_flags_t) -> Result<Mapping<'_, 's, 'a>, GdrError> {
        let mut va: *mut c_void = std::ptr::null_mut();
        // SAFETY: g open, mh live, va is a valid out pointer.
        rc("gdr_map", unsafe {
            (self.session.gdr.api.map_v2)(
                self.session.g,
                self.mh,
                &mut va,
                self.size,
                flags as c_int,
            )
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
            (self.session.gdr.api.unpin_buffer)(self.session.g, self.mh)
        })
    }
}

impl Drop for Pin<'_, '_> {
    fn drop(&mut self) {
        if self.live {
            // SAFETY: as in unpin; runs only if unpin was not called.
            unsafe { (self.session.gdr.api.unpin_buffer)(self.session.g, self.mh) };
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
            (self.pin.session.gdr.api.copy_to_mapping)(
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
            (self.pin.session.gdr.api.copy_from_mapping)(
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
            (p.session.gdr.api.unmap)(p.session.g, p.mh, self.va, p.size)
        })
    }
}

impl Drop for Mapping<'_, '_, '_> {
    fn drop(&mut self) {
        if self.live {
            let p = self.pin;
            // SAFETY: as in unmap; runs only if unmap was not called.
            unsafe { (p.session.gdr.api.unmap)(p.session.g, p.mh, self.va, p.size) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(e.to_string().contains("GDRAPI_USE_VULKAN=1"));
    }

    #[test]
    fn the_backend_comes_from_the_attribute_then_cache_backend() {
        assert_eq!(Backend::from_session(false, 0), Backend::Gdrdrv);
        assert_eq!(Backend::from_session(true, 0), Backend::DmaBuf);
        assert_eq!(Backend::from_session(false, 1), Backend::DmaBuf);
        assert_eq!(Backend::from_session(false, 2), Backend::Vulkan);
        assert_eq!(Backend::from_session(false, 7), Backend::Gdrdrv);
        assert_eq!(Backend::Vulkan.name(), "vulkan");
    }
}
