//! The runs: on the BAR through Vulkan or on CUDA write-combined host memory, every copy
//! method's checks and timings, and the worker processes.

use crate::measure::{measure, HostBuf, Region};
use crate::opts::{worker_args, Opts};
use crate::report::{say, Row};
use gdrapi_bench::bar::{device_type_name, VkBar};
use gdrapi_bench::copiers::{Copier, Engine, LoadFenced, Memcpy, RawKernel, UpstreamCopy};
use gdrapi_bench::cuda::Cuda;
use gdrapi_bench::error::{Error, Result};
use gdrapi_bench::hostwc;
use gdrapi_bench::upstream::{CpuFlags, Upstream};
use gdrapi_bench::verify::{self, CpuView, View};
use gdrapi_bench::{pattern, smaps};
use std::process::Command;
use std::time::Instant;

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
pub(crate) fn run(o: &Opts) -> Result<Vec<Row>> {
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
                m.flags.as_raw(),
                m.heap_index,
                m.heap_size >> 20
            ));
        }
        say(&format!(
            "bar memory type: {} flags {:#x} heap {} MiB; external fd: {}",
            t.index,
            t.flags.as_raw(),
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
        k.store_names(),
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

/// Runs one worker process per `--impls` family and collects its timings.
pub(crate) fn run_workers(o: &Opts, args: &[String]) -> Result<Vec<Row>> {
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
