//! The FIFO of a registry's freed slots.

use crate::sys;

/// Freed slot numbers, oldest first: a ring in anonymous pages of its own rather than on the
/// heap, so that a registry's bookkeeping leaves the process heap (the program's, or an
/// interposer's) laid out as it would be without this library. Grows by doubling, never
/// shrinks; used only under the registry's allocation lock.
pub(super) struct Quarantine {
    /// `cap` slots (a power of two), or null while `cap` is 0.
    ring: *mut usize,
    cap: usize,
    /// Index in `ring` of the oldest slot.
    head: usize,
    len: usize,
}

// SAFETY: `ring` is memory this value owns alone; the registry reaches it only under its lock.
unsafe impl Send for Quarantine {}

impl Quarantine {
    /// An empty quarantine, holding no memory.
    pub(super) const fn new() -> Self {
        Quarantine {
            ring: std::ptr::null_mut(),
            cap: 0,
            head: 0,
            len: 0,
        }
    }

    /// Number of slots queued.
    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Removes and returns the oldest slot.
    #[inline(always)]
    pub(super) fn pop_front(&mut self) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        // SAFETY: `head < cap` and the slot at `head` holds the oldest of the `len` queued.
        let slot = unsafe { self.ring.add(self.head).read() };
        self.head = (self.head + 1) & (self.cap - 1);
        self.len -= 1;
        Some(slot)
    }

    /// Appends `slot`; false when a larger ring cannot be had (the slot is then never
    /// reused, which is safe).
    #[inline(always)]
    pub(super) fn push_back(&mut self, slot: usize) -> bool {
        if self.len == self.cap && !self.grow() {
            return false;
        }
        let tail = (self.head + self.len) & (self.cap - 1);
        // SAFETY: `tail < cap`, in the ring, and not one of the `len < cap` queued slots.
        unsafe { self.ring.add(tail).write(slot) };
        self.len += 1;
        true
    }

    /// Makes room for `n` slots now, in one step; false when the memory cannot be had.
    pub(super) fn reserve(&mut self, n: usize) -> bool {
        match n.checked_next_power_of_two() {
            Some(cap) if cap > self.cap => self.grow_to(cap),
            Some(_) => true,
            None => false,
        }
    }

    /// Doubles the ring (one page at first).
    #[cold]
    fn grow(&mut self) -> bool {
        self.grow_to(self.cap * 2)
    }

    /// Moves the queued slots, in order, to a new ring of at least `cap` slots (a power of
    /// two larger than the current one).
    #[cold]
    fn grow_to(&mut self, cap: usize) -> bool {
        let word = std::mem::size_of::<usize>();
        let cap = cap.max(sys::page_size() / word);
        let Some(bytes) = cap.checked_mul(word) else {
            return false;
        };
        let Ok(p) = sys::anonymous_pages(bytes) else {
            return false;
        };
        let ring = p.cast::<usize>();
        for k in 0..self.len {
            // SAFETY: `k < len <= cap`: the source is a queued slot of the old ring and the
            // destination lies in the new one, `cap` words long, page aligned.
            unsafe {
                ring.add(k)
                    .write(self.ring.add((self.head + k) & (self.cap - 1)).read())
            };
        }
        if !self.ring.is_null() {
            // SAFETY: the old ring is this value's own mapping of `self.cap` words, and
            // nothing refers to it any more.
            let _ = unsafe { sys::munmap(self.ring as usize, self.cap * word) };
        }
        self.ring = ring;
        self.cap = cap;
        self.head = 0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_in_first_out_across_growth_and_wrap() {
        let mut q = Quarantine::new();
        assert_eq!(q.pop_front(), None);
        let first = sys::page_size() / std::mem::size_of::<usize>();
        // Wrap the ring before it grows: half in, a quarter out, then past the end.
        let mut next_in = 0;
        let mut next_out = 0;
        for _ in 0..first / 2 {
            assert!(q.push_back(next_in));
            next_in += 1;
        }
        for _ in 0..first / 4 {
            assert_eq!(q.pop_front(), Some(next_out));
            next_out += 1;
        }
        // Three times the first ring: it wraps, then doubles twice.
        for _ in 0..3 * first {
            assert!(q.push_back(next_in));
            next_in += 1;
        }
        assert_eq!(q.len(), next_in - next_out);
        while let Some(s) = q.pop_front() {
            assert_eq!(s, next_out);
            next_out += 1;
        }
        assert_eq!(next_out, next_in);
        assert!(q.reserve(10 * first));
        assert!(q.push_back(7));
        assert_eq!(q.pop_front(), Some(7));
    }
}
