//! The driver: the module loaded or not, the device node present and open to the user, the
//! DMA-BUF fallback without it, the driver's version and parameters.

use super::{doctor, unsafe_geteuid_is_root, Setup, NO_FALLBACK};
use crate::common::TempFile;

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
