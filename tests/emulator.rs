//! The gdrdrv backend against the emulated `/dev/gdrdrv` (the `gdrsim` fake libcuda).
//!
//! Each scenario runs in a child process of this test binary started with
//! `LD_PRELOAD=<emulator>`, so the library's `open`/`ioctl`/`mmap` calls reach the emulator,
//! with the `GDRSIM_*` settings the scenario needs. The outer tests are `#[ignore]`d
//! because they need the emulator built: `make test-core` builds it and runs them with
//! `GDRSIM_LIB` pointing at it.

use gdrapi::ffi::*;
use std::ffi::{c_void, CStr};
use std::os::raw::{c_char, c_int};
use std::path::PathBuf;
use std::process::Command;

const GPU_PAGE: usize = 1 << 16;

// ---------------------------------------------------------------------------------------
// The parent side: run one inner scenario under the emulator.

fn emulator() -> PathBuf {
    let p = std::env::var_os("GDRSIM_LIB").map(PathBuf::from).expect(
        "GDRSIM_LIB must name the emulator (build/sim/libcuda.so.1); `make test-core` sets it",
    );
    assert!(p.exists(), "{} does not exist", p.display());
    p
}

/// Runs the `#[ignore]`d test `inner` in a child under the emulator with `env`; returns its
/// stderr after checking that it passed.
fn run_inner(inner: &str, env: &[(&str, &str)]) -> String {
    let sim = emulator();
    let dir = sim.parent().expect("emulator directory").to_path_buf();
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    cmd.args([
        "--ignored",
        "--exact",
        inner,
        "--nocapture",
        "--test-threads=1",
    ]);
    for (k, _) in std::env::vars() {
        if k.starts_with("GDRSIM_") || k.starts_with("GDRCOPY_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("LD_PRELOAD", &sim)
        .env("LD_LIBRARY_PATH", &dir)
        .env("GDRAPI_INNER", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("spawn the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{inner} with {env:?} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    stderr
}

#[test]
#[ignore = "needs the emulator: run by `make test-core`"]
fn driver_versions_2_0_to_2_6() {
    for minor in 0..=6 {
        let v = format!("2.{minor}");
        run_inner(
            "inner::versions",
            &[("GDRSIM_DRIVER_VERSION", &v), ("GDRSIM_PERSISTENT", "1")],
        );
    }
}

#[test]
#[ignore = "needs the emulator: run by `make test-core`"]
fn missing_node_is_logged_with_a_fix() {
    let err = run_inner(
        "inner::open_fails",
        &[
            ("GDRSIM_NO_DEVICE", "1"),
            ("GDRSIM_DMABUF", "0"),
            ("GDRCOPY_ENABLE_LOGGING", "1"),
        ],
    );
    assert!(
        err.contains("ERR:  error opening driver (errno=2/No such file or directory)"),
        "{err}"
    );
    assert!(err.contains("mknod /dev/gdrdrv"), "{err}");
}

#[test]
#[ignore = "needs the emulator: run by `make test-core`"]
fn permission_denied_is_logged_with_a_fix() {
    let err = run_inner(
        "inner::open_fails",
        &[
            ("GDRSIM_FAIL", "open:1:EACCES"),
            ("GDRSIM_DMABUF", "0"),
            ("GDRCOPY_ENABLE_LOGGING", "1"),
        ],
    );
    assert!(
        err.contains("ERR:  error opening driver (errno=13/Permission denied)"),
        "{err}"
    );
    assert!(err.contains("udev rule"), "{err}");
}

#[test]
#[ignore = "needs the emulator: run by `make test-core`"]
fn failing_get_version_is_logged() {
    let err = run_inner(
        "inner::open_fails",
        &[
            ("GDRSIM_FAIL", "GET_VERSION:1:ENOTTY"),
            ("GDRSIM_DMABUF", "0"),
            ("GDRCOPY_ENABLE_LOGGING", "1"),
        ],
    );
    assert!(
        err.contains("Error getting the gdrdrv driver version with ioctl error (errno=25)"),
        "{err}"
    );
}

#[test]
#[ignore = "needs the emulator: run by `make test-core`"]
fn read_fence_is_off_by_default_and_switched_on_by_the_environment() {
    let logging = [("GDRCOPY_ENABLE_LOGGING", "1"), ("GDRCOPY_LOG_LEVEL", "2")];
    let line = "INFO: GDRAPI_READ_FENCE=1: load fence after every read";
    for (value, on) in [("1", true), ("0", false), ("", false)] {
        let mut env = logging.to_vec();
        env.push(("GDRAPI_READ_FENCE", value));
        env.push(("EXPECT_READ_FENCE", if on { "1" } else { "0" }));
        let err = run_inner("inner::read_fence", &env);
        assert_eq!(
            err.contains(line),
            on,
            "GDRAPI_READ_FENCE={value:?}:\n{err}"
        );
    }
}

#[test]
#[ignore = "needs the emulator: run by `make test-core`"]
fn close_goes_on_past_a_failed_unpin() {
    run_inner("inner::close_past_failures", &[]);
}

#[test]
#[ignore = "needs the emulator: run by `make test-core`"]
fn forked_child_issues_no_driver_calls() {
    let err = run_inner("inner::forked_child", &[("GDRCOPY_ENABLE_LOGGING", "1")]);
    assert!(err.contains("(a forked child?)"), "{err}");
}

// ---------------------------------------------------------------------------------------
// The child side: scenarios, run only under the emulator.

mod inner {
    use super::*;

    #[repr(C)]
    #[derive(Default, Debug, Clone, Copy)]
    struct Counters {
        live_pins: u64,
        live_mappings: u64,
        live_allocations: u64,
        open_files: u64,
        ioctls: u64,
        live_dmabufs: u64,
    }

    /// Looks up `name` in the process (the preloaded emulator).
    fn sym(name: &CStr) -> *mut c_void {
        // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name has no preconditions.
        let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
        assert!(
            !p.is_null(),
            "{name:?} not found: is the emulator preloaded?"
        );
        p
    }

    macro_rules! call {
        ($name:literal : fn($($t:ty),*) -> $r:ty ; $($a:expr),*) => {{
            // SAFETY: the emulator exports $name with exactly this C signature (cuda.h /
            // gdrsim.h), and the arguments are valid for it.
            unsafe {
                let f: unsafe extern "C" fn($($t),*) -> $r = std::mem::transmute(sym($name));
                f($($a),*)
            }
        }};
    }

    /// None unless running under the parent's `run_inner`.
    fn active() -> bool {
        std::env::var_os("GDRAPI_INNER").is_some()
    }

    fn counters() -> Counters {
        let mut c = Counters::default();
        let rc = call!(c"gdrsim_get_counters": fn(*mut Counters, usize) -> c_int; &mut c, std::mem::size_of::<Counters>());
        assert_eq!(rc, 0);
        c
    }

    fn set_fail(spec: &CStr) {
        assert_eq!(
            call!(c"gdrsim_set_fail": fn(*const c_char) -> c_int; spec.as_ptr()),
            0
        );
    }

    /// Initialises the fake CUDA and returns a 64 KiB aligned device buffer of `pages`
    /// GPU pages.
    fn gpu_buffer(pages: usize) -> u64 {
        let mut dev: c_int = 0;
        let mut ctx: *mut c_void = std::ptr::null_mut();
        let mut raw: u64 = 0;
        assert_eq!(call!(c"cuInit": fn(u32) -> c_int; 0), 0);
        assert_eq!(
            call!(c"cuDeviceGet": fn(*mut c_int, c_int) -> c_int; &mut dev, 0),
            0
        );
        assert_eq!(
            call!(c"cuDevicePrimaryCtxRetain": fn(*mut *mut c_void, c_int) -> c_int; &mut ctx, dev),
            0
        );
        assert_eq!(call!(c"cuCtxSetCurrent": fn(*mut c_void) -> c_int; ctx), 0);
        assert_eq!(
            call!(c"cuMemAlloc_v2": fn(*mut u64, usize) -> c_int; &mut raw, pages * GPU_PAGE + GPU_PAGE - 1),
            0
        );
        (raw + GPU_PAGE as u64 - 1) & !(GPU_PAGE as u64 - 1)
    }

    fn open() -> gdr_t {
        // SAFETY: no pointer argument.
        unsafe { gdr_open() }
    }

    fn close(g: gdr_t) -> c_int {
        // SAFETY: no pointer argument; the library validates `g`.
        unsafe { gdr_close(g) }
    }

    fn unpin(g: gdr_t, mh: gdr_mh_t) -> c_int {
        // SAFETY: no pointer argument; the library validates `g` and `mh`.
        unsafe { gdr_unpin_buffer(g, mh) }
    }

    fn unmap(g: gdr_t, mh: gdr_mh_t, p: *mut c_void, size: usize) -> c_int {
        // SAFETY: `p` is only compared with the handle's mapping, never dereferenced.
        unsafe { gdr_unmap(g, mh, p, size) }
    }

    fn pin1(g: gdr_t, addr: u64, size: usize, token: u64) -> (c_int, gdr_mh_t) {
        let mut mh = gdr_mh_t { h: 0 };
        // SAFETY: `mh` is a valid out pointer.
        let rc = unsafe { gdr_pin_buffer(g, addr, size, token, 0, &mut mh) };
        (rc, mh)
    }

    fn pin2(g: gdr_t, addr: u64, size: usize, flags: u32) -> (c_int, gdr_mh_t) {
        let mut mh = gdr_mh_t { h: 0 };
        // SAFETY: `mh` is a valid out pointer.
        let rc = unsafe { gdr_pin_buffer_v2(g, addr, size, flags, &mut mh) };
        (rc, mh)
    }

    fn map(g: gdr_t, mh: gdr_mh_t, size: usize, flags: c_int) -> (c_int, *mut c_void) {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: `p` is a valid out pointer.
        let rc = unsafe { gdr_map_v2(g, mh, &mut p, size, flags) };
        (rc, p)
    }

    fn info(g: gdr_t, mh: gdr_mh_t) -> gdr_info_v2_t {
        let mut i = gdr_info_v2_t::default();
        // SAFETY: `i` is a valid out pointer.
        assert_eq!(unsafe { gdr_get_info_v2(g, mh, &mut i) }, 0);
        i
    }

    #[test]
    #[ignore = "run by the outer tests under the emulator"]
    fn versions() {
        if !active() {
            return;
        }
        let minor: i32 = std::env::var("GDRSIM_DRIVER_VERSION").unwrap()[2..]
            .parse()
            .unwrap();
        let base = gpu_buffer(4);
        let g = open();
        assert!(!g.is_null());
        let (mut ma, mut mi) = (-1, -1);
        // SAFETY: valid out pointers.
        assert_eq!(unsafe { gdr_driver_get_version(g, &mut ma, &mut mi) }, 0);
        assert_eq!((ma, mi), (2, minor));

        // Attributes: before 2.5 answered 0 without asking the driver.
        let mut v = -1;
        let before = counters().ioctls;
        assert_eq!(
            // SAFETY: valid out pointer.
            unsafe { gdr_get_attribute(g, GDR_ATTR_USE_PERSISTENT_MAPPING, &mut v) },
            0
        );
        let asked = counters().ioctls - before;
        if minor < 5 {
            assert_eq!((v, asked), (0, 0));
        } else {
            assert_eq!((v, asked), (1, 1));
        }

        // The v1 PIN_BUFFER (which carries the tokens) before 2.5, PIN_BUFFER_V2 from 2.5
        // (tokens dropped, or persistent mode would refuse them).
        set_fail(c"PIN_BUFFER:1:EIO");
        let (rc, mh) = pin1(g, base, GPU_PAGE, 0x1234);
        if minor < 5 {
            assert_eq!(rc, libc::EIO);
        } else {
            assert_eq!(rc, 0);
            assert_eq!(unpin(g, mh), 0);
        }
        set_fail(c"");
        // Pin flags need 2.5; refused without an ioctl before.
        let before = counters().ioctls;
        let (rc, mh) = pin2(g, base, GPU_PAGE, GDR_PIN_FLAG_FORCE_PCIE);
        if minor < 5 {
            assert_eq!((rc, counters().ioctls - before), (libc::EINVAL, 0));
        } else if rc == 0 {
            assert_eq!(unpin(g, mh), 0);
        }

        // Pin, info, map with the default type, info again.
        let (rc, mh) = pin2(g, base + 0x1234, 2 * GPU_PAGE, 0);
        assert_eq!(rc, 0);
        let i = info(g, mh);
        assert_eq!(
            (i.va, i.mapped_size, i.page_size),
            (base, 3 * GPU_PAGE as u64, GPU_PAGE as u32)
        );
        assert_eq!((i.flags & 3, i.mapping_type), (0, GDR_MAPPING_TYPE_NONE));
        // GET_INFO (v1) before 2.4, GET_INFO_V2 from 2.4; the legacy symbol always uses v1.
        set_fail(c"GET_INFO:1:EIO,GET_INFO:2:EIO");
        let mut i = gdr_info_v2_t::default();
        // SAFETY: valid out pointer.
        let rc = unsafe { gdr_get_info_v2(g, mh, &mut i) };
        assert_eq!(rc, if minor < 4 { libc::EIO } else { 0 });
        let mut raw = [0u8; 40];
        // SAFETY: 40 writable bytes.
        let rc = unsafe { gdr_get_info(g, mh, raw.as_mut_ptr().cast()) };
        assert_eq!(rc, libc::EIO);
        set_fail(c"");
        // The pin is not 64 KiB aligned: mapping it fails in the driver.
        assert_eq!(map(g, mh, GPU_PAGE, 0).0, libc::EINVAL);
        assert_eq!(unpin(g, mh), 0);

        let (rc, mh) = pin2(g, base, 2 * GPU_PAGE, 0);
        assert_eq!(rc, 0);
        // A CACHING request on the x86 profile: refused by REQ_MAPPING_TYPE from 2.5, by the
        // check after mmap before.
        let before = counters();
        let (rc, _) = map(g, mh, GPU_PAGE, GDR_MAP_FLAG_REQ_CACHE_MAPPING as c_int);
        if minor < 5 {
            assert_eq!(rc, libc::EINVAL);
        } else {
            assert_eq!(rc, libc::EOPNOTSUPP);
        }
        assert_eq!(counters().live_mappings, before.live_mappings);
        // REQ_MAPPING_TYPE is issued (even for the default) from 2.5 only.
        set_fail(c"REQ_MAPPING_TYPE:1:EIO");
        let (rc, p) = map(g, mh, 2 * GPU_PAGE, 0);
        set_fail(c"");
        let (rc, p) = if minor >= 5 {
            assert_eq!(rc, libc::EIO);
            map(g, mh, 2 * GPU_PAGE, 0)
        } else {
            (rc, p)
        };
        assert_eq!(rc, 0);
        let i = info(g, mh);
        assert_eq!((i.flags & 3, i.mapping_type), (3, GDR_MAPPING_TYPE_WC));
        // The legacy symbol writes exactly 40 bytes.
        let mut raw = [0xEEu8; 48];
        // SAFETY: 48 writable bytes, more than the 40 the v1 struct needs.
        assert_eq!(unsafe { gdr_get_info(g, mh, raw.as_mut_ptr().cast()) }, 0);
        assert_eq!(u64::from_ne_bytes(raw[0..8].try_into().unwrap()), base);
        assert_eq!(raw[36] & 3, 3);
        assert_eq!(&raw[40..], &[0xEE; 8]);
        // Data goes through.
        let src = [0xA5u8; 256];
        let mut back = [0u8; 256];
        // SAFETY: the ranges are inside the mapping and the host buffers.
        unsafe {
            assert_eq!(
                gdr_copy_to_mapping(mh, p.cast::<u8>().add(100).cast(), src.as_ptr().cast(), 256),
                0
            );
            assert_eq!(
                gdr_copy_from_mapping(
                    mh,
                    back.as_mut_ptr().cast(),
                    p.cast::<u8>().add(100).cast(),
                    256
                ),
                0
            );
        }
        assert_eq!(src, back);
        assert_eq!(unmap(g, mh, p, 2 * GPU_PAGE), 0);
        assert_eq!(close(g), 0);
        let c = counters();
        assert_eq!((c.live_pins, c.live_mappings, c.open_files), (0, 0, 0));
    }

    #[test]
    #[ignore = "run by the outer tests under the emulator"]
    fn read_fence() {
        if !active() {
            return;
        }
        let expect = std::env::var("EXPECT_READ_FENCE").unwrap() == "1";
        let base = gpu_buffer(1);
        let g = open();
        assert!(!g.is_null());
        let (rc, mh) = pin2(g, base, GPU_PAGE, 0);
        assert_eq!(rc, 0);
        // The switch is read at the first mapping.
        assert!(!gdrapi::copy::fence::read_fence());
        let (rc, p) = map(g, mh, GPU_PAGE, 0);
        assert_eq!(rc, 0);
        assert_eq!(gdrapi::copy::fence::read_fence(), expect);
        // Copies are exact either way, on the inline paths and through the kernels.
        let src: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
        for (n, off) in [(1, 0), (13, 3), (64, 0), (300, 17), (1023, 5), (4000, 32)] {
            let mut back = vec![0u8; n];
            // SAFETY: `off + n` stays inside the 64 KiB mapping and the host buffers.
            unsafe {
                let d = p.cast::<u8>().add(off).cast::<c_void>();
                assert_eq!(gdr_copy_to_mapping(mh, d, src.as_ptr().cast(), n), 0);
                assert_eq!(gdr_copy_from_mapping(mh, back.as_mut_ptr().cast(), d, n), 0);
            }
            assert_eq!(back, src[..n], "n={n} off={off}");
        }
        assert_eq!(unmap(g, mh, p, GPU_PAGE), 0);
        assert_eq!(unpin(g, mh), 0);
        assert_eq!(close(g), 0);
    }

    #[test]
    #[ignore = "run by the outer tests under the emulator"]
    fn open_fails() {
        if !active() {
            return;
        }
        assert!(open().is_null());
    }

    #[test]
    #[ignore = "run by the outer tests under the emulator"]
    fn close_past_failures() {
        if !active() {
            return;
        }
        let base = gpu_buffer(4);
        let g = open();
        assert!(!g.is_null());
        let mut handles = Vec::new();
        for i in 0..3u64 {
            let (rc, mh) = pin2(g, base + i * GPU_PAGE as u64, GPU_PAGE, 0);
            assert_eq!(rc, 0);
            handles.push(mh);
        }
        let (rc, _p) = map(g, handles[0], GPU_PAGE, 0);
        assert_eq!(rc, 0);
        let before = counters();
        assert_eq!((before.live_pins, before.live_mappings), (3, 1));
        set_fail(c"UNPIN_BUFFER:1:EIO");
        assert_eq!(close(g), libc::EIO);
        // All three unpins were tried, the fd was closed (which releases the rest).
        let after = counters();
        assert_eq!(after.ioctls - before.ioctls, 3);
        assert_eq!(
            (after.live_pins, after.live_mappings, after.open_files),
            (0, 0, 0)
        );
        // Handles and the gdr_t are gone.
        assert_eq!(close(g), libc::EINVAL);
        let mut i = gdr_info_v2_t::default();
        assert_eq!(
            // SAFETY: valid out pointer.
            unsafe { gdr_get_info_v2(g, handles[1], &mut i) },
            libc::EINVAL
        );
    }

    #[test]
    #[ignore = "run by the outer tests under the emulator"]
    fn forked_child() {
        if !active() {
            return;
        }
        let base = gpu_buffer(2);
        let g = open();
        assert!(!g.is_null());
        let (rc, mh) = pin2(g, base, GPU_PAGE, 0);
        assert_eq!(rc, 0);
        let before = counters().ioctls;
        // SAFETY: the child only calls the library and _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let (r1, _) = pin2(g, base + GPU_PAGE as u64, GPU_PAGE, 0);
            let (r2, _) = map(g, mh, GPU_PAGE, 0);
            let r3 = unpin(g, mh);
            let r4 = close(g);
            let ok = [r1, r2, r3, r4] == [libc::EACCES; 4];
            // SAFETY: ends the child without running the parent's atexit handlers.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: valid out pointer.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child status {status}"
        );
        assert_eq!(counters().ioctls, before, "the child reached the driver");
        // The parent is unaffected.
        let (rc, p) = map(g, mh, GPU_PAGE, 0);
        assert_eq!(rc, 0);
        assert_eq!(unmap(g, mh, p, GPU_PAGE), 0);
        assert_eq!(close(g), 0);
    }
}
