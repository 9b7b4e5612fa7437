//! Every live allocation of the process, by handle: what a copy needs (the chunk's libgdrapi
//! handle, the CPU address, the size) read with atomic loads only, and what a free checks
//! (the allocator that owns it, the device address).
//!
//! A handle is `generation << 32 | (slot + 1)`: never 0, and a freed handle is refused (its
//! slot's generation moved on) until the slot has been reused 2^32 times. Slots live in
//! segments that are never freed, so a lookup of any value dereferences only the library's own
//! memory; a slot freed is reused last (first in, first out).

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Slots per segment.
const SEGMENT: usize = 1024;
/// Segments at most: 4 Mi live allocations.
const SEGMENTS: usize = 4096;

/// What the registry keeps of one allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// The allocator's handle value.
    pub owner: u64,
    /// The libgdrapi handle of the chunk.
    pub mh: u64,
    /// The CPU address of the first byte.
    pub cpu: usize,
    /// The device address of the first byte.
    pub dev: u64,
    /// The usable size (the size asked for).
    pub size: usize,
}

/// One slot: its tag (`generation << 1 | live`) and the record, all atomics, so that a lookup
/// racing a free reads stale values, never torn ones, and then sees the tag changed.
struct Slot {
    tag: AtomicU64,
    owner: AtomicU64,
    mh: AtomicU64,
    cpu: AtomicUsize,
    dev: AtomicU64,
    size: AtomicUsize,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            tag: AtomicU64::new(0),
            owner: AtomicU64::new(0),
            mh: AtomicU64::new(0),
            cpu: AtomicUsize::new(0),
            dev: AtomicU64::new(0),
            size: AtomicUsize::new(0),
        }
    }
}

/// The segments; a NULL entry is not allocated yet.
static SEGS: [AtomicPtr<Slot>; SEGMENTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; SEGMENTS];

/// Slots free for reuse (oldest first) and the number ever handed out.
struct Free {
    queue: VecDeque<u32>,
    fresh: u32,
}

static FREE: Mutex<Free> = Mutex::new(Free {
    queue: VecDeque::new(),
    fresh: 0,
});

/// The slot of index `i`, if its segment exists.
fn slot(i: usize) -> Option<&'static Slot> {
    let seg = SEGS.get(i / SEGMENT)?.load(Ordering::Acquire);
    if seg.is_null() {
        return None;
    }
    // SAFETY: a non-NULL segment is a leaked array of SEGMENT slots that is never freed.
    Some(unsafe { &*seg.add(i % SEGMENT) })
}

/// The slot index and generation of `handle`.
fn split(handle: u64) -> Option<(usize, u64)> {
    let low = handle & 0xffff_ffff;
    (low != 0).then(|| ((low - 1) as usize, handle >> 32))
}

/// Records `r`; its handle, or `None` when every slot is taken.
pub fn insert(r: Record) -> Option<u64> {
    let index = {
        let mut free = FREE.lock();
        match free.queue.pop_front() {
            Some(i) => i as usize,
            None => {
                let i = free.fresh as usize;
                if i >= SEGMENT * SEGMENTS {
                    return None;
                }
                if i.is_multiple_of(SEGMENT) {
                    let seg: &'static mut [Slot] =
                        Box::leak((0..SEGMENT).map(|_| Slot::new()).collect());
                    SEGS[i / SEGMENT].store(seg.as_mut_ptr(), Ordering::Release);
                }
                free.fresh += 1;
                i
            }
        }
    };
    let s = slot(index)?;
    let generation = s.tag.load(Ordering::Relaxed) >> 1;
    s.owner.store(r.owner, Ordering::Relaxed);
    s.mh.store(r.mh, Ordering::Relaxed);
    s.cpu.store(r.cpu, Ordering::Relaxed);
    s.dev.store(r.dev, Ordering::Relaxed);
    s.size.store(r.size, Ordering::Relaxed);
    s.tag.store(generation << 1 | 1, Ordering::Release);
    Some(generation << 32 | (index as u64 + 1))
}

/// The record of the live allocation `handle`, or `None` (freed, never handed out, forged).
#[inline]
pub fn get(handle: u64) -> Option<Record> {
    let (index, generation) = split(handle)?;
    let s = slot(index)?;
    if s.tag.load(Ordering::Acquire) != generation << 1 | 1 {
        return None;
    }
    let r = Record {
        owner: s.owner.load(Ordering::Relaxed),
        mh: s.mh.load(Ordering::Relaxed),
        cpu: s.cpu.load(Ordering::Relaxed),
        dev: s.dev.load(Ordering::Relaxed),
        size: s.size.load(Ordering::Relaxed),
    };
    std::sync::atomic::fence(Ordering::Acquire);
    (s.tag.load(Ordering::Relaxed) == generation << 1 | 1).then_some(r)
}

/// Frees `handle` if it is live: exactly one of several racing calls gets its record.
pub fn remove(handle: u64) -> Option<Record> {
    let (index, generation) = split(handle)?;
    let s = slot(index)?;
    let r = get(handle)?;
    let next = ((generation + 1) & 0xffff_ffff) << 1;
    s.tag
        .compare_exchange(
            generation << 1 | 1,
            next,
            Ordering::AcqRel,
            Ordering::Relaxed,
        )
        .ok()?;
    FREE.lock().queue.push_back(index as u32);
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(owner: u64) -> Record {
        Record {
            owner,
            mh: 7,
            cpu: 0x1000,
            dev: 0x2000,
            size: 8,
        }
    }

    #[test]
    fn handles_find_their_record_until_freed() {
        let h = insert(rec(1)).unwrap();
        assert_ne!(h, 0);
        assert_eq!(get(h), Some(rec(1)));
        assert_eq!(remove(h), Some(rec(1)));
        assert_eq!(get(h), None, "stale");
        assert_eq!(remove(h), None, "double free");
    }

    #[test]
    fn forged_and_unknown_handles_are_refused() {
        assert_eq!(get(0), None);
        assert_eq!(get(u64::MAX), None);
        assert_eq!(get(0xffff_ffff), None, "a slot never handed out");
        let h = insert(rec(2)).unwrap();
        assert_eq!(get(h ^ (1 << 32)), None, "another generation");
        assert_eq!(remove(h ^ (1 << 33)), None);
        assert_eq!(get(h), Some(rec(2)));
        remove(h);
    }

    #[test]
    fn a_reused_slot_gets_a_new_generation() {
        // Fill the queue so that this test's slot comes back to it.
        let hs: Vec<u64> = (0..3000).map(|i| insert(rec(i)).unwrap()).collect();
        for h in &hs {
            remove(*h);
        }
        let again: Vec<u64> = (0..3000).map(|i| insert(rec(i)).unwrap()).collect();
        for h in &hs {
            assert_eq!(get(*h), None);
        }
        for (i, h) in again.iter().enumerate() {
            assert_eq!(get(*h).map(|r| r.owner), Some(i as u64));
            remove(*h);
        }
    }

    #[test]
    fn racing_frees_have_one_winner() {
        for _ in 0..200 {
            let h = insert(rec(3)).unwrap();
            let wins: usize = std::thread::scope(|s| {
                let t: Vec<_> = (0..4)
                    .map(|_| s.spawn(move || remove(h).is_some()))
                    .collect();
                t.into_iter().map(|t| usize::from(t.join().unwrap())).sum()
            });
            assert_eq!(wins, 1);
        }
    }
}
