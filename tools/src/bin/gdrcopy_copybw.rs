//! gdrcopy_copybw: bandwidth of `gdr_copy_to_mapping` / `gdr_copy_from_mapping`, with
//! upstream's flags and result lines (`write BW: <x>MB/s`, `read BW: <x>MB/s`, MB = MiB).

use gdrcopy_tools::cli::{self, CliError, GpuOpts};
use gdrcopy_tools::gdr::GPU_PAGE_SIZE;
use gdrcopy_tools::gpumem::{round_up, DeviceBuffer, HostBuffer, ALLOC_CHOICES};
use gdrcopy_tools::output::{fmt_g, fmt_ptr, Progress};
use gdrcopy_tools::tool::{self, Fatal, Parsed};
use std::process::ExitCode;
use std::time::Instant;

struct Opts {
    gpu: GpuOpts,
    copy_sizes: Vec<usize>,
    offset: usize,
    write_iters: usize,
    read_iters: usize,
}

const DEFAULT_SIZE: usize = 128 * 1024;

fn usage(prog: &str) -> String {
    format!(
        "Usage: {prog} [-h][-s <size>][-c <size>][-o <offset>][-l][-d <gpu>][-w <iters>][-r <iters>][-a <fn>][-M <mapping_type>]\n\
         \n\
         Options:\n\
         \x20  -h              Print this help text\n\
         \x20  -s <size>       Buffer allocation size (default: {DEFAULT_SIZE})\n\
         \x20  -c <size>       Copy size (default: the -s size); with -l, the upper bound of the copy sizes\n\
         \x20  -o <offset>     Copy offset, a multiple of 4 (default: 0)\n\
         \x20  -l              Run copy sizes 1, 2, 4, ... below ROUND_DOWN_POW_2(copy size)\n\
         \x20  -d <gpu>        GPU ID (default: 0)\n\
         \x20  -w <iters>      Number of write iterations (default: 10000)\n\
         \x20  -r <iters>      Number of read iterations (default: 100)\n\
         \x20  -a <fn>         GPU buffer allocation function (default: cuMemAlloc)\n\
         \x20                      Choices: {ALLOC_CHOICES}\n\
         \x20  -M <mapping_type>   Request mapping type (choices: default, wc, cache, device)\n"
    )
}

fn round_down_pow2(x: usize) -> usize {
    if x == 0 {
        0
    } else {
        1usize << (usize::BITS - 1 - x.leading_zeros())
    }
}

fn parse(args: &[String]) -> Result<Parsed<Opts>, CliError> {
    let mut o = Opts {
        gpu: GpuOpts::new(DEFAULT_SIZE),
        copy_sizes: Vec::new(),
        offset: 0,
        write_iters: 10000,
        read_iters: 100,
    };
    let mut copy_bound = 0;
    let mut range = false;
    for opt in cli::getopt(args, "s:d:o:c:w:r:a:M:hl")? {
        if o.gpu.take(&opt)? {
            continue;
        }
        match opt.name {
            'c' => copy_bound = cli::size_arg(&opt)?,
            'l' => range = true,
            'o' => o.offset = cli::size_arg(&opt)?,
            'w' => o.write_iters = cli::count_arg(&opt)?,
            'r' => o.read_iters = cli::count_arg(&opt)?,
            'h' => return Ok(Parsed::Help),
            c => return Err(CliError::Unknown(c)),
        }
    }
    o.gpu.check()?;
    let size = o.gpu.size;
    if range {
        let upper = if copy_bound == 0 {
            size
        } else {
            copy_bound.min(size)
        };
        let mut i = 1;
        while i < round_down_pow2(upper) {
            o.copy_sizes.push(i);
            i <<= 1;
        }
    } else {
        o.copy_sizes
            .push(if copy_bound == 0 { size } else { copy_bound });
    }
    if !o.offset.is_multiple_of(4) {
        return Err(CliError::BadValue(
            'o',
            o.offset.to_string(),
            "a multiple of 4 bytes",
        ));
    }
    if o.copy_sizes
        .iter()
        .any(|&c| o.offset.checked_add(c).is_none_or(|end| end > size))
    {
        return Err(CliError::BadValue(
            'c',
            "offset + copy size".into(),
            "at most the buffer size (-s)",
        ));
    }
    Ok(Parsed::Run(o))
}

fn run(o: Opts) -> Result<(), Fatal> {
    let cuda = tool::load_cuda()?;
    let size = round_up(o.gpu.size, GPU_PAGE_SIZE);
    let (dev, _ctx) = tool::select_gpu(&cuda, o.gpu.dev_id)?;
    println!("testing size: {}", o.gpu.size);
    println!("rounded size: {size}");
    let gdr = tool::load_gdr_for(&cuda, dev)?;
    println!("gpu alloc fn: {}", o.gpu.alloc.name());
    let dbuf = DeviceBuffer::alloc(&cuda, o.gpu.alloc, size, dev)?;
    let d_a = dbuf.ptr();
    println!("device ptr: {d_a:x}");

    let mut src = HostBuffer::alloc(&cuda, size)?;
    tool::fill_walking_bit(src.as_mut_slice());
    let mut dst = HostBuffer::alloc(&cuda, size)?;

    let session = tool::open_gdr(&gdr)?;
    let pin = session
        .pin(d_a, size)
        .map_err(|e| tool::pin_error(&session, o.gpu.alloc, e))?;
    let map = pin.map(o.gpu.map_flag)?;
    let (_, off) = tool::report_mapping(&pin, &map, d_a)?;
    println!(
        "user-space pointer:{}",
        fmt_ptr(map.ptr() as u64 + off as u64)
    );

    let mut progress = Progress::new("gdrcopy_copybw");
    let total = o.copy_sizes.len();
    for (i, &n) in o.copy_sizes.iter().enumerate() {
        let at = off + o.offset;
        println!(
            "writing test, size={n} offset={} num_iters={}",
            o.offset, o.write_iters
        );
        progress.update(&format!("writing {n} B"), i, total);
        let t = Instant::now();
        for _ in 0..o.write_iters {
            map.copy_to(at, &src.as_slice()[..n])?;
        }
        let us = tool::elapsed_us(t);
        progress.clear();
        println!("write BW: {}MB/s", fmt_g(mib_per_s(n, o.write_iters, us)));

        map.copy_from(at, &mut dst.as_mut_slice()[..n])?;
        tool::compare_words(&src.as_slice()[..n], &dst.as_slice()[..n]);

        println!(
            "reading test, size={n} offset={} num_iters={}",
            o.offset, o.read_iters
        );
        progress.update(&format!("reading {n} B"), i, total);
        let t = Instant::now();
        for _ in 0..o.read_iters {
            map.copy_from(at, &mut dst.as_mut_slice()[..n])?;
        }
        let us = tool::elapsed_us(t);
        progress.clear();
        println!("read BW: {}MB/s", fmt_g(mib_per_s(n, o.read_iters, us)));
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

fn mib_per_s(bytes: usize, iters: usize, us: f64) -> f64 {
    let us = if us > 0.0 { us } else { f64::MIN_POSITIVE };
    (bytes as f64 * iters as f64) / us * 1e6 / 1024.0 / 1024.0
}

fn main() -> ExitCode {
    tool::main_with(parse, usage, run)
}
