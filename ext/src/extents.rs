//! The free space of a chunk: disjoint extents (offset, length), in bytes, kept by offset and
//! merged with their neighbours when given back. Every offset and length handed out is a
//! multiple of [`LINE`] (64 bytes, a cache line): two allocations never share a line.
//! First fit, lowest address first: the small allocations this serves (flags, counters,
//! queues) stay packed at the start of a chunk.

use std::collections::BTreeMap;

/// The unit of allocation: a cache line.
pub const LINE: usize = 64;

/// The free extents of one chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extents {
    len: usize,
    free: BTreeMap<usize, usize>,
}

/// `n` rounded up to a multiple of `align` (a power of two); `None` on overflow.
pub fn round_up(n: usize, align: usize) -> Option<usize> {
    Some(n.checked_add(align - 1)? & !(align - 1))
}

impl Extents {
    /// A chunk of `len` bytes (a multiple of [`LINE`]), all free.
    pub fn new(len: usize) -> Extents {
        let mut free = BTreeMap::new();
        if len > 0 {
            free.insert(0, len);
        }
        Extents { len, free }
    }

    /// Takes `size` bytes (a multiple of [`LINE`]) at an offset that is a multiple of `align`
    /// (a power of two, at least [`LINE`]); `None` when no free extent fits.
    pub fn take(&mut self, size: usize, align: usize) -> Option<usize> {
        debug_assert!(size.is_multiple_of(LINE) && align.is_power_of_two() && align >= LINE);
        let (off, len, start) = self.free.iter().find_map(|(&off, &len)| {
            let start = round_up(off, align)?;
            (start.checked_add(size)? <= off + len).then_some((off, len, start))
        })?;
        self.free.remove(&off);
        if start > off {
            self.free.insert(off, start - off);
        }
        let end = start + size;
        if end < off + len {
            self.free.insert(end, off + len - end);
        }
        Some(start)
    }

    /// Gives back `size` bytes at `off`, which [`Extents::take`] handed out; merges them with
    /// free neighbours. Returns false (and changes nothing) when the range is not wholly in
    /// use (a double free).
    pub fn give(&mut self, off: usize, size: usize) -> bool {
        let Some(end) = off.checked_add(size) else {
            return false;
        };
        if size == 0 || end > self.len {
            return false;
        }
        let before = self.free.range(..=off).next_back().map(|(&o, &l)| (o, l));
        if before.is_some_and(|(o, l)| o + l > off) {
            return false;
        }
        let after = self.free.range(off..).next().map(|(&o, &l)| (o, l));
        if after.is_some_and(|(o, _)| o < end) {
            return false;
        }
        let (mut start, mut stop) = (off, end);
        if let Some((o, l)) = before.filter(|&(o, l)| o + l == off) {
            self.free.remove(&o);
            start = o;
            stop = stop.max(o + l);
        }
        if let Some((o, l)) = after.filter(|&(o, _)| o == end) {
            self.free.remove(&o);
            stop = o + l;
        }
        self.free.insert(start, stop - start);
        true
    }

    /// Whether nothing is in use.
    pub fn is_empty(&self) -> bool {
        self.len == 0 || self.free.get(&0) == Some(&self.len)
    }

    /// Bytes free.
    pub fn free_bytes(&self) -> usize {
        self.free.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_handed_out_in_order_and_aligned() {
        let mut e = Extents::new(4096);
        assert_eq!(e.take(64, 64), Some(0));
        assert_eq!(e.take(64, 64), Some(64));
        assert_eq!(e.take(128, 256), Some(256), "aligned past the gap");
        assert_eq!(e.take(64, 64), Some(128), "the gap is used next");
        assert_eq!(e.take(64, 64), Some(192));
        assert_eq!(e.free_bytes(), 4096 - 64 * 4 - 128);
        assert_eq!(e.take(8192, 64), None);
        assert!(!e.is_empty());
    }

    #[test]
    fn freed_extents_merge_and_the_chunk_empties() {
        let mut e = Extents::new(1024);
        let a = e.take(64, 64).unwrap();
        let b = e.take(128, 64).unwrap();
        let c = e.take(64, 64).unwrap();
        assert!(e.give(b, 128));
        assert!(!e.give(b, 128), "double free");
        assert!(!e.give(b + 64, 64), "inside a free extent");
        assert!(e.give(a, 64));
        assert!(e.give(c, 64));
        assert!(e.is_empty());
        assert_eq!(e.free_bytes(), 1024);
        assert_eq!(e, Extents::new(1024), "one extent again");
    }

    #[test]
    fn a_thousand_flags_fit_one_chunk_and_never_overlap() {
        let mut e = Extents::new(2 << 20);
        let offs: Vec<usize> = (0..1000).map(|_| e.take(64, 64).unwrap()).collect();
        for (i, o) in offs.iter().enumerate() {
            assert_eq!(*o, i * 64);
        }
        for o in offs.iter().rev().step_by(2) {
            assert!(e.give(*o, 64));
        }
        for o in offs.iter().rev().skip(1).step_by(2) {
            assert!(e.give(*o, 64));
        }
        assert!(e.is_empty());
    }

    #[test]
    fn bad_ranges_are_refused() {
        let mut e = Extents::new(1024);
        let _ = e.take(1024, 64).unwrap();
        assert!(!e.give(1000, 64), "past the end");
        assert!(!e.give(usize::MAX - 10, 64), "wraps");
        assert!(!e.give(0, 0));
        assert!(e.give(0, 1024));
        assert_eq!(round_up(65, 64), Some(128));
        assert_eq!(round_up(usize::MAX, 64), None);
    }

    #[test]
    fn largest_alignment_in_a_chunk() {
        let mut e = Extents::new(1 << 21);
        assert_eq!(e.take(64, 64), Some(0));
        assert_eq!(e.take(64, 1 << 16), Some(1 << 16));
        assert_eq!(e.take(1 << 16, 1 << 16), Some(2 << 16));
    }
}
