//! The loaded CUDA driver: its entry points and safe wrappers that return `CUresult` failures
//! as [`CuError`] values naming the call. Entry points only one backend needs are kept as
//! `Result`s, so that a driver without them still serves the other backend.

use super::result::{error_of, fallback_name};
use super::types::*;
use crate::error::Error;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::fmt;

/// The driver entry points the backends call.
#[derive(Clone, Copy)]
pub struct Api {
    /// `cuInit`.
    pub init: pfn::cuInit,
    /// `cuDeviceGet`.
    pub device_get: pfn::cuDeviceGet,
    /// `cuDeviceGetCount`.
    pub device_get_count: pfn::cuDeviceGetCount,
    /// `cuDeviceGetAttribute`.
    pub device_get_attribute: pfn::cuDeviceGetAttribute,
    /// `cuMemGetHandleForAddressRange` (the DMA-BUF backend), or why it could not be resolved.
    pub mem_get_handle_for_address_range: Result<pfn::cuMemGetHandleForAddressRange, Missing>,
    /// `cuCtxGetCurrent`.
    pub ctx_get_current: pfn::cuCtxGetCurrent,
    /// `cuCtxSetCurrent`.
    pub ctx_set_current: pfn::cuCtxSetCurrent,
    /// `cuDevicePrimaryCtxRetain`.
    pub primary_ctx_retain: pfn::cuDevicePrimaryCtxRetain,
    /// `cuDevicePrimaryCtxRelease` (`_v2` through `cuGetProcAddress`).
    pub primary_ctx_release: pfn::cuDevicePrimaryCtxRelease_v2,
    /// `cuPointerGetAttribute`.
    pub pointer_get_attribute: pfn::cuPointerGetAttribute,
    /// `cuGetErrorName`, when the driver has it (log lines only).
    pub get_error_name: Option<pfn::cuGetErrorName>,
    /// `cuGetErrorString`, when the driver has it (log lines only).
    pub get_error_string: Option<pfn::cuGetErrorString>,
    /// The virtual memory management calls (the Vulkan backend), or the first one missing.
    pub vmm: Result<VmmApi, Missing>,
}

/// The entry points the Vulkan backend calls to find and export a `cuMemCreate` allocation.
#[derive(Clone, Copy)]
pub struct VmmApi {
    /// `cuMemRetainAllocationHandle`.
    pub retain_allocation_handle: pfn::cuMemRetainAllocationHandle,
    /// `cuMemGetAllocationPropertiesFromHandle`.
    pub allocation_properties: pfn::cuMemGetAllocationPropertiesFromHandle,
    /// `cuMemExportToShareableHandle`.
    pub export_to_shareable_handle: pfn::cuMemExportToShareableHandle,
    /// `cuMemRelease`.
    pub release: pfn::cuMemRelease,
    /// `cuMemGetAddressRange_v2`.
    pub address_range: pfn::cuMemGetAddressRange_v2,
    /// `cuDeviceGetUuid_v2`.
    pub device_uuid: pfn::cuDeviceGetUuid_v2,
}

/// An entry point `cuGetProcAddress` did not give: its name, the `CUresult` and symbol
/// status of the query, and the CUDA version it was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Missing {
    /// The entry point's base name, e.g. `"cuMemGetHandleForAddressRange"`.
    pub name: &'static str,
    /// What `cuGetProcAddress` returned.
    pub code: CUresult,
    /// Its `CUdriverProcAddressQueryResult` (0 for the legacy form).
    pub status: c_int,
    /// The `cudaVersion` argument of the query.
    pub version: c_int,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cuGetProcAddress cannot resolve '{}' for CUDA {} (result {}: {}, status {})",
            self.name,
            self.version,
            self.code,
            fallback_name(self.code),
            self.status
        )
    }
}

/// A [`Missing`] entry point as a crate error: ENOTSUP.
impl From<Missing> for Error {
    fn from(_: Missing) -> Error {
        Error::NotSupported("a CUDA entry point is missing")
    }
}

/// A CUDA call that failed: which one and its `CUresult`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CuError {
    /// The entry point's name, e.g. `"cuMemGetHandleForAddressRange"`.
    pub call: &'static str,
    /// The non-zero `CUresult` it returned.
    pub code: CUresult,
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
}

fn check(call: &'static str, code: CUresult) -> Result<(), CuError> {
    if code == status::SUCCESS {
        Ok(())
    } else {
        Err(CuError { call, code })
    }
}

impl Driver {
    /// A driver from resolved entry points; `version` is what `cuDriverGetVersion` reported.
    pub(crate) fn new(api: Api, version: i32) -> Driver {
        Driver { api, version }
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
    pub fn device(&self, ordinal: i32) -> Result<CUdevice, CuError> {
        let mut d: CUdevice = 0;
        // SAFETY: resolved entry point, valid out pointer.
        check("cuDeviceGet", unsafe {
            (self.api.device_get)(&mut d, ordinal)
        })?;
        Ok(d)
    }

    /// `cuDeviceGetAttribute`.
    pub fn device_attribute(&self, dev: CUdevice, attr: c_int) -> Result<i32, CuError> {
        let mut v: c_int = 0;
        // SAFETY: resolved entry point, valid out pointer.
        check("cuDeviceGetAttribute", unsafe {
            (self.api.device_get_attribute)(&mut v, attr, dev)
        })?;
        Ok(v)
    }

    /// `cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)`: the device owning `addr`.
    pub fn pointer_device_ordinal(&self, addr: CUdeviceptr) -> Result<i32, CuError> {
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
        let mut c: CUcontext = std::ptr::null_mut();
        // SAFETY: resolved entry point, valid out pointer.
        check("cuCtxGetCurrent", unsafe {
            (self.api.ctx_get_current)(&mut c)
        })?;
        Ok((!c.is_null()).then_some(Context(c as usize)))
    }

    /// `cuCtxSetCurrent`: binds `ctx` to the calling thread, or unbinds with `None`.
    pub fn set_current_context(&self, ctx: Option<Context>) -> Result<(), CuError> {
        let raw = ctx.map_or(std::ptr::null_mut(), |c| c.0 as CUcontext);
        // SAFETY: resolved entry point; `raw` is null or a context the driver handed out.
        check("cuCtxSetCurrent", unsafe {
            (self.api.ctx_set_current)(raw)
        })
    }

    /// `cuDevicePrimaryCtxRetain`.
    pub fn retain_primary_context(&self, dev: CUdevice) -> Result<Context, CuError> {
        let mut c: CUcontext = std::ptr::null_mut();
        // SAFETY: resolved entry point, valid out pointer.
        check("cuDevicePrimaryCtxRetain", unsafe {
            (self.api.primary_ctx_retain)(&mut c, dev)
        })?;
        Ok(Context(c as usize))
    }

    /// `cuDevicePrimaryCtxRelease`.
    pub fn release_primary_context(&self, dev: CUdevice) -> Result<(), CuError> {
        // SAFETY: resolved entry point.
        check("cuDevicePrimaryCtxRelease", unsafe {
            (self.api.primary_ctx_release)(dev)
        })
    }

    /// Whether `cuMemGetHandleForAddressRange` was resolved, or why not.
    pub fn dmabuf_export_available(&self) -> Result<(), Missing> {
        self.api.mem_get_handle_for_address_range.map(|_| ())
    }

    /// The VMM entry points, or the first one the driver lacks.
    pub fn vmm(&self) -> Result<Vmm<'_>, Missing> {
        self.api.vmm.as_ref().map(|api| Vmm { api }).map_err(|m| *m)
    }

    /// `cuMemGetHandleForAddressRange(DMA_BUF_FD)`: a new dma-buf fd for `[addr, addr+size)`.
    pub fn export_dmabuf(
        &self,
        addr: CUdeviceptr,
        size: usize,
        flags: u64,
    ) -> Result<i32, CuError> {
        let Ok(export) = self.api.mem_get_handle_for_address_range else {
            // The DMA-BUF backend checks this at open (`dmabuf_export_available`).
            return Err(CuError {
                call: "cuMemGetHandleForAddressRange",
                code: status::NOT_FOUND,
            });
        };
        // The driver stores an int; two ints of room guard against a wider store.
        let mut handle: [c_int; 2] = [-1, -1];
        // SAFETY: resolved entry point; the out buffer is 8 bytes, alive across the call.
        let r = unsafe {
            export(
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
    pub fn describe(&self, code: CUresult) -> String {
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

/// The VMM entry points of a loaded driver ([`Driver::vmm`]).
#[derive(Clone, Copy)]
pub struct Vmm<'a> {
    api: &'a VmmApi,
}

impl Vmm<'_> {
    /// `cuMemRetainAllocationHandle`: the physical allocation mapped at `addr`, with one more
    /// reference that the caller gives back with [`Vmm::release`].
    pub fn retain_allocation(
        &self,
        addr: CUdeviceptr,
    ) -> Result<CUmemGenericAllocationHandle, CuError> {
        let mut h: CUmemGenericAllocationHandle = 0;
        // SAFETY: resolved entry point, valid out pointer; the address is only looked up.
        check("cuMemRetainAllocationHandle", unsafe {
            (self.api.retain_allocation_handle)(&mut h, addr as usize as *mut c_void)
        })?;
        Ok(h)
    }

    /// `cuMemGetAllocationPropertiesFromHandle`.
    pub fn properties(
        &self,
        h: CUmemGenericAllocationHandle,
    ) -> Result<MemAllocationProp, CuError> {
        let mut p = MemAllocationProp::default();
        // SAFETY: resolved entry point; `p` is a writable `CUmemAllocationProp`.
        check("cuMemGetAllocationPropertiesFromHandle", unsafe {
            (self.api.allocation_properties)(&mut p, h)
        })?;
        Ok(p)
    }

    /// `cuMemExportToShareableHandle(POSIX_FILE_DESCRIPTOR)`: a new fd the caller owns.
    pub fn export_fd(&self, h: CUmemGenericAllocationHandle) -> Result<i32, CuError> {
        // The driver stores an int; two ints of room guard against a wider store.
        let mut fd: [c_int; 2] = [-1, -1];
        // SAFETY: resolved entry point; the out buffer is 8 bytes, alive across the call.
        check("cuMemExportToShareableHandle", unsafe {
            (self.api.export_to_shareable_handle)(
                fd.as_mut_ptr().cast::<c_void>(),
                h,
                MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                0,
            )
        })?;
        Ok(fd[0])
    }

    /// `cuMemRelease`.
    pub fn release(&self, h: CUmemGenericAllocationHandle) -> Result<(), CuError> {
        // SAFETY: resolved entry point; the handle is only looked up.
        check("cuMemRelease", unsafe { (self.api.release)(h) })
    }

    /// `cuMemGetAddressRange_v2`: `(base, size)` of the mapped range holding `addr`.
    pub fn address_range(&self, addr: CUdeviceptr) -> Result<(CUdeviceptr, usize), CuError> {
        let (mut base, mut size): (CUdeviceptr, usize) = (0, 0);
        // SAFETY: resolved entry point, valid out pointers.
        check("cuMemGetAddressRange", unsafe {
            (self.api.address_range)(&mut base, &mut size, addr)
        })?;
        Ok((base, size))
    }

    /// `cuDeviceGetUuid_v2`.
    pub fn device_uuid(&self, dev: CUdevice) -> Result<[u8; 16], CuError> {
        let mut uuid = [0u8; 16];
        // SAFETY: resolved entry point; `uuid` is a writable 16-byte `CUuuid`.
        check("cuDeviceGetUuid", unsafe {
            (self.api.device_uuid)(&mut uuid, dev)
        })?;
        Ok(uuid)
    }
}

fn text(f: Option<pfn::cuGetErrorName>, code: CUresult) -> Option<String> {
    let f = f?;
    let mut p: *const c_char = std::ptr::null();
    // SAFETY: resolved entry point, valid out pointer.
    if unsafe { f(code, &mut p) } != status::SUCCESS || p.is_null() {
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
