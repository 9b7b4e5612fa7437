//! gdrcopy's API: a [`Session`] (`gdr_t`) pins device memory ([`Pin`], unpinned on drop) and a
//! pin is mapped into the process ([`Mapping`], unmapped on drop), through which the CPU copies.

use crate::error::Error;
use crate::sys::{self, check, Gdr, GdrT, InfoV2, MemHandle};
use std::ffi::{c_int, c_void};
use std::marker::PhantomData;
use std::sync::Arc;

/// `GDR_ATTR_USING_DMA_BUF_MMAP`.
const ATTR_USING_DMA_BUF_MMAP: c_int = 3;

/// The version of the loaded `libgdrapi.so.2` (`gdr_runtime_get_version`): `(2, 6)` for
/// gdrapi-rs and gdrcopy 2.6.
pub fn runtime_version() -> Result<(i32, i32), Error> {
    let lib = sys::gdr()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two writable ints.
    unsafe { (lib.runtime_get_version)(&mut major, &mut minor) };
    Ok((major, minor))
}

/// Whether the loaded `libgdrapi.so.2` is gdrapi-rs's, whose every function may be called
/// concurrently. With NVIDIA's (not thread-safe), this crate serializes every call on it
/// except the copies, so that the types stay `Send` and `Sync` either way.
pub fn library_is_thread_safe() -> Result<bool, Error> {
    Ok(sys::gdr()?.thread_safe)
}

/// How a [`Mapping`] maps device memory (`gdr_mapping_type_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MappingType {
    /// Not mapped.
    None,
    /// Write-combining (the usual on x86: stores are buffered, reads are uncached and slow).
    WriteCombining,
    /// Cached (coherent platforms such as Grace Hopper).
    Caching,
    /// Device (uncached) memory.
    Device,
    /// A value this crate does not know.
    Other(i32),
}

impl MappingType {
    fn from_raw(v: i32) -> MappingType {
        match v {
            0 => MappingType::None,
            1 => MappingType::WriteCombining,
            2 => MappingType::Caching,
            3 => MappingType::Device,
            v => MappingType::Other(v),
        }
    }
}

/// What `gdr_get_info_v2` says of a [`Pin`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinInfo {
    /// Start of the pinned range: the pin's address rounded down to the GPU page (64 KiB).
    pub va: u64,
    /// Bytes pinned from `va`.
    pub mapped_size: u64,
    /// The GPU page size.
    pub page_size: u32,
    /// Whether the pin is mapped.
    pub mapped: bool,
    /// Whether that mapping is write-combining.
    pub wc_mapping: bool,
    /// The mapping's type.
    pub mapping_type: MappingType,
}

/// The open `gdr_t`, closed when the session and every pin made with it are dropped.
struct Inner {
    g: usize,
    lib: &'static Gdr,
}

impl Inner {
    fn g(&self) -> GdrT {
        self.g as GdrT
    }

    /// Runs a call other than a copy, serialized when the library is not thread-safe.
    fn call<T>(&self, f: impl FnOnce() -> T) -> T {
        let _held = self.lib.serialize.hold(!self.lib.thread_safe);
        f()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // SAFETY: this session's gdr_t, closed once: no pin or mapping of it is left (they hold
        // this `Inner`).
        self.call(|| unsafe { (self.lib.close)(self.g()) });
    }
}

/// A session of gdrcopy's library (`gdr_t`): opens the backend (gdrdrv, DMA-BUF, or the Vulkan
/// import of `GDRAPI_USE_VULKAN=1`) and pins device memory.
///
/// `Send` and `Sync`: every function of gdrapi-rs's library may be called concurrently on one
/// `gdr_t` (with NVIDIA's, the crate serializes the calls).
///
/// ```
/// # fn main() -> Result<(), gdrapi_rs::Error> {
/// # if std::env::var_os("GDRAPI_RS_TEST").is_none() { return Ok(()); } // make test-rust-crate
/// use gdrapi_rs::{Allocator, Session};
///
/// // Device memory to pin: here from the allocator (a large allocation has a GPU page of its
/// // own); any cudaMalloc or cuMemCreate memory the backend maps will do.
/// let alloc = Allocator::open(0)?;
/// let buf = alloc.alloc(1 << 20)?;
///
/// let session = Session::open()?;
/// let pin = session.pin(buf.dev_ptr(), buf.len())?;
/// let map = pin.map()?;
/// map.write(64, b"hello")?;
/// let mut back = [0u8; 5];
/// map.read(64, &mut back)?;
/// assert_eq!(&back, b"hello");
/// buf.read(64, &mut back)?; // the same bytes through the allocator's own mapping
/// assert_eq!(&back, b"hello");
/// # Ok(()) }
/// ```
pub struct Session {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("gdr_t", &(self.inner.g as *const c_void))
            .finish()
    }
}

impl Session {
    /// Loads `libgdrapi.so.2` (at the first call) and opens a session (`gdr_open`).
    pub fn open() -> Result<Session, Error> {
        let lib = sys::gdr()?;
        let _held = lib.serialize.hold(!lib.thread_safe);
        // SAFETY: gdr_open has no preconditions.
        let g = unsafe { (lib.open)() };
        if g.is_null() {
            return Err(Error::NoBackend);
        }
        Ok(Session {
            inner: Arc::new(Inner { g: g as usize, lib }),
        })
    }

    /// Pins `size` bytes of device memory at device address `addr` (`gdr_pin_buffer`). The
    /// pinned range is rounded out to GPU pages (64 KiB); it can be mapped when `addr` is
    /// 64 KiB aligned (gdrdrv's rule, which every backend keeps).
    pub fn pin(&self, addr: u64, size: usize) -> Result<Pin, Error> {
        let inner = &self.inner;
        let mut handle = MemHandle::default();
        // SAFETY: this session's gdr_t and a writable handle; the library checks the range.
        let rc = inner.call(|| unsafe {
            (inner.lib.pin_buffer)(inner.g(), addr as _, size, 0, 0, &mut handle)
        });
        check(rc)?;
        Ok(Pin {
            session: inner.clone(),
            handle,
            addr,
            size,
        })
    }

    /// The gdrdrv interface version the backend provides (`gdr_driver_get_version`).
    pub fn driver_version(&self) -> Result<(i32, i32), Error> {
        let inner = &self.inner;
        let (mut major, mut minor) = (0, 0);
        // SAFETY: this session's gdr_t and two writable ints.
        check(inner.call(|| unsafe {
            (inner.lib.driver_get_version)(inner.g(), &mut major, &mut minor)
        }))?;
        Ok((major, minor))
    }

    /// Whether the session maps through the CUDA driver's DMA-BUF export
    /// (`GDR_ATTR_USING_DMA_BUF_MMAP`).
    pub fn uses_dma_buf(&self) -> Result<bool, Error> {
        let inner = &self.inner;
        let mut v = 0;
        // SAFETY: this session's gdr_t and a writable int.
        check(inner.call(|| unsafe {
            (inner.lib.get_attribute)(inner.g(), ATTR_USING_DMA_BUF_MMAP, &mut v)
        }))?;
        Ok(v != 0)
    }

    /// Closes the session: now, or, while pins made with it are alive, when the last of them
    /// is dropped (the session's `gdr_t` is shared by its pins). Dropping it does the same.
    pub fn close(self) {
        drop(self);
    }
}

/// Pinned device memory (`gdr_mh_t`); unpinned when dropped. Owns a share of its session, so
/// it may outlive the [`Session`] value it came from.
///
/// `Send` and `Sync`: it is a handle the library checks on every use.
pub struct Pin {
    session: Arc<Inner>,
    handle: MemHandle,
    addr: u64,
    size: usize,
}

impl std::fmt::Debug for Pin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pin")
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("size", &self.size)
            .finish()
    }
}

impl Pin {
    /// The device address that was pinned.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// The bytes that were pinned from [`Pin::addr`].
    pub fn len(&self) -> usize {
        self.size
    }

    /// Whether no byte was pinned (never: a pin of 0 bytes is refused).
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// What the library reports of the pin (`gdr_get_info_v2`).
    pub fn info(&self) -> Result<PinInfo, Error> {
        let s = &self.session;
        let mut i = InfoV2::default();
        // SAFETY: this pin's session and handle, and a writable gdr_info_v2_t.
        check(s.call(|| unsafe { (s.lib.get_info_v2)(s.g(), self.handle, &mut i) }))?;
        Ok(PinInfo {
            va: i.va,
            mapped_size: i.mapped_size,
            page_size: i.page_size,
            mapped: i.bits & 1 != 0,
            wc_mapping: i.bits & 2 != 0,
            mapping_type: MappingType::from_raw(i.mapping_type),
        })
    }

    /// Maps the pinned bytes into the process (`gdr_map`); one mapping per pin at a time
    /// ([`Error::Again`] for a second).
    pub fn map(&self) -> Result<Mapping<'_>, Error> {
        let s = &self.session;
        let info = self.info()?;
        let lead = usize::try_from(self.addr - info.va).map_err(|_| Error::InvalidArgument)?;
        let len = lead.checked_add(self.size).ok_or(Error::InvalidArgument)?;
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: this pin's session and handle; `p` is writable.
        check(s.call(|| unsafe { (s.lib.map)(s.g(), self.handle, &mut p, len) }))?;
        let kind = self
            .info()
            .map(|i| i.mapping_type)
            .unwrap_or(MappingType::None);
        Ok(Mapping {
            pin: self,
            base: p as usize,
            map_len: len,
            start: p as usize + lead,
            len: self.size,
            kind,
            _not_thread_bound: PhantomData,
        })
    }

    /// Unpins now (`gdr_unpin_buffer`), with the library's answer; dropping does the same and
    /// ignores it.
    pub fn unpin(self) -> Result<(), Error> {
        let rc = self.release();
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is not used again and its `Drop` (a second unpin) does not run; its
        // share of the session is moved out once, and dropped.
        drop(unsafe { std::ptr::read(&me.session) });
        check(rc)
    }

    fn release(&self) -> c_int {
        let s = &self.session;
        // SAFETY: this pin's handle, unpinned once (by `unpin` or `drop`); no mapping of it is
        // left (a mapping borrows the pin).
        s.call(|| unsafe { (s.lib.unpin_buffer)(s.g(), self.handle) })
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        self.release();
    }
}

/// A CPU mapping of a [`Pin`] (from `gdr_map`); unmapped when dropped. Offsets count from the
/// pinned address.
///
/// `Send` and `Sync`: copies through one mapping may run on any number of threads at once.
/// They are `gdr_copy_to_mapping` / `gdr_copy_from_mapping`, which take no lock and touch no
/// state of the library but the handle they check; the bytes they move are device memory
/// behind a PCIe BAR, not Rust memory, so two threads writing the same bytes race as two
/// writers of one file do (the last write wins), with no undefined behaviour. The mapping
/// cannot outlive its pin:
///
/// ```compile_fail
/// # fn f(session: &gdrapi_rs::Session) -> Result<(), gdrapi_rs::Error> {
/// let pin = session.pin(0x7f00_0000_0000, 65536)?;
/// let map = pin.map()?;
/// drop(pin); // error: `pin` is borrowed by `map`
/// map.write(0, &[1])?;
/// # Ok(()) }
/// ```
pub struct Mapping<'pin> {
    pin: &'pin Pin,
    /// What gdr_map returned, and the length mapped.
    base: usize,
    map_len: usize,
    /// The CPU address of the pinned address, and the bytes from it.
    start: usize,
    len: usize,
    kind: MappingType,
    _not_thread_bound: PhantomData<*mut u8>,
}

// SAFETY: see the type's documentation: the library's copies are thread-safe and lock-free,
// the mapping's addresses are plain values, and the unmap at drop may run on any thread.
unsafe impl Send for Mapping<'_> {}
// SAFETY: as above: `&Mapping` only offers copies and queries.
unsafe impl Sync for Mapping<'_> {}

impl std::fmt::Debug for Mapping<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapping")
            .field("ptr", &(self.start as *const u8))
            .field("len", &self.len)
            .field("kind", &self.kind)
            .finish()
    }
}

impl Mapping<'_> {
    /// The CPU address of the pinned address, for code that stores or loads itself
    /// (volatile accesses, with a store fence after stores to a write-combining mapping).
    pub fn as_ptr(&self) -> *mut u8 {
        self.start as *mut u8
    }

    /// The bytes mapped from [`Mapping::as_ptr`].
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no byte is mapped (never).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The mapping's type.
    pub fn kind(&self) -> MappingType {
        self.kind
    }

    fn range(&self, offset: usize, n: usize) -> Result<usize, Error> {
        match offset.checked_add(n) {
            Some(end) if end <= self.len => Ok(self.start + offset),
            _ => Err(Error::InvalidArgument),
        }
    }

    /// Copies `src` to the device memory at `offset` (`gdr_copy_to_mapping`: write-combining
    /// stores, then a store fence, so the bytes are on their way when it returns).
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<(), Error> {
        let dst = self.range(offset, src.len())?;
        let s = &self.pin.session;
        // SAFETY: `[dst, +len)` lies in this live mapping (checked above, and again by the
        // library); `src` is a valid slice.
        check(unsafe {
            (s.lib.copy_to_mapping)(
                self.pin.handle,
                dst as *mut c_void,
                src.as_ptr().cast(),
                src.len(),
            )
        })
    }

    /// Copies device memory at `offset` into `dst` (`gdr_copy_from_mapping`).
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), Error> {
        let src = self.range(offset, dst.len())?;
        let s = &self.pin.session;
        // SAFETY: as in `write`; `dst` is a valid, writable slice.
        check(unsafe {
            (s.lib.copy_from_mapping)(
                self.pin.handle,
                dst.as_mut_ptr().cast(),
                src as *const c_void,
                dst.len(),
            )
        })
    }

    /// Unmaps now (`gdr_unmap`), with the library's answer; dropping does the same and ignores
    /// it.
    pub fn unmap(self) -> Result<(), Error> {
        let rc = self.release();
        std::mem::forget(self);
        check(rc)
    }

    fn release(&self) -> c_int {
        let s = &self.pin.session;
        // SAFETY: the mapping gdr_map made for this pin, unmapped once.
        s.call(|| unsafe {
            (s.lib.unmap)(
                s.g(),
                self.pin.handle,
                self.base as *mut c_void,
                self.map_len,
            )
        })
    }
}

impl Drop for Mapping<'_> {
    fn drop(&mut self) {
        self.release();
    }
}
