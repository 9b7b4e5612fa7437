//! gdrcopy's own calls: pins device memory, maps it, copies through the mapping. The device
//! memory comes from the allocator here; any memory the backend maps (cudaMalloc, cuMemCreate)
//! is pinned the same way.
//!
//!     cargo run --example pin

use gdrapi_rs::{Allocator, Session};

fn main() -> Result<(), gdrapi_rs::Error> {
    let alloc = Allocator::open(0)?;
    let buf = alloc.alloc(1 << 20)?; // large: a pin of its own, at a 64 KiB boundary
    let session = Session::open()?;
    let pin = session.pin(buf.dev_ptr(), buf.len())?;
    let info = pin.info()?;
    let map = pin.map()?;
    let msg = b"through gdr_copy_to_mapping";
    map.write(4096, msg)?;
    let mut back = vec![0u8; msg.len()];
    buf.read(4096, &mut back)?;
    assert_eq!(&back[..], msg);
    println!(
        "pinned {:#x}+{} (GPU pages from {:#x}, {} bytes), mapped {:?} at {:p}, runtime {:?}, driver {:?}",
        pin.addr(),
        pin.len(),
        info.va,
        info.mapped_size,
        map.kind(),
        map.as_ptr(),
        gdrapi_rs::runtime_version()?,
        session.driver_version()?
    );
    Ok(())
}
