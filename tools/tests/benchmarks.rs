//! gdrcopy_copybw, gdrcopy_copylat and gdrcopy_apiperf on the emulator: upstream's flags and
//! result lines (what scripts parse), and clear failures.

mod common;
use common::{run, run_on_tty, Setup};

/// Parses `<prefix><float>MB/s`.
fn bw_values(r: &common::Run, prefix: &str) -> Vec<f64> {
    r.lines_with(prefix)
        .iter()
        .map(|l| {
            let v = l[prefix.len()..]
                .strip_suffix("MB/s")
                .unwrap_or_else(|| panic!("no MB/s in {l:?}"));
            v.parse::<f64>()
                .unwrap_or_else(|_| panic!("bad number in {l:?}"))
        })
        .collect()
}

fn assert_device_lines(r: &common::Run) {
    let gpu = r.lines_with("GPU id:0; name: ");
    assert_eq!(gpu.len(), 1, "{}", r.stdout);
    let bus = gpu[0].rsplit("; Bus id: ").next().unwrap();
    let parts: Vec<&str> = bus.split(':').collect();
    assert_eq!(
        parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
        vec![4, 2, 2],
        "{bus}"
    );
    assert!(r.stdout.contains("selecting device 0\n"));
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn copybw_prints_write_and_read_bandwidth() {
    let r = run(
        Setup::Full,
        "gdrcopy_copybw",
        &["-s", "131072", "-w", "20", "-r", "20"],
        &[],
    );
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert_device_lines(&r);
    for line in [
        "testing size: 131072",
        "rounded size: 131072",
        "gpu alloc fn: cuMemAlloc",
        "info.mapped_size: 131072",
        "info.page_size: 65536",
        "info.mapped: 1",
        "info.wc_mapping: 1",
        "page offset: 0",
        "writing test, size=131072 offset=0 num_iters=20",
        "reading test, size=131072 offset=0 num_iters=20",
    ] {
        assert!(
            r.stdout.lines().any(|l| l == line),
            "missing {line:?} in\n{}",
            r.stdout
        );
    }
    let w = bw_values(&r, "write BW: ");
    let rd = bw_values(&r, "read BW: ");
    assert_eq!((w.len(), rd.len()), (1, 1), "{}", r.stdout);
    assert!(w[0] > 0.0 && rd[0] > 0.0);
    let tail: Vec<&str> = r.stdout.lines().rev().take(3).collect();
    assert_eq!(
        tail,
        vec!["closing gdrdrv", "unpinning buffer", "unmapping buffer"]
    );
    // No mismatch table: the data written came back intact.
    assert!(!r.stdout.contains("content"), "{}", r.stdout);
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn copybw_range_runs_every_power_of_two_below_the_bound() {
    let r = run(
        Setup::Full,
        "gdrcopy_copybw",
        &["-s", "65536", "-l", "-c", "4096", "-w", "2", "-r", "2"],
        &[],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let sizes: Vec<usize> = r
        .lines_with("writing test, size=")
        .iter()
        .map(|l| {
            l["writing test, size=".len()..]
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(sizes, (0..12).map(|i| 1usize << i).collect::<Vec<_>>());
    assert_eq!(bw_values(&r, "write BW: ").len(), 12);
    assert_eq!(bw_values(&r, "read BW: ").len(), 12);
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn copybw_offset_and_vmm_allocation() {
    let r = run(
        Setup::Full,
        "gdrcopy_copybw",
        &[
            "-s",
            "100000",
            "-c",
            "4096",
            "-o",
            "8",
            "-w",
            "3",
            "-r",
            "3",
            "-a",
            "cuMemCreate",
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("rounded size: 131072\n"));
    assert!(r.stdout.contains("gpu alloc fn: cuMemCreate\n"));
    assert!(r
        .stdout
        .contains("writing test, size=4096 offset=8 num_iters=3\n"));
    assert!(!r.stdout.contains("content"), "{}", r.stdout);
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn every_benchmark_takes_vmm_memory_exportable_as_a_file_descriptor() {
    let cases: &[(&str, &[&str])] = &[
        ("gdrcopy_copybw", &["-s", "131072", "-w", "3", "-r", "3"]),
        ("gdrcopy_copylat", &["-s", "65536", "-w", "10", "-r", "10"]),
        ("gdrcopy_apiperf", &["-s", "131072", "-n", "3", "-w", "1"]),
    ];
    for (bin, args) in cases {
        let args: Vec<&str> = args
            .iter()
            .copied()
            .chain(["-a", "cuMemCreateFd"])
            .collect();
        let r = run(Setup::Full, bin, &args, &[]);
        assert_eq!(r.code, 0, "{bin}: {}{}", r.stdout, r.stderr);
        assert!(!r.stdout.contains("content"), "{bin}: {}", r.stdout);
        if *bin != "gdrcopy_apiperf" {
            assert!(
                r.stdout.contains("gpu alloc fn: cuMemCreateFd\n"),
                "{bin}: {}",
                r.stdout
            );
        }
    }
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn bad_flags_exit_1_with_usage() {
    let cases: &[(&str, &[&str])] = &[
        ("gdrcopy_copybw", &["-x"]),
        ("gdrcopy_copybw", &["-o", "3"]),
        ("gdrcopy_copybw", &["-s", "65536", "-c", "65537"]),
        ("gdrcopy_copybw", &["-s", "12abc"]),
        ("gdrcopy_copybw", &["-M", "uncached"]),
        ("gdrcopy_copybw", &["-a", "malloc"]),
        ("gdrcopy_copybw", &["-w"]),
        ("gdrcopy_copylat", &["-q"]),
        ("gdrcopy_copylat", &["-r", "0"]),
        ("gdrcopy_copylat", &["extra"]),
        ("gdrcopy_apiperf", &["-n", "-1"]),
        ("gdrcopy_apiperf", &["-l"]),
    ];
    for (bin, args) in cases {
        let r = run(Setup::Full, bin, args, &[]);
        assert_eq!(r.code, 1, "{bin} {args:?}: {}", r.stderr);
        assert!(
            r.stderr.starts_with("ERROR: "),
            "{bin} {args:?}: {}",
            r.stderr
        );
        assert!(r.stderr.contains("Usage: "), "{bin} {args:?}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{bin} {args:?} ran: {}", r.stdout);
    }
    for bin in ["gdrcopy_copybw", "gdrcopy_copylat", "gdrcopy_apiperf"] {
        let r = run(Setup::Full, bin, &["-h"], &[]);
        assert_eq!(r.code, 0);
        assert!(r.stdout.starts_with("Usage: "), "{}", r.stdout);
        assert!(r.stdout.contains("-M <mapping_type>"));
        assert!(
            r.stdout
                .contains("Choices: cuMemAlloc, cuMemCreate, cuMemCreateFd\n"),
            "{bin}: {}",
            r.stdout
        );
        let r = run(Setup::Full, bin, &["-a", "cuMemCreateFD"], &[]);
        assert_eq!(r.code, 1, "{bin}");
        assert!(
            r.stderr.starts_with(
                "ERROR: invalid value 'cuMemCreateFD' for -a; valid: cuMemAlloc, cuMemCreate, cuMemCreateFd\n"
            ),
            "{bin}: {}",
            r.stderr
        );
    }
}

/// Parses a latency row `<name> \t <size> \t <median> \t <min>`.
fn lat_rows(r: &common::Run, name: &str) -> Vec<(usize, f64, f64)> {
    r.lines_with(&format!("{name} \t"))
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').map(str::trim).collect();
            assert_eq!(f.len(), 4, "{l:?}");
            assert_eq!(f[0], name);
            (
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
                f[3].parse().unwrap(),
            )
        })
        .collect()
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn copylat_prints_a_row_per_size_for_each_copy_direction() {
    let r = run(
        Setup::Full,
        "gdrcopy_copylat",
        &["-s", "65536", "-w", "100", "-r", "100", "-c"],
        &[],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_device_lines(&r);
    assert!(r.stdout.contains("allocated size: 65536\n"));
    assert!(r.stdout.contains("use cold cache: no\n"));
    assert!(r
        .stdout
        .contains("gdr_copy_to_mapping num iters for each size: 100\n"));
    assert!(r
        .stdout
        .contains("Test \t\t\t Size(B) \t Median Time(us) \t Min. Time(us)\n"));
    let want: Vec<usize> = (0..=16).map(|i| 1usize << i).collect();
    for name in [
        "gdr_copy_to_mapping",
        "gdr_copy_from_mapping",
        "cuMemcpy_H2D",
        "cuMemcpy_D2H",
    ] {
        let rows = lat_rows(&r, name);
        assert_eq!(rows.iter().map(|x| x.0).collect::<Vec<_>>(), want, "{name}");
        for (_, med, min) in rows {
            assert!(min >= 0.0 && min <= med, "{name}: min {min} median {med}");
        }
    }
    // Upstream's exact row layout: "%8zu" and "%11.4f" fields.
    let row = r
        .lines_with("gdr_copy_to_mapping \t")
        .first()
        .copied()
        .unwrap();
    assert!(
        row.starts_with("gdr_copy_to_mapping \t        1 \t "),
        "{row:?}"
    );
    let widths: Vec<usize> = row.split('\t').map(str::len).collect();
    assert_eq!(
        widths,
        vec!["gdr_copy_to_mapping ".len(), 10, 13, 12],
        "{row:?}"
    );
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn copylat_rounds_iterations_and_refuses_cold_cache_without_caching() {
    let r = run(
        Setup::Full,
        "gdrcopy_copylat",
        &["-s", "4096", "-w", "150", "-r", "10"],
        &[],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("Increasing num_write_iters from 150 to 200."),
        "{}",
        r.stderr
    );
    assert!(r
        .stdout
        .contains("gdr_copy_to_mapping num iters for each size: 200\n"));
    assert!(r
        .stdout
        .contains("gdr_copy_from_mapping num iters for each size: 10\n"));

    let r = run(
        Setup::Full,
        "gdrcopy_copylat",
        &["-s", "4096", "-w", "10", "-r", "10", "-C"],
        &[],
    );
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("Cold cache has no effect on other mappings except cache mapping"),
        "{}",
        r.stderr
    );

    // A coherent platform maps with caching, so cold-cache runs there.
    let r = run(
        Setup::Full,
        "gdrcopy_copylat",
        &["-s", "4096", "-w", "10", "-r", "10", "-C"],
        &[("GDRSIM_PROFILE", "coherent")],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("use cold cache: yes\n"));
    // 4096 rounds up to one GPU page: sizes 1 .. 65536.
    assert_eq!(lat_rows(&r, "gdr_copy_from_mapping").len(), 17);
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn apiperf_prints_data_lines_and_histograms() {
    let r = run(
        Setup::Full,
        "gdrcopy_apiperf",
        &["-s", "131072", "-n", "7", "-w", "1"],
        &[],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_device_lines(&r);
    let header =
        "Size(B)\tpin.Time(us)\tmap.Time(us)\tget_info.Time(us)\tunmap.Time(us)\tunpin.Time(us)";
    assert_eq!(r.lines_with(header).len(), 2);
    let data: Vec<Vec<&str>> = r
        .stdout
        .lines()
        .filter(|l| l.split('\t').count() == 6 && l.as_bytes()[0].is_ascii_digit())
        .map(|l| l.split('\t').collect())
        .collect();
    assert_eq!(
        data.iter().map(|d| d[0]).collect::<Vec<_>>(),
        vec!["65536", "131072"]
    );
    for d in &data {
        for f in &d[1..] {
            let (_, frac) = f.split_once('.').expect("%f has a point");
            assert_eq!(frac.len(), 6, "{f}");
            assert!(f.parse::<f64>().unwrap() >= 0.0);
        }
    }
    for size in [65536, 131072] {
        let head = format!("Histogram of gdr_pin_buffer latency for {size} bytes");
        let lines: Vec<&str> = r
            .stdout
            .lines()
            .skip_while(|l| *l != head)
            .skip(1)
            .take(10)
            .collect();
        let total: usize = lines
            .iter()
            .map(|l| l.rsplit('\t').next().unwrap().parse::<usize>().unwrap())
            .sum();
        assert_eq!(total, 7, "{lines:?}");
    }
    assert_eq!(r.stdout.lines().last(), Some("closing gdrdrv"));
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn without_cuda_or_gdrdrv_the_tools_say_why_in_one_line() {
    for bin in ["gdrcopy_copybw", "gdrcopy_copylat", "gdrcopy_apiperf"] {
        let r = run(Setup::NoCuda, bin, &["-s", "65536", "-w", "1"], &[]);
        assert_eq!(r.code, 1, "{bin}");
        assert_eq!(r.stderr.lines().count(), 1, "{bin}: {}", r.stderr);
        assert!(
            r.stderr
                .starts_with("ERROR: no usable CUDA driver (cannot load libcuda.so.1"),
            "{}",
            r.stderr
        );
    }
    // No device node and no DMA-BUF mmap: gdr_open fails.
    let r = run(
        Setup::Full,
        "gdrcopy_copybw",
        &["-s", "65536", "-w", "1", "-r", "1"],
        &[("GDRSIM_NO_DEVICE", "1"), ("GDRSIM_DMABUF", "0")],
    );
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("gdr_open failed"), "{}", r.stderr);
    assert!(r.stderr.contains("run `gdrcopy doctor`"), "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    // A GPU that does not exist.
    let r = run(
        Setup::Full,
        "gdrcopy_apiperf",
        &["-d", "7", "-s", "65536"],
        &[],
    );
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("GPU 7 does not exist"), "{}", r.stderr);
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn progress_goes_to_a_terminal_only() {
    let args = ["-s", "65536", "-w", "100", "-r", "100"];
    let r = run(Setup::Full, "gdrcopy_copylat", &args, &[]);
    assert_eq!(r.code, 0);
    assert!(r.stderr.is_empty(), "{:?}", r.stderr);
    let r = run_on_tty(Setup::Full, "gdrcopy_copylat", &args, &[]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(
        r.stdout
            .contains("\rgdrcopy_copylat: gdr_copy_to_mapping 1 B [0/17]"),
        "{:?}",
        r.stdout
    );
    // Each progress line is erased before the next result row.
    assert!(
        r.stdout
            .contains("\r\x1b[Kgdr_copy_to_mapping \t        1 \t"),
        "{:?}",
        r.stdout
    );
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn old_cuda_checks_support_with_a_trial_pin_and_errors_name_the_call() {
    // CUDA < 11.3 has no GPUDirect RDMA attribute: support is checked by pinning a page.
    let r = run(
        Setup::Full,
        "gdrcopy_copybw",
        &["-s", "65536", "-w", "2", "-r", "2"],
        &[("GDRSIM_CUDA_VERSION", "11020")],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(bw_values(&r, "write BW: ").len(), 1);
    // A failing pin is reported with the function and errno, in one line.
    let r = run(
        Setup::Full,
        "gdrcopy_apiperf",
        &["-s", "65536", "-n", "3", "-w", "0"],
        &[("GDRSIM_FAIL", "PIN_BUFFER_V2:2:ENOMEM")],
    );
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(
        r.stderr.starts_with("ERROR: gdr_pin_buffer failed: ") && r.stderr.contains("errno 12"),
        "{}",
        r.stderr
    );
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn programs_do_not_link_cuda_or_libgdrapi() {
    let bin_dir =
        std::path::PathBuf::from(std::env::var("GDRCOPY_TEST_BIN_DIR").expect("make test-tools"));
    for bin in [
        "gdrcopy_copybw",
        "gdrcopy_copylat",
        "gdrcopy_apiperf",
        "gdrcopy",
    ] {
        let out = std::process::Command::new("readelf")
            .arg("-d")
            .arg(bin_dir.join(bin))
            .output()
            .expect("readelf runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("(NEEDED)"), "{bin}: {text}");
        assert!(
            !text.contains("libcuda") && !text.contains("libgdrapi"),
            "{bin} links: {text}"
        );
    }
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn on_the_vulkan_backend_the_benchmarks_map_cu_mem_create_fd_memory_only() {
    // No gdrdrv and CUDA 13.0 (no DMA-BUF mmap): only the Vulkan import maps.
    let env = [
        ("GDRSIM_NO_DEVICE", "1"),
        ("GDRSIM_CUDA_VERSION", "13000"),
        ("GDRAPI_USE_VULKAN", "1"),
    ];
    let cases: &[(&str, &[&str])] = &[
        ("gdrcopy_copybw", &["-s", "131072", "-w", "3", "-r", "3"]),
        ("gdrcopy_copylat", &["-s", "65536", "-w", "10", "-r", "10"]),
        ("gdrcopy_apiperf", &["-s", "131072", "-n", "3", "-w", "1"]),
    ];
    for (bin, args) in cases {
        let with = |alloc: &'static str| -> Vec<&str> {
            args.iter().copied().chain(["-a", alloc]).collect()
        };
        let r = run(Setup::Vulkan, bin, &with("cuMemCreateFd"), &env);
        assert_eq!(r.code, 0, "{bin}: {}{}", r.stdout, r.stderr);
        assert!(!r.stdout.contains("content"), "{bin}: {}", r.stdout);
        if *bin == "gdrcopy_copybw" {
            assert!(r.stdout.contains("info.wc_mapping: 1\n"), "{}", r.stdout);
            assert_eq!(bw_values(&r, "write BW: ").len(), 1, "{}", r.stdout);
        }
        for alloc in ["cuMemAlloc", "cuMemCreate"] {
            let r = run(Setup::Vulkan, bin, &with(alloc), &env);
            assert_eq!(r.code, 1, "{bin} -a {alloc}: {}", r.stdout);
            assert_eq!(r.stderr.lines().count(), 1, "{bin}: {}", r.stderr);
            assert!(
                r.stderr.starts_with("ERROR: gdr_pin_buffer failed: ")
                    && r.stderr.contains("(errno 22)")
                    && r.stderr.ends_with(
                        "; the Vulkan backend maps only VMM memory exportable as a file \
                         descriptor: use -a cuMemCreateFd\n"
                    ),
                "{bin} -a {alloc}: {}",
                r.stderr
            );
        }
    }
}
