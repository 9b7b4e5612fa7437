//! Host buffers, the sizes swept, timing, the memory regions copied to, and `measure`.

use crate::opts::Opts;
use crate::report::Row;
use gdrapi_bench::copiers::Copier;
use gdrapi_bench::error::{Error, Result};
use gdrapi_bench::pattern;
use gdrapi_bench::verify::View;
use std::time::Instant;

/// A host buffer aligned to 4096 bytes.
pub(crate) struct HostBuf {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl HostBuf {
    pub(crate) fn new(len: usize, seed: u64) -> Result<HostBuf> {
        let layout = std::alloc::Layout::from_size_align(len.max(1), 4096)
            .map_err(|e| Error::Invalid(e.to_string()))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            return Err(Error::Invalid(format!("cannot allocate {len} host bytes")));
        }
        // SAFETY: `ptr` is a fresh allocation of `len` bytes, exclusively ours.
        pattern::fill(unsafe { std::slice::from_raw_parts_mut(ptr, len) }, seed);
        Ok(HostBuf { ptr, layout })
    }
}

impl Drop for HostBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

pub(crate) fn sizes(max: usize) -> Vec<usize> {
    std::iter::successors(Some(1usize), |&s| s.checked_mul(2))
        .take_while(|&s| s <= max)
        .collect()
}

/// Best time per call of `f`, in ns: one warm-up call, then `reps` samples of enough calls to
/// last `sample_ms`.
fn time_best(reps: usize, sample_ms: f64, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    f();
    let one = t.elapsed().as_secs_f64().max(1e-9);
    let iters = ((sample_ms * 1e-3 / one).ceil() as usize).clamp(1, 1_000_000);
    let mut best = f64::INFINITY;
    for _ in 0..reps {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e9 / iters as f64);
    }
    best
}

/// The memory copies go to and come from: `len` bytes at `ptr` (the BAR mapping, or CUDA host
/// memory with `--host-wc`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Region {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
}

impl Region {
    /// The region of `len` bytes at `ptr`.
    ///
    /// # Safety
    /// `ptr..ptr + len` must stay a readable and writable mapping, touched by nothing but this
    /// program's copies and checks, for as long as the region is used.
    pub(crate) unsafe fn new(ptr: *mut u8, len: usize) -> Region {
        Region { ptr, len }
    }
}

/// Checks, then times, method `c` at every size up to `--max`, both directions, on `mem`.
pub(crate) fn measure(
    c: &dyn Copier,
    mem: Region,
    view: &dyn View,
    o: &Opts,
    host: &HostBuf,
    rows: &mut Vec<Row>,
) -> Result<()> {
    if o.max > mem.len {
        return Err(Error::Invalid(format!(
            "--max {} past the {} bytes of the memory",
            o.max, mem.len
        )));
    }
    let dev = mem.ptr;
    for &n in &sizes(o.max) {
        for to in [true, false] {
            if !c.supports(to, dev as usize, n) {
                continue;
            }
            // Check this exact call once against the other view before timing it.
            let seed = n as u64 * 31 + to as u64;
            if to {
                let src = pattern::bytes(n, seed);
                // SAFETY: n <= max <= the region's bytes (checked above), live by its
                // contract; `src` holds n bytes.
                unsafe { c.to_mapping(dev, src.as_ptr(), n) };
                let mut got = vec![0u8; n];
                view.read(0, &mut got)?;
                if let Some(i) = pattern::first_diff(&got, &src) {
                    return Err(Error::Mismatch {
                        what: format!("{} to {n}", c.name()),
                        offset: i,
                        expected: src[i],
                        found: got[i],
                    });
                }
            } else {
                let data = pattern::bytes(n, seed);
                view.write(0, &data)?;
                let mut got = vec![0u8; n];
                // SAFETY: as above, `got` holds n bytes.
                unsafe { c.from_mapping(got.as_mut_ptr(), dev, n) };
                if let Some(i) = pattern::first_diff(&got, &data) {
                    return Err(Error::Mismatch {
                        what: format!("{} from {n}", c.name()),
                        offset: i,
                        expected: data[i],
                        found: got[i],
                    });
                }
            }
            let ns = time_best(o.reps, o.sample_ms, || {
                // SAFETY: the host buffer and the region both hold at least `max` bytes.
                unsafe {
                    if to {
                        c.to_mapping(dev, host.ptr, n)
                    } else {
                        c.from_mapping(host.ptr, dev, n)
                    }
                }
            });
            rows.push(Row {
                method: c.name(),
                dir: if to { "to" } else { "from" },
                size: n,
                ns,
            });
        }
    }
    Ok(())
}
