//! Interleaved timing: every method of a point runs one batch per round, rounds repeat, and
//! each method keeps its best and median per-call time. Interleaving spreads frequency and
//! noise drift evenly over the methods being compared.

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
    for _ in 0..plan.rounds {
        for (i, m) in methods.iter_mut().enumerate() {
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
