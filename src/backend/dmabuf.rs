//! DMA-BUF backend: GPU mappings without the kernel module. A pin exports the host-page-aligned
//! range as a dma-buf (`cuMemGetHandleForAddressRange`, handle type `DMA_BUF_FD`); a map is an
//! mmap of that fd. libcuda is loaded at run time only ([`super::cuda`]).
//!
//! Selection (in [`super::open`]): used when `/dev/gdrdrv` cannot be used, or always when
//! `GDRCOPY_USE_DMABUF_MMAP=1`, provided the CUDA driver is 13.3 or newer and some device
//! reports `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`. Every refusal logs one ERR line that names
//! the cause (no libcuda, old CUDA, missing entry point, `cuInit` failed, no device with
//! dma-buf support).
//!
//! Where this differs from upstream 2.6, on purpose:
//! - errors are errno values, never a raw `CUresult` (table in [`super::cuda::result`]);
//! - a pin that finds no current CUDA context uses the device's primary context, retained once
//!   per device for the life of the backend and released at [`Backend::close`], instead of
//!   retaining and releasing it around every pin; the caller's current context is left as it
//!   was (it is only switched, and switched back, when the thread had none);
//! - a map of a pin whose address is not host-page aligned is refused with EINVAL and
//!   upstream's log line before any system call (upstream passes the sub-page offset to mmap,
//!   which the kernel refuses with EINVAL), so such pins never map, as with upstream;
//! - the mapping is marked `MADV_DONTFORK`: like a gdrdrv mapping (`VM_DONTCOPY`), it is not
//!   inherited by a child process (upstream's DMA-BUF mapping is);
//! - the legacy `gdr_get_info` reports the same values as `gdr_get_info_v2` (upstream: EBADF);
//! - `gdr_driver_get_version` returns 0 with 2.6, the gdrdrv interface level this backend
//!   provides (v2 pin with FORCE_PCIE, mapping types, attributes), so callers that require
//!   success and at least 2.5 keep working (upstream aborts on an assertion). The CUDA driver
//!   version is in the INFO line logged when the backend is chosen;
//! - libcuda is loaded once per process and kept (see [`super::cuda::loader`]) rather than
//!   unloaded at the last `gdr_close`;
//! - the device of a pin is asked for the caller's own address (certainly inside the
//!   allocation), not the page-aligned one; a map larger than the pinned range, or of a type
//!   other than the one fixed at pin time, is refused (EINVAL) before any system call; the
//!   kernel's ENOTSUPP (524) from mmap of an exporter without mmap becomes ENOTSUP.

use super::cuda::types::{attr, MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE};
use super::cuda::{self, Contexts, CuError, Driver};
use super::{fixed, Attr, Backend, BackendKind, Info, Mapping, MappingType, Pin, PinRequest};
use crate::error::{Error, Result};
use crate::ffi::types::GDR_PIN_FLAG_FORCE_PCIE;
use crate::sys::strerror;

/// The kernel-internal `ENOTSUPP` that a dma-buf exporter without mmap support leaks to user
/// space from mmap; C callers get `ENOTSUP` instead.
const KERNEL_ENOTSUPP: i32 = 524;

/// The version [`Backend::driver_version`] reports (see the module documentation).
const REPORTED_DRIVER_VERSION: (i32, i32) = (2, 6);

/// The DMA-BUF backend of one session.
#[derive(Debug)]
pub struct DmaBuf {
    cuda: &'static Driver,
    page_size: u64,
    /// Primary contexts retained so far, one per device; released at close.
    contexts: Contexts,
}

/// The host page size (`sysconf(_SC_PAGESIZE)`), 4096 if it cannot be read.
fn host_page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 && (p as u64).is_power_of_two() {
        p as u64
    } else {
        4096
    }
}

/// The aligned range a pin of `addr, size` exports: `(aligned address, offset of addr in it,
/// aligned size)`, or `None` when the range is empty or wraps.
fn aligned_range(addr: u64, size: u64, page: u64) -> Option<(u64, u64, u64)> {
    if size == 0 {
        return None;
    }
    let aligned = addr & !(page - 1);
    let offset = addr - aligned;
    let end = addr.checked_add(size)?.checked_add(page - 1)? & !(page - 1);
    Some((aligned, offset, end - aligned))
}

/// The mapping type fixed at pin time: cached on a coherent platform unless the pin forces the
/// PCIe path, write-combining otherwise.
fn mapping_type_for(coherent: bool, force_pcie: bool) -> MappingType {
    if coherent && !force_pcie {
        MappingType::Caching
    } else {
        MappingType::WriteCombining
    }
}

impl DmaBuf {
    /// Loads libcuda and checks that some device supports dma-buf mmap. Logs the reason of any
    /// refusal at ERR level.
    pub fn open() -> Result<DmaBuf> {
        match cuda::load(cuda::FOR_DMABUF) {
            Ok(driver) => DmaBuf::with_driver(driver),
            Err(e) => {
                crate::gdr_err!("dmabuf mmap backend unavailable: {e}");
                crate::gdr_info!("gdr_cuda_init() failed");
                Err(e.to_error())
            }
        }
    }

    /// A backend on an already loaded driver, provided it exports dma-bufs and some device
    /// supports dma-buf mmap.
    pub fn with_driver(cuda: &'static Driver) -> Result<DmaBuf> {
        if let Err(m) = cuda.dmabuf_export_available() {
            crate::gdr_err!("dmabuf mmap backend unavailable: {m}");
            crate::gdr_info!("gdr_cuda_init() failed");
            return Err(m.into());
        }
        let refuse = |e: CuError| {
            crate::gdr_err!(
                "dmabuf mmap backend unavailable: \"{}\" failed ({}: {})",
                e.call,
                e.code,
                cuda.describe(e.code)
            );
            crate::gdr_info!("gdr_cuda_any_device_supports_dmabuf_mmap() failed");
            e.to_error()
        };
        let count = cuda.device_count().map_err(refuse)?;
        let mut supported = None;
        for ordinal in 0..count {
            let dev = cuda.device(ordinal).map_err(refuse)?;
            if cuda
                .device_attribute(dev, attr::DMA_BUF_SUPPORTED)
                .map_err(refuse)?
                != 0
            {
                supported = Some(ordinal);
                break;
            }
        }
        let Some(ordinal) = supported else {
            crate::gdr_err!(
                "dmabuf mmap backend unavailable: dma-buf mmap not supported on any of the devices ({count} found)"
            );
            crate::gdr_info!("dma-buf mmap not supported on any of the devices");
            return Err(Error::NotSupported(
                "dma-buf mmap not supported on any of the devices",
            ));
        };
        let v = cuda.version();
        crate::gdr_info!("Using dma-buf backend");
        crate::gdr_info!(
            "dma-buf backend: CUDA driver {}.{}, device {ordinal} supports dma-buf mmap",
            v / 1000,
            (v % 1000) / 10
        );
        Ok(DmaBuf {
            cuda,
            page_size: host_page_size(),
            contexts: Contexts::new(cuda),
        })
    }

    /// Logs a failed CUDA call and turns it into the crate error.
    fn fail(&self, e: CuError) -> Error {
        self.cuda.log_failure(e);
        e.to_error()
    }

    /// [`Self::fail`] for a refused export of `size` bytes: a dma-buf that the CPU maps goes
    /// through BAR1 as a gdrdrv pin does, so where NVML answers the log line adds the BAR1
    /// figures.
    #[cold]
    fn fail_export(&self, e: CuError, size: u64) -> Error {
        let bar1 = super::nvml::note_for_failed_pin(size);
        self.cuda.log_failure_with(e, bar1.as_deref());
        e.to_error()
    }
}

/// Logs why [`fixed::accept_map`] refused a map, in upstream's words where it has them,
/// and returns the map's error.
#[cold]
fn refuse_map(why: fixed::Refusal, pin: &Pin, size: usize, request: MappingType) -> Error {
    match why {
        fixed::Refusal::OtherType => crate::gdr_err!(
            "dmabuf backend cannot fulfill the requested mapping type (requested={}, dmabuf mmap supports {}).",
            request as u32,
            pin.fixed_type as u32
        ),
        fixed::Refusal::Size => crate::gdr_err!(
            "dmabuf backend cannot map {size} bytes of a pinned range of {} bytes",
            pin.mapped_size
        ),
        // Upstream maps at the pin's sub-page offset, which mmap refuses: same errno and log
        // line, without the system call.
        fixed::Refusal::Offset => crate::gdr_err!(
            "error {}({}) while mapping dma_buf_fd, rounded_size={size}",
            strerror(libc::EINVAL),
            libc::EINVAL
        ),
    }
    why.error()
}

/// Logs a failed mmap of a dma-buf as upstream does and returns its error; the kernel's
/// ENOTSUPP (an exporter without mmap) becomes ENOTSUP, which C callers know.
#[cold]
fn refuse_mmap(e: Error, size: usize) -> Error {
    let errno = e.errno();
    if errno == KERNEL_ENOTSUPP {
        crate::gdr_err!(
            "error ENOTSUPP({errno}) while mapping dma_buf_fd, rounded_size={size}: this dma-buf exporter does not support mmap (CUDA driver too old?)"
        );
        return Error::Sys {
            call: "mmap",
            errno: libc::ENOTSUP,
        };
    }
    crate::gdr_err!(
        "error {}({errno}) while mapping dma_buf_fd, rounded_size={size}",
        strerror(errno)
    );
    e
}

fn fd_of(pin: &Pin) -> Result<i32> {
    i32::try_from(pin.handle).map_err(|_| Error::InvalidHandle)
}

impl Backend for DmaBuf {
    fn kind(&self) -> BackendKind {
        BackendKind::DmaBuf
    }

    fn fd(&self) -> i32 {
        -1
    }

    fn driver_version_word(&self) -> u32 {
        0
    }

    fn pin(&self, req: &PinRequest) -> Result<Pin> {
        let Some((va, page_offset, mapped_size)) =
            aligned_range(req.addr, req.size, self.page_size)
        else {
            crate::gdr_err!(
                "invalid range to pin: addr={:#x} size={}",
                req.addr,
                req.size
            );
            return Err(Error::InvalidArgument("empty or wrapping address range"));
        };
        let len =
            usize::try_from(mapped_size).map_err(|_| Error::InvalidArgument("range too large"))?;
        let force_pcie = req.flags & GDR_PIN_FLAG_FORCE_PCIE != 0;
        let cuda = self.cuda;

        // The caller's own address is certainly inside the allocation; the aligned start may not be.
        let ordinal = cuda
            .pointer_device_ordinal(req.addr)
            .map_err(|e| self.fail(e))?;
        let dev = cuda.device(ordinal).map_err(|e| self.fail(e))?;
        if cuda
            .device_attribute(dev, attr::DMA_BUF_SUPPORTED)
            .map_err(|e| self.fail(e))?
            == 0
        {
            crate::gdr_err!("device {ordinal} does not support dma-buf mmap");
            return Err(Error::NotSupported("device does not support dma-buf mmap"));
        }
        let coherent = cuda
            .device_attribute(dev, attr::PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES)
            .unwrap_or(0)
            != 0;
        let fixed_type = mapping_type_for(coherent, force_pcie);
        let flags = if force_pcie {
            MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE
        } else {
            0
        };

        let fd = self
            .contexts
            .with_current(dev, || cuda.export_dmabuf(va, len, flags))
            .map_err(|e| self.fail_export(e, mapped_size))?;
        if fd < 0 {
            crate::gdr_err!("cuMemGetHandleForAddressRange succeeded but returned fd {fd}");
            return Err(Error::Sys {
                call: "cuMemGetHandleForAddressRange",
                errno: libc::EIO,
            });
        }
        crate::gdr_dbg!(
            "pinned va={va:#x} size={mapped_size} offset={page_offset} dma_buf_fd={fd} type={fixed_type:?}"
        );
        Ok(Pin {
            handle: fd as u64,
            va,
            mapped_size,
            page_offset,
            fixed_type,
        })
    }

    fn unpin(&self, pin: &Pin) -> Result<()> {
        let fd = fd_of(pin)?;
        // SAFETY: the session passes each live pin once; its fd is owned by this pin.
        if unsafe { libc::close(fd) } != 0 {
            // Linux releases the descriptor even when close reports an error, so the pin is
            // gone either way; upstream ignores this result too.
            let e = Error::last_os("close");
            crate::gdr_warn!("closing dma_buf_fd {fd}: {e}");
        }
        Ok(())
    }

    fn callback_flag(&self, _pin: &Pin) -> Result<bool> {
        Ok(false)
    }

    fn info(&self, pin: &Pin, current: Option<&Mapping>) -> Result<Info> {
        Ok(fixed::info(pin, self.page_size as u32, current))
    }

    fn info_v1(&self, pin: &Pin, current: Option<&Mapping>) -> Result<Info> {
        self.info(pin, current)
    }

    fn map(&self, pin: &Pin, size: usize, request: MappingType) -> Result<Mapping> {
        if !matches!(
            pin.fixed_type,
            MappingType::WriteCombining | MappingType::Caching
        ) {
            // Every pin of this backend fixes WC or CACHING; anything else was not made here.
            return Err(Error::InvalidHandle);
        }
        if let Err(why) = fixed::accept_map(pin, size, request) {
            return Err(refuse_map(why, pin, size, request));
        }
        let fd = fd_of(pin)?;
        // Offset 0 of the pin's dma-buf is the start of the export, the pinned address itself.
        let addr = crate::sys::mmap_shared(size, fd, 0).map_err(|e| refuse_mmap(e, size))?;
        if let Err(e) = crate::sys::dont_fork(addr, size) {
            // The copy functions refuse a child anyway (see `crate::process`); the mapping
            // itself would be inherited.
            crate::gdr_warn!(
                "cannot mark the mapping of dma_buf_fd {fd} as not inherited by child processes: {e}"
            );
        }
        crate::gdr_dbg!("ptr_va: {addr:#x}");
        Ok(Mapping {
            addr,
            len: size,
            kind: pin.fixed_type,
        })
    }

    fn unmap(&self, _pin: &Pin, mapping: &Mapping) -> Result<()> {
        crate::gdr_dbg!("unmapping va: {:#x}", mapping.addr);
        // SAFETY: the session passes only mappings this backend made and still live.
        if unsafe { libc::munmap(mapping.addr as *mut libc::c_void, mapping.len) } != 0 {
            let e = Error::last_os("munmap");
            let errno = e.errno();
            crate::gdr_err!(
                "error {}({errno}) while unmapping dma_buf mapping, rounded_size={}",
                strerror(errno),
                mapping.len
            );
            return Err(e);
        }
        Ok(())
    }

    fn attribute(&self, attr: Attr) -> Result<i32> {
        Ok(match attr {
            Attr::UsePersistentMapping | Attr::SupportPinFlagForcePcie | Attr::UsingDmaBufMmap => 1,
        })
    }

    fn driver_version(&self) -> Result<(i32, i32)> {
        Ok(REPORTED_DRIVER_VERSION)
    }

    fn close(&self) -> Result<()> {
        self.contexts.release_all();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::cuda::fake;
    use super::*;
    use std::sync::atomic::Ordering::SeqCst;

    const BASE: u64 = 0x7f00_0000_0000;

    fn backend() -> DmaBuf {
        DmaBuf::with_driver(fake::driver()).expect("fake driver has dma-buf devices")
    }

    fn req(addr: u64, size: u64, flags: u32) -> PinRequest {
        PinRequest {
            addr,
            size,
            flags,
            p2p_token: 0,
            va_space: 0,
        }
    }

    fn fd_is_open(fd: i32) -> bool {
        // SAFETY: F_GETFD only queries the descriptor table.
        let r = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        r != -1
    }

    #[test]
    fn aligned_range_math() {
        assert_eq!(aligned_range(0x10000, 4096, 4096), Some((0x10000, 0, 4096)));
        assert_eq!(aligned_range(0x10000, 1, 4096), Some((0x10000, 0, 4096)));
        assert_eq!(
            aligned_range(0x10064, 4096, 4096),
            Some((0x10000, 100, 8192))
        );
        assert_eq!(
            aligned_range(0x10fff, 2, 4096),
            Some((0x10000, 0xfff, 8192))
        );
        assert_eq!(aligned_range(0x10000, 0, 4096), None);
        assert_eq!(aligned_range(u64::MAX - 10, 100, 4096), None);
    }

    #[test]
    fn mapping_type_rules() {
        assert_eq!(mapping_type_for(false, false), MappingType::WriteCombining);
        assert_eq!(mapping_type_for(false, true), MappingType::WriteCombining);
        assert_eq!(mapping_type_for(true, false), MappingType::Caching);
        assert_eq!(mapping_type_for(true, true), MappingType::WriteCombining);
    }

    #[test]
    fn open_needs_a_device_with_dmabuf() {
        let _g = fake::lock();
        fake::DMABUF_MASK.store(0, SeqCst);
        assert_eq!(
            DmaBuf::with_driver(fake::driver()).err().map(|e| e.errno()),
            Some(libc::ENOTSUP)
        );
        fake::DMABUF_MASK.store(0b10, SeqCst);
        assert!(DmaBuf::with_driver(fake::driver()).is_ok());
        fake::DEVICES.store(0, SeqCst);
        assert_eq!(
            DmaBuf::with_driver(fake::driver()).err().map(|e| e.errno()),
            Some(libc::ENOTSUP)
        );
        fake::DEVICES.store(2, SeqCst);
        fake::COUNT_FAIL.store(100, SeqCst); // CUDA_ERROR_NO_DEVICE
        assert_eq!(
            DmaBuf::with_driver(fake::driver()).err().map(|e| e.errno()),
            Some(libc::ENODEV)
        );
    }

    #[test]
    fn pin_exports_the_aligned_range_and_unpin_closes_it() {
        let _g = fake::lock();
        let b = backend();
        let pin = b.pin(&req(BASE + 100, 5000, 0)).expect("pin");
        let page = host_page_size();
        assert_eq!(pin.va, BASE);
        assert_eq!(pin.page_offset, 100);
        assert_eq!(pin.mapped_size, 5100_u64.div_ceil(page) * page);
        assert_eq!(pin.fixed_type, MappingType::WriteCombining);
        let ex = fake::EXPORTS.lock().clone();
        assert_eq!(ex.len(), 1);
        assert_eq!(
            (ex[0].addr, ex[0].size as u64, ex[0].flags),
            (BASE, pin.mapped_size, 0)
        );
        let fd = pin.handle as i32;
        assert!(fd_is_open(fd));
        b.unpin(&pin).expect("unpin");
        assert!(!fd_is_open(fd), "unpin must close the dma-buf fd");
        b.close().expect("close");
    }

    #[test]
    fn force_pcie_and_coherence_decide_the_type() {
        let _g = fake::lock();
        let b = backend();
        let p = b
            .pin(&req(BASE, 4096, GDR_PIN_FLAG_FORCE_PCIE))
            .expect("pin");
        assert_eq!(p.fixed_type, MappingType::WriteCombining);
        assert_eq!(
            fake::EXPORTS.lock()[0].flags,
            MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE
        );
        fake::COHERENT.store(true, SeqCst);
        let c = b.pin(&req(BASE, 4096, 0)).expect("pin");
        assert_eq!(c.fixed_type, MappingType::Caching);
        let cf = b
            .pin(&req(BASE, 4096, GDR_PIN_FLAG_FORCE_PCIE | 0x80))
            .expect("pin");
        assert_eq!(cf.fixed_type, MappingType::WriteCombining);
        assert_eq!(
            fake::EXPORTS.lock()[2].flags,
            1,
            "unknown flag bits are not passed on"
        );
        for p in [p, c, cf] {
            b.unpin(&p).expect("unpin");
        }
    }

    #[test]
    fn primary_context_retained_once_and_thread_left_as_it_was() {
        let _g = fake::lock();
        let b = backend();
        let mut pins = Vec::new();
        for i in 0..5 {
            pins.push(b.pin(&req(BASE + i * 4096, 4096, 0)).expect("pin"));
            assert_eq!(
                fake::CURRENT.with(|c| c.get()),
                0,
                "no context left current"
            );
        }
        assert_eq!(fake::RETAIN_CALLS.load(SeqCst), 1);
        assert_eq!(fake::RETAINED[0].load(SeqCst), 1);
        assert!(fake::EXPORTS
            .lock()
            .iter()
            .all(|e| e.ctx == fake::primary_ctx(0)));

        // Device 1 gets its own primary context.
        fake::POINTER_ORDINAL.store(1, SeqCst);
        pins.push(b.pin(&req(BASE, 4096, 0)).expect("pin"));
        assert_eq!(fake::RETAINED[1].load(SeqCst), 1);

        // A caller's context is used as is, and stays current.
        fake::CURRENT.with(|c| c.set(0xabc0));
        pins.push(b.pin(&req(BASE, 4096, 0)).expect("pin"));
        assert_eq!(fake::CURRENT.with(|c| c.get()), 0xabc0);
        assert_eq!(fake::EXPORTS.lock().last().map(|e| e.ctx), Some(0xabc0));
        assert_eq!(fake::RETAIN_CALLS.load(SeqCst), 2);
        fake::CURRENT.with(|c| c.set(0));

        for p in &pins {
            b.unpin(p).expect("unpin");
        }
        b.close().expect("close");
        assert_eq!(fake::RETAINED[0].load(SeqCst), 0, "released at close");
        assert_eq!(fake::RETAINED[1].load(SeqCst), 0, "released at close");
        drop(b);
        assert_eq!(fake::RETAINED[0].load(SeqCst), 0, "not released twice");
    }

    #[test]
    fn drop_without_close_releases_contexts() {
        let _g = fake::lock();
        let b = backend();
        let p = b.pin(&req(BASE, 4096, 0)).expect("pin");
        b.unpin(&p).expect("unpin");
        assert_eq!(fake::RETAINED[0].load(SeqCst), 1);
        drop(b);
        assert_eq!(fake::RETAINED[0].load(SeqCst), 0);
    }

    #[test]
    fn pin_failures_are_errnos_and_leave_the_thread_clean() {
        let _g = fake::lock();
        let b = backend();
        fake::EXPORT_FAIL.store(801, SeqCst); // CUDA_ERROR_NOT_SUPPORTED
        let e = b.pin(&req(BASE, 4096, 0)).expect_err("export fails");
        assert_eq!(
            e,
            Error::Sys {
                call: "cuMemGetHandleForAddressRange",
                errno: libc::ENOTSUP
            }
        );
        assert_eq!(fake::CURRENT.with(|c| c.get()), 0);
        fake::EXPORT_FAIL.store(1, SeqCst); // CUDA_ERROR_INVALID_VALUE: EINVAL, not EPERM
        assert_eq!(
            b.pin(&req(BASE, 4096, 0)).map_err(|e| e.errno()),
            Err(libc::EINVAL)
        );
        // The pointer is not device memory.
        assert_eq!(
            b.pin(&req(0, 4096, 0)).map_err(|e| e.errno()),
            Err(libc::EINVAL)
        );
        // Its device has no dma-buf support.
        fake::DMABUF_MASK.store(0b01, SeqCst);
        fake::POINTER_ORDINAL.store(1, SeqCst);
        assert_eq!(
            b.pin(&req(BASE, 4096, 0)).map_err(|e| e.errno()),
            Err(libc::ENOTSUP)
        );
        // Bad ranges never reach the driver.
        assert_eq!(
            b.pin(&req(BASE, 0, 0)).map_err(|e| e.errno()),
            Err(libc::EINVAL)
        );
        assert_eq!(
            b.pin(&req(u64::MAX - 5, 4096, 0)).map_err(|e| e.errno()),
            Err(libc::EINVAL)
        );
        assert!(fake::EXPORTS.lock().is_empty());
    }

    #[test]
    fn map_is_the_export_and_unaligned_pins_do_not_map() {
        let _g = fake::lock();
        let b = backend();
        // As upstream: a pin whose address is not page aligned pins but does not map.
        let unaligned = b.pin(&req(BASE + 100, 5000, 0)).expect("pin");
        assert_eq!(
            b.map(
                &unaligned,
                unaligned.mapped_size as usize,
                MappingType::None
            )
            .map_err(|e| e.errno()),
            Err(libc::EINVAL)
        );
        b.unpin(&unaligned).expect("unpin");
        let pin = b.pin(&req(BASE, 5100, 0)).expect("pin");
        let len = pin.mapped_size as usize;
        let m = b
            .map(&pin, len, MappingType::None)
            .expect("map of an aligned pin");
        assert_eq!(m.kind, MappingType::WriteCombining);
        assert_eq!(m.len, len);
        let info = b.info(&pin, Some(&m)).expect("info");
        assert_eq!((info.va, info.mapped_size), (BASE, pin.mapped_size));
        assert_eq!(info.page_size as u64, host_page_size());
        assert!(info.mapped && info.wc_mapping);
        assert_eq!(info.mapping_type, MappingType::WriteCombining as u32);
        assert_eq!(b.info_v1(&pin, Some(&m)), Ok(info));

        // Bytes written at an offset of the mapping land at that offset of the dma-buf.
        let msg = b"through the mapping";
        // SAFETY: the mapping is `len` bytes long and the write ends well inside it.
        unsafe {
            std::ptr::copy_nonoverlapping(msg.as_ptr(), (m.addr + 100) as *mut u8, msg.len())
        };
        let mut back = [0u8; 19];
        // SAFETY: reading into a local buffer of the given size.
        let n =
            unsafe { libc::pread(pin.handle as i32, back.as_mut_ptr().cast(), back.len(), 100) };
        assert_eq!(n, 19);
        assert_eq!(&back, msg);

        b.unmap(&pin, &m).expect("unmap");
        let info = b.info(&pin, None).expect("info");
        assert!(!info.mapped && !info.wc_mapping);
        assert_eq!(info.mapping_type, 0);
        b.unpin(&pin).expect("unpin");
    }

    #[test]
    fn map_refuses_other_types_and_bad_sizes() {
        let _g = fake::lock();
        let b = backend();
        let pin = b.pin(&req(BASE, 8192, 0)).expect("pin");
        for t in [MappingType::Caching, MappingType::Device] {
            assert_eq!(
                b.map(&pin, 8192, t).map_err(|e| e.errno()),
                Err(libc::EINVAL)
            );
        }
        assert_eq!(
            b.map(&pin, 0, MappingType::None).map_err(|e| e.errno()),
            Err(libc::EINVAL)
        );
        assert_eq!(
            b.map(&pin, 3 * 8192, MappingType::None)
                .map_err(|e| e.errno()),
            Err(libc::EINVAL)
        );
        let m = b
            .map(&pin, 4096, MappingType::WriteCombining)
            .expect("explicit WC");
        b.unmap(&pin, &m).expect("unmap");
        b.unpin(&pin).expect("unpin");

        fake::COHERENT.store(true, SeqCst);
        let pin = b.pin(&req(BASE, 8192, 0)).expect("pin");
        assert_eq!(
            b.map(&pin, 8192, MappingType::WriteCombining)
                .map_err(|e| e.errno()),
            Err(libc::EINVAL)
        );
        let m = b.map(&pin, 8192, MappingType::Caching).expect("cached map");
        let info = b.info(&pin, Some(&m)).expect("info");
        assert!(info.mapped && !info.wc_mapping);
        assert_eq!(info.mapping_type, MappingType::Caching as u32);
        b.unmap(&pin, &m).expect("unmap");
        b.unpin(&pin).expect("unpin");
    }

    #[test]
    fn mmap_failure_is_reported() {
        let _g = fake::lock();
        let b = backend();
        // A pin whose fd is not a descriptor at all: mmap fails with EBADF, reported as is.
        let pin = Pin {
            handle: 999_999,
            va: BASE,
            mapped_size: 4096,
            page_offset: 0,
            fixed_type: MappingType::WriteCombining,
        };
        assert_eq!(
            b.map(&pin, 4096, MappingType::None),
            Err(Error::Sys {
                call: "mmap",
                errno: libc::EBADF
            })
        );
        // A handle that cannot be an fd is refused before any system call.
        let bad = Pin {
            handle: u64::MAX,
            ..pin
        };
        assert_eq!(
            b.map(&bad, 4096, MappingType::None),
            Err(Error::InvalidHandle)
        );
    }

    #[test]
    fn attributes_and_versions() {
        let _g = fake::lock();
        let b = backend();
        assert_eq!(b.kind(), BackendKind::DmaBuf);
        assert_eq!(b.fd(), -1);
        assert_eq!(b.driver_version_word(), 0);
        assert_eq!(b.driver_version(), Ok((2, 6)));
        for a in [
            Attr::UsePersistentMapping,
            Attr::SupportPinFlagForcePcie,
            Attr::UsingDmaBufMmap,
        ] {
            assert_eq!(b.attribute(a), Ok(1));
        }
        let pin = b.pin(&req(BASE, 4096, 0)).expect("pin");
        assert_eq!(b.callback_flag(&pin), Ok(false));
        b.unpin(&pin).expect("unpin");
    }

    #[test]
    fn concurrent_pins_share_one_context() {
        let _g = fake::lock();
        let b = backend();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let b = &b;
                s.spawn(move || {
                    for i in 0..20u64 {
                        let p = b
                            .pin(&req(BASE + (t * 100 + i) * 4096, 4096, 0))
                            .expect("pin");
                        let m = b.map(&p, 4096, MappingType::None).expect("map");
                        b.unmap(&p, &m).expect("unmap");
                        b.unpin(&p).expect("unpin");
                        assert_eq!(fake::CURRENT.with(|c| c.get()), 0);
                    }
                });
            }
        });
        assert_eq!(fake::RETAIN_CALLS.load(SeqCst), 1);
        assert_eq!(fake::EXPORTS.lock().len(), 80);
        b.close().expect("close");
        assert_eq!(fake::RETAINED[0].load(SeqCst), 0);
    }
}
