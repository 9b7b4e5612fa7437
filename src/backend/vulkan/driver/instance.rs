//! A Vulkan instance and its physical devices, as the backend needs to know them.

use super::device::Device;
use super::{check, loader, Failure, VkError};
use gdrapi_abi::vk::*;
use std::ffi::{c_char, CStr};
use std::ptr;

/// What the backend needs to know of one physical device.
#[derive(Debug, Clone)]
pub struct PhysicalDevice {
    handle: VkPhysicalDevice,
    /// `deviceName`.
    pub name: String,
    /// `deviceUUID`: equal to `cuDeviceGetUuid` for the same GPU.
    pub uuid: [u8; 16],
    /// Whether the device offers `VK_KHR_external_memory_fd`.
    pub external_fd: bool,
    /// The memory type that maps VRAM through the BAR ([`choose_memory_type`]), if any.
    pub memory_type: Option<MemoryType>,
}

/// The instance's entry points.
struct Fns {
    destroy_instance: PFN_vkDestroyInstance,
    enumerate_physical_devices: PFN_vkEnumeratePhysicalDevices,
    get_properties2: PFN_vkGetPhysicalDeviceProperties2,
    get_memory_properties: PFN_vkGetPhysicalDeviceMemoryProperties,
    enumerate_extensions: PFN_vkEnumerateDeviceExtensionProperties,
    create_device: PFN_vkCreateDevice,
    get_device_proc_addr: PFN_vkGetDeviceProcAddr,
}

/// A Vulkan 1.1 instance; destroyed on drop, after every [`Device`] made from it.
pub struct Instance {
    handle: VkInstance,
    fns: Fns,
}

// SAFETY: a VkInstance and the physical devices it lists may be used from any thread; the
// calls made here (enumeration, queries, vkCreateDevice) need no external synchronisation,
// and vkDestroyInstance runs once, in `drop`, which takes the instance by `&mut`.
unsafe impl Send for Instance {}
// SAFETY: as above.
unsafe impl Sync for Instance {}
// SAFETY: a VkPhysicalDevice is an identifier that any thread may pass to the queries above.
unsafe impl Send for PhysicalDevice {}
// SAFETY: as above.
unsafe impl Sync for PhysicalDevice {}

/// Resolves `name` through `gipa(instance, name)` as function type `F`.
///
/// # Safety
/// `F` must be the `extern "C"` function pointer type of the entry point `name`, and
/// `instance` null (global entry points) or live.
pub(super) unsafe fn instance_fn<F: Copy>(
    gipa: PFN_vkGetInstanceProcAddr,
    instance: VkInstance,
    name: &'static CStr,
) -> Result<F, Failure> {
    // SAFETY: `gipa` is the loader's vkGetInstanceProcAddr; `instance` is null or live.
    match unsafe { gipa(instance, name.as_ptr()) } {
        // SAFETY: the caller names the matching type; both are one code pointer wide.
        Some(f) => Ok(unsafe { std::mem::transmute_copy::<unsafe extern "C" fn(), F>(&f) }),
        None => Err(Failure::Missing(name)),
    }
}

/// Destroys an instance whose set-up failed half-way.
struct Partial(VkInstance, PFN_vkDestroyInstance);

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
        let create: PFN_vkCreateInstance =
            unsafe { instance_fn(gipa, ptr::null_mut(), c"vkCreateInstance")? };
        let app = VkApplicationInfo::named(Some(c"libgdrapi"));
        let info = VkInstanceCreateInfo::plain(&app);
        let mut handle: VkInstance = ptr::null_mut();
        // SAFETY: `info` and what it points to live across the call; `handle` is writable.
        check("vkCreateInstance", unsafe {
            create(&info, ptr::null(), &mut handle)
        })
        .map_err(Failure::Call)?;
        // SAFETY: the type named is vkDestroyInstance's, on a live instance. Without it the
        // instance can only be leaked.
        let destroy: PFN_vkDestroyInstance =
            unsafe { instance_fn(gipa, handle, c"vkDestroyInstance")? };
        let partial = Partial(handle, destroy);
        // Each field's type is the entry point's own (`PFN_<name>`), on a live instance.
        let fns = Fns {
            destroy_instance: destroy,
            // SAFETY: see above.
            enumerate_physical_devices: unsafe {
                instance_fn(gipa, handle, c"vkEnumeratePhysicalDevices")?
            },
            // SAFETY: see above.
            get_properties2: unsafe {
                instance_fn(gipa, handle, c"vkGetPhysicalDeviceProperties2")?
            },
            // SAFETY: see above.
            get_memory_properties: unsafe {
                instance_fn(gipa, handle, c"vkGetPhysicalDeviceMemoryProperties")?
            },
            // SAFETY: see above.
            enumerate_extensions: unsafe {
                instance_fn(gipa, handle, c"vkEnumerateDeviceExtensionProperties")?
            },
            // SAFETY: see above.
            create_device: unsafe { instance_fn(gipa, handle, c"vkCreateDevice")? },
            // SAFETY: see above.
            get_device_proc_addr: unsafe { instance_fn(gipa, handle, c"vkGetDeviceProcAddr")? },
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
        let mut handles = vec![ptr::null_mut(); count as usize];
        // SAFETY: `handles` has room for `count` entries (VK_INCOMPLETE if more appeared).
        check("vkEnumeratePhysicalDevices", unsafe {
            (self.fns.enumerate_physical_devices)(self.handle, &mut count, handles.as_mut_ptr())
        })?;
        handles.truncate(count as usize);
        handles.into_iter().map(|h| self.describe(h)).collect()
    }

    fn describe(&self, handle: VkPhysicalDevice) -> Result<PhysicalDevice, VkError> {
        // SAFETY: all-zero is valid for these plain-data structures.
        let mut id: VkPhysicalDeviceIDProperties = unsafe { std::mem::zeroed() };
        id.sType = STYPE_PHYSICAL_DEVICE_ID_PROPERTIES;
        // SAFETY: as above.
        let mut props: VkPhysicalDeviceProperties2 = unsafe { std::mem::zeroed() };
        props.sType = STYPE_PHYSICAL_DEVICE_PROPERTIES_2;
        props.pNext = (&mut id as *mut VkPhysicalDeviceIDProperties).cast();
        // SAFETY: `props` and the chained `id` are writable and live across the call.
        unsafe { (self.fns.get_properties2)(handle, &mut props) };
        // SAFETY: as above.
        let mut mem: VkPhysicalDeviceMemoryProperties = unsafe { std::mem::zeroed() };
        // SAFETY: `mem` is writable.
        unsafe { (self.fns.get_memory_properties)(handle, &mut mem) };
        let types: Vec<MemoryType> = mem.memoryTypes[..(mem.memoryTypeCount as usize).min(32)]
            .iter()
            .zip(0u32..)
            .map(|(t, index)| MemoryType {
                index,
                flags: t.propertyFlags,
                heap_index: t.heapIndex,
                heap_size: mem
                    .memoryHeaps
                    .get(t.heapIndex as usize)
                    .map_or(0, |h| h.size),
            })
            .collect();
        Ok(PhysicalDevice {
            handle,
            name: c_text(&props.properties.deviceName),
            uuid: id.deviceUUID,
            external_fd: self.offers(handle, EXT_EXTERNAL_MEMORY_FD)?,
            memory_type: choose_memory_type(&types),
        })
    }

    /// Whether `handle` offers the device extension `ext`.
    fn offers(&self, handle: VkPhysicalDevice, ext: &CStr) -> Result<bool, VkError> {
        let mut count = 0u32;
        // SAFETY: a count query on a live physical device.
        check("vkEnumerateDeviceExtensionProperties", unsafe {
            (self.fns.enumerate_extensions)(handle, ptr::null(), &mut count, ptr::null_mut())
        })?;
        // SAFETY: all-zero is valid for this plain-data structure.
        let mut exts: Vec<VkExtensionProperties> =
            (0..count).map(|_| unsafe { std::mem::zeroed() }).collect();
        // SAFETY: `exts` has room for `count` entries.
        check("vkEnumerateDeviceExtensionProperties", unsafe {
            (self.fns.enumerate_extensions)(handle, ptr::null(), &mut count, exts.as_mut_ptr())
        })?;
        exts.truncate(count as usize);
        Ok(exts
            .iter()
            .any(|e| c_text(&e.extensionName).as_bytes() == ext.to_bytes()))
    }

    /// A logical device on `pd` with `VK_KHR_external_memory_fd` enabled (and
    /// `VK_KHR_external_memory`, core since 1.1, named as well for older drivers).
    pub fn create_device(&self, pd: &PhysicalDevice) -> Result<Device, Failure> {
        let priority = 1.0f32;
        let queue = VkDeviceQueueCreateInfo::one_of_family_0(&priority);
        let exts: [*const c_char; 2] = [
            EXT_EXTERNAL_MEMORY.as_ptr(),
            EXT_EXTERNAL_MEMORY_FD.as_ptr(),
        ];
        let info = VkDeviceCreateInfo::with_extensions(&queue, &exts);
        let mut handle: VkDevice = ptr::null_mut();
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

/// A fixed-size, NUL-terminated C string field as text.
fn c_text(field: &[c_char]) -> String {
    let bytes: Vec<u8> = field
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c.to_ne_bytes()[0])
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_text_stops_at_the_nul_and_at_the_end() {
        let mut field = [0 as c_char; 8];
        for (d, s) in field.iter_mut().zip(b"NVIDIA\0x") {
            *d = *s as c_char;
        }
        assert_eq!(c_text(&field), "NVIDIA");
        let full = [b'a' as c_char; 4];
        assert_eq!(c_text(&full), "aaaa");
    }
}
