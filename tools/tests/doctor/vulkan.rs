//! The Vulkan import backend: where it would work, asked for, each missing step, containers,
//! CUDA 11.4, the Vulkan loader, and where gdrdrv works anyway.

use super::{doctor, Doc, Setup};
use crate::common::TempFile;
use serde_json::Value;

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
    // The pin held BAR1 for its whole allocation (2 MiB, the VMM granularity), as NVML says.
    assert_eq!(
        d.detail("roundtrip", "allocation_bytes").as_u64(),
        Some(2 << 20)
    );
    assert_eq!(
        d.detail("roundtrip", "bar1_held_bytes").as_u64(),
        Some(2 << 20)
    );
    assert!(
        d.line("roundtrip").ends_with(
            "; the pin held 2 MiB of BAR1 (its whole 2 MiB allocation: see the vulkan check)"
        ),
        "{}",
        d.text
    );
    let fix = d.fix("vulkan");
    assert!(
        fix.contains("a pin holds BAR1 for its whole allocation"),
        "{fix}"
    );
    assert!(fix.contains("UCX_TLS=^gdr_copy"), "{fix}");
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
