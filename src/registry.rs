//! The library's own record of every `gdr_t` and `gdr_mh_t` it handed out.
//!
//! Records live in slabs that are never returned to the system, so any address inside a slab
//! stays readable forever. Checking a pointer from C is then a range check plus a
//! slot-boundary check ([`Registry::lookup`]), lock-free; whether the slot is *live*, and
//! whose it is, is then read from the record's own atomics. The first slab lies inside the
//! registry itself (a registry is a `static`, so its records are in the library's
//! zero-initialised memory): a lookup there computes the record's address from the
//! registry's and loads nothing else. Later slabs are anonymous pages of their own. A freed
//! slot goes to the back of a FIFO quarantine and is reused only after [`QUARANTINE`] later
//! frees, so a stale handle almost never aliases a new one.
//!
//! A registry made with [`Registry::wiped_in_children`] keeps its slabs in pages marked
//! `MADV_WIPEONFORK`: in a child process, however it was created, every record reads as
//! free, so a handle inherited from the parent is refused like a stale one, at no cost to
//! the lock-free lookups.

mod quarantine;

use crate::hint::cold_path;
use quarantine::Quarantine;
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// Slots that must be freed after a slot before that slot is reused.
pub const QUARANTINE: usize = 1024;

/// Number of slab slots: slab `k` holds `FIRST << k` records.
const MAX_SLABS: usize = 40;
/// Records in the first slab of a registry made with [`Registry::new`].
pub const FIRST_SLAB: usize = 64;
/// Records in the first slab of a registry made with [`Registry::wiped_in_children`]: more
/// than [`QUARANTINE`], so that a steady pin/unpin cycle stays in one slab, which lookups
/// check inline.
pub const FIRST_WIPED_SLAB: usize = 2048;

/// A registry whose records read as free in a child process ([`Registry::wiped_in_children`]).
pub type WipedRegistry<T> = Registry<T, FIRST_WIPED_SLAB, true>;

/// A record type kept in a [`Registry`]: constructible in its idle state, shareable.
pub trait Record: Sync + Send + 'static {
    /// A new record in its free state.
    fn new_free() -> Self;
}

/// Free-list bookkeeping, behind the allocator lock.
struct Alloc {
    /// Slots handed out so far from the slabs, in order (next fresh slot index).
    fresh: usize,
    /// Allocations made so far, fresh or from the quarantine.
    allocations: u64,
    /// Freed slots, oldest first.
    quarantine: Quarantine,
}

impl Alloc {
    /// The index of the slot [`Registry::allocate`] hands out: the oldest quarantined one once
    /// the quarantine is full, else a fresh one (a new slab when the last is used up), else
    /// the oldest quarantined one.
    #[inline(always)]
    fn slot_to_use<T: Record, const FIRST: usize, const WIPED: bool>(
        &mut self,
        r: &'static Registry<T, FIRST, WIPED>,
    ) -> Option<usize> {
        if self.quarantine.len() > QUARANTINE {
            return self.quarantine.pop_front();
        }
        let i = self.fresh;
        let (k, _) = locate(FIRST, i);
        if k >= MAX_SLABS {
            // Everything is handed out; fall back to the oldest freed slot if any.
            return self.quarantine.pop_front();
        }
        if k >= r.nslabs.load(Ordering::Acquire) {
            if k == 0 {
                // Room for the whole quarantine now, so that the frees that fill it do not
                // grow it step by step (a copy into new pages at every doubling).
                let _ = self.quarantine.reserve(QUARANTINE + 1);
            }
            let slab = if k == 0 {
                r.first_slab()
            } else {
                r.new_slab(slab_len(FIRST, k))?
            };
            r.slabs[k].store(slab, Ordering::Release);
            r.nslabs.store(k + 1, Ordering::Release);
        }
        self.fresh += 1;
        r.handed_out.store(self.fresh, Ordering::Release);
        Some(i)
    }
}

/// A slab allocator of `T` records whose addresses can be validated without a lock; slab `k`
/// holds `FIRST << k` records, slab 0 inline. `WIPED`: its records read as free in a child
/// process (see [`Registry::wiped_in_children`]).
///
/// A lookup in the first slab of a wiped registry reads nothing but the record; in that of
/// another registry, the slab count too, in the registry's first cache line, beside the
/// allocation state.
#[repr(C, align(64))]
pub struct Registry<T: Record, const FIRST: usize = FIRST_SLAB, const WIPED: bool = false> {
    /// First, with the slab count, so that an allocation or a release in the first slab, and
    /// a lookup, touch one line of the registry (`AllocLock::kernel_refused` is there too).
    alloc: AllocLock,
    /// Number of slabs published in `slabs`.
    nslabs: AtomicUsize,
    /// Slots handed out so far (a copy of `Alloc::fresh` readable without the lock).
    handed_out: AtomicUsize,
    slabs: [AtomicPtr<T>; MAX_SLABS],
    /// Slab 0: zero bytes until the first allocation publishes it.
    first: FirstSlab<T, FIRST>,
}

/// A page size that every page size of the target divides: the first slab of a wiped
/// registry starts on such a boundary, so that `MADV_WIPEONFORK` can cover it.
const WIPE_ALIGN: usize = if cfg!(target_arch = "x86_64") {
    4096
} else {
    65536
};

/// A registry's inline first slab: `N` records from [`FirstSlab::base`], aligned for `T`
/// only, so that the registry's own fields share a page with the library's other data.
#[repr(C)]
struct FirstSlab<T, const N: usize> {
    records: UnsafeCell<MaybeUninit<[T; N]>>,
    /// Room to start the records of a wiped registry on a [`WIPE_ALIGN`] boundary.
    slack: UnsafeCell<MaybeUninit<[u8; WIPE_ALIGN]>>,
}

impl<T, const N: usize> FirstSlab<T, N> {
    const fn new() -> Self {
        FirstSlab {
            records: UnsafeCell::new(MaybeUninit::zeroed()),
            slack: UnsafeCell::new(MaybeUninit::zeroed()),
        }
    }

    /// The first record: the start of `records`, or for a wiped registry the first
    /// [`WIPE_ALIGN`] boundary in it (at most `WIPE_ALIGN - align_of::<T>()` bytes on, so the
    /// `N` records end inside `slack`). Arithmetic on the slab's address only.
    #[inline(always)]
    fn base(&self, wiped: bool) -> *mut T {
        let start = self.records.get().cast::<T>();
        if wiped {
            start.map_addr(|a| (a + (WIPE_ALIGN - 1)) & !(WIPE_ALIGN - 1))
        } else {
            start
        }
    }
}

// SAFETY: the records are `Sync`; the registry writes them through raw pointers only before
// publishing them (under the allocation lock, while no reference to them exists), and a
// wiped registry's records are valid as zero bytes before that (its constructor's contract).
// The rest of the registry is atomics, and the allocation state is behind `AllocLock`.
unsafe impl<T: Record, const FIRST: usize, const WIPED: bool> Sync for Registry<T, FIRST, WIPED> {}

/// Writes `len` free records from `p`.
///
/// # Safety
/// `p` is valid and aligned for `len` records of `T`, and no reference to any of them exists.
unsafe fn write_free<T: Record>(p: *mut T, len: usize) {
    for i in 0..len {
        // SAFETY: `i < len`, inside the range the caller vouches for.
        unsafe { p.add(i).write(T::new_free()) };
    }
}

/// Records in slab `k` of a registry whose first slab holds `first`.
const fn slab_len(first: usize, k: usize) -> usize {
    first << k
}

/// (slab, index in slab) of global slot `i` in a registry whose first slab holds `first`.
fn locate(first: usize, i: usize) -> (usize, usize) {
    // Slab k starts at first * (2^k - 1).
    let k = (i / first + 1).ilog2() as usize;
    (k, i - first * ((1 << k) - 1))
}

impl<T: Record> Registry<T> {
    /// An empty registry (usable in a `static`).
    pub const fn new() -> Self {
        Self::empty()
    }
}

impl<T: Record> WipedRegistry<T> {
    /// An empty registry whose records all read as free in a child process.
    ///
    /// # Safety
    /// All-zero bytes are a valid `T` in its free state (its fields are atomic integers and
    /// pointers, free at 0): its first slab is read as records before anything is written to
    /// it, and a child process reads its records as zero bytes.
    pub const unsafe fn wiped_in_children() -> Self {
        const {
            assert!((FIRST_WIPED_SLAB * size_of::<T>()).is_multiple_of(WIPE_ALIGN));
        };
        Self::empty()
    }
}

impl<T: Record, const FIRST: usize, const WIPED: bool> Registry<T, FIRST, WIPED> {
    /// All zero bytes, so that a `static` registry and its first slab take no room in the
    /// library file.
    const fn empty() -> Self {
        Registry {
            slabs: [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_SLABS],
            nslabs: AtomicUsize::new(0),
            handed_out: AtomicUsize::new(0),
            alloc: AllocLock {
                held: AtomicBool::new(false),
                kernel_refused: AtomicBool::new(false),
                alloc: UnsafeCell::new(Alloc {
                    fresh: 0,
                    allocations: 0,
                    quarantine: Quarantine::new(),
                }),
            },
            first: FirstSlab::new(),
        }
    }

    /// A slot to use, as a record reference, with its allocation number (1 for this
    /// registry's first allocation, one more for each later one: their order); `None` when
    /// memory is exhausted. The caller moves the record out of its free state.
    #[inline(always)]
    pub fn allocate(&'static self) -> Option<(&'static T, u64)> {
        let mut a = self.lock();
        let i = a.slot_to_use(self)?;
        a.allocations += 1;
        Some((self.slot(i), a.allocations))
    }

    /// Whether every slab of this registry lies in wipe-on-fork pages (so that a child sees
    /// only free records without help).
    #[inline(always)]
    pub fn wiped_by_the_kernel(&self) -> bool {
        WIPED && !self.alloc.kernel_refused.load(Ordering::Relaxed)
    }

    /// Every record of this registry handed out so far, live or not (for `gdr_close`, which
    /// finds a session's handles among them, and for a fork handler that must reset them
    /// where the kernel does not). Lock-free.
    pub fn for_each(&'static self, mut f: impl FnMut(&'static T)) {
        for i in 0..self.handed_out.load(Ordering::Acquire) {
            f(self.slot(i));
        }
    }

    /// Publishes slab 0, the inline one: marked wipe-on-fork in a wiped registry (where the
    /// kernel has the advice; its records are zero bytes, already free), its records written
    /// free in another. Called once, under the allocation lock.
    #[cold]
    fn first_slab(&'static self) -> *mut T {
        let p = self.first.base(WIPED);
        let bytes = FIRST * std::mem::size_of::<T>();
        if WIPED {
            // SAFETY: the slab is this registry's own memory, whole pages (it starts on a
            // `WIPE_ALIGN` boundary and `wiped_in_children` checks its size) that a child may
            // read as zero bytes, free records (the constructor's contract); the advice
            // changes only what a child sees.
            if unsafe { crate::sys::advise_wipe_on_fork(p.cast(), bytes) }.is_err() {
                self.alloc.kernel_refused.store(true, Ordering::Relaxed);
            }
            // The records a steady pin/unpin cycle goes through (the quarantine's, plus one)
            // are faulted in now, once, rather than a page every few pins.
            let cycled = FIRST.min(QUARANTINE + 1) * std::mem::size_of::<T>();
            // SAFETY: the first `cycled` bytes lie in the slab, which reads as zero bytes
            // (nothing was written to it before publication).
            unsafe { crate::sys::populate_zeroed(p.cast(), cycled) };
        } else {
            // SAFETY: the slab holds `FIRST` records; it is not yet published, so no reference
            // to any of them exists ([`Registry::lookup_first`] of a registry that is not
            // wiped reads nothing before publication).
            unsafe { write_free(p, FIRST) };
        }
        p
    }

    /// A never-freed slab of `len` free records, in anonymous pages of its own: wipe-on-fork
    /// pages when this registry asks for them and the kernel has the advice.
    #[cold]
    fn new_slab(&self, len: usize) -> Option<*mut T> {
        let bytes = len.checked_mul(std::mem::size_of::<T>())?;
        if WIPED {
            if let Ok(p) = crate::sys::wipe_on_fork_pages(bytes) {
                // A fresh anonymous mapping reads as zero bytes, which is `T`'s free state
                // (the contract of `wiped_in_children`): the records are initialised without
                // a write, and the kernel backs only the pages that get used.
                return Some(p.cast::<T>());
            }
            self.alloc.kernel_refused.store(true, Ordering::Relaxed);
        }
        // Pages of their own, not the heap: the records then share no page with the
        // program's (or an interposer's) heap objects, and leave the heap's layout as it
        // would be without this library.
        let p = crate::sys::anonymous_pages(bytes).ok()?.cast::<T>();
        // SAFETY: the mapping holds `len` records (page aligned, so aligned for `T`, whose
        // alignment is at most a page) and nothing else refers to it yet.
        unsafe { write_free(p, len) };
        Some(p)
    }

    /// Puts `rec` (a record of this registry, already back in its free state) into the
    /// quarantine.
    #[inline(always)]
    pub fn release(&'static self, rec: &'static T) {
        let addr = rec as *const T as usize;
        match self.index_in_first(addr) {
            Some(i) => self.quarantine(i),
            None => self.release_elsewhere(addr),
        }
    }

    /// [`Registry::release`] of a record outside the first slab.
    #[cold]
    #[inline(never)]
    fn release_elsewhere(&'static self, addr: usize) {
        if let Some(i) = self.index_elsewhere(addr) {
            self.quarantine(i);
        }
    }

    /// Queues slot `i` in the quarantine.
    #[inline(always)]
    fn quarantine(&'static self, i: usize) {
        let _ = self.lock().quarantine.push_back(i);
    }

    /// The allocation lock.
    #[inline(always)]
    fn lock(&self) -> AllocGuard<'_> {
        self.alloc.lock()
    }

    /// For a fork `prepare` handler: takes the allocation lock, so that no other thread holds
    /// it at the moment of the fork; dropping the guard in the `parent` and `child` handlers
    /// releases it. Releasing it is one store to the lock's word, so it is as safe in the
    /// child, where the parent's waiting threads do not exist.
    pub fn hold_for_fork(&'static self) -> ForkGuard {
        ForkGuard(self.lock())
    }

    fn slot(&'static self, i: usize) -> &'static T {
        if i < FIRST {
            // SAFETY: slot `i` of slab 0, which was handed out, so slab 0 is published; it is
            // part of the registry, which lives as long as the process.
            return unsafe { &*self.first.base(WIPED).add(i) };
        }
        self.slot_later(i)
    }

    /// [`Registry::slot`] in the slabs after the first.
    #[cold]
    #[inline(never)]
    fn slot_later(&'static self, i: usize) -> &'static T {
        let (k, j) = locate(FIRST, i);
        let base = self.slabs[k].load(Ordering::Acquire);
        // SAFETY: slot `i` was handed out, so slab `k` is published and holds more than `j`
        // initialised records; slabs are never freed, so the reference is valid for 'static.
        unsafe { &*base.add(j) }
    }

    /// The global slot index of `addr`, the address of a record of this registry (`None`
    /// for any other address outside the first slab).
    #[cfg(test)]
    #[inline(always)]
    fn index_of(&'static self, addr: usize) -> Option<usize> {
        self.index_in_first(addr)
            .or_else(|| self.index_elsewhere(addr))
    }

    /// [`Registry::index_of`] in the first slab only: `None` for any other address.
    #[inline(always)]
    fn index_in_first(&'static self, addr: usize) -> Option<usize> {
        let size = std::mem::size_of::<T>();
        let off = addr.wrapping_sub(self.first.base(WIPED) as usize);
        (off < FIRST * size).then(|| off / size)
    }

    /// [`Registry::index_of`] outside the first slab.
    #[cold]
    #[inline(never)]
    fn index_elsewhere(&'static self, addr: usize) -> Option<usize> {
        for k in 1..self.nslabs.load(Ordering::Acquire) {
            match self.probe(k, addr) {
                Probe::Hit(r) => {
                    let base = self.slabs[k].load(Ordering::Acquire) as usize;
                    let off = r as *const T as usize - base;
                    return Some(FIRST * ((1 << k) - 1) + off / std::mem::size_of::<T>());
                }
                Probe::Misaligned => return None,
                Probe::Outside => {}
            }
        }
        None
    }

    /// The record at `addr`, if `addr` is exactly the address of one of this registry's
    /// records (live or not). Never dereferences `addr` otherwise. Lock-free.
    ///
    /// The first slab, where a steady pin/unpin cycle stays (see [`FIRST_WIPED_SLAB`]), is
    /// checked inline ([`Registry::lookup_first`]); later slabs are searched out of line.
    #[inline(always)]
    pub fn lookup(&'static self, addr: usize) -> Option<&'static T> {
        match self.lookup_first(addr) {
            Some(r) => Some(r),
            None => self.lookup_later(addr),
        }
    }

    /// [`Registry::lookup`] in the first slab only: `None` for any other address, including
    /// records of later slabs. For paths that must make no call (the copies): in a wiped
    /// registry, one subtraction from a constant address and one test of the offset.
    #[inline(always)]
    pub fn lookup_first(&'static self, addr: usize) -> Option<&'static T> {
        let size = std::mem::size_of::<T>();
        const { assert!(size_of::<T>().is_power_of_two() && FIRST.is_power_of_two()) };
        let base = self.first.base(WIPED);
        // Inside the slab and at a record boundary: no bit of the offset outside the slab's
        // record-index bits (a wrapping offset below the slab sets the top ones).
        let off = addr.wrapping_sub(base as usize);
        if (!WIPED && self.nslabs.load(Ordering::Acquire) == 0)
            || off & !((FIRST * size - 1) & !(size - 1)) != 0
        {
            cold_path();
            return None;
        }
        // SAFETY: `off` is a multiple of `size` below `FIRST * size`: `r` is a record of
        // slab 0, inside the registry.
        let r = unsafe { base.add(off / size) };
        // SAFETY: the registry is never at address 0 (a reference to it exists). Said so
        // that the caller's test of the `Option` folds away.
        unsafe { core::hint::assert_unchecked(!r.is_null()) };
        // SAFETY: slab 0 lives as long as the registry ('static), and `r` is a valid `T` in
        // it: slab 0 of a registry that is not wiped is published (its records written)
        // before `nslabs` leaves 0; that of a wiped one holds zero bytes, free records,
        // until written.
        Some(unsafe { &*r })
    }

    /// [`Registry::lookup`] in the slabs after the first, newest first.
    #[cold]
    #[inline(never)]
    fn lookup_later(&'static self, addr: usize) -> Option<&'static T> {
        for k in (1..self.nslabs.load(Ordering::Acquire)).rev() {
            match self.probe(k, addr) {
                Probe::Hit(r) => return Some(r),
                Probe::Misaligned => return None,
                Probe::Outside => {}
            }
        }
        None
    }

    /// Where `addr` falls relative to published slab `k`.
    #[inline(always)]
    fn probe(&'static self, k: usize, addr: usize) -> Probe<T> {
        let Some(slab) = self.slabs.get(k) else {
            return Probe::Outside;
        };
        let base = slab.load(Ordering::Acquire);
        let size = std::mem::size_of::<T>();
        // A wrapping offset: an address below the slab (NULL included, the slab never starts
        // at 0) becomes huge and fails the one compare below.
        let off = addr.wrapping_sub(base as usize);
        if base.is_null() || off >= (FIRST * size) << k {
            return Probe::Outside;
        }
        if !off.is_multiple_of(size) {
            return Probe::Misaligned;
        }
        // SAFETY: `off / size < slab_len(FIRST, k)`; slab `k` is published (`k < nslabs`,
        // non-NULL base) with `slab_len(FIRST, k)` records and is never freed.
        Probe::Hit(unsafe { &*base.add(off / size) })
    }
}

/// What [`Registry::probe`] found.
enum Probe<T: 'static> {
    /// The exact address of a record of the slab.
    Hit(&'static T),
    /// Inside the slab but not at a record boundary: not a record of this registry.
    Misaligned,
    /// Not inside the slab.
    Outside,
}

/// The allocation lock of a registry, held across `fork` (see [`Registry::hold_for_fork`]).
pub struct ForkGuard(#[allow(dead_code)] AllocGuard<'static>);

/// A registry's allocation lock: one flag, taken by compare-and-swap, waited for by yielding
/// the CPU (it is held for a queue push or pop, rarely for a slab's `mmap`). Unlike std's
/// `Mutex` it reads no global state (poisoning reads the process's panic count, in another
/// page, through the GOT), so a pin or unpin touches only the registry's own line; nothing
/// panics while it is held, so there is nothing to poison. Released by one store.
#[repr(C)]
struct AllocLock {
    held: AtomicBool,
    /// The registry's, not the lock's: set once a slab of a wiped registry could not get
    /// wipe-on-fork pages; read without the lock. Here, beside `held`, it shares the
    /// registry's first line (a pin reads it) at no cost in size.
    kernel_refused: AtomicBool,
    alloc: UnsafeCell<Alloc>,
}

// SAFETY: `alloc` is reached only through an `AllocGuard`, and `held` lets one exist at a time.
unsafe impl Sync for AllocLock {}

impl AllocLock {
    #[inline(always)]
    fn lock(&self) -> AllocGuard<'_> {
        if self
            .held
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.wait();
        }
        AllocGuard(self)
    }

    #[cold]
    #[inline(never)]
    fn wait(&self) {
        loop {
            std::thread::yield_now();
            if !self.held.load(Ordering::Relaxed)
                && self
                    .held
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return;
            }
        }
    }
}

/// Exclusive access to a registry's [`Alloc`]; releases the lock on drop.
struct AllocGuard<'a>(&'a AllocLock);

impl std::ops::Deref for AllocGuard<'_> {
    type Target = Alloc;
    #[inline(always)]
    fn deref(&self) -> &Alloc {
        // SAFETY: this guard holds the lock, so no `&mut Alloc` exists elsewhere.
        unsafe { &*self.0.alloc.get() }
    }
}

impl std::ops::DerefMut for AllocGuard<'_> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Alloc {
        // SAFETY: this guard holds the lock, so it is the only access to `alloc`.
        unsafe { &mut *self.0.alloc.get() }
    }
}

impl Drop for AllocGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.held.store(false, Ordering::Release);
    }
}

impl<T: Record> Default for Registry<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::child;
    use std::sync::atomic::AtomicU64;

    struct Rec {
        live: AtomicU64,
        _pad: [u64; 3],
    }
    impl Record for Rec {
        fn new_free() -> Self {
            Rec {
                live: AtomicU64::new(0),
                _pad: [0; 3],
            }
        }
    }

    /// A registry for one test (registries live as long as the process, as their records).
    fn leaked() -> &'static Registry<Rec> {
        Box::leak(Box::new(Registry::new()))
    }

    #[test]
    fn locate_maps_global_slots_to_slabs() {
        assert_eq!(locate(64, 0), (0, 0));
        assert_eq!(locate(64, 63), (0, 63));
        assert_eq!(locate(64, 64), (1, 0));
        assert_eq!(locate(64, 191), (1, 127));
        assert_eq!(locate(64, 192), (2, 0));
        assert_eq!(locate(2048, 2047), (0, 2047));
        assert_eq!(locate(2048, 2048), (1, 0));
    }

    #[test]
    fn lookup_accepts_only_exact_record_addresses() {
        let r = leaked();
        assert!(r.lookup(0x1000).is_none(), "empty registry knows nothing");
        let a = r.allocate().unwrap().0;
        let pa = a as *const Rec as usize;
        assert!(std::ptr::eq(r.lookup(pa).unwrap(), a));
        assert!(
            r.lookup(pa + 8).is_none(),
            "inside a record but not at its start"
        );
        assert!(r.lookup(0).is_none());
        // A stack copy of a record is not a record.
        let forged = Rec::new_free();
        assert!(r.lookup(&forged as *const Rec as usize).is_none());
        // Many allocations span several slabs; each one resolves to itself.
        let many: Vec<&Rec> = (0..500).map(|_| r.allocate().unwrap().0).collect();
        for m in &many {
            let addr = *m as *const Rec as usize;
            assert!(std::ptr::eq(r.lookup(addr).unwrap(), *m));
            // The slot index of a record of any slab leads back to it.
            assert!(std::ptr::eq(r.slot(r.index_of(addr).unwrap()), *m));
        }
        assert!(r.nslabs.load(Ordering::Relaxed) >= 3);
        // Records of every slab resolve, exactly (the first slab's inline, later ones out of
        // line); the first-slab check alone resolves those of slab 0 and no others.
        assert!(std::ptr::eq(r.lookup(pa).unwrap(), a));
        assert!(std::ptr::eq(r.lookup_first(pa).unwrap(), a));
        assert!(r.lookup_first(pa + 8).is_none());
        let last = *many.last().unwrap();
        assert!(r.lookup_first(last as *const Rec as usize).is_none());
        let base0 = r.slabs[0].load(Ordering::Relaxed) as usize;
        let size = std::mem::size_of::<Rec>();
        assert!(r.lookup_first(base0 + (FIRST_SLAB - 1) * size).is_some());
        assert!(r.lookup_first(base0 + FIRST_SLAB * size).is_none());
        assert!(r.lookup_first(base0.wrapping_sub(size)).is_none());
        assert!(r.lookup(pa + 8).is_none(), "misaligned in the oldest slab");
        // Just past the end of the newest slab is not one of its records (it may be the
        // first record of an older slab that the kernel mapped right above it).
        let k = r.nslabs.load(Ordering::Relaxed) - 1;
        let base = r.slabs[k].load(Ordering::Relaxed) as usize;
        let end = base + slab_len(FIRST_SLAB, k) * std::mem::size_of::<Rec>();
        let older = (0..k).any(|j| r.slabs[j].load(Ordering::Relaxed) as usize == end);
        assert_eq!(r.lookup(end).is_some(), older);
        assert!(r.lookup(base).is_some());
        assert!(r.lookup(usize::MAX & !31).is_none());
    }

    #[test]
    fn allocation_numbers_count_every_allocation_fresh_or_reused() {
        let r = leaked();
        let mut last = 0;
        // Past the quarantine, so that later allocations reuse freed slots.
        for _ in 0..QUARANTINE + 10 {
            let (rec, n) = r.allocate().unwrap();
            assert_eq!(n, last + 1);
            last = n;
            r.release(rec);
        }
        assert!(r.handed_out.load(Ordering::Relaxed) < QUARANTINE + 10);
    }

    #[test]
    fn for_each_visits_every_record_handed_out() {
        let r = leaked();
        let recs: Vec<_> = (0..70).map(|_| r.allocate().unwrap().0).collect();
        let mut seen = Vec::new();
        r.for_each(|x| seen.push(x as *const Rec as usize));
        for x in recs {
            assert!(seen.contains(&(x as *const Rec as usize)));
        }
        assert!(!r.wiped_by_the_kernel(), "an ordinary registry");
        // SAFETY: a `Rec` is atomic integers, free at zero.
        static W: WipedRegistry<Rec> = unsafe { WipedRegistry::wiped_in_children() };
        W.allocate().unwrap();
        assert!(W.wiped_by_the_kernel(), "MADV_WIPEONFORK (Linux 4.14+)");
    }

    #[test]
    fn an_allocation_and_a_lookup_read_the_registrys_first_line_only() {
        use std::mem::offset_of;
        type R = WipedRegistry<Rec>;
        assert!(offset_of!(R, nslabs) + 8 <= 64);
        assert!(offset_of!(R, alloc) + std::mem::size_of::<AllocLock>() <= 64);
        assert!(offset_of!(AllocLock, kernel_refused) < 8);
    }

    #[test]
    fn the_first_slab_is_inline_and_a_wiped_one_reads_as_free_records_from_the_start() {
        // SAFETY: a `Rec` is atomic integers, free at zero.
        static E: WipedRegistry<Rec> = unsafe { WipedRegistry::wiped_in_children() };
        let size = std::mem::size_of::<Rec>();
        let base = E.first.base(true) as usize;
        assert_eq!(base % WIPE_ALIGN, 0, "whole pages, for MADV_WIPEONFORK");
        let r = E.lookup_first(base + 5 * size).expect("a record of slab 0");
        assert_eq!(r.live.load(Ordering::Relaxed), 0, "free at first");
        assert!(E.lookup_first(base + 5 * size + 8).is_none());
        assert!(E.lookup_first(base + FIRST_WIPED_SLAB * size).is_none());
        assert!(E.lookup_first(base.wrapping_sub(size)).is_none());
        let (a, n) = E.allocate().unwrap();
        assert_eq!((a as *const Rec as usize, n), (base, 1));
        assert!(std::ptr::eq(E.slot(0), a));
        // A registry that is not wiped answers only once its slab is published.
        let plain = leaked();
        let first = plain.first.base(false) as usize;
        assert!(plain.lookup(first).is_none());
        let (b, _) = plain.allocate().unwrap();
        assert_eq!(b as *const Rec as usize, first);
        assert!(std::ptr::eq(plain.lookup(first).unwrap(), b));
        assert_eq!(plain.index_of(first + size), Some(1));
    }

    #[test]
    fn records_of_a_wiped_registry_read_as_free_in_a_child() {
        // SAFETY: a `Rec` is atomic integers, free at zero.
        static R: WipedRegistry<Rec> = unsafe { WipedRegistry::wiped_in_children() };
        let rec = R.allocate().unwrap().0;
        rec.live.store(7, Ordering::SeqCst);
        child::assert_passes(child::Made::RawClone, || {
            R.lookup(rec as *const Rec as usize)
                .map(|r| r.live.load(Ordering::SeqCst))
                == Some(0)
        });
        assert_eq!(
            rec.live.load(Ordering::SeqCst),
            7,
            "the parent keeps its record"
        );
    }

    #[test]
    fn freed_slots_are_reused_only_after_the_quarantine() {
        let r = leaked();
        let first = r.allocate().unwrap().0;
        first.live.store(7, Ordering::Relaxed);
        r.release(first);
        let mut seen_again = None;
        for n in 0..(QUARANTINE + 10) {
            let x = r.allocate().unwrap().0;
            if std::ptr::eq(x, first) {
                seen_again = Some(n);
                break;
            }
            r.release(x);
        }
        let n = seen_again.expect("slot reused eventually");
        assert!(n >= QUARANTINE, "reused after only {n} frees");
        // The stale address stays readable throughout.
        assert_eq!(
            r.lookup(first as *const Rec as usize)
                .unwrap()
                .live
                .load(Ordering::Relaxed),
            7
        );
    }
}
