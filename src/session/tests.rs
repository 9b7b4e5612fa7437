//! The session's tests, on the session layer's fake: [`Fake`], a [`Backend`] that counts what
//! reaches it and maps `/dev/zero`. (The layer below has its own fakes: the emulator for the
//! C suites, which stands in for the CUDA driver and `/dev/gdrdrv`; see ARCHITECTURE.md.)

use super::open::open_with;
use super::*;
use crate::backend::{
    gdrdrv, Attr, Backend, BackendKind, Info, Mapping, MappingType, Pin, PinRequest,
};
use crate::registry::Record;
use crate::sys::child;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Counts what reached the "driver".
#[derive(Default)]
struct Calls {
    pins: AtomicU32,
    unpins: AtomicU32,
    maps: AtomicU32,
    unmaps: AtomicU32,
    closes: AtomicU32,
    fail_unpin: AtomicBool,
    fail_unmap: AtomicBool,
    unpinned: parking_lot::Mutex<Vec<u64>>,
    /// When set, `pin`, `info` and `callback_flag` count themselves in `inside` and then wait
    /// 50 ms.
    slow: AtomicBool,
    inside: AtomicU32,
    /// Unpins the driver saw while an `info` call was in progress (counted once it ends).
    unpins_during_info: AtomicU32,
}

/// A backend whose "mappings" are shared mappings of /dev/zero.
struct Fake {
    calls: Arc<Calls>,
    next: AtomicU64,
    kind: BackendKind,
}

impl Fake {
    /// Counts a call in `inside` and takes 50 ms, when the test asked for slow calls.
    fn maybe_slow(&self) {
        if self.calls.slow.load(Ordering::SeqCst) {
            self.calls.inside.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn failed(errno: i32) -> Error {
    Error::Sys {
        call: "ioctl",
        errno,
    }
}

impl Backend for Fake {
    fn kind(&self) -> BackendKind {
        self.kind
    }
    fn fd(&self) -> i32 {
        1000
    }
    fn driver_version_word(&self) -> u32 {
        0x20006
    }
    fn pin(&self, req: &PinRequest) -> Result<Pin> {
        if req.addr == 0 {
            return Err(failed(libc::EINVAL));
        }
        assert_ne!(req.addr, 0xdead_0000, "injected backend panic");
        self.maybe_slow();
        self.calls.pins.fetch_add(1, Ordering::SeqCst);
        let (va, page_offset, mapped_size) = gdrdrv::gpu_page_range(req.addr, req.size);
        Ok(Pin {
            handle: self.next.fetch_add(16, Ordering::SeqCst),
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
            return Err(failed(libc::EIO));
        }
        Ok(())
    }
    fn callback_flag(&self, _pin: &Pin) -> Result<bool> {
        self.maybe_slow();
        Ok(true)
    }
    fn info(&self, pin: &Pin, current: Option<&Mapping>) -> Result<Info> {
        let before = self.calls.unpins.load(Ordering::SeqCst);
        self.maybe_slow();
        let during = self.calls.unpins.load(Ordering::SeqCst) - before;
        self.calls
            .unpins_during_info
            .fetch_add(during, Ordering::SeqCst);
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
        // Told apart from the v2 query by its page size.
        Ok(Info {
            page_size: 4096,
            ..self.info(pin, current)?
        })
    }
    fn map(&self, _pin: &Pin, size: usize, request: MappingType) -> Result<Mapping> {
        assert_ne!(size, 0x5_0000_0000, "injected backend panic");
        if request == MappingType::Caching {
            return Err(failed(libc::EOPNOTSUPP));
        }
        let fd = crate::sys::open(c"/dev/zero", libc::O_RDWR | libc::O_CLOEXEC)?;
        let addr = crate::sys::mmap_shared(size, fd, 0);
        let _ = crate::sys::close(fd);
        self.calls.maps.fetch_add(1, Ordering::SeqCst);
        Ok(Mapping {
            addr: addr?,
            len: size,
            kind: if request == MappingType::Device {
                MappingType::Device
            } else {
                MappingType::WriteCombining
            },
        })
    }
    fn unmap(&self, _pin: &Pin, m: &Mapping) -> Result<()> {
        self.calls.unmaps.fetch_add(1, Ordering::SeqCst);
        if self.calls.fail_unmap.load(Ordering::SeqCst) {
            return Err(failed(libc::EIO));
        }
        // SAFETY: test mapping created by `map` above and no longer used.
        unsafe { crate::sys::munmap(m.addr, m.len) }
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

/// A session on a new [`Fake`] that says it is gdrdrv, and what reaches it.
fn fake() -> (usize, Arc<Calls>) {
    fake_of(BackendKind::Gdrdrv)
}

/// A session on a new [`Fake`] that says it is a backend of `kind`, and what reaches it.
fn fake_of(kind: BackendKind) -> (usize, Arc<Calls>) {
    let calls = Arc::new(Calls::default());
    let fake = Fake {
        calls: calls.clone(),
        next: AtomicU64::new(0),
        kind,
    };
    (open_with(Box::new(fake)).unwrap(), calls)
}

fn pin_req(addr: u64, size: u64) -> PinRequest {
    PinRequest {
        addr,
        size,
        flags: 0,
        p2p_token: 0,
        va_space: 0,
    }
}

/// A pin of 64 KiB at `addr` on `g`.
fn pinned(g: usize, addr: u64) -> u64 {
    pin(g, &pin_req(addr, 0x10000)).unwrap()
}

fn handle(mh: u64) -> &'static HandleRecord {
    HANDLES.lookup(mh as usize).expect("a handle record")
}

fn state_of(mh: u64) -> u32 {
    handle(mh).state.load(Ordering::SeqCst)
}

/// Moves the handle `mh` to `to`, as another thread's call under way would.
fn set_state(mh: u64, to: u32) {
    handle(mh).state.store(to, Ordering::SeqCst);
}

fn count(c: &AtomicU32) -> u32 {
    c.load(Ordering::SeqCst)
}

#[test]
fn forged_and_foreign_values_are_refused_without_touching_them() {
    let (g1, _) = fake();
    let (g2, c2) = fake();
    let mh = pinned(g1, 0x7100_0000);
    // A handle of g1 used on g2.
    assert_eq!(unpin(g2, mh), Err(Error::InvalidHandle));
    assert_eq!(info(g2, mh, false), Err(Error::InvalidHandle));
    assert_eq!(callback_flag(g2, mh), Err(Error::InvalidHandle));
    assert_eq!(map(g2, mh, 0x10000, 0), Err(Error::InvalidHandle));
    assert_eq!(count(&c2.unpins) + count(&c2.maps), 0);
    // A stack copy of a record, misaligned pointers, NULL, garbage.
    let copy = SessionRecord::new_free();
    let forged_g = &copy as *const SessionRecord as usize;
    assert_eq!(
        pin(forged_g, &pin_req(0x7100_0000, 1)),
        Err(Error::InvalidHandle)
    );
    assert_eq!(close(forged_g), Err(Error::InvalidHandle));
    let hcopy = HandleRecord::new_free();
    let forged_h = &hcopy as *const HandleRecord as u64;
    assert_eq!(map(g1, forged_h, 4096, 0), Err(Error::InvalidHandle));
    assert_eq!(check_copy(forged_h, 0, 0), Err(CopyRefusal::NotIssued));
    for bad in [mh + 8, 0, u64::MAX, g2 as u64] {
        assert_eq!(unpin(g1, bad), Err(Error::InvalidHandle), "{bad:#x}");
        assert_eq!(info(g1, bad, true), Err(Error::InvalidHandle), "{bad:#x}");
    }
    for bad in [0, g1 + 4, mh as usize] {
        assert_eq!(close(bad), Err(Error::InvalidHandle), "{bad:#x}");
        assert_eq!(driver_version(bad), Err(Error::InvalidHandle), "{bad:#x}");
    }
    unpin(g1, mh).unwrap();
    close(g1).unwrap();
    close(g2).unwrap();
    // Closed: every call refuses the gdr_t.
    assert_eq!(pin(g1, &pin_req(0x7100_0000, 1)), Err(Error::InvalidHandle));
    assert_eq!(attribute(g1, 1), Err(Error::InvalidHandle));
    assert_eq!(close(g1), Err(Error::InvalidHandle));
}

#[test]
fn full_cycle_and_layout_values() {
    let (g, calls) = fake();
    let rec = SESSIONS.lookup(g).unwrap();
    assert_eq!(rec.fd.load(Ordering::Relaxed), 1000);
    assert_eq!(rec.gdrdrv_version.load(Ordering::Relaxed), 0x20006);
    assert_eq!(
        1usize << rec.page_shift.load(Ordering::Relaxed),
        crate::sys::page_size()
    );
    let mh = pinned(g, 0x7000_0000);
    let second = pinned(g, 0x7000_0000);
    // The driver handle sits at offset 24 as a u32 (16 for the second pin).
    assert_eq!(handle(second).driver_handle.load(Ordering::Relaxed), 16);
    let va = map(g, mh, 0x10000, 0).unwrap();
    assert_eq!(handle(mh).mapping_type.load(Ordering::Relaxed), 1);
    let i = info(g, mh, false).unwrap();
    assert!(i.mapped && i.wc_mapping && i.mapping_type == 1 && i.page_size == 65536);
    assert_eq!(i.va, 0x7000_0000);
    assert_eq!(info(g, mh, true).unwrap().page_size, 4096, "the v1 query");
    assert_eq!(callback_flag(g, mh), Ok(true));
    assert_eq!(check_copy(mh, va, 0x10000), Ok(MappingType::WriteCombining));
    assert_eq!(check_copy(second, 0, 0), Err(CopyRefusal::NotMapped));
    let device = map(g, second, 100, 3).unwrap();
    assert_eq!(device, map_addr(second));
    assert_eq!(handle(second).mapping_type.load(Ordering::Relaxed), 3);
    unmap(g, mh, va, 0x10000 - 5).unwrap();
    assert_eq!(handle(mh).mapping_type.load(Ordering::Relaxed), 0);
    assert!(!info(g, mh, false).unwrap().mapped);
    unpin(g, mh).unwrap();
    assert_eq!(check_copy(mh, va, 0), Err(CopyRefusal::NotPinned));
    // Close unpins what is left (still mapped: unmapped first).
    close(g).unwrap();
    assert_eq!(count(&calls.unmaps), 2);
    assert_eq!(count(&calls.unpins), 2);
    assert_eq!(count(&calls.closes), 1);
    assert_eq!(rec.fd.load(Ordering::Relaxed), -1);
}

fn map_addr(mh: u64) -> usize {
    handle(mh).map_addr.load(Ordering::SeqCst)
}

#[test]
fn map_refusals() {
    let (g, calls) = fake();
    let (other, _) = fake();
    let mh = pinned(g, 0x7600_0000);
    let unknown = Err(Error::InvalidArgument("unknown gdr_map_flags"));
    for flags in [4, 9, -1, i32::MAX] {
        assert_eq!(map(g, mh, 0x10000, flags), unknown, "flags {flags}");
    }
    let too_large = Err(Error::InvalidArgument("map size overflows"));
    let page = crate::sys::page_size();
    for size in [usize::MAX, usize::MAX - page + 2] {
        assert_eq!(map(g, mh, size, 0), too_large, "size {size:#x}");
    }
    assert_eq!(map(other, mh, 0x10000, 0), Err(Error::InvalidHandle));
    // A map under way or done: EAGAIN, before the flags are looked at.
    for held in [state::MAPPING, state::MAPPED] {
        set_state(mh, held);
        assert_eq!(map(g, mh, 0x10000, 0), Err(Error::AlreadyMapped));
        assert_eq!(map(g, mh, 0x10000, 9), Err(Error::AlreadyMapped));
        assert_eq!(map(g, mh, 0x10000, 0).unwrap_err().errno(), libc::EAGAIN);
    }
    // An unmap under way.
    set_state(mh, state::UNMAPPING);
    assert_eq!(map(g, mh, 0x10000, 0), Err(Error::InvalidHandle));
    set_state(mh, state::PINNED);
    assert_eq!(count(&calls.maps), 0);
    // The backend's refusal leaves the handle pinned.
    assert_eq!(
        map(g, mh, 0x10000, 2).unwrap_err().errno(),
        libc::EOPNOTSUPP
    );
    assert_eq!(state_of(mh), state::PINNED);
    // Sizes round up to the host page.
    let va = map(g, mh, 1, 0).unwrap();
    assert_eq!(handle(mh).map_len.load(Ordering::SeqCst), page);
    unmap(g, mh, va, page).unwrap();
    close(g).unwrap();
    close(other).unwrap();
}

#[test]
fn unmap_refusals() {
    let (g, calls) = fake();
    let (other, _) = fake();
    let mh = pinned(g, 0x7610_0000);
    assert_eq!(unmap(g, mh, 0x1000, 0x10000), Err(Error::NotMapped));
    let va = map(g, mh, 0x10000, 0).unwrap();
    // A va or a rounded size that is not the mapping's: EINVAL, and the mapping stays.
    let mismatch = Err(Error::InvalidArgument("va/size do not match the mapping"));
    let page = crate::sys::page_size();
    for (what, at, size) in [
        ("another va", va + page, 0x10000),
        ("va - 1", va - 1, 0x10000),
        ("a larger size", va, 0x10000 + page),
        ("a smaller size", va, 0x10000 - page),
        ("a size that overflows", va, usize::MAX),
    ] {
        assert_eq!(unmap(g, mh, at, size), mismatch, "{what}");
        assert_eq!(check_copy(mh, va, 1), Ok(MappingType::WriteCombining));
    }
    assert_eq!(unmap(other, mh, va, 0x10000), Err(Error::InvalidHandle));
    // A map or an unmap under way.
    for held in [state::MAPPING, state::UNMAPPING] {
        set_state(mh, held);
        assert_eq!(unmap(g, mh, va, 0x10000), Err(Error::NotMapped));
    }
    set_state(mh, state::MAPPED);
    assert_eq!(count(&calls.unmaps), 0);
    // The backend's refusal leaves the handle mapped.
    calls.fail_unmap.store(true, Ordering::SeqCst);
    assert_eq!(unmap(g, mh, va, 0x10000).unwrap_err().errno(), libc::EIO);
    assert_eq!(state_of(mh), state::MAPPED);
    calls.fail_unmap.store(false, Ordering::SeqCst);
    assert_eq!(unmap(g, mh, va, 0x10000 - 5), Ok(()));
    assert_eq!(state_of(mh), state::PINNED);
    assert_eq!(unmap(g, mh, va, 0x10000), Err(Error::NotMapped));
    close(g).unwrap();
    close(other).unwrap();
}

#[test]
fn unpin_unmaps_first_and_frees_the_handle_even_when_the_driver_refuses() {
    let (g, calls) = fake();
    let mh = pinned(g, 0x7620_0000);
    map(g, mh, 0x10000, 0).unwrap();
    assert_eq!(unpin(g, mh), Ok(()));
    assert_eq!((count(&calls.unmaps), count(&calls.unpins)), (1, 1));
    assert_eq!(state_of(mh), state::FREE);
    assert_eq!(unpin(g, mh), Err(Error::InvalidHandle));
    let second = pinned(g, 0x7630_0000);
    calls.fail_unpin.store(true, Ordering::SeqCst);
    assert_eq!(unpin(g, second).unwrap_err().errno(), libc::EIO);
    assert_eq!(unpin(g, second), Err(Error::InvalidHandle));
    assert_eq!((count(&calls.unmaps), count(&calls.unpins)), (1, 2));
    // A mapping that cannot be removed: the handle stays pinned and mapped.
    calls.fail_unpin.store(false, Ordering::SeqCst);
    let third = pinned(g, 0x7640_0000);
    let va = map(g, third, 0x10000, 0).unwrap();
    calls.fail_unmap.store(true, Ordering::SeqCst);
    assert_eq!(unpin(g, third).unwrap_err().errno(), libc::EIO);
    assert_eq!(state_of(third), state::MAPPED);
    assert_eq!(check_copy(third, va, 8), Ok(MappingType::WriteCombining));
    calls.fail_unmap.store(false, Ordering::SeqCst);
    close(g).unwrap();
    assert_eq!((count(&calls.unmaps), count(&calls.unpins)), (3, 3));
}

#[test]
fn an_unpin_that_loses_to_a_map_or_unmap_is_eagain_and_changes_nothing() {
    let (g, calls) = fake();
    let mh = pinned(g, 0x7310_0000);
    let (other, _) = fake();
    let va = map(g, mh, 0x10000, 0).unwrap();
    for busy in [state::MAPPING, state::UNMAPPING] {
        set_state(mh, busy);
        assert_eq!(unpin(g, mh), Err(Error::LostRace));
        assert_eq!(unpin(g, mh).unwrap_err().errno(), libc::EAGAIN);
        assert_eq!(state_of(mh), busy, "left as it was");
    }
    for gone in [state::UNPINNING, state::RESERVED] {
        set_state(mh, gone);
        assert_eq!(unpin(g, mh), Err(Error::InvalidHandle));
    }
    set_state(mh, state::MAPPED);
    assert_eq!(unpin(other, mh), Err(Error::InvalidHandle));
    assert_eq!((count(&calls.unmaps), count(&calls.unpins)), (0, 0));
    assert_eq!(check_copy(mh, va, 8), Ok(MappingType::WriteCombining));
    unpin(g, mh).unwrap();
    close(g).unwrap();
    close(other).unwrap();
}

#[test]
fn queries_refuse_what_is_not_a_pinned_handle_of_their_session() {
    let (g, _) = fake();
    let (other, _) = fake();
    let mh = pinned(g, 0x7640_0000);
    let refused = |g: usize, mh: u64, what: &str| {
        assert_eq!(info(g, mh, false), Err(Error::InvalidHandle), "{what}");
        assert_eq!(info(g, mh, true), Err(Error::InvalidHandle), "{what}");
        assert_eq!(callback_flag(g, mh), Err(Error::InvalidHandle), "{what}");
    };
    refused(other, mh, "another gdr_t's handle");
    // A record a pin of this session has reserved and not pinned yet, or is unpinning.
    for s in [state::RESERVED, state::UNPINNING] {
        set_state(mh, s);
        refused(g, mh, "not pinned");
    }
    // Pinned, mapped, or being mapped or unmapped: answered.
    for s in [state::PINNED, state::MAPPING, state::UNMAPPING] {
        set_state(mh, s);
        assert_eq!(info(g, mh, false).map(|i| i.va), Ok(0x7640_0000));
    }
    set_state(mh, state::PINNED);
    unpin(g, mh).unwrap();
    refused(g, mh, "unpinned");
    close(g).unwrap();
    close(other).unwrap();
}

#[test]
fn a_query_that_races_an_unpin_fails_rather_than_describe_another_buffer() {
    let (g, calls) = fake();
    let keep = pinned(g, 0x7320_0000);
    let mh = pinned(g, 0x7330_0000);
    calls.slow.store(true, Ordering::SeqCst);
    let query = std::thread::spawn(move || info(g, mh, false));
    while count(&calls.inside) == 0 {
        std::thread::yield_now();
    }
    unpin(g, mh).unwrap();
    assert_eq!(
        count(&calls.unpins_during_info),
        0,
        "the query is still asking"
    );
    assert_eq!(query.join().unwrap(), Err(Error::InvalidHandle));
    assert_eq!(count(&calls.unpins_during_info), 1);
    // A record that names another pin once the driver answered (another driver handle): the
    // answer may be about another buffer, and is refused all the same.
    let before = count(&calls.inside);
    let query = std::thread::spawn(move || callback_flag(g, keep));
    while count(&calls.inside) == before {
        std::thread::yield_now();
    }
    handle(keep).pin_handle.fetch_add(1, Ordering::SeqCst);
    assert_eq!(query.join().unwrap(), Err(Error::InvalidHandle));
    handle(keep).pin_handle.fetch_sub(1, Ordering::SeqCst);
    calls.slow.store(false, Ordering::SeqCst);
    assert_eq!(info(g, keep, false).map(|i| i.va), Ok(0x7320_0000));
    assert_eq!(info(g, mh, false), Err(Error::InvalidHandle));
    close(g).unwrap();
}

#[test]
fn close_waits_for_the_calls_under_way_and_releases_newest_first() {
    let (g, calls) = fake();
    let mh = pinned(g, 0x7340_0000);
    calls.slow.store(true, Ordering::SeqCst);
    // A pin and a query under way when the session is closed.
    let pinning = std::thread::spawn(move || pin(g, &pin_req(0x7350_0000, 0x10000)));
    let query = std::thread::spawn(move || info(g, mh, false));
    while count(&calls.inside) < 2 {
        std::thread::yield_now();
    }
    let closing = std::thread::spawn(move || close(g));
    let pinned_meanwhile = pinning.join().unwrap().unwrap();
    assert_eq!(query.join().unwrap().map(|i| i.va), Ok(0x7340_0000));
    closing.join().unwrap().unwrap();
    // Both handles released, the newest first, as upstream walks its list.
    assert_eq!(*calls.unpinned.lock(), vec![16, 0]);
    assert_eq!(count(&calls.closes), 1);
    assert_eq!(state_of(pinned_meanwhile), state::FREE);
    assert_eq!(close(g), Err(Error::InvalidHandle));
}

#[test]
fn close_goes_on_past_failures_and_returns_the_first() {
    let (g, calls) = fake();
    for i in 0..3 {
        pinned(g, 0x7200_0000 + i * 0x10000);
    }
    let mapped = pinned(g, 0x7240_0000);
    map(g, mapped, 0x10000, 0).unwrap();
    calls.fail_unpin.store(true, Ordering::SeqCst);
    calls.fail_unmap.store(true, Ordering::SeqCst);
    assert_eq!(close(g).unwrap_err().errno(), libc::EIO);
    // The mapped handle: its unmap tried twice, then unpinned anyway.
    assert_eq!(count(&calls.unmaps), 2);
    assert_eq!(*calls.unpinned.lock(), vec![48, 32, 16, 0]);
    assert_eq!(state_of(mapped), state::FREE);
    assert_eq!(count(&calls.closes), 1);
}

#[test]
fn failed_pin_leaves_no_handle() {
    let (g, calls) = fake();
    assert_eq!(pin(g, &pin_req(0, 1)).unwrap_err().errno(), libc::EINVAL);
    close(g).unwrap();
    assert_eq!(count(&calls.unpins), 0);
}

#[test]
fn a_panicking_backend_leaves_the_session_usable() {
    let (g, calls) = fake();
    let r = std::panic::catch_unwind(|| pin(g, &pin_req(0xdead_0000, 1)));
    assert!(r.is_err(), "the injected panic propagates to the boundary");
    // No lock is held: the session works and closes.
    let mh = pinned(g, 0x7a00_0000);
    let r = std::panic::catch_unwind(|| map(g, mh, 0x5_0000_0000, 0));
    assert!(r.is_err());
    // The handle went back to "pinned" and maps again.
    let va = map(g, mh, 0x10000, 0).unwrap();
    unmap(g, mh, va, 0x10000).unwrap();
    close(g).unwrap();
    assert_eq!(count(&calls.unpins), 1);
}

#[test]
fn concurrent_use_of_one_session() {
    let (g, calls) = fake();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..50u64 {
                    let mh = pinned(g, 0x7400_0000 + (t * 64 + i) * 0x10000);
                    let va = map(g, mh, 0x10000, 0).unwrap();
                    assert!(check_copy(mh, va, 0x10000).is_ok());
                    assert_eq!(info(g, mh, false).unwrap().mapping_type, 1);
                    unmap(g, mh, va, 0x10000).unwrap();
                    unpin(g, mh).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Racing unpins of one handle: exactly one wins.
    let mh = pinned(g, 0x7500_0000);
    let racers: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(move || unpin(g, mh).is_ok()))
        .collect();
    let wins = racers
        .into_iter()
        .filter_map(|t| t.join().unwrap().then_some(()))
        .count();
    assert_eq!(wins, 1);
    close(g).unwrap();
    assert_eq!(count(&calls.pins), 401);
    assert_eq!(count(&calls.unpins), 401);
    assert_eq!(count(&calls.maps), count(&calls.unmaps));
}

#[test]
fn a_copy_is_checked_against_the_live_mapping() {
    let (g, _) = fake();
    let first = pinned(g, 0x7100_0000);
    let va = map(g, first, 0x10000, 0).unwrap();
    // Enough live handles that the registry grows slabs after the first.
    let more: Vec<u64> = (0..3000)
        .map(|i| pinned(g, 0x8000_0000 + i * 0x10000))
        .collect();
    let last = *more
        .iter()
        .find(|&&mh| HANDLES.lookup_first(mh as usize).is_none())
        .expect("a handle in a later slab");
    let va_last = map(g, last, 0x10000, 3).unwrap();
    let outside = |addr, len| Err(CopyRefusal::Outside { addr, len });
    for (mh, va, kind) in [
        (first, va, MappingType::WriteCombining),
        (last, va_last, MappingType::Device),
    ] {
        for (dev, n) in [(va, 1), (va, 0x10000), (va + 0x10000, 0), (va + 0xffff, 1)] {
            assert_eq!(check_copy(mh, dev, n), Ok(kind), "{dev:#x}+{n}");
        }
        for (dev, n) in [
            (va + 0xffff, 2),
            (va + 0x10000, 1),
            (va - 1, 1),
            (va + 1, usize::MAX),
            (usize::MAX, 2),
        ] {
            assert_eq!(check_copy(mh, dev, n), outside(va, 0x10000), "{dev:#x}+{n}");
        }
    }
    for busy in [state::MAPPING, state::UNMAPPING, state::UNPINNING] {
        set_state(first, busy);
        assert_eq!(check_copy(first, va, 1), Err(CopyRefusal::NotMapped));
    }
    set_state(first, state::MAPPED);
    assert_eq!(check_copy(first + 8, va, 1), Err(CopyRefusal::NotIssued));
    let e = CopyRefusal::Outside {
        addr: va,
        len: 0x10000,
    };
    assert_eq!(e.refuse("t", first, 0, va, 1).errno(), libc::EINVAL);
    assert_eq!(
        CopyRefusal::NotMapped.refuse("t", first, 0, 0, 1),
        Error::NotMapped
    );
    close(g).unwrap();
    assert_eq!(check_copy(last, va_last, 1), Err(CopyRefusal::NotPinned));
}

#[test]
fn attributes_and_versions() {
    let (g, _) = fake();
    assert_eq!(attribute(g, 1), Ok(1));
    assert_eq!(
        attribute(g, 3),
        Ok(0),
        "DMA-BUF mmap, answered by the session"
    );
    for undefined in [0, 4, u32::MAX] {
        assert_eq!(attribute(g, undefined).unwrap_err().errno(), libc::EINVAL);
    }
    assert_eq!(driver_version(g), Ok((2, 6)));
    close(g).unwrap();
    assert_eq!(driver_version(g), Err(Error::InvalidHandle));
}

#[test]
fn random_api_sequences_never_crash_and_give_upstream_errnos() {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (g1, c1) = fake();
    let (g2, _) = fake();
    // Garbage, a gdr_t, and handle addresses plus offsets join the pool over time.
    let mut pool: Vec<u64> = vec![0, 1, u64::MAX, g1 as u64, g2 as u64 + 8];
    let mut maps: Vec<(u64, usize, usize)> = Vec::new();
    let allowed = [0, libc::EINVAL, libc::EAGAIN, libc::EOPNOTSUPP];
    let code = |r: Result<()>| r.err().map_or(0, |e| e.errno());
    for _ in 0..20_000 {
        let g = if rnd() % 8 == 0 { g2 } else { g1 };
        let h = pool[rnd() as usize % pool.len()];
        let rc = match rnd() % 7 {
            0 => {
                let addr = 0x8000_0000 + (rnd() % 64) * 0x10000;
                let r = pin(g, &pin_req(addr, 1 + rnd() % 0x30000));
                if let Ok(h) = r {
                    pool.extend([h, h + 24]);
                }
                code(r.map(drop))
            }
            1 => {
                let size = 1 + (rnd() % 0x20000) as usize;
                let r = map(g, h, size, (rnd() % 5) as i32);
                if let Ok(va) = r {
                    maps.push((h, va, size));
                }
                code(r.map(drop))
            }
            2 if !maps.is_empty() => {
                let (mh, va, size) = maps.swap_remove(rnd() as usize % maps.len());
                let va = if rnd() % 4 == 0 { va + 4096 } else { va };
                code(unmap(g, mh, va, size))
            }
            3 => code(unpin(g, h)),
            4 => code(info(g, h, rnd() % 2 == 0).map(drop)),
            5 => {
                let (mh, va, _) = maps
                    .get(rnd() as usize % maps.len().max(1))
                    .copied()
                    .unwrap_or((h, 0, 0));
                let dev = va.wrapping_add((rnd() % 0x21000) as usize);
                let n = (rnd() % 0x1000) as usize;
                let r = check_copy(mh, dev, n);
                if r.is_ok() && n > 0 {
                    // SAFETY: check_copy found [dev, dev+n) inside a live mapping.
                    unsafe {
                        std::ptr::write_volatile(dev as *mut u8, 1);
                        std::ptr::write_volatile((dev + n - 1) as *mut u8, 2);
                    }
                }
                code(r.map(drop).map_err(|e| e.refuse("t", mh, dev, 0, n)))
            }
            _ => code(callback_flag(g, h).map(drop)),
        };
        assert!(allowed.contains(&rc), "unexpected errno {rc}");
    }
    close(g1).unwrap();
    close(g2).unwrap();
    assert_eq!(count(&c1.pins), count(&c1.unpins));
    assert_eq!(count(&c1.maps), count(&c1.unmaps));
}

#[test]
fn a_copy_refused_as_outside_names_swapped_pointers() {
    let (addr, len) = (0x10_0000, 0x1000);
    for (host, swapped) in [
        (addr, true),
        (addr + len - 1, true),
        (addr + len, false),
        (addr - 1, false),
        (0, false),
    ] {
        assert_eq!(super::copy::swapped(host, addr, len), swapped, "{host:#x}");
    }
}

#[test]
fn a_child_process_is_refused_and_sees_no_handle() {
    let (g, _) = fake();
    let (closed, _) = fake();
    let mh = pinned(g, 0x7700_0000);
    let va = map(g, mh, 0x10000, 0).unwrap();
    close(closed).unwrap();
    // No fork handler runs in the child; its calls refuse without allocating.
    child::assert_passes(child::Made::RawClone, || {
        pin(g, &pin_req(0x7710_0000, 1)) == Err(Error::ForeignProcess)
            && unpin(g, mh) == Err(Error::ForeignProcess)
            && check_copy(mh, va, 1) == Err(CopyRefusal::NotPinned)
            && pin(closed, &pin_req(0x7710_0000, 1)) == Err(Error::InvalidHandle)
    });
    assert_eq!(check_copy(mh, va, 1), Ok(MappingType::WriteCombining));
    close(g).unwrap();
}

#[test]
fn the_dmabuf_arm_of_a_handle_record_is_filled_for_the_backends_without_gdrdrv() {
    // What upstream's tests read of a `gdr_memh_t` on DMA-BUF: va, page offset, mapped size
    // and page size at 32-56, the mapped and wc bits at 76, the CPU mapping at 88 and 96.
    let arm = |mh: u64| {
        let h = handle(mh);
        (
            h.dmabuf_va.load(Ordering::SeqCst),
            h.dmabuf_page_offset.load(Ordering::SeqCst),
            h.dmabuf_mapped_size.load(Ordering::SeqCst),
            h.dmabuf_page_size.load(Ordering::SeqCst) as usize,
            h.dmabuf_bits.load(Ordering::SeqCst),
            h.dmabuf_cpu_va.load(Ordering::SeqCst),
            h.dmabuf_cpu_len.load(Ordering::SeqCst),
        )
    };
    let page = crate::sys::page_size();
    // (A gdrdrv record leaves the arm as its last pin left it: nothing reads it.)
    for kind in [BackendKind::DmaBuf, BackendKind::Vulkan] {
        let (g, _) = fake_of(kind);
        let rec = SESSIONS.lookup(g).unwrap();
        assert_eq!(rec.cache_backend.load(Ordering::SeqCst), kind as u32);
        let mh = pin(g, &pin_req(0x7800_1234, 0x10000)).unwrap();
        let pinned_arm = (0x7800_0000, 0x1234, 0x20000, page, 0, 0, 0);
        assert_eq!(arm(mh), pinned_arm, "{kind:?}");
        for (flags, bits) in [(0, 3), (3, 1)] {
            let va = map(g, mh, 0x20000, flags).unwrap();
            let mapped = (va, 0x20000);
            let want = (0x7800_0000, 0x1234, 0x20000, page, bits, mapped.0, mapped.1);
            assert_eq!(arm(mh), want, "{kind:?}");
            unmap(g, mh, va, 0x20000).unwrap();
            assert_eq!(arm(mh), pinned_arm, "{kind:?}");
        }
        close(g).unwrap();
    }
}
