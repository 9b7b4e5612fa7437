//! gdrcopy_apiperf: mean latency of pin, map, get_info, unmap and unpin for pin sizes
//! 64 KiB, 128 KiB, ... up to the buffer size, with upstream's flags and data lines
//! (`<size>\t<pin>\t<map>\t<info>\t<unmap>\t<unpin>`, microseconds).

use gdrcopy_tools::cli::{self, CliError, GpuOpts};
use gdrcopy_tools::gdr::GPU_PAGE_SIZE;
use gdrcopy_tools::gpumem::{round_up, ALLOC_CHOICES};
use gdrcopy_tools::output::Progress;
use gdrcopy_tools::tool::{self, Fatal, Parsed};
use std::process::ExitCode;
use std::time::Instant;

const DEFAULT_SIZE: usize = 1 << 24;
const NUM_BINS: usize = 10;

struct Opts {
    gpu: GpuOpts,
    iters: usize,
    warmup: usize,
}

fn usage(prog: &str) -> String {
    format!(
        "Usage: {prog} [-h][-s <max-size>][-d <gpu>][-n <iters>][-w <iters>][-a <fn>][-M <mapping_type>]\n\
         \n\
         Options:\n\
         \x20  -h              Print this help text\n\
         \x20  -s <max-size>   Max buffer size to benchmark (default: {DEFAULT_SIZE})\n\
         \x20  -d <gpu>        GPU ID (default: 0)\n\
         \x20  -n <iters>      Number of benchmark iterations (default: 100)\n\
         \x20  -w <iters>      Number of warm-up iterations (default: 10)\n\
         \x20  -a <fn>         GPU buffer allocation function (default: cuMemAlloc)\n\
         \x20                      Choices: {ALLOC_CHOICES}\n\
         \x20  -M <mapping_type>   Request mapping type (choices: default, wc, cache, device)\n"
    )
}

fn parse(args: &[String]) -> Result<Parsed<Opts>, CliError> {
    let mut o = Opts {
        gpu: GpuOpts::new(DEFAULT_SIZE),
        iters: 100,
        warmup: 10,
    };
    for opt in cli::getopt(args, "s:d:n:w:a:M:h")? {
        if o.gpu.take(&opt)? {
            continue;
        }
        match opt.name {
            'n' => o.iters = cli::count_arg(&opt)?,
            'w' => o.warmup = cli::size_arg(&opt)?,
            'h' => return Ok(Parsed::Help),
            c => return Err(CliError::Unknown(c)),
        }
    }
    o.gpu.check()?;
    Ok(Parsed::Run(o))
}

/// Counts `samples` into `NUM_BINS` equal bins spanning [min, max]; returns (lower, upper,
/// count) per bin.
fn histogram(samples: &[f64]) -> Vec<(f64, f64, usize)> {
    let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let max = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (min, max) = if min.is_finite() {
        (min, max)
    } else {
        (0.0, 0.0)
    };
    let width = (max - min) / NUM_BINS as f64;
    let mut counts = [0usize; NUM_BINS];
    for &s in samples {
        let i = if width > 0.0 {
            ((s - min) / width) as usize
        } else {
            0
        };
        counts[i.min(NUM_BINS - 1)] += 1;
    }
    (0..NUM_BINS)
        .map(|j| {
            (
                min + width * j as f64,
                min + width * (j + 1) as f64,
                counts[j],
            )
        })
        .collect()
}

fn run(o: Opts) -> Result<(), Fatal> {
    let size = round_up(o.gpu.size, GPU_PAGE_SIZE);
    let cuda = tool::load_cuda()?;
    let (dev, _ctx) = tool::select_gpu(&cuda, o.gpu.dev_id)?;
    let gdr = tool::load_gdr_for(&cuda, dev)?;
    let dbuf = tool::alloc_reported(&cuda, o.gpu.alloc, size, dev)?;
    let d_a = dbuf.ptr();

    let session = tool::open_gdr(&gdr)?;
    let mut sizes = Vec::new();
    let mut n = GPU_PAGE_SIZE;
    while n <= size {
        sizes.push(n);
        n <<= 1;
    }
    let mut progress = Progress::new("gdrcopy_apiperf");
    for (k, &n) in sizes.iter().enumerate() {
        progress.update(&format!("{n} B"), k, sizes.len());
        for _ in 0..o.warmup {
            let pin = session
                .pin(d_a, n)
                .map_err(|e| tool::pin_error(&session, o.gpu.alloc, e))?;
            let map = pin.map(o.gpu.map_flag)?;
            pin.info()?;
            map.unmap()?;
            pin.unpin()?;
        }
        let mut sums = [0.0f64; 5];
        let mut pin_lat = Vec::with_capacity(o.iters);
        for _ in 0..o.iters {
            let t = Instant::now();
            let pin = session
                .pin(d_a, n)
                .map_err(|e| tool::pin_error(&session, o.gpu.alloc, e))?;
            let us = tool::elapsed_us(t);
            sums[0] += us;
            pin_lat.push(us);
            let t = Instant::now();
            let map = pin.map(o.gpu.map_flag)?;
            sums[1] += tool::elapsed_us(t);
            let t = Instant::now();
            pin.info()?;
            sums[2] += tool::elapsed_us(t);
            let t = Instant::now();
            map.unmap()?;
            sums[3] += tool::elapsed_us(t);
            let t = Instant::now();
            pin.unpin()?;
            sums[4] += tool::elapsed_us(t);
        }
        let m: Vec<f64> = sums.iter().map(|s| s / o.iters as f64).collect();
        progress.clear();
        println!("Size(B)\tpin.Time(us)\tmap.Time(us)\tget_info.Time(us)\tunmap.Time(us)\tunpin.Time(us)");
        println!(
            "{n}\t{:.6}\t{:.6}\t{:.6}\t{:.6}\t{:.6}",
            m[0], m[1], m[2], m[3], m[4]
        );
        println!("Histogram of gdr_pin_buffer latency for {n} bytes");
        for (lo, hi, count) in histogram(&pin_lat) {
            println!("[{lo:.6}\t-\t{hi:.6}]\t{count}");
        }
        println!();
    }
    progress.clear();
    println!("closing gdrdrv");
    session.close()?;
    Ok(())
}

fn main() -> ExitCode {
    tool::main_with(parse, usage, run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_counts_every_sample_once() {
        let h = histogram(&[1.0, 2.0, 3.0, 10.0, 10.0]);
        assert_eq!(h.len(), NUM_BINS);
        assert_eq!(h.iter().map(|b| b.2).sum::<usize>(), 5);
        assert_eq!(h[0].2, 1);
        assert_eq!(h[9].2, 2);
        assert_eq!(h[0].0, 1.0);
        assert_eq!(h[9].1, 10.0);
        let flat = histogram(&[5.0; 4]);
        assert_eq!(flat[0].2, 4);
    }
}
