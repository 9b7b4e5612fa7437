//! Sessions (`gdr_t`) and pinned-buffer records (`gdr_mh_t`): validation, bookkeeping and the
//! per-handle state machine, between the C entry points ([`crate::ffi`]) and a backend.
//!
//! A `gdr_t` is the address of a [`SessionRecord`]; a `gdr_mh_t.h` is the address of a
//! [`HandleRecord`]. Both live in [`Registry`] slabs, so every value C hands back is checked
//! ([`Registry::lookup`]) before it is read, and is then read only through atomics. The first
//! 48 bytes of a session record and the first 104 bytes of a handle record keep upstream's
//! `struct gdr` / `gdr_memh_t` layouts, which gdrcopy's own tests read.
//!
//! Concurrency: a session's backend sits behind a read-write lock that only `gdr_close`
//! takes for writing. The calls of the API's hot path take no lock: a pin holds the record
//! it reserved (see [`pin`]); a map, an unmap or an unpin of a gdrdrv handle holds the handle
//! in its transient state (see [`hold`]); a query counts itself in the handle's `users` (see
//! [`quick_query`]). `gdr_close`, which releases every record of its session before it
//! closes the descriptor, waits for each. A handle moves through the states of [`state`]
//! with compare-and-swap, so two threads cannot map, unmap or unpin the same handle at once.
//! Other calls (attributes, DMA-BUF handles, refusals) hold the lock shared. Copies take no
//! lock.
//!
//! Processes: a session names the process that opened it by its [`process::token`], which
//! differs in every child however it was created, so a child is refused (EACCES) before it
//! reaches the driver or a lock; handle records live in wipe-on-fork memory, so in a child
//! every inherited handle reads as free and a copy through it is refused (EINVAL) by the
//! copy path's existing state check.

use crate::backend::{
    self, gdrdrv, Attr, Backend, BackendKind, Info, Mapping, MappingType, Opened, Pin, PinRequest,
};
use crate::error::{Error, Result};
use crate::ffi::types::{INFO_MAPPED_BIT, INFO_WC_MAPPING_BIT};
use crate::hint::cold_path;
use crate::registry::{Record, Registry, WipedRegistry};
use crate::{copy, process, sys};
use parking_lot::{MappedRwLockReadGuard, RwLock, RwLockReadGuard};
use std::sync::atomic::{
    fence, AtomicI32, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

/// The states of a [`HandleRecord`].
pub mod state {
    /// Slot not in use.
    pub const FREE: u32 = 0;
    /// Slot taken by a pin that has not completed.
    pub const RESERVED: u32 = 1;
    /// Pinned, not mapped.
    pub const PINNED: u32 = 2;
    /// A `gdr_map` is in progress.
    pub const MAPPING: u32 = 3;
    /// Pinned and mapped.
    pub const MAPPED: u32 = 4;
    /// A `gdr_unmap` is in progress.
    pub const UNMAPPING: u32 = 5;
    /// An unpin is in progress.
    pub const UNPINNING: u32 = 6;
}

/// Every session record ever handed out.
static SESSIONS: Registry<SessionRecord> = Registry::new();
/// Every handle record ever handed out; all of them read as free in a child process, so that
/// a child's copy through an inherited handle is refused without a check on the copy path.
// SAFETY: a `HandleRecord` is atomic integers only, and all of them are 0 in its free state
// (`state::FREE`; see `HandleRecord::new_free`).
static HANDLES: WipedRegistry<HandleRecord> = unsafe { WipedRegistry::wiped_in_children() };
/// Source of session serial numbers (never 0 for a live session).
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

/// What a `gdr_t` points at. The first 48 bytes follow upstream's `struct gdr`.
/// Aligned (and so sized) to a power of two, as [`HandleRecord`], so that validating an
/// address is a mask, and a record's fields sit at the same place in its cache lines.
#[repr(C, align(256))]
pub struct SessionRecord {
    /// `fd` (int@0): the driver fd, -1 for DMA-BUF and once closed.
    pub fd: AtomicI32,
    /// `memhs` (list head@8): always NULL; a session's handles are the registry's records
    /// that name it as their owner.
    pub memhs: AtomicUsize,
    /// `page_size` (@16): host page size.
    pub page_size: AtomicUsize,
    /// `page_mask` (@24): `!(page_size - 1)`.
    pub page_mask: AtomicUsize,
    /// `page_shift` (u8@32).
    pub page_shift: AtomicU8,
    /// `gdrdrv_version` (u32@36): 0 for DMA-BUF.
    pub gdrdrv_version: AtomicU32,
    /// `cache_backend` (u32@40): 0 gdrdrv, 1 DMA-BUF, 2 Vulkan import.
    pub cache_backend: AtomicU32,
    /// (In upstream's padding.) Non-zero while `gdr_close` runs: a pin that finds it set
    /// gives up (see [`pin`]).
    closing: AtomicU32,
    /// The [`process::token`] of the process that opened the session, 0 when the slot is
    /// free. Kept outside the lock so that a child process is refused before it touches a
    /// lock that a thread of its parent may have held at fork time (that thread does not
    /// exist in the child).
    opener: AtomicU64,
    /// [`Open::serial`] while open (0 when free), readable without the lock.
    serial: AtomicU64,
    /// The open state; `None` when the slot is free. The lock and the state fill the second
    /// cache line, so that a call reads two lines of the record.
    open: RwLock<Option<Open>>,
    /// The pid of the process that opened the session, for log lines.
    opener_pid: AtomicI32,
}

/// A live session.
struct Open {
    backend: Opened,
    /// Unique per `gdr_open`; handle records name their owner by it.
    serial: u64,
    page_size: usize,
    /// Handles pinned and not yet released.
    live: AtomicUsize,
}

/// What a `gdr_mh_t` points at. The first 104 bytes follow upstream's `gdr_memh_t`.
/// Aligned (and so sized) to a power of two so that validating an address is a mask, not a
/// division, on the copy path.
#[repr(C, align(256))]
pub struct HandleRecord {
    le_next: AtomicUsize,
    le_prev: AtomicUsize,
    /// `mapping_type` (@16): the current mapping type.
    pub mapping_type: AtomicU32,
    _pad0: AtomicU32,
    /// `handle` (u32@24): gdrdrv handle (truncated) or, for DMA-BUF, the dma-buf fd.
    pub driver_handle: AtomicU32,
    _pad1: AtomicU32,
    /// DMA-BUF arm (also filled for the Vulkan import, the other backend without gdrdrv):
    /// `va`@32, `page_offset`@40, `mapped_size`@48, `page_size`@56.
    dmabuf_va: AtomicU64,
    dmabuf_page_offset: AtomicU64,
    dmabuf_mapped_size: AtomicU64,
    dmabuf_page_size: AtomicU32,
    _pad2: AtomicU32,
    /// `tm_cycles`@64, `cycles_per_ms`@72, bitfield unit (`mapped`, `wc_mapping`)@76.
    dmabuf_tm_cycles: AtomicU64,
    dmabuf_cycles_per_ms: AtomicU32,
    dmabuf_bits: AtomicU32,
    /// Backend mapping type@80, `cpu_mapped_va`@88, `cpu_mapped_len`@96.
    dmabuf_backend_type: AtomicU32,
    _pad3: AtomicU32,
    dmabuf_cpu_va: AtomicUsize,
    dmabuf_cpu_len: AtomicUsize,
    // ---- end of upstream's 104 bytes ----
    /// Serial of the owning session.
    owner: AtomicU64,
    pin_va: AtomicU64,
    pin_size: AtomicU64,
    // The third line (128-191) holds all that a query (see `quick_query`) and a copy (see
    // `copy_target_accepted`) read, so that each reads one line of the record.
    /// One of [`state`].
    state: AtomicU32,
    /// Queries reading this handle right now; an unpin waits for them to leave.
    users: AtomicU32,
    /// The address (`gdr_t`) of the owning session.
    session: AtomicUsize,
    /// [`gdrdrv::Driver::to_words`] of the owning session's driver, first word; 0 when calls
    /// on the handle go through the session (DMA-BUF) or the record is outside wipe-on-fork
    /// memory.
    driver: AtomicU64,
    /// [`gdrdrv::Driver::to_words`], second word.
    driver_ioctl: AtomicUsize,
    pin_handle: AtomicU64,
    map_addr: AtomicUsize,
    map_len: AtomicUsize,
    /// Offset of the pinned address in its first page (below a page, so below 2^32).
    pin_offset: AtomicU32,
    map_kind: AtomicU16,
    pin_fixed: AtomicU16,
    /// The allocation number of this pin ([`Registry::allocate`]): `gdr_close` releases a
    /// session's handles newest first.
    seq: AtomicU64,
}

impl Record for SessionRecord {
    fn new_free() -> Self {
        SessionRecord {
            fd: AtomicI32::new(-1),
            memhs: AtomicUsize::new(0),
            page_size: AtomicUsize::new(0),
            page_mask: AtomicUsize::new(0),
            page_shift: AtomicU8::new(0),
            gdrdrv_version: AtomicU32::new(0),
            cache_backend: AtomicU32::new(0),
            closing: AtomicU32::new(0),
            opener: AtomicU64::new(0),
            opener_pid: AtomicI32::new(0),
            serial: AtomicU64::new(0),
            open: RwLock::new(None),
        }
    }
}

impl Record for HandleRecord {
    fn new_free() -> Self {
        HandleRecord {
            le_next: AtomicUsize::new(0),
            le_prev: AtomicUsize::new(0),
            mapping_type: AtomicU32::new(0),
            _pad0: AtomicU32::new(0),
            driver_handle: AtomicU32::new(0),
            _pad1: AtomicU32::new(0),
            dmabuf_va: AtomicU64::new(0),
            dmabuf_page_offset: AtomicU64::new(0),
            dmabuf_mapped_size: AtomicU64::new(0),
            dmabuf_page_size: AtomicU32::new(0),
            _pad2: AtomicU32::new(0),
            dmabuf_tm_cycles: AtomicU64::new(0),
            dmabuf_cycles_per_ms: AtomicU32::new(0),
            dmabuf_bits: AtomicU32::new(0),
            dmabuf_backend_type: AtomicU32::new(0),
            _pad3: AtomicU32::new(0),
            dmabuf_cpu_va: AtomicUsize::new(0),
            dmabuf_cpu_len: AtomicUsize::new(0),
            state: AtomicU32::new(state::FREE),
            users: AtomicU32::new(0),
            session: AtomicUsize::new(0),
            driver: AtomicU64::new(0),
            driver_ioctl: AtomicUsize::new(0),
            owner: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            pin_handle: AtomicU64::new(0),
            pin_va: AtomicU64::new(0),
            pin_size: AtomicU64::new(0),
            pin_offset: AtomicU32::new(0),
            pin_fixed: AtomicU16::new(0),
            map_kind: AtomicU16::new(0),
            map_addr: AtomicUsize::new(0),
            map_len: AtomicUsize::new(0),
        }
    }
}

fn kind_of(raw: u32) -> MappingType {
    MappingType::from_raw(raw).unwrap_or(MappingType::None)
}

impl HandleRecord {
    /// The address C sees as `gdr_mh_t.h`.
    pub fn address(&'static self) -> u64 {
        self as *const HandleRecord as usize as u64
    }

    #[inline(always)]
    fn pin(&self) -> Pin {
        Pin {
            handle: self.pin_handle.load(Ordering::Acquire),
            va: self.pin_va.load(Ordering::Acquire),
            mapped_size: self.pin_size.load(Ordering::Acquire),
            page_offset: u64::from(self.pin_offset.load(Ordering::Acquire)),
            fixed_type: kind_of(self.pin_fixed.load(Ordering::Acquire).into()),
        }
    }

    #[inline(always)]
    fn mapping(&self) -> Mapping {
        Mapping {
            addr: self.map_addr.load(Ordering::Acquire),
            len: self.map_len.load(Ordering::Acquire),
            kind: kind_of(self.map_kind.load(Ordering::Acquire).into()),
        }
    }

    /// Records the owning session (its address `g`) and what a query, a map or an unmap needs
    /// of its backend (`None`: those go through the session).
    #[inline(always)]
    fn set_session(&self, g: usize, driver: Option<gdrdrv::Driver>) {
        let (word, ioctl) = driver.map_or((0, 0), gdrdrv::Driver::to_words);
        self.session.store(g, Ordering::Release);
        self.driver_ioctl.store(ioctl, Ordering::Release);
        self.driver.store(word, Ordering::Release);
    }

    /// Whether this record, when live, proves that the caller is the process that pinned it:
    /// it lies in wipe-on-fork memory, where a child reads it as free. A pin records that by
    /// keeping its session's driver (see [`pin`]), so this reads no line but the record's;
    /// for a DMA-BUF session, whose calls go through the session, it is always false.
    #[inline(always)]
    fn proves_caller(&self) -> bool {
        self.driver.load(Ordering::Acquire) != 0
    }

    /// The owning session's driver, when calls on this handle need not go through the
    /// session.
    #[inline(always)]
    fn driver(&self) -> Option<gdrdrv::Driver> {
        let word = self.driver.load(Ordering::Acquire);
        if word == 0 {
            return None;
        }
        let ioctl = self.driver_ioctl.load(Ordering::Acquire);
        // SAFETY: a non-zero `driver` and `driver_ioctl` were stored together by
        // `set_session`, from `Driver::to_words`.
        Some(unsafe { gdrdrv::Driver::from_words(word, ioctl) })
    }

    #[inline(always)]
    fn set_pin(&self, p: &Pin, owner: u64, kind: BackendKind, page_size: usize) {
        self.pin_handle.store(p.handle, Ordering::Release);
        self.pin_va.store(p.va, Ordering::Release);
        self.pin_size.store(p.mapped_size, Ordering::Release);
        // Both backends pin from the start of a page (a GPU page for gdrdrv, a host page for
        // DMA-BUF), so the offset is below a page.
        debug_assert!(p.page_offset < 1 << 32);
        self.pin_offset
            .store(p.page_offset as u32, Ordering::Release);
        self.pin_fixed.store(p.fixed_type as u16, Ordering::Release);
        self.owner.store(owner, Ordering::Release);
        self.mapping_type
            .store(MappingType::None as u32, Ordering::Release);
        // Upstream keeps the kernel handle as a uint32_t (DMA-BUF: the fd, an int).
        self.driver_handle.store(p.handle as u32, Ordering::Release);
        if kind != BackendKind::Gdrdrv {
            cold_path();
            self.dmabuf_va.store(p.va, Ordering::Release);
            self.dmabuf_page_offset
                .store(p.page_offset, Ordering::Release);
            self.dmabuf_mapped_size
                .store(p.mapped_size, Ordering::Release);
            self.dmabuf_page_size
                .store(page_size as u32, Ordering::Release);
            self.dmabuf_backend_type
                .store(p.fixed_type as u32, Ordering::Release);
            // The mapping fields as the previous pin of this record left them (see `free`).
            self.set_mapping(None, kind);
        }
    }

    /// Records `m` as this handle's mapping and counts it for the copy path's fences.
    #[inline(always)]
    fn record_mapping(&self, m: &Mapping, kind: BackendKind) {
        self.set_mapping(Some(m), kind);
        copy::created(m.kind);
    }

    /// Undoes [`HandleRecord::record_mapping`] once the mapping, of type `t`, is gone.
    #[inline(always)]
    fn forget_mapping(&self, t: MappingType, kind: BackendKind) {
        copy::destroyed(t);
        self.set_mapping(None, kind);
    }

    #[inline(always)]
    fn set_mapping(&self, m: Option<&Mapping>, kind: BackendKind) {
        let (addr, len, t) = m.map_or((0, 0, MappingType::None), |m| (m.addr, m.len, m.kind));
        self.map_addr.store(addr, Ordering::Release);
        self.map_len.store(len, Ordering::Release);
        self.map_kind.store(t as u16, Ordering::Release);
        self.mapping_type.store(t as u32, Ordering::Release);
        if kind != BackendKind::Gdrdrv {
            cold_path();
            let mut bits = 0;
            if m.is_some() {
                bits |= INFO_MAPPED_BIT;
            }
            if t == MappingType::WriteCombining {
                bits |= INFO_WC_MAPPING_BIT;
            }
            self.dmabuf_bits.store(bits, Ordering::Release);
            self.dmabuf_cpu_va.store(addr, Ordering::Release);
            self.dmabuf_cpu_len.store(len, Ordering::Release);
        }
    }

    /// Returns the record to its free state and to the registry. Only the state and the owner
    /// change: the other fields are read only while the state says pinned or mapped, and the
    /// next pin sets them again (zeroing them here would touch every line of the record, and
    /// its code more lines of the library, in every unpin). The owner goes to 0 so that a
    /// record that another session reserves next never names this one.
    #[inline(always)]
    fn free(&'static self) {
        self.owner.store(0, Ordering::Relaxed);
        self.state.store(state::FREE, Ordering::Release);
        HANDLES.release(self);
    }
}

impl Open {
    /// Every record of this session, newest first: the handles it has pinned and not
    /// released, those an unpin is releasing and those a pin has reserved. Called only under
    /// the session's write lock, once the session is marked closing, where no call that
    /// takes the lock is under way; pins, and calls that hold a handle instead (see
    /// [`hold`]), may be, and [`Open::release`] waits for them.
    fn handles_newest_first(&self) -> Vec<&'static HandleRecord> {
        let mut mine = Vec::new();
        HANDLES.for_each(|h| {
            if h.state.load(Ordering::Acquire) != state::FREE
                && h.owner.load(Ordering::Acquire) == self.serial
            {
                mine.push(h);
            }
        });
        mine.sort_unstable_by_key(|h| std::cmp::Reverse(h.seq.load(Ordering::Relaxed)));
        mine
    }

    /// Unmaps (if mapped) and unpins `h`, then frees its record whatever the driver said.
    /// Returns the first error. If the mapping cannot be removed, `gdr_unpin_buffer`
    /// ([`Release::Unpin`]) leaves the handle pinned and mapped so the caller can retry;
    /// `gdr_close` ([`Release::Close`]) tries once more and then goes on without it.
    #[inline(always)]
    fn release(&self, h: &'static HandleRecord, how: Release) -> Result<()> {
        // Pinned and not mapped: the straight path, one compare-and-swap.
        let mapped = match h.state.compare_exchange(
            state::PINNED,
            state::UNPINNING,
            Ordering::SeqCst,
            Ordering::SeqCst,
        ) {
            Ok(_) => false,
            Err(_) => {
                cold_path();
                match start_release_mapped(h, how, self.serial)? {
                    Some(mapped) => mapped,
                    // Released meanwhile by an unpin that took no lock.
                    None => return Ok(()),
                }
            }
        };
        self.release_held(h, mapped, how)
    }

    /// The end of [`Open::release`], with `h` held in UNPINNING (`mapped`: it was mapped).
    #[inline(always)]
    fn release_held(&self, h: &'static HandleRecord, mapped: bool, how: Release) -> Result<()> {
        // Queries that counted themselves in before the state changed finish with the pin
        // they read; later ones see UNPINNING and refuse (see `quick_query`).
        if h.users.load(Ordering::SeqCst) != 0 {
            wait_for_queries(h);
        }
        if mapped {
            // Users unmap first (UCX, NCCL, NVIDIA's tests): the unpin of an unmapped handle
            // is the straight path.
            cold_path();
            return self.release_mapped(h, how);
        }
        self.unpin_and_free(h, &h.pin())
    }

    /// [`Open::release`] of a handle that is still mapped: unmaps it first.
    #[cold]
    #[inline(never)]
    fn release_mapped(&self, h: &'static HandleRecord, how: Release) -> Result<()> {
        let pin = h.pin();
        let m = h.mapping();
        gdr_dbg!("unmapping va: {:#x} before unpinning", m.addr);
        let mut r = self.backend.unmap(&pin, &m);
        if let Err(e) = r {
            if how == Release::Unpin {
                gdr_err!(
                    "cannot unmap gdr_mh_t 0x{:x} before unpinning it ({}): it stays pinned and mapped",
                    h.address(),
                    e
                );
                h.state.store(state::MAPPED, Ordering::Release);
                return Err(e);
            }
            r = self.backend.unmap(&pin, &m);
            if let Err(e) = r {
                gdr_err!(
                    "cannot unmap {:#x}+{} of gdr_mh_t 0x{:x} ({}): the address range stays reserved until the process exits",
                    m.addr,
                    m.len,
                    h.address(),
                    e
                );
            }
        }
        h.forget_mapping(m.kind, self.backend.kind());
        let unpinned = self.unpin_and_free(h, &pin);
        r.and(unpinned)
    }

    /// The end of [`Open::release`]: unpins and frees the record whatever the driver said.
    #[inline(always)]
    fn unpin_and_free(&self, h: &'static HandleRecord, pin: &Pin) -> Result<()> {
        let r = self.backend.unpin(pin);
        self.live.fetch_sub(1, Ordering::Relaxed);
        h.free();
        r
    }
}

/// Moves `h`, found not simply pinned by [`Open::release`] of the session whose serial is
/// `serial`, from pinned or mapped to unpinning; returns whether it was mapped, or refuses
/// it. A map, an unmap or an unpin under way makes an unpin lose the race; `gdr_close` waits
/// for it instead, and for a pin under way (none of them takes the session lock, so each
/// ends without waiting for anything), and returns `None` for a record that such an unpin
/// released or such a pin gave back.
#[cold]
#[inline(never)]
fn start_release_mapped(
    h: &'static HandleRecord,
    how: Release,
    serial: u64,
) -> Result<Option<bool>> {
    loop {
        let s = h.state.load(Ordering::Acquire);
        if how == Release::Close {
            if s == state::RESERVED
                || s == state::MAPPING
                || s == state::UNMAPPING
                || s == state::UNPINNING
            {
                std::thread::yield_now();
                continue;
            }
            if h.owner.load(Ordering::Acquire) != serial {
                return Ok(None);
            }
        }
        // Compares rather than a `match`, which becomes a jump table in a page of its own.
        if s != state::PINNED && s != state::MAPPED {
            return Err(refuse_release(h, s));
        }
        if h.state
            .compare_exchange(s, state::UNPINNING, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return Ok(Some(s == state::MAPPED));
        }
    }
}

/// Refuses a record that is free, not yet pinned, being unpinned, or not owned by the
/// session whose serial is `serial`.
#[inline(always)]
fn check_live(h: &HandleRecord, serial: u64, mh: u64) -> Result<()> {
    if !is_live(h, serial) {
        return Err(refuse_handle(h, mh));
    }
    Ok(())
}

/// Whether `h` is pinned (or mapped) and owned by the session whose serial is `serial`.
#[inline(always)]
fn is_live(h: &HandleRecord, serial: u64) -> bool {
    is_pinned(h.state.load(Ordering::SeqCst)) && h.owner.load(Ordering::Acquire) == serial
}

/// Whether a handle in state `s` holds a pin that is not being released: one of the states
/// from `PINNED` to `UNMAPPING`, which are numbered in a row (one compare).
#[inline(always)]
fn is_pinned(s: u32) -> bool {
    const {
        assert!(state::MAPPING == state::PINNED + 1 && state::MAPPED == state::PINNED + 2);
        assert!(state::UNMAPPING == state::PINNED + 3);
    };
    s.wrapping_sub(state::PINNED) <= state::UNMAPPING - state::PINNED
}

/// Says why `h`, found not live by [`is_live`], is refused.
#[cold]
fn refuse_handle(h: &HandleRecord, mh: u64) -> Error {
    if !is_pinned(h.state.load(Ordering::SeqCst)) {
        gdr_err!(
            "invalid gdr_mh_t 0x{:x}: the buffer is not pinned (already unpinned?)",
            mh
        );
    } else {
        gdr_err!("invalid gdr_mh_t 0x{:x}: it belongs to another gdr_t", mh);
    }
    Error::InvalidHandle
}

/// Why [`Open::release`] refuses a handle found in state `s` (neither pinned nor mapped).
#[cold]
fn refuse_release(h: &'static HandleRecord, s: u32) -> Error {
    if s == state::MAPPING || s == state::UNMAPPING {
        gdr_err!(
            "gdr_mh_t 0x{:x} is being mapped or unmapped by another thread: \
             it stays pinned, unpin it again once that call has returned",
            h.address()
        );
        return Error::LostRace;
    }
    gdr_err!(
        "invalid gdr_mh_t 0x{:x}: the buffer is not pinned (already unpinned?)",
        h.address()
    );
    Error::InvalidHandle
}

/// Yields until no query holds `h` (see [`Open::release`]).
#[cold]
#[inline(never)]
fn wait_for_queries(h: &HandleRecord) {
    while h.users.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
}

/// A query's hold on a handle (see [`quick_query`]); released on drop.
struct InUse(&'static HandleRecord);

impl std::ops::Deref for InUse {
    type Target = HandleRecord;
    fn deref(&self) -> &HandleRecord {
        self.0
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        self.0.users.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How [`Open::release`] treats a mapping it cannot remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Release {
    Unpin,
    Close,
}

/// Refuses a closed session without reading the process token, a page of its own (enough
/// where the caller is known to be the opener, see [`session_and_handle`]); returns the
/// opener's token.
#[inline(always)]
fn check_open(rec: &SessionRecord, g: usize) -> Result<u64> {
    let opener = rec.opener.load(Ordering::Acquire);
    if opener == 0 {
        cold_path();
        return Err(already_closed(g));
    }
    Ok(opener)
}

/// Checks, without taking any lock, that `rec` is open and owned by the calling process.
#[inline(always)]
fn check_opener(rec: &SessionRecord, g: usize) -> Result<()> {
    if check_open(rec, g)? != process::token() {
        log_foreign(rec, g);
        return Err(Error::ForeignProcess);
    }
    Ok(())
}

#[cold]
fn log_foreign(rec: &SessionRecord, g: usize) {
    gdr_err!(
        "gdr_t {:#x} was opened by process {} and cannot be used in process {} (a forked child?): \
         call gdr_open in this process instead",
        g,
        rec.opener_pid.load(Ordering::Relaxed),
        sys::getpid()
    );
}

/// The open session behind the `gdr_t` value `g`, held shared until the guard drops, once
/// [`check_opener`] has refused a closed session or another process (no lock is taken
/// before that check).
#[inline(always)]
fn session(g: usize) -> Result<OpenRef> {
    let rec = session_record(g)?;
    check_opener(rec, g)?;
    locked(rec, g)
}

/// [`session`] for a call on the handle `mh`, and that handle: the live record behind `mh`,
/// owned by this session. The record is looked up once. A live handle of this session in
/// wipe-on-fork memory already proves that the caller is the process that opened it (such
/// records read as free in every child, see [`crate::registry`] and
/// [`HandleRecord::proves_caller`]), so the process token is read only when the handle does
/// not prove it.
#[inline(always)]
fn session_and_handle(g: usize, mh: u64) -> Result<(OpenRef, &'static HandleRecord)> {
    let rec = session_record(g)?;
    let h = usize::try_from(mh).ok().and_then(|a| HANDLES.lookup(a));
    let here =
        h.is_some_and(|h| h.proves_caller() && is_live(h, rec.serial.load(Ordering::Acquire)));
    if here {
        check_open(rec, g)?;
    } else {
        cold_path();
        check_opener(rec, g)?;
    }
    let open = locked(rec, g)?;
    let Some(h) = h else {
        return Err(not_issued(mh));
    };
    check_live(h, open.serial, mh)?;
    Ok((open, h))
}

/// Refuses `mh`, which is no handle record of this library.
#[cold]
#[inline(never)]
fn not_issued(mh: u64) -> Error {
    gdr_err!(
        "invalid gdr_mh_t 0x{:x}: not a handle issued by this library",
        mh
    );
    Error::InvalidHandle
}

/// Refuses `g`, a session that was closed.
#[cold]
#[inline(never)]
fn already_closed(g: usize) -> Error {
    gdr_err!("invalid gdr_t {:#x}: already closed", g);
    Error::InvalidHandle
}

/// The session record at `g`, or an error when `g` is not one.
#[inline(always)]
fn session_record(g: usize) -> Result<&'static SessionRecord> {
    SESSIONS.lookup(g).ok_or_else(|| not_opened(g))
}

/// Refuses `g`, which is no session record of this library.
#[cold]
#[inline(never)]
fn not_opened(g: usize) -> Error {
    gdr_err!("invalid gdr_t {:#x}: not opened by this library", g);
    Error::InvalidHandle
}

/// A session's open state, held shared.
type OpenRef = MappedRwLockReadGuard<'static, Open>;

/// The open state of `rec`, held shared.
#[inline(always)]
fn locked(rec: &'static SessionRecord, g: usize) -> Result<OpenRef> {
    RwLockReadGuard::try_map(rec.open.read(), Option::as_ref).map_err(|_| already_closed(g))
}

/// Validates `g` and `mh` for a query (get_info, callback flag) in the quick case, without
/// the session's lock: `Ok` when `mh` is a handle pinned by the session `g` whose queries go
/// to gdrdrv, with what the query needs of the driver and the handle held against an unpin
/// for as long as the guard lives. That also holds the session open, because `gdr_close`
/// unpins every handle of the session (waiting for their queries) before it takes the open
/// state out of the record. `Err` passes what was found to [`query_through_session`].
///
/// The quick case reads the handle record only: a pinned handle whose recorded session is
/// `g` proves that `g` is an open session (one that closed released its handles first), and,
/// in wipe-on-fork memory, that the caller is the process that opened it (see
/// [`session_and_handle`]); the record also keeps what the query needs of a gdrdrv backend,
/// which a pin stores only in wipe-on-fork memory.
/// Every other case is cold, so that the quick one is laid out as one straight run of code.
#[inline(always)]
fn quick_query(g: usize, mh: u64) -> std::result::Result<(gdrdrv::Driver, InUse), Option<InUse>> {
    let Some(h) = usize::try_from(mh).ok().and_then(|a| HANDLES.lookup(a)) else {
        cold_path();
        return Err(None);
    };
    // Counted before the state is read (both SeqCst), so that an unpin that moved the state
    // on after this read sees the count and waits (see `Open::release`).
    h.users.fetch_add(1, Ordering::SeqCst);
    let held = InUse(h);
    if is_pinned(h.state.load(Ordering::SeqCst)) && h.session.load(Ordering::Acquire) == g {
        if let Some(q) = h.driver() {
            return Ok((q, held));
        }
    }
    cold_path();
    Err(Some(held))
}

/// A query that [`quick_query`] did not accept: a handle whose queries go through the
/// session (DMA-BUF), or anything to refuse, with the checks and errors of
/// [`session_and_handle`]. `held` is the record at `mh`, already counted in its `users`.
#[cold]
#[inline(never)]
fn query_through_session(g: usize, mh: u64, held: Option<InUse>) -> Result<(&'static Open, InUse)> {
    let rec = session_record(g)?;
    let serial = rec.serial.load(Ordering::Acquire);
    if rec.opener.load(Ordering::Acquire) == 0 || serial == 0 {
        return Err(already_closed(g));
    }
    let live = held.as_ref().is_some_and(|h| is_live(h, serial));
    // A live handle in wipe-on-fork memory proves the caller is the opener (see
    // `session_and_handle`); otherwise the process token decides, before the handle's own error.
    if !(live && held.as_ref().is_some_and(|h| h.proves_caller())) {
        check_opener(rec, g)?;
    }
    let Some(held) = held else {
        return Err(not_issued(mh));
    };
    if !live {
        return Err(refuse_handle(&held, mh));
    }
    // SAFETY: `held` is a live handle of this session, counted in its `users`.
    let Some(open) = (unsafe { open_unlocked(rec) }) else {
        return Err(already_closed(g));
    };
    Ok((open, held))
}

/// The record at `mh` when it is a gdrdrv handle of the session `g` that proves its caller
/// ([`HandleRecord::proves_caller`]): a map or an unmap of it then needs no session lock
/// (see [`hold`]). `None` for anything else, valid or not, which goes through the session.
#[inline(always)]
fn quick_handle(g: usize, mh: u64) -> Option<&'static HandleRecord> {
    let h = usize::try_from(mh).ok().and_then(|a| HANDLES.lookup(a))?;
    (h.proves_caller() && h.session.load(Ordering::Acquire) == g).then_some(h)
}

/// The open state of `rec`, read without its lock.
///
/// # Safety
/// The caller holds a record of this session: a live handle counted in its `users` (see
/// [`quick_query`]), a handle in a transient state (see [`hold`]), or the record a pin has
/// reserved (see [`pin`]). The session's `Open` was stored before any of its records was
/// taken, and `gdr_close` reads it only through shared references until every record of the
/// session is released, which waits for each of these; only then does it take the `Open`
/// out. So the `Option` is `Some` and stays unchanged while the caller holds the record.
#[inline(always)]
unsafe fn open_unlocked(rec: &'static SessionRecord) -> Option<&'static Open> {
    // SAFETY: the caller's contract, above.
    unsafe { (*rec.open.data_ptr()).as_ref() }
}

/// Moves `h`, found by [`quick_handle`], from `from` to the transient state `to`, and returns
/// its driver once it holds it, when it is still a handle of the session `g`; otherwise puts
/// it back and returns `None`.
///
/// Holding the handle stands in for the session's lock: another map, unmap or unpin of it
/// fails (EAGAIN or EINVAL, as when it held the lock), and `gdr_close` waits for the state to
/// settle before it releases the handle and closes the descriptor (see
/// [`start_release_mapped`]). A pinned handle whose recorded
/// session is `g` proves `g` open, as for [`quick_query`]. It is checked again once held,
/// because the record may have been unpinned and pinned again since [`quick_handle`] read it;
/// only a call with a handle its own process freed meanwhile can see that, and the other pin
/// then reads a transient state for as long as this check takes.
#[inline(always)]
fn hold(h: &'static HandleRecord, g: usize, from: u32, to: u32) -> Option<gdrdrv::Driver> {
    h.state
        .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire)
        .ok()?;
    if h.session.load(Ordering::Acquire) == g {
        if let Some(d) = h.driver() {
            return Some(d);
        }
    }
    cold_path();
    h.state.store(from, Ordering::Release);
    None
}

/// `gdr_open`: opens a backend and returns the new session's address.
pub fn open() -> Result<usize> {
    let backend = backend::open()?;
    copy::log_cpu_flags();
    open_with(backend)
}

thread_local! {
    /// The registry locks the forking thread holds between the fork handlers.
    static FORK_HELD: std::cell::RefCell<Vec<crate::registry::ForkGuard>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

extern "C" fn registries_before_fork() {
    let guards = [SESSIONS.hold_for_fork(), HANDLES.hold_for_fork()];
    FORK_HELD.with(|held| held.borrow_mut().extend(guards));
}

extern "C" fn registries_after_fork() {
    // Newest first: HANDLES, then SESSIONS.
    FORK_HELD.with(|held| {
        let mut held = held.borrow_mut();
        while held.pop().is_some() {}
    });
}

extern "C" fn child_after_fork() {
    process::forget_after_fork();
    registries_after_fork();
    // Where the kernel cannot wipe the handle records in a child, a child made by fork
    // forgets them here, so that its copies through them are refused as well.
    if !HANDLES.wiped_by_the_kernel() {
        HANDLES.for_each(|h| h.state.store(state::FREE, Ordering::Relaxed));
    }
}

/// Makes the record registries fork-safe once per process (their allocation locks are taken
/// around `fork`, so a child never inherits one held by a thread that does not exist there),
/// and clears the process token in a child where the kernel cannot (see [`process`]).
fn register_fork_handlers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Err(e) = sys::at_fork(
            registries_before_fork,
            registries_after_fork,
            child_after_fork,
        ) {
            gdr_warn!(
                "cannot register fork handlers ({}): gdr_open in a forked child may block",
                e
            );
        }
    });
}

/// `gdr_open` on a given backend.
pub(crate) fn open_with(backend: Opened) -> Result<usize> {
    register_fork_handlers();
    let Some((rec, _)) = SESSIONS.allocate() else {
        gdr_err!("error while allocating memory");
        let _ = backend.close();
        return Err(Error::NoMemory);
    };
    let page_size = sys::page_size();
    rec.fd.store(backend.fd(), Ordering::Release);
    rec.memhs.store(0, Ordering::Release);
    rec.page_size.store(page_size, Ordering::Release);
    rec.page_mask.store(!(page_size - 1), Ordering::Release);
    rec.page_shift
        .store(page_size.trailing_zeros() as u8, Ordering::Release);
    rec.gdrdrv_version
        .store(backend.driver_version_word(), Ordering::Release);
    rec.cache_backend
        .store(backend.kind() as u32, Ordering::Release);
    let serial = NEXT_SERIAL.fetch_add(1, Ordering::Relaxed);
    *rec.open.write() = Some(Open {
        backend,
        serial,
        page_size,
        live: AtomicUsize::new(0),
    });
    rec.opener_pid.store(sys::getpid(), Ordering::Relaxed);
    rec.serial.store(serial, Ordering::Relaxed);
    rec.opener.store(process::token(), Ordering::Release);
    Ok(rec as *const SessionRecord as usize)
}

/// `gdr_close`: unmaps and unpins every handle the session still owns (going on past
/// failures), closes the backend and frees the session. Returns the first error.
pub fn close(g: usize) -> Result<()> {
    let rec = session_record(g)?;
    if check_open(rec, g)? != process::token() {
        return close_foreign(rec, g);
    }
    let mut guard = rec.open.write();
    // Read through a shared reference until every handle is released: pins and calls on a
    // handle read the `Open` without the lock while they hold a record of this session.
    let Some(open) = guard.as_ref() else {
        return Err(already_closed(g));
    };
    // Before the records are looked for: a pin either sees this or is found (see `pin`).
    rec.closing.store(1, Ordering::Relaxed);
    fence(Ordering::SeqCst);
    let mut first: Result<()> = Ok(());
    // Most recently pinned first, as upstream walks its list.
    for h in open.handles_newest_first() {
        if let Err(e) = open.release(h, Release::Close) {
            gdr_err!(
                "error unpinning buffer inside gdr_close (errno={}/{})",
                e.errno(),
                sys::strerror(e.errno())
            );
            first = first.and(Err(e));
        }
    }
    first = first.and(open.backend.close());
    drop(guard.take());
    rec.fd.store(-1, Ordering::Release);
    rec.gdrdrv_version.store(0, Ordering::Release);
    rec.opener.store(0, Ordering::Release);
    rec.opener_pid.store(0, Ordering::Relaxed);
    // The serial goes first: a late pin that reads the mark cleared then reads serial 0.
    rec.serial.store(0, Ordering::SeqCst);
    rec.closing.store(0, Ordering::SeqCst);
    drop(guard);
    SESSIONS.release(rec);
    first
}

/// `gdr_close` in a forked child on its parent's `gdr_t`: issues no ioctl and never waits on
/// a lock a parent thread may have held at fork time. The child's copy of the driver fd is
/// closed (it would otherwise keep the parent's pins alive after the parent closes); the
/// pins stay with the parent. Returns 0 when the child's copy owned no buffers, else EACCES.
fn close_foreign(rec: &'static SessionRecord, g: usize) -> Result<()> {
    let me = sys::getpid();
    let opener = rec.opener_pid.load(Ordering::Relaxed);
    let Some(mut guard) = rec.open.try_write() else {
        gdr_err!(
            "gdr_close in process {} of gdr_t {:#x}, opened by process {} that was inside a call on it \
             at fork time: only this process's copy of the driver fd is closed",
            me,
            g,
            opener
        );
        let fd = rec.fd.swap(-1, Ordering::AcqRel);
        if fd >= 0 {
            let _ = sys::close(fd);
        }
        return Err(Error::ForeignProcess);
    };
    let Some(open) = guard.take() else {
        return Err(already_closed(g));
    };
    let owned = open.live.load(Ordering::Relaxed);
    let fd = open.backend.fd();
    // The backend's teardown (driver handles, CUDA contexts) belongs to the opener; this
    // process only drops its own copies.
    std::mem::forget(open);
    if fd >= 0 {
        let _ = sys::close(fd);
    }
    rec.fd.store(-1, Ordering::Release);
    rec.opener.store(0, Ordering::Release);
    rec.serial.store(0, Ordering::Relaxed);
    drop(guard);
    SESSIONS.release(rec);
    if owned == 0 {
        return Ok(());
    }
    gdr_err!(
        "gdr_close in process {} of gdr_t {:#x} opened by process {}: its pinned buffers stay with the opener",
        me,
        g,
        opener
    );
    Err(Error::ForeignProcess)
}

/// `gdr_pin_buffer(_v2)`: pins and returns the new `gdr_mh_t.h`.
#[inline(always)]
pub fn pin(g: usize, req: &PinRequest) -> Result<u64> {
    let rec = session_record(g)?;
    check_opener(rec, g)?;
    let serial = rec.serial.load(Ordering::Acquire);
    // The allocation number orders the pins, so that `gdr_close` releases the newest first
    // as upstream does.
    let Some((h, seq)) = HANDLES.allocate() else {
        gdr_err!("error while allocating memory");
        return Err(Error::NoMemory);
    };
    // The record names its session before the pin looks at the session again, and
    // `gdr_close` marks the session closing before it looks for its records (both sides
    // fenced): either this pin sees the mark, or `gdr_close` finds the record and waits for
    // the pin to end (see `start_release_mapped`). So the pin needs no session lock.
    h.owner.store(serial, Ordering::Relaxed);
    h.state.store(state::RESERVED, Ordering::Relaxed);
    // Gives the slot back if the pin fails or the backend panics.
    let reserved = Reserved(h);
    fence(Ordering::SeqCst);
    if rec.closing.load(Ordering::Relaxed) != 0
        || serial == 0
        || rec.serial.load(Ordering::Relaxed) != serial
    {
        cold_path();
        return Err(already_closed(g));
    }
    // SAFETY: this pin holds the record it reserved for the session, which was open and not
    // closing after the record named it (above).
    let Some(open) = (unsafe { open_unlocked(rec) }) else {
        cold_path();
        return Err(already_closed(g));
    };
    let p = open.backend.pin(req)?;
    let h = reserved.keep();
    h.set_pin(&p, open.serial, open.backend.kind(), open.page_size);
    // A record outside wipe-on-fork memory does not prove its caller: calls on it go
    // through the session, which checks the process.
    h.set_session(
        g,
        open.backend
            .driver()
            .filter(|_| HANDLES.wiped_by_the_kernel()),
    );
    h.seq.store(seq, Ordering::Relaxed);
    open.live.fetch_add(1, Ordering::Relaxed);
    h.state.store(state::PINNED, Ordering::Release);
    Ok(h.address())
}

/// A handle held in a transient state by a map ([`Transition::mapping`]) or an unmap
/// ([`Transition::unmapping`]): dropping it before the call's end (an error or a panic in
/// the backend) puts the handle back in the state it came from.
struct Transition {
    h: &'static HandleRecord,
    back_to: u32,
}

impl Transition {
    /// A map of `h`, which the caller has moved from PINNED to MAPPING.
    #[inline(always)]
    fn mapping(h: &'static HandleRecord) -> Transition {
        Transition {
            h,
            back_to: state::PINNED,
        }
    }

    /// An unmap of `h`, which the caller has moved from MAPPED to UNMAPPING.
    #[inline(always)]
    fn unmapping(h: &'static HandleRecord) -> Transition {
        Transition {
            h,
            back_to: state::MAPPED,
        }
    }

    /// Ends a map: records `m` (made by a backend of this `kind`) and the handle becomes
    /// MAPPED. Returns the mapping's address.
    #[inline(always)]
    fn mapped(mut self, m: &Mapping, kind: BackendKind) -> usize {
        self.h.record_mapping(m, kind);
        self.back_to = state::MAPPED;
        gdr_dbg!("ptr_va: {:#x}", m.addr);
        gdr_dbg!("mapping_type={}", m.kind as u32);
        m.addr
    }

    /// Ends an unmap: forgets `m`, now removed, and the handle becomes PINNED.
    #[inline(always)]
    fn unmapped(mut self, m: &Mapping, kind: BackendKind) {
        self.h.forget_mapping(m.kind, kind);
        self.back_to = state::PINNED;
    }
}

impl Drop for Transition {
    fn drop(&mut self) {
        self.h.state.store(self.back_to, Ordering::Release);
    }
}

/// A handle slot taken for a pin in progress; freed on drop unless kept.
struct Reserved(&'static HandleRecord);

impl Reserved {
    #[inline(always)]
    fn keep(self) -> &'static HandleRecord {
        let h = self.0;
        std::mem::forget(self);
        h
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        free_reserved(self.0);
    }
}

/// Frees a slot whose pin failed or panicked. Out of line, so that no inlinable function
/// names the handle registry: the registry then stays internal to the shared object and its
/// accesses need no GOT entry (see PERFORMANCE.md, "API calls").
#[cold]
#[inline(never)]
fn free_reserved(h: &'static HandleRecord) {
    h.free();
}

/// `gdr_unpin_buffer`: unmaps if still mapped, unpins, and frees the handle even when the
/// driver refuses.
#[inline(always)]
pub fn unpin(g: usize, mh: u64) -> Result<()> {
    match quick_unpin(g, mh) {
        Some(r) => r,
        None => unpin_through_session(g, mh),
    }
}

/// [`unpin`] of a handle that is not mapped, in the quick case of [`quick_handle`], without
/// the session's lock; `None` for anything else, valid or not.
#[inline(always)]
fn quick_unpin(g: usize, mh: u64) -> Option<Result<()>> {
    let h = quick_handle(g, mh)?;
    hold(h, g, state::PINNED, state::UNPINNING)?;
    // SAFETY: `h`, a handle of the session `g`, is held in UNPINNING.
    let Some(open) = SESSIONS
        .lookup(g)
        .and_then(|rec| unsafe { open_unlocked(rec) })
    else {
        cold_path();
        h.state.store(state::PINNED, Ordering::Release);
        return None;
    };
    Some(open.release_held(h, false, Release::Unpin))
}

/// [`unpin`] through the session, held shared: every case but the quick one, with its
/// errors.
#[cold]
#[inline(never)]
fn unpin_through_session(g: usize, mh: u64) -> Result<()> {
    let (open, h) = session_and_handle(g, mh)?;
    open.release(h, Release::Unpin)
}

/// `gdr_get_callback_flag`.
#[inline(always)]
pub fn callback_flag(g: usize, mh: u64) -> Result<bool> {
    match quick_query(g, mh) {
        Ok((q, h)) => q.callback_flag(h.pin_handle.load(Ordering::Acquire)),
        Err(held) => callback_flag_through_session(g, mh, held),
    }
}

/// [`callback_flag`] outside the quick case (see [`query_through_session`]).
#[cold]
#[inline(never)]
fn callback_flag_through_session(g: usize, mh: u64, held: Option<InUse>) -> Result<bool> {
    let (open, h) = query_through_session(g, mh, held)?;
    open.backend.callback_flag(&h.pin())
}

/// `gdr_get_info_v2` (`legacy` = false) or the legacy v1 `gdr_get_info` (`legacy` = true):
/// what the driver reports for `mh`, passed to `store`. (Storing here rather than returning
/// the `Info` keeps the quick case's result in registers, apart from the cold one's.)
#[inline(always)]
pub fn info(g: usize, mh: u64, legacy: bool, store: impl FnOnce(&Info)) -> Result<()> {
    match quick_query(g, mh) {
        Ok((q, h)) => match q.info_with(h.pin_handle.load(Ordering::Acquire), legacy, store) {
            Ok(()) => Ok(()),
            Err(e) => Err(release_failed(h, e)),
        },
        Err(held) => {
            cold_path();
            let i = info_through_session(g, mh, held, legacy)?;
            store(&i);
            Ok(())
        }
    }
}

/// Releases a query that the driver refused and returns its error. Out of line, so that
/// the quick case's release is not shared with it.
#[cold]
#[inline(never)]
fn release_failed(h: InUse, e: Error) -> Error {
    drop(h);
    e
}

/// [`info`] outside the quick case (see [`query_through_session`]).
#[cold]
#[inline(never)]
fn info_through_session(g: usize, mh: u64, held: Option<InUse>, legacy: bool) -> Result<Info> {
    let (open, h) = query_through_session(g, mh, held)?;
    let m = (h.state.load(Ordering::Acquire) == state::MAPPED).then(|| h.mapping());
    if legacy {
        open.backend.info_v1(&h.pin(), m.as_ref())
    } else {
        open.backend.info(&h.pin(), m.as_ref())
    }
}

/// `gdr_map_v2`: maps `size` bytes (rounded up to the host page) of the pinned buffer with
/// the mapping type `flags` asks for; returns the mapping's address.
#[inline(always)]
pub fn map(g: usize, mh: u64, size: usize, flags: i32) -> Result<usize> {
    match quick_map(g, mh, size, flags) {
        Some(r) => r,
        None => map_through_session(g, mh, size, flags),
    }
}

/// [`map`] in the quick case of [`quick_handle`], without the session's lock; `None` for
/// anything else, valid or not.
#[inline(always)]
fn quick_map(g: usize, mh: u64, size: usize, flags: i32) -> Option<Result<usize>> {
    let h = quick_handle(g, mh)?;
    let request = u32::try_from(flags).ok().and_then(MappingType::from_raw)?;
    let rounded = sys::round_up(size, h.driver()?.page_size())?;
    let d = hold(h, g, state::PINNED, state::MAPPING)?;
    let busy = Transition::mapping(h);
    Some(
        d.map(h.pin_handle.load(Ordering::Acquire), rounded, request)
            .map(|m| busy.mapped(&m, BackendKind::Gdrdrv)),
    )
}

/// [`map`] through the session, held shared: every case but the quick one, with its errors.
#[cold]
#[inline(never)]
fn map_through_session(g: usize, mh: u64, size: usize, flags: i32) -> Result<usize> {
    let (open, h) = session_and_handle(g, mh)?;
    let s = h.state.load(Ordering::Acquire);
    if s == state::MAPPED || s == state::MAPPING {
        gdr_err!("mh is mapped already");
        return Err(Error::AlreadyMapped);
    }
    let request = match u32::try_from(flags).ok().and_then(MappingType::from_raw) {
        Some(t) => t,
        None => {
            gdr_err!("encounter unsupported gdr_map_flags");
            return Err(Error::InvalidArgument("unknown gdr_map_flags"));
        }
    };
    let Some(rounded) = sys::round_up(size, open.page_size) else {
        gdr_err!("gdr_map: size {} is too large", size);
        return Err(Error::InvalidArgument("map size overflows"));
    };
    if let Err(now) = h.state.compare_exchange(
        state::PINNED,
        state::MAPPING,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        if now == state::MAPPED || now == state::MAPPING {
            gdr_err!("mh is mapped already");
            return Err(Error::AlreadyMapped);
        }
        gdr_err!(
            "gdr_mh_t 0x{:x} is being unmapped or unpinned by another thread",
            mh
        );
        return Err(Error::InvalidHandle);
    }
    let busy = Transition::mapping(h);
    let m = open.backend.map(&h.pin(), rounded, request)?;
    Ok(busy.mapped(&m, open.backend.kind()))
}

/// `gdr_unmap`: `va` and `size` must be the address `gdr_map` returned and the size it was
/// given (compared after rounding to the host page).
#[inline(always)]
pub fn unmap(g: usize, mh: u64, va: usize, size: usize) -> Result<()> {
    match quick_unmap(g, mh, va, size) {
        Some(r) => r,
        None => unmap_through_session(g, mh, va, size),
    }
}

/// [`unmap`] in the quick case of [`quick_handle`], without the session's lock, when `va`
/// and `size` match the handle's mapping; `None` for anything else, valid or not.
#[inline(always)]
fn quick_unmap(g: usize, mh: u64, va: usize, size: usize) -> Option<Result<()>> {
    let h = quick_handle(g, mh)?;
    let rounded = sys::round_up(size, h.driver()?.page_size())?;
    let matches =
        || h.map_addr.load(Ordering::Acquire) == va && h.map_len.load(Ordering::Acquire) == rounded;
    // A mismatch leaves the state alone, so that copies through the mapping go on.
    if h.state.load(Ordering::Acquire) != state::MAPPED || !matches() {
        return None;
    }
    hold(h, g, state::MAPPED, state::UNMAPPING)?;
    if !matches() {
        // Remapped by another thread in between.
        h.state.store(state::MAPPED, Ordering::Release);
        return None;
    }
    let m = h.mapping();
    gdr_dbg!("unmapping va: {:#x}", m.addr);
    let busy = Transition::unmapping(h);
    // SAFETY: `m` is the mapping the driver made for this handle, which its UNMAPPING state
    // takes out of use.
    let r = unsafe { gdrdrv::unmap(h.pin_handle.load(Ordering::Acquire), &m) };
    Some(r.map(|()| busy.unmapped(&m, BackendKind::Gdrdrv)))
}

/// [`unmap`] through the session, held shared: every case but the quick one, with its
/// errors.
#[cold]
#[inline(never)]
fn unmap_through_session(g: usize, mh: u64, va: usize, size: usize) -> Result<()> {
    let (open, h) = session_and_handle(g, mh)?;
    let rounded = sys::round_up(size, open.page_size);
    let matches = |addr: usize, len: usize| va == addr && rounded == Some(len);
    let refuse = |m: &Mapping| {
        gdr_err!(
            "gdr_unmap: va {:#x} size {} do not match the mapping of this handle (va {:#x}, rounded size {})",
            va,
            size,
            m.addr,
            m.len
        );
        Err(Error::InvalidArgument("va/size do not match the mapping"))
    };
    // Refuse a mismatch before touching the state, so that concurrent copies through
    // the (still valid) mapping are not disturbed by a bad call.
    if h.state.load(Ordering::Acquire) == state::MAPPED
        && !matches(
            h.map_addr.load(Ordering::Acquire),
            h.map_len.load(Ordering::Acquire),
        )
    {
        return refuse(&h.mapping());
    }
    if h.state
        .compare_exchange(
            state::MAPPED,
            state::UNMAPPING,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_err()
    {
        gdr_err!("mh is not mapped yet");
        return Err(Error::NotMapped);
    }
    let m = h.mapping();
    if !matches(m.addr, m.len) {
        // Remapped by another thread in between.
        h.state.store(state::MAPPED, Ordering::Release);
        return refuse(&m);
    }
    gdr_dbg!("unmapping va: {:#x}", va);
    let busy = Transition::unmapping(h);
    open.backend.unmap(&h.pin(), &m)?;
    busy.unmapped(&m, open.backend.kind());
    Ok(())
}

/// For a copy of `n` bytes at `dev` through handle `mh`: checks that the handle is live and
/// mapped and that `[dev, dev+n)` lies inside its mapping, and returns the mapping type.
/// Lock-free (atomic loads only). `host` is only used to spot swapped arguments in the log
/// line; `what` names the C function.
///
/// The accepting path is inline and straight-line (the registry's first-slab check, the
/// state, the mapping's bounds); anything else goes to an out-of-line path that checks
/// again, logs and says why.
#[cfg(test)]
fn copy_target(mh: u64, dev: usize, host: usize, n: usize, what: &str) -> Result<MappingType> {
    match copy_target_accepted(mh, dev, n) {
        Some(kind) => Ok(kind),
        None => copy_target_refused(mh, dev, host, n, what),
    }
}

/// The quick accepting half of a copy's checks: the mapping type when the handle is live and
/// mapped, lies in the handle registry's first slab (which holds more records than the
/// quarantine, so a steady pin/unpin cycle stays in it) and `[dev, dev+n)` lies inside its
/// mapping; `None` for anything else, valid or not (the caller then goes through
/// [`copy_target_refused`], which decides and says why). Atomic loads, compares and wrapping
/// arithmetic only: it cannot panic, log or allocate. One line of the handle record.
#[inline(always)]
pub fn copy_target_accepted(mh: u64, dev: usize, n: usize) -> Option<MappingType> {
    // First slab only (no call on this path); handles in later slabs take the full path.
    let h = HANDLES.lookup_first(usize::try_from(mh).ok()?)?;
    if h.state.load(Ordering::Acquire) != state::MAPPED {
        return None;
    }
    let addr = h.map_addr.load(Ordering::Acquire);
    let len = h.map_len.load(Ordering::Acquire);
    // `dev - addr` wraps for `dev < addr`; `addr + len` never exceeds the address space.
    let off = dev.wrapping_sub(addr);
    if off <= len && n <= len - off {
        Some(kind_of(h.map_kind.load(Ordering::Acquire).into()))
    } else {
        None
    }
}

/// A copy's checks when [`copy_target_accepted`] did not accept: the full checks with their
/// log lines.
#[cold]
#[inline(never)]
pub(crate) fn copy_target_refused(
    mh: u64,
    dev: usize,
    host: usize,
    n: usize,
    what: &str,
) -> Result<MappingType> {
    let Some(h) = usize::try_from(mh).ok().and_then(|a| HANDLES.lookup(a)) else {
        gdr_err!(
            "{}: invalid gdr_mh_t 0x{:x}: not a handle issued by this library",
            what,
            mh
        );
        return Err(Error::InvalidHandle);
    };
    match h.state.load(Ordering::Acquire) {
        state::MAPPED => {}
        state::FREE | state::RESERVED => {
            gdr_err!(
                "{}: invalid gdr_mh_t 0x{:x}: the buffer is not pinned (already unpinned, or \
                 pinned by a parent process: handles and mappings are not inherited)",
                what,
                mh
            );
            return Err(Error::InvalidHandle);
        }
        _ => {
            gdr_err!("mh is not mapped yet");
            return Err(Error::NotMapped);
        }
    }

    let m = h.mapping();
    let inside = dev >= m.addr && dev.checked_add(n).is_some_and(|end| end <= m.addr + m.len);
    if !inside {
        if host >= m.addr && host < m.addr + m.len {
            gdr_err!(
                "{}: the host pointer {:#x} lies inside the mapping and the mapping pointer {:#x} does not: \
                 are the arguments swapped?",
                what,
                host,
                dev
            );
        }
        gdr_err!(
            "{}: range {:#x}+{} is outside the mapping {:#x}+{} of gdr_mh_t 0x{:x}",
            what,
            dev,
            n,
            m.addr,
            m.len,
            mh
        );
        return Err(Error::InvalidArgument("copy range outside the mapping"));
    }
    Ok(m.kind)
}

/// `gdr_get_attribute`: the value of the `gdr_attr_t` `attr`.
pub fn attribute(g: usize, attr: u32) -> Result<i32> {
    let open = session(g)?;
    match Attr::from_raw(attr) {
        Some(Attr::UsingDmaBufMmap) => Ok(i32::from(open.backend.kind() == BackendKind::DmaBuf)),
        Some(a) => open.backend.attribute(a),
        None => {
            gdr_dbg!("undefined attribute");
            Err(Error::InvalidArgument("undefined attribute"))
        }
    }
}

/// `gdr_driver_get_version`: `(major, minor)` of the driver behind the session.
pub fn driver_version(g: usize) -> Result<(i32, i32)> {
    session(g)?.backend.driver_version()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// Counts what reached the "driver".
    #[derive(Default)]
    struct Calls {
        pins: AtomicU32,
        unpins: AtomicU32,
        maps: AtomicU32,
        unmaps: AtomicU32,
        closes: AtomicU32,
        fail_unpin: AtomicBool,
        unpinned: parking_lot::Mutex<Vec<u64>>,
        /// When set, `info` announces itself in `in_info` and then waits 50 ms.
        slow_info: AtomicBool,
        in_info: AtomicBool,
        /// Unpins the driver saw while an `info` call was in progress.
        unpins_during_info: AtomicU32,
    }

    /// A backend whose "mappings" are shared mappings of /dev/zero.
    struct Fake {
        calls: Arc<Calls>,
        next: AtomicU64,
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
    fn info(g: usize, mh: u64, legacy: bool) -> Result<Info> {
        let mut out = None;
        super::info(g, mh, legacy, |i| out = Some(*i))?;
        Ok(out.expect("an Ok info stores its answer"))
    }

    fn fake() -> (usize, Arc<Calls>) {
        let calls = Arc::new(Calls::default());
        let g = open_with(Opened::Other(Box::new(Fake {
            calls: calls.clone(),
            next: AtomicU64::new(0),
        })))
        .unwrap();
        (g, calls)
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

    #[test]
    fn quick_copy_check_agrees_with_the_full_one() {
        let (g, _calls) = fake();
        let first = pin(g, &pin_req(0x7100_0000, 0x10000)).unwrap();
        let va = map(g, first, 0x10000, 0).unwrap();
        // Enough live handles that the registry grows newer slabs after `first`'s.
        let more: Vec<u64> = (0..300)
            .map(|i| pin(g, &pin_req(0x7200_0000 + i * 0x10000, 0x10000)).unwrap())
            .collect();
        let last = *more.last().unwrap();
        let va_last = map(g, last, 0x10000, 0).unwrap();
        for (mh, va) in [(first, va), (last, va_last)] {
            let first_slab = HANDLES.lookup_first(mh as usize).is_some();
            let cases = [
                (va, 1, true),
                (va, 0x10000, true),
                (va + 0x10000, 0, true),
                (va + 0xffff, 1, true),
                (va + 0xffff, 2, false),
                (va - 1, 1, false),
                (va + 1, usize::MAX, false),
                (usize::MAX, 2, false),
            ];
            for (dev, n, ok) in cases {
                let quick = copy_target_accepted(mh, dev, n);
                let full = copy_target(mh, dev, 0, n, "t");
                assert_eq!(full.is_ok(), ok, "{dev:#x}+{n}");
                // The quick check never accepts what the full one refuses, and accepts
                // every valid range of a handle in the first slab.
                assert_eq!(quick, if ok && first_slab { full.ok() } else { None });
            }
        }
        // A handle in an older slab (if the registry grew past `first`'s) is still accepted
        // by the full check.
        assert_eq!(
            copy_target(first, va, 0, 8, "t").unwrap(),
            MappingType::WriteCombining
        );
        assert!(copy_target_accepted(first + 8, va, 1).is_none());
        assert!(copy_target_accepted(0, va, 1).is_none());
        assert_eq!(close(g), Ok(()));
        assert!(copy_target_accepted(last, va_last, 1).is_none(), "closed");
    }

    #[test]
    fn full_cycle_and_layout_values() {
        let (g, calls) = fake();
        let rec = SESSIONS.lookup(g).unwrap();
        assert_eq!(rec.fd.load(Ordering::Relaxed), 1000);
        assert_eq!(rec.gdrdrv_version.load(Ordering::Relaxed), 0x20006);
        assert_eq!(
            1usize << rec.page_shift.load(Ordering::Relaxed),
            sys::page_size()
        );
        let mh = pin(g, &pin_req(0x7000_0000, 0x10000)).unwrap();
        assert_ne!(mh, 0);
        let second = pin(g, &pin_req(0x7000_0000, 0x10000)).unwrap();
        // The driver handle sits at offset 24 as a u32 (16 for the second pin).
        let hr = HANDLES.lookup(second as usize).unwrap();
        assert_eq!(hr.driver_handle.load(Ordering::Relaxed), 16);
        let va = map(g, mh, 0x10000, 0).unwrap();
        assert_eq!(map(g, mh, 0x10000, 0).unwrap_err(), Error::AlreadyMapped);
        // Already-mapped is reported before the flags are looked at.
        assert_eq!(map(g, mh, 0x10000, 9).unwrap_err(), Error::AlreadyMapped);
        assert_eq!(
            map(g, second, 0x10000, 9).unwrap_err().errno(),
            libc::EINVAL
        );
        assert_eq!(
            map(g, second, 0x10000, 2).unwrap_err().errno(),
            libc::EOPNOTSUPP
        );
        let i = info(g, mh, false).unwrap();
        assert!(i.mapped && i.wc_mapping && i.mapping_type == 1);
        assert_eq!(
            copy_target(mh, va, 0, 0x10000, "t").unwrap(),
            MappingType::WriteCombining
        );
        assert_eq!(
            copy_target(mh, va + 1, 0, 0x10000, "t")
                .unwrap_err()
                .errno(),
            libc::EINVAL
        );
        assert_eq!(
            copy_target(mh, va - 1, 0, 1, "t").unwrap_err().errno(),
            libc::EINVAL
        );
        assert_eq!(
            copy_target(mh, usize::MAX, 0, 2, "t").unwrap_err().errno(),
            libc::EINVAL
        );
        assert_eq!(
            copy_target(second, 0, 0, 0, "t").unwrap_err(),
            Error::NotMapped
        );
        // Wrong va or size on unmap is refused and the mapping stays.
        assert_eq!(
            unmap(g, mh, va + 4096, 0x10000).unwrap_err().errno(),
            libc::EINVAL
        );
        assert_eq!(unmap(g, mh, va, 0x20000).unwrap_err().errno(), libc::EINVAL);
        unmap(g, mh, va, 0x10000 - 5).unwrap();
        assert_eq!(unmap(g, mh, va, 0x10000).unwrap_err(), Error::NotMapped);
        assert_eq!(
            copy_target(mh, va, 0, 0, "t").unwrap_err(),
            Error::NotMapped
        );
        unpin(g, mh).unwrap();
        // Stale handle: EINVAL, no driver call.
        let before = calls.unpins.load(Ordering::SeqCst);
        assert_eq!(unpin(g, mh).unwrap_err(), Error::InvalidHandle);
        assert_eq!(map(g, mh, 4096, 0).unwrap_err(), Error::InvalidHandle);
        assert_eq!(
            copy_target(mh, va, 0, 0, "t").unwrap_err(),
            Error::InvalidHandle
        );
        assert_eq!(calls.unpins.load(Ordering::SeqCst), before);
        // Close unpins what is left (still mapped -> unmapped first).
        map(g, second, 100, 1).unwrap();
        close(g).unwrap();
        assert_eq!(calls.unmaps.load(Ordering::SeqCst), 2);
        assert_eq!(calls.unpins.load(Ordering::SeqCst), 2);
        assert_eq!(calls.closes.load(Ordering::SeqCst), 1);
        // Stale and double-closed gdr_t.
        assert_eq!(close(g).unwrap_err(), Error::InvalidHandle);
        assert_eq!(
            pin(g, &pin_req(0x7000_0000, 1)).unwrap_err(),
            Error::InvalidHandle
        );
        assert_eq!(rec.fd.load(Ordering::Relaxed), -1);
    }

    #[test]
    fn forged_and_foreign_values_are_refused_without_touching_them() {
        let (g1, _) = fake();
        let (g2, c2) = fake();
        let mh = pin(g1, &pin_req(0x7100_0000, 0x10000)).unwrap();
        // A handle of g1 used on g2.
        assert_eq!(unpin(g2, mh).unwrap_err(), Error::InvalidHandle);
        assert_eq!(info(g2, mh, false).unwrap_err(), Error::InvalidHandle);
        assert_eq!(c2.unpins.load(Ordering::SeqCst), 0);
        // A stack copy of a record, misaligned pointers, NULL, garbage.
        let copy = SessionRecord::new_free();
        let forged_g = &copy as *const SessionRecord as usize;
        assert_eq!(
            pin(forged_g, &pin_req(0x7100_0000, 1)).unwrap_err(),
            Error::InvalidHandle
        );
        assert_eq!(close(forged_g).unwrap_err(), Error::InvalidHandle);
        let hcopy = HandleRecord::new_free();
        let forged_h = &hcopy as *const HandleRecord as u64;
        assert_eq!(
            map(g1, forged_h, 4096, 0).unwrap_err(),
            Error::InvalidHandle
        );
        assert_eq!(
            copy_target(forged_h, 0, 0, 0, "t").unwrap_err(),
            Error::InvalidHandle
        );
        assert_eq!(unpin(g1, mh + 8).unwrap_err(), Error::InvalidHandle);
        assert_eq!(unpin(g1, 0).unwrap_err(), Error::InvalidHandle);
        assert_eq!(unpin(g1, u64::MAX).unwrap_err(), Error::InvalidHandle);
        assert_eq!(close(0).unwrap_err(), Error::InvalidHandle);
        assert_eq!(close(g1 + 4).unwrap_err(), Error::InvalidHandle);
        // A gdr_t used as a handle and the other way round.
        assert_eq!(unpin(g1, g2 as u64).unwrap_err(), Error::InvalidHandle);
        assert_eq!(close(mh as usize).unwrap_err(), Error::InvalidHandle);
        unpin(g1, mh).unwrap();
        close(g1).unwrap();
        close(g2).unwrap();
    }

    #[test]
    fn close_goes_on_past_failures_and_returns_the_first() {
        let (g, calls) = fake();
        for i in 0..3 {
            pin(g, &pin_req(0x7200_0000 + i * 0x10000, 0x10000)).unwrap();
        }
        calls.fail_unpin.store(true, Ordering::SeqCst);
        assert_eq!(close(g).unwrap_err().errno(), libc::EIO);
        assert_eq!(calls.unpins.load(Ordering::SeqCst), 3);
        // Newest first, as upstream walks its list.
        assert_eq!(*calls.unpinned.lock(), vec![32, 16, 0]);
        assert_eq!(calls.closes.load(Ordering::SeqCst), 1);
        assert_eq!(close(g).unwrap_err(), Error::InvalidHandle);
    }

    #[test]
    fn unpin_frees_the_handle_even_when_the_driver_refuses() {
        let (g, calls) = fake();
        let mh = pin(g, &pin_req(0x7300_0000, 0x10000)).unwrap();
        calls.fail_unpin.store(true, Ordering::SeqCst);
        assert_eq!(unpin(g, mh).unwrap_err().errno(), libc::EIO);
        assert_eq!(unpin(g, mh).unwrap_err(), Error::InvalidHandle);
        calls.fail_unpin.store(false, Ordering::SeqCst);
        close(g).unwrap();
        assert_eq!(calls.unpins.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn an_unpin_that_loses_to_a_map_or_unmap_is_eagain_and_changes_nothing() {
        let (g, calls) = fake();
        let mh = pin(g, &pin_req(0x7310_0000, 0x10000)).unwrap();
        let va = map(g, mh, 0x10000, 0).unwrap();
        let h = HANDLES.lookup(mh as usize).unwrap();
        for busy in [state::MAPPING, state::UNMAPPING] {
            h.state.store(busy, Ordering::SeqCst);
            assert_eq!(unpin(g, mh), Err(Error::LostRace));
            assert_eq!(unpin(g, mh).unwrap_err().errno(), libc::EAGAIN);
            assert_eq!(h.state.load(Ordering::SeqCst), busy, "left as it was");
        }
        h.state.store(state::MAPPED, Ordering::SeqCst);
        assert_eq!(calls.unpins.load(Ordering::SeqCst), 0);
        assert_eq!(calls.unmaps.load(Ordering::SeqCst), 0);
        copy_target(mh, va, 0, 8, "t").unwrap();
        unpin(g, mh).unwrap();
        close(g).unwrap();
    }

    #[test]
    fn close_waits_for_a_call_that_holds_a_handle() {
        // What a map, an unmap or an unpin that took no session lock holds while it calls the
        // driver, what it leaves, and the unpins close then still makes.
        for (busy, settled, unpins) in [
            (state::MAPPING, state::MAPPED, 1),
            (state::UNMAPPING, state::PINNED, 1),
            (state::UNPINNING, state::FREE, 0),
        ] {
            let (g, calls) = fake();
            let mh = pin(g, &pin_req(0x7340_0000, 0x10000)).unwrap();
            let va = map(g, mh, 0x10000, 0).unwrap();
            if settled != state::MAPPED {
                // The unmap that the call under way has made, or follows.
                unmap(g, mh, va, 0x10000).unwrap();
            }
            let h = HANDLES.lookup(mh as usize).unwrap();
            h.state.store(busy, Ordering::SeqCst);
            let closing = std::thread::spawn(move || close(g));
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(
                !closing.is_finished(),
                "close must wait for the state to settle"
            );
            assert_eq!(calls.unpins.load(Ordering::SeqCst), 0);
            if settled == state::FREE {
                h.free();
            } else {
                h.state.store(settled, Ordering::SeqCst);
            }
            closing.join().unwrap().unwrap();
            assert_eq!(calls.unmaps.load(Ordering::SeqCst), 1);
            assert_eq!(calls.unpins.load(Ordering::SeqCst), unpins);
            assert_eq!(h.state.load(Ordering::SeqCst), state::FREE);
        }
    }

    #[test]
    fn an_unpin_waits_for_a_query_of_the_same_handle() {
        let (g, calls) = fake();
        let keep = pin(g, &pin_req(0x7320_0000, 0x10000)).unwrap();
        let mh = pin(g, &pin_req(0x7330_0000, 0x10000)).unwrap();
        calls.slow_info.store(true, Ordering::SeqCst);
        let query = std::thread::spawn(move || info(g, mh, false));
        while !calls.in_info.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        unpin(g, mh).unwrap();
        let i = query.join().unwrap().unwrap();
        // The query described its own buffer, and the driver unpinned nothing under it.
        assert_eq!(i.va, 0x7330_0000);
        assert_eq!(calls.unpins_during_info.load(Ordering::SeqCst), 0);
        calls.slow_info.store(false, Ordering::SeqCst);
        // Once unpinned, a query fails with EINVAL and reaches no driver.
        assert_eq!(info(g, mh, false), Err(Error::InvalidHandle));
        assert_eq!(callback_flag(g, mh), Err(Error::InvalidHandle));
        assert_eq!(info(g, keep, true).unwrap().va, 0x7320_0000);
        close(g).unwrap();
    }

    #[test]
    fn close_waits_for_its_pins_and_leaves_other_sessions_reserved_records() {
        let (g, _calls) = fake();
        let (other, _) = fake();
        let serial_of = |g: usize| SESSIONS.lookup(g).unwrap().serial.load(Ordering::Relaxed);
        // What a pin in flight holds: a reserved record that names its session.
        let (mine, _) = HANDLES.allocate().unwrap();
        mine.owner.store(serial_of(g), Ordering::Relaxed);
        mine.state.store(state::RESERVED, Ordering::Release);
        let (theirs, _) = HANDLES.allocate().unwrap();
        theirs.owner.store(serial_of(other), Ordering::Relaxed);
        theirs.state.store(state::RESERVED, Ordering::Release);
        let closing = std::thread::spawn(move || close(g));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !closing.is_finished(),
            "close must wait for a pin of its session"
        );
        // Once marked closing, the session takes no new pin.
        assert_eq!(
            pin(g, &pin_req(0x7350_0000, 0x10000)),
            Err(Error::InvalidHandle)
        );
        // The pin in flight fails and gives its record back.
        mine.free();
        closing.join().unwrap().unwrap();
        assert_eq!(theirs.state.load(Ordering::Acquire), state::RESERVED);
        theirs.free();
        assert_eq!(theirs.owner.load(Ordering::Relaxed), 0);
        close(other).unwrap();
    }

    #[test]
    fn failed_pin_leaves_no_handle() {
        let (g, calls) = fake();
        assert_eq!(pin(g, &pin_req(0, 1)).unwrap_err().errno(), libc::EINVAL);
        close(g).unwrap();
        assert_eq!(calls.unpins.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn concurrent_use_of_one_session() {
        let (g, calls) = fake();
        let threads: Vec<_> = (0..8)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..50u64 {
                        let mh = pin(g, &pin_req(0x7400_0000 + (t * 64 + i) * 0x10000, 0x10000))
                            .unwrap();
                        let va = map(g, mh, 0x10000, 0).unwrap();
                        copy_target(mh, va, 0, 0x10000, "t").unwrap();
                        unmap(g, mh, va, 0x10000).unwrap();
                        unpin(g, mh).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // Racing map/unpin on one handle: exactly one unpin wins.
        let mh = pin(g, &pin_req(0x7500_0000, 0x10000)).unwrap();
        let results: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(move || unpin(g, mh).is_ok()))
            .collect();
        let wins = results
            .into_iter()
            .map(|t| t.join().unwrap())
            .filter(|w| *w)
            .count();
        assert_eq!(wins, 1);
        close(g).unwrap();
        assert_eq!(calls.pins.load(Ordering::SeqCst), 401);
        assert_eq!(calls.unpins.load(Ordering::SeqCst), 401);
        assert_eq!(
            calls.maps.load(Ordering::SeqCst),
            calls.unmaps.load(Ordering::SeqCst)
        );
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
                    let r = pin(
                        g,
                        &pin_req(0x8000_0000 + (rnd() % 64) * 0x10000, 1 + rnd() % 0x30000),
                    );
                    if let Ok(h) = r {
                        pool.push(h);
                        pool.push(h + 24);
                    }
                    code(r.map(|_| ()))
                }
                1 => {
                    let size = 1 + (rnd() % 0x20000) as usize;
                    let r = map(g, h, size, (rnd() % 5) as i32);
                    if let Ok(va) = r {
                        maps.push((h, va, size));
                    }
                    code(r.map(|_| ()))
                }
                2 if !maps.is_empty() => {
                    let (mh, va, size) = maps.swap_remove(rnd() as usize % maps.len());
                    let (va, size) = if rnd() % 4 == 0 {
                        (va + 4096, size)
                    } else {
                        (va, size)
                    };
                    code(unmap(g, mh, va, size))
                }
                3 => code(unpin(g, h)),
                4 => code(info(g, h, rnd() % 2 == 0).map(|_| ())),
                5 => {
                    let (mh, va, _) = maps
                        .get(rnd() as usize % maps.len().max(1))
                        .copied()
                        .unwrap_or((h, 0, 0));
                    let off = (rnd() % 0x21000) as usize;
                    let n = (rnd() % 0x1000) as usize;
                    let dev = va.wrapping_add(off);
                    let r = copy_target(mh, dev, 0, n, "t");
                    if r.is_ok() && n > 0 {
                        // The range was validated: touching both ends must be safe.
                        // SAFETY: copy_target checked [dev, dev+n) lies in a live mapping.
                        unsafe {
                            std::ptr::write_volatile(dev as *mut u8, 1);
                            std::ptr::write_volatile((dev + n - 1) as *mut u8, 2);
                        }
                    }
                    code(r.map(|_| ()))
                }
                _ => code(callback_flag(g, h).map(|_| ())),
            };
            assert!(allowed.contains(&rc), "unexpected errno {rc}");
        }
        close(g1).unwrap();
        close(g2).unwrap();
        assert_eq!(
            c1.pins.load(Ordering::SeqCst),
            c1.unpins.load(Ordering::SeqCst)
        );
        assert_eq!(
            c1.maps.load(Ordering::SeqCst),
            c1.unmaps.load(Ordering::SeqCst)
        );
    }

    #[test]
    fn a_panicking_backend_leaves_the_session_usable() {
        let (g, calls) = fake();
        let r = std::panic::catch_unwind(|| pin(g, &pin_req(0xdead_0000, 1)));
        assert!(r.is_err(), "the injected panic propagates to the boundary");
        // No lock is poisoned or held: the session works and closes.
        let mh = pin(g, &pin_req(0x7a00_0000, 0x10000)).unwrap();
        let r = std::panic::catch_unwind(|| map(g, mh, 0x5_0000_0000, 0));
        assert!(r.is_err());
        // The handle went back to "pinned" and maps again.
        let va = map(g, mh, 0x10000, 0).unwrap();
        unmap(g, mh, va, 0x10000).unwrap();
        close(g).unwrap();
        assert_eq!(calls.unpins.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn attributes() {
        let (g, _) = fake();
        assert_eq!(attribute(g, 1).unwrap(), 1);
        assert_eq!(attribute(g, 3).unwrap(), 0);
        assert_eq!(attribute(g, 4).unwrap_err().errno(), libc::EINVAL);
        assert_eq!(attribute(g, 0).unwrap_err().errno(), libc::EINVAL);
        assert_eq!(attribute(g, u32::MAX).unwrap_err().errno(), libc::EINVAL);
        assert_eq!(driver_version(g).unwrap(), (2, 6));
        close(g).unwrap();
        assert_eq!(driver_version(g).unwrap_err(), Error::InvalidHandle);
    }

    #[test]
    fn session_record_keeps_upstreams_struct_gdr_layout() {
        assert_eq!(offset_of!(SessionRecord, fd), 0);
        assert_eq!(offset_of!(SessionRecord, memhs), 8);
        assert_eq!(offset_of!(SessionRecord, page_size), 16);
        assert_eq!(offset_of!(SessionRecord, page_mask), 24);
        assert_eq!(offset_of!(SessionRecord, page_shift), 32);
        assert_eq!(offset_of!(SessionRecord, gdrdrv_version), 36);
        assert_eq!(offset_of!(SessionRecord, cache_backend), 40);
        assert!(offset_of!(SessionRecord, open) >= 48);
    }

    #[test]
    fn a_free_handle_record_is_all_zero() {
        // The handle registry relies on it: its slabs are fresh (zero) wipe-on-fork pages,
        // used as free records without being written.
        let r = HandleRecord::new_free();
        let fields = [
            r.le_next.load(Ordering::Relaxed) as u64,
            r.le_prev.load(Ordering::Relaxed) as u64,
            u64::from(r.mapping_type.load(Ordering::Relaxed)),
            u64::from(r._pad0.load(Ordering::Relaxed)),
            u64::from(r.driver_handle.load(Ordering::Relaxed)),
            u64::from(r._pad1.load(Ordering::Relaxed)),
            r.dmabuf_va.load(Ordering::Relaxed),
            r.dmabuf_page_offset.load(Ordering::Relaxed),
            r.dmabuf_mapped_size.load(Ordering::Relaxed),
            u64::from(r.dmabuf_page_size.load(Ordering::Relaxed)),
            u64::from(r._pad2.load(Ordering::Relaxed)),
            r.dmabuf_tm_cycles.load(Ordering::Relaxed),
            u64::from(r.dmabuf_cycles_per_ms.load(Ordering::Relaxed)),
            u64::from(r.dmabuf_bits.load(Ordering::Relaxed)),
            u64::from(r.dmabuf_backend_type.load(Ordering::Relaxed)),
            u64::from(r._pad3.load(Ordering::Relaxed)),
            r.dmabuf_cpu_va.load(Ordering::Relaxed) as u64,
            r.dmabuf_cpu_len.load(Ordering::Relaxed) as u64,
            u64::from(r.state.load(Ordering::Relaxed)),
            u64::from(r.users.load(Ordering::Relaxed)),
            r.owner.load(Ordering::Relaxed),
            r.seq.load(Ordering::Relaxed),
            r.pin_handle.load(Ordering::Relaxed),
            r.pin_va.load(Ordering::Relaxed),
            r.pin_size.load(Ordering::Relaxed),
            u64::from(r.pin_offset.load(Ordering::Relaxed)),
            u64::from(r.pin_fixed.load(Ordering::Relaxed)),
            u64::from(r.map_kind.load(Ordering::Relaxed)),
            r.map_addr.load(Ordering::Relaxed) as u64,
            r.map_len.load(Ordering::Relaxed) as u64,
        ];
        assert!(fields.iter().all(|&f| f == 0), "{fields:?}");
        assert_eq!(state::FREE, 0);
    }

    #[test]
    fn handle_record_keeps_upstreams_memh_layout() {
        assert_eq!(offset_of!(HandleRecord, le_next), 0);
        assert_eq!(offset_of!(HandleRecord, le_prev), 8);
        assert_eq!(offset_of!(HandleRecord, mapping_type), 16);
        assert_eq!(offset_of!(HandleRecord, driver_handle), 24);
        assert_eq!(offset_of!(HandleRecord, dmabuf_va), 32);
        assert_eq!(offset_of!(HandleRecord, dmabuf_page_offset), 40);
        assert_eq!(offset_of!(HandleRecord, dmabuf_mapped_size), 48);
        assert_eq!(offset_of!(HandleRecord, dmabuf_page_size), 56);
        assert_eq!(offset_of!(HandleRecord, dmabuf_tm_cycles), 64);
        assert_eq!(offset_of!(HandleRecord, dmabuf_cycles_per_ms), 72);
        assert_eq!(offset_of!(HandleRecord, dmabuf_bits), 76);
        assert_eq!(offset_of!(HandleRecord, dmabuf_backend_type), 80);
        assert_eq!(offset_of!(HandleRecord, dmabuf_cpu_va), 88);
        assert_eq!(offset_of!(HandleRecord, dmabuf_cpu_len), 96);
        assert!(offset_of!(HandleRecord, owner) >= 104);
        assert_eq!(std::mem::size_of::<HandleRecord>(), 256);
    }

    #[test]
    fn what_a_query_or_a_copy_reads_of_a_handle_is_one_line() {
        let line = offset_of!(HandleRecord, state) / 64;
        for off in [
            offset_of!(HandleRecord, state),
            offset_of!(HandleRecord, users),
            offset_of!(HandleRecord, session),
            offset_of!(HandleRecord, driver),
            offset_of!(HandleRecord, driver_ioctl),
            offset_of!(HandleRecord, pin_handle),
            offset_of!(HandleRecord, map_addr),
            offset_of!(HandleRecord, map_len) + 7,
            offset_of!(HandleRecord, pin_offset),
            offset_of!(HandleRecord, map_kind),
            offset_of!(HandleRecord, pin_fixed) + 1,
        ] {
            assert_eq!(off / 64, line, "offset {off}");
        }
        // What map, unmap and unpin read besides: one more line.
        for off in [
            offset_of!(HandleRecord, owner),
            offset_of!(HandleRecord, pin_va),
            offset_of!(HandleRecord, pin_size) + 7,
        ] {
            assert_eq!(off / 64, line - 1, "offset {off}");
        }
    }

    #[test]
    fn a_sessions_checks_and_open_state_take_two_lines_of_its_record() {
        assert_eq!(offset_of!(SessionRecord, fd), 0);
        assert_eq!(offset_of!(SessionRecord, cache_backend), 40);
        assert!(offset_of!(SessionRecord, opener) < 64);
        assert!(offset_of!(SessionRecord, serial) < 64);
        assert_eq!(offset_of!(SessionRecord, open), 64);
        assert!(std::mem::size_of::<RwLock<Option<Open>>>() <= 64);
    }
}
