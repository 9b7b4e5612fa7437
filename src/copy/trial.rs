//! Choosing between two store kernels per size class, by timing the process's own copies.
//!
//! Which store writes fastest through a GPU BAR depends on the host, not only on the CPU
//! (PERFORMANCE.md: `MOVDIR64B` ahead of AVX-512 stores on one host, well behind on another).
//! So where the CPU runs both and no family is forced, the first copies of each size class
//! alternate between the two kernels, each one timed from its start to a full fence after its
//! last store. Once each kernel has made [`TRIALS`] copies of a class, the class keeps the
//! kernel with the lower best time per byte: the first, unless the second is faster by more
//! than 1/[`MARGIN`]. Every trial is a real, complete copy; only its speed differs.

// Off x86-64 only the tests use the trials; `TIMED_MIN` is every target's.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use core::sync::atomic::{AtomicU32, AtomicU8, Ordering};

/// The smallest store that is timed. Below it, copied back to back, `MOVDIR64B` is as fast as
/// vector stores or faster through every BAR measured, while a single copy timed to a full
/// fence (a trial) can say otherwise; from here on `MOVDIR64B` is behind through some BARs,
/// and a trial's error costs less than a fixed choice's (PERFORMANCE.md).
pub(crate) const TIMED_MIN: usize = 8 << 10;

/// Size classes of timed stores: one for each factor of 4 from [`TIMED_MIN`] up to 512 KiB,
/// then 512 KiB and more.
pub(crate) const CLASSES: usize = 4;

/// Timed copies of each kernel in a class before the class decides.
pub(crate) const TRIALS: u32 = 16;

/// The second kernel must be faster than the first by more than 1/`MARGIN` to be kept.
pub(crate) const MARGIN: u64 = 128;

/// The class of an `n`-byte store (`n >= TIMED_MIN`; smaller sizes fall in class 0).
#[inline(always)]
pub(crate) fn class(n: usize) -> usize {
    let log2 = (usize::BITS - 1 - (n | TIMED_MIN).leading_zeros()) as usize;
    ((log2 - TIMED_MIN.trailing_zeros() as usize) / 2).min(CLASSES - 1)
}

/// The sizes of class `c`, for log lines: its first size and its last, `None` when unbounded.
pub(crate) fn class_range(c: usize) -> (usize, Option<usize>) {
    let first = TIMED_MIN << (2 * c);
    let last = (c + 1 < CLASSES).then(|| (TIMED_MIN << (2 * (c + 1))) - 1);
    (first, last)
}

/// Which of the two kernels a class uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pick {
    First,
    Second,
}

/// A class's verdict from the best time per byte of each kernel (in any one unit).
pub(crate) fn verdict(first: u32, second: u32) -> Pick {
    if u64::from(second) * MARGIN < u64::from(first) * (MARGIN - 1) {
        Pick::Second
    } else {
        Pick::First
    }
}

/// Start and end readings of a copy's duration, in ticks of any fixed rate.
pub(crate) trait Clock {
    /// A reading taken after every earlier instruction and before any later one starts.
    fn start(&self) -> u64;
    /// A reading taken once every earlier store is globally visible.
    fn stop(&self) -> u64;
}

/// The time-stamp counter, fenced: `LFENCE; RDTSC; LFENCE` to start, `MFENCE; LFENCE; RDTSC`
/// to stop (the sequence that Intel's manual gives for reading the counter only after earlier
/// stores are visible). The full fence waits for the copy's write-combining buffers to drain.
#[cfg(target_arch = "x86_64")]
pub(crate) struct Tsc;

#[cfg(target_arch = "x86_64")]
impl Clock for Tsc {
    #[inline(always)]
    fn start(&self) -> u64 {
        use core::arch::x86_64::{_mm_lfence, _rdtsc};
        // SAFETY: LFENCE (SSE2) and RDTSC are part of every x86-64 CPU; neither touches memory.
        unsafe {
            _mm_lfence();
            let t = _rdtsc();
            _mm_lfence();
            t
        }
    }

    #[inline(always)]
    fn stop(&self) -> u64 {
        use core::arch::x86_64::{_mm_lfence, _mm_mfence, _rdtsc};
        // SAFETY: as in `start`; MFENCE is SSE2 too.
        unsafe {
            _mm_mfence();
            _mm_lfence();
            _rdtsc()
        }
    }
}

/// A class that has just decided: what it picked and the best times behind the pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decision {
    pub class: usize,
    pub pick: Pick,
    /// Best ticks per 4 KiB of the first kernel, then of the second.
    pub best: [u32; 2],
}

/// The trials of every class: the decisions, in one word that every copy reads, and the
/// samples behind them. Safe to share between threads: concurrent trials only add samples.
pub(crate) struct Trials {
    /// Bit `c`: class `c` has decided; bit `CLASSES + c`: it picked the second kernel.
    state: AtomicU8,
    /// Copies of each class started while it was undecided; they pick the kernel (see
    /// [`Trials::run`]).
    started: [AtomicU32; CLASSES],
    /// Timed copies of each class, per kernel.
    timed: [[AtomicU32; 2]; CLASSES],
    /// Best ticks per 4 KiB of each class, per kernel (`u32::MAX` before the first sample).
    best: [[AtomicU32; 2]; CLASSES],
}

impl Trials {
    /// Every class undecided, no samples.
    pub(crate) const fn new() -> Trials {
        Trials {
            state: AtomicU8::new(0),
            started: [const { AtomicU32::new(0) }; CLASSES],
            timed: [const { [AtomicU32::new(0), AtomicU32::new(0)] }; CLASSES],
            best: [const { [AtomicU32::new(u32::MAX), AtomicU32::new(u32::MAX)] }; CLASSES],
        }
    }

    /// Class `c`'s pick, or `None` while its trials run.
    #[inline(always)]
    pub(crate) fn decided(&self, c: usize) -> Option<Pick> {
        let s = self.state.load(Ordering::Relaxed);
        if s & (1 << c) == 0 {
            None
        } else if s & (1 << (CLASSES + c)) != 0 {
            Some(Pick::Second)
        } else {
            Some(Pick::First)
        }
    }

    /// Runs one trial copy of `n` bytes in class `c`, timed with `clock`: `first` or `second`
    /// in the order 1 2 2 1 1 2 2 1 (the low bit of the count's Gray code), so that a caller
    /// whose sizes alternate still gives each kernel both sizes. Returns the class's decision
    /// when this copy's sample completed it.
    #[cold]
    #[inline(never)]
    pub(crate) fn run(
        &self,
        c: usize,
        n: usize,
        clock: &impl Clock,
        first: impl FnOnce(),
        second: impl FnOnce(),
    ) -> Option<Decision> {
        let count = self.started[c].fetch_add(1, Ordering::Relaxed);
        let k = ((count ^ (count >> 1)) & 1) as usize;
        let t0 = clock.start();
        if k == 0 {
            first()
        } else {
            second()
        }
        let ticks = clock.stop().saturating_sub(t0);
        let per_4k = (u128::from(ticks) * 4096 / n.max(1) as u128).min(u128::from(u32::MAX));
        self.best[c][k].fetch_min(per_4k as u32, Ordering::Relaxed);
        let mine = self.timed[c][k].fetch_add(1, Ordering::Relaxed) + 1;
        let other = self.timed[c][1 - k].load(Ordering::Relaxed);
        if mine >= TRIALS && other >= TRIALS {
            self.decide(c)
        } else {
            None
        }
    }

    /// Records class `c`'s verdict, once; the call that records it gets the decision.
    fn decide(&self, c: usize) -> Option<Decision> {
        let best = [
            self.best[c][0].load(Ordering::Relaxed),
            self.best[c][1].load(Ordering::Relaxed),
        ];
        let pick = verdict(best[0], best[1]);
        let bits = (1 << c)
            | if pick == Pick::Second {
                1 << (CLASSES + c)
            } else {
                0
            };
        let before = self.state.fetch_or(bits, Ordering::Relaxed);
        (before & (1 << c) == 0).then_some(Decision {
            class: c,
            pick,
            best,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn classes_split_sizes_by_factors_of_four() {
        let cases = [
            (8 << 10, 0),
            ((32 << 10) - 1, 0),
            (32 << 10, 1),
            ((128 << 10) - 1, 1),
            (128 << 10, 2),
            ((512 << 10) - 1, 2),
            (512 << 10, 3),
            (1 << 30, 3),
            (usize::MAX, 3),
        ];
        for (n, c) in cases {
            assert_eq!(class(n), c, "{n}");
        }
        for c in 0..CLASSES {
            let (first, last) = class_range(c);
            assert_eq!(class(first), c);
            if let Some(last) = last {
                assert_eq!(class(last), c);
                assert_eq!(class(last + 1), c + 1);
            }
        }
        assert_eq!(class_range(CLASSES - 1), (512 << 10, None));
    }

    #[test]
    fn the_second_kernel_needs_more_than_the_margin() {
        assert_eq!(verdict(1280, 1280), Pick::First);
        assert_eq!(verdict(1280, 1270), Pick::First, "exactly 1/128 faster");
        assert_eq!(verdict(1280, 1269), Pick::Second);
        assert_eq!(verdict(1000, 2000), Pick::First);
        assert_eq!(verdict(u32::MAX, u32::MAX - (u32::MAX / 64)), Pick::Second);
    }

    /// A clock that copies advance by the ticks they are meant to take.
    struct Fake(Cell<u64>);

    impl Clock for Fake {
        fn start(&self) -> u64 {
            self.0.get()
        }
        fn stop(&self) -> u64 {
            self.0.get()
        }
    }

    /// Runs copies of `n` bytes in its class until it decides, the first kernel taking
    /// `first(i)` ticks for its i-th copy and the second `second(i)`; returns the decision and
    /// how many copies each kernel made.
    fn run_until_decided(
        t: &Trials,
        n: usize,
        first: impl Fn(u64) -> u64,
        second: impl Fn(u64) -> u64,
    ) -> (Decision, [u64; 2]) {
        run_sizes_until_decided(t, &[n], |_, i| first(i), |_, i| second(i))
    }

    /// [`run_until_decided`] with copies of `sizes` in turn (all of one class), each kernel's
    /// ticks a function of the size and its copy count.
    fn run_sizes_until_decided(
        t: &Trials,
        sizes: &[usize],
        first: impl Fn(usize, u64) -> u64,
        second: impl Fn(usize, u64) -> u64,
    ) -> (Decision, [u64; 2]) {
        let clock = Fake(Cell::new(0));
        let made = [Cell::new(0u64), Cell::new(0u64)];
        let c = class(sizes[0]);
        for &n in sizes.iter().cycle().take(1000) {
            assert_eq!(class(n), c);
            assert_eq!(t.decided(c), None);
            let run = |k: usize, ticks: &dyn Fn(usize, u64) -> u64| {
                clock.0.set(clock.0.get() + ticks(n, made[k].get()));
                made[k].set(made[k].get() + 1);
            };
            let d = t.run(c, n, &clock, || run(0, &first), || run(1, &second));
            if let Some(d) = d {
                return (d, [made[0].get(), made[1].get()]);
            }
        }
        panic!("class {c} never decided");
    }

    #[test]
    fn a_class_alternates_then_keeps_the_faster_kernel() {
        let t = Trials::new();
        // 16 KiB copies: the first kernel 10000 ticks, the second 9000 with one slow outlier.
        let n = 16 << 10;
        let (d, made) =
            run_until_decided(&t, n, |_| 10_000, |i| if i == 3 { 99_000 } else { 9000 });
        assert_eq!(made, [u64::from(TRIALS), u64::from(TRIALS)]);
        assert_eq!(
            d,
            Decision {
                class: 0,
                pick: Pick::Second,
                best: [10_000 * 4096 / n as u32, 9000 * 4096 / n as u32]
            }
        );
        assert_eq!(t.decided(0), Some(Pick::Second));
        for c in 1..CLASSES {
            assert_eq!(t.decided(c), None, "class {c}");
        }
    }

    #[test]
    fn best_times_are_per_byte_and_each_class_decides_alone() {
        let t = Trials::new();
        // 1 MiB: the second kernel 20 % slower, the first once interrupted.
        let (d, _) = run_until_decided(
            &t,
            1 << 20,
            |i| if i == 0 { 10_000_000 } else { 100_000 },
            |_| 120_000,
        );
        assert_eq!(d.pick, Pick::First);
        assert_eq!(
            d.best,
            [100_000 * 4096 / (1 << 20), 120_000 * 4096 / (1 << 20)]
        );
        // 100 KiB in the same trials: the second kernel 2 % faster.
        let (d, _) = run_until_decided(&t, 100 << 10, |_| 50_000, |_| 49_000);
        assert_eq!((d.class, d.pick), (1, Pick::Second));
        // A tie keeps the first kernel.
        let (d, _) = run_until_decided(&t, 300 << 10, |_| 70_000, |_| 70_000);
        assert_eq!((d.class, d.pick), (2, Pick::First));
        assert_eq!(t.decided(3), Some(Pick::First));
        assert_eq!(t.decided(1), Some(Pick::Second));
        assert_eq!(t.decided(2), Some(Pick::First));
        assert_eq!(t.decided(0), None);
    }

    #[test]
    fn sizes_that_alternate_reach_both_kernels() {
        let t = Trials::new();
        // Two kernels of equal speed, 100 ticks a call plus one a byte: were the kernels picked
        // by turns, the second would get every 30 000-byte copy and look faster per byte.
        let cost = |n: usize, _| 100 + n as u64;
        let (d, made) = run_sizes_until_decided(&t, &[10_000, 30_000], cost, cost);
        assert_eq!(made, [u64::from(TRIALS), u64::from(TRIALS)]);
        assert_eq!(d.best[0], d.best[1]);
        assert_eq!(d.pick, Pick::First);
    }

    #[test]
    fn concurrent_trials_decide_once() {
        struct Zero;
        impl Clock for Zero {
            fn start(&self) -> u64 {
                0
            }
            fn stop(&self) -> u64 {
                0
            }
        }
        let t = Trials::new();
        let copies = AtomicU32::new(0);
        let decisions = AtomicU32::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..100 {
                        let bump = || {
                            copies.fetch_add(1, Ordering::Relaxed);
                        };
                        match t.decided(2) {
                            Some(_) => bump(),
                            None => {
                                if t.run(2, 300 << 10, &Zero, bump, bump).is_some() {
                                    decisions.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                    }
                });
            }
        });
        assert_eq!(
            copies.load(Ordering::Relaxed),
            400,
            "every call copied once"
        );
        assert_eq!(decisions.load(Ordering::Relaxed), 1);
        assert_eq!(t.decided(2), Some(Pick::First));
    }
}
