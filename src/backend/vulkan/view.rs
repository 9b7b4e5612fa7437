//! The CPU view of one import: the whole allocation mapped once, with no access except the
//! ranges that handles have mapped, so that pins of one allocation share one import while an
//! access after `gdr_unmap` still faults, as after gdrdrv's `munmap`.

use crate::error::Result;
use std::collections::BTreeMap;
use std::ops::Range;

/// How many live mappings cover each byte of a view, as disjoint runs `start -> (end, count)`
/// with every count at least 1; a byte in no run is covered by none.
#[derive(Debug, Default)]
struct Coverage(BTreeMap<u64, (u64, u32)>);

impl Coverage {
    /// Splits the run that holds `x` strictly inside it into two runs that meet at `x`.
    fn split_at(&mut self, x: u64) {
        if let Some((&s, &(e, c))) = self.0.range(..x).next_back() {
            if e > x {
                self.0.insert(s, (x, c));
                self.0.insert(x, (e, c));
            }
        }
    }

    /// Joins runs that meet in `[r.start, r.end]` and have the same count, so that the map
    /// stays as small as the counts allow.
    fn tidy(&mut self, r: &Range<u64>) {
        let starts: Vec<u64> = self.0.range(r.start..=r.end).map(|(&s, _)| s).collect();
        for x in starts {
            let Some(&(e, c)) = self.0.get(&x) else {
                continue;
            };
            if let Some((&s, &(pe, pc))) = self.0.range(..x).next_back() {
                if pe == x && pc == c {
                    self.0.remove(&x);
                    self.0.insert(s, (e, c));
                }
            }
        }
    }

    /// Counts `r` once more; returns the parts of it that no mapping covered before.
    fn open(&mut self, r: Range<u64>) -> Vec<Range<u64>> {
        self.split_at(r.start);
        self.split_at(r.end);
        let mut gaps = Vec::new();
        let mut at = r.start;
        for (&s, run) in self.0.range_mut(r.clone()) {
            if s > at {
                gaps.push(at..s);
            }
            run.1 += 1;
            at = run.0;
        }
        if at < r.end {
            gaps.push(at..r.end);
        }
        for g in &gaps {
            self.0.insert(g.start, (g.end, 1));
        }
        self.tidy(&r);
        gaps
    }

    /// Counts `r` once less (it was counted by [`Coverage::open`]); returns the parts of it
    /// that no mapping covers any more.
    fn close(&mut self, r: Range<u64>) -> Vec<Range<u64>> {
        self.split_at(r.start);
        self.split_at(r.end);
        let runs: Vec<(u64, u64, u32)> = self
            .0
            .range(r.clone())
            .map(|(&s, &(e, c))| (s, e, c))
            .collect();
        let mut freed: Vec<Range<u64>> = Vec::new();
        for (s, e, c) in runs {
            if c > 1 {
                self.0.insert(s, (e, c - 1));
                continue;
            }
            self.0.remove(&s);
            match freed.last_mut() {
                Some(last) if last.end == s => last.end = e,
                _ => freed.push(s..e),
            }
        }
        self.tidy(&r);
        freed
    }
}

/// One import mapped whole for the CPU, `len` bytes at `addr`: no access except where
/// handles have mapped their ranges. Unmapped with the import (`vkFreeMemory`).
#[derive(Debug)]
pub struct View {
    addr: usize,
    len: usize,
    open: Coverage,
}

impl View {
    /// Takes `[addr, addr+len)`, a new mapping of a whole import, as a view with no access
    /// anywhere yet, not inherited by `fork` (like gdrdrv's `VM_DONTCOPY` mappings).
    ///
    /// # Safety
    /// The mapping was just made, nothing has seen it, and the view owns it until the import
    /// is freed.
    pub unsafe fn new(addr: usize, len: usize) -> Result<View> {
        // SAFETY: the caller's contract: the mapping is ours and unused.
        unsafe { crate::sys::protect(addr, len, false) }?;
        crate::sys::dont_fork(addr, len)?;
        Ok(View {
            addr,
            len,
            open: Coverage::default(),
        })
    }

    /// Opens `r` (byte offsets in the allocation, page aligned, inside the view) for one more
    /// mapping; returns the address of byte `r.start`. Undoes itself on failure.
    pub fn open(&mut self, r: Range<u64>) -> Result<usize> {
        debug_assert!(r.end as usize <= self.len);
        let gaps = self.open.open(r.clone());
        for g in &gaps {
            // SAFETY: the gap lies inside this view's mapping; opening access takes nothing
            // away from anyone.
            if let Err(e) = unsafe { self.protect(g, true) } {
                let _ = self.close(r);
                return Err(e);
            }
        }
        Ok(self.addr + r.start as usize)
    }

    /// Closes `r` for one mapping (opened by [`View::open`]): the bytes no other mapping
    /// covers fault again. Every byte is closed even when an earlier part fails; the first
    /// failure is returned.
    pub fn close(&mut self, r: Range<u64>) -> Result<()> {
        let mut first = Ok(());
        for g in self.open.close(r) {
            // SAFETY: the gap lies inside this view, and no live mapping covers it any more:
            // its last handle was unmapped, so nothing may access it.
            let closed = unsafe { self.protect(&g, false) };
            if first.is_ok() {
                first = closed;
            }
        }
        first
    }

    /// The offset in the allocation of `addr`, an address inside this view.
    pub fn offset_of(&self, addr: usize) -> Option<u64> {
        let off = addr.checked_sub(self.addr)?;
        (off < self.len).then_some(off as u64)
    }

    /// # Safety
    /// `g` lies inside the view; when closing, nothing may access it any more.
    unsafe fn protect(&self, g: &Range<u64>, open: bool) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe {
            crate::sys::protect(
                self.addr + g.start as usize,
                (g.end - g.start) as usize,
                open,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(c: &Coverage) -> Vec<(u64, u64, u32)> {
        c.0.iter().map(|(&s, &(e, n))| (s, e, n)).collect()
    }

    #[test]
    fn opening_reports_only_what_was_uncovered() {
        let mut c = Coverage::default();
        assert_eq!(c.open(10..20), vec![10..20]);
        assert_eq!(c.open(10..20), Vec::<Range<u64>>::new());
        assert_eq!(c.open(5..25), vec![5..10, 20..25]);
        assert_eq!(runs(&c), vec![(5, 10, 1), (10, 20, 3), (20, 25, 1)]);
        assert_eq!(c.open(30..40), vec![30..40]);
        assert_eq!(c.open(0..50), vec![0..5, 25..30, 40..50]);
    }

    #[test]
    fn closing_reports_only_what_nothing_covers_any_more() {
        let mut c = Coverage::default();
        c.open(0..40);
        c.open(10..20);
        c.open(15..30);
        assert_eq!(c.close(0..40), vec![0..10, 30..40]);
        assert_eq!(runs(&c), vec![(10, 15, 1), (15, 20, 2), (20, 30, 1)]);
        assert_eq!(c.close(10..20), vec![10..15]);
        assert_eq!(runs(&c), vec![(15, 30, 1)], "equal neighbours join again");
        assert_eq!(c.close(15..30), vec![15..30]);
        assert!(c.0.is_empty());
    }

    #[test]
    fn many_ranges_open_and_close_back_to_nothing() {
        let mut c = Coverage::default();
        let page = 1u64 << 16;
        for i in 0..64 {
            assert_eq!(c.open(i * page..(i + 1) * page).len(), 1);
        }
        assert_eq!(runs(&c), vec![(0, 64 * page, 1)]);
        assert_eq!(c.open(0..64 * page), Vec::<Range<u64>>::new());
        for i in (0..64).rev() {
            assert!(c.close(i * page..(i + 1) * page).is_empty());
        }
        assert_eq!(c.close(0..64 * page), vec![0..64 * page]);
        assert!(c.0.is_empty());
    }

    #[test]
    fn a_view_faults_outside_its_open_ranges() {
        let page = crate::sys::page_size();
        let len = 8 * page;
        let addr = crate::sys::anonymous_pages(len).expect("anonymous pages") as usize;
        // SAFETY: just mapped, unused, and the view owns it until the test unmaps it.
        let mut v = unsafe { View::new(addr, len) }.unwrap();
        let p = |n: usize| (n * page) as u64;
        assert_eq!(v.open(p(2)..p(4)).unwrap(), addr + 2 * page);
        assert_eq!(v.open(p(3)..p(5)).unwrap(), addr + 3 * page);
        assert_eq!(v.offset_of(addr + 3 * page + 8), Some(p(3) + 8));
        assert_eq!(v.offset_of(addr + len), None);
        // Whether page `n` of the view is readable and writable, as /proc/self/maps says.
        let accessible = |n: usize| {
            let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
            let at = addr + n * page;
            maps.lines().any(|l| {
                let (range, rest) = l.split_once(' ').unwrap();
                let (s, e) = range.split_once('-').unwrap();
                let (s, e) = (
                    usize::from_str_radix(s, 16).unwrap(),
                    usize::from_str_radix(e, 16).unwrap(),
                );
                s <= at && at < e && rest.starts_with("rw")
            })
        };
        let open: Vec<bool> = (0..8).map(accessible).collect();
        assert_eq!(open, [false, false, true, true, true, false, false, false]);
        v.close(p(2)..p(4)).unwrap();
        let open: Vec<bool> = (0..8).map(accessible).collect();
        assert_eq!(open, [false, false, false, true, true, false, false, false]);
        v.close(p(3)..p(5)).unwrap();
        assert!((0..8).all(|n| !accessible(n)));
        // SAFETY: the test's own mapping, unused from here on.
        assert_eq!(unsafe { libc::munmap(addr as *mut _, len) }, 0);
    }
}
