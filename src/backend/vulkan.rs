//! Vulkan-import backend: GPU mappings with no kernel module and a CUDA driver of any version
//! from 11.4 on, for memory that CUDA can export as a file descriptor. A pin finds the
//! `cuMemCreate` allocation behind the address (`cuMemRetainAllocationHandle`), exports it
//! (`cuMemExportToShareableHandle`, `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`) and imports the
//! fd into the Vulkan device with the same UUID (`VK_KHR_external_memory_fd`) as memory of
//! the type that maps VRAM through the BAR; a map is `vkMapMemory` of the pinned range. The
//! import holds the physical memory until the unpin, whatever CUDA does with it meanwhile.
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
//! - the mapping type is fixed by the memory type: write-combining (the BAR), or cached where
//!   the only host-visible device-local type is (coherent platforms); asking for another is
//!   EINVAL, as on the DMA-BUF backend;
//! - mappings are marked `MADV_DONTFORK` (gdrdrv's are `VM_DONTCOPY`);
//! - `gdr_get_callback_flag` is always 0 (the import keeps the memory, so nothing is ever
//!   invalidated), `GDR_ATTR_USE_PERSISTENT_MAPPING` and `GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE`
//!   are 1, `GDR_ATTR_USING_DMA_BUF_MMAP` 0, and `gdr_driver_get_version` returns 0 with 2.6,
//!   the gdrdrv interface level the backend provides.

use super::{Attr, Backend, BackendKind, Info, Mapping, MappingType, Pin, PinRequest};
use crate::cuda::types::{status, CUdevice, CUdeviceptr, MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR};
use crate::cuda::{self, Contexts, CuError, Driver};
use crate::error::{Error, Result};
use crate::vulkan::{Device, Failure, Instance, PhysicalDevice, VkError};
use gdrapi_abi::vk::{VkDeviceMemory, MEMORY_PROPERTY_HOST_CACHED};
use parking_lot::Mutex;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::OnceLock;

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

/// A pinned range: the memory imported for it and where the range lies in the allocation.
#[derive(Debug, Clone, Copy)]
struct Import {
    /// Index in [`VulkanImport::gpus`].
    gpu: usize,
    memory: VkDeviceMemory,
    /// Offset of the pinned range in the allocation.
    offset: u64,
}

/// The Vulkan-import backend of one session.
///
/// Fields drop in order: the imports are all freed by then (the session unpins every handle
/// before it closes), then the devices, then the instance that made them.
pub struct VulkanImport {
    /// Live imports by slot; a pin's `handle` is its slot.
    imports: Mutex<Slots>,
    gpus: Vec<Gpu>,
    instance: Instance,
    cuda: &'static Driver,
    contexts: Contexts,
}

/// A slab of imports with a free list.
#[derive(Default)]
struct Slots {
    used: Vec<Option<Import>>,
    free: Vec<usize>,
}

impl Slots {
    fn insert(&mut self, i: Import) -> usize {
        match self.free.pop() {
            Some(n) => {
                self.used[n] = Some(i);
                n
            }
            None => {
                self.used.push(Some(i));
                self.used.len() - 1
            }
        }
    }

    fn get(&self, n: u64) -> Option<Import> {
        usize::try_from(n)
            .ok()
            .and_then(|n| self.used.get(n).copied().flatten())
    }

    fn remove(&mut self, n: u64) -> Option<Import> {
        let n = usize::try_from(n).ok()?;
        let i = self.used.get_mut(n)?.take()?;
        self.free.push(n);
        Some(i)
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
fn mapping_type_of(flags: u32) -> MappingType {
    if flags & MEMORY_PROPERTY_HOST_CACHED != 0 {
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
                mapping_type_of(t.map_or(0, |t| t.flags))
            );
        }
        Ok(VulkanImport {
            imports: Mutex::new(Slots::default()),
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

    /// The allocation behind `req.addr` exported as an fd: `(fd, allocation base, allocation
    /// size)`, once it is known to hold `[va, va + len)`.
    fn export(
        &self,
        req: &PinRequest,
        dev: CUdevice,
        va: u64,
        len: u64,
    ) -> Result<(OwnedFd, CUdeviceptr, u64)> {
        let vmm = self.cuda.vmm().map_err(Error::from)?;
        let addr = req.addr;
        let exported = self.contexts.with_current(dev, || {
            let handle = vmm.retain_allocation(addr)?;
            let found = (|| {
                let props = vmm.properties(handle)?;
                let range = vmm.address_range(addr)?;
                let fd =
                    if props.requested_handle_types & MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR != 0 {
                        Some(vmm.export_fd(handle)?)
                    } else {
                        None
                    };
                Ok((props, range, fd))
            })();
            // The export (or its failure) no longer needs the reference retained above.
            if let Err(e) = vmm.release(handle) {
                crate::gdr_warn!("{}", Described(self.cuda, e));
            }
            found
        });
        let not_mapped = |e: &CuError| {
            e.call == "cuMemRetainAllocationHandle" && e.code == status::INVALID_VALUE
        };
        let exported = exported.map_err(|e| {
            if !not_mapped(&e) {
                return self.fail(e);
            }
            crate::gdr_err!(
                "vulkan backend cannot pin {addr:#x}: it is not memory from cuMemCreate ({}); \
                 allocate with cuMemCreate and requestedHandleTypes = \
                 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, as NCCL's cuMem allocator does",
                Described(self.cuda, e)
            );
            Error::InvalidArgument("not memory from cuMemCreate")
        });
        let (props, (base, size), fd) = exported?;
        // SAFETY: a successful export hands the caller a new descriptor it owns.
        let fd = fd.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
        let Some(fd) = fd else {
            crate::gdr_err!(
                "vulkan backend cannot pin {addr:#x}: its allocation was made without \
                 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR (requestedHandleTypes = {:#x}); add it \
                 to CUmemAllocationProp.requestedHandleTypes at cuMemCreate",
                props.requested_handle_types
            );
            return Err(Error::InvalidArgument(
                "allocation not exportable as a file descriptor",
            ));
        };
        let size = size as u64;
        if va < base || va + len > base + size {
            crate::gdr_err!(
                "vulkan backend cannot pin {va:#x}+{len}: its 64 KiB pages run past the \
                 allocation {base:#x}+{size}"
            );
            return Err(Error::InvalidArgument("pin runs past its allocation"));
        }
        Ok((fd, base, size))
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
        let Some((index, gpu)) = self
            .gpus
            .iter()
            .enumerate()
            .find(|(_, g)| g.ordinal == ordinal)
        else {
            crate::gdr_err!(
                "vulkan backend cannot pin {:#x}: CUDA device {ordinal} has no Vulkan device that can map it",
                req.addr
            );
            return Err(Error::NotSupported("no Vulkan device for this GPU"));
        };
        let dev = self.cuda.device(ordinal).map_err(|e| self.fail(e))?;
        let device = self.device(gpu)?;
        let (fd, base, size) = self.export(req, dev, va, len)?;
        let t = gpu
            .physical
            .memory_type
            .ok_or(Error::NotSupported("no BAR memory type"))?;
        let memory = device.import(fd, size, t.index).map_err(|e| {
            crate::gdr_err!(
                "vulkan backend cannot import the allocation {base:#x}+{size} of {:#x}: {e}{}",
                req.addr,
                crate::nvml::note_for_failed_pin(size)
                    .map(|n| format!("; {n}"))
                    .unwrap_or_default()
            );
            e.to_error()
        })?;
        let slot = self.imports.lock().insert(Import {
            gpu: index,
            memory,
            offset: va - base,
        });
        let fixed_type = mapping_type_of(t.flags);
        crate::gdr_dbg!(
            "pinned va={va:#x} size={len} offset={page_offset} import={slot} (allocation {base:#x}+{size}) type={fixed_type:?}"
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
        let Some(i) = self.imports.lock().remove(pin.handle) else {
            return Err(Error::InvalidHandle);
        };
        if let Some(d) = self.gpus[i.gpu].device.get() {
            // SAFETY: the session unpins each pin once, after its mapping is gone; the slot
            // was taken out above, so no other call reaches this memory.
            unsafe { d.free(i.memory) };
        }
        Ok(())
    }

    fn callback_flag(&self, _pin: &Pin) -> Result<bool> {
        Ok(false)
    }

    fn info(&self, pin: &Pin, current: Option<&Mapping>) -> Result<Info> {
        let kind = current.map_or(MappingType::None, |m| m.kind);
        Ok(Info {
            va: pin.va,
            mapped_size: pin.mapped_size,
            page_size: GPU_PAGE as u32,
            tm_cycles: 0,
            cycles_per_ms: 0,
            mapped: kind != MappingType::None,
            wc_mapping: kind == MappingType::WriteCombining,
            mapping_type: kind as u32,
        })
    }

    fn info_v1(&self, pin: &Pin, current: Option<&Mapping>) -> Result<Info> {
        self.info(pin, current)
    }

    fn map(&self, pin: &Pin, size: usize, request: MappingType) -> Result<Mapping> {
        if request != MappingType::None && request != pin.fixed_type {
            crate::gdr_err!(
                "vulkan backend cannot fulfill the requested mapping type (requested={}, this memory maps as {}).",
                request as u32,
                pin.fixed_type as u32
            );
            return Err(Error::InvalidArgument(
                "mapping type not available for this pin",
            ));
        }
        pin.accept_map_size(size)?;
        if pin.page_offset != 0 {
            crate::gdr_err!(
                "cannot map a pin whose address is not 64 KiB aligned (offset {} != 0 is not supported)",
                pin.page_offset
            );
            return Err(Error::InvalidArgument(
                "the pinned address is not 64 KiB aligned",
            ));
        }
        let Some(i) = self.imports.lock().get(pin.handle) else {
            return Err(Error::InvalidHandle);
        };
        let device = self.gpus[i.gpu].device.get().ok_or(Error::InvalidHandle)?;
        // SAFETY: the session maps a pin only while it holds the handle in MAPPING, and the
        // pin's memory is unmapped (one mapping per handle) and not freed (still pinned).
        let p = unsafe { device.map(i.memory, i.offset, size as u64) }.map_err(|e: VkError| {
            crate::gdr_err!(
                "vulkan backend cannot map {size} bytes of va {:#x}: {e}{}",
                pin.va,
                crate::nvml::note_for_failed_pin(size as u64)
                    .map(|n| format!("; {n}"))
                    .unwrap_or_default()
            );
            e.to_error()
        })?;
        let addr = p as usize;
        // Like gdrdrv's VM_DONTCOPY: a child process gets no mapping of its parent's memory.
        let page = crate::sys::page_size();
        let start = addr & !(page - 1);
        if let Err(e) = crate::sys::dont_fork(start, addr + size - start) {
            // SAFETY: the mapping was just made and nothing has seen it.
            unsafe { device.unmap(i.memory) };
            crate::gdr_err!("madvise(MADV_DONTFORK) of the mapping failed: {e}");
            return Err(e);
        }
        Ok(Mapping {
            addr,
            len: size,
            kind: pin.fixed_type,
        })
    }

    fn unmap(&self, pin: &Pin, _mapping: &Mapping) -> Result<()> {
        let Some(i) = self.imports.lock().get(pin.handle) else {
            return Err(Error::InvalidHandle);
        };
        let device = self.gpus[i.gpu].device.get().ok_or(Error::InvalidHandle)?;
        // SAFETY: the session unmaps only a mapping this backend made for the pin, once, while
        // it holds the handle in UNMAPPING (or UNPINNING), so nothing copies through it.
        unsafe { device.unmap(i.memory) };
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
        // The session unpinned every handle first; anything left is freed here.
        let left: Vec<Import> = {
            let mut slots = self.imports.lock();
            slots.free.clear();
            slots.used.drain(..).flatten().collect()
        };
        for i in left {
            if let Some(d) = self.gpus[i.gpu].device.get() {
                // SAFETY: no handle refers to this memory any more.
                unsafe { d.free(i.memory) };
            }
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
        assert_eq!(mapping_type_of(0x7), MappingType::WriteCombining);
        assert_eq!(mapping_type_of(0xF), MappingType::Caching);
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
        let imp = |offset| Import {
            gpu: 0,
            memory: 7,
            offset,
        };
        assert_eq!(s.insert(imp(1)), 0);
        assert_eq!(s.insert(imp(2)), 1);
        assert_eq!(s.get(1).map(|i| i.offset), Some(2));
        assert_eq!(s.remove(0).map(|i| i.offset), Some(1));
        assert!(s.get(0).is_none());
        assert!(s.remove(0).is_none(), "removed once");
        assert!(s.get(u64::MAX).is_none());
        assert_eq!(s.insert(imp(3)), 0, "the freed slot is taken again");
    }
}
