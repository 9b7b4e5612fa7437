//! CUDA and the GPU: the driver's version and DMA-BUF mmap, no CUDA at all, BAR1 from NVML, and
//! round trips that fail in the pin or the map.

use super::{doctor, Setup};

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
