//! Vulkan memory that is both device-local and host-visible, mapped into this process: on a
//! discrete GPU that is VRAM seen through the PCIe BAR, the same path gdrdrv's mappings take.
//!
//! [`survey`] describes every physical device (UUID, extension, memory types) without making a
//! device; [`VkBar::open`] creates an instance and a device on the preferred physical device;
//! [`VkBar::allocate`] allocates and maps such memory (exportable as an opaque fd when the
//! device offers `VK_KHR_external_memory_fd`); [`VkBar::import_fd`] maps an exported fd again,
//! which gives a second CPU mapping of the same bytes.

use crate::dl::Library;
use crate::error::{Error, Result};
use crate::vk::*;
use std::ffi::{c_char, c_void, CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::ptr;

pub use crate::vk::{choose_memory_type, MemoryType};

/// Picks a physical device from their `VkPhysicalDeviceType`s: a discrete GPU first, then an
/// integrated one, a virtual one, a CPU device, anything else; the first of equals wins.
pub fn choose_device(types: &[u32]) -> Option<usize> {
    let rank = |t: u32| match t {
        PHYSICAL_DEVICE_TYPE_DISCRETE_GPU => 5,
        PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU => 4,
        PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU => 3,
        PHYSICAL_DEVICE_TYPE_CPU => 2,
        _ => 1,
    };
    (0..types.len()).max_by_key(|&i| (rank(types[i]), std::cmp::Reverse(i)))
}

/// What [`VkBar::open`] found about the device.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// `deviceName`.
    pub name: String,
    /// `deviceType` (`VK_PHYSICAL_DEVICE_TYPE_*`).
    pub device_type: u32,
    /// `vendorID` (0x10de for NVIDIA).
    pub vendor_id: u32,
    /// `apiVersion` of the device, packed as Vulkan packs it.
    pub api_version: u32,
    /// `driverVersion`, packed the vendor's way.
    pub driver_version: u32,
    /// `deviceUUID` (what `cuDeviceGetUuid` reports for the same GPU); zero when unknown.
    pub uuid: [u8; 16],
    /// Every memory type of the device.
    pub memory_types: Vec<MemoryType>,
    /// Whether the device offers `VK_KHR_external_memory_fd` (from [`VkBar::open`]: and the
    /// device was created with it).
    pub external_fd: bool,
}

struct Fns {
    destroy_device: PFN_vkDestroyDevice,
    allocate_memory: PFN_vkAllocateMemory,
    free_memory: PFN_vkFreeMemory,
    map_memory: PFN_vkMapMemory,
    unmap_memory: PFN_vkUnmapMemory,
    get_memory_fd: Option<PFN_vkGetMemoryFdKHR>,
}

/// A Vulkan instance and logical device, ready to allocate BAR memory.
pub struct VkBar {
    device: VkDevice,
    fns: Fns,
    info: DeviceInfo,
    bar_type: MemoryType,
    /// Dropped after the device (see `Drop for VkBar`).
    _instance: Instance,
}

/// One allocation of device memory, mapped for the CPU for its whole life.
pub struct BarMemory<'a> {
    bar: &'a VkBar,
    memory: VkDeviceMemory,
    ptr: *mut u8,
    len: usize,
    exportable: bool,
}

fn check(call: &'static str, r: VkResult) -> Result<()> {
    if r < 0 {
        Err(Error::Vulkan { call, result: r })
    } else {
        Ok(())
    }
}

fn c_name(bytes: &[c_char]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    bytes[..end].iter().map(|&b| b as u8 as char).collect()
}

/// Resolves `name` through `vkGetInstanceProcAddr(instance, name)` as function type `F`.
///
/// # Safety
/// `F` must be the `extern "C"` function pointer type of the entry point `name`.
unsafe fn instance_fn<F: Copy>(
    gipa: PFN_vkGetInstanceProcAddr,
    instance: VkInstance,
    name: &'static str,
) -> Result<F> {
    let c = CString::new(name).map_err(|_| Error::Symbol {
        name: name.to_owned(),
    })?;
    // SAFETY: `gipa` is the loader's vkGetInstanceProcAddr; `instance` is null or live.
    let p = unsafe { gipa(instance, c.as_ptr()) };
    match p {
        // SAFETY: the caller names the matching type; both are one code pointer wide.
        Some(f) => Ok(unsafe { std::mem::transmute_copy::<unsafe extern "C" fn(), F>(&f) }),
        None => Err(Error::Symbol {
            name: name.to_owned(),
        }),
    }
}

/// Resolves `name` through `vkGetDeviceProcAddr(device, name)` as function type `F`.
///
/// # Safety
/// As [`instance_fn`], for a live `device`.
unsafe fn device_fn<F: Copy>(
    gdpa: PFN_vkGetDeviceProcAddr,
    device: VkDevice,
    name: &'static str,
) -> Result<F> {
    let c = CString::new(name).map_err(|_| Error::Symbol {
        name: name.to_owned(),
    })?;
    // SAFETY: `gdpa` is the device's vkGetDeviceProcAddr and `device` is live.
    let p = unsafe { gdpa(device, c.as_ptr()) };
    match p {
        // SAFETY: as in `instance_fn`.
        Some(f) => Ok(unsafe { std::mem::transmute_copy::<unsafe extern "C" fn(), F>(&f) }),
        None => Err(Error::Symbol {
            name: name.to_owned(),
        }),
    }
}

/// A Vulkan 1.1 instance (no layers, no instance extensions) with the entry points that list
/// and describe physical devices; destroyed on drop, before the loader is unloaded.
struct Instance {
    handle: VkInstance,
    gipa: PFN_vkGetInstanceProcAddr,
    destroy: PFN_vkDestroyInstance,
    enumerate: PFN_vkEnumeratePhysicalDevices,
    get_props: PFN_vkGetPhysicalDeviceProperties,
    get_props2: Option<PFN_vkGetPhysicalDeviceProperties2>,
    get_mem: PFN_vkGetPhysicalDeviceMemoryProperties,
    enum_ext: PFN_vkEnumerateDeviceExtensionProperties,
    _lib: Library,
}

impl Instance {
    /// Loads the Vulkan loader (`libvulkan.so.1`) and creates an instance.
    fn create() -> Result<Instance> {
        let lib = Library::open("libvulkan.so.1")?;
        // SAFETY: the loader exports vkGetInstanceProcAddr with exactly this signature.
        let gipa: PFN_vkGetInstanceProcAddr = unsafe { lib.function("vkGetInstanceProcAddr")? };
        // SAFETY: the type named is vkCreateInstance's.
        let create_instance: PFN_vkCreateInstance =
            unsafe { instance_fn(gipa, ptr::null_mut(), "vkCreateInstance")? };

        let app = VkApplicationInfo::named(Some(c"vkbar"));
        let ici = VkInstanceCreateInfo::plain(&app);
        let mut instance: VkInstance = ptr::null_mut();
        // SAFETY: `ici` and what it points to live across the call; `instance` is writable.
        check("vkCreateInstance", unsafe {
            create_instance(&ici, ptr::null(), &mut instance)
        })?;
        // Without vkDestroyInstance the instance can only be leaked.
        // SAFETY: the type named is this entry point's own, on a live instance.
        let destroy: PFN_vkDestroyInstance =
            unsafe { instance_fn(gipa, instance, "vkDestroyInstance")? };
        let guard = Destroy(instance, destroy);
        // Each type named below is its entry point's own, on a live instance.
        let made = Instance {
            handle: instance,
            gipa,
            destroy,
            // SAFETY: see above.
            enumerate: unsafe { instance_fn(gipa, instance, "vkEnumeratePhysicalDevices")? },
            // SAFETY: see above.
            get_props: unsafe { instance_fn(gipa, instance, "vkGetPhysicalDeviceProperties")? },
            // SAFETY: see above.
            get_props2: unsafe { instance_fn(gipa, instance, "vkGetPhysicalDeviceProperties2") }
                .ok(),
            // SAFETY: see above.
            get_mem: unsafe { instance_fn(gipa, instance, "vkGetPhysicalDeviceMemoryProperties")? },
            // SAFETY: see above.
            enum_ext: unsafe {
                instance_fn(gipa, instance, "vkEnumerateDeviceExtensionProperties")?
            },
            _lib: lib,
        };
        // The instance destroys itself from here on.
        std::mem::forget(guard);
        Ok(made)
    }

    /// Every physical device of the instance.
    fn physical_devices(&self) -> Result<Vec<VkPhysicalDevice>> {
        let mut count = 0u32;
        // SAFETY: a count query with a null array on a live instance.
        check("vkEnumeratePhysicalDevices", unsafe {
            (self.enumerate)(self.handle, &mut count, ptr::null_mut())
        })?;
        let mut phys = vec![ptr::null_mut(); count as usize];
        // SAFETY: `phys` has room for `count` handles.
        check("vkEnumeratePhysicalDevices", unsafe {
            (self.enumerate)(self.handle, &mut count, phys.as_mut_ptr())
        })?;
        phys.truncate(count as usize);
        Ok(phys)
    }

    /// `vkGetPhysicalDeviceProperties` of `pd`.
    fn properties(&self, pd: VkPhysicalDevice) -> Box<VkPhysicalDeviceProperties> {
        // SAFETY: all-zero is a valid value of this plain-data struct.
        let mut props: Box<VkPhysicalDeviceProperties> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: `pd` is a live physical device; `props` is large enough (see vk.rs).
        unsafe { (self.get_props)(pd, &mut *props) };
        props
    }

    /// What is known of `pd` (with its properties `props`), `external_fd` meaning offered,
    /// and the names of the device extensions it offers.
    fn describe(
        &self,
        pd: VkPhysicalDevice,
        props: &VkPhysicalDeviceProperties,
    ) -> Result<(DeviceInfo, Vec<String>)> {
        let mut uuid = [0u8; 16];
        if let Some(gp2) = self.get_props2 {
            // SAFETY: all-zero is valid for both plain-data structs.
            let mut id: VkPhysicalDeviceIDProperties = unsafe { std::mem::zeroed() };
            id.sType = STYPE_PHYSICAL_DEVICE_ID_PROPERTIES;
            // SAFETY: as above.
            let mut p2: Box<VkPhysicalDeviceProperties2> = Box::new(unsafe { std::mem::zeroed() });
            p2.sType = STYPE_PHYSICAL_DEVICE_PROPERTIES_2;
            p2.pNext = (&mut id as *mut VkPhysicalDeviceIDProperties).cast();
            // SAFETY: a well-formed chain of live structs; the device supports 1.1 queries
            // whenever the loader returned this entry point for a 1.1 instance.
            unsafe { gp2(pd, &mut *p2) };
            uuid = id.deviceUUID;
        }

        // SAFETY: all-zero is valid for this plain-data struct.
        let mut mp: Box<VkPhysicalDeviceMemoryProperties> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: `pd` is live and `mp` is writable.
        unsafe { (self.get_mem)(pd, &mut *mp) };
        let ntypes = (mp.memoryTypeCount as usize).min(32);
        let memory_types: Vec<MemoryType> = (0..ntypes)
            .map(|i| {
                let t = mp.memoryTypes[i];
                let heap = mp
                    .memoryHeaps
                    .get(t.heapIndex as usize)
                    .map_or(0, |h| h.size);
                MemoryType {
                    index: i as u32,
                    flags: t.propertyFlags,
                    heap_index: t.heapIndex,
                    heap_size: heap,
                }
            })
            .collect();

        let mut ecount = 0u32;
        // SAFETY: a count query with a null array.
        check("vkEnumerateDeviceExtensionProperties", unsafe {
            (self.enum_ext)(pd, ptr::null(), &mut ecount, ptr::null_mut())
        })?;
        // SAFETY: all-zero is valid for this plain-data struct.
        let mut exts: Vec<VkExtensionProperties> =
            (0..ecount).map(|_| unsafe { std::mem::zeroed() }).collect();
        // SAFETY: `exts` has room for `ecount` entries.
        check("vkEnumerateDeviceExtensionProperties", unsafe {
            (self.enum_ext)(pd, ptr::null(), &mut ecount, exts.as_mut_ptr())
        })?;
        exts.truncate(ecount as usize);
        let names: Vec<String> = exts.iter().map(|e| c_name(&e.extensionName)).collect();
        let external_fd = names
            .iter()
            .any(|x| x.as_bytes() == EXT_EXTERNAL_MEMORY_FD.to_bytes());
        let info = DeviceInfo {
            name: c_name(&props.deviceName),
            device_type: props.deviceType,
            vendor_id: props.vendorID,
            api_version: props.apiVersion,
            driver_version: props.driverVersion,
            uuid,
            memory_types,
            external_fd,
        };
        Ok((info, names))
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: the instance is live, every device made from it is gone (a VkBar destroys
        // its device before its instance), and it is destroyed once.
        unsafe { (self.destroy)(self.handle, ptr::null()) };
    }
}

/// Destroys an instance whose set-up failed half-way.
struct Destroy(VkInstance, PFN_vkDestroyInstance);

impl Drop for Destroy {
    fn drop(&mut self) {
        // SAFETY: the instance is live, has no device, and is destroyed once.
        unsafe { (self.1)(self.0, ptr::null()) };
    }
}

/// Destroys a device whose set-up failed half-way.
struct PartialDevice(VkDevice, PFN_vkDestroyDevice);

impl Drop for PartialDevice {
    fn drop(&mut self) {
        // SAFETY: the device is live, has no allocations, and is destroyed once.
        unsafe { (self.1)(self.0, ptr::null()) };
    }
}

/// Every Vulkan physical device this process can see, described as [`VkBar::open`] would find
/// it (`external_fd`: the device offers `VK_KHR_external_memory_fd`), without creating a
/// device on any. An error says which step failed: the loader ([`Error::Dl`]), the instance
/// ([`Error::Vulkan`] of `vkCreateInstance`), an entry point ([`Error::Symbol`]) or a query.
pub fn survey() -> Result<Vec<DeviceInfo>> {
    let instance = Instance::create()?;
    instance
        .physical_devices()?
        .into_iter()
        .map(|pd| {
            let props = instance.properties(pd);
            instance.describe(pd, &props).map(|(info, _)| info)
        })
        .collect()
}

impl VkBar {
    /// Loads the Vulkan loader (`libvulkan.so.1`), creates an instance, picks a physical device
    /// ([`choose_device`]) and its BAR memory type ([`choose_memory_type`]), and creates a
    /// device with `VK_KHR_external_memory_fd` when offered.
    pub fn open() -> Result<VkBar> {
        let instance = Instance::create()?;
        // SAFETY: the types named are these entry points' own, on a live instance.
        let create_device: PFN_vkCreateDevice =
            unsafe { instance_fn(instance.gipa, instance.handle, "vkCreateDevice")? };
        // SAFETY: as above.
        let gdpa: PFN_vkGetDeviceProcAddr =
            unsafe { instance_fn(instance.gipa, instance.handle, "vkGetDeviceProcAddr")? };
        let phys = instance.physical_devices()?;
        if phys.is_empty() {
            return Err(Error::NoDevice);
        }
        let all_props: Vec<_> = phys.iter().map(|&p| instance.properties(p)).collect();
        let types: Vec<u32> = all_props.iter().map(|p| p.deviceType).collect();
        let chosen = match std::env::var("VKBAR_DEVICE")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
        {
            Some(i) if i < phys.len() => i,
            Some(i) => {
                return Err(Error::Invalid(format!(
                    "VKBAR_DEVICE={i}: only {} devices",
                    phys.len()
                )))
            }
            None => choose_device(&types).ok_or(Error::NoDevice)?,
        };
        let pd = phys[chosen];
        let (mut info, names) = instance.describe(pd, &all_props[chosen])?;
        let has = |n: &CStr| names.iter().any(|x| x.as_bytes() == n.to_bytes());
        let mut enable: Vec<&CStr> = Vec::new();
        if info.external_fd {
            for n in [EXT_EXTERNAL_MEMORY, EXT_EXTERNAL_MEMORY_FD] {
                if has(n) {
                    enable.push(n);
                }
            }
        }
        let enable_ptrs: Vec<*const c_char> = enable.iter().map(|c| c.as_ptr()).collect();

        let priority = 1.0f32;
        let qci = VkDeviceQueueCreateInfo::one_of_family_0(&priority);
        let dci = VkDeviceCreateInfo::with_extensions(&qci, &enable_ptrs);
        let mut device: VkDevice = ptr::null_mut();
        // SAFETY: every device has queue family 0; `dci` and its arrays outlive the call.
        check("vkCreateDevice", unsafe {
            create_device(pd, &dci, ptr::null(), &mut device)
        })?;
        // SAFETY: each device_fn call below names its entry point's own type; `device` is live.
        let destroy_device: PFN_vkDestroyDevice =
            unsafe { device_fn(gdpa, device, "vkDestroyDevice")? };
        let partial = PartialDevice(device, destroy_device);
        let fns = Fns {
            destroy_device,
            // SAFETY: as above.
            allocate_memory: unsafe { device_fn(gdpa, device, "vkAllocateMemory")? },
            // SAFETY: as above.
            free_memory: unsafe { device_fn(gdpa, device, "vkFreeMemory")? },
            // SAFETY: as above.
            map_memory: unsafe { device_fn(gdpa, device, "vkMapMemory")? },
            // SAFETY: as above.
            unmap_memory: unsafe { device_fn(gdpa, device, "vkUnmapMemory")? },
            get_memory_fd: if info.external_fd {
                // SAFETY: as above.
                Some(unsafe { device_fn(gdpa, device, "vkGetMemoryFdKHR")? })
            } else {
                None
            },
        };
        let bar_type = choose_memory_type(&info.memory_types).ok_or(Error::NoBarMemoryType)?;
        std::mem::forget(partial);
        info.external_fd = info.external_fd && enable.contains(&EXT_EXTERNAL_MEMORY_FD);
        Ok(VkBar {
            device,
            fns,
            info,
            bar_type,
            _instance: instance,
        })
    }

    /// What was found about the device.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The memory type [`VkBar::allocate`] uses.
    pub fn bar_type(&self) -> MemoryType {
        self.bar_type
    }

    fn map(&self, memory: VkDeviceMemory) -> Result<*mut u8> {
        self.map_range(memory, 0, VK_WHOLE_SIZE)
    }

    /// Maps `size` bytes of `memory` from `offset`; frees `memory` on failure.
    fn map_range(&self, memory: VkDeviceMemory, offset: u64, size: u64) -> Result<*mut u8> {
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: `memory` is a live, host-visible, unmapped allocation of this device; the
        // range was checked against its size by the callers.
        let r = unsafe { (self.fns.map_memory)(self.device, memory, offset, size, 0, &mut p) };
        if r < 0 || p.is_null() {
            // SAFETY: `memory` is live, unmapped and freed once here.
            unsafe { (self.fns.free_memory)(self.device, memory, ptr::null()) };
            return Err(Error::Vulkan {
                call: "vkMapMemory",
                result: r,
            });
        }
        Ok(p.cast())
    }

    /// Allocates `len` bytes of the BAR memory type and maps them. With `export` the allocation
    /// is made exportable as an opaque fd ([`Error::MissingExtension`] if the device can't).
    pub fn allocate(&self, len: usize, export: bool) -> Result<BarMemory<'_>> {
        if len == 0 {
            return Err(Error::Invalid("allocation of 0 bytes".into()));
        }
        if export && !self.info.external_fd {
            return Err(Error::MissingExtension(EXT_EXTERNAL_MEMORY_FD));
        }
        let exp = VkExportMemoryAllocateInfo {
            sType: STYPE_EXPORT_MEMORY_ALLOCATE_INFO,
            pNext: ptr::null(),
            handleTypes: EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
        };
        let ai = VkMemoryAllocateInfo {
            sType: STYPE_MEMORY_ALLOCATE_INFO,
            pNext: if export {
                (&exp as *const VkExportMemoryAllocateInfo).cast()
            } else {
                ptr::null()
            },
            allocationSize: len as u64,
            memoryTypeIndex: self.bar_type.index,
        };
        let mut memory: VkDeviceMemory = 0;
        // SAFETY: `ai` (and `exp`) live across the call; `memory` is writable.
        check("vkAllocateMemory", unsafe {
            (self.fns.allocate_memory)(self.device, &ai, ptr::null(), &mut memory)
        })?;
        let ptr = self.map(memory)?;
        Ok(BarMemory {
            bar: self,
            memory,
            ptr,
            len,
            exportable: export,
        })
    }

    /// Imports an opaque fd exported by [`BarMemory::export_fd`] of this same device as a new
    /// allocation of `len` bytes and maps it: a second CPU mapping of the same memory. The fd
    /// is consumed (Vulkan owns it on success; it is closed on failure).
    pub fn import_fd(&self, fd: OwnedFd, len: usize) -> Result<BarMemory<'_>> {
        self.import_fd_range(fd, len, 0, len)
    }

    /// As [`VkBar::import_fd`] for an exported allocation of `len` bytes, but maps only
    /// `map_len` bytes from `offset`: the result's pointer and length describe that range, and
    /// dropping it unmaps the range and frees the imported allocation.
    pub fn import_fd_range(
        &self,
        fd: OwnedFd,
        len: usize,
        offset: usize,
        map_len: usize,
    ) -> Result<BarMemory<'_>> {
        if len == 0 || map_len == 0 {
            return Err(Error::Invalid("import of 0 bytes".into()));
        }
        if offset.checked_add(map_len).is_none_or(|end| end > len) {
            return Err(Error::Invalid(format!(
                "range {offset}+{map_len} past {len} bytes"
            )));
        }
        if !self.info.external_fd {
            return Err(Error::MissingExtension(EXT_EXTERNAL_MEMORY_FD));
        }
        let imp = VkImportMemoryFdInfoKHR {
            sType: STYPE_IMPORT_MEMORY_FD_INFO_KHR,
            pNext: ptr::null(),
            handleType: EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
            fd: fd.as_raw_fd(),
        };
        let ai = VkMemoryAllocateInfo {
            sType: STYPE_MEMORY_ALLOCATE_INFO,
            pNext: (&imp as *const VkImportMemoryFdInfoKHR).cast(),
            allocationSize: len as u64,
            memoryTypeIndex: self.bar_type.index,
        };
        let mut memory: VkDeviceMemory = 0;
        // SAFETY: `ai` and `imp` live across the call; `memory` is writable.
        let r = unsafe { (self.fns.allocate_memory)(self.device, &ai, ptr::null(), &mut memory) };
        check("vkAllocateMemory(import)", r)?; // `fd` is dropped (closed) on this path
                                               // Success: the implementation owns the descriptor now.
        let _ = fd.into_raw_fd();
        let ptr = self.map_range(memory, offset as u64, map_len as u64)?;
        Ok(BarMemory {
            bar: self,
            memory,
            ptr,
            len: map_len,
            exportable: false,
        })
    }
}

impl Drop for VkBar {
    fn drop(&mut self) {
        // SAFETY: every BarMemory borrows self, so none is alive; the device is destroyed
        // once, here, and its instance after it, when the `_instance` field drops.
        unsafe { (self.fns.destroy_device)(self.device, ptr::null()) };
    }
}

impl BarMemory<'_> {
    /// The CPU address of the mapping (page aligned).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: allocations are never empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Exports the allocation as a new opaque fd (`vkGetMemoryFdKHR`); the caller owns it.
    pub fn export_fd(&self) -> Result<OwnedFd> {
        let f = match (self.exportable, self.bar.fns.get_memory_fd) {
            (true, Some(f)) => f,
            _ => return Err(Error::MissingExtension(EXT_EXTERNAL_MEMORY_FD)),
        };
        let info = VkMemoryGetFdInfoKHR {
            sType: STYPE_MEMORY_GET_FD_INFO_KHR,
            pNext: ptr::null(),
            memory: self.memory,
            handleType: EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
        };
        let mut fd = -1;
        // SAFETY: the allocation is live and was made exportable as an opaque fd.
        check("vkGetMemoryFdKHR", unsafe {
            f(self.bar.device, &info, &mut fd)
        })?;
        if fd < 0 {
            return Err(Error::Vulkan {
                call: "vkGetMemoryFdKHR",
                result: 0,
            });
        }
        // SAFETY: a fresh descriptor that this process now owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

impl Drop for BarMemory<'_> {
    fn drop(&mut self) {
        // SAFETY: the allocation is live and mapped; unmapped and freed once.
        unsafe {
            (self.bar.fns.unmap_memory)(self.bar.device, self.memory);
            (self.bar.fns.free_memory)(self.bar.device, self.memory, ptr::null());
        }
    }
}

/// A printable name of a `VK_PHYSICAL_DEVICE_TYPE_*` value.
pub fn device_type_name(t: u32) -> &'static str {
    match t {
        PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU => "integrated GPU",
        PHYSICAL_DEVICE_TYPE_DISCRETE_GPU => "discrete GPU",
        PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU => "virtual GPU",
        PHYSICAL_DEVICE_TYPE_CPU => "CPU",
        _ => "other",
    }
}

/// Reads a NUL-terminated C string into a `String` (lossy).
///
/// # Safety
/// `p` must be null or point to a NUL-terminated string.
pub unsafe fn cstr_lossy(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: the caller guarantees NUL termination.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_choice_prefers_discrete_gpus() {
        assert_eq!(
            choose_device(&[PHYSICAL_DEVICE_TYPE_CPU, PHYSICAL_DEVICE_TYPE_DISCRETE_GPU]),
            Some(1)
        );
        assert_eq!(
            choose_device(&[
                PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU,
                PHYSICAL_DEVICE_TYPE_CPU
            ]),
            Some(0)
        );
        assert_eq!(
            choose_device(&[PHYSICAL_DEVICE_TYPE_CPU, PHYSICAL_DEVICE_TYPE_CPU]),
            Some(0)
        );
        assert_eq!(choose_device(&[]), None);
    }
}
