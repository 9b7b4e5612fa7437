//! The loaded CUDA driver: its entry points and safe wrappers that return `CUresult` failures
//! as [`CuError`] values naming the call.

use super::result::{error_of, fallback_name};
use super::types::*;
use crate::error::Error;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::fmt;

/// The driver entry points the DMA-BUF backend calls.
#[derive(Clone, Copy)]
pub struct Api {
    /// `cuInit`.
    pub init: FnInit,
    /// `cuDeviceGet`.
    pub device_get: FnDeviceGet,
    /// `cuDeviceGetCount`.
    pub device_get_count: FnDeviceGetCount,
    /// `cuDeviceGetAttribute`.
    pub device_get_attribute: FnDeviceGetAttribute,
    /// `cuMemGetHandleForAddressRange`.
    pub mem_get_handle_for_address_range: FnMemGetHandleForAddressRange,
    /// `cuCtxGetCurrent`.
    pub ctx_get_current: FnCtxGetCurrent,
    /// `cuCtxSetCurrent`.
    pub ctx_set_current: FnCtxSetCurrent,
    /// `cuDevicePrimaryCtxRetain`.
    pub primary_ctx_retain: FnDevicePrimaryCtxRetain,
    /// `cuDevicePrimaryCtxRelease` (`_v2` through `cuGetProcAddress`).
    pub primary_ctx_release: FnDevicePrimaryCtxRelease,
    /// `cuPointerGetAttribute`.
    pub pointer_get_attribute: FnPointerGetAttribute,
    /// `cuGetErrorName`, when the driver has it (log lines only).
    pub get_error_name: Option<FnGetErrorText>,
    /// `cuGetErrorString`, when the driver has it (log lines only).
    pub get_error_string: Option<FnGetErrorText>,
}

/// A CUDA call that failed: which one and its `CUresult`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CuError {
    /// The entry point's name, e.g. `"cuMemGetHandleForAddressRange"`.
    pub call: &'static str,
    /// The non-zero `CUresult` it returned.
    pub code: CuResult,
}

impl CuError {
    /// The crate error (errno from the table in [`super::result`]).
    pub fn to_error(self) -> Error {
        error_of(self.call, self.code)
    }
}

/// A CUDA context the driver handed out (from `cuCtxGetCurrent` or `cuDevicePrimaryCtxRetain`);
/// only the driver makes these, so only driver-issued values are ever passed back to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Context(usize);

impl Context {
    /// The raw `CUcontext` value, for comparisons and logs.
    pub fn raw(self) -> usize {
        self.0
    }
}

/// A CUDA driver loaded and initialised (`cuInit` succeeded). Shared by all sessions.
pub struct Driver {
    api: Api,
    version: i32,
    /// The `dlopen` handle, kept for the life of the process (0 for an in-process table).
    _handle: usize,
}

fn check(call: &'static str, code: CuResult) -> Result<(), CuError> {
    if code == CUDA_SUCCESS {
        Ok(())
    } else {
        Err(CuError { call, code })
    }
}

impl Driver {
    /// A driver from resolved entry points; `version` is what `cuDriverGetVersion` reported.
    pub(crate) fn new(api: Api, version: i32, handle: usize) -> Driver {
        Driver {
            api,
            version,
            _handle: handle,
        }
    }

    /// `cuDriverGetVersion` as reported at load time (1000 * major + 10 * minor).
    pub fn version(&self) -> i32 {
        self.version
    }

    /// `cuDeviceGetCount`.
    pub fn device_count(&self) -> Result<i32, CuError> {
        let mut n: c_int = 0;
        // SAFETY: resolved entry point, valid out pointer.
        check("cuDeviceGetCount", unsafe {
            (self.api.device_get_count)(&mut n)
        })?;
        Ok(n)
    }

    /// `cuDeviceGet`.
    pub fn device(&self, ordinal: i32) -> Result<CuDevice, CuError> {
        let mut d: CuDevice = 0;
        // SAFETY: resolved entry point, valid out pointer.
        check("cuDeviceGet", unsafe {
            (self.api.device_get)(&mut d, ordinal)
        })?;
        Ok(d)
    }

    /// `cuDeviceGetAttribute`.
    pub fn device_attribute(&self, dev: CuDevice, attr: c_int) -> Result<i32, CuError> {
        let mut v: c_int = 0;
        // SAFETY: resolved entry point, valid out pointer.
        check("cuDeviceGetAttribute", unsafe {
            (self.api.device_get_attribute)(&mut v, attr, dev)
        })?;
        Ok(v)
    }

    /// `cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)`: the device owning `addr`.
    pub fn pointer_device_ordinal(&self, addr: CuDevicePtr) -> Result<i32, CuError> {
        let mut ordinal: c_int = -1;
        // SAFETY: resolved entry point; DEVICE_ORDINAL writes one int into the out pointer.
        let r = unsafe {
            (self.api.pointer_get_attribute)(
                (&mut ordinal as *mut c_int).cast::<c_void>(),
                POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                addr,
            )
        };
        check("cuPointerGetAttribute", r)?;
        Ok(ordinal)
    }

    /// `cuCtxGetCurrent`: the calling thread's context, `None` when it has none.
    pub fn current_context(&self) -> Result<Option<Context>, CuError> {
        let mut c: CuContext = std::ptr::null_mut();
        // SAFETY: resolved entry point, valid out pointer.
        check("cuCtxGetCurrent", unsafe {
            (self.api.ctx_get_current)(&mut c)
        })?;
        Ok((!c.is_null()).then_some(Context(c as usize)))
    }

    /// `cuCtxSetCurrent`: binds `ctx` to the calling thread, or unbinds with `None`.
    pub fn set_current_context(&self, ctx: Option<Context>) -> Result<(), CuError> {
        let raw = ctx.map_or(std::ptr::null_mut(), |c| c.0 as CuContext);
        // SAFETY: resolved entry point; `raw` is null or a context the driver handed out.
        check("cuCtxSetCurrent", unsafe {
            (self.api.ctx_set_current)(raw)
        })
    }

    /// `cuDevicePrimaryCtxRetain`.
    pub fn retain_primary_context(&self, dev: CuDevice) -> Result<Context, CuError> {
        let mut c: CuContext = std::ptr::null_mut();
        // SAFETY: resolved entry point, valid out pointer.
        check("cuDevicePrimaryCtxRetain", unsafe {
            (self.api.primary_ctx_retain)(&mut c, dev)
        })?;
        Ok(Context(c as usize))
    }

    /// `cuDevicePrimaryCtxRelease`.
    pub fn release_primary_context(&self, dev: CuDevice) -> Result<(), CuError> {
        // SAFETY: resolved entry point.
        check("cuDevicePrimaryCtxRelease", unsafe {
            (self.api.primary_ctx_release)(dev)
        })
    }

    /// `cuMemGetHandleForAddressRange(DMA_BUF_FD)`: a new dma-buf fd for `[addr, addr+size)`.
    pub fn export_dmabuf(
        &self,
        addr: CuDevicePtr,
        size: usize,
        flags: u64,
    ) -> Result<i32, CuError> {
        // The driver stores an int; two ints of room guard against a wider store.
        let mut handle: [c_int; 2] = [-1, -1];
        // SAFETY: resolved entry point; the out buffer is 8 bytes, alive across the call.
        let r = unsafe {
            (self.api.mem_get_handle_for_address_range)(
                handle.as_mut_ptr().cast::<c_void>(),
                addr,
                size,
                MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                flags,
            )
        };
        check("cuMemGetHandleForAddressRange", r)?;
        Ok(handle[0])
    }

    /// `"<name>: <description>"` for a `CUresult`, from the driver when it can say.
    pub fn describe(&self, code: CuResult) -> String {
        let name =
            text(self.api.get_error_name, code).unwrap_or_else(|| fallback_name(code).to_owned());
        match text(self.api.get_error_string, code) {
            Some(s) => format!("{name}: \"{s}\""),
            None => name,
        }
    }

    /// Logs `err` at ERR level: `"<call>" failed (<code>: <NAME>: "<text>")`.
    pub fn log_failure(&self, err: CuError) {
        self.log_failure_with(err, None);
    }

    /// [`Driver::log_failure`], with `"; <note>"` appended when there is a note.
    pub fn log_failure_with(&self, err: CuError, note: Option<&str>) {
        crate::gdr_err!(
            "\"{}\" failed ({}: {}){}{}",
            err.call,
            err.code,
            self.describe(err.code),
            if note.is_some() { "; " } else { "" },
            note.unwrap_or("")
        );
    }
}

fn text(f: Option<FnGetErrorText>, code: CuResult) -> Option<String> {
    let f = f?;
    let mut p: *const c_char = std::ptr::null();
    // SAFETY: resolved entry point, valid out pointer.
    if unsafe { f(code, &mut p) } != CUDA_SUCCESS || p.is_null() {
        return None;
    }
    // SAFETY: the driver returns a static NUL-terminated string.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Driver")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}
