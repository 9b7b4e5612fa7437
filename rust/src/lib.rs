//! Safe Rust API of gdrcopy's `libgdrapi.so.2` (GPUDirect RDMA copies: the CPU copies to and
//! from GPU memory through a mapping of it) and of gdrapi-rs's host-written GPU memory
//! (`libgdrapi_ext.so.0`).
//!
//! - [`Allocator`] / [`HostWritten`]: GPU memory the CPU writes with a store and the GPU
//!   reads (flags, doorbells, work queues, counters), and the reverse, in one call: a device
//!   pointer for kernels and a CPU mapping of the same bytes. Small allocations share one
//!   pinned chunk (a thousand 8-byte flags cost one pin); each is aligned to at least 64
//!   bytes. The memory is allocated the way the machine's backend can map it (gdrdrv,
//!   DMA-BUF, or with `GDRAPI_USE_VULKAN=1`, the Vulkan import that needs no kernel module).
//! - [`Session`] / [`Pin`] / [`Mapping`]: gdrcopy's own calls on device memory you already
//!   have: pin it, map it, copy through the mapping.
//!
//! Every handle is an owned value that gives its resource back when dropped (a mapping is
//! unmapped, a pin unpinned, an allocation freed, a session or allocator closed once nothing
//! made with it is left), and copies take and fill slices, bounds-checked. Errors are an
//! [`Error`] with the errno the C call returned ([`Error::errno`]). No `unsafe` is needed.
//!
//! # Host-written GPU memory
//!
//! ```
//! # fn main() -> Result<(), gdrapi_rs::Error> {
//! # if std::env::var_os("GDRAPI_RS_TEST").is_none() { return Ok(()); } // make test-rust-crate
//! use gdrapi_rs::Allocator;
//!
//! let alloc = Allocator::open(0)?; // CUDA device 0
//! let flag = alloc.alloc(8)?; // 8 bytes at a 64-byte aligned device address
//! flag.write_u64(0, 1)?; // a store through the BAR, then a store fence
//! let dev_ptr = flag.dev_ptr(); // what a kernel reads, e.g. as a volatile u64*
//! assert_eq!(flag.read_u64(0)?, 1); // a read through PCIe (what the GPU wrote, if it did)
//! # let _ = dev_ptr;
//! # Ok(()) }
//! ```
//!
//! # Requirements and threads
//!
//! The libraries are loaded at run time by soname (`libgdrapi.so.2`, `libgdrapi_ext.so.0`:
//! gdrapi-rs's packages install them; or `LD_LIBRARY_PATH`), so this crate builds anywhere;
//! [`Session`] also works with NVIDIA's `libgdrapi.so.2`. Every type is `Send` and `Sync`:
//! the libraries are thread-safe (with NVIDIA's library, which is not, the crate serializes
//! every call but the copies). In a child process made by `fork`, handles of the parent fail
//! ([`Error::PermissionDenied`], [`Error::InvalidArgument`]) and its mappings are absent.
//!
//! The examples run on gdrapi-rs's GPU emulator in its CI (`make test-rust-crate`, which sets
//! `GDRAPI_RS_TEST=1`); without that variable they only build.

mod alloc;
mod error;
mod session;
mod sys;

pub use alloc::{Allocator, AllocatorInfo, Backend, Flags, HostWritten, Memory};
pub use error::Error;
pub use session::{
    library_is_thread_safe, runtime_version, Mapping, MappingType, Pin, PinInfo, Session,
};

/// The version of the loaded `libgdrapi_ext.so.0` (`gdrx_runtime_get_version`).
pub fn ext_runtime_version() -> Result<(i32, i32), Error> {
    let lib = sys::gdrx()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two writable ints.
    unsafe { (lib.runtime_get_version)(&mut major, &mut minor) };
    Ok((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread-safety the documentation states, held at compile time.
    #[test]
    fn every_type_is_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Session>();
        send_sync::<Pin>();
        send_sync::<Mapping<'static>>();
        send_sync::<Allocator>();
        send_sync::<HostWritten>();
        send_sync::<Error>();
    }

    #[test]
    fn flags_combine() {
        assert_eq!((Flags::DEFAULT | Flags::CUMEMALLOC).bits(), 1);
        assert_eq!(Flags::default(), Flags::DEFAULT);
    }
}
