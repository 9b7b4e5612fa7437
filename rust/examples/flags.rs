//! A thousand flags the GPU reads, from one pin: allocates them, writes each, reads each back,
//! prints the allocator's figures. Run where libgdrapi_ext.so.0 is installed (or on gdrapi-rs's
//! emulator: make test-rust-crate runs it).
//!
//!     cargo run --example flags [-- DEVICE]

use gdrapi_rs::Allocator;

fn main() -> Result<(), gdrapi_rs::Error> {
    let device = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(0);
    let alloc = Allocator::open(device)?;
    let flags: Vec<_> = (0..1000)
        .map(|_| alloc.alloc(8))
        .collect::<Result<_, _>>()?;
    for (i, f) in flags.iter().enumerate() {
        f.write_u64(0, i as u64 * 3 + 1)?;
    }
    for (i, f) in flags.iter().enumerate() {
        assert_eq!(f.read_u64(0)?, i as u64 * 3 + 1, "flag {i}");
    }
    let info = alloc.info()?;
    println!(
        "1000 flags on device {} ({:?} backend, {:?} memory, {:?} mapping): {} pin(s), {} KiB pinned, first at {:#x}",
        info.device,
        info.backend,
        info.memory,
        info.mapping_type,
        info.pins,
        info.bytes_pinned >> 10,
        flags[0].dev_ptr()
    );
    Ok(())
}
