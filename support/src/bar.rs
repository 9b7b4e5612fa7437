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
use crate::vk;
use std::ffi::{c_char, c_void, CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::ptr;

pub use crate::vk::{choose_memory_type, MemoryTypeInfo};

/// Picks a physical device from their `VkPhysicalDeviceType`s: a discrete GPU first, then an
/// integrated one, a virtual one, a CPU device, anything else; the first of equals wins.
pub fn choose_device(types: &[vk::PhysicalDeviceType]) -> Option<usize> {
    let rank = |t: vk::PhysicalDeviceType| match t {
        vk::PhysicalDeviceType::DISCRETE_GPU => 5,
        vk::PhysicalDeviceType::INTEGRATED_GPU => 4,
        vk::PhysicalDeviceType::VIRTUAL_GPU => 3,
        vk::PhysicalDeviceType::CPU => 2,
        _ => 1,
    };
    (0..types.len()).max_by_key(|&i| (rank(types[i]), std::cmp::Reverse(i)))
}

/// What [`VkBar::open`] found about the device.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// `deviceName`.
    pub name: String,
    /// `deviceType`.
    pub device_type: vk::PhysicalDeviceType,
    /// `vendorID` (0x10de for NVIDIA).
    pub vendor_id: u32,
    /// `apiVersion` of the device, packed as Vulkan packs it.
    pub api_version: u32,
    /// `driverVersion`, packed the vendor's way.
    pub driver_version: u32,
    /// `deviceUUID` (what `cuDeviceGetUuid` reports for the same GPU); zero when unknown.
    pub uuid: [u8; 16],
    /// Every memory type of the device.
    pub memory_types: Vec<MemoryTypeInfo>,
    /// Whether the device offers `VK_KHR_external_memory_fd` (from [`VkBar::open`]: and the
    /// device was created with it).
    pub external_fd: bool,
}

struct Fns {
    destroy_device: vk::PFN_vkDestroyDevice,
    allocate_memory: vk::PFN_vkAllocateMemory,
    free_memory: vk::PFN_vkFreeMemory,
    map_memory: vk::PFN_vkMapMemory,
    unmap_memory: vk::PFN_vkUnmapMemory,
    get_memory_fd: Option<vk::PFN_vkGetMemoryFdKHR>,
}

/// A Vulkan instance and logical device, ready to allocate BAR memory.
pub struct VkBar {
    device: vk::Device,
    fns: Fns,
    info: DeviceInfo,
    bar_type: MemoryTypeInfo,
    /// Dropped after the device (see `Drop for VkBar`).
    _instance: Instance,
}

/// One allocation of device memory, mapped for the CPU for its whole life.
pub struct BarMemory<'a> {
    bar: &'a VkBar,
    memory: vk::DeviceMemory,
    ptr: *mut u8,
    len: usize,
    exportable: bool,
}

fn check(call: &'static str, r: vk::Result) -> Result<()> {
    if r.as_raw() < 0 {
        Err(Error::Vulkan {
            call,
            result: r.as_raw(),
        })
    } else {
        Ok(())
    }
}

/// A fixed-size C string field of a Vulkan structure as text (empty without its NUL).
fn text(field: std::result::Result<&CStr, std::ffi::FromBytesUntilNulError>) -> String {
    field.map_or_else(|_| String::new(), |c| c.to_string_lossy().into_owned())
}

/// The command `name` as `get` resolves it for `handle` (`vkGetInstanceProcAddr` for an
/// instance, or null for the global commands; `vkGetDeviceProcAddr` for a device), as its
/// function pointer type `F`.
///
/// # Safety
/// `F` must be the function pointer type of the command `name` (ash's `PFN_<name>`), and
/// `handle` null or live.
unsafe fn resolve_command<H, F: Copy>(
    get: unsafe extern "system" fn(H, *const c_char) -> vk::PFN_vkVoidFunction,
    handle: H,
    name: &'static str,
) -> Result<F> {
    let missing = || Error::Symbol {
        name: name.to_owned(),
    };
    let c = CString::new(name).map_err(|_| missing())?;
    // SAFETY: `get` is the driver's vkGet*ProcAddr and `handle` is null or live.
    match unsafe { get(handle, c.as_ptr()) } {
        // SAFETY: the caller names the command's type; both are one code pointer wide.
        Some(f) => Ok(unsafe { std::mem::transmute_copy::<unsafe extern "system" fn(), F>(&f) }),
        None => Err(missing()),
    }
}

/// A Vulkan 1.1 instance (no layers, no instance extensions) with the entry points that list
/// and describe physical devices; destroyed on drop, before the loader is unloaded.
struct Instance {
    handle: vk::Instance,
    gipa: vk::PFN_vkGetInstanceProcAddr,
    destroy: vk::PFN_vkDestroyInstance,
    enumerate: vk::PFN_vkEnumeratePhysicalDevices,
    get_props: vk::PFN_vkGetPhysicalDeviceProperties,
    get_props2: Option<vk::PFN_vkGetPhysicalDeviceProperties2>,
    get_mem: vk::PFN_vkGetPhysicalDeviceMemoryProperties,
    enum_ext: vk::PFN_vkEnumerateDeviceExtensionProperties,
    _lib: Library,
}

impl Instance {
    /// Loads the Vulkan loader (`libvulkan.so.1`) and creates an instance.
    fn create() -> Result<Instance> {
        let lib = Library::open("libvulkan.so.1")?;
        // SAFETY: the loader exports vkGetInstanceProcAddr with exactly this signature.
        let gipa: vk::PFN_vkGetInstanceProcAddr = unsafe { lib.function("vkGetInstanceProcAddr")? };
        // SAFETY: the type named is vkCreateInstance's.
        let create_instance: vk::PFN_vkCreateInstance =
            unsafe { resolve_command(gipa, vk::Instance::null(), "vkCreateInstance")? };

        let app = vk::application_info(c"vkbar");
        let ici = vk::InstanceCreateInfo::default().application_info(&app);
        let mut instance = vk::Instance::null();
        // SAFETY: `ici` and what it points to live across the call; `instance` is writable.
        check("vkCreateInstance", unsafe {
            create_instance(&ici, ptr::null(), &mut instance)
        })?;
        // Without vkDestroyInstance the instance can only be leaked.
        // SAFETY: the type named is this entry point's own, on a live instance.
        let destroy: vk::PFN_vkDestroyInstance =
            unsafe { resolve_command(gipa, instance, "vkDestroyInstance")? };
        let guard = Destroy(instance, destroy);
        // Each type named below is its entry point's own, on a live instance.
        let made = Instance {
            handle: instance,
            gipa,
            destroy,
            // SAFETY: see above.
            enumerate: unsafe { resolve_command(gipa, instance, "vkEnumeratePhysicalDevices")? },
            // SAFETY: see above.
            get_props: unsafe { resolve_command(gipa, instance, "vkGetPhysicalDeviceProperties")? },
            // SAFETY: see above.
            get_props2: unsafe {
                resolve_command(gipa, instance, "vkGetPhysicalDeviceProperties2")
            }
            .ok(),
            // SAFETY: see above.
            get_mem: unsafe {
                resolve_command(gipa, instance, "vkGetPhysicalDeviceMemoryProperties")?
            },
            // SAFETY: see above.
            enum_ext: unsafe {
                resolve_command(gipa, instance, "vkEnumerateDeviceExtensionProperties")?
            },
            _lib: lib,
        };
        // The instance destroys itself from here on.
        std::mem::forget(guard);
        Ok(made)
    }

    /// Every physical device of the instance.
    fn physical_devices(&self) -> Result<Vec<vk::PhysicalDevice>> {
        let mut count = 0u32;
        // SAFETY: a count query with a null array on a live instance.
        check("vkEnumeratePhysicalDevices", unsafe {
            (self.enumerate)(self.handle, &mut count, ptr::null_mut())
        })?;
        let mut phys = vec![vk::PhysicalDevice::null(); count as usize];
        // SAFETY: `phys` has room for `count` handles.
        check("vkEnumeratePhysicalDevices", unsafe {
            (self.enumerate)(self.handle, &mut count, phys.as_mut_ptr())
        })?;
        phys.truncate(count as usize);
        Ok(phys)
    }

    /// `vkGetPhysicalDeviceProperties` of `pd`.
    fn properties(&self, pd: vk::PhysicalDevice) -> Box<vk::PhysicalDeviceProperties> {
        let mut props = Box::<vk::PhysicalDeviceProperties>::default();
        // SAFETY: `pd` is a live physical device; `props` is writable.
        unsafe { (self.get_props)(pd, &mut *props) };
        props
    }

    /// What is known of `pd` (with its properties `props`), `external_fd` meaning offered,
    /// and the names of the device extensions it offers.
    fn describe(
        &self,
        pd: vk::PhysicalDevice,
        props: &vk::PhysicalDeviceProperties,
    ) -> Result<(DeviceInfo, Vec<String>)> {
        let mut uuid = [0u8; 16];
        if let Some(gp2) = self.get_props2 {
            let mut id = vk::PhysicalDeviceIDProperties::default();
            let mut p2 = Box::new(vk::PhysicalDeviceProperties2::default().push_next(&mut id));
            // SAFETY: a well-formed chain of live structs; the device supports 1.1 queries
            // whenever the loader returned this entry point for a 1.1 instance.
            unsafe { gp2(pd, &mut *p2) };
            drop(p2);
            uuid = id.device_uuid;
        }

        let mut mp = Box::<vk::PhysicalDeviceMemoryProperties>::default();
        // SAFETY: `pd` is live and `mp` is writable.
        unsafe { (self.get_mem)(pd, &mut *mp) };
        let memory_types: Vec<MemoryTypeInfo> = MemoryTypeInfo::all(&mp).collect();

        let mut ecount = 0u32;
        // SAFETY: a count query with a null array.
        check("vkEnumerateDeviceExtensionProperties", unsafe {
            (self.enum_ext)(pd, ptr::null(), &mut ecount, ptr::null_mut())
        })?;
        let mut exts = vec![vk::ExtensionProperties::default(); ecount as usize];
        // SAFETY: `exts` has room for `ecount` entries.
        check("vkEnumerateDeviceExtensionProperties", unsafe {
            (self.enum_ext)(pd, ptr::null(), &mut ecount, exts.as_mut_ptr())
        })?;
        exts.truncate(ecount as usize);
        let names: Vec<String> = exts
            .iter()
            .map(|e| text(e.extension_name_as_c_str()))
            .collect();
        let external_fd = names
            .iter()
            .any(|x| x.as_bytes() == vk::KHR_EXTERNAL_MEMORY_FD_NAME.to_bytes());
        let info = DeviceInfo {
            name: text(props.device_name_as_c_str()),
            device_type: props.device_type,
            vendor_id: props.vendor_id,
            api_version: props.api_version,
            driver_version: props.driver_version,
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
struct Destroy(vk::Instance, vk::PFN_vkDestroyInstance);

impl Drop for Destroy {
    fn drop(&mut self) {
        // SAFETY: the instance is live, has no device, and is destroyed once.
        unsafe { (self.1)(self.0, ptr::null()) };
    }
}

/// Destroys a device whose set-up failed half-way.
struct PartialDevice(vk::Device, vk::PFN_vkDestroyDevice);

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
        let create_device: vk::PFN_vkCreateDevice =
            unsafe { resolve_command(instance.gipa, instance.handle, "vkCreateDevice")? };
        // SAFETY: as above.
        let gdpa: vk::PFN_vkGetDeviceProcAddr =
            unsafe { resolve_command(instance.gipa, instance.handle, "vkGetDeviceProcAddr")? };
        let phys = instance.physical_devices()?;
        if phys.is_empty() {
            return Err(Error::NoDevice);
        }
        let all_props: Vec<_> = phys.iter().map(|&p| instance.properties(p)).collect();
        let types: Vec<_> = all_props.iter().map(|p| p.device_type).collect();
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
            for n in [
                vk::KHR_EXTERNAL_MEMORY_NAME,
                vk::KHR_EXTERNAL_MEMORY_FD_NAME,
            ] {
                if has(n) {
                    enable.push(n);
                }
            }
        }
        let enable_ptrs: Vec<*const c_char> = enable.iter().map(|c| c.as_ptr()).collect();

        let qci = vk::DeviceQueueCreateInfo::default().queue_priorities(&[1.0]);
        let dci = vk::DeviceCreateInfo::default()
            .queue_create_infos(std::slice::from_ref(&qci))
            .enabled_extension_names(&enable_ptrs);
        let mut device = vk::Device::null();
        // SAFETY: every device has queue family 0; `dci` and its arrays outlive the call.
        check("vkCreateDevice", unsafe {
            create_device(pd, &dci, ptr::null(), &mut device)
        })?;
        // SAFETY: each resolve_command call below names its entry point's own type; `device` is live.
        let destroy_device: vk::PFN_vkDestroyDevice =
            unsafe { resolve_command(gdpa, device, "vkDestroyDevice")? };
        let partial = PartialDevice(device, destroy_device);
        let fns = Fns {
            destroy_device,
            // SAFETY: as above.
            allocate_memory: unsafe { resolve_command(gdpa, device, "vkAllocateMemory")? },
            // SAFETY: as above.
            free_memory: unsafe { resolve_command(gdpa, device, "vkFreeMemory")? },
            // SAFETY: as above.
            map_memory: unsafe { resolve_command(gdpa, device, "vkMapMemory")? },
            // SAFETY: as above.
            unmap_memory: unsafe { resolve_command(gdpa, device, "vkUnmapMemory")? },
            get_memory_fd: if info.external_fd {
                // SAFETY: as above.
                Some(unsafe { resolve_command(gdpa, device, "vkGetMemoryFdKHR")? })
            } else {
                None
            },
        };
        let bar_type = choose_memory_type(&info.memory_types).ok_or(Error::NoBarMemoryType)?;
        std::mem::forget(partial);
        info.external_fd = info.external_fd && enable.contains(&vk::KHR_EXTERNAL_MEMORY_FD_NAME);
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
    pub fn bar_type(&self) -> MemoryTypeInfo {
        self.bar_type
    }

    fn map(&self, memory: vk::DeviceMemory) -> Result<*mut u8> {
        self.map_range(memory, 0, vk::WHOLE_SIZE)
    }

    /// Maps `size` bytes of `memory` from `offset`; frees `memory` on failure.
    fn map_range(&self, memory: vk::DeviceMemory, offset: u64, size: u64) -> Result<*mut u8> {
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: `memory` is a live, host-visible, unmapped allocation of this device; the
        // range was checked against its size by the callers.
        let r = unsafe {
            (self.fns.map_memory)(
                self.device,
                memory,
                offset,
                size,
                vk::MemoryMapFlags::empty(),
                &mut p,
            )
        };
        if r.as_raw() < 0 || p.is_null() {
            // SAFETY: `memory` is live, unmapped and freed once here.
            unsafe { (self.fns.free_memory)(self.device, memory, ptr::null()) };
            return Err(Error::Vulkan {
                call: "vkMapMemory",
                result: r.as_raw(),
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
            return Err(Error::MissingExtension(vk::KHR_EXTERNAL_MEMORY_FD_NAME));
        }
        let mut exp = vk::ExportMemoryAllocateInfo::default()
            .handle_types(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
        let mut ai = vk::MemoryAllocateInfo::default()
            .allocation_size(len as u64)
            .memory_type_index(self.bar_type.index);
        if export {
            ai = ai.push_next(&mut exp);
        }
        let mut memory = vk::DeviceMemory::null();
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
            return Err(Error::MissingExtension(vk::KHR_EXTERNAL_MEMORY_FD_NAME));
        }
        let mut imp = vk::ImportMemoryFdInfoKHR::default()
            .handle_type(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD)
            .fd(fd.as_raw_fd());
        let ai = vk::MemoryAllocateInfo::default()
            .allocation_size(len as u64)
            .memory_type_index(self.bar_type.index)
            .push_next(&mut imp);
        let mut memory = vk::DeviceMemory::null();
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
            _ => return Err(Error::MissingExtension(vk::KHR_EXTERNAL_MEMORY_FD_NAME)),
        };
        let info = vk::MemoryGetFdInfoKHR::default()
            .memory(self.memory)
            .handle_type(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
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

/// A printable name of a `VkPhysicalDeviceType`.
pub fn device_type_name(t: vk::PhysicalDeviceType) -> &'static str {
    match t {
        vk::PhysicalDeviceType::INTEGRATED_GPU => "integrated GPU",
        vk::PhysicalDeviceType::DISCRETE_GPU => "discrete GPU",
        vk::PhysicalDeviceType::VIRTUAL_GPU => "virtual GPU",
        vk::PhysicalDeviceType::CPU => "CPU",
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
            choose_device(&[
                vk::PhysicalDeviceType::CPU,
                vk::PhysicalDeviceType::DISCRETE_GPU
            ]),
            Some(1)
        );
        assert_eq!(
            choose_device(&[
                vk::PhysicalDeviceType::INTEGRATED_GPU,
                vk::PhysicalDeviceType::CPU
            ]),
            Some(0)
        );
        assert_eq!(
            choose_device(&[vk::PhysicalDeviceType::CPU, vk::PhysicalDeviceType::CPU]),
            Some(0)
        );
        assert_eq!(choose_device(&[]), None);
    }
}
