//! `barbench --host-wc` end to end. With the CUDA driver and a GPU it must pass its checks on
//! `cuMemHostAlloc` memory without opening Vulkan; without the driver (CI) it must fail cleanly,
//! naming `libcuda.so.1`, and still without opening Vulkan.

use gdrapi_support::dl::Library;
use std::process::Command;

#[test]
fn host_wc_runs_on_cuda_host_memory_without_vulkan_or_fails_naming_the_driver() {
    let out = Command::new(env!("CARGO_BIN_EXE_barbench"))
        .args([
            "--host-wc",
            "--quick",
            "--check-only",
            "--alloc",
            "1M",
            "--max",
            "64K",
        ])
        .output()
        .expect("run barbench");
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    // The Vulkan path prints these before it ever reaches CUDA.
    assert!(!text.contains("vulkan device:"), "{text}");
    assert!(!text.contains("bar memory type:"), "{text}");
    if Library::open("libcuda.so.1").is_ok() {
        assert!(out.status.success(), "{text}\n{err}");
        assert!(text.contains("cuMemHostAlloc (flags 0x6"), "{text}");
        assert!(text.contains("smaps of the buffer:"), "{text}");
        assert!(text.contains("cuMemHostGetDevicePointer"), "{text}");
        assert!(text.contains("barbench: checks passed"), "{text}");
    } else {
        assert_eq!(out.status.code(), Some(1), "{text}\n{err}");
        assert!(err.contains("libcuda.so.1"), "{err}");
    }
}
