//! What the session's tests share: a backend that counts what reaches it ([`Fake`]), sessions
//! on it, and the session's API in one `use`.

pub(super) use super::copy::copy_target;
pub(super) use super::open::open_with;
pub(super) use super::records::HandleRecord;
use super::refuse::Mutant;
pub(super) use super::{callback_flag, close, pin, unmap, unpin, HANDLES, SESSIONS};
use crate::backend::gdrdrv;
pub(super) use crate::backend::{
    Attr, Backend, BackendKind, Info, Mapping, MappingType, Opened, Pin, PinRequest,
};
pub(super) use crate::error::{Error, Result};
pub(super) use crate::registry::Record;
pub(super) use crate::sys;
use std::cell::Cell;
pub(super) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
pub(super) use std::sync::Arc;

/// [`super::map()`] as the C entries call it, the granted mapping type asked through the
/// session's own query (the C entries ask through `gdr_get_info_v2`, which makes that query).
pub(super) fn map(g: usize, mh: u64, size: usize, flags: i32) -> Result<usize> {
    super::map::map(g, mh, size, flags, || {
        let mut granted = 0;
        super::info(g, mh, false, |i| granted = i.mapping_type)?;
        Ok(granted)
    })
}

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

/// The two paths of a call on a handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Path {
    /// Lock-free: a gdrdrv handle (in wipe-on-fork memory) of the session the call names.
    Quick,
    /// Through the session, under its lock: every other case (DMA-BUF handles, refusals).
    Locked,
}

impl Path {
    /// What [`outcome`] says of a query or a map this path accepts: the quick path's ends at
    /// the descriptor-less driver of [`On`], the other's at the fake backend.
    pub(super) fn accepted(self) -> &'static str {
        match self {
            Path::Quick => "failed in the driver's ioctl",
            Path::Locked => "done",
        }
    }
}

/// Both paths.
pub(super) const PATHS: [Path; 2] = [Path::Quick, Path::Locked];

thread_local! {
    /// The path that the last call of this thread took (see [`took`]).
    static TOOK: Cell<Option<Path>> = const { Cell::new(None) };
    /// The part of a shared decision this thread's test broke (see [`with_broken`]).
    static BROKEN: Cell<Option<Mutant>> = const { Cell::new(None) };
}

/// Notes that a call of this thread took `p`: each path calls it, in tests only, once it has
/// the call (the quick path once it holds the handle, the path through the session once it
/// has found the session and the handle).
pub(super) fn took(p: Path) {
    TOOK.with(|t| t.set(Some(p)));
}

/// The path that the last call of this thread took, if it took one; forgotten.
pub(super) fn last_path() -> Option<Path> {
    TOOK.with(Cell::take)
}

/// [`super::refuse::broken`] in tests: whether this thread broke `m`.
pub(super) fn broken(m: Mutant) -> bool {
    BROKEN.with(|b| b.get() == Some(m))
}

/// Runs `f` with `m` broken on this thread.
pub(super) fn with_broken<R>(m: Mutant, f: impl FnOnce() -> R) -> R {
    struct Mend;
    impl Drop for Mend {
        fn drop(&mut self) {
            BROKEN.with(|b| b.set(None));
        }
    }
    BROKEN.with(|b| b.set(Some(m)));
    let _mend = Mend;
    f()
}

/// What a check found wrong, one line each; empty when every call came out as it should.
#[derive(Default)]
pub(super) struct Found(pub(super) Vec<String>);

impl Found {
    /// Notes `what` when `got` is not `want`.
    pub(super) fn eq<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, got: T, want: T) {
        if got != want {
            self.0.push(format!("{what}: {got:?}, not {want:?}"));
        }
    }
}

/// A session on the fake backend whose handles take one path: the quick one, where a pin's
/// record is given a gdrdrv driver on no descriptor ([`gdrdrv::Driver::without_descriptor`]:
/// a query or a map that the quick path accepts then fails in its first `ioctl`, with EBADF,
/// or ENOSYS under qemu-user, since the fake is not gdrdrv), or the one through the session
/// (the record keeps no driver, as a DMA-BUF one).
/// Closed on drop.
pub(super) struct On {
    pub(super) g: usize,
    pub(super) calls: Arc<Calls>,
    pub(super) path: Path,
}

impl On {
    pub(super) fn open(path: Path) -> On {
        let (g, calls) = fake();
        On { g, calls, path }
    }

    /// Pins `size` bytes at `addr` (`None` if refused); its calls take this session's path.
    pub(super) fn pin(&self, addr: u64, size: u64) -> Option<u64> {
        let mh = pin(self.g, &pin_req(addr, size)).ok()?;
        self.route(self.record(mh));
        Some(mh)
    }

    /// The record of the handle `mh`.
    pub(super) fn record(&self, mh: u64) -> &'static HandleRecord {
        HANDLES.lookup(mh as usize).expect("a handle record")
    }

    /// Sends the calls on `h` down this session's path.
    pub(super) fn route(&self, h: &HandleRecord) {
        let quick = self.path == Path::Quick;
        h.set_session(self.g, quick.then(gdrdrv::Driver::without_descriptor));
    }

    /// Maps `size` bytes of `mh` through the fake backend whatever the path (a quick map ends
    /// at the descriptor-less driver); `None` if refused.
    pub(super) fn map(&self, mh: u64, size: usize) -> Option<usize> {
        let h = self.record(mh);
        h.set_session(self.g, None);
        let va = map(self.g, mh, size, 0).ok();
        self.route(h);
        va
    }
}

impl Drop for On {
    fn drop(&mut self) {
        let _ = close(self.g);
    }
}

/// The errno of a call's result (0 for success).
pub(super) fn errno<T>(r: &Result<T>) -> i32 {
    r.as_ref().err().map_or(0, Error::errno)
}

/// How a call ended: done, failed in a driver's `ioctl` (whatever the errno), or the errno.
pub(super) fn outcome<T>(r: &Result<T>) -> String {
    match r {
        Ok(_) => "done".into(),
        Err(Error::Sys { call: "ioctl", .. }) => "failed in the driver's ioctl".into(),
        Err(e) => format!("errno {}", e.errno()),
    }
}

/// Moves `h` from `from` to `to` as another thread's call would (a compare-and-swap);
/// whether it did.
pub(super) fn hold_as(h: &HandleRecord, from: u32, to: u32) -> bool {
    h.state
        .compare_exchange(from, to, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
}
