//! gdrdrv backend: pins, maps and queries GPU memory through the `/dev/gdrdrv` kernel driver
//! with ioctl and mmap, for drivers 2.0 to 2.6.
//!
//! Version gates (driver version word `major << 16 | minor`): `GET_INFO_V2` from 2.4;
//! `GET_ATTR`, `PIN_BUFFER_V2` and `REQ_MAPPING_TYPE` from 2.5. Older drivers get the v1
//! ioctls, and the mapping type is checked after the mmap instead of requested before it.

use super::{Attr, Backend, BackendKind, Info, Mapping, MappingType, Pin, PinRequest};
use crate::error::{Error, Result};
use crate::sys::{self, IoctlParam};
use gdrapi_abi::gdrdrv::{self, PIN_FLAG_FORCE_PCIE};
use std::ffi::CStr;
use std::os::raw::c_ulong;
use std::sync::atomic::{AtomicI32, Ordering};

pub use gdrapi_abi::gdrdrv::{
    ioc, AttrParams, CbFlagParams, InfoParams, InfoV2Params, PinParams, PinV2Params,
    ReqMappingTypeParams, UnpinParams, VersionParams, DEVICE_PATH, GPU_PAGE_SIZE,
    VERSION_WITH_GET_INFO_V2, VERSION_WITH_V2_API,
};

/// The library version this implementation speaks (2.6).
pub const LIBRARY_VERSION: u32 = gdrdrv::version(2, 6);
/// The oldest driver the library accepts (2.0).
pub const MINIMUM_DRIVER_VERSION: u32 = gdrapi_abi::gdr::MINIMUM_GDRDRV_VERSION;

// SAFETY: (this impl and the ones below) each is a #[repr(C)] struct of integers with the
// driver's full layout (checked in the tests); any bit pattern is a valid value.
unsafe impl IoctlParam for PinParams {}
// SAFETY: see above.
unsafe impl IoctlParam for PinV2Params {}
// SAFETY: see above.
unsafe impl IoctlParam for UnpinParams {}
// SAFETY: see above.
unsafe impl IoctlParam for CbFlagParams {}
// SAFETY: see above.
unsafe impl IoctlParam for InfoParams {}
// SAFETY: see above.
unsafe impl IoctlParam for InfoV2Params {}
// SAFETY: see above.
unsafe impl IoctlParam for AttrParams {}
// SAFETY: see above.
unsafe impl IoctlParam for ReqMappingTypeParams {}
// SAFETY: see above.
unsafe impl IoctlParam for VersionParams {}

/// `major.minor` of a version word, for log lines.
fn dotted(v: u32) -> String {
    format!("{}.{}", v >> 16, v & 0xFFFF)
}

/// What to do about a failed `open` of the device node, for the log line that follows
/// upstream's "error opening driver".
pub fn open_failure_hint(errno: i32) -> &'static str {
    match errno {
        libc::ENOENT => {
            "/dev/gdrdrv does not exist: load the gdrdrv kernel module (modprobe gdrdrv, or gdrcopy's insmod.sh) \
             and create the node if the module did not (mknod /dev/gdrdrv c <major from /proc/devices> 0)"
        }
        libc::EACCES | libc::EPERM => {
            "no permission to open /dev/gdrdrv read-write: give this user access (chmod 0666 /dev/gdrdrv, \
             or a udev rule KERNEL==\"gdrdrv\", MODE=\"0666\")"
        }
        libc::ENXIO | libc::ENODEV => {
            "/dev/gdrdrv exists but no driver answers it: load the gdrdrv module, or recreate the node with the \
             major number listed for gdrdrv in /proc/devices and minor 0"
        }
        _ => "check that the gdrdrv kernel module is loaded and /dev/gdrdrv is accessible",
    }
}

/// Checks a `GET_VERSION` answer against what this library supports, logging upstream's
/// messages on refusal.
pub fn check_version(v: &VersionParams) -> Result<()> {
    if v.gdrdrv_version < MINIMUM_DRIVER_VERSION {
        gdr_err!(
            "The minimum required gdrdrv driver version is {} but the current gdrdrv version is {}",
            dotted(MINIMUM_DRIVER_VERSION),
            dotted(v.gdrdrv_version)
        );
        gdr_err!("upgrade the gdrdrv kernel module to gdrcopy 2.0 or newer");
        return Err(Error::NotSupported("gdrdrv driver too old"));
    }
    if v.minimum_gdr_api_version > LIBRARY_VERSION {
        gdr_err!(
            "gdrdrv driver requires libgdrapi version {} or above but the current libgdrapi version is {}",
            dotted(v.minimum_gdr_api_version),
            dotted(LIBRARY_VERSION)
        );
        gdr_err!("install a libgdrapi at least as new as the gdrdrv kernel module, or load an older gdrdrv");
        return Err(Error::NotSupported("gdrdrv driver too new"));
    }
    Ok(())
}

/// Upstream's log line for a refused pin plus, where NVML answers, the BAR1 figures (a full
/// BAR1 is the usual cause of a pin refused with ENOMEM).
#[cold]
fn log_failed_pin(e: &Error, size: u64) {
    match super::nvml::note_for_failed_pin(size) {
        Some(bar1) => gdr_err!("ioctl error (errno={}); {bar1}", e.errno()),
        None => gdr_err!("ioctl error (errno={})", e.errno()),
    }
}

/// `GET_VERSION`, with upstream's log line on failure.
fn version_ioctl(fd: i32) -> Result<VersionParams> {
    let mut v = VersionParams::default();
    sys::ioctl(fd, ioc::GET_VERSION, &mut v).inspect_err(|e| {
        gdr_err!(
            "Error getting the gdrdrv driver version with ioctl error (errno={}). gdrdrv might be too old.",
            e.errno()
        )
    })?;
    Ok(v)
}

/// The aligned range gdrdrv pins for `addr`/`size`: `(va, page_offset, mapped_size)`, the
/// aligned address, the offset of `addr` in it and the aligned size.
pub fn gpu_page_range(addr: u64, size: u64) -> (u64, u64, u64) {
    let va = addr & !(GPU_PAGE_SIZE - 1);
    let end = addr.saturating_add(size).saturating_add(GPU_PAGE_SIZE - 1) & !(GPU_PAGE_SIZE - 1);
    (va, addr - va, end.saturating_sub(va))
}

/// An open `/dev/gdrdrv` whose version was checked.
pub struct GdrDrv {
    fd: AtomicI32,
    version: u32,
}

impl GdrDrv {
    /// Opens `/dev/gdrdrv` with `O_RDWR|O_CLOEXEC` and checks the driver version, logging
    /// why and how to fix it on failure.
    pub fn open() -> Result<GdrDrv> {
        Self::open_path(DEVICE_PATH)
    }

    /// [`GdrDrv::open`] on another node path (for tests).
    pub fn open_path(path: &CStr) -> Result<GdrDrv> {
        let fd = sys::open(path, libc::O_RDWR | libc::O_CLOEXEC).inspect_err(|e| {
            let errno = e.errno();
            gdr_err!(
                "error opening driver (errno={}/{})",
                errno,
                sys::strerror(errno)
            );
            gdr_err!("{}", open_failure_hint(errno));
        })?;
        let checked = version_ioctl(fd)
            .inspect_err(|_| {
                gdr_err!(
                    "{} does not answer GET_VERSION: it is not a gdrdrv node, or the module predates gdrcopy 2.0",
                    path.to_string_lossy()
                );
            })
            .and_then(|v| check_version(&v).map(|()| v));
        match checked {
            Ok(v) => Ok(GdrDrv {
                fd: AtomicI32::new(fd),
                version: v.gdrdrv_version,
            }),
            Err(e) => {
                let _ = sys::close(fd);
                Err(e)
            }
        }
    }

    /// `ioctl` on the device, with upstream's "ioctl error" log line on failure; returns
    /// `params` as the driver left them.
    fn ioctl<T: IoctlParam>(&self, request: c_ulong, mut params: T) -> Result<T> {
        match sys::ioctl(self.fd(), request, &mut params) {
            Ok(()) => Ok(params),
            Err(e) => {
                gdr_err!("ioctl error (errno={})", e.errno());
                Err(e)
            }
        }
    }

    /// The v1 `GET_INFO` of the pin whose driver handle is `handle`: the legacy
    /// `gdr_get_info`, and `gdr_get_info_v2` on drivers before 2.4.
    fn info_v1_ioctl(&self, handle: u64) -> Result<Info> {
        let p = self.ioctl(
            ioc::GET_INFO,
            InfoParams {
                handle,
                ..Default::default()
            },
        )?;
        let mapping_type = match (p.mapped != 0, p.wc_mapping != 0) {
            (false, _) => MappingType::None,
            (true, true) => MappingType::WriteCombining,
            (true, false) => MappingType::Caching,
        };
        Ok(Info {
            va: p.va,
            mapped_size: p.mapped_size,
            page_size: p.page_size,
            tm_cycles: p.tm_cycles,
            cycles_per_ms: p.tsc_khz,
            mapped: p.mapped != 0,
            wc_mapping: p.wc_mapping != 0,
            mapping_type: mapping_type as u32,
        })
    }
}

/// Removes `mapping`, made by [`Backend::map`] of [`GdrDrv`] for the pin whose driver handle
/// is `handle`: one `munmap`, logged on failure as upstream does.
///
/// # Safety
/// `mapping` is a live mapping of the device that nothing uses any more.
unsafe fn unmap(handle: u64, mapping: &Mapping) -> Result<()> {
    // SAFETY: the range is a mapping of the device, out of use (the caller's contract).
    let r = unsafe { sys::munmap(mapping.addr, mapping.len) };
    if let Err(e) = &r {
        let errno = e.errno();
        gdr_err!(
            "error {}({}) while unmapping handle {:x}, rounded_size={}",
            sys::strerror(errno),
            errno,
            handle,
            mapping.len
        );
    }
    r
}

impl Backend for GdrDrv {
    fn kind(&self) -> BackendKind {
        BackendKind::Gdrdrv
    }

    fn fd(&self) -> i32 {
        self.fd.load(Ordering::Acquire)
    }

    fn driver_version_word(&self) -> u32 {
        self.version
    }

    fn pin(&self, req: &PinRequest) -> Result<Pin> {
        let pinned = if self.version >= VERSION_WITH_V2_API {
            // FORCE_PCIE is the only bit the driver knows; the rest is dropped as upstream does.
            let mut p = PinV2Params {
                addr: req.addr,
                size: req.size,
                flags: req.flags & PIN_FLAG_FORCE_PCIE,
                ..Default::default()
            };
            sys::ioctl(self.fd(), ioc::PIN_BUFFER_V2, &mut p).map(|()| p.handle)
        } else if req.flags != 0 {
            gdr_err!("gdrdrv is too old and does not support the requested feature");
            return Err(Error::InvalidArgument("pin flags need gdrdrv 2.5 or newer"));
        } else {
            let mut p = PinParams {
                addr: req.addr,
                size: req.size,
                p2p_token: req.p2p_token,
                va_space: req.va_space,
                ..Default::default()
            };
            sys::ioctl(self.fd(), ioc::PIN_BUFFER, &mut p).map(|()| p.handle)
        };
        let handle = pinned.inspect_err(|e| log_failed_pin(e, req.size))?;
        let (va, page_offset, mapped_size) = gpu_page_range(req.addr, req.size);
        Ok(Pin {
            handle,
            va,
            mapped_size,
            page_offset,
            fixed_type: MappingType::None,
        })
    }

    fn unpin(&self, pin: &Pin) -> Result<()> {
        let p = UnpinParams { handle: pin.handle };
        self.ioctl(ioc::UNPIN_BUFFER, p).map(drop)
    }

    fn callback_flag(&self, pin: &Pin) -> Result<bool> {
        let p = CbFlagParams {
            handle: pin.handle,
            ..Default::default()
        };
        Ok(self.ioctl(ioc::GET_CB_FLAG, p)?.flag != 0)
    }

    /// The v2 ioctl where the driver has it (2.4 and later), else the v1 ioctl.
    fn info(&self, pin: &Pin, _current: Option<&Mapping>) -> Result<Info> {
        if self.version < VERSION_WITH_GET_INFO_V2 {
            return self.info_v1_ioctl(pin.handle);
        }
        let p = InfoV2Params {
            handle: pin.handle,
            ..Default::default()
        };
        let p = self.ioctl(ioc::GET_INFO_V2, p)?;
        Ok(Info {
            va: p.va,
            mapped_size: p.mapped_size,
            page_size: p.page_size,
            tm_cycles: p.tm_cycles,
            cycles_per_ms: p.tsc_khz,
            mapped: p.mapping_type != MappingType::None as u32,
            wc_mapping: p.mapping_type == MappingType::WriteCombining as u32,
            mapping_type: p.mapping_type,
        })
    }

    fn info_v1(&self, pin: &Pin, _current: Option<&Mapping>) -> Result<Info> {
        self.info_v1_ioctl(pin.handle)
    }

    /// Asks for the mapping type `request` (drivers 2.5+), maps `size` bytes (a multiple of
    /// the host page) of the device at the pin's offset, then asks the driver which type it
    /// granted, as upstream's `gdr_map` does (its `gdr_get_info_v2`); unmaps again on failure.
    fn map(&self, pin: &Pin, size: usize, request: MappingType) -> Result<Mapping> {
        let handle = pin.handle;
        if self.version >= VERSION_WITH_V2_API {
            let p = ReqMappingTypeParams {
                handle,
                mapping_type: request as u32,
                ..Default::default()
            };
            self.ioctl(ioc::REQ_MAPPING_TYPE, p)?;
        }
        let offset = handle
            .checked_mul(sys::page_size() as u64)
            .ok_or(Error::InvalidArgument(
                "driver handle too large for an mmap offset",
            ))?;
        let addr = sys::mmap_shared(size, self.fd(), offset).inspect_err(|e| {
            let errno = e.errno();
            gdr_err!(
                "error {}({}) while mapping handle {:x}, rounded_size={} offset={:x}",
                sys::strerror(errno),
                errno,
                handle,
                size,
                offset
            );
        })?;
        let granted = self.info(pin, None).inspect_err(|e| {
            gdr_err!(
                "error {} from get_info, munmapping before exiting",
                e.errno()
            )
        });
        let refused = match granted.map(|i| MappingType::from_raw(i.mapping_type)) {
            Err(e) => e,
            Ok(None | Some(MappingType::None)) => {
                gdr_err!("mh is not mapped");
                Error::MappingRefused
            }
            Ok(Some(kind)) if request == MappingType::None || kind == request => {
                return Ok(Mapping {
                    addr,
                    len: size,
                    kind,
                });
            }
            Ok(Some(_)) => {
                gdr_err!("gdrdrv cannot fulfill the requested mapping type. It might be too old.");
                Error::InvalidArgument("requested mapping type not granted")
            }
        };
        // SAFETY: made just above and not handed out.
        let _ = unsafe { sys::munmap(addr, size) };
        Err(refused)
    }

    fn unmap(&self, pin: &Pin, mapping: &Mapping) -> Result<()> {
        // SAFETY: the session passes only mappings this backend made and that it has taken out
        // of use (its state machine holds the handle in the "unmapping" or "unpinning" state).
        unsafe { unmap(pin.handle, mapping) }
    }

    fn attribute(&self, attr: Attr) -> Result<i32> {
        if self.version < VERSION_WITH_V2_API {
            gdr_dbg!("gdrdrv is too old and does not support querying attributes");
            return Ok(0);
        }
        let p = AttrParams {
            attr: attr as u32,
            val: 0,
        };
        Ok(self.ioctl(ioc::GET_ATTR, p)?.val as i32)
    }

    fn driver_version(&self) -> Result<(i32, i32)> {
        let v = version_ioctl(self.fd())?;
        Ok((
            (v.gdrdrv_version >> 16) as i32,
            (v.gdrdrv_version & 0xFFFF) as i32,
        ))
    }

    fn close(&self) -> Result<()> {
        let fd = self.fd.swap(-1, Ordering::AcqRel);
        if fd < 0 {
            return Ok(());
        }
        sys::close(fd).inspect_err(|e| {
            let errno = e.errno();
            gdr_err!(
                "error closing driver (errno={}/{})",
                errno,
                sys::strerror(errno)
            );
        })
    }
}

impl Drop for GdrDrv {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_types_and_attributes_pass_to_the_driver_unchanged() {
        assert_eq!(MappingType::None as u32, gdrdrv::MR_NONE);
        assert_eq!(MappingType::WriteCombining as u32, gdrdrv::MR_WC);
        assert_eq!(MappingType::Caching as u32, gdrdrv::MR_CACHING);
        assert_eq!(MappingType::Device as u32, gdrdrv::MR_DEVICE);
        assert_eq!(
            Attr::UsePersistentMapping as u32,
            gdrdrv::ATTR_USE_PERSISTENT_MAPPING
        );
        assert_eq!(
            Attr::SupportPinFlagForcePcie as u32,
            gdrdrv::ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE
        );
    }

    #[test]
    fn gpu_page_rounding_follows_the_driver() {
        assert_eq!(
            gpu_page_range(0x10000 + 0x1234, 0x10000),
            (0x10000, 0x1234, 0x20000)
        );
        assert_eq!(gpu_page_range(0x20000, 0x50000), (0x20000, 0, 0x50000));
        assert_eq!(gpu_page_range(0x20000, 1), (0x20000, 0, 0x10000));
        assert_eq!(gpu_page_range(0x20008, 8), (0x20000, 8, 0x10000));
        // No overflow on absurd sizes.
        let (va, off, _) = gpu_page_range(u64::MAX - 5, 100);
        assert_eq!((va, off), (!0xFFFF, 0xFFFA));
    }

    #[test]
    fn version_checks_accept_2_0_to_2_6_and_refuse_the_rest() {
        for minor in 0..=6 {
            let v = VersionParams {
                gdrdrv_version: 0x20000 | minor,
                minimum_gdr_api_version: 0x20000,
            };
            assert!(check_version(&v).is_ok(), "2.{minor}");
        }
        let old = VersionParams {
            gdrdrv_version: 0x10003,
            minimum_gdr_api_version: 0,
        };
        assert_eq!(check_version(&old).unwrap_err().errno(), libc::ENOTSUP);
        let picky = VersionParams {
            gdrdrv_version: 0x20007,
            minimum_gdr_api_version: 0x20007,
        };
        assert!(check_version(&picky).is_err());
        let newer = VersionParams {
            gdrdrv_version: 0x30000,
            minimum_gdr_api_version: 0x20006,
        };
        assert!(check_version(&newer).is_ok());
    }

    #[test]
    fn open_failures_are_errors_with_a_fix_hint() {
        let e = GdrDrv::open_path(c"/nonexistent/gdrdrv").err().unwrap();
        assert_eq!(e.errno(), libc::ENOENT);
        assert!(open_failure_hint(libc::ENOENT).contains("mknod"));
        assert!(open_failure_hint(libc::EACCES).contains("udev"));
        // A node that does not answer GET_VERSION is refused (and its fd closed).
        let e = GdrDrv::open_path(c"/dev/null").err().unwrap();
        assert_eq!(e.errno(), libc::ENOTTY);
    }

    #[test]
    fn dotted_versions() {
        assert_eq!(dotted(0x20006), "2.6");
        assert_eq!(dotted(0x1000c), "1.12");
    }
}
