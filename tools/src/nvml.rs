//! NVML (`libnvidia-ml.so.1`), loaded at run time, for what the CUDA driver does not say: the
//! size and use of each GPU's BAR1 aperture, through which GPUDirect mappings reach its memory.

use crate::dl::{DlError, Library};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::fmt;

/// The soname the doctor loads.
pub const LIBNVML: &str = "libnvidia-ml.so.1";

/// `nvmlBAR1Memory_t` and `nvmlMemory_t` (same layout: total, free, used).
#[repr(C)]
#[derive(Default)]
struct Triple {
    total: u64,
    free: u64,
    used: u64,
}

type FnVoid = unsafe extern "C" fn() -> c_int;
type FnCount = unsafe extern "C" fn(*mut c_uint) -> c_int;
type FnHandle = unsafe extern "C" fn(c_uint, *mut *mut c_void) -> c_int;
type FnTriple = unsafe extern "C" fn(*mut c_void, *mut Triple) -> c_int;
type FnName = unsafe extern "C" fn(*mut c_void, *mut c_char, c_uint) -> c_int;
type FnErrorString = unsafe extern "C" fn(c_int) -> *const c_char;

/// Why NVML could not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NvmlError {
    /// The library or one of its functions is missing.
    Load(DlError),
    /// A call returned an `nvmlReturn_t` other than success.
    Call {
        function: &'static str,
        code: i32,
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
    shutdown: FnVoid,
    error_string: Option<FnErrorString>,
}

impl Nvml {
    /// Loads `libnvidia-ml.so.1` and calls `nvmlInit_v2`.
    pub fn init() -> Result<Nvml, NvmlError> {
        let lib = Library::open(LIBNVML).map_err(NvmlError::Load)?;
        // SAFETY: NVML's nvmlInit_v2 and nvmlShutdown take no arguments and return nvmlReturn_t.
        let (init, shutdown) = unsafe {
            (
                std::mem::transmute::<*mut c_void, FnVoid>(
                    lib.require("nvmlInit_v2").map_err(NvmlError::Load)?,
                ),
                std::mem::transmute::<*mut c_void, FnVoid>(
                    lib.require("nvmlShutdown").map_err(NvmlError::Load)?,
                ),
            )
        };
        // SAFETY: nvmlErrorString(nvmlReturn_t) returns a static string.
        let error_string = lib
            .sym_addr("nvmlErrorString")
            .map(|p| unsafe { std::mem::transmute::<*mut c_void, FnErrorString>(p) });
        let nvml = Nvml {
            lib,
            shutdown,
            error_string,
        };
        // SAFETY: see above.
        nvml.check("nvmlInit_v2", unsafe { init() })?;
        Ok(nvml)
    }

    fn check(&self, function: &'static str, code: c_int) -> Result<(), NvmlError> {
        if code == 0 {
            return Ok(());
        }
        let text = self
            .error_string
            // SAFETY: nvmlErrorString returns NULL or a static NUL-terminated string.
            .map(|f| unsafe { f(code) })
            .filter(|p| !p.is_null())
            // SAFETY: non-null and NUL-terminated (see above).
            .map(|p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
            .unwrap_or_else(|| "unknown error".into());
        Err(NvmlError::Call {
            function,
            code,
            text,
        })
    }

    /// # Safety
    /// `T` must be the function pointer type of NVML's function `name`.
    unsafe fn function<T: Copy>(&self, name: &str) -> Result<T, NvmlError> {
        let p = self.lib.require(name).map_err(NvmlError::Load)?;
        // SAFETY: the caller promises `T` is the function's pointer type (pointer-sized).
        Ok(unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
    }

    /// Every GPU's BAR1 and memory size.
    pub fn gpus(&self) -> Result<Vec<Gpu>, NvmlError> {
        // SAFETY: the types are those of NVML's functions of these names.
        let (count, handle, bar1, name) = unsafe {
            (
                self.function::<FnCount>("nvmlDeviceGetCount_v2")?,
                self.function::<FnHandle>("nvmlDeviceGetHandleByIndex_v2")?,
                self.function::<FnTriple>("nvmlDeviceGetBAR1MemoryInfo")?,
                self.function::<FnName>("nvmlDeviceGetName")?,
            )
        };
        // SAFETY: as above; optional (nvmlMemory_t has the same layout as nvmlBAR1Memory_t).
        let memory = unsafe { self.function::<FnTriple>("nvmlDeviceGetMemoryInfo") }.ok();
        let mut n: c_uint = 0;
        // SAFETY: valid out-pointer.
        self.check("nvmlDeviceGetCount_v2", unsafe { count(&mut n) })?;
        let mut out = Vec::new();
        for index in 0..n {
            let mut dev: *mut c_void = std::ptr::null_mut();
            // SAFETY: valid out-pointer.
            self.check("nvmlDeviceGetHandleByIndex_v2", unsafe {
                handle(index, &mut dev)
            })?;
            let mut b = Triple::default();
            // SAFETY: `dev` is NVML's handle; valid out-pointer.
            self.check("nvmlDeviceGetBAR1MemoryInfo", unsafe { bar1(dev, &mut b) })?;
            let mut buf = [0 as c_char; 96];
            // SAFETY: `buf` has the length passed.
            let named = unsafe { name(dev, buf.as_mut_ptr(), buf.len() as c_uint) } == 0;
            let name = if named {
                // SAFETY: NVML wrote a NUL-terminated string into `buf` (zeroed beforehand).
                unsafe { CStr::from_ptr(buf.as_ptr()) }
                    .to_string_lossy()
                    .into_owned()
            } else {
                "unknown GPU".into()
            };
            let memory_total = memory.and_then(|f| {
                let mut m = Triple::default();
                // SAFETY: `dev` is NVML's handle; valid out-pointer.
                (unsafe { f(dev, &mut m) } == 0).then_some(m.total)
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
