//! `barbench`: checks and times copies through real GPU memory mapped over the PCIe BAR with
//! Vulkan (`gdrapi_support::bar`). Needs a GPU whose Vulkan driver offers a device-local,
//! host-visible memory type; on lavapipe it runs too (CPU memory, numbers meaningless).
//!
//! Steps: device and memory type, `/proc/self/smaps` of the mapping, a second mapping through
//! the re-imported fd, the CUDA import round trip, a correctness sweep of every copy method
//! against the GPU's view, then best-of-N timings of each method, size and direction.
//!
//! `--host-wc` runs the same checks and timings on CUDA write-combined host memory instead
//! (`gdrapi_bench::hostwc`), without opening Vulkan, checked through its device pointer
//! (`cuMemHostGetDevicePointer`).

use gdrapi_bench::bar::{device_type_name, VkBar};
use gdrapi_bench::copiers::{Copier, Engine, LoadFenced, Memcpy, RawKernel, UpstreamCopy};
use gdrapi_bench::cuda::Cuda;
use gdrapi_bench::error::{Error, Result};
use gdrapi_bench::hostwc;
use gdrapi_bench::upstream::{CpuFlags, Upstream};
use gdrapi_bench::verify::{self, CpuView, View};
use gdrapi_bench::{pattern, smaps};
use std::io::Write;
use std::process::{Command, ExitCode};
use std::time::Instant;

const USAGE: &str = "\
usage: barbench [options]
  --alloc BYTES      size of the BAR (or --host-wc) allocation (default 64M)
  --max BYTES        largest copy timed (default 16M)
  --reps N           timed samples per point, the best is kept (default 5)
  --sample-ms MS     shortest sample (default 2)
  --upstream PATH    upstream libgdrapi.so.2.6, for its copy and kernels
  --impls LIST       comma-separated GDRAPI_COPY_IMPL values, one process each, besides
                     the engine's own choice; `auto`: every family this CPU runs
  --no-cuda          skip the CUDA import (checks then use a second CPU mapping)
  --host-wc          no Vulkan: check and time CUDA write-combined host memory
                     (cuMemHostAlloc, WRITECOMBINED | DEVICEMAP) instead of the BAR,
                     checked through its device pointer (needs libcuda.so.1 and a GPU)
  --check-only       stop after the checks
  --workers-only     time only the --impls processes (skip this process's methods)
  --quick            small sweep and sizes (for tests)
  --tsv PATH         write every measurement as tab-separated values
Sizes take K, M, G suffixes (powers of 1024).";

#[derive(Clone, Debug)]
struct Opts {
    alloc: usize,
    max: usize,
    reps: usize,
    sample_ms: f64,
    upstream: Option<String>,
    impls: Vec<String>,
    no_cuda: bool,
    host_wc: bool,
    check_only: bool,
    workers_only: bool,
    quick: bool,
    tsv: Option<String>,
    worker: Option<String>,
}

fn parse_size(s: &str) -> Result<usize> {
    gdrapi_bench::parse_size(s).ok_or_else(|| Error::Invalid(format!("size {s:?}")))
}

/// `auto` becomes every copy-engine family this CPU runs (`gdrapi::copy::Impl::supported`,
/// spelled as `GDRAPI_COPY_IMPL` takes them); anything else is a comma-separated list.
fn expand_impls(list: &str) -> Vec<String> {
    if list == "auto" {
        return gdrapi::copy::Impl::supported()
            .into_iter()
            .map(|i| i.name().to_owned())
            .collect();
    }
    list.split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn parse_args(args: &[String]) -> Result<Opts> {
    let mut o = Opts {
        alloc: 64 << 20,
        max: 16 << 20,
        reps: 5,
        sample_ms: 2.0,
        upstream: None,
        impls: Vec::new(),
        no_cuda: false,
        host_wc: false,
        check_only: false,
        workers_only: false,
        quick: false,
        tsv: None,
        worker: None,
    };
    use lexopt::prelude::*;
    let bad = |e: lexopt::Error| Error::Invalid(format!("{e}\n{USAGE}"));
    let mut p = lexopt::Parser::from_args(args);
    let val = |p: &mut lexopt::Parser| -> Result<String> {
        let v = p.value().map_err(bad)?;
        v.into_string()
            .map_err(|v| Error::Invalid(format!("{v:?} is not UTF-8")))
    };
    while let Some(arg) = p.next().map_err(bad)? {
        match arg {
            Long("alloc") => o.alloc = parse_size(&val(&mut p)?)?,
            Long("max") => o.max = parse_size(&val(&mut p)?)?,
            Long("reps") => {
                o.reps = val(&mut p)?
                    .parse()
                    .map_err(|_| Error::Invalid("--reps".into()))?
            }
            Long("sample-ms") => {
                o.sample_ms = val(&mut p)?
                    .parse()
                    .map_err(|_| Error::Invalid("--sample-ms".into()))?
            }
            Long("upstream") => o.upstream = Some(val(&mut p)?),
            Long("impls") => o.impls = expand_impls(&val(&mut p)?),
            Long("no-cuda") => o.no_cuda = true,
            Long("host-wc") => o.host_wc = true,
            Long("check-only") => o.check_only = true,
            Long("workers-only") => o.workers_only = true,
            Long("quick") => o.quick = true,
            Long("tsv") => o.tsv = Some(val(&mut p)?),
            Long("worker") => o.worker = Some(val(&mut p)?),
            Short('h') | Long("help") => return Err(Error::Invalid(USAGE.into())),
            other => return Err(bad(other.unexpected())),
        }
    }
    if o.reps == 0 || o.max == 0 || o.max.checked_mul(2).is_none_or(|m| m > o.alloc) {
        return Err(Error::Invalid(
            "need --reps >= 1 and 0 < 2 * --max <= --alloc".into(),
        ));
    }
    if o.host_wc && o.no_cuda {
        return Err(Error::Invalid(
            "--host-wc allocates and checks through CUDA: it cannot go with --no-cuda".into(),
        ));
    }
    Ok(o)
}

/// One timing: method, direction ("to" or "from"), size, best nanoseconds per call.
#[derive(Clone, Debug)]
struct Row {
    method: String,
    dir: &'static str,
    size: usize,
    ns: f64,
}

impl Row {
    fn gbps(&self) -> f64 {
        self.size as f64 / self.ns
    }
    fn tsv(&self) -> String {
        format!(
            "{}\t{}\t{}\t{:.1}\t{:.4}",
            self.method,
            self.dir,
            self.size,
            self.ns,
            self.gbps()
        )
    }
    fn from_tsv(line: &str) -> Option<Row> {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 4 {
            return None;
        }
        let dir = match f[1] {
            "to" => "to",
            "from" => "from",
            _ => return None,
        };
        Some(Row {
            method: f[0].to_owned(),
            dir,
            size: f[2].parse().ok()?,
            ns: f[3].parse().ok()?,
        })
    }
}

/// A host buffer aligned to 4096 bytes.
struct HostBuf {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl HostBuf {
    fn new(len: usize, seed: u64) -> Result<HostBuf> {
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

fn sizes(max: usize) -> Vec<usize> {
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
struct Region {
    ptr: *mut u8,
    len: usize,
}

impl Region {
    /// The region of `len` bytes at `ptr`.
    ///
    /// # Safety
    /// `ptr..ptr + len` must stay a readable and writable mapping, touched by nothing but this
    /// program's copies and checks, for as long as the region is used.
    unsafe fn new(ptr: *mut u8, len: usize) -> Region {
        Region { ptr, len }
    }
}

/// Checks, then times, method `c` at every size up to `--max`, both directions, on `mem`.
fn measure(
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

fn say(s: &str) {
    println!("{s}");
    let _ = std::io::stdout().flush();
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn hex(u: &[u8]) -> String {
    u.iter().map(|b| format!("{b:02x}")).collect()
}

fn report_mapping(label: &str, p: *mut u8) {
    match smaps::find(p as usize) {
        Ok(m) => say(&format!(
            "{label}: {:#x}-{:#x} {} off {:#x} {:?} VmFlags: {}  => {}",
            m.start,
            m.end,
            m.perms,
            m.offset,
            m.path,
            m.vm_flags.join(" "),
            if m.is_io_pfnmap() {
                "io+pf: a device (BAR) mapping"
            } else {
                "not io+pf: ordinary memory"
            }
        )),
        Err(e) => say(&format!("{label}: smaps: {e}")),
    }
}

/// Every step, on the BAR or (`--host-wc`) on CUDA host memory; returns the timings.
fn run(o: &Opts) -> Result<Vec<Row>> {
    let cpu = CpuFlags::detect();
    if o.worker.is_none() {
        say(&format!("cpu: {} [{}]", cpu_model(), cpu.describe()));
    }
    if o.host_wc {
        run_host_wc(o, cpu)
    } else {
        run_bar(o, cpu)
    }
}

/// Whole-buffer round trip: CPU -> memory -> CUDA, then CUDA -> memory -> CPU, through `view`
/// (device pointer `dptr`); `what` names the memory in the report.
fn round_trip(o: &Opts, mem: Region, view: &dyn View, dptr: u64, what: &str) -> Result<()> {
    let n = o.alloc.min(mem.len).min(4 << 20);
    let a = pattern::bytes(n, 1001);
    let eng = Engine::new("ours");
    // SAFETY: n bytes of the live region; `a` holds n bytes.
    unsafe { eng.to_mapping(mem.ptr, a.as_ptr(), n) };
    let mut got = vec![0u8; n];
    view.read(0, &mut got)?;
    let ok1 = got == a;
    let b = pattern::bytes(n, 2002);
    view.write(0, &b)?;
    let mut back = vec![0u8; n];
    // SAFETY: as above.
    unsafe { eng.from_mapping(back.as_mut_ptr(), mem.ptr, n) };
    let ok2 = back == b;
    if o.worker.is_none() {
        say(&format!(
            "cuda round trip ({} KiB, dptr {:#x}): CPU->{what} then cuMemcpyDtoH {}; cuMemcpyHtoD then {what}->CPU {}",
            n >> 10,
            dptr,
            if ok1 { "identical" } else { "DIFFERENT" },
            if ok2 { "identical" } else { "DIFFERENT" }
        ));
    }
    if !(ok1 && ok2) {
        return Err(Error::Mismatch {
            what: "CUDA round trip".into(),
            offset: 0,
            expected: 0,
            found: 0,
        });
    }
    Ok(())
}

/// `--host-wc`: no Vulkan; write-combined host memory from `cuMemHostAlloc`, checked through
/// its device pointer.
fn run_host_wc(o: &Opts, cpu: CpuFlags) -> Result<Vec<Row>> {
    let worker = o.worker.is_some();
    let cuda = hostwc::open_driver()?;
    let flags = hostwc::FLAGS;
    let mem = hostwc::alloc(&cuda, o.alloc)?;
    if !worker {
        say(&format!(
            "cuda: device {} uuid {}",
            cuda.ordinal(),
            cuda.uuid().map(|u| hex(&u)).unwrap_or_else(|| "?".into())
        ));
        say(&format!(
            "allocated {} MiB with cuMemHostAlloc (flags {flags:#x}: WRITECOMBINED | DEVICEMAP) at {:p}, device pointer {:#x}",
            o.alloc >> 20,
            mem.as_ptr(),
            mem.device_ptr()
        ));
        report_mapping("smaps of the buffer", mem.as_ptr());
    }
    // SAFETY: `mem` stays allocated until the end of this function, after every use of the
    // region, and nothing else in the process touches it.
    let region = unsafe { Region::new(mem.as_ptr(), mem.len()) };
    round_trip(o, region, &mem, mem.device_ptr(), "host-wc")?;
    run_methods(o, cpu, region, &mem)
}

/// The Vulkan path: BAR memory, its re-imported second mapping, the CUDA import.
fn run_bar(o: &Opts, cpu: CpuFlags) -> Result<Vec<Row>> {
    let worker = o.worker.is_some();
    let vk = VkBar::open()?;
    let info = vk.info();
    let t = vk.bar_type();
    if !worker {
        say(&format!(
            "vulkan device: {} ({}, vendor {:#06x}, api {}.{}.{}, driver {:#x}) uuid {}",
            info.name,
            device_type_name(info.device_type),
            info.vendor_id,
            info.api_version >> 22,
            (info.api_version >> 12) & 0x3ff,
            info.api_version & 0xfff,
            info.driver_version,
            hex(&info.uuid)
        ));
        for m in &info.memory_types {
            say(&format!(
                "  memory type {}: flags {:#x} heap {} ({} MiB)",
                m.index,
                m.flags,
                m.heap_index,
                m.heap_size >> 20
            ));
        }
        say(&format!(
            "bar memory type: {} flags {:#x} heap {} MiB; external fd: {}",
            t.index,
            t.flags,
            t.heap_size >> 20,
            info.external_fd
        ));
    }
    let mem = vk.allocate(o.alloc, info.external_fd)?;
    if !worker {
        say(&format!(
            "allocated {} MiB, mapped at {:p}",
            o.alloc >> 20,
            mem.as_ptr()
        ));
        report_mapping("smaps of the mapping", mem.as_ptr());
    }
    // A second CPU mapping of the same memory, through the exported fd imported again.
    let second = if info.external_fd {
        let fd = mem.export_fd()?;
        match vk.import_fd(fd, o.alloc) {
            Ok(m2) => {
                let probe = pattern::bytes(4096, 77);
                // SAFETY: both mappings are live and hold at least 4096 bytes.
                unsafe { std::ptr::copy_nonoverlapping(probe.as_ptr(), mem.as_ptr(), 4096) };
                gdrapi_bench::upstream::store_fence();
                // SAFETY: the second mapping lives until the end of `run`.
                let v2 = unsafe { CpuView::new(m2.as_ptr(), m2.len()) };
                let mut got = vec![0u8; 4096];
                v2.read(0, &mut got)?;
                if !worker {
                    report_mapping("smaps of the re-imported mapping", m2.as_ptr());
                    say(&format!(
                        "re-import: second mapping at {:p}; 4 KiB written through the first {}",
                        m2.as_ptr(),
                        if got == probe {
                            "read back identical through the second"
                        } else {
                            "DIFFER through the second"
                        }
                    ));
                }
                if got != probe {
                    return Err(Error::Mismatch {
                        what: "re-imported mapping".into(),
                        offset: pattern::first_diff(&got, &probe).unwrap_or(0),
                        expected: 0,
                        found: 0,
                    });
                }
                Some(m2)
            }
            Err(e) => {
                say(&format!("re-import of the fd failed: {e}"));
                None
            }
        }
    } else {
        None
    };

    let cuda = if o.no_cuda {
        None
    } else {
        Some(Cuda::open(Some(info.uuid))?)
    };
    let imported = match &cuda {
        Some(c) => {
            if !worker {
                say(&format!(
                    "cuda: device {} uuid {} ({})",
                    c.ordinal(),
                    c.uuid().map(|u| hex(&u)).unwrap_or_else(|| "?".into()),
                    if c.uuid() == Some(info.uuid) {
                        "same GPU as Vulkan's"
                    } else {
                        "UUID differs from Vulkan's"
                    }
                ));
            }
            Some(c.import(mem.export_fd()?, o.alloc)?)
        }
        None => None,
    };
    let second_view = second.as_ref().map(|m2| {
        // SAFETY: the second mapping outlives every use of this view (both live to the end of `run`).
        unsafe { CpuView::new(m2.as_ptr(), m2.len()) }
    });
    let view: &dyn View = match (&imported, &second_view) {
        (Some(i), _) => i,
        (None, Some(v)) => v,
        (None, None) => {
            return Err(Error::Invalid(
                "no second view of the memory (no CUDA, no fd re-import)".into(),
            ))
        }
    };

    // SAFETY: `mem` (and the second mapping and import that `view` may use) live until the
    // end of this function, after every use of the region; nothing else touches the memory.
    let region = unsafe { Region::new(mem.as_ptr(), mem.len()) };
    if let Some(imp) = &imported {
        round_trip(o, region, imp, imp.device_ptr(), "BAR")?;
    }
    run_methods(o, cpu, region, view)
}

/// What follows the setup, on either memory: upstream's library, the correctness sweep of
/// every method through `view`, then the timings (none in `--workers-only` or `--check-only`).
fn run_methods(o: &Opts, cpu: CpuFlags, mem: Region, view: &dyn View) -> Result<Vec<Row>> {
    let worker = o.worker.is_some();
    if o.workers_only && !worker {
        return Ok(Vec::new());
    }
    let upstream = match &o.upstream {
        Some(p) if !worker => {
            let u = Upstream::open(p, cpu)?;
            say(&format!("upstream kernels selected: {}", u.selected()));
            Some(u)
        }
        _ => None,
    };
    let label = match &o.worker {
        Some(i) => format!("ours:{i}"),
        None => "ours".to_owned(),
    };
    let engine = Engine::new(&label);
    let k = gdrapi::copy::chosen();
    say(&format!(
        "engine {label}: stores {}, loads {}{}",
        k.store_impl.name(),
        k.load_impl.name(),
        std::env::var("GDRAPI_COPY_IMPL")
            .map(|v| format!(" (GDRAPI_COPY_IMPL={v})"))
            .unwrap_or_default()
    ));
    let mut copiers: Vec<Box<dyn Copier + '_>> = Vec::new();
    copiers.push(Box::new(Engine::new(&label)));
    if !worker {
        copiers.push(Box::new(Memcpy));
        if let Some(u) = &upstream {
            copiers.push(Box::new(UpstreamCopy(u)));
            copiers.push(Box::new(LoadFenced(UpstreamCopy(u))));
            let raw = [
                (
                    "memcpy_uncached_store_sse41",
                    "up:sse41",
                    16,
                    true,
                    cpu.sse41,
                ),
                (
                    "memcpy_uncached_load_sse41",
                    "up:sse41",
                    16,
                    false,
                    cpu.sse41,
                ),
                ("memcpy_uncached_store_avx2", "up:avx2", 32, true, cpu.avx2),
                ("memcpy_uncached_load_avx2", "up:avx2", 32, false, cpu.avx2),
                (
                    "memcpy_uncached_store_avx512",
                    "up:avx512",
                    64,
                    true,
                    cpu.avx512f,
                ),
                (
                    "memcpy_uncached_load_avx512",
                    "up:avx512",
                    64,
                    false,
                    cpu.avx512f,
                ),
                (
                    "memcpy_uncached_store_movdir64b",
                    "up:movdir64b",
                    64,
                    true,
                    cpu.movdir64b,
                ),
            ];
            for (sym, label, width, store, on) in raw {
                if let (true, Some(k)) = (on, u.kernel(sym)) {
                    copiers.push(Box::new(RawKernel {
                        label: label.into(),
                        kernel: k,
                        width,
                        store,
                    }));
                }
            }
        }
    }
    drop(engine);

    // Correctness sweep of every general method against the other view.
    let offsets: Vec<usize> = if o.quick {
        vec![0, 1, 3, 8, 15, 16, 17, 31, 32, 63]
    } else {
        (0..=64).collect()
    };
    let lengths = if o.quick {
        verify::sweep_lengths(40, 4096)
    } else {
        verify::sweep_lengths(130, 65536)
    };
    for c in &copiers {
        if c.name().starts_with("up:") {
            continue;
        }
        let t0 = Instant::now();
        // SAFETY: the region is live (its contract) and `view` sees the same memory.
        let count =
            unsafe { verify::sweep(c.as_ref(), mem.ptr, mem.len, view, &offsets, &lengths) }?;
        say(&format!(
            "check {}: {count} (offset, length) pairs in both directions match through {} ({:.1} s)",
            c.name(),
            view.describe(),
            t0.elapsed().as_secs_f64()
        ));
    }
    if o.check_only {
        return Ok(Vec::new());
    }

    let host = HostBuf::new(o.max, 4242)?;
    let mut rows = Vec::new();
    for c in &copiers {
        let t0 = Instant::now();
        measure(c.as_ref(), mem, view, o, &host, &mut rows)?;
        if !worker {
            say(&format!(
                "timed {} ({:.1} s)",
                c.name(),
                t0.elapsed().as_secs_f64()
            ));
        }
    }
    Ok(rows)
}

/// The arguments of the worker process for family `imp`: this process's own (so the memory,
/// sizes and `--host-wc` are the same), less what only the parent does, plus `--worker imp`.
fn worker_args(args: &[String], imp: &str) -> Vec<String> {
    let mut child_args: Vec<String> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--impls" | "--upstream" | "--tsv" => {
                it.next();
            }
            "--workers-only" => {}
            _ => child_args.push(a.clone()),
        }
    }
    child_args.push("--worker".into());
    child_args.push(imp.to_owned());
    child_args
}

/// Runs one worker process per `--impls` family and collects its timings.
fn run_workers(o: &Opts, args: &[String]) -> Result<Vec<Row>> {
    let exe = std::env::current_exe().map_err(|e| Error::Io {
        what: "current_exe".into(),
        source: e,
    })?;
    let mut rows = Vec::new();
    for imp in &o.impls {
        let child_args = worker_args(args, imp);
        let t0 = Instant::now();
        let out = Command::new(&exe)
            .args(&child_args)
            .env("GDRAPI_COPY_IMPL", imp)
            .output()
            .map_err(|e| Error::Io {
                what: "spawn worker".into(),
                source: e,
            })?;
        let text = String::from_utf8_lossy(&out.stdout);
        for l in text.lines() {
            if let Some(r) = l.strip_prefix("row\t").and_then(Row::from_tsv) {
                rows.push(r);
            } else if l.starts_with("check ") || l.starts_with("engine ") {
                say(&format!("[{imp}] {l}"));
            }
        }
        if !out.status.success() {
            say(&format!(
                "[{imp}] worker failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        } else {
            say(&format!(
                "timed ours:{imp} in its own process ({:.1} s)",
                t0.elapsed().as_secs_f64()
            ));
        }
    }
    Ok(rows)
}

fn fmt_gbps(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(g) if g >= 10.0 => format!("{g:.1}"),
        Some(g) if g >= 0.1 => format!("{g:.2}"),
        Some(g) => format!("{g:.4}"),
    }
}

fn human(n: usize) -> String {
    if n >= 1 << 20 {
        format!("{}M", n >> 20)
    } else if n >= 1 << 10 {
        format!("{}K", n >> 10)
    } else {
        n.to_string()
    }
}

fn table(rows: &[Row], o: &Opts) {
    let mut methods: Vec<String> = Vec::new();
    for r in rows {
        if !methods.contains(&r.method) {
            methods.push(r.method.clone());
        }
    }
    let get = |m: &str, dir: &str, n: usize| {
        rows.iter()
            .find(|r| r.method == m && r.dir == dir && r.size == n)
            .map(|r| r.gbps())
    };
    let ours: Vec<&String> = methods.iter().filter(|m| m.starts_with("ours")).collect();
    let memory = if o.host_wc {
        "CUDA write-combined host memory"
    } else {
        "the BAR"
    };
    for dir in ["to", "from"] {
        say(&format!(
            "\n### {} {memory} (GB/s, best of {}; each call fenced)\n",
            if dir == "to" { "Host to" } else { "From" },
            o.reps
        ));
        // Ratio columns: each engine column over each upstream baseline present in this direction.
        let baselines: Vec<&str> = ["upstream", "upstream+lfence"]
            .into_iter()
            .filter(|b| rows.iter().any(|r| r.method == *b && r.dir == dir))
            .collect();
        let mut head = String::from("| size |");
        for m in &methods {
            head += &format!(" {m} |");
        }
        for b in &baselines {
            for m in &ours {
                head += &format!(" {m}/{b} |");
            }
        }
        say(&head);
        say(&format!(
            "|{}",
            "---|".repeat(head.matches('|').count() - 1)
        ));
        for n in sizes(o.max) {
            let mut line = format!("| {} |", human(n));
            for m in &methods {
                line += &format!(" {} |", fmt_gbps(get(m, dir, n)));
            }
            for b in &baselines {
                for m in &ours {
                    let ratio = match (get(m, dir, n), get(b, dir, n)) {
                        (Some(a), Some(b)) => format!("{:.2}", a / b),
                        _ => "-".into(),
                    };
                    line += &format!(" {ratio} |");
                }
            }
            say(&line);
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = match parse_args(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("barbench: {e}");
            return ExitCode::from(2);
        }
    };
    let mut rows = match run(&o) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("barbench: {e}");
            return ExitCode::FAILURE;
        }
    };
    if o.worker.is_some() {
        for r in &rows {
            say(&format!("row\t{}", r.tsv()));
        }
        return ExitCode::SUCCESS;
    }
    if o.check_only {
        say("barbench: checks passed");
        return ExitCode::SUCCESS;
    }
    match run_workers(&o, &args) {
        Ok(mut w) => {
            // Engine columns first: the default choice, then the forced ones.
            let (mut ours, others): (Vec<Row>, Vec<Row>) =
                rows.into_iter().partition(|r| r.method == "ours");
            ours.append(&mut w);
            ours.extend(others);
            rows = ours;
        }
        Err(e) => say(&format!("workers: {e}")),
    }
    if let Some(p) = &o.tsv {
        let text: String = std::iter::once("method\tdir\tsize\tns\tgbps".to_owned())
            .chain(rows.iter().map(Row::tsv))
            .map(|l| l + "\n")
            .collect();
        if let Err(e) = std::fs::write(p, text) {
            eprintln!("barbench: write {p}: {e}");
        }
    }
    table(&rows, &o);
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_are_validated() {
        let o = parse_args(&args(&[
            "--max",
            "1M",
            "--alloc",
            "4M",
            "--impls",
            "avx2,sse41",
            "--reps",
            "3",
        ]))
        .unwrap();
        assert_eq!((o.max, o.alloc, o.reps), (1 << 20, 4 << 20, 3));
        assert_eq!(o.impls, vec!["avx2", "sse41"]);
        assert!(parse_args(&args(&["--reps", "0"])).is_err());
        assert!(parse_args(&args(&["--max", "40M"])).is_err()); // 2 * max > default alloc
        assert!(parse_args(&args(&["--upstream"])).is_err());
        assert!(parse_args(&args(&["--bogus"])).is_err());
    }

    #[test]
    fn host_wc_is_an_option_and_needs_cuda() {
        let o = parse_args(&args(&["--alloc", "4M", "--max", "1M"])).unwrap();
        assert!(!o.host_wc);
        let o = parse_args(&args(&["--host-wc", "--alloc", "4M", "--max", "1M"])).unwrap();
        assert!(o.host_wc);
        assert!(!o.no_cuda);
        let e = parse_args(&args(&["--host-wc", "--no-cuda"])).unwrap_err();
        assert!(e.to_string().contains("--no-cuda"), "{e}");
    }

    #[test]
    fn workers_get_host_wc_and_the_sizes_but_not_the_parent_only_options() {
        let parent = args(&[
            "--host-wc",
            "--impls",
            "avx2,sse41",
            "--alloc",
            "8M",
            "--max",
            "1M",
            "--upstream",
            "/x/libgdrapi.so.2.6",
            "--workers-only",
            "--tsv",
            "out.tsv",
            "--quick",
        ]);
        let child = worker_args(&parent, "avx2");
        assert_eq!(
            child,
            args(&[
                "--host-wc",
                "--alloc",
                "8M",
                "--max",
                "1M",
                "--quick",
                "--worker",
                "avx2"
            ])
        );
        // What the worker gets parses to the same memory and mode.
        let o = parse_args(&child).unwrap();
        assert!(o.host_wc);
        assert_eq!((o.alloc, o.worker.as_deref()), (8 << 20, Some("avx2")));
        assert!(o.impls.is_empty() && o.upstream.is_none() && o.tsv.is_none());
    }

    #[test]
    fn rows_survive_the_worker_protocol() {
        let r = Row {
            method: "ours:avx2".into(),
            dir: "from",
            size: 4096,
            ns: 1234.5,
        };
        let back = Row::from_tsv(&r.tsv()).unwrap();
        assert_eq!(
            (back.method.as_str(), back.dir, back.size),
            ("ours:avx2", "from", 4096)
        );
        assert!((back.ns - 1234.5).abs() < 0.01);
        assert!(Row::from_tsv("x\tsideways\t1\t2").is_none());
        assert!(Row::from_tsv("garbage").is_none());
        assert_eq!(sizes(16), vec![1, 2, 4, 8, 16]);
        assert_eq!(human(3 << 20), "3M");
        assert_eq!(human(2048), "2K");
    }
}
