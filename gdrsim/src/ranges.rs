//! A first-fit allocator of byte ranges (offsets into the fake VRAM file), with coalescing.

use std::collections::BTreeMap;

/// Free ranges of one region, keyed by start.
#[derive(Debug, Default)]
pub struct RangeAlloc {
    free: BTreeMap<u64, u64>,
}

impl RangeAlloc {
    /// An allocator whose whole region `[start, start + len)` is free.
    pub fn new(start: u64, len: u64) -> Self {
        let mut free = BTreeMap::new();
        if len > 0 {
            free.insert(start, len);
        }
        RangeAlloc { free }
    }

    /// Takes `size` bytes aligned to `align` (a power of two), first fit; `None` when no free
    /// range is large enough.
    pub fn alloc(&mut self, size: u64, align: u64) -> Option<u64> {
        if size == 0 || !align.is_power_of_two() {
            return None;
        }
        let (start, len, at) = self.free.iter().find_map(|(&s, &l)| {
            let at = s.checked_add(align - 1)? & !(align - 1);
            (at - s)
                .checked_add(size)
                .filter(|need| *need <= l)
                .map(|_| (s, l, at))
        })?;
        self.free.remove(&start);
        if at > start {
            self.free.insert(start, at - start);
        }
        let end = at + size;
        if end < start + len {
            self.free.insert(end, start + len - end);
        }
        Some(at)
    }

    /// Gives `[start, start + len)` back, merging it with free neighbours.
    pub fn free(&mut self, start: u64, len: u64) {
        if len == 0 {
            return;
        }
        let (mut s, mut e) = (start, start + len);
        if let Some((&ps, &pl)) = self.free.range(..s).next_back() {
            if ps + pl == s {
                self.free.remove(&ps);
                s = ps;
            }
        }
        if let Some(&nl) = self.free.get(&e) {
            self.free.remove(&e);
            e += nl;
        }
        self.free.insert(s, e - s);
    }

    /// Total free bytes.
    pub fn free_bytes(&self) -> u64 {
        self.free.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_alignment_and_coalescing() {
        let mut a = RangeAlloc::new(0, 1 << 20);
        let x = a.alloc(65539 + 253, 256).unwrap();
        assert_eq!(x, 0);
        let y = a.alloc(65540, 256).unwrap();
        assert_eq!(y, 65792);
        assert_ne!(y % 65536, 0);
        let z = a.alloc(100, 65536).unwrap();
        assert_eq!(z % 65536, 0);
        a.free(x, 65792);
        a.free(y, 65540);
        a.free(z, 100);
        assert_eq!(a.free_bytes(), 1 << 20);
        assert_eq!(a.alloc(1 << 20, 256), Some(0));
        assert_eq!(a.alloc(1, 256), None);
    }

    #[test]
    fn rejects_nonsense() {
        let mut a = RangeAlloc::new(0, 4096);
        assert_eq!(a.alloc(0, 256), None);
        assert_eq!(a.alloc(16, 3), None);
        assert_eq!(a.alloc(8192, 256), None);
        assert_eq!(a.alloc(u64::MAX, 256), None);
    }
}
