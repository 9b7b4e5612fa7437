//! Finding the Vulkan loader at run time: `dlopen("libvulkan.so.1")` and its one entry point,
//! `vkGetInstanceProcAddr`. A successful load is kept for the life of the process (a driver,
//! once initialised, owns threads and process-wide state, as libcuda does); a failed one is
//! undone and tried afresh at the next `gdr_open`.

use crate::backend::dl::Library;
use gdrapi_abi::vk::PFN_vkGetInstanceProcAddr;
use parking_lot::Mutex;
use std::ffi::CStr;
use std::fmt;

/// The loader's soname.
const LIBRARY: &CStr = c"libvulkan.so.1";

/// Why the Vulkan loader could not be used. The text is the log line that explains it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// `dlopen` failed; `dlerror()`'s text.
    NoLibrary(String),
    /// The library has no `vkGetInstanceProcAddr`.
    NoEntryPoint,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::NoLibrary(why) => write!(
                f,
                "cannot load the Vulkan loader (libvulkan.so.1): {why}; install it \
                 (Debian: libvulkan1) next to NVIDIA's Vulkan driver"
            ),
            LoadError::NoEntryPoint => f.write_str("libvulkan.so.1 has no vkGetInstanceProcAddr"),
        }
    }
}

/// The process-wide `vkGetInstanceProcAddr`, set by the first successful [`load`].
static LOADED: Mutex<Option<PFN_vkGetInstanceProcAddr>> = Mutex::new(None);

/// `vkGetInstanceProcAddr` of the Vulkan loader, loading it on first use.
pub fn load() -> Result<PFN_vkGetInstanceProcAddr, LoadError> {
    let mut slot = LOADED.lock();
    if let Some(f) = *slot {
        return Ok(f);
    }
    let lib = Library::open_first(&[LIBRARY], libc::RTLD_NOW).map_err(LoadError::NoLibrary)?;
    // SAFETY: the loader exports vkGetInstanceProcAddr with exactly this signature; the
    // library is kept below, so the pointer stays valid.
    let f: PFN_vkGetInstanceProcAddr =
        unsafe { lib.function(c"vkGetInstanceProcAddr") }.ok_or(LoadError::NoEntryPoint)?;
    lib.keep();
    *slot = Some(f);
    Ok(f)
}
