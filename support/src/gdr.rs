//! libgdrapi's C API as a program that loads it sees it (`gdrapi.h` 2.6): the types passed
//! across it and the table of its public functions, resolved from a [`Library`] by name, so the
//! tools and the benchmarks work with any compatible `libgdrapi.so.2` and never link one.

use crate::dl::{DlError, Entry, Library};
use std::ffi::{c_int, c_ulong, c_void};

/// The soname programs load.
pub const LIBGDRAPI: &str = "libgdrapi.so.2";

/// `gdr_t` (opaque).
pub type GdrT = *mut c_void;

/// `gdr_mh_t`: a struct holding one `unsigned long`, passed by value.
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
    /// The bitfields: bit 0 `mapped`, bit 1 `wc_mapping`.
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

/// `GDR_MAP_FLAG_DEFAULT`.
pub const MAP_FLAG_DEFAULT: c_int = 0;
/// `GDR_MAP_FLAG_REQ_WC_MAPPING`.
pub const MAP_FLAG_REQ_WC: c_int = 1;
/// `GDR_MAP_FLAG_REQ_CACHE_MAPPING`.
pub const MAP_FLAG_REQ_CACHE: c_int = 2;
/// `GDR_MAP_FLAG_REQ_DEVICE_MAPPING`.
pub const MAP_FLAG_REQ_DEVICE: c_int = 3;
/// `GDR_MAPPING_TYPE_NONE`.
pub const MAPPING_TYPE_NONE: c_int = 0;
/// `GDR_MAPPING_TYPE_WC`.
pub const MAPPING_TYPE_WC: c_int = 1;
/// `GDR_MAPPING_TYPE_CACHING`.
pub const MAPPING_TYPE_CACHING: c_int = 2;
/// `GDR_MAPPING_TYPE_DEVICE`.
pub const MAPPING_TYPE_DEVICE: c_int = 3;
/// `GDR_ATTR_USE_PERSISTENT_MAPPING`.
pub const ATTR_USE_PERSISTENT_MAPPING: c_int = 1;
/// `GDR_ATTR_USING_DMA_BUF_MMAP` (2.6).
pub const ATTR_USING_DMA_BUF_MMAP: c_int = 3;
/// `GPU_PAGE_SIZE`.
pub const GPU_PAGE_SIZE: usize = 1 << 16;

/// The public functions called through [`Api`], each its name and `gdrapi.h`'s prototype.
pub mod fns {
    use super::*;

    crate::entries! {
        gdr_open = fn() -> GdrT;
        gdr_close = fn(GdrT) -> c_int;
        gdr_pin_buffer = fn(GdrT, c_ulong, usize, u64, u32, *mut MemHandle) -> c_int;
        gdr_unpin_buffer = fn(GdrT, MemHandle) -> c_int;
        gdr_map_v2 = fn(GdrT, MemHandle, *mut *mut c_void, usize, c_int) -> c_int;
        gdr_unmap = fn(GdrT, MemHandle, *mut c_void, usize) -> c_int;
        gdr_get_info_v2 = fn(GdrT, MemHandle, *mut Info) -> c_int;
        gdr_copy_to_mapping = fn(MemHandle, *mut c_void, *const c_void, usize) -> c_int;
        gdr_copy_from_mapping = fn(MemHandle, *mut c_void, *const c_void, usize) -> c_int;
        gdr_runtime_get_version = fn(*mut c_int, *mut c_int);
        gdr_driver_get_version = fn(GdrT, *mut c_int, *mut c_int) -> c_int;
        gdr_get_attribute = fn(GdrT, c_int, *mut c_int) -> c_int;
    }
}

type Fn<E> = <E as Entry>::Fn;

/// `gdr_copy_to_mapping` / `gdr_copy_from_mapping` (same shape: handle, dst, src, size).
pub type CopyFn = Fn<fns::gdr_copy_to_mapping>;

/// The public functions of one loaded libgdrapi.
#[derive(Clone, Copy, Debug)]
pub struct Api {
    /// `gdr_open`.
    pub open: Fn<fns::gdr_open>,
    /// `gdr_close`.
    pub close: Fn<fns::gdr_close>,
    /// `gdr_pin_buffer`.
    pub pin_buffer: Fn<fns::gdr_pin_buffer>,
    /// `gdr_unpin_buffer`.
    pub unpin_buffer: Fn<fns::gdr_unpin_buffer>,
    /// `gdr_map_v2`.
    pub map_v2: Fn<fns::gdr_map_v2>,
    /// `gdr_unmap`.
    pub unmap: Fn<fns::gdr_unmap>,
    /// `gdr_get_info_v2`.
    pub get_info_v2: Fn<fns::gdr_get_info_v2>,
    /// `gdr_copy_to_mapping`.
    pub copy_to_mapping: CopyFn,
    /// `gdr_copy_from_mapping`.
    pub copy_from_mapping: CopyFn,
    /// `gdr_runtime_get_version`.
    pub runtime_get_version: Fn<fns::gdr_runtime_get_version>,
    /// `gdr_driver_get_version`.
    pub driver_get_version: Fn<fns::gdr_driver_get_version>,
    /// `gdr_get_attribute`.
    pub get_attribute: Fn<fns::gdr_get_attribute>,
}

impl Api {
    /// Resolves every function from `lib`; the error names the first one missing.
    pub fn load(lib: &Library) -> Result<Api, DlError> {
        Ok(Api {
            open: lib.get::<fns::gdr_open>()?,
            close: lib.get::<fns::gdr_close>()?,
            pin_buffer: lib.get::<fns::gdr_pin_buffer>()?,
            unpin_buffer: lib.get::<fns::gdr_unpin_buffer>()?,
            map_v2: lib.get::<fns::gdr_map_v2>()?,
            unmap: lib.get::<fns::gdr_unmap>()?,
            get_info_v2: lib.get::<fns::gdr_get_info_v2>()?,
            copy_to_mapping: lib.get::<fns::gdr_copy_to_mapping>()?,
            copy_from_mapping: lib.get::<fns::gdr_copy_from_mapping>()?,
            runtime_get_version: lib.get::<fns::gdr_runtime_get_version>()?,
            driver_get_version: lib.get::<fns::gdr_driver_get_version>()?,
            get_attribute: lib.get::<fns::gdr_get_attribute>()?,
        })
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
        assert_eq!(std::mem::size_of::<MemHandle>(), 8);
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
    fn a_library_without_the_api_names_the_first_missing_function() {
        let lib = Library::open("libc.so.6").expect("libc loads");
        let e = Api::load(&lib).unwrap_err();
        assert_eq!(e.to_string(), "libc.so.6 does not export gdr_open");
    }
}
