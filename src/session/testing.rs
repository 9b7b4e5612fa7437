//! What the session's tests share: a backend that counts what reaches it ([`Fake`]), sessions
//! on it, and the session's API in one `use`.

pub(super) use super::copy::copy_target;
pub(super) use super::open::open_with;
pub(super) use super::{callback_flag, close, map, pin, unmap, unpin, HANDLES, SESSIONS};
pub(super) use crate::backend::{
    Attr, Backend, BackendKind, Info, Mapping, MappingType, Opened, Pin, PinRequest,
};
pub(super) use crate::error::{Error, Result};
pub(super) use crate::registry::Record;
pub(super) use crate::sys;
pub(super) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
pub(super) use std::sync::Arc;

/// Counts what reached the "driver".
#[derive(Default)]
pub(super) struct Calls {
    pub(super) pins: AtomicU32,
    pub(super) unpins: AtomicU32,
    pub(super) maps: AtomicU32,
    pub(super) unmaps: AtomicU32,
    pub(super) closes: AtomicU32,
    pub(super) fail_unpin: AtomicBool,
    pub(super) unpinned: parking_lot::Mutex<Vec<u64>>,
    /// When set, `info` announces itself in `in_info` and then waits 50 ms.
    pub(super) slow_info: AtomicBool,
    pub(super) in_info: AtomicBool,
    /// Unpins the driver saw while an `info` call was in progress.
    pub(super) unpins_during_info: AtomicU32,
}

/// A backend whose "mappings" are shared mappings of /dev/zero.
pub(super) struct Fake {
    pub(super) calls: Arc<Calls>,
    pub(super) next: AtomicU64,
}

impl Backend for Fake {
    fn kind(&self) -> BackendKind {
        BackendKind::Gdrdrv
    }
    fn fd(&self) -> i32 {
        1000
    }
    fn driver_version_word(&self) -> u32 {
        0x20006
    }
    fn pin(&self, req: &PinRequest) -> Result<Pin> {
        if req.addr == 0 {
            return Err(Error::Sys {
                call: "ioctl",
                errno: libc::EINVAL,
            });
        }
        assert_ne!(req.addr, 0xdead_0000, "injected backend panic");
        self.calls.pins.fetch_add(1, Ordering::SeqCst);
        let (va, mapped_size, page_offset) =
            crate::backend::gdrdrv::gpu_page_range(req.addr, req.size);
        let handle = self.next.fetch_add(16, Ordering::SeqCst);
        Ok(Pin {
            handle,
            va,
            mapped_size,
            page_offset,
            fixed_type: MappingType::None,
        })
    }
    fn unpin(&self, pin: &Pin) -> Result<()> {
        self.calls.unpins.fetch_add(1, Ordering::SeqCst);
        self.calls.unpinned.lock().push(pin.handle);
        if self.calls.fail_unpin.load(Ordering::SeqCst) {
            return Err(Error::Sys {
                call: "ioctl",
                errno: libc::EIO,
            });
        }
        Ok(())
    }
    fn callback_flag(&self, _pin: &Pin) -> Result<bool> {
        Ok(false)
    }
    fn info(&self, pin: &Pin, current: Option<&Mapping>) -> Result<Info> {
        if self.calls.slow_info.load(Ordering::SeqCst) {
            let before = self.calls.unpins.load(Ordering::SeqCst);
            self.calls.in_info.store(true, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(50));
            let during = self.calls.unpins.load(Ordering::SeqCst) - before;
            self.calls
                .unpins_during_info
                .fetch_add(during, Ordering::SeqCst);
        }
        let t = current.map_or(0, |m| m.kind as u32);
        Ok(Info {
            va: pin.va,
            mapped_size: pin.mapped_size,
            page_size: 65536,
            mapped: t != 0,
            wc_mapping: t == 1,
            mapping_type: t,
            ..Default::default()
        })
    }
    fn info_v1(&self, pin: &Pin, current: Option<&Mapping>) -> Result<Info> {
        self.info(pin, current)
    }
    fn map(&self, _pin: &Pin, size: usize, request: MappingType) -> Result<Mapping> {
        assert_ne!(size, 0x5_0000_0000, "injected backend panic");
        if request == MappingType::Caching {
            return Err(Error::Sys {
                call: "ioctl",
                errno: libc::EOPNOTSUPP,
            });
        }
        let fd = sys::open(c"/dev/zero", libc::O_RDWR | libc::O_CLOEXEC)?;
        let addr = sys::mmap_shared(size, fd, 0);
        let _ = sys::close(fd);
        self.calls.maps.fetch_add(1, Ordering::SeqCst);
        Ok(Mapping {
            addr: addr?,
            len: size,
            kind: MappingType::WriteCombining,
        })
    }
    fn unmap(&self, _pin: &Pin, m: &Mapping) -> Result<()> {
        self.calls.unmaps.fetch_add(1, Ordering::SeqCst);
        // SAFETY: test mapping created by `map` above and no longer used.
        unsafe { sys::munmap(m.addr, m.len) }
    }
    fn attribute(&self, _attr: Attr) -> Result<i32> {
        Ok(1)
    }
    fn driver_version(&self) -> Result<(i32, i32)> {
        Ok((2, 6))
    }
    fn close(&self) -> Result<()> {
        self.calls.closes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// [`super::info`], returning what it stored.
pub(super) fn info(g: usize, mh: u64, legacy: bool) -> Result<Info> {
    let mut out = None;
    super::info(g, mh, legacy, |i| out = Some(*i))?;
    Ok(out.expect("an Ok info stores its answer"))
}

pub(super) fn fake() -> (usize, Arc<Calls>) {
    let calls = Arc::new(Calls::default());
    let g = open_with(Opened::Other(Box::new(Fake {
        calls: calls.clone(),
        next: AtomicU64::new(0),
    })))
    .unwrap();
    (g, calls)
}

pub(super) fn pin_req(addr: u64, size: u64) -> PinRequest {
    PinRequest {
        addr,
        size,
        flags: 0,
        p2p_token: 0,
        va_space: 0,
    }
}
