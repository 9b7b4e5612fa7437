//! Interleaved timing: every method of a point runs one batch per round, rounds repeat (in
//! alternating order), and each method keeps its best and median per-call time. Interleaving
//! spreads frequency and noise drift evenly over the methods being compared.

use std::time::Instant;

/// Per-call times of one method at one point, in nanoseconds.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Fastest batch, per call.
    pub best_ns: f64,
    /// Median batch, per call.
    pub median_ns: f64,
}

/// How long to measure.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Rounds (batches per method).
    pub rounds: usize,
    /// Shortest batch, in nanoseconds.
    pub batch_ns: f64,
}

/// Times `methods` (each called with a call count, doing that many copies) interleaved.
pub fn measure(plan: Plan, methods: &mut [&mut dyn FnMut(usize)]) -> Vec<Sample> {
    // Calibrate: calls per batch so that a batch lasts at least `batch_ns` for every method.
    let mut calls = Vec::with_capacity(methods.len());
    for m in methods.iter_mut() {
        m(1); // warm up code, TLB and caches
        let mut k = 1usize;
        loop {
            let t = Instant::now();
            m(k);
            let ns = t.elapsed().as_nanos() as f64;
            if ns >= plan.batch_ns || k >= 1 << 26 {
                break;
            }
            let grow = if ns <= 0.0 {
                16.0
            } else {
                (plan.batch_ns / ns * 1.2).min(16.0)
            };
            k = ((k as f64) * grow.max(2.0)) as usize;
        }
        calls.push(k);
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(plan.rounds); methods.len()];
    for round in 0..plan.rounds {
        // Every other round runs the methods in reverse order, so that no method always
        // follows the same one (with the same target memory, a DRAM-bound copy right after
        // another method's measured 1-2% slower than the same copy run first).
        let order: Vec<usize> = if round % 2 == 0 {
            (0..methods.len()).collect()
        } else {
            (0..methods.len()).rev().collect()
        };
        for i in order {
            let m = &mut methods[i];
            // One untimed call first, so that the batch starts from this method's own cache
            // state rather than the previous method's (streaming stores after cached ones
            // would otherwise pay for evicting the other method's dirty lines).
            m(1);
            let t = Instant::now();
            m(calls[i]);
            times[i].push(t.elapsed().as_nanos() as f64 / calls[i] as f64);
        }
    }
    times
        .into_iter()
        .map(|mut v| {
            v.sort_by(|a, b| a.total_cmp(b));
            Sample {
                best_ns: v[0],
                median_ns: v[v.len() / 2],
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_per_method_and_slower_methods_measure_slower() {
        let spin = |iters: u64| {
            move |calls: usize| {
                for _ in 0..calls {
                    let mut x = 0u64;
                    for i in 0..iters {
                        x = std::hint::black_box(x.wrapping_add(i));
                    }
                    std::hint::black_box(x);
                }
            }
        };
        let (mut fast, mut slow) = (spin(10), spin(10_000));
        let plan = Plan {
            rounds: 5,
            batch_ns: 20_000.0,
        };
        let s = measure(plan, &mut [&mut fast, &mut slow]);
        assert_eq!(s.len(), 2);
        for x in &s {
            assert!(x.best_ns > 0.0 && x.best_ns <= x.median_ns);
        }
        assert!(s[1].best_ns > 10.0 * s[0].best_ns, "{s:?}");
    }
}
