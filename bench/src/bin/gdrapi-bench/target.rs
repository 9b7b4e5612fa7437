//! Where the "device" side of a timed copy lives. A target hands out one mapping-side buffer
//! and says which mapping type the copy engine should treat it as; the rest of the benchmark
//! does not care whether it is plain memory, a mapping made through a libgdrapi (on the
//! emulator or a real driver), or CUDA write-combined host memory ([`HostWc`]).

use std::ptr::NonNull;

use gdrapi::backend::MappingType;
use gdrapi::sys;
use gdrapi_bench::cuda::HostMemory;

/// A mapping-side buffer for timed copies.
pub trait Target {
    /// Short description for the table header.
    fn describe(&self) -> String;
    /// Appended to table titles to tell this target's tables from the default one's
    /// (empty for the default).
    fn tag(&self) -> &'static str {
        ""
    }
    /// Start of the buffer (at least 64-byte aligned).
    fn ptr(&self) -> *mut u8;
    /// Usable length in bytes.
    fn len(&self) -> usize;
    /// The mapping type copies should assume.
    fn kind(&self) -> MappingType;
}

/// Page-aligned anonymous memory, treated as a mapping of a chosen type (write-combining
/// unless [`Plain::with_kind`] says otherwise).
pub struct Plain {
    ptr: NonNull<u8>,
    len: usize,
    kind: MappingType,
}

impl Plain {
    /// Maps `len` bytes (rounded up to pages) of zero-filled memory, touched so that the first
    /// timed copy does not pay for page faults.
    pub fn new(len: usize) -> Result<Plain, String> {
        let len = sys::round_up(len.max(1), sys::page_size()).ok_or("size out of range")?;
        let p = sys::anonymous_pages(len).map_err(|e| format!("{len} bytes: {e}"))?;
        let ptr = NonNull::new(p).ok_or("mmap returned NULL")?;
        // SAFETY: the mapping is writable for `len` bytes.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0x5c, len) };
        Ok(Plain {
            ptr,
            len,
            kind: MappingType::WriteCombining,
        })
    }

    /// The same memory, treated as a mapping of type `kind`.
    pub fn with_kind(mut self, kind: MappingType) -> Plain {
        self.kind = kind;
        self
    }

    /// The whole buffer as a slice.
    pub fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: readable and writable for `len` bytes while `self` lives; `&mut self`
        // makes the view exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Plain {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

impl Target for Plain {
    fn describe(&self) -> String {
        format!(
            "ordinary memory ({} MiB) treated as a WC mapping",
            self.len >> 20
        )
    }
    fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    fn len(&self) -> usize {
        self.len
    }
    fn kind(&self) -> MappingType {
        self.kind
    }
}

/// CUDA write-combined host memory ([`gdrapi_bench::hostwc`]) as a target.
pub struct HostWc<'a> {
    mem: &'a HostMemory<'a>,
    kind: MappingType,
}

impl<'a> HostWc<'a> {
    /// `mem`, treated as a mapping of type `kind`.
    pub fn new(mem: &'a HostMemory<'a>, kind: MappingType) -> HostWc<'a> {
        HostWc { mem, kind }
    }
}

impl Target for HostWc<'_> {
    fn describe(&self) -> String {
        format!(
            "CUDA write-combined host memory (cuMemHostAlloc), {} bytes",
            crate::human(self.mem.len())
        )
    }
    fn tag(&self) -> &'static str {
        " [cuMemHostAlloc WC]"
    }
    fn ptr(&self) -> *mut u8 {
        self.mem.as_ptr()
    }
    fn len(&self) -> usize {
        self.mem.len()
    }
    fn kind(&self) -> MappingType {
        self.kind
    }
}
