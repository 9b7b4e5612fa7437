//! The stand-in driven as the library's Vulkan import backend drives it, on the fake GPU of
//! the test process. The tests share that GPU and the fault-injection rules, so they run one
//! at a time.

use super::*;
use crate::cuda::testing::*;
use crate::cuda::{CUresult, MemAllocationProp};
use gdrapi_abi::cuda::MemLocation;
use libc::{c_int, c_void};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a test learns of the costs `memory::spend` takes, while it watches them.
#[derive(Default)]
struct Watch {
    /// (allocation size, cost, whether the emulator's lock was free) of each cost taken.
    spent: Vec<(u64, Duration, bool)>,
    /// When set, the next thread to take a cost tells `.0` and waits for `.1` first.
    hold: Option<(mpsc::Sender<()>, mpsc::Receiver<()>)>,
}

static WATCH: Mutex<Option<Watch>> = Mutex::new(None);

fn watch() -> MutexGuard<'static, Option<Watch>> {
    WATCH.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the emulator's lock can be taken: false when the calling thread holds it (every
/// try fails then); other tests of the crate hold it only briefly.
fn lock_is_free() -> bool {
    (0..10_000).any(|_| {
        let free = crate::state::STATE.try_lock().is_some();
        if !free {
            std::thread::sleep(Duration::from_millis(1));
        }
        free
    })
}

/// Called by `memory::spend` before it takes a cost: records it for a watching test (and
/// whether the emulator's lock was free then), and holds the thread there when asked to.
pub(super) fn cost_hook(size: u64, cost: Duration) {
    if watch().is_none() {
        return;
    }
    let lock_free = lock_is_free();
    let hold = match watch().as_mut() {
        Some(w) => {
            w.spent.push((size, cost, lock_free));
            w.hold.take()
        }
        None => return,
    };
    if let Some((entered, go)) = hold {
        let _ = entered.send(());
        // Not a timing: a bound on how long a broken test can keep this thread.
        let _ = go.recv_timeout(Duration::from_secs(60));
    }
}

/// A command of the stand-in, cast to its type.
macro_rules! command {
    ($inst:expr, $name:literal as $ty:ty) => {{
        let name = concat!($name, "\0").as_ptr().cast();
        // SAFETY: a NUL-terminated name.
        let f = unsafe { gdrsim_vkGetInstanceProcAddr($inst, name) };
        let f = f.expect($name);
        // SAFETY: the stand-in hands out this command with this type (its table checks it).
        unsafe { std::mem::transmute::<unsafe extern "system" fn(), $ty>(f) }
    }};
}

const GRAN: u64 = crate::gpu::VMM_GRANULARITY;

fn counters() -> crate::counters::Counters {
    crate::state::STATE.lock().counters()
}

struct Vk {
    instance: vk::Instance,
    pd: vk::PhysicalDevice,
    device: vk::Device,
    allocate: vk::PFN_vkAllocateMemory,
    free: vk::PFN_vkFreeMemory,
    map: vk::PFN_vkMapMemory,
    unmap: vk::PFN_vkUnmapMemory,
}

impl Vk {
    /// An instance, its device and a device with `extensions` enabled.
    fn new(extensions: &[&std::ffi::CStr]) -> Vk {
        let create: vk::PFN_vkCreateInstance =
            command!(vk::Instance::null(), "vkCreateInstance" as _);
        let app = vk::application_info(c"gdrsim tests");
        let info = vk::InstanceCreateInfo::default().application_info(&app);
        let mut instance = vk::Instance::null();
        // SAFETY: valid create info and out-pointer.
        let r = unsafe { create(&info, std::ptr::null(), &mut instance) };
        assert_eq!(r, vk::Result::SUCCESS);
        let enumerate: vk::PFN_vkEnumeratePhysicalDevices =
            command!(instance, "vkEnumeratePhysicalDevices" as _);
        let mut pd = vk::PhysicalDevice::null();
        let mut n = 1;
        // SAFETY: room for one handle.
        let r = unsafe { enumerate(instance, &mut n, &mut pd) };
        assert_eq!(r, vk::Result::SUCCESS);
        let device = create_device(instance, pd, extensions).expect("vkCreateDevice");
        let gdpa: vk::PFN_vkGetDeviceProcAddr = command!(instance, "vkGetDeviceProcAddr" as _);
        macro_rules! dev {
            ($name:literal as $ty:ty) => {{
                // SAFETY: a live device and a NUL-terminated name.
                let f = unsafe { gdpa(device, concat!($name, "\0").as_ptr().cast()) }.expect($name);
                // SAFETY: the stand-in hands out this command with this type.
                unsafe { std::mem::transmute::<unsafe extern "system" fn(), $ty>(f) }
            }};
        }
        Vk {
            instance,
            pd,
            device,
            allocate: dev!("vkAllocateMemory" as vk::PFN_vkAllocateMemory),
            free: dev!("vkFreeMemory" as vk::PFN_vkFreeMemory),
            map: dev!("vkMapMemory" as vk::PFN_vkMapMemory),
            unmap: dev!("vkUnmapMemory" as vk::PFN_vkUnmapMemory),
        }
    }

    fn import(
        &self,
        size: u64,
        type_index: u32,
        kind: vk::ExternalMemoryHandleTypeFlags,
        fd: c_int,
    ) -> Result<u64, vk::Result> {
        import_on(
            self.allocate,
            self.device.as_raw() as usize,
            size,
            type_index,
            kind,
            fd,
        )
    }

    fn map(&self, m: u64, offset: u64, size: u64) -> Result<*mut u8, vk::Result> {
        let mut p = std::ptr::null_mut();
        let (m, flags) = (vk::DeviceMemory::from_raw(m), vk::MemoryMapFlags::empty());
        // SAFETY: a valid out-pointer.
        match unsafe { (self.map)(self.device, m, offset, size, flags, &mut p) } {
            vk::Result::SUCCESS => Ok(p.cast()),
            e => Err(e),
        }
    }

    fn free(&self, m: u64) {
        // SAFETY: any handle value is accepted.
        unsafe { (self.free)(self.device, vk::DeviceMemory::from_raw(m), std::ptr::null()) };
    }

    fn close(self) {
        let destroy_device: vk::PFN_vkDestroyDevice =
            command!(self.instance, "vkDestroyDevice" as _);
        let destroy: vk::PFN_vkDestroyInstance = command!(self.instance, "vkDestroyInstance" as _);
        // SAFETY: live handles of ours.
        unsafe {
            destroy_device(self.device, std::ptr::null());
            destroy(self.instance, std::ptr::null());
        }
    }
}

/// `vkAllocateMemory` importing `fd` on `device` (a `VkDevice` as a number, so that another
/// thread can make the call).
fn import_on(
    allocate: vk::PFN_vkAllocateMemory,
    device: usize,
    size: u64,
    type_index: u32,
    kind: vk::ExternalMemoryHandleTypeFlags,
    fd: c_int,
) -> Result<u64, vk::Result> {
    let mut import = vk::ImportMemoryFdInfoKHR::default()
        .handle_type(kind)
        .fd(fd);
    let info = vk::MemoryAllocateInfo::default()
        .allocation_size(size)
        .memory_type_index(type_index)
        .push_next(&mut import);
    let mut m = vk::DeviceMemory::null();
    // SAFETY: valid structures and out-pointer; any device value is accepted.
    match unsafe {
        allocate(
            vk::Device::from_raw(device as u64),
            &info,
            std::ptr::null(),
            &mut m,
        )
    } {
        vk::Result::SUCCESS => Ok(m.as_raw()),
        e => Err(e),
    }
}

fn create_device(
    instance: vk::Instance,
    pd: vk::PhysicalDevice,
    extensions: &[&std::ffi::CStr],
) -> Result<vk::Device, vk::Result> {
    let create: vk::PFN_vkCreateDevice = command!(instance, "vkCreateDevice" as _);
    let queue = vk::DeviceQueueCreateInfo::default().queue_priorities(&[1.0]);
    let names: Vec<*const c_char> = extensions.iter().map(|e| e.as_ptr()).collect();
    let info = vk::DeviceCreateInfo::default()
        .queue_create_infos(std::slice::from_ref(&queue))
        .enabled_extension_names(&names);
    let mut device = vk::Device::null();
    // SAFETY: valid structures and out-pointer.
    match unsafe { create(pd, &info, std::ptr::null(), &mut device) } {
        vk::Result::SUCCESS => Ok(device),
        e => Err(e),
    }
}

fn cuda_up() {
    // SAFETY: cuInit takes any flags.
    assert_eq!(unsafe { cuInit(0) }, 0);
}

fn mem_create(size: u64, types: c_int) -> Result<u64, CUresult> {
    let prop = MemAllocationProp {
        kind: 1,
        requested_handle_types: types,
        location: MemLocation { kind: 1, id: 0 },
        win32_handle_meta_data: std::ptr::null_mut(),
        compression_type: 0,
        gpu_direct_rdma_capable: 0,
        usage: 0,
        reserved: [0; 4],
    };
    let mut h = 0;
    // SAFETY: valid out-pointer and properties.
    match unsafe { cuMemCreate(&mut h, size as usize, &prop, 0) } {
        0 => Ok(h),
        e => Err(e),
    }
}

fn export(h: u64) -> Result<c_int, CUresult> {
    let mut fd: c_int = -1;
    // SAFETY: an int out-pointer, as the POSIX fd type needs.
    match unsafe { cuMemExportToShareableHandle((&mut fd as *mut c_int).cast(), h, 1, 0) } {
        0 => Ok(fd),
        e => Err(e),
    }
}

/// Reserves and maps `h` (of `size` bytes); returns the address.
fn mapped(h: u64, size: u64) -> u64 {
    let mut va = 0;
    // SAFETY: valid out-pointer.
    let r = unsafe { cuMemAddressReserve(&mut va, size as usize, 0, 0, 0) };
    assert_eq!(r, 0);
    // SAFETY: no pointer arguments.
    assert_eq!(unsafe { cuMemMap(va, size as usize, 0, h, 0) }, 0);
    va
}

fn mem_free() -> u64 {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: valid out-pointers.
    assert_eq!(unsafe { cuMemGetInfo_v2(&mut free, &mut total) }, 0);
    free as u64
}

fn fd_open(fd: c_int) -> bool {
    // SAFETY: F_GETFD only asks about the descriptor.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

#[test]
fn global_commands_only_without_an_instance() {
    let _s = serial();
    let none = vk::Instance::null();
    for name in [
        c"vkCreateInstance",
        c"vkEnumerateInstanceVersion",
        c"vkEnumerateInstanceExtensionProperties",
        c"vkGetInstanceProcAddr",
    ] {
        // SAFETY: NUL-terminated names.
        let r = unsafe { gdrsim_vkGetInstanceProcAddr(none, name.as_ptr()) };
        assert!(r.is_some(), "{name:?}");
    }
    for name in [
        c"vkDestroyInstance",
        c"vkAllocateMemory",
        c"vkNoSuchCommand",
    ] {
        // SAFETY: NUL-terminated names.
        let r = unsafe { gdrsim_vkGetInstanceProcAddr(none, name.as_ptr()) };
        assert!(r.is_none(), "{name:?}");
    }
    // SAFETY: a NULL name is accepted and refused; a made-up instance is unknown.
    unsafe {
        assert!(gdrsim_vkGetInstanceProcAddr(none, std::ptr::null()).is_none());
        assert!(gdrsim_vkGetInstanceProcAddr(
            vk::Instance::from_raw(8),
            c"vkCreateDevice".as_ptr()
        )
        .is_none());
    }
    let version: vk::PFN_vkEnumerateInstanceVersion =
        command!(none, "vkEnumerateInstanceVersion" as _);
    let mut v = 0;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { version(&mut v) }, vk::Result::SUCCESS);
    assert!(v >= vk::API_VERSION_1_1);
}

#[test]
fn the_device_answers_as_nvidias_does() {
    let _s = serial();
    cuda_up();
    let vk = Vk::new(&[
        vk::KHR_EXTERNAL_MEMORY_NAME,
        vk::KHR_EXTERNAL_MEMORY_FD_NAME,
    ]);
    let c = counters();
    assert_eq!((c.live_vk_instances, c.live_vk_devices), (1, 1));
    for name in [
        "vkDestroyInstance",
        "vkEnumeratePhysicalDevices",
        "vkGetPhysicalDeviceProperties",
        "vkGetPhysicalDeviceProperties2",
        "vkGetPhysicalDeviceMemoryProperties",
        "vkEnumerateDeviceExtensionProperties",
        "vkCreateDevice",
        "vkGetDeviceProcAddr",
        "vkDestroyDevice",
    ] {
        let n = std::ffi::CString::new(name).unwrap();
        // SAFETY: a live instance and a NUL-terminated name.
        let r = unsafe { gdrsim_vkGetInstanceProcAddr(vk.instance, n.as_ptr()) };
        assert!(r.is_some(), "{name}");
    }
    // SAFETY: unknown names give NULL.
    let r = unsafe { gdrsim_vkGetInstanceProcAddr(vk.instance, c"vkQueueSubmit".as_ptr()) };
    assert!(r.is_none());
    // SAFETY: vkGetDeviceProcAddr has no instance-level commands.
    assert!(unsafe { get_device_proc_addr(vk.device, c"vkCreateDevice".as_ptr()) }.is_none());

    let enumerate: vk::PFN_vkEnumeratePhysicalDevices =
        command!(vk.instance, "vkEnumeratePhysicalDevices" as _);
    let (mut n, mut pd) = (0u32, vk::PhysicalDevice::null());
    // SAFETY: count query, then an array with no room.
    unsafe {
        assert_eq!(
            enumerate(vk.instance, &mut n, std::ptr::null_mut()),
            vk::Result::SUCCESS
        );
        assert_eq!(n, 1);
        n = 0;
        assert_eq!(
            enumerate(vk.instance, &mut n, &mut pd),
            vk::Result::INCOMPLETE
        );
        assert_eq!(n, 0);
    }

    let props2: vk::PFN_vkGetPhysicalDeviceProperties2 =
        command!(vk.instance, "vkGetPhysicalDeviceProperties2" as _);
    let mut id = vk::PhysicalDeviceIDProperties::default();
    let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
    // SAFETY: valid structures.
    unsafe { props2(vk.pd, &mut p2) };
    let properties = p2.properties;
    let mut uuid = [0u8; 16];
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { cuDeviceGetUuid_v2(&mut uuid, 0) }, 0);
    assert_eq!(id.device_uuid, uuid);
    assert_eq!(properties.vendor_id, 0x10de);
    assert_eq!(properties.device_type, vk::PhysicalDeviceType::DISCRETE_GPU);
    let name = properties.device_name_as_c_str().map(|n| n.to_str());
    assert_eq!(name, Ok(Ok(device::DEVICE_NAME)));
    assert_eq!(properties.limits.non_coherent_atom_size, 64);

    let memprops: vk::PFN_vkGetPhysicalDeviceMemoryProperties =
        command!(vk.instance, "vkGetPhysicalDeviceMemoryProperties" as _);
    let mut mp = vk::PhysicalDeviceMemoryProperties::default();
    // SAFETY: a valid structure.
    unsafe { memprops(vk.pd, &mut mp) };
    let flags: Vec<u32> = mp.memory_types[..mp.memory_type_count as usize]
        .iter()
        .map(|t| t.property_flags.as_raw())
        .collect();
    assert_eq!(flags, [0x1, 0x7, 0xe]);
    assert_eq!(mp.memory_heaps[0].size, crate::config::get().vram_size);
    assert_eq!(mp.memory_heaps[0].flags, vk::MemoryHeapFlags::DEVICE_LOCAL);

    let exts: vk::PFN_vkEnumerateDeviceExtensionProperties =
        command!(vk.instance, "vkEnumerateDeviceExtensionProperties" as _);
    let mut list = [vk::ExtensionProperties::default(); 4];
    let mut n = 4;
    // SAFETY: room for 4.
    let r = unsafe { exts(vk.pd, std::ptr::null(), &mut n, list.as_mut_ptr()) };
    assert_eq!(r, vk::Result::SUCCESS);
    assert_eq!(n, 2);
    assert_eq!(
        list[1].extension_name_as_c_str(),
        Ok(vk::KHR_EXTERNAL_MEMORY_FD_NAME)
    );

    assert_eq!(
        create_device(vk.instance, vk.pd, &[c"VK_KHR_swapchain"]),
        Err(vk::Result::ERROR_EXTENSION_NOT_PRESENT)
    );
    let vk2 = Vk::new(&[]);
    assert_eq!(counters().live_vk_instances, 2);
    vk2.close();
    vk.close();
    let c = counters();
    assert_eq!((c.live_vk_instances, c.live_vk_devices), (0, 0));
}

#[test]
fn imports_map_the_exported_bytes_until_freed() {
    let _s = serial();
    cuda_up();
    let size = 2 * GRAN;
    let free0 = mem_free();
    let h = mem_create(size, 1).unwrap();
    let va = mapped(h, size);
    let (fd1, fd2) = (export(h).unwrap(), export(h).unwrap());
    assert_ne!(fd1, fd2, "each export is a new fd");
    assert_eq!(counters().live_vmm_exports, 2);
    // SAFETY: a valid fd; the mapping attempt is refused.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd2,
            0,
        )
    };
    assert_eq!(p, libc::MAP_FAILED);
    // SAFETY: closing our own fd.
    assert_eq!(unsafe { libc::close(fd2) }, 0);
    assert_eq!(counters().live_vmm_exports, 1);

    let vk = Vk::new(&[vk::KHR_EXTERNAL_MEMORY_FD_NAME]);
    let opaque = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;
    assert_eq!(
        vk.import(size - GRAN, 1, opaque, fd1),
        Err(vk::Result::ERROR_INVALID_EXTERNAL_HANDLE)
    );
    assert_eq!(
        vk.import(size, 2, opaque, fd1),
        Err(vk::Result::ERROR_INVALID_EXTERNAL_HANDLE)
    );
    assert_eq!(
        vk.import(
            size,
            1,
            vk::ExternalMemoryHandleTypeFlags::from_raw(0x10),
            fd1
        ),
        Err(vk::Result::ERROR_INVALID_EXTERNAL_HANDLE)
    );
    assert_eq!(
        vk.import(size, 1, opaque, 0),
        Err(vk::Result::ERROR_INVALID_EXTERNAL_HANDLE)
    );
    assert!(fd_open(fd1), "a refused import leaves the fd open");
    let m = vk.import(size, 1, opaque, fd1).unwrap();
    assert!(!fd_open(fd1), "a successful import owns the fd");
    let c = counters();
    assert_eq!((c.live_vmm_exports, c.live_vk_imports), (0, 1));

    let off = GRAN + 4096 + 12;
    let p = vk.map(m, off, 64).unwrap();
    assert_eq!(
        vk.map(m, 0, vk::WHOLE_SIZE),
        Err(vk::Result::ERROR_MEMORY_MAP_FAILED),
        "mapped already"
    );
    // SAFETY: 64 mapped bytes at p.
    unsafe { p.write_volatile(0xa5) };
    let mut b = [0u8; 1];
    // SAFETY: a valid destination.
    let r = unsafe { cuMemcpyDtoH_v2(b.as_mut_ptr().cast(), va + off, 1) };
    assert_eq!(r, 0);
    assert_eq!(b[0], 0xa5);
    // SAFETY: device memory of ours.
    assert_eq!(unsafe { cuMemsetD32_v2(va + off + 4, 0x0102_0304, 1) }, 0);
    // SAFETY: within the mapping.
    let r = unsafe { p.add(4).cast::<u32>().read_unaligned() };
    assert_eq!(r, 0x0102_0304);

    // CUDA lets go of everything; the import still holds the bytes.
    // SAFETY: no pointer arguments.
    unsafe {
        assert_eq!(cuMemUnmap(va, size as usize), 0);
        assert_eq!(cuMemRelease(h), 0);
        assert_eq!(cuMemAddressFree(va, size as usize), 0);
    }
    assert_eq!(counters().live_allocations, 0);
    // SAFETY: still mapped.
    assert_eq!(unsafe { p.read_volatile() }, 0xa5);
    assert_eq!(mem_free(), free0 - size, "held memory is still used");
    // SAFETY: unmapping our mapping, then mapping again.
    unsafe { (vk.unmap)(vk.device, vk::DeviceMemory::from_raw(m)) };
    assert_eq!(counters().live_vk_mappings, 0);
    let q = vk.map(m, 0, vk::WHOLE_SIZE).unwrap();
    // SAFETY: the whole allocation is mapped.
    assert_eq!(unsafe { q.add(off as usize).read_volatile() }, 0xa5);
    vk.free(m); // unmaps as well
    let c = counters();
    assert_eq!((c.live_vk_imports, c.live_vk_mappings), (0, 0));
    assert_eq!(mem_free(), free0);
    vk.close();
    let c = counters();
    assert_eq!(
        c,
        crate::counters::Counters {
            ioctls: c.ioctls,
            vk_imports_made: c.vk_imports_made,
            // Other tests of this process inject faults.
            injected_faults: c.injected_faults,
            ..Default::default()
        }
    );
}

#[test]
fn cuda_side_of_the_export() {
    let _s = serial();
    cuda_up();
    let size = GRAN;
    let plain = mem_create(size, 0).unwrap();
    let h = mem_create(size, 1).unwrap();
    assert_eq!(mem_create(size, 2), Err(crate::cuda::errors::NOT_SUPPORTED));
    assert_eq!(export(plain), Err(crate::gpu::EXPORT_NOT_REQUESTED));
    let mut fd: c_int = -1;
    // SAFETY: valid out-pointers, refused arguments.
    unsafe {
        let out = (&mut fd as *mut c_int).cast::<c_void>();
        assert_eq!(cuMemExportToShareableHandle(out, h, 1, 1), 1, "flags");
        assert_eq!(cuMemExportToShareableHandle(out, h, 8, 0), 1, "fabric");
        assert_eq!(
            cuMemExportToShareableHandle(std::ptr::null_mut(), h, 1, 0),
            1
        );
    }
    let va = mapped(h, size);
    let mut got = 0;
    // SAFETY: valid out-pointers.
    unsafe {
        assert_eq!(
            cuMemRetainAllocationHandle(&mut got, (va + 100) as *mut c_void),
            0
        );
        assert_eq!(got, h);
        assert_eq!(
            cuMemRetainAllocationHandle(std::ptr::null_mut(), va as *mut c_void),
            1
        );
        assert_eq!(
            cuMemRetainAllocationHandle(&mut got, (&mut fd as *mut c_int).cast()),
            1
        );
    }
    // SAFETY: all-zero bytes are a valid CUmemAllocationProp.
    let mut prop: MemAllocationProp = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    let r = unsafe { cuMemGetAllocationPropertiesFromHandle(&mut prop, h) };
    assert_eq!(r, 0);
    assert_eq!(
        (
            prop.kind,
            prop.requested_handle_types,
            prop.location.kind,
            prop.location.id
        ),
        (1, 1, 1, 0)
    );
    let (mut base, mut len) = (0u64, 0usize);
    // SAFETY: valid out-pointers.
    let r = unsafe { cuMemGetAddressRange_v2(&mut base, &mut len, va + 7) };
    assert_eq!(r, 0);
    assert_eq!((base, len as u64), (va, size));
    let mut types: libc::c_uint = 9;
    let attr: c_int = 14; // ALLOWED_HANDLE_TYPES
    let mut data = [(&mut types as *mut libc::c_uint).cast::<c_void>()];
    // SAFETY: one attribute, one data pointer.
    let r = unsafe { cuPointerGetAttributes(1, &attr, data.as_mut_ptr(), va) };
    assert_eq!(r, 0);
    assert_eq!(types, 1);
    // SAFETY: no pointer arguments.
    unsafe {
        assert_eq!(cuMemRelease(h), 0);
        assert_eq!(cuMemRelease(h), 0, "the retained reference");
        assert_eq!(cuMemRelease(h), 1);
        assert_eq!(cuMemGetAllocationPropertiesFromHandle(&mut prop, h), 1);
        assert_eq!(cuMemUnmap(va, size as usize), 0);
        assert_eq!(cuMemAddressFree(va, size as usize), 0);
        assert_eq!(cuMemRelease(plain), 0);
    }
    assert_eq!(counters().live_allocations, 0);
}

#[test]
fn fault_injection_and_forbidden_uses() {
    let _s = serial();
    cuda_up();
    let size = GRAN;
    let h = mem_create(size, 1).unwrap();
    let fd = export(h).unwrap();
    // Without VK_KHR_external_memory_fd nothing can be imported.
    let plain = Vk::new(&[vk::KHR_EXTERNAL_MEMORY_NAME]);
    let opaque = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;
    assert_eq!(
        plain.import(size, 1, opaque, fd),
        Err(vk::Result::ERROR_INVALID_EXTERNAL_HANDLE)
    );
    plain.close();
    let vk = Vk::new(&[
        vk::KHR_EXTERNAL_MEMORY_NAME,
        vk::KHR_EXTERNAL_MEMORY_FD_NAME,
    ]);
    crate::fail::set(Some(
        "vkAllocateMemory:1:VK_ERROR_OUT_OF_HOST_MEMORY,vkMapMemory:1:-5",
    ))
    .unwrap();
    assert_eq!(
        vk.import(size, 1, opaque, fd),
        Err(vk::Result::ERROR_OUT_OF_HOST_MEMORY)
    );
    assert!(fd_open(fd), "a failed import leaves the fd open");
    let m = vk.import(size, 1, opaque, fd).unwrap();
    assert_eq!(vk.map(m, 0, 64), Err(vk::Result::ERROR_MEMORY_MAP_FAILED));
    assert!(vk.map(m, 0, 64).is_ok());
    crate::fail::set(None).unwrap();
    let fd = export(h).unwrap();
    let device_only = vk.import(size, 0, opaque, fd).unwrap();
    assert_eq!(
        vk.map(device_only, 0, 64),
        Err(vk::Result::ERROR_MEMORY_MAP_FAILED),
        "not host-visible"
    );
    assert_eq!(
        vk.map(m, 0, 64),
        Err(vk::Result::ERROR_MEMORY_MAP_FAILED),
        "mapped already"
    );
    // SAFETY: no pointer arguments.
    assert_eq!(unsafe { cuMemRelease(h) }, 0);
    // Freeing the device frees its memory object.
    vk.close();
    let c = counters();
    assert_eq!(
        (c.live_vk_imports, c.live_vk_devices, c.live_allocations),
        (0, 0, 0)
    );
}

#[test]
fn an_allocation_holds_bar1_while_imported_once_however_many_imports() {
    let _s = serial();
    cuda_up();
    let (size, small) = (2 * GRAN, GRAN);
    let opaque = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;
    let vk = Vk::new(&[vk::KHR_EXTERNAL_MEMORY_FD_NAME]);
    let other = Vk::new(&[vk::KHR_EXTERNAL_MEMORY_FD_NAME]);
    let (bar0, c0) = (crate::bar1::used(), counters());
    let h = mem_create(size, 1).unwrap();
    let (fd1, fd2) = (export(h).unwrap(), export(h).unwrap());
    assert_eq!(crate::bar1::used(), bar0, "an export holds no BAR1");

    let m1 = vk.import(size, 1, opaque, fd1).unwrap();
    assert_eq!(
        crate::bar1::used(),
        bar0 + size,
        "the import holds the whole allocation"
    );
    let c = counters();
    assert_eq!(c.vk_imports_made, c0.vk_imports_made + 1);
    assert_eq!(c.live_vk_import_bytes, c0.live_vk_import_bytes + size);
    // Mappings hold none: the whole allocation, none, a 64 KiB one.
    vk.map(m1, 0, vk::WHOLE_SIZE).unwrap();
    assert_eq!(crate::bar1::used(), bar0 + size);
    // SAFETY: unmapping our mapping.
    unsafe { (vk.unmap)(vk.device, vk::DeviceMemory::from_raw(m1)) };
    assert_eq!(crate::bar1::used(), bar0 + size);
    vk.map(m1, GRAN, 1 << 16).unwrap();
    assert_eq!(crate::bar1::used(), bar0 + size);

    // A second import of the allocation, on another device: BAR1 once, bytes twice.
    let m2 = other.import(size, 1, opaque, fd2).unwrap();
    assert_eq!(crate::bar1::used(), bar0 + size);
    let c = counters();
    assert_eq!(c.vk_imports_made, c0.vk_imports_made + 2);
    assert_eq!(c.live_vk_import_bytes, c0.live_vk_import_bytes + 2 * size);
    // Another allocation adds its own size.
    let h2 = mem_create(small, 1).unwrap();
    let m3 = vk.import(small, 1, opaque, export(h2).unwrap()).unwrap();
    assert_eq!(crate::bar1::used(), bar0 + size + small);

    // BAR1 goes back with the allocation's last import.
    vk.free(m1);
    assert_eq!(
        crate::bar1::used(),
        bar0 + size + small,
        "m2 still holds it"
    );
    other.free(m2);
    assert_eq!(crate::bar1::used(), bar0 + small);
    vk.free(m3);
    assert_eq!(crate::bar1::used(), bar0);
    let c = counters();
    assert_eq!(c.vk_imports_made, c0.vk_imports_made + 3, "a running total");
    assert_eq!(c.live_vk_import_bytes, c0.live_vk_import_bytes);
    // SAFETY: no pointer arguments.
    unsafe {
        assert_eq!(cuMemRelease(h), 0);
        assert_eq!(cuMemRelease(h2), 0);
    }
    other.close();
    vk.close();
}

#[test]
fn imports_and_frees_take_their_cost_outside_the_lock() {
    let _s = serial();
    cuda_up();
    let opaque = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;
    let ns_per_mib = crate::config::get().vk_import_ns_per_mib;
    for size in [GRAN, 1 << 30, 4 << 30] {
        let want = u128::from(ns_per_mib) * u128::from(size >> 20);
        assert_eq!(memory::cost(size).as_nanos(), want, "{size}");
    }
    let vk = Vk::new(&[vk::KHR_EXTERNAL_MEMORY_FD_NAME]);
    let (big, small) = (4 * GRAN, GRAN);
    let hs = mem_create(small, 1).unwrap();
    let ms = vk.import(small, 1, opaque, export(hs).unwrap()).unwrap();
    let hb = mem_create(big, 1).unwrap();
    let fd = export(hb).unwrap();

    // Hold the next import in its cost, then call the stand-in from this thread meanwhile.
    let (entered_tx, entered) = mpsc::channel();
    let (go, go_rx) = mpsc::channel();
    *watch() = Some(Watch {
        spent: Vec::new(),
        hold: Some((entered_tx, go_rx)),
    });
    let (allocate, device) = (vk.allocate, vk.device.as_raw() as usize);
    let importer = std::thread::spawn(move || import_on(allocate, device, big, 1, opaque, fd));
    entered
        .recv_timeout(Duration::from_secs(60))
        .expect("the import reached its cost");
    // These calls take the lock: had the importer kept it, they would wait for its cost (the
    // hold above ends after a minute) and the importer would be done by then.
    let c = counters();
    assert_eq!(c.live_vk_imports, 2, "the import is made before its cost");
    assert!(vk.map(ms, 0, vk::WHOLE_SIZE).is_ok());
    // SAFETY: unmapping our mapping.
    unsafe { (vk.unmap)(vk.device, vk::DeviceMemory::from_raw(ms)) };
    assert!(
        !importer.is_finished(),
        "the import is still taking its cost"
    );
    go.send(()).unwrap();
    let mb = importer.join().unwrap().expect("the import");

    vk.free(mb);
    vk.free(ms);
    let hb2 = mem_create(big, 1).unwrap();
    vk.import(big, 1, opaque, export(hb2).unwrap()).unwrap();
    vk.close(); // frees the import left on the device, at a free's cost
    let w = watch().take().unwrap();
    let costs: Vec<(u64, Duration, bool)> = [big, big, small, big, big]
        .map(|s| (s, memory::cost(s), true))
        .to_vec();
    assert_eq!(
        w.spent, costs,
        "import, then the frees and the second import and its free at vkDestroyDevice"
    );
    // SAFETY: no pointer arguments.
    unsafe {
        assert_eq!(cuMemRelease(hs), 0);
        assert_eq!(cuMemRelease(hb), 0);
        assert_eq!(cuMemRelease(hb2), 0);
    }
}
