//! The part of the CUDA driver API the tools use, loaded at run time from `libcuda.so.1`
//! (no link dependency, so the tools start and explain themselves on machines without CUDA).

use crate::dl::{self, DlError, Library};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::fmt;

/// `CUresult`.
pub type CuResult = c_int;
/// `CUdevice`.
pub type CuDevice = c_int;
/// `CUcontext`.
pub type CuContext = *mut c_void;
/// `CUdeviceptr`.
pub type CuDevicePtr = u64;

/// The soname the tools load.
pub const LIBCUDA: &str = "libcuda.so.1";

/// `CU_DEVICE_ATTRIBUTE_PCI_BUS_ID`.
pub const ATTR_PCI_BUS_ID: c_int = 33;
/// `CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID`.
pub const ATTR_PCI_DEVICE_ID: c_int = 34;
/// `CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID`.
pub const ATTR_PCI_DOMAIN_ID: c_int = 50;
/// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED`.
pub const ATTR_GPU_DIRECT_RDMA_WITH_VMM: c_int = 110;
/// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED`.
pub const ATTR_GPU_DIRECT_RDMA_SUPPORTED: c_int = 116;
/// `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`.
pub const ATTR_DMA_BUF_SUPPORTED: c_int = 124;
/// `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS`.
pub const POINTER_ATTR_SYNC_MEMOPS: c_int = 6;
/// First CUDA driver version (13.3) whose DMA-BUF export can be mmapped by libgdrapi.
pub const DMABUF_MMAP_MIN_VERSION: c_int = 13030;
/// First CUDA driver version (11.3) with the GPUDirect RDMA device attribute.
pub const RDMA_ATTR_MIN_VERSION: c_int = 11030;

/// A failed CUDA call: the function, its `CUresult` and the error's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaError {
    /// The driver function that failed.
    pub func: &'static str,
    /// Its `CUresult`.
    pub code: CuResult,
    /// `cuGetErrorName`'s answer, or the number.
    pub name: String,
}

impl fmt::Display for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} failed: CUDA error: {} ({})",
            self.func, self.name, self.code
        )
    }
}

impl std::error::Error for CudaError {}

/// `CUmemLocation`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct MemLocation {
    /// `CUmemLocationType` (1 = device).
    pub kind: c_int,
    /// Device ordinal.
    pub id: c_int,
}

/// `CUmemAllocationProp` (32 bytes on LP64).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct MemAllocationProp {
    /// `CUmemAllocationType` (1 = pinned).
    pub kind: c_int,
    /// `CUmemAllocationHandleType`.
    pub requested_handle_types: c_int,
    /// Where the memory lives.
    pub location: MemLocation,
    /// Windows only.
    pub win32_handle_meta_data: *mut c_void,
    /// `allocFlags.compressionType`.
    pub compression_type: u8,
    /// `allocFlags.gpuDirectRDMACapable`.
    pub gpu_direct_rdma_capable: u8,
    /// `allocFlags.usage`.
    pub usage: u16,
    /// `allocFlags.reserved`.
    pub reserved: [u8; 4],
}

/// `CUmemAccessDesc`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct MemAccessDesc {
    /// Which device gets access.
    pub location: MemLocation,
    /// `CUmemAccess_flags` (3 = read/write).
    pub flags: c_int,
}

type FnInt = unsafe extern "C" fn(*mut c_int) -> CuResult;

/// The loaded driver with the functions every tool needs; optional ones are resolved on use.
pub struct Cuda {
    lib: Library,
    init: unsafe extern "C" fn(c_uint) -> CuResult,
    driver_get_version: FnInt,
    device_get_count: FnInt,
    device_get: unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult,
    device_get_name: unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> CuResult,
    device_get_attribute: unsafe extern "C" fn(*mut c_int, c_int, CuDevice) -> CuResult,
    get_error_name: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
}

impl fmt::Debug for Cuda {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cuda")
            .field("lib", &self.lib.name())
            .finish()
    }
}

impl Cuda {
    /// Loads `libcuda.so.1` and resolves the functions used by every tool.
    pub fn load() -> Result<Cuda, DlError> {
        let lib = Library::open(LIBCUDA)?;
        // SAFETY: each type below is the C signature of the named CUDA driver function.
        unsafe {
            Ok(Cuda {
                init: dl::function(&lib, "cuInit")?,
                driver_get_version: dl::function(&lib, "cuDriverGetVersion")?,
                device_get_count: dl::function(&lib, "cuDeviceGetCount")?,
                device_get: dl::function(&lib, "cuDeviceGet")?,
                device_get_name: dl::function(&lib, "cuDeviceGetName")?,
                device_get_attribute: dl::function(&lib, "cuDeviceGetAttribute")?,
                get_error_name: dl::function(&lib, "cuGetErrorName")?,
                lib,
            })
        }
    }

    /// The file the driver was loaded from.
    pub fn path(&self) -> Option<String> {
        self.lib.path_of("cuInit")
    }

    /// Turns a `CUresult` into `Ok` or a [`CudaError`] naming `func`.
    pub fn check(&self, func: &'static str, code: CuResult) -> Result<(), CudaError> {
        if code == 0 {
            return Ok(());
        }
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: cuGetErrorName writes a pointer to a static string or leaves it NULL.
        let rc = unsafe { (self.get_error_name)(code, &mut p) };
        let name = if rc == 0 && !p.is_null() {
            // SAFETY: the driver returns a static NUL-terminated string.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        } else {
            format!("CUresult {code}")
        };
        Err(CudaError { func, code, name })
    }

    fn optional<F: Copy>(&self, symbol: &'static str) -> Result<F, CudaError> {
        // SAFETY: callers pass the C signature of `symbol` as F.
        unsafe { dl::function::<F>(&self.lib, symbol) }.map_err(|_| CudaError {
            func: symbol,
            code: -1,
            name: format!("{symbol} is not exported by {LIBCUDA}"),
        })
    }

    /// `cuInit(0)`.
    pub fn init(&self) -> Result<(), CudaError> {
        // SAFETY: plain value argument.
        self.check("cuInit", unsafe { (self.init)(0) })
    }

    /// `cuDriverGetVersion`, e.g. 13030 for CUDA 13.3.
    pub fn driver_version(&self) -> Result<c_int, CudaError> {
        let mut v = 0;
        // SAFETY: v is a valid out pointer.
        self.check("cuDriverGetVersion", unsafe {
            (self.driver_get_version)(&mut v)
        })?;
        Ok(v)
    }

    /// `cuDeviceGetCount`.
    pub fn device_count(&self) -> Result<c_int, CudaError> {
        let mut v = 0;
        // SAFETY: v is a valid out pointer.
        self.check("cuDeviceGetCount", unsafe {
            (self.device_get_count)(&mut v)
        })?;
        Ok(v)
    }

    /// `cuDeviceGet` for an ordinal.
    pub fn device(&self, ordinal: c_int) -> Result<CuDevice, CudaError> {
        let mut d = 0;
        // SAFETY: d is a valid out pointer.
        self.check("cuDeviceGet", unsafe { (self.device_get)(&mut d, ordinal) })?;
        Ok(d)
    }

    /// `cuDeviceGetName`.
    pub fn device_name(&self, dev: CuDevice) -> Result<String, CudaError> {
        let mut buf = [0 as c_char; 256];
        // SAFETY: buf holds 256 bytes and we pass that length.
        let rc = unsafe { (self.device_get_name)(buf.as_mut_ptr(), buf.len() as c_int, dev) };
        self.check("cuDeviceGetName", rc)?;
        buf[255] = 0;
        // SAFETY: buf is NUL-terminated (forced above).
        Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned())
    }

    /// `cuDeviceGetAttribute`.
    pub fn attribute(&self, attr: c_int, dev: CuDevice) -> Result<c_int, CudaError> {
        let mut v = 0;
        // SAFETY: v is a valid out pointer.
        let rc = unsafe { (self.device_get_attribute)(&mut v, attr, dev) };
        self.check("cuDeviceGetAttribute", rc)?;
        Ok(v)
    }

    /// Retains the primary context of `dev` and makes it current; released on drop.
    pub fn primary_context(&self, dev: CuDevice) -> Result<PrimaryContext<'_>, CudaError> {
        let retain: unsafe extern "C" fn(*mut CuContext, CuDevice) -> CuResult =
            self.optional("cuDevicePrimaryCtxRetain")?;
        let set: unsafe extern "C" fn(CuContext) -> CuResult = self.optional("cuCtxSetCurrent")?;
        let mut ctx: CuContext = std::ptr::null_mut();
        // SAFETY: ctx is a valid out pointer.
        self.check("cuDevicePrimaryCtxRetain", unsafe { retain(&mut ctx, dev) })?;
        let guard = PrimaryContext { cuda: self, dev };
        // SAFETY: ctx was just handed out by the driver.
        self.check("cuCtxSetCurrent", unsafe { set(ctx) })?;
        Ok(guard)
    }

    /// `cuMemAlloc_v2`.
    pub fn mem_alloc(&self, size: usize) -> Result<CuDevicePtr, CudaError> {
        let f: unsafe extern "C" fn(*mut CuDevicePtr, usize) -> CuResult =
            self.optional("cuMemAlloc_v2")?;
        let mut p = 0;
        // SAFETY: p is a valid out pointer.
        self.check("cuMemAlloc", unsafe { f(&mut p, size) })?;
        Ok(p)
    }

    /// `cuMemFree_v2`.
    pub fn mem_free(&self, p: CuDevicePtr) -> Result<(), CudaError> {
        let f: unsafe extern "C" fn(CuDevicePtr) -> CuResult = self.optional("cuMemFree_v2")?;
        // SAFETY: p came from mem_alloc (callers keep that contract).
        self.check("cuMemFree", unsafe { f(p) })
    }

    /// Sets `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` on an allocation, as upstream's tools do.
    pub fn set_sync_memops(&self, p: CuDevicePtr) -> Result<(), CudaError> {
        let f: unsafe extern "C" fn(*const c_void, c_int, CuDevicePtr) -> CuResult =
            self.optional("cuPointerSetAttribute")?;
        let flag: c_uint = 1;
        // SAFETY: flag outlives the call; the driver reads one unsigned int.
        let rc = unsafe {
            f(
                &flag as *const c_uint as *const c_void,
                POINTER_ATTR_SYNC_MEMOPS,
                p,
            )
        };
        self.check("cuPointerSetAttribute", rc)
    }

    /// `cuMemcpy` (unified addressing: either side may be host memory).
    ///
    /// # Safety
    /// `dst` and `src` must be valid for `n` bytes in the CUDA address space.
    pub unsafe fn memcpy(&self, dst: u64, src: u64, n: usize) -> Result<(), CudaError> {
        let f: unsafe extern "C" fn(u64, u64, usize) -> CuResult = self.optional("cuMemcpy")?;
        self.check("cuMemcpy", f(dst, src, n))
    }

    /// `cuMemsetD8_v2`.
    ///
    /// # Safety
    /// `p` must be device memory valid for `n` bytes.
    pub unsafe fn memset_d8(&self, p: CuDevicePtr, value: u8, n: usize) -> Result<(), CudaError> {
        let f: unsafe extern "C" fn(CuDevicePtr, u8, usize) -> CuResult =
            self.optional("cuMemsetD8_v2")?;
        self.check("cuMemsetD8", f(p, value, n))
    }

    /// Resolves an optional driver function for callers in this crate (VMM allocations).
    pub(crate) fn function<F: Copy>(&self, symbol: &'static str) -> Result<F, CudaError> {
        self.optional(symbol)
    }
}

/// A retained primary context made current; released (`cuDevicePrimaryCtxRelease_v2`) on drop.
pub struct PrimaryContext<'a> {
    cuda: &'a Cuda,
    dev: CuDevice,
}

impl Drop for PrimaryContext<'_> {
    fn drop(&mut self) {
        if let Ok(f) = self
            .cuda
            .optional::<unsafe extern "C" fn(CuDevice) -> CuResult>("cuDevicePrimaryCtxRelease_v2")
        {
            if let Ok(set) = self
                .cuda
                .optional::<unsafe extern "C" fn(CuContext) -> CuResult>("cuCtxSetCurrent")
            {
                // SAFETY: NULL is a valid argument (unbinds the context).
                unsafe { set(std::ptr::null_mut()) };
            }
            // SAFETY: the context of dev was retained by primary_context.
            unsafe { f(self.dev) };
        }
    }
}

/// Formats a CUDA driver version number (13030 -> "13.3").
pub fn version_string(v: c_int) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_numbers_format_like_nvidia_smi() {
        assert_eq!(version_string(13030), "13.3");
        assert_eq!(version_string(12080), "12.8");
        assert_eq!(version_string(11000), "11.0");
    }

    #[test]
    fn allocation_prop_has_the_c_layout() {
        assert_eq!(std::mem::size_of::<MemAllocationProp>(), 32);
        assert_eq!(std::mem::offset_of!(MemAllocationProp, location), 8);
        assert_eq!(
            std::mem::offset_of!(MemAllocationProp, win32_handle_meta_data),
            16
        );
        assert_eq!(
            std::mem::offset_of!(MemAllocationProp, gpu_direct_rdma_capable),
            25
        );
        assert_eq!(std::mem::size_of::<MemAccessDesc>(), 12);
    }
}
