//! `libgdrapi_ext.so.0`: host-written GPU memory in one call (`include/gdrapi_ext.h`, whose
//! comment is the contract).
//!
//! Built on the public API of `libgdrapi.so.2` only (linked, `DT_NEEDED`), so that
//! libgdrapi's own exports stay gdrcopy's: an allocator ([`allocator`]) opens a `gdr_t`, reads
//! which backend it got, allocates device memory the way that backend can map ([`cuda`]:
//! `cuMemCreate` exportable as a POSIX fd, or `cuMemAlloc`), pins and maps it in chunks and
//! carves small allocations from them ([`extents`]); every live allocation is in a
//! process-wide registry ([`registry`]) that copies read without a lock. The C entries
//! ([`ffi`]) use libgdrapi's `entry!` macro, logging and errno table (`gdrapi-boundary`).

#[macro_use]
extern crate gdrapi_boundary;

pub mod allocator;
pub mod cuda;
pub mod error;
pub mod extents;
pub mod ffi;
pub mod gdr;
pub mod registry;
