//! Finding libcuda at run time: `dlopen("libcuda.so.1")`, then `"libcuda.so"`; the version gate;
//! the entry points through `cuGetProcAddress_v2` (or the legacy `cuGetProcAddress`); `cuInit`.
//!
//! The library is never linked against libcuda and opens it only when the DMA-BUF backend is
//! tried. Once a load succeeded, the table is kept for the life of the process and shared by
//! every session: after `cuInit` the driver owns threads and process-wide state, so unloading it
//! again (as upstream does at its last `gdr_close`) is not safe. A load that fails is undone
//! (`dlclose`) and tried afresh at the next `gdr_open`.

use super::driver::{Api, Driver};
use super::result::{error_of, fallback_name};
use super::types::*;
use crate::error::Error;
use parking_lot::Mutex;
use std::ffi::{c_int, c_void, CStr};
use std::fmt;

/// The names tried, in order.
const LIBRARY_NAMES: [&CStr; 2] = [c"libcuda.so.1", c"libcuda.so"];

/// Why libcuda could not be used. Each variant's text is the log line that explains it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// Neither name could be opened; `dlerror()` text of the last attempt.
    NoLibrary(String),
    /// libcuda lacks `cuDriverGetVersion`.
    NoVersionQuery,
    /// `cuDriverGetVersion` failed with this `CUresult`.
    VersionQueryFailed(CuResult),
    /// The driver reports this version, older than [`MIN_DMABUF_MMAP_VERSION`].
    TooOld(i32),
    /// libcuda exports neither `cuGetProcAddress_v2` nor `cuGetProcAddress`.
    NoGetProcAddress,
    /// `cuGetProcAddress` did not give this entry point: its `CUresult` and query status.
    MissingFunction {
        name: &'static str,
        code: CuResult,
        status: c_int,
    },
    /// `cuInit(0)` failed with this `CUresult`.
    InitFailed(CuResult),
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
            LoadError::TooOld(_) => {
                Error::NotSupported("CUDA 13.3 or newer required for dmabuf mmap")
            }
            LoadError::NoGetProcAddress => Error::NotSupported("libcuda has no cuGetProcAddress"),
            LoadError::MissingFunction { .. } => {
                Error::NotSupported("a CUDA entry point is missing")
            }
            LoadError::InitFailed(r) => error_of("cuInit", *r),
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::NoLibrary(why) => {
                write!(f, "cannot load the CUDA driver (libcuda.so.1, libcuda.so): {why}")
            }
            LoadError::NoVersionQuery => f.write_str("libcuda has no cuDriverGetVersion"),
            LoadError::VersionQueryFailed(r) => {
                write!(f, "cuDriverGetVersion failed ({r}: {})", fallback_name(*r))
            }
            LoadError::TooOld(v) => write!(
                f,
                "CUDA 13.3 or newer required for dmabuf mmap backend (reported version {v} = CUDA {}.{}; need {})",
                v / 1000,
                (v % 1000) / 10,
                MIN_DMABUF_MMAP_VERSION
            ),
            LoadError::NoGetProcAddress => {
                f.write_str("libcuda exports neither cuGetProcAddress_v2 nor cuGetProcAddress")
            }
            LoadError::MissingFunction { name, code, status } => write!(
                f,
                "cuGetProcAddress cannot resolve '{name}' for CUDA {MIN_DMABUF_MMAP_VERSION} (result {code}: {}, status {status})",
                fallback_name(*code)
            ),
            LoadError::InitFailed(r) => write!(f, "cuInit(0) failed ({r}: {})", fallback_name(*r)),
        }
    }
}

/// The process-wide table, set by the first successful [`load`].
static LOADED: Mutex<Option<&'static Driver>> = Mutex::new(None);

/// The process-wide libcuda table, loading it on first use. Thread-safe: concurrent callers
/// wait for one load. A failure is not cached.
pub fn load() -> Result<&'static Driver, LoadError> {
    let mut slot = LOADED.lock();
    if let Some(d) = *slot {
        return Ok(d);
    }
    let driver: &'static Driver = Box::leak(Box::new(load_fresh()?));
    *slot = Some(driver);
    Ok(driver)
}

/// A `dlopen` handle that is closed again unless [`Library::keep`] is called.
struct Library(*mut c_void);

impl Library {
    fn open() -> Result<Library, LoadError> {
        let mut why = String::new();
        for name in LIBRARY_NAMES {
            // SAFETY: `name` is NUL-terminated; dlopen has no other precondition.
            let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
            if !h.is_null() {
                crate::gdr_dbg!("loaded {}", name.to_string_lossy());
                return Ok(Library(h));
            }
            why = dlerror_text();
        }
        Err(LoadError::NoLibrary(why))
    }

    /// The address of `name`, or null.
    fn symbol(&self, name: &CStr) -> *mut c_void {
        // SAFETY: `self.0` is a live handle from dlopen and `name` is NUL-terminated.
        unsafe { libc::dlsym(self.0, name.as_ptr()) }
    }

    /// Keeps the library loaded for the rest of the process; returns the handle.
    fn keep(self) -> usize {
        let h = self.0 as usize;
        std::mem::forget(self);
        h
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        // SAFETY: `self.0` came from dlopen and nothing resolved from it outlives this value
        // (a failed load hands no pointer out).
        unsafe { libc::dlclose(self.0) };
    }
}

fn dlerror_text() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string valid until the next dl* call
    // on this thread; it is copied at once.
    let p = unsafe { libc::dlerror() };
    if p.is_null() {
        return "unknown dlopen error".to_owned();
    }
    // SAFETY: non-null, NUL-terminated (see above).
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// `cuGetProcAddress` in whichever form libcuda exports.
#[derive(Clone, Copy)]
enum ProcAddress {
    V2(FnGetProcAddressV2),
    V1(FnGetProcAddressV1),
}

impl ProcAddress {
    fn find(lib: &Library) -> Option<ProcAddress> {
        let p = lib.symbol(c"cuGetProcAddress_v2");
        if !p.is_null() {
            // SAFETY: libcuda exports cuGetProcAddress_v2 with this signature (cuda.h, CUDA >= 12.0).
            return Some(ProcAddress::V2(unsafe {
                std::mem::transmute::<*mut c_void, FnGetProcAddressV2>(p)
            }));
        }
        let p = lib.symbol(c"cuGetProcAddress");
        if !p.is_null() {
            // SAFETY: the unversioned export keeps the 4-argument CUDA 11.3 signature.
            return Some(ProcAddress::V1(unsafe {
                std::mem::transmute::<*mut c_void, FnGetProcAddressV1>(p)
            }));
        }
        None
    }

    /// Resolves `name` for [`MIN_DMABUF_MMAP_VERSION`].
    fn get(self, name: &'static CStr) -> Result<*mut c_void, LoadError> {
        let mut fp: *mut c_void = std::ptr::null_mut();
        let mut status: c_int = 0;
        let code = match self {
            // SAFETY: valid NUL-terminated name and out pointers that live across the call.
            ProcAddress::V2(f) => unsafe {
                f(
                    name.as_ptr(),
                    &mut fp,
                    MIN_DMABUF_MMAP_VERSION,
                    GET_PROC_ADDRESS_DEFAULT,
                    &mut status,
                )
            },
            // SAFETY: as above.
            ProcAddress::V1(f) => unsafe {
                f(
                    name.as_ptr(),
                    &mut fp,
                    MIN_DMABUF_MMAP_VERSION,
                    GET_PROC_ADDRESS_DEFAULT,
                )
            },
        };
        if code != CUDA_SUCCESS || status != 0 || fp.is_null() {
            let name = name.to_str().unwrap_or("?");
            return Err(LoadError::MissingFunction { name, code, status });
        }
        Ok(fp)
    }
}

/// Resolves one entry point into a typed function pointer.
macro_rules! resolve {
    ($pa:expr, $name:literal, $ty:ty) => {{
        let p = $pa.get($name)?;
        // SAFETY: cuGetProcAddress returned the driver's entry point of that name for the
        // requested CUDA version, whose signature `cuda.h` declares as `$ty`.
        unsafe { std::mem::transmute::<*mut c_void, $ty>(p) }
    }};
}

fn load_fresh() -> Result<Driver, LoadError> {
    let lib = Library::open()?;

    let p = lib.symbol(c"cuDriverGetVersion");
    if p.is_null() {
        return Err(LoadError::NoVersionQuery);
    }
    // SAFETY: cuDriverGetVersion has this signature in every CUDA release.
    let get_version = unsafe { std::mem::transmute::<*mut c_void, FnDriverGetVersion>(p) };
    let mut version: c_int = 0;
    // SAFETY: valid out pointer.
    let r = unsafe { get_version(&mut version) };
    if r != CUDA_SUCCESS {
        return Err(LoadError::VersionQueryFailed(r));
    }
    if version < MIN_DMABUF_MMAP_VERSION {
        return Err(LoadError::TooOld(version));
    }

    let pa = ProcAddress::find(&lib).ok_or(LoadError::NoGetProcAddress)?;
    let api = Api {
        init: resolve!(pa, c"cuInit", FnInit),
        device_get: resolve!(pa, c"cuDeviceGet", FnDeviceGet),
        device_get_count: resolve!(pa, c"cuDeviceGetCount", FnDeviceGetCount),
        device_get_attribute: resolve!(pa, c"cuDeviceGetAttribute", FnDeviceGetAttribute),
        mem_get_handle_for_address_range: resolve!(
            pa,
            c"cuMemGetHandleForAddressRange",
            FnMemGetHandleForAddressRange
        ),
        ctx_get_current: resolve!(pa, c"cuCtxGetCurrent", FnCtxGetCurrent),
        ctx_set_current: resolve!(pa, c"cuCtxSetCurrent", FnCtxSetCurrent),
        primary_ctx_retain: resolve!(pa, c"cuDevicePrimaryCtxRetain", FnDevicePrimaryCtxRetain),
        primary_ctx_release: resolve!(pa, c"cuDevicePrimaryCtxRelease", FnDevicePrimaryCtxRelease),
        pointer_get_attribute: resolve!(pa, c"cuPointerGetAttribute", FnPointerGetAttribute),
        // Only used to word log lines: optional.
        get_error_name: pa.get(c"cuGetErrorName").ok().map(|p| {
            // SAFETY: as in `resolve!`.
            unsafe { std::mem::transmute::<*mut c_void, FnGetErrorText>(p) }
        }),
        get_error_string: pa.get(c"cuGetErrorString").ok().map(|p| {
            // SAFETY: as in `resolve!`.
            unsafe { std::mem::transmute::<*mut c_void, FnGetErrorText>(p) }
        }),
    };

    // SAFETY: cuInit resolved above; 0 is the only valid flag value.
    let r = unsafe { (api.init)(0) };
    if r != CUDA_SUCCESS {
        return Err(LoadError::InitFailed(r));
    }
    crate::gdr_dbg!("CUDA driver version {version}");
    Ok(Driver::new(api, version, lib.keep()))
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
        assert_eq!(LoadError::TooOld(13000).to_error().errno(), libc::ENOTSUP);
        assert_eq!(LoadError::InitFailed(100).to_error().errno(), libc::ENODEV);
        assert_eq!(LoadError::InitFailed(1).to_error().errno(), libc::EINVAL);
        assert_eq!(
            LoadError::MissingFunction {
                name: "cuInit",
                code: 500,
                status: 1
            }
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
    ) -> CuResult {
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
    ) -> CuResult {
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
            v2.get(c"cuInit"),
            Err(LoadError::MissingFunction {
                name: "cuInit",
                code: 0,
                status: 1
            })
        );
        let v1 = ProcAddress::V1(v1_found);
        assert_eq!(v1.get(c"cuInit"), Ok(0x5678 as *mut c_void));
        assert_eq!(
            v1.get(c"cuNoSuchThing"),
            Err(LoadError::MissingFunction {
                name: "cuNoSuchThing",
                code: 500,
                status: 0
            })
        );
        assert_eq!(V1_CALLS.load(std::sync::atomic::Ordering::SeqCst), 2);
        let s = LoadError::MissingFunction {
            name: "cuInit",
            code: 500,
            status: 0,
        }
        .to_string();
        assert!(
            s.contains("'cuInit'") && s.contains("CUDA_ERROR_NOT_FOUND"),
            "{s}"
        );
    }

    #[test]
    fn too_old_names_the_version() {
        let s = LoadError::TooOld(13000).to_string();
        assert!(s.contains("reported version 13000"), "{s}");
        assert!(s.contains("CUDA 13.0"), "{s}");
        assert!(s.contains("13.3"), "{s}");
    }
}
