//! Containers: Docker without the device passed in, and Kubernetes.

use super::{doctor, Setup, NO_FALLBACK};
use crate::common::TempFile;

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
