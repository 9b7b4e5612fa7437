//! `gdrcopy doctor` on the emulator: each diagnosis produced by the emulator setting (or the
//! missing piece) that causes it, checked in the text, in `--json` and in the exit status.

mod common;
use common::{run, run_on_tty, Setup, TempFile};
use serde_json::Value;

struct Doc {
    code: i32,
    text: String,
    json: Value,
}

impl Doc {
    fn check(&self, id: &str) -> &Value {
        self.checks(id)
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("no check {id} in\n{}", self.text))
    }
    fn checks(&self, id: &str) -> Vec<&Value> {
        self.json
            .get("checks")
            .and_then(Value::as_array)
            .expect("checks array")
            .iter()
            .filter(|c| c.get("id").and_then(Value::as_str) == Some(id))
            .collect()
    }
    fn status(&self, id: &str) -> &str {
        self.check(id)
            .get("status")
            .and_then(Value::as_str)
            .expect("status")
    }
    fn detail(&self, id: &str, key: &str) -> &Value {
        self.check(id)
            .get("details")
            .and_then(|d| d.get(key))
            .unwrap_or_else(|| panic!("no {id}.{key}"))
    }
    fn fix(&self, id: &str) -> &str {
        self.check(id)
            .get("fix")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
    /// The text line of check `id` (the line starting with its status tag).
    fn line(&self, id: &str) -> &str {
        self.text
            .lines()
            .find(|l| l.starts_with('[') && l[7..].trim_start().starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("no text line for {id} in\n{}", self.text))
    }
}

/// Runs the doctor twice (text and --json) with the same setup; both must agree on the exit status.
fn doctor(setup: Setup, env: &[(&str, &str)]) -> Doc {
    let t = run(setup, "gdrcopy", &["doctor"], env);
    let j = run(setup, "gdrcopy", &["doctor", "--json"], env);
    assert_eq!(
        t.code, j.code,
        "text and json disagree:\n{}\n{}",
        t.stdout, j.stdout
    );
    assert!(
        !t.stdout.contains('\x1b'),
        "colour on a pipe:\n{}",
        t.stdout
    );
    let json = serde_json::from_str::<Value>(&j.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}):\n{}", j.stdout));
    let ok = json.get("ok").and_then(Value::as_bool).expect("ok");
    assert_eq!(ok, t.code == 0, "ok={ok} but exit {}", t.code);
    assert!(t.code == 0 || t.code == 1);
    Doc {
        code: t.code,
        text: t.stdout,
        json,
    }
}

const NO_FALLBACK: (&str, &str) = ("GDRSIM_DMABUF", "0");

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn healthy_machine_passes_with_a_verified_round_trip() {
    let d = doctor(Setup::Full, &[]);
    assert_eq!(d.code, 0, "{}", d.text);
    for id in [
        "library",
        "device_node",
        "device_access",
        "driver_version",
        "driver_params",
        "cuda_driver",
        "gpu",
        "bar1",
        "container",
        "roundtrip",
    ] {
        assert_eq!(d.status(id), "pass", "{id}:\n{}", d.text);
        assert!(d.line(id).starts_with("[PASS]"), "{}", d.line(id));
    }
    let path = d.detail("library", "path").as_str().unwrap();
    assert!(path.ends_with("/libgdrapi.so.2.6"), "{path}");
    assert!(
        path.starts_with(&std::env::var("GDRCOPY_TEST_LIB_DIR").unwrap()),
        "{path}"
    );
    assert_eq!(d.detail("library", "version").as_str(), Some("2.6"));
    assert!(d.line("library").contains(path));
    assert_eq!(
        d.detail("driver_version", "driver_version").as_str(),
        Some("2.6")
    );
    assert_eq!(
        d.detail("driver_params", "persistent_mapping").as_bool(),
        Some(true)
    );
    assert_eq!(d.detail("gpu", "gpudirect_rdma").as_bool(), Some(true));
    assert_eq!(d.detail("roundtrip", "backend").as_str(), Some("gdrdrv"));
    assert_eq!(
        d.detail("roundtrip", "mapping_type").as_str(),
        Some("write-combining")
    );
    assert_eq!(d.detail("roundtrip", "verified").as_bool(), Some(true));
    assert!(d.detail("roundtrip", "write_mib_s").as_f64().unwrap() > 0.0);
    assert!(d.detail("roundtrip", "read_mib_s").as_f64().unwrap() > 0.0);
    assert!(d.line("roundtrip").contains("MiB/s"));
    assert!(
        d.text.contains("GPUDirect copies work on 1 GPU(s)."),
        "{}",
        d.text
    );
    // Order of the checks is the documented one.
    let ids: Vec<&str> = d
        .json
        .get("checks")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .map(|c| c.get("id").and_then(Value::as_str).unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "library",
            "device_node",
            "device_access",
            "driver_version",
            "driver_params",
            "cuda_driver",
            "gpu",
            "bar1",
            "memlock",
            "container",
            "roundtrip"
        ]
    );
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn module_not_loaded_says_how_to_load_it() {
    let d = doctor(Setup::Full, &[("GDRSIM_NO_DEVICE", "1"), NO_FALLBACK]);
    assert_eq!(d.code, 1, "{}", d.text);
    assert_eq!(d.status("device_node"), "fail");
    assert_eq!(d.detail("device_node", "present").as_bool(), Some(false));
    assert_eq!(
        d.detail("device_node", "module_loaded").as_bool(),
        Some(false)
    );
    assert!(
        d.line("device_node").contains("module is not loaded"),
        "{}",
        d.text
    );
    assert!(d.fix("device_node").contains("sudo modprobe gdrdrv"));
    assert_eq!(d.status("device_access"), "skip");
    assert_eq!(d.status("roundtrip"), "fail");
    assert!(d.fix("roundtrip").contains("gdr_open"), "{}", d.text);
    assert!(
        d.text
            .contains("GPUDirect copies do NOT work. Failed: device_node"),
        "{}",
        d.text
    );
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn module_loaded_without_node_prints_the_mknod_line() {
    let devices = TempFile::new(
        "devices",
        "Character devices:\n  1 mem\n 10 misc\n237 gdrdrv\n\nBlock devices:\n  8 sd\n",
    );
    let d = doctor(
        Setup::Full,
        &[
            ("GDRSIM_NO_DEVICE", "1"),
            NO_FALLBACK,
            ("GDRCOPY_DOCTOR_PROC_DEVICES", devices.as_str()),
        ],
    );
    assert_eq!(d.code, 1);
    assert_eq!(d.status("device_node"), "fail");
    assert_eq!(
        d.detail("device_node", "module_major").as_f64(),
        Some(237.0)
    );
    assert_eq!(
        d.detail("device_node", "module_loaded").as_bool(),
        Some(true)
    );
    assert!(
        d.line("device_node")
            .contains("module is loaded (major 237)"),
        "{}",
        d.text
    );
    assert_eq!(
        d.fix("device_node"),
        "sudo mknod /dev/gdrdrv c 237 0 && sudo chmod 0666 /dev/gdrdrv"
    );
    assert!(d
        .text
        .contains("fix: sudo mknod /dev/gdrdrv c 237 0 && sudo chmod 0666 /dev/gdrdrv"));
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn missing_node_with_dma_buf_mmap_falls_back_and_still_passes() {
    let d = doctor(
        Setup::Full,
        &[
            ("GDRSIM_NO_DEVICE", "1"),
            ("GDRSIM_CUDA_VERSION", "13030"),
            ("GDRSIM_DMABUF", "1"),
        ],
    );
    assert_eq!(d.code, 0, "{}", d.text);
    assert_eq!(d.status("device_node"), "warn");
    assert!(
        d.line("device_node").contains("DMA-BUF backend instead"),
        "{}",
        d.text
    );
    assert_eq!(d.detail("gpu", "dma_buf_mmap").as_bool(), Some(true));
    assert_eq!(d.detail("roundtrip", "backend").as_str(), Some("dmabuf"));
    assert_eq!(d.status("roundtrip"), "pass");
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn node_without_permission_gets_chmod_and_udev_rule() {
    let d = doctor(
        Setup::Full,
        &[
            ("GDRSIM_DEVICE_MODE", "0600"),
            ("GDRSIM_AS_USER", "1"),
            NO_FALLBACK,
        ],
    );
    assert_eq!(d.code, 1, "{}", d.text);
    assert_eq!(d.status("device_node"), "pass");
    assert_eq!(d.status("device_access"), "fail");
    assert_eq!(d.detail("device_access", "opened").as_bool(), Some(false));
    assert!(
        d.line("device_access").contains("permission denied"),
        "{}",
        d.text
    );
    let fix = d.fix("device_access");
    assert!(fix.contains("sudo chmod 0666 /dev/gdrdrv"), "{fix}");
    assert!(fix.contains(r#"KERNEL=="gdrdrv", MODE="0666""#), "{fix}");
    assert!(fix.contains("/etc/udev/rules.d/"), "{fix}");
    assert_eq!(d.status("driver_version"), "skip");
    assert_eq!(d.status("roundtrip"), "fail");

    // The same mode is fine for root.
    let d = doctor(Setup::Full, &[("GDRSIM_DEVICE_MODE", "0600"), NO_FALLBACK]);
    if unsafe_geteuid_is_root() {
        assert_eq!(d.code, 0, "{}", d.text);
        assert_ne!(d.status("device_access"), "fail");
    }
}

fn unsafe_geteuid_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn old_driver_is_reported_against_the_library_version() {
    let d = doctor(Setup::Full, &[("GDRSIM_DRIVER_VERSION", "2.0")]);
    assert_eq!(d.code, 0, "old drivers still copy:\n{}", d.text);
    assert_eq!(d.status("driver_version"), "warn");
    assert_eq!(
        d.detail("driver_version", "driver_version").as_str(),
        Some("2.0")
    );
    assert_eq!(
        d.detail("driver_version", "library_version").as_str(),
        Some("2.6")
    );
    assert!(
        d.line("driver_version")
            .contains("gdrdrv 2.0 is older than libgdrapi 2.6"),
        "{}",
        d.text
    );
    assert!(d.fix("driver_version").contains("gdrdrv-dkms"));
    // 2.0 cannot be asked for attributes; persistent mapping unknown without the /proc file.
    assert_eq!(d.status("driver_params"), "skip");

    let d = doctor(Setup::Full, &[("GDRSIM_DRIVER_VERSION", "2.5")]);
    assert_eq!(d.status("driver_version"), "warn");
    assert_eq!(d.status("driver_params"), "pass");
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn persistent_mapping_comes_from_the_driver_and_the_params_file() {
    let d = doctor(Setup::Full, &[("GDRSIM_PERSISTENT", "0")]);
    assert_eq!(d.code, 0);
    assert_eq!(
        d.detail("driver_params", "persistent_mapping").as_bool(),
        Some(false)
    );
    assert!(d.line("driver_params").contains("persistent mapping: no"));

    let params = TempFile::new(
        "params",
        "Version: 2.4\nBuilt for NVIDIA driver flavor: opensource\nUse persistent mapping: no\ndbg_enabled: 0\ninfo_enabled: 0\n",
    );
    let d = doctor(
        Setup::Full,
        &[
            ("GDRSIM_DRIVER_VERSION", "2.4"),
            ("GDRCOPY_DOCTOR_PROC_PARAMS", params.as_str()),
        ],
    );
    assert_eq!(d.status("driver_params"), "pass");
    assert_eq!(
        d.detail("driver_params", "params_file_readable").as_bool(),
        Some(true)
    );
    assert_eq!(
        d.detail("driver_params", "params_version").as_str(),
        Some("2.4")
    );
    assert_eq!(
        d.detail("driver_params", "persistent_mapping").as_bool(),
        Some(false)
    );
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn cuda_version_decides_dma_buf_mmap() {
    let d = doctor(Setup::Full, &[("GDRSIM_CUDA_VERSION", "13000")]);
    assert_eq!(d.code, 0);
    assert_eq!(d.detail("cuda_driver", "version").as_str(), Some("13.0"));
    assert_eq!(d.detail("gpu", "dma_buf").as_bool(), Some(true));
    assert_eq!(d.detail("gpu", "dma_buf_mmap").as_bool(), Some(false));
    assert!(
        d.line("gpu")
            .contains("DMA-BUF mmap: no (needs CUDA 13.3, driver has 13.0)"),
        "{}",
        d.text
    );

    let d = doctor(Setup::Full, &[("GDRSIM_CUDA_VERSION", "13030")]);
    assert_eq!(d.detail("gpu", "dma_buf_mmap").as_bool(), Some(true));
    assert!(d.line("gpu").contains("DMA-BUF mmap: yes"));

    let d = doctor(
        Setup::Full,
        &[("GDRSIM_CUDA_VERSION", "13050"), ("GDRSIM_DMABUF", "0")],
    );
    assert_eq!(d.detail("gpu", "dma_buf").as_bool(), Some(false));
    assert_eq!(d.detail("gpu", "dma_buf_mmap").as_bool(), Some(false));
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn no_cuda_at_all_fails_with_the_driver_fix() {
    let d = doctor(Setup::NoCuda, &[]);
    assert_eq!(d.code, 1, "{}", d.text);
    assert_eq!(d.status("library"), "pass");
    assert_eq!(d.status("cuda_driver"), "fail");
    assert_eq!(d.detail("cuda_driver", "loaded").as_bool(), Some(false));
    assert!(d.line("cuda_driver").contains("libcuda.so.1"), "{}", d.text);
    assert!(d.fix("cuda_driver").contains("NVIDIA driver"));
    assert!(d.checks("gpu").is_empty());
    assert_eq!(d.status("roundtrip"), "skip");
    // No NVML either (the emulator's libnvidia-ml.so.1 is not on the path): BAR1 is a skip.
    assert_eq!(d.status("bar1"), "skip");
    assert!(d.line("bar1").contains("libnvidia-ml.so.1"), "{}", d.text);
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn bar1_size_and_use_from_nvml() {
    let d = doctor(Setup::Full, &[]);
    assert_eq!(d.status("bar1"), "pass", "{}", d.text);
    assert_eq!(
        d.detail("bar1", "bar1_total_bytes").as_f64(),
        Some((1u64 << 30) as f64)
    );
    assert_eq!(d.detail("bar1", "bar1_used_bytes").as_f64(), Some(0.0));
    assert_eq!(
        d.detail("bar1", "bar1_smaller_than_memory").as_bool(),
        Some(false)
    );
    assert!(
        d.line("bar1")
            .contains("GPU 0: BAR1 1024 MiB, 0 MiB used (0%), 1024 MiB free"),
        "{}",
        d.text
    );
    // No resizable BAR: a 256 MiB aperture in front of 1 GiB of memory is said, not a warning.
    let d = doctor(Setup::Full, &[("GDRSIM_BAR1_SIZE", "256M")]);
    assert_eq!(d.code, 0, "{}", d.text);
    assert_eq!(d.status("bar1"), "pass", "{}", d.text);
    assert_eq!(
        d.detail("bar1", "bar1_smaller_than_memory").as_bool(),
        Some(true)
    );
    assert!(
        d.line("bar1")
            .contains("smaller than the GPU's 1024 MiB of memory"),
        "{}",
        d.text
    );
    assert!(d.fix("bar1").contains("Resizable BAR"), "{}", d.text);
    // Others hold most of it: a warning with what is left.
    let d = doctor(
        Setup::Full,
        &[
            ("GDRSIM_BAR1_SIZE", "256M"),
            ("GDRSIM_BAR1_RESERVED", "220M"),
        ],
    );
    assert_eq!(d.code, 0, "{}", d.text);
    assert_eq!(d.status("bar1"), "warn", "{}", d.text);
    assert!(
        d.line("bar1").contains("220 MiB used (86%), 36 MiB free"),
        "{}",
        d.text
    );
    assert!(
        d.fix("bar1").contains("pins of more than 36 MiB will fail"),
        "{}",
        d.text
    );
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn full_bar1_fails_the_round_trip_and_says_why() {
    let d = doctor(
        Setup::Full,
        &[
            ("GDRSIM_BAR1_SIZE", "256M"),
            ("GDRSIM_BAR1_RESERVED", "256M"),
        ],
    );
    assert_eq!(d.code, 1, "{}", d.text);
    assert_eq!(d.status("bar1"), "warn", "{}", d.text);
    assert!(
        d.line("bar1").contains("256 MiB used (100%), 0 MiB free"),
        "{}",
        d.text
    );
    assert_eq!(d.status("roundtrip"), "fail");
    assert!(d.line("roundtrip").contains("(errno 12)"), "{}", d.text);
    assert!(
        d.fix("roundtrip")
            .starts_with("BAR1 is nearly full (see the bar1 check)"),
        "{}",
        d.text
    );
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn no_library_fails_with_the_install_fix() {
    let d = doctor(Setup::NoLibrary, &[]);
    assert_eq!(d.code, 1, "{}", d.text);
    assert_eq!(d.status("library"), "fail");
    assert!(d.line("library").contains("libgdrapi.so.2"), "{}", d.text);
    assert!(d.fix("library").contains("LD_LIBRARY_PATH"));
    // The driver is still checked directly.
    assert_eq!(d.status("device_node"), "pass");
    assert_eq!(d.status("driver_version"), "pass");
    assert_eq!(d.status("roundtrip"), "skip");
}

/// The real path of `libgdrapi.so.2` in `dir`.
fn library_in(dir: &std::path::Path) -> String {
    std::fs::canonicalize(dir.join("libgdrapi.so.2"))
        .expect("libgdrapi.so.2 there")
        .display()
        .to_string()
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn the_library_next_to_the_tools_is_found_without_a_library_path() {
    // bin/gdrcopy has a RUNPATH of $ORIGIN/../lib: build/bin finds build/lib.
    let d = doctor(Setup::PreloadOnly, &[]);
    assert_eq!(d.status("library"), "pass", "{}", d.text);
    let bin = std::env::var("GDRCOPY_TEST_BIN_DIR").expect("GDRCOPY_TEST_BIN_DIR");
    let beside = library_in(&std::path::Path::new(&bin).join("../lib"));
    assert_eq!(d.detail("library", "path").as_str(), Some(beside.as_str()));
    assert!(d.line("library").contains(&beside), "{}", d.text);
    assert_eq!(d.status("roundtrip"), "pass", "{}", d.text);
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn ld_library_path_still_wins_over_the_library_next_to_the_tools() {
    let lib = std::env::var("GDRCOPY_TEST_LIB_DIR").expect("GDRCOPY_TEST_LIB_DIR");
    let marker = TempFile::new("marker", "");
    let dir = marker.path.parent().unwrap().to_path_buf();
    let copy = dir.join("libgdrapi.so.2");
    std::fs::copy(library_in(std::path::Path::new(&lib)), &copy).expect("copy the library");
    let expected = library_in(&dir);
    let path = dir.display().to_string();
    let d = doctor(Setup::PreloadOnly, &[("LD_LIBRARY_PATH", &path)]);
    let _ = std::fs::remove_file(&copy);
    assert_eq!(d.status("library"), "pass", "{}", d.text);
    assert_eq!(
        d.detail("library", "path").as_str(),
        Some(expected.as_str())
    );
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn container_without_the_device_says_pass_it_in() {
    let marker = TempFile::new("dockerenv", "");
    let d = doctor(
        Setup::Full,
        &[
            ("GDRSIM_NO_DEVICE", "1"),
            NO_FALLBACK,
            ("GDRCOPY_DOCTOR_DOCKERENV", marker.as_str()),
        ],
    );
    assert_eq!(d.code, 1);
    assert_eq!(d.status("container"), "fail");
    assert!(
        d.fix("container").contains("--device /dev/gdrdrv"),
        "{}",
        d.text
    );
    assert!(d.fix("device_node").contains("--device /dev/gdrdrv"));
    assert!(d
        .detail("container", "container")
        .as_str()
        .unwrap()
        .starts_with("docker"));

    let cgroup = TempFile::new("cgroup", "0::/kubepods/besteffort/pod42/0123\n");
    let d = doctor(Setup::Full, &[("GDRCOPY_DOCTOR_CGROUP", cgroup.as_str())]);
    assert_eq!(d.code, 0);
    assert_eq!(d.status("container"), "pass");
    assert!(d.line("container").contains("kubernetes"), "{}", d.text);
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn command_line_of_gdrcopy() {
    let r = run(Setup::Full, "gdrcopy", &["--version"], &[]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "gdrcopy 2.6.0\n"));
    let r = run(Setup::Full, "gdrcopy", &["--help"], &[]);
    assert_eq!(r.code, 0);
    assert!(
        r.stdout.contains("doctor [--json]") && r.stdout.contains("GDRCOPY_DOCTOR_PROC_DEVICES")
    );
    for args in [&[][..], &["frobnicate"][..], &["doctor", "--yaml"][..]] {
        let r = run(Setup::Full, "gdrcopy", args, &[]);
        assert_eq!(r.code, 2, "{args:?}");
        assert!(
            r.stderr.contains("Usage: gdrcopy"),
            "{args:?}: {}",
            r.stderr
        );
    }
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    let r = run_on_tty(Setup::Full, "gdrcopy", &["doctor"], &[]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(r.stdout.contains("\x1b[32mPASS\x1b[0m"), "{:?}", r.stdout);
    let r = run_on_tty(Setup::Full, "gdrcopy", &["doctor"], &[("NO_COLOR", "1")]);
    assert!(
        r.stdout.contains("[PASS] library") && !r.stdout.contains('\x1b'),
        "{:?}",
        r.stdout
    );
    let r = run_on_tty(Setup::Full, "gdrcopy", &["doctor", "--no-color"], &[]);
    assert!(
        r.stdout.contains("[PASS] library") && !r.stdout.contains('\x1b'),
        "{:?}",
        r.stdout
    );
    // JSON is never coloured.
    let r = run_on_tty(Setup::Full, "gdrcopy", &["doctor", "--json"], &[]);
    assert!(!r.stdout.contains('\x1b'));
    serde_json::from_str::<Value>(r.stdout.trim()).expect("JSON on a terminal");
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn failing_pin_or_map_fails_the_round_trip_with_the_errno() {
    let d = doctor(Setup::Full, &[("GDRSIM_FAIL", "PIN_BUFFER_V2:1:ENOMEM")]);
    assert_eq!(d.code, 1, "{}", d.text);
    assert_eq!(d.status("device_node"), "pass");
    assert_eq!(d.status("roundtrip"), "fail");
    let err = d.detail("roundtrip", "error").as_str().unwrap();
    assert!(
        err.starts_with("gdr_pin_buffer failed: ") && err.contains("errno 12"),
        "{err}"
    );
    assert!(d.fix("roundtrip").contains("GDRCOPY_ENABLE_LOGGING=1"));

    let d = doctor(Setup::Full, &[("GDRSIM_FAIL", "mmap:1:EAGAIN")]);
    assert_eq!(d.code, 1, "{}", d.text);
    let err = d.detail("roundtrip", "error").as_str().unwrap();
    assert!(
        err.starts_with("gdr_map failed: ") && err.contains("errno 11"),
        "{err}"
    );
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn an_old_library_is_named_with_its_path() {
    // A libgdrapi.so.2 from before 2.5: no gdr_map_v2, no gdr_get_attribute.
    let src = TempFile::new(
        "old.c",
        "void *gdr_open(void) { return 0; }\nvoid gdr_runtime_get_version(int *a, int *b) { *a = 2; *b = 3; }\n",
    );
    let dir = src.path.parent().unwrap().to_path_buf();
    let so = dir.join("libgdrapi.so.2");
    let st = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&src.path)
        .status()
        .expect("cc runs");
    assert!(st.success());
    let sim = std::env::var("GDRCOPY_TEST_SIM_DIR").unwrap();
    let path = format!("{}:{sim}", dir.display());
    let d = doctor(Setup::NoLibrary, &[("LD_LIBRARY_PATH", &path)]);
    let _ = std::fs::remove_file(&so);
    assert_eq!(d.code, 1, "{}", d.text);
    assert_eq!(d.status("library"), "fail");
    let p = d.detail("library", "path").as_str().unwrap();
    assert!(
        p.ends_with("/libgdrapi.so.2") && p.contains("gdrcopy-tools-test-"),
        "{p}"
    );
    assert!(
        d.line("library").contains("does not export gdr_"),
        "{}",
        d.text
    );
    assert!(d.fix("library").contains("ldconfig -p | grep libgdrapi"));
}

/// A `/proc/devices` stand-in: with `gdrdrv` at `major`, or without it (`None`), so that the
/// module's major is what the test says whatever the machine has loaded.
fn proc_devices(major: Option<u32>) -> TempFile {
    let gdrdrv = major.map(|m| format!("{m} gdrdrv\n")).unwrap_or_default();
    TempFile::new(
        "devices",
        &format!("Character devices:\n  1 mem\n 10 misc\n{gdrdrv}\nBlock devices:\n  8 sd\n"),
    )
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn node_type_major_and_mode_come_from_stat() {
    let devices = proc_devices(Some(237));
    let d = doctor(
        Setup::Full,
        &[("GDRCOPY_DOCTOR_PROC_DEVICES", devices.as_str())],
    );
    assert_eq!(d.code, 0, "{}", d.text);
    assert_eq!(d.status("device_node"), "pass");
    assert!(
        d.line("device_node")
            .contains("/dev/gdrdrv is present (char 237:0, mode 0666)"),
        "{}",
        d.text
    );
    assert_eq!(d.detail("device_node", "mode").as_str(), Some("0666"));
    assert_eq!(
        d.detail("device_node", "device_major").as_f64(),
        Some(237.0)
    );
    assert_eq!(d.detail("device_node", "device_minor").as_f64(), Some(0.0));
    assert_eq!(
        d.detail("device_node", "module_major").as_f64(),
        Some(237.0)
    );
    assert_eq!(d.detail("device_access", "mode").as_str(), Some("0666"));

    // Another major for both the module and the node is just as healthy.
    let devices = proc_devices(Some(511));
    let d = doctor(
        Setup::Full,
        &[
            ("GDRSIM_DEVICE_MAJOR", "511"),
            ("GDRSIM_DEVICE_MODE", "0660"),
            ("GDRCOPY_DOCTOR_PROC_DEVICES", devices.as_str()),
        ],
    );
    assert_eq!(d.status("device_node"), "pass", "{}", d.text);
    assert!(
        d.line("device_node").contains("(char 511:0, mode 0660)"),
        "{}",
        d.text
    );
    assert_eq!(d.detail("device_access", "mode").as_str(), Some("0660"));
    if unsafe_geteuid_is_root() {
        // root opens it, but other users cannot.
        assert_eq!(d.code, 0, "{}", d.text);
        assert_eq!(d.status("device_access"), "warn");
        assert!(
            d.line("device_access")
                .contains("its mode 0660 keeps other users out"),
            "{}",
            d.text
        );
        assert!(d
            .fix("device_access")
            .contains("sudo chmod 0666 /dev/gdrdrv"));
    }
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn denied_node_names_its_mode() {
    let d = doctor(
        Setup::Full,
        &[
            ("GDRSIM_DEVICE_MODE", "0604"),
            ("GDRSIM_AS_USER", "1"),
            NO_FALLBACK,
        ],
    );
    assert_eq!(d.code, 1, "{}", d.text);
    assert_eq!(d.status("device_access"), "fail");
    assert_eq!(d.detail("device_access", "mode").as_str(), Some("0604"));
    assert_eq!(d.detail("device_node", "mode").as_str(), Some("0604"));
    assert!(
        d.line("device_access").contains("(mode 0604)"),
        "{}",
        d.text
    );
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn stale_node_gets_recreated_with_the_module_major() {
    let devices = proc_devices(Some(237));
    let d = doctor(
        Setup::Full,
        &[
            ("GDRSIM_DEVICE_NODE", "stale"),
            ("GDRSIM_DEVICE_MAJOR", "237"),
            ("GDRCOPY_DOCTOR_PROC_DEVICES", devices.as_str()),
            NO_FALLBACK,
        ],
    );
    assert_eq!(d.code, 1, "{}", d.text);
    assert_eq!(d.status("device_node"), "fail");
    assert!(
        d.line("device_node").contains(
            "/dev/gdrdrv has major 238 but the loaded gdrdrv module uses major 237 (stale node)"
        ),
        "{}",
        d.text
    );
    assert_eq!(
        d.fix("device_node"),
        "sudo rm /dev/gdrdrv\nsudo mknod /dev/gdrdrv c 237 0 && sudo chmod 0666 /dev/gdrdrv"
    );
    assert!(d.text.contains("fix: sudo rm /dev/gdrdrv"), "{}", d.text);
    assert_eq!(
        d.detail("device_node", "device_major").as_f64(),
        Some(238.0)
    );
    assert_eq!(
        d.detail("device_node", "module_major").as_f64(),
        Some(237.0)
    );
    assert_eq!(d.detail("device_node", "present").as_bool(), Some(true));
    assert_eq!(
        d.detail("device_node", "module_loaded").as_bool(),
        Some(true)
    );
    // open gives ENXIO: the access check defers to device_node.
    assert_eq!(d.status("device_access"), "skip");
    assert!(
        d.line("device_access").contains("no driver answers"),
        "{}",
        d.text
    );
    assert_eq!(d.status("driver_version"), "skip");
    assert_eq!(d.status("roundtrip"), "fail");
    assert!(
        d.text
            .contains("GPUDirect copies do NOT work. Failed: device_node"),
        "{}",
        d.text
    );
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn regular_file_in_place_of_the_node_is_removed_and_recreated() {
    let devices = proc_devices(Some(237));
    let d = doctor(
        Setup::Full,
        &[
            ("GDRSIM_DEVICE_NODE", "file"),
            ("GDRCOPY_DOCTOR_PROC_DEVICES", devices.as_str()),
            NO_FALLBACK,
        ],
    );
    assert_eq!(d.code, 1, "{}", d.text);
    assert_eq!(d.status("device_node"), "fail");
    assert!(
        d.line("device_node")
            .contains("/dev/gdrdrv exists but is not a character device"),
        "{}",
        d.text
    );
    assert_eq!(
        d.fix("device_node"),
        "sudo rm /dev/gdrdrv\nsudo mknod /dev/gdrdrv c 237 0 && sudo chmod 0666 /dev/gdrdrv"
    );
    assert_eq!(d.detail("device_node", "device_major").as_f64(), Some(0.0));
    assert_eq!(d.detail("device_node", "present").as_bool(), Some(true));
    // The file opens, but it answers no driver request.
    assert_eq!(d.detail("device_access", "opened").as_bool(), Some(true));
    assert_eq!(d.status("driver_version"), "fail");
    assert!(
        d.line("driver_version")
            .contains("does not answer the version request"),
        "{}",
        d.text
    );
    assert_eq!(d.status("roundtrip"), "fail");
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn node_without_a_driver_says_load_the_module() {
    let devices = proc_devices(None);
    let d = doctor(
        Setup::Full,
        &[
            ("GDRSIM_DEVICE_NODE", "nodriver"),
            ("GDRSIM_DEVICE_MAJOR", "240"),
            ("GDRCOPY_DOCTOR_PROC_DEVICES", devices.as_str()),
            NO_FALLBACK,
        ],
    );
    assert_eq!(d.code, 1, "{}", d.text);
    assert_eq!(d.status("device_node"), "fail");
    assert!(
        d.line("device_node").contains(
            "/dev/gdrdrv exists (major 240) but no driver answers it: the gdrdrv module is not loaded"
        ),
        "{}",
        d.text
    );
    let fix = d.fix("device_node");
    assert!(fix.starts_with("sudo modprobe gdrdrv"), "{fix}");
    assert!(
        fix.contains("then recreate the node: sudo rm /dev/gdrdrv && sudo mknod /dev/gdrdrv c <major from /proc/devices> 0"),
        "{fix}"
    );
    assert_eq!(d.detail("device_node", "present").as_bool(), Some(true));
    assert_eq!(
        d.detail("device_node", "module_loaded").as_bool(),
        Some(false)
    );
    assert_eq!(d.detail("device_node", "module_major"), &Value::Null);
    assert_eq!(
        d.detail("device_node", "device_major").as_f64(),
        Some(240.0)
    );
    assert_eq!(d.status("device_access"), "skip");
    assert_eq!(d.status("driver_version"), "skip");
    assert_eq!(d.status("roundtrip"), "fail");
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn missing_node_is_missing_to_stat_as_well() {
    let devices = proc_devices(None);
    let d = doctor(
        Setup::Full,
        &[
            ("GDRSIM_NO_DEVICE", "1"),
            ("GDRCOPY_DOCTOR_PROC_DEVICES", devices.as_str()),
            NO_FALLBACK,
        ],
    );
    assert_eq!(d.code, 1, "{}", d.text);
    assert_eq!(d.detail("device_node", "present").as_bool(), Some(false));
    assert!(
        d.check("device_node")
            .get("details")
            .and_then(|x| x.get("mode"))
            .is_none(),
        "{}",
        d.text
    );
    assert!(
        d.line("device_node").contains("/dev/gdrdrv is missing"),
        "{}",
        d.text
    );
}

/// A machine with neither gdrdrv nor DMA-BUF mmap (CUDA 13.0): only the Vulkan import can map.
const NO_GDRDRV_NOR_DMABUF: [(&str, &str); 2] =
    [("GDRSIM_NO_DEVICE", "1"), ("GDRSIM_CUDA_VERSION", "13000")];

/// `NO_GDRDRV_NOR_DMABUF` plus `more`.
fn without_gdrdrv<'a>(more: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    NO_GDRDRV_NOR_DMABUF.iter().chain(more).copied().collect()
}

fn ids(d: &Doc) -> Vec<&str> {
    d.json
        .get("checks")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .map(|c| c.get("id").and_then(Value::as_str).unwrap())
        .collect()
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn vulkan_import_that_would_work_says_what_to_set() {
    let d = doctor(Setup::Vulkan, &without_gdrdrv(&[]));
    assert_eq!(d.code, 1, "{}", d.text);
    assert_eq!(d.status("vulkan"), "warn", "{}", d.text);
    assert!(
        d.line("vulkan")
            .contains("the Vulkan import would work: GPU 0 = Vulkan device '"),
        "{}",
        d.text
    );
    let fix = d.fix("vulkan");
    assert!(fix.starts_with("export GDRAPI_USE_VULKAN=1"), "{fix}");
    assert!(
        fix.contains(
            "cuMemCreate with requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR"
        ),
        "{fix}"
    );
    assert!(
        d.text.contains("fix: export GDRAPI_USE_VULKAN=1"),
        "{}",
        d.text
    );
    assert_eq!(d.detail("vulkan", "requested").as_bool(), Some(false));
    assert_eq!(d.detail("vulkan", "usable").as_bool(), Some(true));
    assert_eq!(d.detail("vulkan", "cuda_version").as_str(), Some("13.0"));
    let gpu = &d.detail("vulkan", "gpus")[0];
    assert_eq!(gpu["usable"].as_bool(), Some(true), "{gpu}");
    assert_eq!(gpu["external_memory_fd"].as_bool(), Some(true), "{gpu}");
    assert!(gpu["memory_type"].is_u64(), "{gpu}");
    assert!(gpu["vulkan_device"].is_string(), "{gpu}");
    assert_eq!(gpu["uuid"].as_str().map(str::len), Some(36), "{gpu}");
    // The round trip fails at gdr_open, and the verdict points at the variable.
    assert_eq!(d.status("roundtrip"), "fail");
    assert!(
        d.fix("roundtrip").contains("see the vulkan check"),
        "{}",
        d.text
    );
    assert_eq!(d.status("device_node"), "fail");
    assert!(
        d.text.contains(
            "GPUDirect copies do NOT work. Failed: device_node, roundtrip. \
             The Vulkan import would work: set GDRAPI_USE_VULKAN=1 (see the vulkan check)."
        ),
        "{}",
        d.text
    );
    let ids = ids(&d);
    assert_eq!(ids[ids.len() - 3..], ["container", "vulkan", "roundtrip"]);
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn vulkan_import_asked_for_passes_the_round_trip() {
    let d = doctor(
        Setup::Vulkan,
        &without_gdrdrv(&[("GDRAPI_USE_VULKAN", "1")]),
    );
    assert_eq!(d.code, 0, "{}", d.text);
    assert_eq!(d.status("roundtrip"), "pass", "{}", d.text);
    assert_eq!(d.detail("roundtrip", "backend").as_str(), Some("vulkan"));
    assert_eq!(
        d.detail("roundtrip", "alloc_fn").as_str(),
        Some("cuMemCreateFd")
    );
    assert_eq!(
        d.detail("roundtrip", "mapping_type").as_str(),
        Some("write-combining")
    );
    assert_eq!(d.detail("roundtrip", "verified").as_bool(), Some(true));
    assert!(
        d.line("roundtrip")
            .contains("(write-combining, vulkan backend), copy and verify of 1024 KiB of cuMemCreateFd memory"),
        "{}",
        d.text
    );
    assert_eq!(d.status("vulkan"), "pass", "{}", d.text);
    assert!(
        d.line("vulkan")
            .contains("GDRAPI_USE_VULKAN=1: GPU 0 = Vulkan device '"),
        "{}",
        d.text
    );
    assert_eq!(d.detail("vulkan", "requested").as_bool(), Some(true));
    // gdrdrv's absence is only a warning now.
    assert_eq!(d.status("device_node"), "warn");
    assert!(
        d.line("device_node")
            .contains("copies use the Vulkan backend instead"),
        "{}",
        d.text
    );
    assert!(
        d.text.contains("GPUDirect copies work on 1 GPU(s)."),
        "{}",
        d.text
    );
    assert!(!d.text.contains("[FAIL]"), "{}", d.text);
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn vulkan_import_failures_name_the_missing_step_and_its_fix() {
    let cases = [
        (
            "nodevice",
            "no Vulkan device has its UUID (Vulkan devices: none)",
            "install NVIDIA's Vulkan driver",
        ),
        (
            "otheruuid",
            "no Vulkan device has its UUID (Vulkan devices: ",
            "install NVIDIA's Vulkan driver",
        ),
        (
            "noext",
            "which does not offer VK_KHR_external_memory_fd",
            "upgrade the NVIDIA driver",
        ),
        (
            "nohostvisible",
            "which has no device-local, host-visible memory type: BAR1 is too small",
            "Resizable BAR",
        ),
        (
            "noinstance",
            "no Vulkan driver answers: vkCreateInstance failed",
            "install NVIDIA's Vulkan driver",
        ),
    ];
    for (situation, summary, fix) in cases {
        for asked in ["0", "1"] {
            let d = doctor(
                Setup::Vulkan,
                &without_gdrdrv(&[("GDRSIM_VULKAN", situation), ("GDRAPI_USE_VULKAN", asked)]),
            );
            let case = format!("GDRSIM_VULKAN={situation} GDRAPI_USE_VULKAN={asked}");
            assert_eq!(d.code, 1, "{case}:\n{}", d.text);
            assert_eq!(d.status("vulkan"), "fail", "{case}:\n{}", d.text);
            assert!(d.line("vulkan").contains(summary), "{case}:\n{}", d.text);
            assert!(d.fix("vulkan").contains(fix), "{case}:\n{}", d.text);
            assert!(
                !d.fix("vulkan").contains("export GDRAPI_USE_VULKAN"),
                "{case}"
            );
            assert_eq!(d.detail("vulkan", "usable").as_bool(), Some(false));
            assert_eq!(
                d.detail("vulkan", "requested").as_bool(),
                Some(asked == "1"),
                "{case}"
            );
            assert_eq!(d.status("roundtrip"), "fail", "{case}");
            assert!(
                d.text.contains(
                    "GPUDirect copies do NOT work. Failed: device_node, vulkan, roundtrip.\n"
                ),
                "{case}:\n{}",
                d.text
            );
        }
    }
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn vulkan_import_in_a_container_needs_the_graphics_capability() {
    let marker = TempFile::new("dockerenv", "");
    let d = doctor(
        Setup::Vulkan,
        &without_gdrdrv(&[
            ("GDRSIM_VULKAN", "nodevice"),
            ("GDRCOPY_DOCTOR_DOCKERENV", marker.as_str()),
        ]),
    );
    assert_eq!(d.status("vulkan"), "fail", "{}", d.text);
    assert!(
        d.fix("vulkan")
            .contains("NVIDIA_DRIVER_CAPABILITIES must include graphics"),
        "{}",
        d.text
    );
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn vulkan_import_needs_cuda_11_4() {
    let d = doctor(
        Setup::Vulkan,
        &[("GDRSIM_NO_DEVICE", "1"), ("GDRSIM_CUDA_VERSION", "11030")],
    );
    assert_eq!(d.code, 1, "{}", d.text);
    assert_eq!(d.status("vulkan"), "fail", "{}", d.text);
    assert!(
        d.line("vulkan")
            .contains("the Vulkan import needs CUDA 11.4 or later, the driver has 11.3"),
        "{}",
        d.text
    );
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn without_the_stand_in_no_vulkan_device_has_the_gpus_uuid() {
    // The machine's own Vulkan loader and drivers (CI: Mesa's lavapipe) see no emulated GPU.
    let d = doctor(Setup::Full, &without_gdrdrv(&[]));
    assert_eq!(d.code, 1, "{}", d.text);
    assert_eq!(d.status("vulkan"), "fail", "{}", d.text);
    assert!(
        d.line("vulkan").contains("no Vulkan device has its UUID"),
        "needs the Vulkan loader and a Vulkan driver (libvulkan1, mesa-vulkan-drivers):\n{}",
        d.text
    );
    assert!(d.fix("vulkan").contains("install NVIDIA's Vulkan driver"));
    assert_eq!(d.detail("vulkan", "loader").as_bool(), Some(true));
    assert!(d.detail("vulkan", "gpus")[0]["vulkan_device"].is_null());
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn an_unloadable_vulkan_loader_says_install_libvulkan1() {
    // A libvulkan.so.1 that is not a library comes first on the path: the loader cannot load.
    let broken = TempFile::new("libvulkan.so.1", "not a library\n");
    let dir = broken.path.parent().unwrap().display().to_string();
    let sim = std::env::var("GDRCOPY_TEST_SIM_DIR").unwrap();
    let lib = std::env::var("GDRCOPY_TEST_LIB_DIR").unwrap();
    let path = format!("{dir}:{sim}:{lib}");
    let d = doctor(Setup::Full, &without_gdrdrv(&[("LD_LIBRARY_PATH", &path)]));
    assert_eq!(d.code, 1, "{}", d.text);
    assert_eq!(d.status("vulkan"), "fail", "{}", d.text);
    assert!(
        d.line("vulkan")
            .contains("the Vulkan loader cannot be loaded: cannot load libvulkan.so.1"),
        "{}",
        d.text
    );
    assert!(
        d.fix("vulkan").contains("sudo apt install libvulkan1"),
        "{}",
        d.text
    );
    assert_eq!(d.detail("vulkan", "loader").as_bool(), Some(false));
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn vulkan_asked_for_where_gdrdrv_works_is_said_to_be_unused() {
    let d = doctor(Setup::Vulkan, &[("GDRAPI_USE_VULKAN", "1")]);
    assert_eq!(d.code, 0, "{}", d.text);
    assert_eq!(d.detail("roundtrip", "backend").as_str(), Some("gdrdrv"));
    assert_eq!(
        d.detail("roundtrip", "alloc_fn").as_str(),
        Some("cuMemAlloc")
    );
    assert_eq!(d.status("vulkan"), "pass", "{}", d.text);
    assert!(
        d.line("vulkan")
            .ends_with("unused: the library uses the gdrdrv backend, which comes first"),
        "{}",
        d.text
    );
    // Without the variable, a machine whose copies work gets no vulkan check.
    let d = doctor(Setup::Vulkan, &[]);
    assert_eq!(d.code, 0, "{}", d.text);
    assert!(d.checks("vulkan").is_empty(), "{}", d.text);
}
