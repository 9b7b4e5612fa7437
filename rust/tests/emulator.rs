//! The crate over the C libraries, on gdrapi-rs's GPU emulator or a GPU: `make test-rust-crate`
//! runs these with `GDRAPI_RS_TEST=1` on each backend (`GDRAPI_RS_TEST_BACKEND`: gdrdrv,
//! dmabuf, vulkan). Without `GDRAPI_RS_TEST` every test returns at once: a plain `cargo test`
//! has neither the libraries nor a GPU.

use gdrapi_rs::{Allocator, Backend, Error, Flags, HostWritten, Memory, Session};
use std::sync::Mutex;

/// Whether to run; the tests of one binary run one at a time (they read the allocator's
/// figures, which another test's allocations would change).
fn enabled() -> Option<std::sync::MutexGuard<'static, ()>> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    std::env::var_os("GDRAPI_RS_TEST")?;
    Some(ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner()))
}

fn expected_backend() -> Option<Backend> {
    match std::env::var("GDRAPI_RS_TEST_BACKEND").ok()?.as_str() {
        "gdrdrv" => Some(Backend::Gdrdrv),
        "dmabuf" => Some(Backend::DmaBuf),
        "vulkan" => Some(Backend::Vulkan),
        _ => None,
    }
}

#[test]
fn the_allocator_gets_the_machines_backend() {
    let Some(_one) = enabled() else { return };
    let a = Allocator::open(0).expect("open");
    let i = a.info().expect("info");
    if let Some(b) = expected_backend() {
        assert_eq!(i.backend, b);
    }
    assert_eq!(i.device, 0);
    assert_eq!(i.memory, Memory::CuMemCreate);
    assert!(i.chunk_size >= 2 << 20);
    assert_eq!(i.small_max, i.chunk_size / 4);
    assert_eq!((i.pins, i.allocations), (0, 0));
    assert_eq!(gdrapi_rs::ext_runtime_version().unwrap(), (0, 1));
    assert_eq!(gdrapi_rs::runtime_version().unwrap(), (2, 6));
    assert!(gdrapi_rs::library_is_thread_safe().unwrap());
}

#[test]
fn a_thousand_flags_take_one_pin_and_go_with_it() {
    let Some(_one) = enabled() else { return };
    let a = Allocator::open(0).unwrap();
    let flags: Vec<HostWritten> = (0..1000).map(|_| a.alloc(8).unwrap()).collect();
    let i = a.info().unwrap();
    assert_eq!((i.pins, i.allocations, i.bytes_in_use), (1, 1000, 64_000));
    for (n, f) in flags.iter().enumerate() {
        assert_eq!(f.dev_ptr() % 64, 0);
        assert_eq!(f.as_ptr() as usize % 64, 0);
        assert_eq!(f.len(), 8);
        f.write_u64(0, n as u64 ^ 0x5a5a).unwrap();
    }
    for (n, f) in flags.iter().enumerate() {
        assert_eq!(f.read_u64(0).unwrap(), n as u64 ^ 0x5a5a);
    }
    assert_eq!(
        a.lookup(flags[10].dev_ptr() + 3).unwrap(),
        (flags[10].dev_ptr(), 3)
    );
    assert_eq!(
        a.lookup(flags[10].as_ptr() as u64 + 7).unwrap(),
        (flags[10].dev_ptr(), 7)
    );
    assert_eq!(a.lookup(flags[10].dev_ptr() + 8), Err(Error::NotFound));
    let last = flags.into_iter().enumerate().fold(None, |keep, (n, f)| {
        if n == 500 {
            Some(f)
        } else {
            drop(f);
            keep
        }
    });
    assert_eq!(a.info().unwrap().pins, 1, "one allocation keeps its chunk");
    last.unwrap().free().unwrap();
    let i = a.info().unwrap();
    assert_eq!((i.pins, i.allocations), (0, 0));
}

#[test]
fn errors_carry_the_errno() {
    let Some(_one) = enabled() else { return };
    let a = Allocator::open(0).unwrap();
    assert_eq!(a.alloc(0).unwrap_err(), Error::InvalidArgument);
    assert_eq!(a.alloc(0).unwrap_err().errno(), libc::EINVAL);
    assert_eq!(a.alloc_aligned(8, 3).unwrap_err(), Error::InvalidArgument);
    assert_eq!(
        a.alloc_aligned(8, 1 << 17).unwrap_err(),
        Error::InvalidArgument
    );
    assert_eq!(Allocator::open(4096).unwrap_err(), Error::NoDevice);
    assert_eq!(Allocator::open(-1).unwrap_err(), Error::InvalidArgument);
    let f = a.alloc(100).unwrap();
    assert_eq!(f.write(99, &[1, 2]).unwrap_err(), Error::InvalidArgument);
    assert_eq!(
        f.read(usize::MAX, &mut [0]).unwrap_err(),
        Error::InvalidArgument
    );
    f.write(99, &[1]).unwrap();
    f.write(100, &[]).unwrap();
    let aligned = a.alloc_aligned(100, 4096).unwrap();
    assert_eq!(aligned.dev_ptr() % 4096, 0);
    match Allocator::open_with(0, Flags::CUMEMALLOC) {
        Ok(b) => {
            assert_ne!(expected_backend(), Some(Backend::Vulkan));
            assert_eq!(b.info().unwrap().memory, Memory::CuMemAlloc);
            let m = b.alloc(8).unwrap();
            m.write_u64(0, 7).unwrap();
            assert_eq!(m.read_u64(0).unwrap(), 7);
        }
        Err(e) => {
            assert_eq!(e, Error::NotSupported);
            assert_eq!(expected_backend(), Some(Backend::Vulkan));
        }
    }
}

#[test]
fn allocations_outlive_the_allocator_value() {
    let Some(_one) = enabled() else { return };
    let a = Allocator::open(0).unwrap();
    let big = a.alloc(3 << 20).unwrap();
    assert_eq!(big.dev_ptr() % 65536, 0);
    assert_eq!(a.info().unwrap().pins, 1);
    a.close(); // closed with the last allocation
    let data: Vec<u8> = (0..big.len()).map(|i| (i * 7) as u8).collect();
    big.write(0, &data).unwrap();
    let mut back = vec![0u8; big.len()];
    big.read(0, &mut back).unwrap();
    assert_eq!(back, data);
    big.free().unwrap();
}

#[test]
fn a_session_pins_maps_and_copies() {
    let Some(_one) = enabled() else { return };
    let a = Allocator::open(0).unwrap();
    let buf = a.alloc(1 << 20).unwrap();
    let session = Session::open().unwrap();
    assert_eq!(
        session.uses_dma_buf().unwrap(),
        expected_backend() == Some(Backend::DmaBuf)
    );
    let (major, minor) = session.driver_version().unwrap();
    assert!(major == 2 && minor >= 4, "{major}.{minor}");
    let pin = session.pin(buf.dev_ptr(), buf.len()).unwrap();
    session.close(); // the pin keeps the session open
    let info = pin.info().unwrap();
    assert_eq!(info.va, buf.dev_ptr());
    assert!(!info.mapped);
    {
        let map = pin.map().unwrap();
        assert_eq!(map.len(), buf.len());
        assert!(pin.info().unwrap().mapped);
        assert_eq!(pin.map().unwrap_err(), Error::Again, "one mapping per pin");
        map.write(12345, b"pinned").unwrap();
        let mut back = [0u8; 6];
        buf.read(12345, &mut back).unwrap();
        assert_eq!(&back, b"pinned");
        buf.write(0, b"allocated").unwrap();
        let mut back = [0u8; 9];
        map.read(0, &mut back).unwrap();
        assert_eq!(&back, b"allocated");
        assert_eq!(
            map.write(map.len(), &[1]).unwrap_err(),
            Error::InvalidArgument
        );
        map.unmap().unwrap();
    }
    assert!(!pin.info().unwrap().mapped);
    drop(pin.map().unwrap()); // unmapped on drop
    pin.unpin().unwrap();
    let other = Session::open().unwrap();
    let refused = other.pin(0x1000, 4096).unwrap_err();
    assert!(refused.errno() > 0, "not device memory: {refused}");
}

#[test]
fn handles_are_shared_and_moved_across_threads() {
    let Some(_one) = enabled() else { return };
    let a = Allocator::open(0).unwrap();
    let shared = a.alloc(8 * 64).unwrap();
    let session = Session::open().unwrap();
    let buf = a.alloc(1 << 20).unwrap();
    let pin = session.pin(buf.dev_ptr(), buf.len()).unwrap();
    let map = pin.map().unwrap();
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (shared, map, a) = (&shared, &map, &a);
            s.spawn(move || {
                for r in 0..200u64 {
                    shared.write_u64(t as usize * 64, t << 32 | r).unwrap();
                    map.write(t as usize * 4096, &(t + r).to_ne_bytes())
                        .unwrap();
                    let mine = a.alloc(8 + r as usize).unwrap();
                    mine.write(0, &[t as u8; 8]).unwrap();
                    // Moved to another thread and freed there.
                    std::thread::spawn(move || drop(mine)).join().unwrap();
                }
            });
        }
    });
    for t in 0..8u64 {
        assert_eq!(shared.read_u64(t as usize * 64).unwrap(), t << 32 | 199);
        let mut b = [0u8; 8];
        map.read(t as usize * 4096, &mut b).unwrap();
        assert_eq!(u64::from_ne_bytes(b), t + 199);
    }
    drop(map);
    // A pin and an allocation moved to another thread and released there.
    std::thread::spawn(move || {
        drop(pin);
        drop(buf);
    })
    .join()
    .unwrap();
    assert_eq!(a.info().unwrap().allocations, 1);
}
