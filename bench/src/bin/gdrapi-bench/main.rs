//! `make bench`: throughput and latency of the copy engine.
//!
//! Mode 1 (default): every write-combining kernel family this CPU runs, and the process-wide
//! dispatch, against glibc `memcpy`, in both directions, on a pluggable target buffer
//! (ordinary memory by default). Then, when the CUDA driver (`libcuda.so.1`) and a device are
//! present, the same tables again on write-combined host memory from `cuMemHostAlloc` with
//! `CU_MEMHOSTALLOC_WRITECOMBINED`, which the CPU maps much as it maps a BAR
//! ([`gdrapi_bench::hostwc`]);
//! otherwise one line says it was skipped and why. `--no-host-wc` leaves it out. On a virtual
//! machine that memory may read at cached speed: it is not a stand-in for a BAR there (the BAR
//! numbers come from `barbench`, `make bench-bar`).
//!
//! Mode 2 (`--against PATH`): this project's `libgdrapi.so` and another one (such as
//! upstream's 2.6), both loaded with `dlopen(RTLD_LOCAL)`, each mapping device memory through
//! its own API (run it on the emulator: `LD_PRELOAD` of its `libcuda.so.1`), their public
//! `gdr_copy_to_mapping` / `gdr_copy_from_mapping` timed in the same run.
//!
//! Every point interleaves all methods round by round and reports the best and median batch.

mod gdrlib;
mod target;
mod timing;

use std::ffi::c_void;
use std::process::ExitCode;

use gdrapi::backend::MappingType;
use gdrapi::copy::{self, Engine, Impl};

use gdrapi_bench::hostwc;
use target::{HostWc, Plain, Target};
use timing::{measure, Plan, Sample};

const USAGE: &str = "\
usage: gdrapi-bench [--quick] [--rounds N] [--batch-us US] [--max BYTES] [--sizes LIST]
                    [--dev-offset N] [--host-offset N] [--impls LIST] [--no-host-wc]
                    [--against OTHER_LIBGDRAPI.so [--ours OUR_LIBGDRAPI.so]]
  --quick         few sizes and rounds (CI smoke test)
  --rounds N      batches per method and point (default 21; quick: 5)
  --batch-us US   shortest batch in microseconds (default 40; quick: 10)
  --max BYTES     largest size (default 16M; K/M suffixes)
  --dev-offset N  mapping-side offset from a 64-byte boundary (default 0)
  --host-offset N host-side offset from a 64-byte boundary (default 0)
  --impls LIST    comma-separated kernel families for mode 1 (default: all supported)
  --sizes LIST    comma-separated sizes instead of the default set
  --kind TYPE     mapping type mode 1 assumes: wc (default), caching or device
  --no-host-wc    mode 1: skip the second run on CUDA write-combined host memory
                  (cuMemHostAlloc, CU_MEMHOSTALLOC_WRITECOMBINED; skipped anyway, with
                  the reason, without libcuda.so.1 or a device)
  --against PATH  mode 2: time this library against ours (run under the emulator's SIM_ENV)
  --ours PATH     our library for mode 2 (default build/lib/libgdrapi.so.2.6)";

struct Opts {
    quick: bool,
    rounds: usize,
    batch_us: f64,
    max: usize,
    dev_offset: usize,
    host_offset: usize,
    impls: Option<Vec<Impl>>,
    sizes: Option<Vec<usize>>,
    kind: MappingType,
    host_wc: bool,
    against: Option<String>,
    ours: String,
}

fn parse_size(s: &str) -> Result<usize, String> {
    gdrapi_bench::parse_size(s).ok_or_else(|| format!("bad size {s:?}"))
}

/// Parses the arguments after the program name; `Err("")` asks for the usage text alone.
fn parse_args(argv: impl IntoIterator<Item = String>) -> Result<Opts, String> {
    let mut o = Opts {
        quick: false,
        rounds: 0,
        batch_us: 0.0,
        max: 16 << 20,
        dev_offset: 0,
        host_offset: 0,
        impls: None,
        sizes: None,
        kind: MappingType::WriteCombining,
        host_wc: true,
        against: None,
        ours: "build/lib/libgdrapi.so.2.6".into(),
    };
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(argv);
    let val = |p: &mut lexopt::Parser| -> Result<String, String> {
        let v = p.value().map_err(|e| e.to_string())?;
        v.into_string().map_err(|v| format!("{v:?} is not UTF-8"))
    };
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("quick") => o.quick = true,
            Long("rounds") => o.rounds = val(&mut p)?.parse().map_err(|_| "bad --rounds")?,
            Long("batch-us") => o.batch_us = val(&mut p)?.parse().map_err(|_| "bad --batch-us")?,
            Long("max") => o.max = parse_size(&val(&mut p)?)?,
            Long("dev-offset") => {
                o.dev_offset = val(&mut p)?.parse().map_err(|_| "bad --dev-offset")?
            }
            Long("host-offset") => {
                o.host_offset = val(&mut p)?.parse().map_err(|_| "bad --host-offset")?
            }
            Long("impls") => {
                let v = val(&mut p)?;
                let list: Result<Vec<Impl>, String> = v
                    .split(',')
                    .map(|n| Impl::from_name(n).ok_or(format!("unknown family {n:?}")))
                    .collect();
                o.impls = Some(list?);
            }
            Long("sizes") => {
                let v = val(&mut p)?;
                let list: Result<Vec<usize>, String> = v.split(',').map(parse_size).collect();
                o.sizes = Some(list?);
            }
            Long("kind") => {
                o.kind = match val(&mut p)?.as_str() {
                    "wc" => MappingType::WriteCombining,
                    "caching" => MappingType::Caching,
                    "device" => MappingType::Device,
                    other => return Err(format!("unknown mapping type {other:?}")),
                }
            }
            Long("no-host-wc") => o.host_wc = false,
            Long("against") => o.against = Some(val(&mut p)?),
            Long("ours") => o.ours = val(&mut p)?,
            Short('h') | Long("help") => return Err(String::new()),
            other => return Err(other.unexpected().to_string()),
        }
    }
    if o.rounds == 0 {
        o.rounds = if o.quick { 5 } else { 21 };
    }
    if o.batch_us <= 0.0 {
        o.batch_us = if o.quick { 10.0 } else { 40.0 };
    }
    if o.dev_offset >= 4096 || o.host_offset >= 4096 {
        return Err("offsets must be below 4096".into());
    }
    Ok(o)
}

fn sizes(o: &Opts) -> Vec<usize> {
    let mut v: Vec<usize> = if let Some(list) = &o.sizes {
        list.clone()
    } else if o.quick {
        vec![1, 8, 13, 64, 100, 4096, 65536, 1 << 20]
    } else {
        let mut v: Vec<usize> = (0..=24).map(|p| 1usize << p).collect();
        v.extend([
            3, 7, 13, 31, 33, 63, 65, 100, 257, 1000, 4097, 65537, 1_000_003,
        ]);
        v
    };
    v.retain(|&n| n <= o.max);
    v.sort_unstable();
    v
}

/// A timed copy method: a name and a closure that does `calls` copies of `n` bytes.
struct Method<'a> {
    name: String,
    run: Box<dyn FnMut(usize, usize) + 'a>,
}

/// One measured point.
struct Row {
    n: usize,
    samples: Vec<Sample>,
}

fn gbps(n: usize, ns: f64) -> f64 {
    n as f64 / ns
}

fn human(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}M", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}K", n >> 10),
        n => n.to_string(),
    }
}

/// Prints a throughput table (best batch, GB/s, ratio to column `base`) and a latency table
/// (best / median ns per call).
fn print_tables(title: &str, names: &[String], rows: &[Row], base: usize, base_label: &str) {
    let w = names.iter().map(|n| n.len()).max().unwrap_or(8).max(15);
    println!(
        "\n== {title}: throughput, GB/s of the best batch (x = speed relative to {base_label})"
    );
    print!("{:>9}", "size");
    for n in names {
        print!(" {n:>w$}");
    }
    println!();
    for r in rows {
        print!("{:>9}", human(r.n));
        let b = r.samples[base].best_ns;
        for (i, s) in r.samples.iter().enumerate() {
            let cell = if i == base {
                format!("{:.2}", gbps(r.n, s.best_ns))
            } else {
                format!("{:.2} {:.2}x", gbps(r.n, s.best_ns), b / s.best_ns)
            };
            print!(" {cell:>w$}");
        }
        println!();
    }
    println!("\n== {title}: latency, ns per call, best / median batch");
    print!("{:>9}", "size");
    for n in names {
        print!(" {n:>w$}");
    }
    println!();
    for r in rows {
        print!("{:>9}", human(r.n));
        for s in &r.samples {
            print!(" {:>w$}", format!("{:.1} / {:.1}", s.best_ns, s.median_ns));
        }
        println!();
    }
}

/// Times every method at every size of `o` and prints both tables under `title`, relative to
/// the first method (named `base_label`); returns the rows.
fn run_and_print(o: &Opts, methods: &mut [Method<'_>], title: &str, base_label: &str) -> Vec<Row> {
    let names: Vec<String> = methods.iter().map(|m| m.name.clone()).collect();
    let rows = run_points(o, methods);
    print_tables(title, &names, &rows, 0, base_label);
    rows
}

fn run_points(o: &Opts, methods: &mut [Method<'_>]) -> Vec<Row> {
    let plan = Plan {
        rounds: o.rounds,
        batch_ns: o.batch_us * 1000.0,
    };
    sizes(o)
        .into_iter()
        .map(|n| {
            let mut closures: Vec<Box<dyn FnMut(usize) + '_>> = methods
                .iter_mut()
                .map(|m| {
                    let f = &mut m.run;
                    Box::new(move |calls: usize| f(n, calls)) as Box<dyn FnMut(usize)>
                })
                .collect();
            let mut refs: Vec<&mut dyn FnMut(usize)> = closures
                .iter_mut()
                .map(|b| &mut **b as &mut dyn FnMut(usize))
                .collect();
            Row {
                n,
                samples: measure(plan, &mut refs),
            }
        })
        .collect()
}

/// Mode 1: each family, the dispatch and memcpy on `target`.
fn mode_engines(o: &Opts, target: &dyn Target) -> Result<(), String> {
    let impls = o.impls.clone().unwrap_or_else(Impl::supported);
    let mut host = Plain::new(o.max + 8192)?;
    for (i, b) in host.bytes().iter_mut().enumerate() {
        *b = (i * 131 + 7) as u8;
    }
    let hp = host.ptr().wrapping_add(o.host_offset);
    let dp = target.ptr().wrapping_add(o.dev_offset);
    if o.max + o.dev_offset > target.len() {
        return Err("target buffer too small".into());
    }
    let kind = target.kind();
    copy::mapping_created(kind);
    let chosen = copy::chosen();
    println!(
        "target: {}; automatic choice: stores {}, loads {}; {}={}",
        target.describe(),
        chosen.store_names(),
        chosen.load_impl.name(),
        copy::ENV,
        std::env::var(copy::ENV).unwrap_or_else(|_| "(unset)".into())
    );
    println!(
        "device offset {}, host offset {}, {} rounds, batches >= {} us",
        o.dev_offset, o.host_offset, o.rounds, o.batch_us
    );
    let engines: Vec<(Impl, Engine)> = impls
        .iter()
        .filter_map(|&i| match Engine::new(i) {
            Some(e) => Some((i, e)),
            None => {
                eprintln!("note: {} is not supported on this CPU; skipped", i.name());
                None
            }
        })
        .collect();
    for to_dev in [true, false] {
        let mut methods: Vec<Method<'_>> = Vec::new();
        methods.push(Method {
            name: "memcpy".into(),
            run: Box::new(move |n, calls| {
                for _ in 0..calls {
                    let (d, s) = if to_dev { (dp, hp) } else { (hp, dp) };
                    // SAFETY: both buffers hold `max + offset` bytes and are distinct.
                    unsafe { libc::memcpy(d.cast(), s.cast::<c_void>(), n) };
                }
            }),
        });
        methods.push(Method {
            name: "dispatch".into(),
            run: Box::new(move |n, calls| {
                for _ in 0..calls {
                    // SAFETY: as above.
                    unsafe {
                        if to_dev {
                            copy::to_mapping(kind, dp, hp, n)
                        } else {
                            copy::from_mapping(kind, hp, dp, n)
                        }
                    }
                }
            }),
        });
        for &(i, e) in &engines {
            methods.push(Method {
                name: i.name().into(),
                run: Box::new(move |n, calls| {
                    for _ in 0..calls {
                        // SAFETY: as above.
                        unsafe {
                            if to_dev {
                                e.to_mapping(kind, dp, hp, n)
                            } else {
                                e.from_mapping(kind, hp, dp, n)
                            }
                        }
                    }
                }),
            });
        }
        let dir = if to_dev {
            "host -> mapping"
        } else {
            "mapping -> host"
        };
        let title = format!("{dir}{}", target.tag());
        run_and_print(o, &mut methods, &title, "memcpy");
    }
    copy::mapping_destroyed(kind);
    Ok(())
}

/// Mode 1 on CUDA write-combined host memory, when the driver gives some; otherwise one line
/// saying why not.
fn mode_host_wc(o: &Opts) -> Result<(), String> {
    let cuda = match hostwc::open_driver() {
        Ok(c) => c,
        Err(e) => {
            println!("\n{}", skipped_line(&e));
            return Ok(());
        }
    };
    let mem = match hostwc::alloc(&cuda, o.max + 8192) {
        Ok(mem) => mem,
        Err(e) => {
            println!("\n{}", skipped_line(&e));
            return Ok(());
        }
    };
    println!("\n=== the same on CUDA write-combined host memory (cuMemHostAlloc)");
    mode_engines(o, &HostWc::new(&mem, o.kind))
}

/// The line printed when the write-combined host memory run cannot happen.
fn skipped_line(why: &gdrapi_bench::Error) -> String {
    format!("CUDA write-combined host memory (cuMemHostAlloc): skipped: {why}")
}

/// Mode 1: ordinary memory, then (unless `--no-host-wc`) CUDA write-combined host memory.
fn mode_one(o: &Opts) -> Result<(), String> {
    let plain = Plain::new(o.max + 8192)?;
    mode_engines(o, &plain.with_kind(o.kind))?;
    if o.host_wc {
        mode_host_wc(o)?;
    }
    Ok(())
}

/// Mode 2: our library's public copy functions against another library's, each on a
/// mapping made through its own API.
fn mode_against(o: &Opts, other: &str) -> Result<(), String> {
    let cuda = gdrapi_bench::cuda::Cuda::open(None).map_err(|e| e.to_string())?;
    let ours = gdrlib::Lib::open("ours", &o.ours)?;
    let theirs = gdrlib::Lib::open("theirs", other)?;
    let len = o.max + o.dev_offset + 4096;
    // One allocation mapped by both libraries: the same physical pages behind both timings.
    let mem = cuda.alloc_device(len).map_err(|e| e.to_string())?;
    let m_ours = gdrlib::Mapping::new(&ours, &mem)?;
    let m_theirs = gdrlib::Mapping::new(&theirs, &mem)?;
    println!("ours:   {} ({})", o.ours, m_ours.describe());
    println!("theirs: {other} ({})", m_theirs.describe());
    if m_ours.kind() != m_theirs.kind() {
        println!("warning: the two mappings have different types");
    }
    println!(
        "device offset {}, host offset {}, {} rounds, batches >= {} us",
        o.dev_offset, o.host_offset, o.rounds, o.batch_us
    );
    let mut host = Plain::new(len + 8192)?;
    for (i, b) in host.bytes().iter_mut().enumerate() {
        *b = (i * 131 + 7) as u8;
    }
    let hp = host.ptr().wrapping_add(o.host_offset);
    for to_dev in [true, false] {
        let mut methods: Vec<Method<'_>> = Vec::new();
        for (name, lib, m) in [("theirs", &theirs, &m_theirs), ("ours", &ours, &m_ours)] {
            let f = if to_dev {
                lib.copy_to_mapping()
            } else {
                lib.copy_from_mapping()
            };
            let (mh, dp) = (m.handle(), m.ptr().wrapping_add(o.dev_offset));
            methods.push(Method {
                name: name.into(),
                run: Box::new(move |n, calls| {
                    let (d, s) = if to_dev { (dp, hp) } else { (hp, dp) };
                    for _ in 0..calls {
                        // SAFETY: both ranges lie inside the mapping and the host buffer.
                        unsafe { f(mh, d.cast(), s.cast(), n) };
                    }
                }),
            });
        }
        let dp = m_ours.ptr().wrapping_add(o.dev_offset);
        methods.push(Method {
            name: "memcpy".into(),
            run: Box::new(move |n, calls| {
                let (d, s) = if to_dev { (dp, hp) } else { (hp, dp) };
                for _ in 0..calls {
                    // SAFETY: as above.
                    unsafe { libc::memcpy(d.cast(), s.cast::<c_void>(), n) };
                }
            }),
        });
        let title = if to_dev {
            "gdr_copy_to_mapping (host -> mapping)"
        } else {
            "gdr_copy_from_mapping (mapping -> host)"
        };
        let rows = run_and_print(o, &mut methods, title, "theirs");
        let worst = rows
            .iter()
            .map(|r| (r.n, r.samples[0].best_ns / r.samples[1].best_ns))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((n, x)) = worst {
            println!("lowest ours/theirs speed ratio: {x:.2}x at {}", human(n));
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let o = match parse_args(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("gdrapi-bench: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let result = match &o.against {
        Some(other) => mode_against(&o, other),
        None => mode_one(&o),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gdrapi-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<Opts, String> {
        parse_args(v.iter().map(|s| s.to_string()))
    }

    #[test]
    fn host_wc_runs_by_default_and_no_host_wc_turns_it_off() {
        let o = parse(&["--quick"]).expect("valid");
        assert!(o.host_wc);
        let o = parse(&["--no-host-wc", "--quick"]).expect("valid");
        assert!(!o.host_wc);
        assert!(o.quick);
        assert!(parse(&["--no-host-wc", "--bogus"]).is_err());
        assert!(parse(&["--no-host-wcx"]).is_err());
    }

    #[test]
    fn skipped_line_names_the_missing_driver() {
        let name = "libcuda-not-here.so.1";
        let e = gdrapi_bench::cuda::Cuda::open_at(name, None)
            .err()
            .expect("no such library");
        let line = skipped_line(&e);
        assert!(line.contains("skipped"), "{line}");
        assert!(line.contains(name), "{line}");
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(1 << 20), "1M");
        assert_eq!(human(4096), "4K");
        assert_eq!(human(4097), "4097");
        assert_eq!(human(1), "1");
    }
}
