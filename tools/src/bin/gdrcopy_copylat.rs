//! gdrcopy_copylat: latency of `gdr_copy_to_mapping` / `gdr_copy_from_mapping` (and, with
//! `-c`, `cuMemcpy`) for sizes 1, 2, 4, ... up to the buffer size, with upstream's flags and
//! table rows (`<test> \t <size> \t <median us> \t <min us>`).

use gdrcopy_tools::cli::{self, CliError, GpuOpts};
use gdrcopy_tools::gdr::{GDR_MAPPING_TYPE_CACHING, GPU_PAGE_SIZE};
use gdrcopy_tools::gpumem::{round_up, HostBuffer, ALLOC_CHOICES};
use gdrcopy_tools::output::{fmt_ptr, Progress};
use gdrcopy_tools::tool::{self, Fatal, Parsed};
use std::process::ExitCode;
use std::time::Instant;

const MAX_BUCKETS: usize = 100;
const DEFAULT_SIZE: usize = 1 << 24;

struct Opts {
    gpu: GpuOpts,
    write_iters: usize,
    read_iters: usize,
    cumemcpy: bool,
    cold_cache: bool,
}

fn usage(prog: &str) -> String {
    format!(
        "Usage: {prog} [-h][-c][-s <size>][-d <gpu>][-w <iters>][-r <iters>][-a <fn>][-M <mapping_type>][-C]\n\
         \n\
         Options:\n\
         \x20  -h              Print this help text\n\
         \x20  -c              Also run cuMemcpy (default: no)\n\
         \x20  -s <size>       Buffer allocation size (default: {DEFAULT_SIZE})\n\
         \x20  -d <gpu>        GPU ID (default: 0)\n\
         \x20  -w <iters>      Number of write iterations (default: 10000)\n\
         \x20  -r <iters>      Number of read iterations (default: 100)\n\
         \x20  -a <fn>         GPU buffer allocation function (default: cuMemAlloc)\n\
         \x20                      Choices: {ALLOC_CHOICES}\n\
         \x20  -M <mapping_type>   Request mapping type (choices: default, wc, cache, device)\n\
         \x20  -C              Use cold cache (default: no)\n\
         \x20                      This option takes effect when cache mapping is used such as on Grace-Hopper.\n"
    )
}

/// Rounds an iteration count above 100 up to a multiple of 100, warning on stderr as upstream does.
fn round_iters(name: &str, iters: usize) -> usize {
    if iters > MAX_BUCKETS && !iters.is_multiple_of(MAX_BUCKETS) {
        let new = iters + MAX_BUCKETS - iters % MAX_BUCKETS;
        eprintln!("WARNING: {name} is not a multiple of {MAX_BUCKETS}. Increasing {name} from {iters} to {new}.");
        new
    } else {
        iters
    }
}

fn parse(args: &[String]) -> Result<Parsed<Opts>, CliError> {
    let mut o = Opts {
        gpu: GpuOpts::new(DEFAULT_SIZE),
        write_iters: 10000,
        read_iters: 100,
        cumemcpy: false,
        cold_cache: false,
    };
    for opt in cli::getopt(args, "s:d:w:r:a:M:cCh")? {
        if o.gpu.take(&opt)? {
            continue;
        }
        match opt.name {
            'w' => o.write_iters = cli::count_arg(&opt)?,
            'r' => o.read_iters = cli::count_arg(&opt)?,
            'c' => o.cumemcpy = true,
            'C' => o.cold_cache = true,
            'h' => return Ok(Parsed::Help),
            c => return Err(CliError::Unknown(c)),
        }
    }
    o.gpu.check()?;
    Ok(Parsed::Run(o))
}

/// Runs `bucket(k)` (which times `k` calls and returns the total in microseconds) for
/// `min(iters, 100)` buckets of `iters / buckets` calls; returns (median, min) of the
/// per-call means, in microseconds, as upstream does.
fn measure(
    iters: usize,
    mut bucket: impl FnMut(usize) -> Result<f64, Fatal>,
) -> Result<(f64, f64), Fatal> {
    let buckets = iters.min(MAX_BUCKETS);
    let per = iters / buckets;
    let mut lat = Vec::with_capacity(buckets);
    for _ in 0..buckets {
        lat.push(bucket(per)? / per as f64);
    }
    lat.sort_by(|a, b| a.total_cmp(b));
    Ok((lat[buckets / 2], lat[0]))
}

fn sizes_up_to(size: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut n = 1usize;
    while n <= size {
        v.push(n);
        n <<= 1;
    }
    v
}

fn run(o: Opts) -> Result<(), Fatal> {
    let size = round_up(o.gpu.size, GPU_PAGE_SIZE);
    let write_iters = round_iters("num_write_iters", o.write_iters);
    let read_iters = round_iters("num_read_iters", o.read_iters);
    let cuda = tool::load_cuda()?;
    let (dev, _ctx) = tool::select_gpu(&cuda, o.gpu.dev_id)?;
    let gdr = tool::load_gdr_for(&cuda, dev)?;
    let dbuf = tool::alloc_reported(&cuda, o.gpu.alloc, size, dev)?;
    let d_a = dbuf.ptr();
    println!("gpu alloc fn: {}", o.gpu.alloc.name());

    let mut src = HostBuffer::alloc(&cuda, size)?;
    tool::fill_walking_bit(src.as_mut_slice());
    let mut dst = HostBuffer::alloc(&cuda, size)?;
    let sizes = sizes_up_to(size);
    let mut progress = Progress::new("gdrcopy_copylat");

    if o.cumemcpy {
        let (s_addr, h_addr) = (src.addr(), dst.addr());
        for (name, iters, h2d) in [
            ("cuMemcpy_H2D", write_iters, true),
            ("cuMemcpy_D2H", read_iters, false),
        ] {
            println!();
            println!("{name} num iters for each size: {iters}");
            println!("Test \t\t Size(B) \t Median Time(us) \t Min. Time(us)");
            for (i, &n) in sizes.iter().enumerate() {
                progress.update(&format!("{name} {n} B"), i, sizes.len());
                let (med, min) = measure(iters, |per| {
                    let (dst_addr, src_addr) = if h2d { (d_a, s_addr) } else { (h_addr, d_a) };
                    let t = Instant::now();
                    for _ in 0..per {
                        // SAFETY: both buffers hold `size` >= n bytes for the whole loop.
                        unsafe { cuda.memcpy(dst_addr, src_addr, n)? };
                    }
                    Ok(tool::elapsed_us(t))
                })?;
                progress.clear();
                println!("{name} \t {n:8} \t {med:11.4} \t {min:11.4}");
            }
        }
        println!();
    }
    println!();

    let session = tool::open_gdr(&gdr)?;
    let pin = session
        .pin(d_a, size)
        .map_err(|e| tool::pin_error(&session, o.gpu.alloc, e))?;
    let map = pin.map(o.gpu.map_flag)?;
    let (info, off) = tool::report_mapping(&pin, &map, d_a)?;
    println!(
        "user-space pointer: {}",
        fmt_ptr(map.ptr() as u64 + off as u64)
    );
    println!(
        "use cold cache: {}",
        if o.cold_cache { "yes" } else { "no" }
    );
    if o.cold_cache && info.mapping_type != GDR_MAPPING_TYPE_CACHING {
        return Err(Fatal(
            "Cold cache has no effect on other mappings except cache mapping".into(),
        ));
    }

    println!();
    println!("gdr_copy_to_mapping num iters for each size: {write_iters}");
    println!("WARNING: Measuring the API invocation overhead as observed by the CPU. Data might not be ordered all the way to the GPU internal visibility.");
    println!("Test \t\t\t Size(B) \t Median Time(us) \t Min. Time(us)");
    for (i, &n) in sizes.iter().enumerate() {
        progress.update(&format!("gdr_copy_to_mapping {n} B"), i, sizes.len());
        let (med, min) = measure(write_iters, |per| {
            timed(&cuda, o.cold_cache, d_a, n, per, || {
                map.copy_to(off, &src.as_slice()[..n])?;
                Ok(())
            })
        })?;
        progress.clear();
        println!("gdr_copy_to_mapping \t {n:8} \t {med:11.4} \t {min:11.4}");
    }

    println!();
    println!("gdr_copy_from_mapping num iters for each size: {read_iters}");
    println!("Test \t\t\t Size(B) \t Median Time(us) \t Min. Time(us)");
    for (i, &n) in sizes.iter().enumerate() {
        progress.update(&format!("gdr_copy_from_mapping {n} B"), i, sizes.len());
        let (med, min) = measure(read_iters, |per| {
            timed(&cuda, o.cold_cache, d_a, n, per, || {
                map.copy_from(off, &mut dst.as_mut_slice()[..n])?;
                Ok(())
            })
        })?;
        progress.clear();
        println!("gdr_copy_from_mapping \t {n:8} \t {med:11.4} \t {min:11.4}");
    }
    progress.clear();

    println!("unmapping buffer");
    map.unmap()?;
    println!("unpinning buffer");
    pin.unpin()?;
    println!("closing gdrdrv");
    session.close()?;
    Ok(())
}

/// Times `per` copies, in microseconds. With a cold cache, the GPU overwrites the range
/// (`cuMemsetD8`, synchronous) before each copy, and the memsets' own cost is measured
/// separately and subtracted, as upstream does.
fn timed(
    cuda: &gdrcopy_tools::cuda::Cuda,
    cold_cache: bool,
    d_a: u64,
    n: usize,
    per: usize,
    mut copy: impl FnMut() -> Result<(), Fatal>,
) -> Result<f64, Fatal> {
    let t = Instant::now();
    for _ in 0..per {
        if cold_cache {
            // SAFETY: d_a is device memory of at least n bytes.
            unsafe { cuda.memset_d8(d_a, 0, n)? };
        }
        copy()?;
    }
    let total = tool::elapsed_us(t);
    if !cold_cache {
        return Ok(total);
    }
    let t = Instant::now();
    for _ in 0..per {
        // SAFETY: as above.
        unsafe { cuda.memset_d8(d_a, 0, n)? };
    }
    Ok(total - tool::elapsed_us(t))
}

fn main() -> ExitCode {
    tool::main_with(parse, usage, run)
}
