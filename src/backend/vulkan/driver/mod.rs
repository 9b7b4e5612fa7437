//! Vulkan, loaded at run time only (`dlopen("libvulkan.so.1")`, never a link dependency), for
//! the Vulkan-import backend: [`Instance`] lists the physical devices with what the backend
//! needs to know of each (UUID, `VK_KHR_external_memory_fd`, the BAR memory type), and a
//! [`Device`] imports an opaque fd as device memory and maps it. `VkResult` values never leave
//! this module raw: they become errno values through [`VkError::to_error`].

mod device;
mod instance;
mod loader;

pub use device::Device;
pub use instance::{Instance, PhysicalDevice};
pub use loader::LoadError;

use crate::error::Error;
use gdrapi_abi::vk;
use std::ffi::{c_char, CStr};
use std::fmt;

/// Why Vulkan could not be set up: the loader, an entry point, or a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The loader could not be loaded.
    Load(LoadError),
    /// `vkGet*ProcAddr` gave no function of this name.
    Missing(&'static CStr),
    /// A call failed.
    Call(VkError),
}

impl Failure {
    /// The crate error: ENODEV without a loader, ENOTSUP without an entry point, the call's
    /// errno ([`VkError::to_error`]) otherwise.
    pub fn to_error(&self) -> Error {
        match self {
            Failure::Load(LoadError::NoLibrary(_)) => Error::NoDevice("no Vulkan loader"),
            Failure::Load(LoadError::NoEntryPoint) | Failure::Missing(_) => {
                Error::NotSupported("a Vulkan entry point is missing")
            }
            Failure::Call(e) => e.to_error(),
        }
    }
}

impl From<VkError> for Failure {
    fn from(e: VkError) -> Failure {
        Failure::Call(e)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Load(e) => e.fmt(f),
            Failure::Missing(name) => write!(
                f,
                "the Vulkan loader resolves no {}",
                name.to_string_lossy()
            ),
            Failure::Call(e) => e.fmt(f),
        }
    }
}

/// A Vulkan call that failed: which one and its `VkResult`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VkError {
    /// The entry point's name, e.g. `"vkAllocateMemory"`.
    pub call: &'static str,
    /// The negative `VkResult` it returned.
    pub code: vk::Result,
}

impl VkError {
    /// The crate error: memory shortages are ENOMEM, a handle the driver cannot import is
    /// EINVAL, a missing driver or extension ENODEV or ENOTSUP, anything else EIO.
    pub fn to_error(self) -> Error {
        let errno = match self.code {
            vk::Result::ERROR_OUT_OF_HOST_MEMORY
            | vk::Result::ERROR_OUT_OF_DEVICE_MEMORY
            | vk::Result::ERROR_MEMORY_MAP_FAILED
            | vk::Result::ERROR_TOO_MANY_OBJECTS => libc::ENOMEM,
            vk::Result::ERROR_INVALID_EXTERNAL_HANDLE => libc::EINVAL,
            vk::Result::ERROR_INITIALIZATION_FAILED | vk::Result::ERROR_INCOMPATIBLE_DRIVER => {
                libc::ENODEV
            }
            vk::Result::ERROR_EXTENSION_NOT_PRESENT
            | vk::Result::ERROR_FEATURE_NOT_PRESENT
            | vk::Result::ERROR_LAYER_NOT_PRESENT => libc::ENOTSUP,
            _ => libc::EIO,
        };
        Error::Sys {
            call: self.call,
            errno,
        }
    }
}

impl fmt::Display for VkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // ash's Debug gives a known result's name without the VK_ prefix, another as a number.
        let name = format!("{:?}", self.code);
        let name = if name.starts_with(|c: char| c.is_ascii_alphabetic()) {
            format!("VK_{name}")
        } else {
            "unknown VkResult".to_owned()
        };
        write!(
            f,
            "\"{}\" failed ({}: {name})",
            self.call,
            self.code.as_raw()
        )
    }
}

/// The command `name` as `get` resolves it for `handle` (`vkGetInstanceProcAddr` for an
/// instance, or null for the global commands; `vkGetDeviceProcAddr` for a device), as its
/// function pointer type `F`; [`Failure::Missing`] when `get` gives none.
///
/// # Safety
/// `F` is the function pointer type of the command `name` (ash's `PFN_<name>`), and `handle`
/// is null or live.
unsafe fn resolve_command<H, F: Copy>(
    get: unsafe extern "system" fn(H, *const c_char) -> vk::PFN_vkVoidFunction,
    handle: H,
    name: &'static CStr,
) -> Result<F, Failure> {
    // SAFETY: `get` is the driver's vkGet*ProcAddr and `handle` is null or live.
    match unsafe { get(handle, name.as_ptr()) } {
        // SAFETY: the caller names the command's type; both are one code pointer wide.
        Some(f) => Ok(unsafe { std::mem::transmute_copy::<unsafe extern "system" fn(), F>(&f) }),
        None => Err(Failure::Missing(name)),
    }
}

/// Fails with [`VkError`] for a negative `VkResult` (positive ones are successes).
fn check(call: &'static str, code: vk::Result) -> Result<(), VkError> {
    if code.as_raw() < 0 {
        Err(VkError { call, code })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_become_errnos() {
        let e = |code| VkError { call: "vkX", code }.to_error().errno();
        assert_eq!(e(vk::Result::ERROR_OUT_OF_DEVICE_MEMORY), libc::ENOMEM);
        assert_eq!(e(vk::Result::ERROR_MEMORY_MAP_FAILED), libc::ENOMEM);
        assert_eq!(e(vk::Result::ERROR_INVALID_EXTERNAL_HANDLE), libc::EINVAL);
        assert_eq!(e(vk::Result::ERROR_INCOMPATIBLE_DRIVER), libc::ENODEV);
        assert_eq!(e(vk::Result::ERROR_EXTENSION_NOT_PRESENT), libc::ENOTSUP);
        assert_eq!(e(vk::Result::ERROR_DEVICE_LOST), libc::EIO);
        assert_eq!(e(vk::Result::from_raw(-12345)), libc::EIO);
    }

    #[test]
    fn failures_name_the_call_and_the_result() {
        assert_eq!(check("vkMapMemory", vk::Result::SUCCESS), Ok(()));
        assert_eq!(
            check("vkEnumeratePhysicalDevices", vk::Result::INCOMPLETE),
            Ok(())
        );
        let e = check("vkMapMemory", vk::Result::ERROR_MEMORY_MAP_FAILED).unwrap_err();
        assert_eq!(
            e.to_string(),
            "\"vkMapMemory\" failed (-5: VK_ERROR_MEMORY_MAP_FAILED)"
        );
        let e = check("vkMapMemory", vk::Result::from_raw(-12345)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "\"vkMapMemory\" failed (-12345: unknown VkResult)"
        );
    }
}
