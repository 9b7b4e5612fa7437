//! CUDA write-combined host memory as a second mode-1 target: `cuMemHostAlloc` with
//! `CU_MEMHOSTALLOC_WRITECOMBINED` from the real driver (`libcuda.so.1`, loaded at run time).
//! The CPU maps such pages write-combining, much as it maps a BAR, so the same kernels can be
//! timed on them without gdrdrv. On machines without the driver or a device the target is
//! [`Unavailable`], with the reason, and the benchmark goes on without it.
//!
//! Known limit: a virtual machine may map this memory cached (reads then run at cached speed),
//! so it is not a stand-in for a BAR everywhere; the BAR numbers come from `barbench`.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::fmt;
use std::ptr::NonNull;

use gdrapi::backend::MappingType;

use crate::gdrlib::Dl;
use crate::target::Target;

/// The CUDA driver's soname.
pub const LIBCUDA: &str = "libcuda.so.1";

/// `CU_MEMHOSTALLOC_WRITECOMBINED` (cuda.h).
pub const MEMHOSTALLOC_WRITECOMBINED: c_uint = 0x04;

type CuResult = c_int;
type CuDevice = c_int;
type CuContext = *mut c_void;

/// Why the write-combined host memory could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// The driver could not be loaded: `dlopen`'s message (it names the library).
    Load(String),
    /// A function the driver should export is missing.
    Symbol(String),
    /// A driver call returned a non-zero `CUresult` (`name` from `cuGetErrorName`, if known).
    Call {
        /// The function called.
        call: &'static str,
        /// Its `CUresult`.
        result: i32,
        /// The symbolic name of `result`.
        name: Option<String>,
    },
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::Load(m) | Unavailable::Symbol(m) => f.write_str(m),
            Unavailable::Call { call, result, name } => {
                write!(f, "{call} failed: CUresult {result}")?;
                match name {
                    Some(n) => write!(f, " ({n})"),
                    None => Ok(()),
                }
            }
        }
    }
}

type ErrorNameFn = unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult;

/// The driver functions used after initialisation.
struct Fns {
    host_alloc: unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> CuResult,
    free_host: unsafe extern "C" fn(*mut c_void) -> CuResult,
    primary_release: unsafe extern "C" fn(CuDevice) -> CuResult,
    error_name: Option<ErrorNameFn>,
}

/// The driver, initialised, with device 0's primary context retained (released on drop) and
/// current on this thread.
struct Driver {
    fns: Fns,
    device: CuDevice,
    _dl: Dl,
}

/// Resolves `name` from `dl` as function type `T`.
///
/// # Safety
/// `T` must be the `extern "C"` function pointer type cuda.h declares for `name`.
unsafe fn sym<T: Copy>(dl: &Dl, name: &str) -> Result<T, Unavailable> {
    // SAFETY: forwarded to the caller.
    unsafe { dl.sym(name) }.map_err(Unavailable::Symbol)
}

/// `rc` as a result, naming `call` and, when the driver can say, the error.
fn check(
    call: &'static str,
    rc: CuResult,
    error_name: Option<ErrorNameFn>,
) -> Result<(), Unavailable> {
    if rc == 0 {
        return Ok(());
    }
    let name = error_name.and_then(|f| {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: `p` is a valid out-pointer; the driver stores a static string or nothing.
        let ok = unsafe { f(rc, &mut p) } == 0 && !p.is_null();
        // SAFETY: a non-NULL NUL-terminated string the driver owns for the process's life.
        ok.then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    });
    Err(Unavailable::Call {
        call,
        result: rc,
        name,
    })
}

impl Driver {
    /// Loads `library`, calls `cuInit(0)`, retains device 0's primary context and makes it
    /// current.
    fn open(library: &str) -> Result<Driver, Unavailable> {
        let dl = Dl::open(library).map_err(Unavailable::Load)?;
        // SAFETY (every `sym` call): each type is the one cuda.h declares for that name.
        let init: unsafe extern "C" fn(c_uint) -> CuResult = unsafe { sym(&dl, "cuInit")? };
        let get: unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult =
            unsafe { sym(&dl, "cuDeviceGet")? };
        let retain: unsafe extern "C" fn(*mut CuContext, CuDevice) -> CuResult =
            unsafe { sym(&dl, "cuDevicePrimaryCtxRetain")? };
        let set_current: unsafe extern "C" fn(CuContext) -> CuResult =
            unsafe { sym(&dl, "cuCtxSetCurrent")? };
        let fns = Fns {
            host_alloc: unsafe { sym(&dl, "cuMemHostAlloc")? },
            free_host: unsafe { sym(&dl, "cuMemFreeHost")? },
            primary_release: unsafe { sym(&dl, "cuDevicePrimaryCtxRelease_v2") }
                .or_else(|_| unsafe { sym(&dl, "cuDevicePrimaryCtxRelease") })?,
            error_name: unsafe { sym(&dl, "cuGetErrorName") }.ok(),
        };
        let en = fns.error_name;
        // SAFETY: cuInit takes flags 0.
        check("cuInit", unsafe { init(0) }, en)?;
        let mut device: CuDevice = 0;
        // SAFETY: `device` is writable; ordinal 0 is checked by the driver.
        check("cuDeviceGet", unsafe { get(&mut device, 0) }, en)?;
        let mut ctx: CuContext = std::ptr::null_mut();
        // SAFETY: `device` came from cuDeviceGet; `ctx` is writable.
        check(
            "cuDevicePrimaryCtxRetain",
            unsafe { retain(&mut ctx, device) },
            en,
        )?;
        // From here on, dropping `driver` releases the retain.
        let driver = Driver {
            fns,
            device,
            _dl: dl,
        };
        // SAFETY: `ctx` is the context retained above.
        check("cuCtxSetCurrent", unsafe { set_current(ctx) }, en)?;
        Ok(driver)
    }

    fn check(&self, call: &'static str, rc: CuResult) -> Result<(), Unavailable> {
        check(call, rc, self.fns.error_name)
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // SAFETY: releases the primary-context retain of `open`, once; every allocation made
        // through this driver has been freed (`HostWc` frees its buffer first).
        unsafe { (self.fns.primary_release)(self.device) };
    }
}

/// Write-combined, page-locked host memory from `cuMemHostAlloc`, freed on drop.
pub struct HostWc {
    ptr: NonNull<u8>,
    len: usize,
    kind: MappingType,
    driver: Driver,
}

impl HostWc {
    /// Allocates `len` bytes (rounded up to pages) through the system's `libcuda.so.1`.
    pub fn open(len: usize) -> Result<HostWc, Unavailable> {
        HostWc::open_from(LIBCUDA, len)
    }

    /// As [`HostWc::open`], loading the driver from `library` (a soname or a path).
    pub fn open_from(library: &str, len: usize) -> Result<HostWc, Unavailable> {
        let driver = Driver::open(library)?;
        let len = len.div_ceil(4096).max(1) * 4096;
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: `p` is a valid out-pointer; the flag value is cuda.h's.
        let rc = unsafe { (driver.fns.host_alloc)(&mut p, len, MEMHOSTALLOC_WRITECOMBINED) };
        driver.check("cuMemHostAlloc", rc)?;
        let Some(ptr) = NonNull::new(p.cast::<u8>()) else {
            return Err(Unavailable::Call {
                call: "cuMemHostAlloc",
                result: 0,
                name: Some("success, but a NULL pointer".into()),
            });
        };
        // SAFETY: `len` writable bytes were just allocated; filling them faults nothing in
        // later and gives the reads defined contents.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0x5c, len) };
        Ok(HostWc {
            ptr,
            len,
            kind: MappingType::WriteCombining,
            driver,
        })
    }

    /// The same memory, treated as a mapping of type `kind`.
    pub fn with_kind(mut self, kind: MappingType) -> HostWc {
        self.kind = kind;
        self
    }
}

impl Drop for HostWc {
    fn drop(&mut self) {
        // SAFETY: the allocation of `open_from`, freed once, while the context that made it
        // is still retained (`driver` drops after this).
        unsafe { (self.driver.fns.free_host)(self.ptr.as_ptr().cast()) };
    }
}

impl Target for HostWc {
    fn describe(&self) -> String {
        format!(
            "CUDA write-combined host memory (cuMemHostAlloc), {} bytes",
            crate::human(self.len)
        )
    }
    fn tag(&self) -> &'static str {
        " [cuMemHostAlloc WC]"
    }
    fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    fn len(&self) -> usize {
        self.len
    }
    fn kind(&self) -> MappingType {
        self.kind
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_driver_is_unavailable_and_named() {
        let name = "libcuda-missing-for-this-test.so.1";
        let e = HostWc::open_from(name, 4096)
            .err()
            .expect("no such library");
        assert!(matches!(e, Unavailable::Load(_)), "{e:?}");
        assert!(e.to_string().contains(name), "{e}");
    }

    #[test]
    fn a_library_without_the_driver_api_is_unavailable_not_a_crash() {
        // The C library loads but exports no CUDA function: the first lookup names it.
        let e = HostWc::open_from("libc.so.6", 4096)
            .err()
            .expect("libc is no CUDA driver");
        assert!(matches!(e, Unavailable::Symbol(_)), "{e:?}");
        assert!(e.to_string().contains("cuInit"), "{e}");
    }

    #[test]
    fn failed_calls_say_which_call_and_which_result() {
        let e = check("cuInit", 100, None).unwrap_err();
        assert_eq!(e.to_string(), "cuInit failed: CUresult 100");
        let named = Unavailable::Call {
            call: "cuMemHostAlloc",
            result: 2,
            name: Some("CUDA_ERROR_OUT_OF_MEMORY".into()),
        };
        assert_eq!(
            named.to_string(),
            "cuMemHostAlloc failed: CUresult 2 (CUDA_ERROR_OUT_OF_MEMORY)"
        );
        assert!(check("cuInit", 0, None).is_ok());
    }
}
