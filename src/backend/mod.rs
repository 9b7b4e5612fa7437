//! Backends: the mechanisms that pin GPU memory and map it into the process.
//!
//! [`gdrdrv`] talks to the `/dev/gdrdrv` kernel driver with ioctl and mmap; [`dmabuf`] uses
//! the CUDA driver's dma-buf export where the driver lets the CPU mmap it; [`vulkan`] (opt-in)
//! imports CUDA VMM memory exported as a file descriptor into Vulkan and maps it. The session
//! ([`crate::session`]) owns the bookkeeping (handles, mapped state, counters); a backend only
//! carries out one operation at a time and reports what the driver answered. Backends must be
//! callable from many threads at once.

pub mod cuda;
pub(crate) mod dl;
pub mod dmabuf;
pub mod fixed;
pub mod gdrdrv;
pub mod nvml;
pub mod vulkan;

use crate::error::Result;
use crate::ffi::types::{
    GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE, GDR_ATTR_USE_PERSISTENT_MAPPING,
    GDR_ATTR_USING_DMA_BUF_MMAP, GDR_MAPPING_TYPE_CACHING, GDR_MAPPING_TYPE_DEVICE,
    GDR_MAPPING_TYPE_NONE, GDR_MAPPING_TYPE_WC,
};

/// CPU mapping type, numerically equal to `gdr_mapping_type_t` and the driver's `gdr_mr_type_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum MappingType {
    None = GDR_MAPPING_TYPE_NONE,
    WriteCombining = GDR_MAPPING_TYPE_WC,
    Caching = GDR_MAPPING_TYPE_CACHING,
    Device = GDR_MAPPING_TYPE_DEVICE,
}

impl MappingType {
    /// The type for a raw driver or C value (`gdr_mapping_type_t`, `gdr_map_flags_t`);
    /// `None` for anything unknown.
    pub fn from_raw(v: u32) -> Option<MappingType> {
        match v {
            GDR_MAPPING_TYPE_NONE => Some(MappingType::None),
            GDR_MAPPING_TYPE_WC => Some(MappingType::WriteCombining),
            GDR_MAPPING_TYPE_CACHING => Some(MappingType::Caching),
            GDR_MAPPING_TYPE_DEVICE => Some(MappingType::Device),
            _ => None,
        }
    }
}

/// Which backend a session uses; the value stored at offset 40 of `struct gdr` (upstream's
/// `cache_backend`: 0 = gdrdrv, 1 = DMA-BUF; 2, the Vulkan import, is this library's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum BackendKind {
    Gdrdrv = gdrapi_abi::gdr::CACHE_BACKEND_GDRDRV,
    DmaBuf = gdrapi_abi::gdr::CACHE_BACKEND_DMABUF,
    Vulkan = gdrapi_abi::gdr::CACHE_BACKEND_VULKAN,
}

/// What `gdr_pin_buffer(_v2)` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinRequest {
    /// Device virtual address, as the caller gave it (not aligned).
    pub addr: u64,
    /// Size in bytes, as the caller gave it.
    pub size: u64,
    /// `gdr_pin_flags_t` bits as the caller gave them.
    pub flags: u32,
    /// P2P tokens from `gdr_pin_buffer` (v1 API); zero from v2.
    pub p2p_token: u64,
    /// The VA space token that goes with `p2p_token`; zero from v2.
    pub va_space: u32,
}

/// A pinned buffer, as the backend describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pin {
    /// gdrdrv: the kernel handle (also the mmap page offset). DMA-BUF: the dma-buf fd.
    pub handle: u64,
    /// Start of the pinned, aligned range (64 KiB aligned for gdrdrv, page aligned for DMA-BUF).
    pub va: u64,
    /// Length of the pinned, aligned range.
    pub mapped_size: u64,
    /// `addr - va`: where the caller's buffer starts inside the range.
    pub page_offset: u64,
    /// DMA-BUF: the mapping type decided at pin time. gdrdrv: [`MappingType::None`].
    pub fixed_type: MappingType,
}

/// What `gdr_get_info(_v2)` reports for a pinned buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Info {
    /// Start of the pinned range (GPU-page aligned).
    pub va: u64,
    /// Pinned bytes from `va`.
    pub mapped_size: u64,
    /// GPU page size in bytes.
    pub page_size: u32,
    /// Deprecated timestamp the driver reports.
    pub tm_cycles: u64,
    /// Deprecated TSC rate the driver reports (its `tsc_khz`).
    pub cycles_per_ms: u32,
    /// True when a CPU mapping exists.
    pub mapped: bool,
    /// True when that mapping is write-combining.
    pub wc_mapping: bool,
    /// The current mapping type, as a raw `gdr_mapping_type_t` value.
    pub mapping_type: u32,
}

/// A live CPU mapping made by [`Backend::map`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    /// Address returned by mmap: the start of the aligned pinned range.
    pub addr: usize,
    /// Length passed to mmap (rounded up to the host page size).
    pub len: usize,
    /// The mapping type the backend granted (never [`MappingType::None`]).
    pub kind: MappingType,
}

/// Attributes of `gdr_get_attribute`, numerically equal to `gdr_attr_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Attr {
    UsePersistentMapping = GDR_ATTR_USE_PERSISTENT_MAPPING,
    SupportPinFlagForcePcie = GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE,
    UsingDmaBufMmap = GDR_ATTR_USING_DMA_BUF_MMAP,
}

impl Attr {
    /// The attribute for a raw `gdr_attr_t`; `None` for anything unknown.
    pub fn from_raw(v: u32) -> Option<Attr> {
        match v {
            GDR_ATTR_USE_PERSISTENT_MAPPING => Some(Attr::UsePersistentMapping),
            GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE => Some(Attr::SupportPinFlagForcePcie),
            GDR_ATTR_USING_DMA_BUF_MMAP => Some(Attr::UsingDmaBufMmap),
            _ => None,
        }
    }
}

/// One backend instance, owned by one session (`gdr_t`). Every method may be called from
/// several threads at once; the session guarantees it never passes a [`Pin`] that was
/// already unpinned.
pub trait Backend: Send + Sync {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;
    /// The driver fd for `struct gdr`'s `fd` field (-1 for DMA-BUF).
    fn fd(&self) -> i32;
    /// The gdrdrv version word (`major << 16 | minor`), 0 for DMA-BUF.
    fn driver_version_word(&self) -> u32;
    /// Pins `req`; the error is the driver's answer.
    fn pin(&self, req: &PinRequest) -> Result<Pin>;
    /// Gives the pinned pages back. Called only when no mapping of `pin` remains live
    /// through this library.
    fn unpin(&self, pin: &Pin) -> Result<()>;
    /// `gdr_get_callback_flag`: true once the memory behind the pin was invalidated.
    fn callback_flag(&self, pin: &Pin) -> Result<bool>;
    /// `gdr_get_info_v2`.
    fn info(&self, pin: &Pin, current: Option<&Mapping>) -> Result<Info>;
    /// The legacy `gdr_get_info` (v1 ioctl on gdrdrv).
    fn info_v1(&self, pin: &Pin, current: Option<&Mapping>) -> Result<Info>;
    /// Maps `size` bytes (already rounded to the host page) of `pin` with the requested type
    /// (`None` = the default). Undoes its own work on failure.
    fn map(&self, pin: &Pin, size: usize, request: MappingType) -> Result<Mapping>;
    /// Removes a mapping made by [`Backend::map`].
    fn unmap(&self, pin: &Pin, mapping: &Mapping) -> Result<()>;
    /// `gdr_get_attribute` for [`Attr::UsePersistentMapping`] and
    /// [`Attr::SupportPinFlagForcePcie`] (the session answers [`Attr::UsingDmaBufMmap`]).
    fn attribute(&self, attr: Attr) -> Result<i32>;
    /// `gdr_driver_get_version`: `(major, minor)`.
    fn driver_version(&self) -> Result<(i32, i32)>;
    /// Releases the backend (closes the fd, drops CUDA state). Called once, by `gdr_close`,
    /// after every pin was unpinned.
    fn close(&self) -> Result<()>;
}

/// The backend a session opened. Every call reaches it through [`Backend`], the one list of
/// what a backend does.
pub type Opened = Box<dyn Backend>;

/// Whether the caller forced the DMA-BUF backend: `GDRCOPY_USE_DMABUF_MMAP` is exactly "1",
/// read at every `gdr_open` as upstream does.
pub fn dmabuf_forced() -> bool {
    std::env::var_os("GDRCOPY_USE_DMABUF_MMAP").is_some_and(|v| v == "1")
}

/// Opens the backend `gdr_open` uses: gdrdrv unless DMA-BUF is forced, then DMA-BUF when
/// gdrdrv cannot be used, then, when the caller opted in ([`vulkan::requested`]), the Vulkan
/// import. Logs every refusal.
pub fn open() -> Result<Opened> {
    if !dmabuf_forced() {
        match gdrdrv::GdrDrv::open() {
            Ok(b) => {
                crate::gdr_info!("Using gdrdrv backend");
                return Ok(Box::new(b));
            }
            Err(_) => {
                crate::gdr_info!(
                    "gdrdrv is not installed or loaded; detecting if CUDA driver supports dmabuf mmap."
                );
            }
        }
    }
    let e = match dmabuf::DmaBuf::open() {
        Ok(b) => return Ok(Box::new(b)),
        Err(e) => e,
    };
    if !vulkan::requested() {
        crate::gdr_err!(
            "Error: gdrcopy requires gdrdrv or CUDA driver with dmabuf mmap support (at least one is required)"
        );
        crate::gdr_info!(
            "without either, GDRAPI_USE_VULKAN=1 maps memory from cuMemCreate with \
             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR through the Vulkan driver"
        );
        return Err(e);
    }
    match vulkan::VulkanImport::open() {
        Ok(b) => Ok(Box::new(b)),
        Err(e) => {
            crate::gdr_err!(
                "Error: gdrcopy requires gdrdrv, CUDA driver with dmabuf mmap support, or \
                 (GDRAPI_USE_VULKAN=1) a Vulkan driver that imports CUDA memory (at least one is required)"
            );
            Err(e)
        }
    }
}
