//! The Vulkan path on whatever Vulkan device this machine has. Without a GPU that is Mesa's
//! lavapipe (Debian packages `libvulkan1` and `mesa-vulkan-drivers`, which CI installs): its
//! memory is ordinary CPU memory, but allocation, mapping, fd export and re-import, and the
//! copy checks run exactly as on a GPU.

use gdrapi_bench::bar::VkBar;
use gdrapi_bench::copiers::{Copier, Engine, Memcpy};
use gdrapi_bench::error::Error;
use gdrapi_bench::verify::{self, CpuView, View};
use gdrapi_bench::vk::MemoryPropertyFlags;
use gdrapi_bench::{pattern, smaps};
use std::os::fd::OwnedFd;
use std::process::Command;

fn open() -> VkBar {
    VkBar::open().unwrap_or_else(|e| {
        panic!("no usable Vulkan device ({e}); install libvulkan1 and mesa-vulkan-drivers")
    })
}

#[test]
fn allocation_is_device_local_host_visible_and_mapped() {
    let vk = open();
    let t = vk.bar_type();
    let need = MemoryPropertyFlags::DEVICE_LOCAL | MemoryPropertyFlags::HOST_VISIBLE;
    assert!(t.flags.contains(need), "{:?}", t.flags);
    assert!(vk.info().memory_types.contains(&t));
    assert!(!vk.info().name.is_empty());
    let mem = vk.allocate(1 << 20, false).expect("allocate 1 MiB");
    assert_eq!(mem.len(), 1 << 20);
    assert_eq!(mem.as_ptr() as usize % 4096, 0);
    let m = smaps::find(mem.as_ptr() as usize).expect("mapping in smaps");
    assert!(m.start <= mem.as_ptr() as usize && mem.as_ptr() as usize + mem.len() <= m.end);
    assert!(m.has_flag("rd") && m.has_flag("wr"), "{m:?}");
    // Writes through the mapping read back.
    let data = pattern::bytes(1 << 20, 5);
    let eng = Engine::new("ours");
    let mut back = vec![0u8; 1 << 20];
    // SAFETY: both ranges are 1 MiB: the live mapping and the two vectors.
    unsafe {
        eng.to_mapping(mem.as_ptr(), data.as_ptr(), data.len());
        eng.from_mapping(back.as_mut_ptr(), mem.as_ptr(), back.len());
    }
    assert_eq!(back, data);
}

#[test]
fn the_survey_describes_the_device_open_picks_without_making_one() {
    let vk = open();
    let all = gdrapi_bench::bar::survey().expect("survey");
    let same = all
        .iter()
        .find(|d| d.name == vk.info().name && d.uuid == vk.info().uuid)
        .unwrap_or_else(|| panic!("{:?} not among {all:?}", vk.info().name));
    assert_eq!(same.memory_types, vk.info().memory_types);
    assert_eq!(same.device_type, vk.info().device_type);
    assert_eq!(same.external_fd, vk.info().external_fd);
}

#[test]
fn bad_requests_are_errors() {
    let vk = open();
    assert!(matches!(vk.allocate(0, false), Err(Error::Invalid(_))));
    let plain = vk.allocate(4096, false).expect("allocate");
    assert!(matches!(plain.export_fd(), Err(Error::MissingExtension(_))));
    if vk.info().external_fd {
        let fd: OwnedFd = std::fs::File::open("/dev/null")
            .expect("open /dev/null")
            .into();
        assert!(matches!(vk.import_fd(fd, 0), Err(Error::Invalid(_))));
    }
}

#[test]
fn exported_fd_gives_a_second_mapping_of_the_same_bytes() {
    let vk = open();
    assert!(
        vk.info().external_fd,
        "the device offers no VK_KHR_external_memory_fd"
    );
    let len = 256 << 10;
    let mem = vk.allocate(len, true).expect("exportable allocation");
    let second = vk
        .import_fd(mem.export_fd().expect("export"), len)
        .expect("re-import");
    assert_ne!(second.as_ptr(), mem.as_ptr());
    // SAFETY: `second` outlives the view.
    let view = unsafe { CpuView::new(second.as_ptr(), second.len()) };
    // Bytes written through either mapping are seen through the other.
    let a = pattern::bytes(len, 11);
    let eng = Engine::new("ours");
    // SAFETY: `len` bytes of the live mapping and of `a`.
    unsafe { eng.to_mapping(mem.as_ptr(), a.as_ptr(), len) };
    let mut got = vec![0u8; len];
    view.read(0, &mut got).expect("read");
    assert_eq!(pattern::first_diff(&got, &a), None);
    let b = pattern::bytes(4096, 12);
    view.write(8192, &b).expect("write");
    let mut back = vec![0u8; 4096];
    // SAFETY: bytes 8192..12288 of the live mapping.
    unsafe { eng.from_mapping(back.as_mut_ptr(), mem.as_ptr().add(8192), 4096) };
    assert_eq!(back, b);
    // The copy engine and memcpy pass the offset/length sweep through the other mapping.
    let offsets = [0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63];
    let lengths = verify::sweep_lengths(70, 8192);
    for c in [&eng as &dyn Copier, &Memcpy] {
        // SAFETY: `mem` is live for `len` bytes and the view maps the same memory.
        let n = unsafe { verify::sweep(c, mem.as_ptr(), len, &view, &offsets, &lengths) }
            .expect("sweep passes");
        assert_eq!(n, offsets.len() * lengths.len());
    }
}

#[test]
fn barbench_checks_pass_end_to_end_and_bad_arguments_fail() {
    let exe = env!("CARGO_BIN_EXE_barbench");
    let out = Command::new(exe)
        .args([
            "--quick",
            "--no-cuda",
            "--check-only",
            "--alloc",
            "1M",
            "--max",
            "64K",
        ])
        .output()
        .expect("run barbench");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("bar memory type:"), "{text}");
    assert!(
        text.contains("read back identical through the second"),
        "{text}"
    );
    assert!(text.contains("check ours:"), "{text}");
    assert!(text.contains("barbench: checks passed"), "{text}");

    let bad = Command::new(exe)
        .args(["--max", "1G", "--alloc", "1M"])
        .output()
        .expect("run barbench");
    assert_eq!(bad.status.code(), Some(2));
    let bad = Command::new(exe)
        .arg("--frobnicate")
        .output()
        .expect("run barbench");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid option '--frobnicate'"));
}
