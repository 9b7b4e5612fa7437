//! `libvulkan.so.1` of `build/sim/vulkan`: what a program that loads the Vulkan loader gets
//! when that directory comes first on `LD_LIBRARY_PATH`. It holds no Vulkan of its own: every
//! command comes from the emulator (`libcuda.so.1`, gdrsim), whose `gdrsim_vkGetInstanceProcAddr`
//! it looks up at call time, first among the process's global symbols (the emulator preloaded
//! or linked) and then in an already loaded `libcuda.so.1`. Without the emulator it is a
//! loader that finds no driver: `vkGetInstanceProcAddr` gives NULL for everything,
//! `vkCreateInstance` VK_ERROR_INCOMPATIBLE_DRIVER.
//!
//! Exported: `vkGetInstanceProcAddr` and the global commands (`vkCreateInstance`,
//! `vkEnumerateInstanceVersion`, `vkEnumerateInstanceExtensionProperties`,
//! `vkEnumerateInstanceLayerProperties`); every other command is reached through
//! `vkGetInstanceProcAddr`/`vkGetDeviceProcAddr`, as the library does. `gdrsim_vulkan_standin`
//! lets a program check which `libvulkan.so.1` it loaded. Every exported function is an
//! [`entry!`] of `gdrapi-boundary`: a panic in it returns `VK_ERROR_UNKNOWN` (NULL from
//! `vkGetInstanceProcAddr`) instead of unwinding into C.

#![allow(non_snake_case, non_upper_case_globals)]

use gdrapi_abi::vk;
use gdrapi_boundary::entry;
use libc::{c_char, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Present (non-zero) in the stand-in and in no real loader: `dlsym(handle,
/// "gdrsim_vulkan_standin")` tells a test which `libvulkan.so.1` it got.
#[no_mangle]
pub static gdrsim_vulkan_standin: u32 = 1;

/// The emulator's `gdrsim_vkGetInstanceProcAddr`, once found.
static EMULATOR: AtomicUsize = AtomicUsize::new(0);

/// Looks `name` up among the process's global symbols, then in a loaded `libcuda.so.1`.
fn lookup(name: &std::ffi::CStr) -> *mut c_void {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name has no preconditions.
    let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if !f.is_null() {
        return f;
    }
    // SAFETY: RTLD_NOLOAD only returns a library that is already loaded (never loads one).
    let h = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if h.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: a handle dlopen just gave; closing it drops only the reference taken above.
    unsafe {
        let f = libc::dlsym(h, name.as_ptr());
        libc::dlclose(h);
        f
    }
}

/// The emulator's `vkGetInstanceProcAddr`, if the emulator is in the process.
fn emulator() -> Option<vk::PFN_vkGetInstanceProcAddr> {
    let mut p = EMULATOR.load(Ordering::Acquire);
    if p == 0 {
        p = lookup(c"gdrsim_vkGetInstanceProcAddr") as usize;
        if p == 0 {
            return None;
        }
        EMULATOR.store(p, Ordering::Release);
    }
    // SAFETY: `p` is the address of the emulator's gdrsim_vkGetInstanceProcAddr, which has
    // this type.
    Some(unsafe { std::mem::transmute::<usize, vk::PFN_vkGetInstanceProcAddr>(p) })
}

/// A global command of the emulator, cast to its type `F`.
///
/// # Safety
///
/// `F` must be the function pointer type of the command `name`.
unsafe fn global<F: Copy>(name: &std::ffi::CStr) -> Option<F> {
    let gipa = emulator()?;
    // SAFETY: the emulator's vkGetInstanceProcAddr with a NULL instance and a NUL-terminated
    // name.
    let f = unsafe { gipa(vk::Instance::null(), name.as_ptr()) }?;
    assert_eq!(size_of::<F>(), size_of::<unsafe extern "system" fn()>());
    // SAFETY: the emulator hands out `name` with the type `F` (the caller's contract); both are
    // function pointers of the same size.
    Some(unsafe { std::mem::transmute_copy::<unsafe extern "system" fn(), F>(&f) })
}

entry! {
    /// `vkGetInstanceProcAddr`: the emulator's answer; NULL without the emulator.
    on_panic(None)
    fn vkGetInstanceProcAddr(
        instance: vk::Instance,
        name: *const c_char,
    ) -> vk::PFN_vkVoidFunction {
        let gipa = emulator()?;
        // SAFETY: the caller's arguments, under the same contract.
        unsafe { gipa(instance, name) }
    }
}

entry! {
    /// `vkCreateInstance`; VK_ERROR_INCOMPATIBLE_DRIVER without the emulator.
    on_panic(vk::Result::ERROR_UNKNOWN)
    fn vkCreateInstance(
        info: *const vk::InstanceCreateInfo,
        alloc: *const vk::AllocationCallbacks,
        instance: *mut vk::Instance,
    ) -> vk::Result {
        // SAFETY: vkCreateInstance has this type.
        match unsafe { global::<vk::PFN_vkCreateInstance>(c"vkCreateInstance") } {
            // SAFETY: the caller's arguments, under the same contract.
            Some(f) => unsafe { f(info, alloc, instance) },
            None => vk::Result::ERROR_INCOMPATIBLE_DRIVER,
        }
    }
}

entry! {
    /// `vkEnumerateInstanceVersion`; without the emulator, the loader's own version (1.1).
    on_panic(vk::Result::ERROR_UNKNOWN)
    fn vkEnumerateInstanceVersion(version: *mut u32) -> vk::Result {
        // SAFETY: vkEnumerateInstanceVersion has this type.
        match unsafe { global::<vk::PFN_vkEnumerateInstanceVersion>(c"vkEnumerateInstanceVersion") } {
            // SAFETY: the caller's argument, under the same contract.
            Some(f) => unsafe { f(version) },
            None if version.is_null() => vk::Result::ERROR_INITIALIZATION_FAILED,
            None => {
                // SAFETY: a non-NULL out-pointer of the caller.
                unsafe { version.write(vk::API_VERSION_1_1) };
                vk::Result::SUCCESS
            }
        }
    }
}

/// An empty enumeration (a loader without drivers or layers).
///
/// # Safety
///
/// `count` is NULL or writable.
unsafe fn none(count: *mut u32) -> vk::Result {
    if count.is_null() {
        return vk::Result::ERROR_INITIALIZATION_FAILED;
    }
    // SAFETY: a non-NULL out-pointer of the caller.
    unsafe { count.write(0) };
    vk::Result::SUCCESS
}

entry! {
    /// `vkEnumerateInstanceExtensionProperties`; none without the emulator.
    on_panic(vk::Result::ERROR_UNKNOWN)
    fn vkEnumerateInstanceExtensionProperties(
        layer: *const c_char,
        count: *mut u32,
        props: *mut vk::ExtensionProperties,
    ) -> vk::Result {
        let name = c"vkEnumerateInstanceExtensionProperties";
        // SAFETY: the command has this type.
        match unsafe { global::<vk::PFN_vkEnumerateInstanceExtensionProperties>(name) } {
            // SAFETY: the caller's arguments, under the same contract.
            Some(f) => unsafe { f(layer, count, props) },
            // SAFETY: as above.
            None => unsafe { none(count) },
        }
    }
}

entry! {
    /// `vkEnumerateInstanceLayerProperties`; none without the emulator.
    on_panic(vk::Result::ERROR_UNKNOWN)
    fn vkEnumerateInstanceLayerProperties(
        count: *mut u32,
        props: *mut vk::LayerProperties,
    ) -> vk::Result {
        let name = c"vkEnumerateInstanceLayerProperties";
        // SAFETY: the command has this type.
        match unsafe { global::<vk::PFN_vkEnumerateInstanceLayerProperties>(name) } {
            // SAFETY: the caller's arguments, under the same contract.
            Some(f) => unsafe { f(count, props) },
            // SAFETY: as above.
            None => unsafe { none(count) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The unit tests run without the emulator: a loader that finds no driver.
    #[test]
    fn without_the_emulator_there_is_no_driver() {
        // SAFETY: NUL-terminated names; NULL instance.
        unsafe {
            assert!(
                vkGetInstanceProcAddr(vk::Instance::null(), c"vkCreateInstance".as_ptr()).is_none()
            );
            assert!(vkGetInstanceProcAddr(vk::Instance::null(), std::ptr::null()).is_none());
        }
        let mut instance = vk::Instance::null();
        // SAFETY: the stand-in answers before reading the (NULL) create info.
        let r = unsafe { vkCreateInstance(std::ptr::null(), std::ptr::null(), &mut instance) };
        assert_eq!(r, vk::Result::ERROR_INCOMPATIBLE_DRIVER);
        let (mut v, mut n) = (0, 7);
        // SAFETY: valid out-pointers.
        unsafe {
            assert_eq!(vkEnumerateInstanceVersion(&mut v), vk::Result::SUCCESS);
            assert_eq!(
                vkEnumerateInstanceExtensionProperties(
                    std::ptr::null(),
                    &mut n,
                    std::ptr::null_mut()
                ),
                vk::Result::SUCCESS
            );
        }
        assert_eq!((v, n), (vk::API_VERSION_1_1, 0));
        assert_eq!(gdrsim_vulkan_standin, 1);
    }

    #[test]
    fn a_panic_is_vk_error_unknown_or_null() {
        let mut v = 0;
        gdrapi_boundary::testing::panic_next("vkEnumerateInstanceVersion");
        // SAFETY: a valid out-pointer.
        let r = unsafe { vkEnumerateInstanceVersion(&mut v) };
        assert_eq!((r, v), (vk::Result::ERROR_UNKNOWN, 0));
        // SAFETY: a valid out-pointer.
        let r = unsafe { vkEnumerateInstanceVersion(&mut v) };
        assert_eq!(r, vk::Result::SUCCESS);
        gdrapi_boundary::testing::panic_next("vkGetInstanceProcAddr");
        let name = c"vkCreateInstance".as_ptr();
        // SAFETY: a NUL-terminated name; NULL instance.
        let f = unsafe { vkGetInstanceProcAddr(vk::Instance::null(), name) };
        assert!(f.is_none());
    }
}
