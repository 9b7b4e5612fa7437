//! The Vulkan stand-in: the Vulkan driver that `build/sim/vulkan/libvulkan.so.1` (the
//! `gdrsim-vulkan` crate, `gdrsim/vulkan/`) hands out through [`gdrsim_vkGetInstanceProcAddr`],
//! so that the library's Vulkan import backend runs without a GPU.
//!
//! It answers as NVIDIA's Vulkan driver does for what that backend needs: one discrete device
//! with the emulated GPU's UUID, external memory fds, and a memory type that is device-local
//! and host-visible (BAR1). `vkAllocateMemory` imports a POSIX fd from the emulator's
//! `cuMemExportToShareableHandle` (`VkImportMemoryFdInfoKHR`, opaque fd); the import holds the
//! physical allocation, and `vkMapMemory` maps its bytes of the fake VRAM file, so CPU stores
//! through the mapping are what `cuMemcpyDtoH` reads and the other way round.
//!
//! As measured on an H200 (see the README's fidelity section): an allocation holds BAR1 for
//! its whole size while it has a live import, once however many (mappings hold none); the
//! live imports of one allocation may hold `GDRSIM_VK_IMPORT_LIMIT` bytes in all; and an
//! import, like its free, takes `GDRSIM_VK_IMPORT_NS_PER_MIB` per MiB of the allocation,
//! spent after the lock is released so that other threads go on.
//!
//! - [`device`]: instances, the physical device and its properties, devices;
//! - [`memory`]: import, map, unmap, free;
//! - [`objects`]: the tables, kept in the emulator's state under its one lock.
//!
//! `GDRSIM_VULKAN` picks the situation the machine is in (see [`crate::config::VkSituation`]);
//! `GDRSIM_FAIL` rules may name the functions that return a `VkResult`. Handles that are not
//! the stand-in's or belong to another process (a forked child's inherited ones), NULL
//! pointers where one is required and wrong `sType`s give VK_ERROR_INITIALIZATION_FAILED
//! (`vkMapMemory`: VK_ERROR_MEMORY_MAP_FAILED); functions without a result ignore them.

mod device;
mod memory;
mod objects;

pub use objects::Objects;

use gdrapi_abi::vk::{self, Handle};
use libc::c_char;
use std::ffi::CStr;

/// Runs the body of the command `name`, which returns a `VkResult`, inside `gdrapi-boundary`'s
/// guard: fault injection first (`GDRSIM_FAIL` rules naming `name`), then `f`, a panic
/// becoming VK_ERROR_UNKNOWN.
fn call(name: &'static str, f: impl FnOnce() -> vk::Result) -> vk::Result {
    gdrapi_boundary::guard_or(
        name,
        || vk::Result::ERROR_UNKNOWN,
        || {
            crate::fail::check(name)
                .map(vk::Result::from_raw)
                .unwrap_or_else(f)
        },
    )
}

/// Runs the body of the command `name`, which has no result, inside `gdrapi-boundary`'s
/// guard (a panic ends the call).
fn quietly(name: &'static str, f: impl FnOnce()) {
    gdrapi_boundary::guard(name, f)
}

/// The `VkResult` of a body that uses `?` for its refusals.
fn result(r: Result<vk::Result, vk::Result>) -> vk::Result {
    r.unwrap_or_else(|e| e)
}

/// The calling process.
fn me() -> libc::pid_t {
    crate::state::pid()
}

/// Writes an enumeration the Vulkan way: with `out` NULL the count; else as many of the `n`
/// items as `*count` has room for, `*count` set to how many were written, and VK_INCOMPLETE
/// when that is fewer than `n`.
///
/// # Safety
///
/// `count` is NULL or valid for a `u32` read and write; `out` is NULL or writable for
/// `*count` items.
unsafe fn enumerate<T>(
    count: *mut u32,
    out: *mut T,
    n: usize,
    item: impl Fn(usize) -> T,
) -> vk::Result {
    if count.is_null() {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    if out.is_null() {
        // SAFETY: count is non-NULL and writable (the contract).
        unsafe { count.write(n as u32) };
        return vk::Result::SUCCESS;
    }
    // SAFETY: as above, readable.
    let room = unsafe { count.read() } as usize;
    let k = room.min(n);
    for i in 0..k {
        // SAFETY: out has room for `room` >= k items (the contract).
        unsafe { out.add(i).write(item(i)) };
    }
    // SAFETY: as above.
    unsafe { count.write(k as u32) };
    if k < n {
        vk::Result::INCOMPLETE
    } else {
        vk::Result::SUCCESS
    }
}

/// A fixed-size C string field holding `s` (truncated to leave the NUL).
fn c_name<const N: usize>(s: &str) -> [c_char; N] {
    let mut a = [0 as c_char; N];
    for (d, b) in a.iter_mut().zip(s.bytes().take(N - 1)) {
        *d = b as c_char;
    }
    a
}

/// Where the commands come from: global ones (any instance, NULL included), instance-level
/// ones (a live instance of this process) and device-level ones (also through
/// `vkGetDeviceProcAddr`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Global,
    Instance,
    Device,
}

macro_rules! commands {
    ($($level:ident $name:literal: $ty:ty = $f:path;)*) => {
        /// Every command of the stand-in: (level, name, function).
        fn commands() -> [(Level, &'static str, usize); [$($name),*].len()] {
            [$(($level, $name, {
                let f: $ty = $f;
                f as usize
            })),*]
        }
    };
}

use Level::{Device as D, Global as G, Instance as I};

commands! {
    G "vkGetInstanceProcAddr": vk::PFN_vkGetInstanceProcAddr = gdrsim_vkGetInstanceProcAddr;
    G "vkCreateInstance": vk::PFN_vkCreateInstance = device::create_instance;
    G "vkEnumerateInstanceVersion": vk::PFN_vkEnumerateInstanceVersion = device::enumerate_instance_version;
    G "vkEnumerateInstanceExtensionProperties": vk::PFN_vkEnumerateInstanceExtensionProperties =
        device::enumerate_instance_extensions;
    G "vkEnumerateInstanceLayerProperties": vk::PFN_vkEnumerateInstanceLayerProperties =
        device::enumerate_instance_layers;
    I "vkDestroyInstance": vk::PFN_vkDestroyInstance = device::destroy_instance;
    I "vkEnumeratePhysicalDevices": vk::PFN_vkEnumeratePhysicalDevices = device::enumerate_physical_devices;
    I "vkGetPhysicalDeviceProperties": vk::PFN_vkGetPhysicalDeviceProperties = device::properties;
    I "vkGetPhysicalDeviceProperties2": vk::PFN_vkGetPhysicalDeviceProperties2 = device::properties2;
    I "vkGetPhysicalDeviceProperties2KHR": vk::PFN_vkGetPhysicalDeviceProperties2 = device::properties2;
    I "vkGetPhysicalDeviceMemoryProperties": vk::PFN_vkGetPhysicalDeviceMemoryProperties =
        device::memory_properties;
    I "vkGetPhysicalDeviceQueueFamilyProperties": vk::PFN_vkGetPhysicalDeviceQueueFamilyProperties =
        device::queue_families;
    I "vkEnumerateDeviceExtensionProperties": vk::PFN_vkEnumerateDeviceExtensionProperties =
        device::enumerate_device_extensions;
    I "vkCreateDevice": vk::PFN_vkCreateDevice = device::create_device;
    D "vkGetDeviceProcAddr": vk::PFN_vkGetDeviceProcAddr = get_device_proc_addr;
    D "vkDestroyDevice": vk::PFN_vkDestroyDevice = device::destroy_device;
    D "vkAllocateMemory": vk::PFN_vkAllocateMemory = memory::allocate;
    D "vkFreeMemory": vk::PFN_vkFreeMemory = memory::free;
    D "vkMapMemory": vk::PFN_vkMapMemory = memory::map;
    D "vkUnmapMemory": vk::PFN_vkUnmapMemory = memory::unmap;
}

/// The command `name` if its level is one of `levels`.
fn find(name: *const c_char, levels: &[Level]) -> vk::PFN_vkVoidFunction {
    if name.is_null() {
        return None;
    }
    // SAFETY: a non-NULL name is a NUL-terminated string (the contract of the callers).
    let name = unsafe { CStr::from_ptr(name) }.to_bytes();
    let f = commands()
        .into_iter()
        .find(|(l, n, _)| levels.contains(l) && n.as_bytes() == name)
        .map(|(_, _, f)| f)?;
    // SAFETY: `f` is the address of one of the functions listed above, each an
    // `unsafe extern "system" fn`; the caller casts it back to the command's own type.
    Some(unsafe { std::mem::transmute::<usize, unsafe extern "system" fn()>(f) })
}

/// Whether the stand-in answers at all: not under `GDRSIM_BACKING=vulkan`, whose real GPU
/// memory comes from the real Vulkan driver (and whose CUDA is the real driver's).
fn enabled() -> bool {
    !crate::vulkan::active()
}

/// `vkGetInstanceProcAddr` of the stand-in, the one symbol `libvulkan.so.1` of
/// `build/sim/vulkan` looks up in the emulator. With a NULL instance: the global commands
/// (`vkCreateInstance`, `vkEnumerateInstanceVersion`, `vkEnumerateInstanceExtensionProperties`,
/// `vkEnumerateInstanceLayerProperties`, `vkGetInstanceProcAddr`); with a live instance of
/// this process: every command; otherwise, and for unknown names, NULL.
///
/// # Safety
///
/// The contract of `vkGetInstanceProcAddr`: `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "system" fn gdrsim_vkGetInstanceProcAddr(
    instance: vk::Instance,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    gdrapi_boundary::guard_or(
        "vkGetInstanceProcAddr",
        || None,
        || {
            if !enabled() {
                return None;
            }
            if instance == vk::Instance::null() {
                return find(name, &[Level::Global]);
            }
            let live = crate::state::STATE
                .lock()
                .vk
                .instance(instance.as_raw() as usize, me())
                .is_some();
            if live {
                find(name, &[Level::Global, Level::Instance, Level::Device])
            } else {
                None
            }
        },
    )
}

/// `vkGetDeviceProcAddr`: the device-level commands for a live device of this process, NULL
/// for anything else.
///
/// # Safety
///
/// The contract of `vkGetDeviceProcAddr`: `name` is NULL or a NUL-terminated string.
unsafe extern "system" fn get_device_proc_addr(
    device: vk::Device,
    name: *const c_char,
) -> vk::PFN_vkVoidFunction {
    gdrapi_boundary::guard_or(
        "vkGetDeviceProcAddr",
        || None,
        || {
            let live = crate::state::STATE
                .lock()
                .vk
                .device(device.as_raw() as usize, me())
                .is_some();
            if live {
                find(name, &[Level::Device])
            } else {
                None
            }
        },
    )
}

#[cfg(test)]
mod tests;
