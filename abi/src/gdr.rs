//! The public C types and constants of `include/gdrapi.h` (gdrcopy 2.6), with upstream's names
//! and layouts: the library exports its functions with them and the programs that load it
//! (tools, benchmarks) call it with them. `tests/gdr_header.rs` compiles each size, offset and
//! value against the header.

#![allow(non_camel_case_types)]

use core::ffi::{c_int, c_uint, c_ulong};

/// Opaque session object; C sees only `struct gdr *` ([`gdr_t`]).
#[repr(C)]
pub struct gdr {
    _opaque: [u8; 0],
}

/// A session handle returned by `gdr_open`; NULL on failure.
pub type gdr_t = *mut gdr;

/// A pinned-buffer handle, passed by value. `h` is never 0 for a live handle.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct gdr_mh_t {
    pub h: c_ulong,
}

/// `gdr_pin_flags_t`: flags of `gdr_pin_buffer_v2`.
pub type gdr_pin_flags_t = c_uint;
/// Default pinning.
pub const GDR_PIN_FLAG_DEFAULT: gdr_pin_flags_t = 0;
/// Force a PCIe (BAR1) mapping on coherent platforms.
pub const GDR_PIN_FLAG_FORCE_PCIE: gdr_pin_flags_t = 1;

/// `gdr_mapping_type_t`: the CPU mapping type of a handle.
pub type gdr_mapping_type_t = c_uint;
/// Not mapped.
pub const GDR_MAPPING_TYPE_NONE: gdr_mapping_type_t = 0;
/// Write-combining mapping.
pub const GDR_MAPPING_TYPE_WC: gdr_mapping_type_t = 1;
/// Cached mapping (coherent platforms).
pub const GDR_MAPPING_TYPE_CACHING: gdr_mapping_type_t = 2;
/// Device (uncached) mapping.
pub const GDR_MAPPING_TYPE_DEVICE: gdr_mapping_type_t = 3;
/// One past the last mapping type.
pub const GDR_MAPPING_TYPE_MAX: gdr_mapping_type_t = 4;

/// `gdr_map_flags_t`: flags of `gdr_map_v2`, which takes them as an `int`.
pub type gdr_map_flags_t = c_uint;
/// Let the driver choose.
pub const GDR_MAP_FLAG_DEFAULT: gdr_map_flags_t = 0;
/// Require a write-combining mapping.
pub const GDR_MAP_FLAG_REQ_WC_MAPPING: gdr_map_flags_t = 1;
/// Require a cached mapping.
pub const GDR_MAP_FLAG_REQ_CACHE_MAPPING: gdr_map_flags_t = 2;
/// Require a device mapping.
pub const GDR_MAP_FLAG_REQ_DEVICE_MAPPING: gdr_map_flags_t = 3;

/// `gdr_attr_t`: attributes of `gdr_get_attribute`.
pub type gdr_attr_t = c_uint;
/// 1 when the driver pins persistently.
pub const GDR_ATTR_USE_PERSISTENT_MAPPING: gdr_attr_t = 1;
/// 1 when `GDR_PIN_FLAG_FORCE_PCIE` is supported.
pub const GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE: gdr_attr_t = 2;
/// 1 when the DMA-BUF backend is in use.
pub const GDR_ATTR_USING_DMA_BUF_MMAP: gdr_attr_t = 3;
/// One past the last attribute.
pub const GDR_ATTR_MAX: gdr_attr_t = 4;

/// `gdr_info_v2_t` (= `gdr_info_t`), 48 bytes. `mapped` and `wc_mapping` are C bitfields:
/// bits 0 and 1 of the 32-bit unit at offset 36 ([`gdr_info_v2_t::flags`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct gdr_info_v2_t {
    pub va: u64,
    pub mapped_size: u64,
    pub page_size: u32,
    /// Deprecated.
    pub tm_cycles: u64,
    /// Deprecated.
    pub cycles_per_ms: u32,
    /// Bit 0: `mapped`; bit 1: `wc_mapping`; other bits are left as the caller had them.
    pub flags: c_uint,
    pub mapping_type: gdr_mapping_type_t,
}

impl gdr_info_v2_t {
    /// The `mapped` bitfield: 1 when a CPU mapping exists.
    pub const fn mapped(&self) -> c_uint {
        self.flags & INFO_MAPPED_BIT
    }

    /// The `wc_mapping` bitfield: 1 when that mapping is write-combining.
    pub const fn wc_mapping(&self) -> c_uint {
        (self.flags & INFO_WC_MAPPING_BIT) >> 1
    }
}

/// `gdr_info_t` is `gdr_info_v2_t` since 2.4.
pub type gdr_info_t = gdr_info_v2_t;

/// The 40-byte info struct of the legacy `gdr_get_info` symbol (gdrcopy ≤ 2.3 headers): the
/// first 40 bytes of [`gdr_info_v2_t`].
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct gdr_info_v1_t {
    pub va: u64,
    pub mapped_size: u64,
    pub page_size: u32,
    pub tm_cycles: u64,
    pub cycles_per_ms: u32,
    /// Bit 0: `mapped`; bit 1: `wc_mapping`.
    pub flags: c_uint,
}

/// Bit of `flags` that is the `mapped` bitfield.
pub const INFO_MAPPED_BIT: c_uint = 1;
/// Bit of `flags` that is the `wc_mapping` bitfield.
pub const INFO_WC_MAPPING_BIT: c_uint = 2;

/// `MAJOR_VERSION_SHIFT`: a version is `major << 16 | minor`.
pub const MAJOR_VERSION_SHIFT: u32 = 16;
/// `GDR_API_VERSION`'s major part.
pub const GDR_API_MAJOR_VERSION: c_int = 2;
/// `GDR_API_VERSION`'s minor part.
pub const GDR_API_MINOR_VERSION: c_int = 6;
/// `GDR_API_VERSION`: this API's version word.
pub const GDR_API_VERSION: c_int =
    GDR_API_MAJOR_VERSION << MAJOR_VERSION_SHIFT | GDR_API_MINOR_VERSION;
/// `MINIMUM_GDRDRV_VERSION`: the oldest gdrdrv the library accepts.
pub const MINIMUM_GDRDRV_VERSION: u32 = crate::gdrdrv::version(2, 0);

/// `GPU_PAGE_SHIFT`: pins and mappings are made of 64 KiB GPU pages (gdrdrv's).
pub const GPU_PAGE_SHIFT: u32 = crate::gdrdrv::GPU_PAGE_SHIFT;
/// `GPU_PAGE_SIZE` (an `unsigned long` in C, the width of `usize`).
pub const GPU_PAGE_SIZE: usize = 1 << GPU_PAGE_SHIFT;
/// `GPU_PAGE_OFFSET`: the offset bits of an address within its GPU page.
pub const GPU_PAGE_OFFSET: usize = GPU_PAGE_SIZE - 1;
/// `GPU_PAGE_MASK`: the GPU page bits of an address.
pub const GPU_PAGE_MASK: usize = !GPU_PAGE_OFFSET;

/// Where `struct gdr` (opaque in `gdrapi.h`) keeps `cache_backend`, the backend of a session,
/// a 4-byte field: upstream's private layout on x86-64 and aarch64, which NVIDIA's own tests
/// read and which the library keeps (its session record's layout test holds it there).
pub const CACHE_BACKEND_OFFSET: usize = 40;
/// `cache_backend` of a session on gdrdrv.
pub const CACHE_BACKEND_GDRDRV: u32 = 0;
/// `cache_backend` of a session on DMA-BUF mappings.
pub const CACHE_BACKEND_DMABUF: u32 = 1;
/// `cache_backend` of a session on the Vulkan import (gdrapi-rs's own value).
pub const CACHE_BACKEND_VULKAN: u32 = 2;

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{align_of, offset_of, size_of};

    #[test]
    fn layouts_match_upstream() {
        assert_eq!((size_of::<gdr_mh_t>(), align_of::<gdr_mh_t>()), (8, 8));
        assert_eq!(
            (size_of::<gdr_info_v2_t>(), align_of::<gdr_info_v2_t>()),
            (48, 8)
        );
        assert_eq!(offset_of!(gdr_info_v2_t, flags), 36);
        assert_eq!(offset_of!(gdr_info_v2_t, mapping_type), 40);
        assert_eq!(size_of::<gdr_info_v1_t>(), 40);
        assert_eq!(offset_of!(gdr_info_v1_t, flags), 36);
    }

    #[test]
    fn the_bitfield_accessors_read_their_bit() {
        let info = |flags| gdr_info_v2_t {
            flags,
            ..gdr_info_v2_t::default()
        };
        assert_eq!((info(0b01).mapped(), info(0b01).wc_mapping()), (1, 0));
        assert_eq!((info(0b10).mapped(), info(0b10).wc_mapping()), (0, 1));
        assert_eq!((info(!0).mapped(), info(!0).wc_mapping()), (1, 1));
    }

    #[test]
    fn versions_and_pages_are_gdrapi_hs() {
        assert_eq!(GDR_API_VERSION, 0x20006);
        assert_eq!(MINIMUM_GDRDRV_VERSION, 0x20000);
        assert_eq!((GPU_PAGE_SIZE, GPU_PAGE_MASK), (65536, !0xffff));
    }
}
