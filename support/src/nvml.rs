//! NVML (`libnvidia-ml.so.1`), loaded at run time, for what the CUDA driver does not say: the
//! size and use of each GPU's BAR1 aperture, through which GPUDirect mappings reach its memory.

use crate::dl::{DlError, Library};
use std::ffi::{c_char, c_uint, CStr};
use std::fmt;

pub use gdrapi_abi::nvml::{nvmlDevice_t, nvmlReturn_t, Memory, LIBNVML};
use gdrapi_abi::nvml::{pfn, NVML_SUCCESS};

crate::entries! {
    /// `nvmlInit_v2`.
    nvmlInit_v2: pfn::nvmlInit_v2;
    /// `nvmlShutdown`.
    nvmlShutdown: pfn::nvmlShutdown;
    /// `nvmlErrorString`.
    nvmlErrorString: pfn::nvmlErrorString;
    /// `nvmlDeviceGetCount_v2`.
    nvmlDeviceGetCount_v2: pfn::nvmlDeviceGetCount_v2;
    /// `nvmlDeviceGetHandleByIndex_v2`.
    nvmlDeviceGetHandleByIndex_v2: pfn::nvmlDeviceGetHandleByIndex_v2;
    /// `nvmlDeviceGetName`.
    nvmlDeviceGetName: pfn::nvmlDeviceGetName;
    /// `nvmlDeviceGetBAR1MemoryInfo`.
    nvmlDeviceGetBAR1MemoryInfo: pfn::nvmlDeviceGetBAR1MemoryInfo;
    /// `nvmlDeviceGetMemoryInfo`.
    nvmlDeviceGetMemoryInfo: pfn::nvmlDeviceGetMemoryInfo;
}

/// Why NVML could not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NvmlError {
    /// The library or one of its functions is missing.
    Load(DlError),
    /// A call returned an `nvmlReturn_t` other than success.
    Call {
        /// The function.
        function: &'static str,
        /// Its `nvmlReturn_t`.
        code: i32,
        /// `nvmlErrorString`'s text for it.
        text: String,
    },
}

impl fmt::Display for NvmlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NvmlError::Load(e) => e.fmt(f),
            NvmlError::Call {
                function,
                code,
                text,
            } => write!(f, "{function} failed: {text} ({code})"),
        }
    }
}

impl std::error::Error for NvmlError {}

/// One GPU as NVML sees it, sizes in bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gpu {
    /// NVML's index (the same order as CUDA's unless CUDA_VISIBLE_DEVICES reorders it).
    pub index: u32,
    /// Product name.
    pub name: String,
    /// BAR1 aperture size.
    pub bar1_total: u64,
    /// BAR1 in use (by every process: mappings, pins, the driver's own).
    pub bar1_used: u64,
    /// Device memory size; `None` where NVML does not say.
    pub memory_total: Option<u64>,
}

/// NVML, initialised; shut down on drop.
pub struct Nvml {
    lib: Library,
    shutdown: <nvmlShutdown as crate::dl::Entry>::Fn,
    error_string: Option<<nvmlErrorString as crate::dl::Entry>::Fn>,
}

impl Nvml {
    /// Loads `libnvidia-ml.so.1` and calls `nvmlInit_v2`.
    pub fn init() -> Result<Nvml, NvmlError> {
        let lib = Library::open(LIBNVML).map_err(NvmlError::Load)?;
        let init = lib.get::<nvmlInit_v2>().map_err(NvmlError::Load)?;
        let shutdown = lib.get::<nvmlShutdown>().map_err(NvmlError::Load)?;
        let error_string = lib.get::<nvmlErrorString>().ok();
        let nvml = Nvml {
            lib,
            shutdown,
            error_string,
        };
        // SAFETY: nvmlInit_v2 takes no arguments; a failure leaves nothing to shut down, so
        // `nvml` must not be dropped then (its Drop calls nvmlShutdown).
        let code = unsafe { init() };
        if code != NVML_SUCCESS {
            let e = nvml.error("nvmlInit_v2", code);
            std::mem::forget(nvml);
            return Err(e);
        }
        Ok(nvml)
    }

    fn error(&self, function: &'static str, code: nvmlReturn_t) -> NvmlError {
        let text = self
            .error_string
            // SAFETY: nvmlErrorString takes any nvmlReturn_t and returns NULL or a static
            // NUL-terminated string.
            .map(|f| unsafe { f(code) })
            .filter(|p| !p.is_null())
            // SAFETY: non-null and NUL-terminated (see above), and static.
            .map(|p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
            .unwrap_or_else(|| "unknown error".into());
        NvmlError::Call {
            function,
            code,
            text,
        }
    }

    fn check(&self, function: &'static str, code: nvmlReturn_t) -> Result<(), NvmlError> {
        if code == NVML_SUCCESS {
            Ok(())
        } else {
            Err(self.error(function, code))
        }
    }

    /// Every GPU's BAR1 and memory size.
    pub fn gpus(&self) -> Result<Vec<Gpu>, NvmlError> {
        let l = &self.lib;
        let count = l.get::<nvmlDeviceGetCount_v2>().map_err(NvmlError::Load)?;
        let handle = l
            .get::<nvmlDeviceGetHandleByIndex_v2>()
            .map_err(NvmlError::Load)?;
        let bar1 = l
            .get::<nvmlDeviceGetBAR1MemoryInfo>()
            .map_err(NvmlError::Load)?;
        let name = l.get::<nvmlDeviceGetName>().map_err(NvmlError::Load)?;
        let memory = l.get::<nvmlDeviceGetMemoryInfo>().ok();
        let mut n: c_uint = 0;
        // SAFETY: valid out-pointer.
        self.check("nvmlDeviceGetCount_v2", unsafe { count(&mut n) })?;
        let mut out = Vec::new();
        for index in 0..n {
            let mut dev: nvmlDevice_t = std::ptr::null_mut();
            // SAFETY: valid out-pointer.
            self.check("nvmlDeviceGetHandleByIndex_v2", unsafe {
                handle(index, &mut dev)
            })?;
            let mut b = Memory::default();
            // SAFETY: `dev` is NVML's handle for this index; valid out-pointer.
            self.check("nvmlDeviceGetBAR1MemoryInfo", unsafe { bar1(dev, &mut b) })?;
            let mut buf = [0 as c_char; 96];
            // SAFETY: `dev` as above; `buf` has the length passed.
            let named = unsafe { name(dev, buf.as_mut_ptr(), buf.len() as c_uint) } == NVML_SUCCESS;
            let name = if named {
                // SAFETY: NVML wrote a NUL-terminated string into `buf`, which was zeroed and
                // whose last byte it leaves as the terminator at worst.
                unsafe { CStr::from_ptr(buf.as_ptr()) }
                    .to_string_lossy()
                    .into_owned()
            } else {
                "unknown GPU".into()
            };
            let memory_total = memory.and_then(|f| {
                let mut m = Memory::default();
                // SAFETY: `dev` as above; valid out-pointer (nvmlMemory_t version 1).
                (unsafe { f(dev, &mut m) } == NVML_SUCCESS).then_some(m.total)
            });
            out.push(Gpu {
                index,
                name,
                bar1_total: b.total,
                bar1_used: b.used,
                memory_total,
            });
        }
        Ok(out)
    }
}

impl Drop for Nvml {
    fn drop(&mut self) {
        // SAFETY: balances the successful nvmlInit_v2 of `init`.
        unsafe { (self.shutdown)() };
    }
}
