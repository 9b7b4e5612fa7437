//! The device node as `stat` sees it: its type, major and mode, stale, replaced by a file, without
//! a driver, or missing, against a `/proc/devices` of the test's own.

use super::{doctor, unsafe_geteuid_is_root, Setup, Value, NO_FALLBACK};
use crate::common::TempFile;

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
