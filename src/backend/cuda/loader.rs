//! Finding libcuda at run time: `dlopen("libcuda.so.1")`, then `"libcuda.so"`; the version gate
//! of the backend asking ([`Requirement`]); the entry points through `cuGetProcAddress_v2` (or the
//! legacy `cuGetProcAddress`); `cuInit`.
//!
//! The library is never linked against libcuda and opens it (`backend::dl`) only when the
//! DMA-BUF or the Vulkan backend is tried. Once a load succeeded, the table is kept for the
//! life of the process and shared by every session: after `cuInit` the driver owns threads and
//! process-wide state, so unloading it again (as upstream does at its last `gdr_close`) is not
//! safe. A load that fails is undone (`dlclose`) and tried afresh at the next `gdr_open`.

use super::driver::{Api, Driver, Missing, VmmApi};
use super::result::{error_of, fallback_name};
use super::types::*;
use crate::backend::dl::Library;
use crate::error::Error;
use parking_lot::Mutex;
use std::ffi::{c_int, c_void, CStr};
use std::fmt;

/// The names tried, in order.
const LIBRARY_NAMES: [&CStr; 2] = [c"libcuda.so.1", c"libcuda.so"];

/// What a backend needs of the driver: the oldest CUDA version it works with, and its name in
/// the log line of a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requirement {
    /// The oldest `cuDriverGetVersion` value (1000 * major + 10 * minor).
    pub version: c_int,
    /// The backend, as the log names it.
    pub purpose: &'static str,
}

/// The DMA-BUF backend: CPU mmap of dma-buf exports came with CUDA 13.3.
pub const FOR_DMABUF: Requirement = Requirement {
    version: MIN_DMABUF_MMAP_VERSION,
    purpose: "dmabuf mmap backend",
};

/// The Vulkan backend: the VMM export calls and `cuDeviceGetUuid_v2` (CUDA 11.4).
pub const FOR_VULKAN: Requirement = Requirement {
    version: MIN_VMM_EXPORT_VERSION,
    purpose: "vulkan backend",
};

/// Why libcuda could not be used. Each variant's text is the log line that explains it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// Neither name could be opened; `dlerror()` text of the last attempt.
    NoLibrary(String),
    /// libcuda lacks `cuDriverGetVersion`.
    NoVersionQuery,
    /// `cuDriverGetVersion` failed with this `CUresult`.
    VersionQueryFailed(CUresult),
    /// The driver reports `version`, older than the backend needs.
    TooOld { version: i32, need: Requirement },
    /// libcuda exports neither `cuGetProcAddress_v2` nor `cuGetProcAddress`.
    NoGetProcAddress,
    /// `cuGetProcAddress` did not give an entry point every backend needs.
    MissingFunction(Missing),
    /// `cuInit(0)` failed with this `CUresult`.
    InitFailed(CUresult),
}

impl LoadError {
    /// The crate error this refusal is reported as: ENODEV when there is no libcuda, ENOTSUP
    /// when the driver is too old or lacks an entry point, the table in [`super::result`] for a
    /// failed call.
    pub fn to_error(&self) -> Error {
        match self {
            LoadError::NoLibrary(_) => Error::NoDevice("no CUDA driver library (libcuda.so.1)"),
            LoadError::NoVersionQuery => Error::NotSupported("libcuda has no cuDriverGetVersion"),
            LoadError::VersionQueryFailed(r) => error_of("cuDriverGetVersion", *r),
            LoadError::TooOld { .. } => Error::NotSupported("the CUDA driver is too old"),
            LoadError::NoGetProcAddress => Error::NotSupported("libcuda has no cuGetProcAddress"),
            LoadError::MissingFunction(m) => Error::from(*m),
            LoadError::InitFailed(r) => error_of("cuInit", *r),
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::NoLibrary(why) => {
                write!(
                    f,
                    "cannot load the CUDA driver (libcuda.so.1, libcuda.so): {why}"
                )
            }
            LoadError::NoVersionQuery => f.write_str("libcuda has no cuDriverGetVersion"),
            LoadError::VersionQueryFailed(r) => {
                write!(f, "cuDriverGetVersion failed ({r}: {})", fallback_name(*r))
            }
            LoadError::TooOld { version: v, need } => write!(
                f,
                "CUDA {}.{} or newer required for {} (reported version {v} = CUDA {}.{}; need {})",
                need.version / 1000,
                (need.version % 1000) / 10,
                need.purpose,
                v / 1000,
                (v % 1000) / 10,
                need.version
            ),
            LoadError::NoGetProcAddress => {
                f.write_str("libcuda exports neither cuGetProcAddress_v2 nor cuGetProcAddress")
            }
            LoadError::MissingFunction(m) => m.fmt(f),
            LoadError::InitFailed(r) => write!(f, "cuInit(0) failed ({r}: {})", fallback_name(*r)),
        }
    }
}

/// The process-wide table, set by the first successful [`load`].
static LOADED: Mutex<Option<&'static Driver>> = Mutex::new(None);

/// The process-wide libcuda table, loading it on first use, provided the driver meets `need`.
/// Thread-safe: concurrent callers wait for one load. A failure is not cached.
pub fn load(need: Requirement) -> Result<&'static Driver, LoadError> {
    let mut slot = LOADED.lock();
    let driver = match *slot {
        Some(d) => d,
        None => {
            let d: &'static Driver = Box::leak(Box::new(load_fresh(need)?));
            *slot = Some(d);
            d
        }
    };
    if driver.version() < need.version {
        return Err(LoadError::TooOld {
            version: driver.version(),
            need,
        });
    }
    Ok(driver)
}

/// `cuGetProcAddress` in whichever form libcuda exports.
#[derive(Clone, Copy)]
enum ProcAddress {
    V2(pfn::cuGetProcAddress_v2),
    V1(pfn::cuGetProcAddress),
}

impl ProcAddress {
    fn find(lib: &Library) -> Option<ProcAddress> {
        // SAFETY: libcuda exports cuGetProcAddress_v2 with this signature (cuda.h, CUDA >= 12.0);
        // the library is kept once the load succeeds.
        if let Some(f) = unsafe { lib.function(c"cuGetProcAddress_v2") } {
            return Some(ProcAddress::V2(f));
        }
        // SAFETY: the unversioned export keeps the 4-argument CUDA 11.3 signature.
        unsafe { lib.function(c"cuGetProcAddress") }.map(ProcAddress::V1)
    }

    /// Resolves `name` as CUDA `version` declares it.
    fn get(self, name: &'static CStr, version: c_int) -> Result<*mut c_void, Missing> {
        let mut fp: *mut c_void = std::ptr::null_mut();
        let mut status: c_int = 0;
        let code = match self {
            // SAFETY: valid NUL-terminated name and out pointers that live across the call.
            ProcAddress::V2(f) => unsafe {
                f(
                    name.as_ptr(),
                    &mut fp,
                    version,
                    GET_PROC_ADDRESS_DEFAULT,
                    &mut status,
                )
            },
            // SAFETY: as above.
            ProcAddress::V1(f) => unsafe {
                f(name.as_ptr(), &mut fp, version, GET_PROC_ADDRESS_DEFAULT)
            },
        };
        if code != status::SUCCESS || status != 0 || fp.is_null() {
            let name = name.to_str().unwrap_or("?");
            return Err(Missing {
                name,
                code,
                status,
                version,
            });
        }
        Ok(fp)
    }
}

/// Resolves one entry point into a typed function pointer, or the [`Missing`] that says why not.
macro_rules! resolve {
    ($pa:expr, $version:expr, $name:literal, $ty:ty) => {
        $pa.get($name, $version).map(|p| {
            // SAFETY: cuGetProcAddress returned the driver's entry point of that name for the
            // requested CUDA version, whose signature `cuda.h` declares as `$ty`.
            unsafe { std::mem::transmute::<*mut c_void, $ty>(p) }
        })
    };
}

/// The VMM entry points, or the first one `pa` cannot resolve.
fn resolve_vmm(pa: ProcAddress, v: c_int) -> Result<VmmApi, Missing> {
    Ok(VmmApi {
        retain_allocation_handle: resolve!(
            pa,
            v,
            c"cuMemRetainAllocationHandle",
            pfn::cuMemRetainAllocationHandle
        )?,
        allocation_properties: resolve!(
            pa,
            v,
            c"cuMemGetAllocationPropertiesFromHandle",
            pfn::cuMemGetAllocationPropertiesFromHandle
        )?,
        export_to_shareable_handle: resolve!(
            pa,
            v,
            c"cuMemExportToShareableHandle",
            pfn::cuMemExportToShareableHandle
        )?,
        release: resolve!(pa, v, c"cuMemRelease", pfn::cuMemRelease)?,
        address_range: resolve!(pa, v, c"cuMemGetAddressRange", pfn::cuMemGetAddressRange_v2)?,
        device_uuid: resolve!(pa, v, c"cuDeviceGetUuid", pfn::cuDeviceGetUuid_v2)?,
    })
}

fn load_fresh(need: Requirement) -> Result<Driver, LoadError> {
    let lib = Library::open_first(&LIBRARY_NAMES, libc::RTLD_LAZY).map_err(LoadError::NoLibrary)?;
    // SAFETY: cuDriverGetVersion has this signature in every CUDA release; it is called while
    // `lib` is open.
    let get_version: pfn::cuDriverGetVersion =
        unsafe { lib.function(c"cuDriverGetVersion") }.ok_or(LoadError::NoVersionQuery)?;
    let mut version: c_int = 0;
    // SAFETY: valid out pointer.
    let r = unsafe { get_version(&mut version) };
    if r != status::SUCCESS {
        return Err(LoadError::VersionQueryFailed(r));
    }
    if version < need.version {
        return Err(LoadError::TooOld { version, need });
    }

    let pa = ProcAddress::find(&lib).ok_or(LoadError::NoGetProcAddress)?;
    // Signatures as this module declares them: never a newer version of an entry point.
    let v = version.min(API_VERSION);
    let required = LoadError::MissingFunction;
    let api = Api {
        init: resolve!(pa, v, c"cuInit", pfn::cuInit).map_err(required)?,
        device_get: resolve!(pa, v, c"cuDeviceGet", pfn::cuDeviceGet).map_err(required)?,
        device_get_count: resolve!(pa, v, c"cuDeviceGetCount", pfn::cuDeviceGetCount)
            .map_err(required)?,
        device_get_attribute: resolve!(pa, v, c"cuDeviceGetAttribute", pfn::cuDeviceGetAttribute)
            .map_err(required)?,
        // The DMA-BUF backend's own: checked when that backend opens.
        mem_get_handle_for_address_range: resolve!(
            pa,
            v,
            c"cuMemGetHandleForAddressRange",
            pfn::cuMemGetHandleForAddressRange
        ),
        ctx_get_current: resolve!(pa, v, c"cuCtxGetCurrent", pfn::cuCtxGetCurrent)
            .map_err(required)?,
        ctx_set_current: resolve!(pa, v, c"cuCtxSetCurrent", pfn::cuCtxSetCurrent)
            .map_err(required)?,
        primary_ctx_retain: resolve!(
            pa,
            v,
            c"cuDevicePrimaryCtxRetain",
            pfn::cuDevicePrimaryCtxRetain
        )
        .map_err(required)?,
        primary_ctx_release: resolve!(
            pa,
            v,
            c"cuDevicePrimaryCtxRelease",
            pfn::cuDevicePrimaryCtxRelease_v2
        )
        .map_err(required)?,
        pointer_get_attribute: resolve!(
            pa,
            v,
            c"cuPointerGetAttribute",
            pfn::cuPointerGetAttribute
        )
        .map_err(required)?,
        // Only used to word log lines: optional.
        get_error_name: resolve!(pa, v, c"cuGetErrorName", pfn::cuGetErrorName).ok(),
        get_error_string: resolve!(pa, v, c"cuGetErrorString", pfn::cuGetErrorString).ok(),
        // The Vulkan backend's own: checked when that backend opens.
        vmm: resolve_vmm(pa, v),
    };

    // SAFETY: cuInit resolved above; 0 is the only valid flag value.
    let r = unsafe { (api.init)(0) };
    if r != status::SUCCESS {
        return Err(LoadError::InitFailed(r));
    }
    crate::gdr_dbg!("CUDA driver version {version}");
    lib.keep();
    Ok(Driver::new(api, version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_of_refusals() {
        assert_eq!(
            LoadError::NoLibrary("x".into()).to_error().errno(),
            libc::ENODEV
        );
        assert_eq!(
            LoadError::TooOld {
                version: 13000,
                need: FOR_DMABUF
            }
            .to_error()
            .errno(),
            libc::ENOTSUP
        );
        assert_eq!(LoadError::InitFailed(100).to_error().errno(), libc::ENODEV);
        assert_eq!(LoadError::InitFailed(1).to_error().errno(), libc::EINVAL);
        assert_eq!(
            LoadError::MissingFunction(Missing {
                name: "cuInit",
                code: 500,
                status: 1,
                version: 13030
            })
            .to_error()
            .errno(),
            libc::ENOTSUP
        );
    }

    static V1_CALLS: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

    unsafe extern "C" fn v2_status_not_found(
        _n: *const std::ffi::c_char,
        p: *mut *mut c_void,
        _v: c_int,
        _f: u64,
        status: *mut c_int,
    ) -> CUresult {
        // SAFETY: valid out pointers from `ProcAddress::get`.
        unsafe {
            *p = 0x1234 as *mut c_void;
            *status = 1; // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
        }
        0
    }

    unsafe extern "C" fn v1_found(
        name: *const std::ffi::c_char,
        p: *mut *mut c_void,
        v: c_int,
        f: u64,
    ) -> CUresult {
        V1_CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // SAFETY: NUL-terminated name and valid out pointer from `ProcAddress::get`.
        let known = unsafe { CStr::from_ptr(name) } == c"cuInit";
        let ok = known && v == MIN_DMABUF_MMAP_VERSION && f == GET_PROC_ADDRESS_DEFAULT;
        // SAFETY: as above.
        unsafe {
            *p = if ok {
                0x5678 as *mut c_void
            } else {
                std::ptr::null_mut()
            }
        };
        if ok {
            0
        } else {
            500
        }
    }

    #[test]
    fn proc_address_status_and_null_are_missing_functions() {
        let v2 = ProcAddress::V2(v2_status_not_found);
        assert_eq!(
            v2.get(c"cuInit", 13030),
            Err(Missing {
                name: "cuInit",
                code: 0,
                status: 1,
                version: 13030
            })
        );
        let v1 = ProcAddress::V1(v1_found);
        assert_eq!(v1.get(c"cuInit", 13030), Ok(0x5678 as *mut c_void));
        assert_eq!(
            v1.get(c"cuNoSuchThing", 13030),
            Err(Missing {
                name: "cuNoSuchThing",
                code: 500,
                status: 0,
                version: 13030
            })
        );
        // The version asked for is the one passed on.
        assert!(v1.get(c"cuInit", 12080).is_err());
        assert_eq!(V1_CALLS.load(std::sync::atomic::Ordering::SeqCst), 3);
        let s = LoadError::MissingFunction(Missing {
            name: "cuInit",
            code: 500,
            status: 0,
            version: 12080,
        })
        .to_string();
        assert!(
            s.contains("'cuInit'")
                && s.contains("CUDA_ERROR_NOT_FOUND")
                && s.contains("CUDA 12080"),
            "{s}"
        );
    }

    #[test]
    fn too_old_names_the_version_and_the_backend() {
        let s = LoadError::TooOld {
            version: 13000,
            need: FOR_DMABUF,
        }
        .to_string();
        assert_eq!(
            s,
            "CUDA 13.3 or newer required for dmabuf mmap backend \
             (reported version 13000 = CUDA 13.0; need 13030)"
        );
        let s = LoadError::TooOld {
            version: 11020,
            need: FOR_VULKAN,
        }
        .to_string();
        assert!(
            s.starts_with("CUDA 11.4 or newer required for vulkan backend"),
            "{s}"
        );
    }
}
