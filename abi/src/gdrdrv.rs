//! gdrdrv's user-space ABI (gdrcopy 2.6): the device node, version words, the ioctl requests
//! with their parameter structs, and the constants that go into or come out of them. The
//! library drives the device with these and the emulator answers them; `include/gdrdrv_abi.h`
//! states the same facts for C and `tests/gdrdrv_header.rs` compiles one against the other.
//!
//! The driver copies each request's whole struct in and back, whatever size the request
//! encodes. The mmap offset of a pin is its handle times the host page size.

use core::ffi::{c_ulong, CStr};

/// The driver's device node.
pub const DEVICE_PATH: &CStr = c"/dev/gdrdrv";

/// The ioctl type of every request.
pub const IOCTL_TYPE: u32 = 0xDA;

/// A version word as `GET_VERSION` reports it: `major << 16 | minor`.
pub const fn version(major: u32, minor: u32) -> u32 {
    major << 16 | minor
}

/// What gdrdrv 2.6 reports as its version.
pub const DRIVER_VERSION: u32 = version(2, 6);
/// The oldest library gdrdrv 2.6 accepts (`GET_VERSION`'s `minimum_gdr_api_version`).
pub const MINIMUM_GDR_API_VERSION: u32 = version(2, 0);
/// The first driver with `GET_INFO_V2` (older ones answer it with ENOTTY).
pub const VERSION_WITH_GET_INFO_V2: u32 = version(2, 4);
/// The first driver with `GET_ATTR`, `PIN_BUFFER_V2` and `REQ_MAPPING_TYPE`.
pub const VERSION_WITH_V2_API: u32 = version(2, 5);

/// GPU pages, which pins are rounded to: their shift.
pub const GPU_PAGE_SHIFT: u32 = 16;
/// GPU pages, which pins are rounded to: 64 KiB.
pub const GPU_PAGE_SIZE: u64 = 1 << GPU_PAGE_SHIFT;

/// Mapping type: not mapped (`GET_INFO_V2`'s `mapping_type`, `REQ_MAPPING_TYPE`'s request).
pub const MR_NONE: u32 = 0;
/// Mapping type: write-combining.
pub const MR_WC: u32 = 1;
/// Mapping type: cached (coherent platforms only).
pub const MR_CACHING: u32 = 2;
/// Mapping type: device, uncached ("device mapping only" platforms).
pub const MR_DEVICE: u32 = 3;

/// `PIN_BUFFER_V2` flag: none.
pub const PIN_FLAG_DEFAULT: u32 = 0;
/// `PIN_BUFFER_V2` flag: pin through BAR1 (PCIe) even on coherent platforms; the only bit
/// the driver knows.
pub const PIN_FLAG_FORCE_PCIE: u32 = 1;

/// `GET_ATTR` attribute: 1 when the driver pins persistently.
pub const ATTR_USE_PERSISTENT_MAPPING: u32 = 1;
/// `GET_ATTR` attribute: 1 when [`PIN_FLAG_FORCE_PCIE`] is supported.
pub const ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE: u32 = 2;

/// `_IOWR(0xDA, nr, size)` as Linux encodes it: the generic layout (x86, arm64: direction in
/// 2 bits at 30, read = 2, write = 1) or POWER's (3 bits at 29, read = 2, write = 4).
pub const fn iowr(nr: u32, size: u32) -> c_ulong {
    #[cfg(any(target_arch = "powerpc64", target_arch = "powerpc"))]
    const DIR_RW_SHIFTED: u32 = 0x6 << 29;
    #[cfg(not(any(target_arch = "powerpc64", target_arch = "powerpc")))]
    const DIR_RW_SHIFTED: u32 = 0x3 << 30;
    (DIR_RW_SHIFTED | (size << 16) | (IOCTL_TYPE << 8) | nr) as c_ulong
}

/// The request values. Six encode size 8 because the driver declares them with a pointer type
/// inside `_IOWR`; the driver copies the full struct regardless.
pub mod ioc {
    use super::iowr;
    use core::ffi::c_ulong;
    /// Pins a range with P2P tokens ([`super::PinParams`]); all drivers.
    pub const PIN_BUFFER: c_ulong = iowr(1, 40);
    /// Unpins a handle ([`super::UnpinParams`]).
    pub const UNPIN_BUFFER: c_ulong = iowr(2, 8);
    /// Reads a handle's invalidation flag ([`super::CbFlagParams`]).
    pub const GET_CB_FLAG: c_ulong = iowr(3, 8);
    /// Reads a handle's info, v1 layout ([`super::InfoParams`]).
    pub const GET_INFO: c_ulong = iowr(4, 8);
    /// Reads a handle's info with its mapping type ([`super::InfoV2Params`]); from 2.4.
    pub const GET_INFO_V2: c_ulong = iowr(5, 8);
    /// Reads a driver attribute ([`super::AttrParams`]); from 2.5.
    pub const GET_ATTR: c_ulong = iowr(6, 8);
    /// Pins a range with pin flags ([`super::PinV2Params`]); from 2.5.
    pub const PIN_BUFFER_V2: c_ulong = iowr(7, 32);
    /// Requests the mapping type of the next mmap of a handle
    /// ([`super::ReqMappingTypeParams`]); from 2.5.
    pub const REQ_MAPPING_TYPE: c_ulong = iowr(8, 8);
    /// Reads the driver's version and the oldest library it accepts
    /// ([`super::VersionParams`]); all drivers.
    pub const GET_VERSION: c_ulong = iowr(255, 8);
}

/// One request: its value, its name (gdrdrv's, without the `GDRDRV_IOC_` prefix), the first
/// driver version that answers it and the size of the struct the driver copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The request value passed to `ioctl`.
    pub value: c_ulong,
    /// Its name.
    pub name: &'static str,
    /// The first driver version (a [`version`] word) that knows it.
    pub since: u32,
    /// The size of its parameter struct.
    pub params_size: usize,
}

/// Every request of gdrdrv 2.6, in number order.
pub const REQUESTS: [Request; 9] = {
    use core::mem::size_of;
    const fn r(value: c_ulong, name: &'static str, since: u32, params_size: usize) -> Request {
        Request {
            value,
            name,
            since,
            params_size,
        }
    }
    let v2_0 = version(2, 0);
    [
        r(ioc::PIN_BUFFER, "PIN_BUFFER", v2_0, size_of::<PinParams>()),
        r(
            ioc::UNPIN_BUFFER,
            "UNPIN_BUFFER",
            v2_0,
            size_of::<UnpinParams>(),
        ),
        r(
            ioc::GET_CB_FLAG,
            "GET_CB_FLAG",
            v2_0,
            size_of::<CbFlagParams>(),
        ),
        r(ioc::GET_INFO, "GET_INFO", v2_0, size_of::<InfoParams>()),
        r(
            ioc::GET_INFO_V2,
            "GET_INFO_V2",
            VERSION_WITH_GET_INFO_V2,
            size_of::<InfoV2Params>(),
        ),
        r(
            ioc::GET_ATTR,
            "GET_ATTR",
            VERSION_WITH_V2_API,
            size_of::<AttrParams>(),
        ),
        r(
            ioc::PIN_BUFFER_V2,
            "PIN_BUFFER_V2",
            VERSION_WITH_V2_API,
            size_of::<PinV2Params>(),
        ),
        r(
            ioc::REQ_MAPPING_TYPE,
            "REQ_MAPPING_TYPE",
            VERSION_WITH_V2_API,
            size_of::<ReqMappingTypeParams>(),
        ),
        r(
            ioc::GET_VERSION,
            "GET_VERSION",
            v2_0,
            size_of::<VersionParams>(),
        ),
    ]
};

/// The request whose value is `value`, if gdrdrv has one.
pub fn request(value: c_ulong) -> Option<&'static Request> {
    REQUESTS.iter().find(|r| r.value == value)
}

/// `PIN_BUFFER` parameters (40 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PinParams {
    /// In: start of the range.
    pub addr: u64,
    /// In: its length.
    pub size: u64,
    /// In: the P2P token (0 in persistent mode).
    pub p2p_token: u64,
    /// In: the VA space (0 in persistent mode).
    pub va_space: u32,
    /// Padding.
    pub _pad: u32,
    /// Out: the pin's handle.
    pub handle: u64,
}

/// `PIN_BUFFER_V2` parameters (32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PinV2Params {
    /// In: start of the range.
    pub addr: u64,
    /// In: its length.
    pub size: u64,
    /// In: `PIN_FLAG_*` bits.
    pub flags: u32,
    /// In, ignored.
    pub _pad: u32,
    /// Out: the pin's handle.
    pub handle: u64,
}

/// `UNPIN_BUFFER` parameters (8 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnpinParams {
    /// In: the pin's handle.
    pub handle: u64,
}

/// `GET_CB_FLAG` parameters (16 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CbFlagParams {
    /// In: the pin's handle.
    pub handle: u64,
    /// Out: 1 once the invalidation callback ran.
    pub flag: u32,
    /// Padding.
    pub _pad: u32,
}

/// `GET_INFO` parameters (48 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InfoParams {
    /// In: the pin's handle.
    pub handle: u64,
    /// Out: start of the pinned (rounded) range.
    pub va: u64,
    /// Out: its length.
    pub mapped_size: u64,
    /// Out: the GPU page size.
    pub page_size: u32,
    /// Out: the TSC's frequency (0 off x86).
    pub tsc_khz: u32,
    /// Out: TSC ticks the pin took.
    pub tm_cycles: u64,
    /// Out: 0 or 1.
    pub mapped: u32,
    /// Out: 1 when mapped write-combining.
    pub wc_mapping: u32,
}

/// `GET_INFO_V2` parameters (48 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InfoV2Params {
    /// In: the pin's handle.
    pub handle: u64,
    /// Out: start of the pinned (rounded) range.
    pub va: u64,
    /// Out: its length.
    pub mapped_size: u64,
    /// Out: the GPU page size.
    pub page_size: u32,
    /// Out: the TSC's frequency (0 off x86).
    pub tsc_khz: u32,
    /// Out: TSC ticks the pin took.
    pub tm_cycles: u64,
    /// Out: the current `MR_*`.
    pub mapping_type: u32,
    /// Padding.
    pub _pad: u32,
}

/// `GET_ATTR` parameters (8 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AttrParams {
    /// In: `ATTR_*`.
    pub attr: u32,
    /// Out: its value.
    pub val: u32,
}

/// `REQ_MAPPING_TYPE` parameters (16 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReqMappingTypeParams {
    /// In: the pin's handle.
    pub handle: u64,
    /// In: the `MR_*` the next mmap should get.
    pub mapping_type: u32,
    /// Padding.
    pub _pad: u32,
}

/// `GET_VERSION` parameters (8 bytes, both outputs).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VersionParams {
    /// Out: the driver's [`version`] word.
    pub gdrdrv_version: u32,
    /// Out: the oldest library version it accepts.
    pub minimum_gdr_api_version: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn request_values_match_the_reference_table() {
        assert_eq!(ioc::PIN_BUFFER, 0xC028DA01);
        assert_eq!(ioc::UNPIN_BUFFER, 0xC008DA02);
        assert_eq!(ioc::GET_CB_FLAG, 0xC008DA03);
        assert_eq!(ioc::GET_INFO, 0xC008DA04);
        assert_eq!(ioc::GET_INFO_V2, 0xC008DA05);
        assert_eq!(ioc::GET_ATTR, 0xC008DA06);
        assert_eq!(ioc::PIN_BUFFER_V2, 0xC020DA07);
        assert_eq!(ioc::REQ_MAPPING_TYPE, 0xC008DA08);
        assert_eq!(ioc::GET_VERSION, 0xC008DAFF);
    }

    #[test]
    fn param_layouts_match_the_driver() {
        assert_eq!(size_of::<PinParams>(), 40);
        assert_eq!(offset_of!(PinParams, p2p_token), 16);
        assert_eq!(offset_of!(PinParams, va_space), 24);
        assert_eq!(offset_of!(PinParams, handle), 32);
        assert_eq!(size_of::<PinV2Params>(), 32);
        assert_eq!(offset_of!(PinV2Params, flags), 16);
        assert_eq!(offset_of!(PinV2Params, handle), 24);
        assert_eq!(size_of::<UnpinParams>(), 8);
        assert_eq!(size_of::<CbFlagParams>(), 16);
        assert_eq!(offset_of!(CbFlagParams, flag), 8);
        assert_eq!(size_of::<InfoParams>(), 48);
        assert_eq!(offset_of!(InfoParams, page_size), 24);
        assert_eq!(offset_of!(InfoParams, tsc_khz), 28);
        assert_eq!(offset_of!(InfoParams, tm_cycles), 32);
        assert_eq!(offset_of!(InfoParams, mapped), 40);
        assert_eq!(offset_of!(InfoParams, wc_mapping), 44);
        assert_eq!(size_of::<InfoV2Params>(), 48);
        assert_eq!(offset_of!(InfoV2Params, mapping_type), 40);
        assert_eq!(size_of::<AttrParams>(), 8);
        assert_eq!(offset_of!(AttrParams, val), 4);
        assert_eq!(size_of::<ReqMappingTypeParams>(), 16);
        assert_eq!(offset_of!(ReqMappingTypeParams, mapping_type), 8);
        assert_eq!(size_of::<VersionParams>(), 8);
        assert_eq!(offset_of!(VersionParams, minimum_gdr_api_version), 4);
    }

    #[test]
    fn requests_are_found_by_value_with_the_version_that_brought_them() {
        let r = request(ioc::REQ_MAPPING_TYPE).unwrap();
        assert_eq!(
            (r.name, r.since, r.params_size),
            ("REQ_MAPPING_TYPE", 0x20005, 16)
        );
        assert_eq!(request(ioc::GET_INFO_V2).unwrap().since, 0x20004);
        assert_eq!(request(ioc::PIN_BUFFER).unwrap().params_size, 40);
        assert_eq!(request(iowr(9, 8)), None);
        let mut nrs = REQUESTS.map(|r| r.value & 0xFF);
        nrs.sort_unstable();
        assert_eq!(nrs, [1, 2, 3, 4, 5, 6, 7, 8, 255]);
    }

    #[test]
    fn constants_are_the_drivers() {
        assert_eq!(DRIVER_VERSION, 0x0002_0006);
        assert_eq!(MINIMUM_GDR_API_VERSION, 0x0002_0000);
        assert_eq!(GPU_PAGE_SIZE, 65536);
        assert_eq!(DEVICE_PATH.to_bytes(), b"/dev/gdrdrv");
    }
}
