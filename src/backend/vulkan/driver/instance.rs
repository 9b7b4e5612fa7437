//! A Vulkan instance and its physical devices, as the backend needs to know them.

use super::device::Device;
use super::{check, loader, resolve_command, Failure, VkError};
use gdrapi_abi::vk::{self, choose_memory_type, MemoryTypeInfo};
use std::ffi::{c_char, CStr};
use std::ptr;

/// What the backend needs to know of one physical device.
#[derive(Debug, Clone)]
pub struct PhysicalDevice {
    handle: vk::PhysicalDevice,
    /// `deviceName`.
    pub name: String,
    /// `deviceUUID`: equal to `cuDeviceGetUuid` for the same GPU.
    pub uuid: [u8; 16],
    /// Whether the device offers `VK_KHR_external_memory_fd`.
    pub external_fd: bool,
    /// The memory type that maps VRAM through the BAR ([`choose_memory_type`]), if any.
    pub memory_type: Option<MemoryTypeInfo>,
}

/// The instance's entry points.
struct Fns {
    destroy_instance: vk::PFN_vkDestroyInstance,
    enumerate_physical_devices: vk::PFN_vkEnumeratePhysicalDevices,
    get_properties2: vk::PFN_vkGetPhysicalDeviceProperties2,
    get_memory_properties: vk::PFN_vkGetPhysicalDeviceMemoryProperties,
    enumerate_extensions: vk::PFN_vkEnumerateDeviceExtensionProperties,
    create_device: vk::PFN_vkCreateDevice,
    get_device_proc_addr: vk::PFN_vkGetDeviceProcAddr,
}

/// A Vulkan 1.1 instance; destroyed on drop, after every [`Device`] made from it. Shared
/// between threads (ash's handles are `Send` and `Sync`): the calls made here (enumeration,
/// queries, vkCreateDevice) need no external synchronisation, and vkDestroyInstance runs
/// once, in `drop`, which takes the instance by `&mut`.
pub struct Instance {
    handle: vk::Instance,
    fns: Fns,
}

/// Destroys an instance whose set-up failed half-way.
struct Partial(vk::Instance, vk::PFN_vkDestroyInstance);

impl Drop for Partial {
    fn drop(&mut self) {
        // SAFETY: the instance is live, has no device, and is destroyed once.
        unsafe { (self.1)(self.0, ptr::null()) };
    }
}

impl Instance {
    /// Loads the Vulkan loader and creates an instance for API version 1.1 (no layers, no
    /// instance extensions).
    pub fn create() -> Result<Instance, Failure> {
        let gipa = loader::load().map_err(Failure::Load)?;
        // SAFETY: the type named is vkCreateInstance's.
        let create: vk::PFN_vkCreateInstance =
            unsafe { resolve_command(gipa, vk::Instance::null(), c"vkCreateInstance")? };
        let app = vk::application_info(c"libgdrapi");
        let info = vk::InstanceCreateInfo::default().application_info(&app);
        let mut handle = vk::Instance::null();
        // SAFETY: `info` and what it points to live across the call; `handle` is writable.
        check("vkCreateInstance", unsafe {
            create(&info, ptr::null(), &mut handle)
        })
        .map_err(Failure::Call)?;
        // SAFETY: the type named is vkDestroyInstance's, on a live instance. Without it the
        // instance can only be leaked.
        let destroy: vk::PFN_vkDestroyInstance =
            unsafe { resolve_command(gipa, handle, c"vkDestroyInstance")? };
        let partial = Partial(handle, destroy);
        // Each field's type is the entry point's own (`PFN_<name>`), on a live instance.
        let fns = Fns {
            destroy_instance: destroy,
            // SAFETY: see above.
            enumerate_physical_devices: unsafe {
                resolve_command(gipa, handle, c"vkEnumeratePhysicalDevices")?
            },
            // SAFETY: see above.
            get_properties2: unsafe {
                resolve_command(gipa, handle, c"vkGetPhysicalDeviceProperties2")?
            },
            // SAFETY: see above.
            get_memory_properties: unsafe {
                resolve_command(gipa, handle, c"vkGetPhysicalDeviceMemoryProperties")?
            },
            // SAFETY: see above.
            enumerate_extensions: unsafe {
                resolve_command(gipa, handle, c"vkEnumerateDeviceExtensionProperties")?
            },
            // SAFETY: see above.
            create_device: unsafe { resolve_command(gipa, handle, c"vkCreateDevice")? },
            // SAFETY: see above.
            get_device_proc_addr: unsafe { resolve_command(gipa, handle, c"vkGetDeviceProcAddr")? },
        };
        std::mem::forget(partial);
        Ok(Instance { handle, fns })
    }

    /// Every physical device, with its UUID, extension and BAR memory type.
    pub fn physical_devices(&self) -> Result<Vec<PhysicalDevice>, VkError> {
        let mut count = 0u32;
        // SAFETY: a count query on a live instance.
        check("vkEnumeratePhysicalDevices", unsafe {
            (self.fns.enumerate_physical_devices)(self.handle, &mut count, ptr::null_mut())
        })?;
        let mut handles = vec![vk::PhysicalDevice::null(); count as usize];
        // SAFETY: `handles` has room for `count` entries (VK_INCOMPLETE if more appeared).
        check("vkEnumeratePhysicalDevices", unsafe {
            (self.fns.enumerate_physical_devices)(self.handle, &mut count, handles.as_mut_ptr())
        })?;
        handles.truncate(count as usize);
        handles.into_iter().map(|h| self.describe(h)).collect()
    }

    fn describe(&self, handle: vk::PhysicalDevice) -> Result<PhysicalDevice, VkError> {
        let mut id = vk::PhysicalDeviceIDProperties::default();
        let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
        // SAFETY: `props` and the chained `id` are writable and live across the call.
        unsafe { (self.fns.get_properties2)(handle, &mut props) };
        let name = props.properties.device_name_as_c_str().map_or_else(
            |_| String::from("(unnamed)"),
            |n| n.to_string_lossy().into_owned(),
        );
        let mut mem = vk::PhysicalDeviceMemoryProperties::default();
        // SAFETY: `mem` is writable.
        unsafe { (self.fns.get_memory_properties)(handle, &mut mem) };
        let types: Vec<MemoryTypeInfo> = MemoryTypeInfo::all(&mem).collect();
        Ok(PhysicalDevice {
            handle,
            name,
            uuid: id.device_uuid,
            external_fd: self.offers(handle, vk::KHR_EXTERNAL_MEMORY_FD_NAME)?,
            memory_type: choose_memory_type(&types),
        })
    }

    /// Whether `handle` offers the device extension `ext`.
    fn offers(&self, handle: vk::PhysicalDevice, ext: &CStr) -> Result<bool, VkError> {
        let mut count = 0u32;
        // SAFETY: a count query on a live physical device.
        check("vkEnumerateDeviceExtensionProperties", unsafe {
            (self.fns.enumerate_extensions)(handle, ptr::null(), &mut count, ptr::null_mut())
        })?;
        let mut exts = vec![vk::ExtensionProperties::default(); count as usize];
        // SAFETY: `exts` has room for `count` entries.
        check("vkEnumerateDeviceExtensionProperties", unsafe {
            (self.fns.enumerate_extensions)(handle, ptr::null(), &mut count, exts.as_mut_ptr())
        })?;
        exts.truncate(count as usize);
        Ok(exts.iter().any(|e| e.extension_name_as_c_str() == Ok(ext)))
    }

    /// A logical device on `pd` with `VK_KHR_external_memory_fd` enabled (and
    /// `VK_KHR_external_memory`, core since 1.1, named as well for older drivers).
    pub fn create_device(&self, pd: &PhysicalDevice) -> Result<Device, Failure> {
        let queue = vk::DeviceQueueCreateInfo::default().queue_priorities(&[1.0]);
        let exts: [*const c_char; 2] = [
            vk::KHR_EXTERNAL_MEMORY_NAME.as_ptr(),
            vk::KHR_EXTERNAL_MEMORY_FD_NAME.as_ptr(),
        ];
        let info = vk::DeviceCreateInfo::default()
            .queue_create_infos(std::slice::from_ref(&queue))
            .enabled_extension_names(&exts);
        let mut handle = vk::Device::null();
        // SAFETY: every physical device has queue family 0; `info` and its arrays live across
        // the call; `handle` is writable.
        check("vkCreateDevice", unsafe {
            (self.fns.create_device)(pd.handle, &info, ptr::null(), &mut handle)
        })
        .map_err(Failure::Call)?;
        // SAFETY: `handle` is a live device just made from this instance.
        unsafe { Device::new(handle, self.fns.get_device_proc_addr) }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: the instance is live and destroyed once; its devices are owned by the
        // backend, which drops them first.
        unsafe { (self.fns.destroy_instance)(self.handle, ptr::null()) };
    }
}
