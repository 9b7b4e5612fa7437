//! The part of the CUDA driver API the tools use, loaded at run time from `libcuda.so.1`
//! (no link dependency, so the tools start and explain themselves on machines without CUDA).

use gdrapi_support::cuda::{fns, Driver};
use gdrapi_support::dl::{DlError, Entry};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::fmt;

pub use gdrapi_support::cuda::{
    version_string, CUdevice, CUdeviceptr, CUresult, MemAccessDesc, MemAllocationProp, MemLocation,
    LIBCUDA,
};

/// First CUDA driver version (13.3) whose DMA-BUF export can be mmapped by libgdrapi.
pub const DMABUF_MMAP_MIN_VERSION: c_int = gdrapi_abi::cuda::VERSION_WITH_DMA_BUF_MMAP;
/// First CUDA driver version (11.4) that the Vulkan import backend works with.
pub const VULKAN_IMPORT_MIN_VERSION: c_int = gdrapi_abi::cuda::VERSION_WITH_DEVICE_GET_UUID_V2;
/// First CUDA driver version (11.3) with the GPUDirect RDMA device attribute.
pub const RDMA_ATTR_MIN_VERSION: c_int = gdrapi_abi::cuda::VERSION_WITH_GPU_DIRECT_RDMA_ATTRIBUTE;

/// A failed CUDA call: the function, its `CUresult` and the error's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaError {
    /// The driver function that failed.
    pub func: &'static str,
    /// Its `CUresult`.
    pub code: CUresult,
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

/// The loaded driver; functions beyond [`Driver`]'s are resolved on use.
pub struct Cuda {
    driver: Driver,
}

impl fmt::Debug for Cuda {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cuda")
            .field("lib", &self.driver.library().name())
            .finish()
    }
}

impl Cuda {
    /// Loads `libcuda.so.1` (`RTLD_GLOBAL`) and resolves the functions used by every tool.
    pub fn load() -> Result<Cuda, DlError> {
        Ok(Cuda {
            driver: Driver::load(LIBCUDA, true)?,
        })
    }

    /// The file the driver was loaded from.
    pub fn path(&self) -> Option<String> {
        self.driver.library().path_of("cuInit")
    }

    /// Turns a `CUresult` into `Ok` or a [`CudaError`] naming `func`.
    pub fn check(&self, func: &'static str, code: CUresult) -> Result<(), CudaError> {
        if code == 0 {
            return Ok(());
        }
        let name = self
            .driver
            .error_name(code)
            .unwrap_or_else(|| format!("CUresult {code}"));
        Err(CudaError { func, code, name })
    }

    /// Driver function `E`, or an error saying the driver does not export it.
    pub fn get<E: Entry>(&self) -> Result<E::Fn, CudaError> {
        self.driver.get::<E>().map_err(|_| CudaError {
            func: E::NAME,
            code: -1,
            name: format!("{} is not exported by {LIBCUDA}", E::NAME),
        })
    }

    /// `cuInit(0)`.
    pub fn init(&self) -> Result<(), CudaError> {
        // SAFETY: plain value argument.
        self.check("cuInit", unsafe { (self.driver.init)(0) })
    }

    /// `cuDriverGetVersion`, e.g. 13030 for CUDA 13.3.
    pub fn driver_version(&self) -> Result<c_int, CudaError> {
        let mut v = 0;
        // SAFETY: v is a valid out pointer.
        self.check("cuDriverGetVersion", unsafe {
            (self.driver.driver_get_version)(&mut v)
        })?;
        Ok(v)
    }

    /// `cuDeviceGetCount`.
    pub fn device_count(&self) -> Result<c_int, CudaError> {
        let mut v = 0;
        // SAFETY: v is a valid out pointer.
        self.check("cuDeviceGetCount", unsafe {
            (self.driver.device_get_count)(&mut v)
        })?;
        Ok(v)
    }

    /// `cuDeviceGet` for an ordinal.
    pub fn device(&self, ordinal: c_int) -> Result<CUdevice, CudaError> {
        let mut d = 0;
        // SAFETY: d is a valid out pointer.
        self.check("cuDeviceGet", unsafe {
            (self.driver.device_get)(&mut d, ordinal)
        })?;
        Ok(d)
    }

    /// `cuDeviceGetName`.
    pub fn device_name(&self, dev: CUdevice) -> Result<String, CudaError> {
        let mut buf = [0 as c_char; 256];
        // SAFETY: buf holds 256 bytes and we pass that length.
        let rc =
            unsafe { (self.driver.device_get_name)(buf.as_mut_ptr(), buf.len() as c_int, dev) };
        self.check("cuDeviceGetName", rc)?;
        buf[255] = 0;
        // SAFETY: buf is NUL-terminated (forced above).
        Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned())
    }

    /// `cuDeviceGetAttribute`.
    pub fn attribute(&self, attr: c_int, dev: CUdevice) -> Result<c_int, CudaError> {
        let mut v = 0;
        // SAFETY: v is a valid out pointer.
        let rc = unsafe { (self.driver.device_get_attribute)(&mut v, attr, dev) };
        self.check("cuDeviceGetAttribute", rc)?;
        Ok(v)
    }

    /// `cuDeviceGetUuid_v2` (CUDA 11.4), else `cuDeviceGetUuid`: the UUID Vulkan reports as
    /// the same GPU's `deviceUUID`.
    pub fn uuid(&self, dev: CUdevice) -> Result<[u8; 16], CudaError> {
        let mut u = [0u8; 16];
        if let Ok(f) = self.get::<fns::cuDeviceGetUuid_v2>() {
            // SAFETY: u is a valid out pointer for 16 bytes.
            self.check("cuDeviceGetUuid_v2", unsafe { f(&mut u, dev) })?;
            return Ok(u);
        }
        let f = self.get::<fns::cuDeviceGetUuid>()?;
        // SAFETY: as above.
        self.check("cuDeviceGetUuid", unsafe { f(&mut u, dev) })?;
        Ok(u)
    }

    /// Retains the primary context of `dev` and makes it current; released on drop.
    pub fn primary_context(&self, dev: CUdevice) -> Result<PrimaryContext<'_>, CudaError> {
        let retain = self.get::<fns::cuDevicePrimaryCtxRetain>()?;
        let set = self.get::<fns::cuCtxSetCurrent>()?;
        let mut ctx = std::ptr::null_mut();
        // SAFETY: ctx is a valid out pointer.
        self.check("cuDevicePrimaryCtxRetain", unsafe { retain(&mut ctx, dev) })?;
        let guard = PrimaryContext { cuda: self, dev };
        // SAFETY: ctx was just handed out by the driver.
        self.check("cuCtxSetCurrent", unsafe { set(ctx) })?;
        Ok(guard)
    }

    /// `cuMemAlloc_v2`.
    pub fn mem_alloc(&self, size: usize) -> Result<CUdeviceptr, CudaError> {
        let f = self.get::<fns::cuMemAlloc_v2>()?;
        let mut p = 0;
        // SAFETY: p is a valid out pointer.
        self.check("cuMemAlloc", unsafe { f(&mut p, size) })?;
        Ok(p)
    }

    /// `cuMemFree_v2`.
    pub fn mem_free(&self, p: CUdeviceptr) -> Result<(), CudaError> {
        let f = self.get::<fns::cuMemFree_v2>()?;
        // SAFETY: p came from mem_alloc (callers keep that contract).
        self.check("cuMemFree", unsafe { f(p) })
    }

    /// Sets `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` on an allocation, as upstream's tools do.
    pub fn set_sync_memops(&self, p: CUdeviceptr) -> Result<(), CudaError> {
        let f = self.get::<fns::cuPointerSetAttribute>()?;
        let flag: c_uint = 1;
        // SAFETY: flag outlives the call; the driver reads one unsigned int.
        let rc = unsafe {
            f(
                &flag as *const c_uint as *const c_void,
                gdrapi_support::cuda::POINTER_ATTRIBUTE_SYNC_MEMOPS,
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
        let f = self.get::<fns::cuMemcpy>()?;
        // SAFETY: forwarded contract.
        self.check("cuMemcpy", unsafe { f(dst, src, n) })
    }

    /// `cuMemsetD8_v2`.
    ///
    /// # Safety
    /// `p` must be device memory valid for `n` bytes.
    pub unsafe fn memset_d8(&self, p: CUdeviceptr, value: u8, n: usize) -> Result<(), CudaError> {
        let f = self.get::<fns::cuMemsetD8_v2>()?;
        // SAFETY: forwarded contract.
        self.check("cuMemsetD8", unsafe { f(p, value, n) })
    }
}

/// A retained primary context made current; released (`cuDevicePrimaryCtxRelease_v2`) on drop.
pub struct PrimaryContext<'a> {
    cuda: &'a Cuda,
    dev: CUdevice,
}

impl Drop for PrimaryContext<'_> {
    fn drop(&mut self) {
        if let Ok(f) = self.cuda.get::<fns::cuDevicePrimaryCtxRelease_v2>() {
            if let Ok(set) = self.cuda.get::<fns::cuCtxSetCurrent>() {
                // SAFETY: NULL is a valid argument (unbinds the context).
                unsafe { set(std::ptr::null_mut()) };
            }
            // SAFETY: the context of dev was retained by primary_context.
            unsafe { f(self.dev) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gdrapi_support::cuda::{attr, status};

    #[test]
    fn failed_calls_name_the_function_and_the_error() {
        let e = CudaError {
            func: "cuInit",
            code: status::NO_DEVICE,
            name: "CUDA_ERROR_NO_DEVICE".into(),
        };
        assert_eq!(
            e.to_string(),
            "cuInit failed: CUDA error: CUDA_ERROR_NO_DEVICE (100)"
        );
        assert_eq!(attr::PCI_BUS_ID, 33);
    }
}
