//! Vulkan-import backend: GPU mappings with no kernel module and a CUDA driver of any version
//! from 11.4 on, for memory that CUDA can export as a file descriptor. The first pin in a
//! `cuMemCreate` allocation (found with `cuMemRetainAllocationHandle`) exports it
//! (`cuMemExportToShareableHandle`, `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`) and imports the
//! fd into the Vulkan device with the same UUID (`VK_KHR_external_memory_fd`) as memory of
//! the type that maps VRAM through the BAR. Every later pin in that allocation shares the
//! import, which is freed with the last of them: an import costs time and BAR1 in proportion
//! to the whole allocation. The first map of a pin in it maps the whole allocation once
//! (`vkMapMemory`) with no access, and each map opens its handle's range ([`view`]). The
//! import holds the physical memory until the last unpin, whatever CUDA does with it meanwhile.
//!
//! Selection (in [`super::open`]): opt-in with `GDRAPI_USE_VULKAN=1`, tried when neither
//! gdrdrv nor DMA-BUF mmap serves. Memory that cannot be exported (`cuMemAlloc`, VMM memory
//! without the POSIX-fd handle type) is refused with EINVAL and a log line that says how to
//! allocate instead. Every other rule follows gdrdrv, so that callers see one behaviour:
//!
//! - a pin covers whole 64 KiB GPU pages (`va` rounded down, the end rounded up), which must
//!   lie inside one allocation; `gdr_get_info` reports them with a 64 KiB `page_size`;
//! - a pin whose address is not 64 KiB aligned pins but does not map (EINVAL), a shorter
//!   map maps the first bytes, and a second map of a handle is refused (the session's EAGAIN);
//! - an access after `gdr_unmap` faults (SIGSEGV) unless another handle's mapping covers the
//!   same bytes; two handles of the same range map at the same address;
//! - the mapping type is fixed by the memory type: write-combining (the BAR), or cached where
//!   the only host-visible device-local type is (coherent platforms); asking for another is
//!   EINVAL, as on the DMA-BUF backend;
//! - mappings are marked `MADV_DONTFORK` (gdrdrv's are `VM_DONTCOPY`);
//! - `gdr_get_callback_flag` is always 0 (the import keeps the memory, so nothing is ever
//!   invalidated), `GDR_ATTR_USE_PERSISTENT_MAPPING` and `GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE`
//!   are 1, `GDR_ATTR_USING_DMA_BUF_MMAP` 0, and `gdr_driver_get_version` returns 0 with 2.6,
//!   the gdrdrv interface level the backend provides.

mod driver;
mod view;

use super::cuda::types::{
    status, CUdevice, CUdeviceptr, CUmemGenericAllocationHandle,
    MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
};
use super::cuda::{self, Contexts, CuError, Driver};
use super::{fixed, Attr, Backend, BackendKind, Info, Mapping, MappingType, Pin, PinRequest};
use crate::error::{Error, Result};
use driver::{Device, Failure, Instance, PhysicalDevice, VkError};
use gdrapi_abi::vk;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::OnceLock;
use view::View;

/// The GPU page: pins cover whole ones, as gdrdrv's do.
const GPU_PAGE: u64 = gdrapi_abi::gdrdrv::GPU_PAGE_SIZE;

/// The version [`Backend::driver_version`] reports (see the module documentation).
const REPORTED_DRIVER_VERSION: (i32, i32) = (2, 6);

/// Whether the caller opted in: `GDRAPI_USE_VULKAN` is exactly "1", read at every `gdr_open`.
pub fn requested() -> bool {
    std::env::var_os("GDRAPI_USE_VULKAN").is_some_and(|v| v == "1")
}

/// One CUDA device and the Vulkan device with its UUID.
struct Gpu {
    /// The CUDA ordinal.
    ordinal: i32,
    /// The matching physical device, with a BAR memory type and the fd extension.
    physical: PhysicalDevice,
    /// Its logical device, made at the first pin.
    device: OnceLock<Device>,
    /// Held while the logical device is being made.
    making: Mutex<()>,
}

/// One CUDA allocation imported into one GPU's Vulkan device: shared by every pin inside it,
/// freed with the last of them. Each of those pins holds one CUDA reference on the allocation
/// (`cuMemRetainAllocationHandle`), so CUDA cannot reuse its handle value while the import
/// lives and the handle names the allocation unambiguously.
#[derive(Debug)]
struct Import {
    /// Index in [`VulkanImport::gpus`].
    gpu: usize,
    /// CUDA's handle of the allocation.
    allocation: CUmemGenericAllocationHandle,
    memory: vk::DeviceMemory,
    /// The allocation's size: what the import holds, in BAR1 too.
    size: u64,
    /// Live pins in it.
    pins: usize,
    /// The CPU mapping of the whole allocation, made at the first map of a pin in it.
    view: Option<View>,
}

/// A pinned range: its import, where it lies in the allocation, and the CUDA reference on the
/// allocation that the pin holds until its unpin.
#[derive(Debug, Clone, Copy)]
struct Pinned {
    /// Slot of the import in [`Table::imports`].
    import: usize,
    /// Offset of the pinned range in the allocation.
    offset: u64,
    /// The retained allocation handle, released at the unpin.
    allocation: CUmemGenericAllocationHandle,
}

/// The session's pins and imports; a pin's driver handle is its slot in `pins`.
#[derive(Default)]
struct Table {
    pins: Slots<Pinned>,
    imports: Slots<Import>,
    /// Import slot by (GPU index, allocation handle).
    by_allocation: HashMap<(usize, CUmemGenericAllocationHandle), usize>,
}

impl Table {
    /// Adds a pin at `offset` of the import of `allocation` on `gpu`, if there is one.
    fn join(
        &mut self,
        gpu: usize,
        allocation: CUmemGenericAllocationHandle,
        offset: u64,
    ) -> Option<usize> {
        let import = *self.by_allocation.get(&(gpu, allocation))?;
        self.imports.get_mut(import)?.pins += 1;
        Some(self.pins.insert(Pinned {
            import,
            offset,
            allocation,
        }))
    }

    /// Adds `import` with its first pin at `offset`.
    fn add(&mut self, import: Import, offset: u64) -> usize {
        let key = (import.gpu, import.allocation);
        let allocation = import.allocation;
        let slot = self.imports.insert(Import { pins: 1, ..import });
        self.by_allocation.insert(key, slot);
        self.pins.insert(Pinned {
            import: slot,
            offset,
            allocation,
        })
    }

    /// Removes pin `handle`; with it its import when it was the import's last pin.
    fn remove(&mut self, handle: u64) -> Option<(Pinned, Option<Import>)> {
        let p = self.pins.remove(handle)?;
        let i = self.imports.get_mut(p.import)?;
        i.pins -= 1;
        if i.pins > 0 {
            return Some((p, None));
        }
        let i = self.imports.remove(p.import as u64)?;
        self.by_allocation.remove(&(i.gpu, i.allocation));
        Some((p, Some(i)))
    }
}

/// The Vulkan-import backend of one session.
///
/// Fields drop in order: the imports are all freed by then (the session unpins every handle
/// before it closes), then the devices, then the instance that made them.
pub struct VulkanImport {
    table: Mutex<Table>,
    gpus: Vec<Gpu>,
    instance: Instance,
    cuda: &'static Driver,
    contexts: Contexts,
}

/// A slab with a free list: an entry's number stays its own until it is removed.
struct Slots<T> {
    used: Vec<Option<T>>,
    free: Vec<usize>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            used: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slots<T> {
    fn insert(&mut self, v: T) -> usize {
        match self.free.pop() {
            Some(n) => {
                self.used[n] = Some(v);
                n
            }
            None => {
                self.used.push(Some(v));
                self.used.len() - 1
            }
        }
    }

    fn get(&self, n: u64) -> Option<&T> {
        usize::try_from(n)
            .ok()
            .and_then(|n| self.used.get(n))
            .and_then(Option::as_ref)
    }

    fn get_mut(&mut self, n: usize) -> Option<&mut T> {
        self.used.get_mut(n).and_then(Option::as_mut)
    }

    fn remove(&mut self, n: u64) -> Option<T> {
        let n = usize::try_from(n).ok()?;
        let v = self.used.get_mut(n)?.take()?;
        self.free.push(n);
        Some(v)
    }

    /// Every entry, emptying the slab.
    fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.free.clear();
        self.used.drain(..).flatten()
    }
}

impl std::fmt::Debug for VulkanImport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VulkanImport")
            .field("gpus", &self.gpus.len())
            .finish_non_exhaustive()
    }
}

/// `uuid` as CUDA and Vulkan tools print it (`GPU-xxxxxxxx-xxxx-...` without the prefix).
fn uuid_text(uuid: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in uuid.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// The whole GPU pages of a pin of `addr, size`: `(aligned address, offset of addr in it,
/// aligned size)`, or `None` when the range is empty or wraps.
fn gpu_page_range(addr: u64, size: u64) -> Option<(u64, u64, u64)> {
    if size == 0 {
        return None;
    }
    let va = addr & !(GPU_PAGE - 1);
    let end = addr.checked_add(size)?.checked_add(GPU_PAGE - 1)? & !(GPU_PAGE - 1);
    Some((va, addr - va, end - va))
}

/// The mapping type a memory type gives: cached for a HOST_CACHED type, else write-combining.
fn mapping_type_of(flags: vk::MemoryPropertyFlags) -> MappingType {
    if flags.contains(vk::MemoryPropertyFlags::HOST_CACHED) {
        MappingType::Caching
    } else {
        MappingType::WriteCombining
    }
}

/// Why a CUDA device cannot be served, for the refusal's log line; `None` when `pd` serves it.
fn unsuitable(pd: &PhysicalDevice) -> Option<&'static str> {
    if !pd.external_fd {
        Some("it does not offer VK_KHR_external_memory_fd")
    } else if pd.memory_type.is_none() {
        Some("it has no device-local, host-visible memory type (is BAR1 too small?)")
    } else {
        None
    }
}

impl VulkanImport {
    /// Loads libcuda and the Vulkan loader and pairs every CUDA device with the Vulkan device
    /// of the same UUID; refuses (with an ERR line naming the cause) when no pair can map.
    pub fn open() -> Result<VulkanImport> {
        let refuse = |why: &dyn std::fmt::Display, e: Error| {
            crate::gdr_err!("vulkan backend unavailable: {why}");
            e
        };
        let cuda = cuda::load(cuda::FOR_VULKAN).map_err(|e| refuse(&e, e.to_error()))?;
        let vmm = cuda.vmm().map_err(|m| refuse(&m, m.into()))?;
        let instance = Instance::create().map_err(|f| {
            let hint = match f {
                Failure::Call(_) => {
                    "; no Vulkan driver answered: install NVIDIA's Vulkan driver (in a container, \
                     NVIDIA_DRIVER_CAPABILITIES must include graphics)"
                }
                _ => "",
            };
            refuse(&format_args!("{f}{hint}"), f.to_error())
        })?;
        let physical = instance
            .physical_devices()
            .map_err(|e| refuse(&e, e.to_error()))?;
        let cu = |e: CuError| refuse(&format_args!("{}", Described(cuda, e)), e.to_error());
        let count = cuda.device_count().map_err(cu)?;
        let mut gpus = Vec::new();
        let mut reasons = Vec::new();
        for ordinal in 0..count {
            let dev = cuda.device(ordinal).map_err(cu)?;
            let uuid = vmm.device_uuid(dev).map_err(cu)?;
            let Some(pd) = physical.iter().find(|p| p.uuid == uuid) else {
                reasons.push(format!(
                    "CUDA device {ordinal} ({}): no Vulkan device has its UUID",
                    uuid_text(&uuid)
                ));
                continue;
            };
            if let Some(why) = unsuitable(pd) {
                reasons.push(format!(
                    "CUDA device {ordinal}: Vulkan device '{}' cannot map it: {why}",
                    pd.name
                ));
                continue;
            }
            gpus.push(Gpu {
                ordinal,
                physical: pd.clone(),
                device: OnceLock::new(),
                making: Mutex::new(()),
            });
        }
        if gpus.is_empty() {
            if count == 0 {
                reasons.push("CUDA reports no device".to_owned());
            }
            let found: Vec<&str> = physical.iter().map(|p| p.name.as_str()).collect();
            crate::gdr_err!(
                "vulkan backend unavailable: {} (Vulkan devices: {}); the NVIDIA Vulkan driver \
                 (its ICD) must be installed (in a container, NVIDIA_DRIVER_CAPABILITIES must \
                 include graphics)",
                reasons.join("; "),
                if found.is_empty() {
                    "none".to_owned()
                } else {
                    found.join(", ")
                }
            );
            return Err(Error::NoDevice(
                "no Vulkan device can map a CUDA device's memory",
            ));
        }
        for r in &reasons {
            crate::gdr_info!("vulkan backend: {r}");
        }
        let v = cuda.version();
        crate::gdr_info!("Using vulkan backend");
        for g in &gpus {
            let t = g.physical.memory_type;
            crate::gdr_info!(
                "vulkan backend: CUDA driver {}.{}, device {} = Vulkan device '{}', memory type {} ({:?})",
                v / 1000,
                (v % 1000) / 10,
                g.ordinal,
                g.physical.name,
                t.map_or(0, |t| t.index),
                mapping_type_of(t.map_or(vk::MemoryPropertyFlags::empty(), |t| t.flags))
            );
        }
        Ok(VulkanImport {
            table: Mutex::new(Table::default()),
            gpus,
            instance,
            cuda,
            contexts: Contexts::new(cuda),
        })
    }

    /// Logs a failed CUDA call and turns it into the crate error.
    fn fail(&self, e: CuError) -> Error {
        self.cuda.log_failure(e);
        e.to_error()
    }

    /// The logical device of `gpu`, made at its first use.
    fn device<'a>(&self, gpu: &'a Gpu) -> Result<&'a Device> {
        if let Some(d) = gpu.device.get() {
            return Ok(d);
        }
        let _making = gpu.making.lock();
        if let Some(d) = gpu.device.get() {
            return Ok(d);
        }
        let d = self.instance.create_device(&gpu.physical).map_err(|f| {
            crate::gdr_err!(
                "vulkan backend: cannot create a device on '{}': {f}",
                gpu.physical.name
            );
            f.to_error()
        })?;
        crate::gdr_dbg!("created a Vulkan device on '{}'", gpu.physical.name);
        Ok(gpu.device.get_or_init(|| d))
    }

    /// The allocation behind `addr`, with one more CUDA reference that the caller owns, once
    /// it is known to hold `[va, va + len)`: `(handle, allocation base, allocation size)`.
    fn find(
        &self,
        addr: u64,
        dev: CUdevice,
        va: u64,
        len: u64,
    ) -> Result<(CUmemGenericAllocationHandle, CUdeviceptr, u64)> {
        let vmm = self.cuda.vmm().map_err(Error::from)?;
        let found = self.contexts.with_current(dev, || {
            let handle = vmm.retain_allocation(addr)?;
            match vmm.address_range(addr) {
                Ok(range) => Ok((handle, range)),
                Err(e) => {
                    self.release(handle);
                    Err(e)
                }
            }
        });
        let not_mapped = |e: &CuError| {
            e.call == "cuMemRetainAllocationHandle" && e.code == status::INVALID_VALUE
        };
        let (handle, (base, size)) = found.map_err(|e| {
            if !not_mapped(&e) {
                return self.fail(e);
            }
            crate::gdr_err!(
                "vulkan backend cannot pin {addr:#x}: it is not memory from cuMemCreate ({}); \
                 allocate with cuMemCreate and requestedHandleTypes = \
                 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, as NCCL's cuMem allocator does \
                 (UCX programs with cudaMalloc buffers: set UCX_TLS=^gdr_copy, or leave \
                 GDRAPI_USE_VULKAN unset for them)",
                Described(self.cuda, e)
            );
            Error::InvalidArgument("not memory from cuMemCreate")
        })?;
        let size = size as u64;
        if va < base || va + len > base + size {
            self.release(handle);
            crate::gdr_err!(
                "vulkan backend cannot pin {va:#x}+{len}: its 64 KiB pages run past the \
                 allocation {base:#x}+{size}"
            );
            return Err(Error::InvalidArgument("pin runs past its allocation"));
        }
        Ok((handle, base, size))
    }

    /// Gives back one CUDA reference on `handle` (no context needed: allocation handles
    /// belong to no context). A failure is logged and the reference kept: the allocation then
    /// outlives its last release by CUDA, which is all it costs.
    fn release(&self, handle: CUmemGenericAllocationHandle) {
        let Ok(vmm) = self.cuda.vmm() else {
            return;
        };
        if let Err(e) = vmm.release(handle) {
            crate::gdr_warn!("{}", Described(self.cuda, e));
        }
    }

    /// `handle`, the allocation at `base` that holds `addr`, exported as an fd; refused with
    /// EINVAL when it was made without the POSIX-fd handle type.
    fn export(
        &self,
        dev: CUdevice,
        handle: CUmemGenericAllocationHandle,
        addr: u64,
    ) -> Result<OwnedFd> {
        let vmm = self.cuda.vmm().map_err(Error::from)?;
        let exported = self.contexts.with_current(dev, || {
            let props = vmm.properties(handle)?;
            if props.requested_handle_types & MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR == 0 {
                return Ok(Err(props.requested_handle_types));
            }
            vmm.export_fd(handle).map(Ok)
        });
        match exported.map_err(|e| self.fail(e))? {
            // SAFETY: a successful export hands the caller a new descriptor it owns.
            Ok(fd) => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
            Err(types) => {
                crate::gdr_err!(
                    "vulkan backend cannot pin {addr:#x}: its allocation was made without \
                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR (requestedHandleTypes = {types:#x}); \
                     add it to CUmemAllocationProp.requestedHandleTypes at cuMemCreate"
                );
                Err(Error::InvalidArgument(
                    "allocation not exportable as a file descriptor",
                ))
            }
        }
    }

    /// Adds a pin at `offset` of the allocation `handle` (base `base`, `size` bytes) on `gpu`:
    /// to its import if the session has one, else to a new import of it. Returns the pin's
    /// slot; the pin owns the caller's CUDA reference from then on.
    #[allow(clippy::too_many_arguments)]
    fn attach(
        &self,
        gpu: usize,
        dev: CUdevice,
        handle: CUmemGenericAllocationHandle,
        base: CUdeviceptr,
        size: u64,
        offset: u64,
        addr: u64,
    ) -> Result<usize> {
        if let Some(slot) = self.table.lock().join(gpu, handle, offset) {
            return Ok(slot);
        }
        // The first pin in this allocation: export and import it, without the table's lock.
        let g = &self.gpus[gpu];
        let device = self.device(g)?;
        let t = g
            .physical
            .memory_type
            .ok_or(Error::NotSupported("no BAR memory type"))?;
        let fd = self.export(dev, handle, addr)?;
        let memory = device.import(fd, size, t.index).map_err(|e| {
            crate::gdr_err!(
                "vulkan backend cannot import the allocation {base:#x}+{size} of {addr:#x}: {e}; \
                 an import holds BAR1 for its whole allocation ({} MiB) while a pin in it \
                 lives{}",
                size >> 20,
                super::nvml::note_for_failed_pin(size)
                    .map(|n| format!("; {n}"))
                    .unwrap_or_default()
            );
            e.to_error()
        })?;
        crate::gdr_dbg!("imported the allocation {base:#x}+{size} ({handle:#x})");
        let mut table = self.table.lock();
        if let Some(slot) = table.join(gpu, handle, offset) {
            // Another thread imported it meanwhile: keep that import, free this one.
            drop(table);
            // SAFETY: this import was just made and nothing else has seen it.
            unsafe { device.free(memory) };
            return Ok(slot);
        }
        let import = Import {
            gpu,
            allocation: handle,
            memory,
            size,
            pins: 0,
            view: None,
        };
        Ok(table.add(import, offset))
    }

    /// The CPU view of `import`: the whole allocation mapped once, with no access until a
    /// handle opens its range.
    fn view(&self, import: &Import, va: u64) -> Result<View> {
        let device = self.gpus[import.gpu]
            .device
            .get()
            .ok_or(Error::InvalidHandle)?;
        // SAFETY: the table's lock is held, so no other call maps, unmaps or frees this
        // memory; it is imported, not freed, and not mapped (it has no view yet).
        let p = unsafe { device.map(import.memory, 0, import.size) }.map_err(|e: VkError| {
            crate::gdr_err!(
                "vulkan backend cannot map the allocation of {} bytes holding va {va:#x}: {e}",
                import.size
            );
            e.to_error()
        })?;
        // SAFETY: the mapping was just made, nothing has seen it, and the view keeps it until
        // the import is freed.
        unsafe { View::new(p as usize, import.size as usize) }.inspect_err(|e| {
            // SAFETY: as above; the view was not made, so nothing uses the mapping.
            unsafe { device.unmap(import.memory) };
            crate::gdr_err!("vulkan backend cannot prepare the mapping of an allocation: {e}");
        })
    }

    /// Frees an import that no pin uses any more (its view goes with it).
    fn free(&self, import: Import) {
        if let Some(d) = self.gpus[import.gpu].device.get() {
            // SAFETY: the import has left the table, so no call reaches it any more, and its
            // pins are all unpinned (their mappings gone).
            unsafe { d.free(import.memory) };
        }
    }
}

/// A failed CUDA call with the driver's name and text for its `CUresult`.
struct Described(&'static Driver, CuError);

impl std::fmt::Display for Described {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "\"{}\" failed ({}: {})",
            self.1.call,
            self.1.code,
            self.0.describe(self.1.code)
        )
    }
}

/// Logs why [`fixed::accept_map`] refused a map and returns the map's error.
#[cold]
fn refuse_map(why: fixed::Refusal, pin: &Pin, size: usize, request: MappingType) -> Error {
    match why {
        fixed::Refusal::OtherType => crate::gdr_err!(
            "vulkan backend cannot fulfill the requested mapping type (requested={}, this memory maps as {}).",
            request as u32,
            pin.fixed_type as u32
        ),
        fixed::Refusal::Size => crate::gdr_err!(
            "vulkan backend cannot map {size} bytes of a pinned range of {} bytes",
            pin.mapped_size
        ),
        fixed::Refusal::Offset => crate::gdr_err!(
            "cannot map a pin whose address is not 64 KiB aligned (offset {} != 0 is not supported)",
            pin.page_offset
        ),
    }
    why.error()
}

impl Backend for VulkanImport {
    fn kind(&self) -> BackendKind {
        BackendKind::Vulkan
    }

    fn fd(&self) -> i32 {
        -1
    }

    fn driver_version_word(&self) -> u32 {
        0
    }

    fn pin(&self, req: &PinRequest) -> Result<Pin> {
        let Some((va, page_offset, len)) = gpu_page_range(req.addr, req.size) else {
            crate::gdr_err!(
                "invalid range to pin: addr={:#x} size={}",
                req.addr,
                req.size
            );
            return Err(Error::InvalidArgument("empty or wrapping address range"));
        };
        let ordinal = self
            .cuda
            .pointer_device_ordinal(req.addr)
            .map_err(|e| self.fail(e))?;
        let Some(gpu) = self.gpus.iter().position(|g| g.ordinal == ordinal) else {
            crate::gdr_err!(
                "vulkan backend cannot pin {:#x}: CUDA device {ordinal} has no Vulkan device that can map it",
                req.addr
            );
            return Err(Error::NotSupported("no Vulkan device for this GPU"));
        };
        let dev = self.cuda.device(ordinal).map_err(|e| self.fail(e))?;
        let (handle, base, size) = self.find(req.addr, dev, va, len)?;
        let slot = self
            .attach(gpu, dev, handle, base, size, va - base, req.addr)
            .inspect_err(|_| self.release(handle))?;
        let fixed_type = mapping_type_of(
            self.gpus[gpu]
                .physical
                .memory_type
                .map_or(vk::MemoryPropertyFlags::empty(), |t| t.flags),
        );
        crate::gdr_dbg!(
            "pinned va={va:#x} size={len} offset={page_offset} pin={slot} (allocation {base:#x}+{size}) type={fixed_type:?}"
        );
        Ok(Pin {
            handle: slot as u64,
            va,
            mapped_size: len,
            page_offset,
            fixed_type,
        })
    }

    fn unpin(&self, pin: &Pin) -> Result<()> {
        let Some((p, gone)) = self.table.lock().remove(pin.handle) else {
            return Err(Error::InvalidHandle);
        };
        if let Some(import) = gone {
            self.free(import);
        }
        self.release(p.allocation);
        Ok(())
    }

    fn callback_flag(&self, _pin: &Pin) -> Result<bool> {
        Ok(false)
    }

    fn info(&self, pin: &Pin, current: Option<&Mapping>) -> Result<Info> {
        Ok(fixed::info(pin, GPU_PAGE as u32, current))
    }

    fn info_v1(&self, pin: &Pin, current: Option<&Mapping>) -> Result<Info> {
        self.info(pin, current)
    }

    fn map(&self, pin: &Pin, size: usize, request: MappingType) -> Result<Mapping> {
        if let Err(why) = fixed::accept_map(pin, size, request) {
            return Err(refuse_map(why, pin, size, request));
        }
        let mut table = self.table.lock();
        let Some(&p) = table.pins.get(pin.handle) else {
            return Err(Error::InvalidHandle);
        };
        let import = table
            .imports
            .get_mut(p.import)
            .ok_or(Error::InvalidHandle)?;
        let view = match &mut import.view {
            Some(v) => v,
            None => {
                let v = self.view(import, pin.va)?;
                import.view.insert(v)
            }
        };
        let addr = view
            .open(p.offset..p.offset + size as u64)
            .inspect_err(|e| {
                crate::gdr_err!(
                    "vulkan backend cannot map {size} bytes of va {:#x}: {e}{}",
                    pin.va,
                    if e.errno() == libc::ENOMEM {
                        "; the process may have reached vm.max_map_count (each mapped range \
                         of an allocation is an area of its own)"
                    } else {
                        ""
                    }
                );
            })?;
        Ok(Mapping {
            addr,
            len: size,
            kind: pin.fixed_type,
        })
    }

    fn unmap(&self, pin: &Pin, mapping: &Mapping) -> Result<()> {
        let mut table = self.table.lock();
        let Some(&p) = table.pins.get(pin.handle) else {
            return Err(Error::InvalidHandle);
        };
        let view = table
            .imports
            .get_mut(p.import)
            .and_then(|i| i.view.as_mut())
            .ok_or(Error::InvalidHandle)?;
        let start = view.offset_of(mapping.addr).ok_or(Error::InvalidHandle)?;
        // A range that cannot be closed stays accessible until the unpin frees the import;
        // the unmap itself is done.
        if let Err(e) = view.close(start..start + mapping.len as u64) {
            crate::gdr_warn!(
                "vulkan backend: {} bytes at {:#x} stay accessible until the unpin: {e}",
                mapping.len,
                mapping.addr
            );
        }
        Ok(())
    }

    fn attribute(&self, attr: Attr) -> Result<i32> {
        Ok(match attr {
            Attr::UsePersistentMapping | Attr::SupportPinFlagForcePcie => 1,
            Attr::UsingDmaBufMmap => 0,
        })
    }

    fn driver_version(&self) -> Result<(i32, i32)> {
        Ok(REPORTED_DRIVER_VERSION)
    }

    fn close(&self) -> Result<()> {
        // The session unpinned every handle first; anything left is released here.
        let (pins, imports): (Vec<Pinned>, Vec<Import>) = {
            let mut t = self.table.lock();
            t.by_allocation.clear();
            (t.pins.drain().collect(), t.imports.drain().collect())
        };
        for i in imports {
            self.free(i);
        }
        for p in pins {
            self.release(p.allocation);
        }
        self.contexts.release_all();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_cover_whole_gpu_pages() {
        assert_eq!(gpu_page_range(0x10000, 4), Some((0x10000, 0, 0x10000)));
        assert_eq!(gpu_page_range(0x10008, 8), Some((0x10000, 8, 0x10000)));
        assert_eq!(gpu_page_range(0x1fffc, 8), Some((0x10000, 0xfffc, 0x20000)));
        assert_eq!(
            gpu_page_range(0x20000, 0x20001),
            Some((0x20000, 0, 0x30000))
        );
        assert_eq!(gpu_page_range(0x10000, 0), None);
        assert_eq!(gpu_page_range(u64::MAX - 10, 5), None);
    }

    #[test]
    fn memory_types_decide_the_mapping_type() {
        let flags = vk::MemoryPropertyFlags::from_raw;
        assert_eq!(mapping_type_of(flags(0x7)), MappingType::WriteCombining);
        assert_eq!(mapping_type_of(flags(0xF)), MappingType::Caching);
    }

    #[test]
    fn uuids_read_as_tools_print_them() {
        let u = [
            0x2f, 0x1c, 0x96, 0x9a, 0x4e, 0x38, 0x7b, 0x51, 0x80, 0x0c, 0x0b, 0x59, 0x3a, 0x9d,
            0x55, 0x01,
        ];
        assert_eq!(uuid_text(&u), "2f1c969a-4e38-7b51-800c-0b593a9d5501");
    }

    #[test]
    fn slots_reuse_freed_entries_and_refuse_unknown_ones() {
        let mut s = Slots::default();
        assert_eq!(s.insert(1), 0);
        assert_eq!(s.insert(2), 1);
        assert_eq!(s.get(1), Some(&2));
        assert_eq!(s.remove(0), Some(1));
        assert!(s.get(0).is_none());
        assert!(s.remove(0).is_none(), "removed once");
        assert!(s.get(u64::MAX).is_none());
        assert_eq!(s.insert(3), 0, "the freed slot is taken again");
        assert_eq!(s.drain().collect::<Vec<_>>(), vec![3, 2]);
        assert_eq!(s.insert(4), 0, "a drained slab starts again");
    }

    fn import(gpu: usize, allocation: u64) -> Import {
        Import {
            gpu,
            allocation,
            memory: vk::Handle::from_raw(100 + allocation),
            size: 1 << 30,
            pins: 0,
            view: None,
        }
    }

    #[test]
    fn pins_of_one_allocation_share_its_import_until_the_last() {
        let mut t = Table::default();
        assert_eq!(t.join(0, 7, 0), None, "nothing imported yet");
        let a = t.add(import(0, 7), 0);
        let b = t.join(0, 7, 1 << 16).expect("the second pin joins");
        assert_eq!(
            t.join(1, 7, 0),
            None,
            "another GPU's handle 7 is another allocation"
        );
        let c = t.add(import(0, 8), 0);
        assert_eq!(t.imports.get(0).map(|i| i.pins), Some(2));
        let (p, gone) = t.remove(a as u64).unwrap();
        assert_eq!((p.allocation, p.offset), (7, 0));
        assert!(gone.is_none(), "pin b still uses the import");
        let (p, gone) = t.remove(b as u64).unwrap();
        assert_eq!(p.offset, 1 << 16);
        assert_eq!(
            gone.map(|i| vk::Handle::as_raw(i.memory)),
            Some(107),
            "the last pin frees it"
        );
        assert_eq!(t.join(0, 7, 0), None, "and a later pin imports again");
        assert!(t.remove(b as u64).is_none(), "unpinned once");
        assert_eq!(
            t.remove(c as u64)
                .and_then(|(_, i)| i)
                .map(|i| vk::Handle::as_raw(i.memory)),
            Some(108)
        );
        assert!(t.by_allocation.is_empty());
    }
}
