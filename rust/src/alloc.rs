//! Host-written GPU memory (`libgdrapi_ext.so.0`, `gdrapi_ext.h`): an [`Allocator`] per device
//! hands out [`HostWritten`] allocations, device memory with a CPU mapping of the same bytes,
//! small ones carved from one pinned chunk. Freed on drop.

use crate::error::Error;
use crate::sys::{self, check, Gdrx, GdrxInfo, GdrxMem, GdrxT};
use crate::MappingType;
use std::ffi::c_void;
use std::sync::Arc;

/// Which backend of `libgdrapi.so.2` an allocator's session uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// The gdrdrv kernel module (`/dev/gdrdrv`).
    Gdrdrv,
    /// The CUDA driver's DMA-BUF export, mapped by the CPU (CUDA 13.3+).
    DmaBuf,
    /// gdrapi-rs's Vulkan import (`GDRAPI_USE_VULKAN=1`, no kernel module).
    Vulkan,
    /// A value this crate does not know.
    Other(i32),
}

/// How an allocator allocates device memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Memory {
    /// `cuMemAlloc`.
    CuMemAlloc,
    /// `cuMemCreate`, exportable as a POSIX file descriptor.
    CuMemCreate,
    /// A value this crate does not know.
    Other(i32),
}

/// Options of [`Allocator::open_with`] (`GDRX_OPEN_*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Flags(u32);

impl Flags {
    /// The default: the memory the backend maps best.
    pub const DEFAULT: Flags = Flags(0);
    /// Allocate with `cuMemAlloc` (refused with [`Error::NotSupported`] on the Vulkan import).
    pub const CUMEMALLOC: Flags = Flags(1);

    /// The C value.
    pub fn bits(self) -> u32 {
        self.0
    }
}

impl std::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}

/// What [`Allocator::info`] reports (`gdrx_info_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AllocatorInfo {
    /// The CUDA device ordinal.
    pub device: i32,
    /// The session's backend.
    pub backend: Backend,
    /// How device memory is allocated.
    pub memory: Memory,
    /// The mappings' type ([`MappingType::None`] before the first allocation).
    pub mapping_type: MappingType,
    /// Bytes of one shared chunk.
    pub chunk_size: usize,
    /// The largest allocation carved from a shared chunk.
    pub small_max: usize,
    /// Live allocations.
    pub allocations: usize,
    /// Live pins: shared chunks plus large allocations.
    pub pins: usize,
    /// Bytes pinned.
    pub bytes_pinned: usize,
    /// Bytes of live allocations, each rounded up to 64.
    pub bytes_in_use: usize,
}

/// The open `gdrx_t`, closed when the allocator and all its allocations are dropped.
struct Inner {
    x: usize,
    lib: &'static Gdrx,
}

impl Inner {
    fn x(&self) -> GdrxT {
        self.x as GdrxT
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // SAFETY: this allocator's gdrx_t, closed once: no allocation of it is left.
        unsafe { (self.lib.close)(self.x()) };
    }
}

/// An allocator of host-written GPU memory on one device (`gdrx_t`).
///
/// `Send` and `Sync`: every function of `libgdrapi_ext.so.0` may be called concurrently.
///
/// ```
/// # fn main() -> Result<(), gdrapi_rs::Error> {
/// # if std::env::var_os("GDRAPI_RS_TEST").is_none() { return Ok(()); } // make test-rust-crate
/// use gdrapi_rs::Allocator;
///
/// let alloc = Allocator::open(0)?;
/// // A thousand 8-byte flags: one pin.
/// let flags: Vec<_> = (0..1000).map(|_| alloc.alloc(8)).collect::<Result<_, _>>()?;
/// assert_eq!(alloc.info()?.pins, 1);
/// for (i, f) in flags.iter().enumerate() {
///     f.write_u64(0, i as u64)?; // the GPU reads it at f.dev_ptr()
/// }
/// assert_eq!(flags[999].read_u64(0)?, 999);
/// # Ok(()) }
/// ```
pub struct Allocator {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Allocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allocator")
            .field("gdrx_t", &(self.inner.x as *const c_void))
            .finish()
    }
}

impl Allocator {
    /// Loads `libgdrapi_ext.so.0` (at the first call) and opens an allocator on CUDA device
    /// ordinal `device` (`gdrx_open`).
    pub fn open(device: i32) -> Result<Allocator, Error> {
        Allocator::open_with(device, Flags::DEFAULT)
    }

    /// As [`Allocator::open`], with [`Flags`].
    pub fn open_with(device: i32, flags: Flags) -> Result<Allocator, Error> {
        let lib = sys::gdrx()?;
        let mut x: GdrxT = std::ptr::null_mut();
        // SAFETY: a writable gdrx_t.
        check(unsafe { (lib.open)(&mut x, device, flags.bits()) })?;
        Ok(Allocator {
            inner: Arc::new(Inner { x: x as usize, lib }),
        })
    }

    /// `size` bytes aligned to 64 (a cache line).
    pub fn alloc(&self, size: usize) -> Result<HostWritten, Error> {
        self.alloc_aligned(size, 0)
    }

    /// `size` bytes aligned to `align` (a power of two up to 64 KiB; 0 or less than 64 means
    /// 64). The device address is aligned; the CPU address too, up to the host page size.
    pub fn alloc_aligned(&self, size: usize, align: usize) -> Result<HostWritten, Error> {
        let i = &self.inner;
        let mut mem = GdrxMem::default();
        // SAFETY: this allocator's gdrx_t and a writable gdrx_mem_t.
        check(unsafe { (i.lib.alloc)(i.x(), size, align, &mut mem) })?;
        Ok(HostWritten {
            alloc: i.clone(),
            mem,
        })
    }

    /// What the allocator holds and how it allocates (`gdrx_info`).
    pub fn info(&self) -> Result<AllocatorInfo, Error> {
        let i = &self.inner;
        let mut v = GdrxInfo::default();
        // SAFETY: this allocator's gdrx_t and a writable gdrx_info_t.
        check(unsafe { (i.lib.info)(i.x(), &mut v) })?;
        Ok(AllocatorInfo {
            device: v.device,
            backend: match v.backend {
                0 => Backend::Gdrdrv,
                1 => Backend::DmaBuf,
                2 => Backend::Vulkan,
                b => Backend::Other(b),
            },
            memory: match v.memory {
                0 => Memory::CuMemAlloc,
                1 => Memory::CuMemCreate,
                m => Memory::Other(m),
            },
            mapping_type: match v.mapping_type {
                0 => MappingType::None,
                1 => MappingType::WriteCombining,
                2 => MappingType::Caching,
                3 => MappingType::Device,
                t => MappingType::Other(t),
            },
            chunk_size: v.chunk_size,
            small_max: v.small_max,
            allocations: v.allocations,
            pins: v.pins,
            bytes_pinned: v.bytes_pinned,
            bytes_in_use: v.bytes_in_use,
        })
    }

    /// The live allocation that holds `addr` (a device address, or a CPU address as an
    /// integer): its device address and the offset of `addr` in it ([`Error::NotFound`] if
    /// none).
    pub fn lookup(&self, addr: u64) -> Result<(u64, usize), Error> {
        let i = &self.inner;
        let mut mem = GdrxMem::default();
        let mut offset = 0usize;
        // SAFETY: this allocator's gdrx_t, a writable gdrx_mem_t and size_t.
        check(unsafe { (i.lib.lookup)(i.x(), addr, &mut mem, &mut offset) })?;
        Ok((mem.dev_ptr, offset))
    }

    /// Closes the allocator: now, or, while allocations of it are alive, when the last of them
    /// is dropped. Dropping it does the same.
    pub fn close(self) {
        drop(self);
    }
}

/// Device memory the CPU writes and reads through a mapping of the same bytes (`gdrx_mem_t`);
/// freed when dropped. Owns a share of its allocator, so it may outlive the [`Allocator`]
/// value it came from.
///
/// `Send` and `Sync`: the copies are `gdrx_copy_to` / `gdrx_copy_from`, which take no lock
/// and may run on any number of threads at once; the bytes are device memory, not Rust
/// memory (see [`crate::Mapping`]).
pub struct HostWritten {
    alloc: Arc<Inner>,
    mem: GdrxMem,
}

// SAFETY: see the type's documentation; `mem` holds addresses as plain values, and the free
// at drop may run on any thread.
unsafe impl Send for HostWritten {}
// SAFETY: as above: `&HostWritten` only offers copies and queries.
unsafe impl Sync for HostWritten {}

impl std::fmt::Debug for HostWritten {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostWritten")
            .field("dev_ptr", &format_args!("{:#x}", self.mem.dev_ptr))
            .field("cpu_ptr", &self.mem.cpu_ptr)
            .field("len", &self.mem.size)
            .finish()
    }
}

impl HostWritten {
    /// The device address of the first byte (a `CUdeviceptr`), for kernels and CUDA calls.
    pub fn dev_ptr(&self) -> u64 {
        self.mem.dev_ptr
    }

    /// The CPU address of the first byte, for code that stores or loads itself (volatile
    /// accesses; after stores to a write-combining mapping, a store fence before telling the
    /// GPU).
    pub fn as_ptr(&self) -> *mut u8 {
        self.mem.cpu_ptr.cast()
    }

    /// The bytes allocated.
    pub fn len(&self) -> usize {
        self.mem.size
    }

    /// Whether no byte is allocated (never).
    pub fn is_empty(&self) -> bool {
        self.mem.size == 0
    }

    /// Copies `src` into the allocation at `offset` (`gdrx_copy_to`: ends with a store fence).
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<(), Error> {
        // SAFETY: this allocation's live gdrx_mem_t; `src` is a valid slice. The library checks
        // the range.
        check(unsafe {
            (self.alloc.lib.copy_to)(&self.mem, offset, src.as_ptr().cast(), src.len())
        })
    }

    /// Copies the allocation's bytes from `offset` into `dst` (`gdrx_copy_from`).
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), Error> {
        // SAFETY: as in `write`; `dst` is a valid, writable slice.
        check(unsafe {
            (self.alloc.lib.copy_from)(&self.mem, offset, dst.as_mut_ptr().cast(), dst.len())
        })
    }

    /// Writes the 8 bytes of `v` (native byte order) at `offset`: a flag the GPU reads.
    pub fn write_u64(&self, offset: usize, v: u64) -> Result<(), Error> {
        self.write(offset, &v.to_ne_bytes())
    }

    /// Reads 8 bytes at `offset` as a `u64` (native byte order): a flag the GPU wrote.
    pub fn read_u64(&self, offset: usize) -> Result<u64, Error> {
        let mut b = [0u8; 8];
        self.read(offset, &mut b)?;
        Ok(u64::from_ne_bytes(b))
    }

    /// Frees now (`gdrx_free`), with the library's answer; dropping does the same and ignores
    /// it.
    pub fn free(self) -> Result<(), Error> {
        let rc = self.release();
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is not used again and its `Drop` (a second free) does not run; its share
        // of the allocator is moved out once, and dropped.
        drop(unsafe { std::ptr::read(&me.alloc) });
        check(rc)
    }

    fn release(&self) -> std::ffi::c_int {
        // SAFETY: this allocation, freed once (by `free` or `drop`).
        unsafe { (self.alloc.lib.free)(self.alloc.x(), &self.mem) }
    }
}

impl Drop for HostWritten {
    fn drop(&mut self) {
        self.release();
    }
}
