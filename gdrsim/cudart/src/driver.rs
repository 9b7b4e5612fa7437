//! The driver functions the runtime is built on (resolved from `libcuda.so.1` when loaded).

pub use gdrapi_abi::cuda::{CUdeviceptr, CUresult};
use libc::{c_int, c_uint, c_void, size_t};

/// `CUcontext`, `CUstream`, `CUevent` (opaque).
pub type Handle = *mut c_void;
/// `CUhostFn`.
pub type HostFn = Option<unsafe extern "C" fn(*mut c_void)>;

extern "C" {
    pub fn cuInit(flags: c_uint) -> CUresult;
    pub fn cuDriverGetVersion(v: *mut c_int) -> CUresult;
    pub fn cuDeviceGetCount(n: *mut c_int) -> CUresult;
    pub fn cuDevicePrimaryCtxRetain(ctx: *mut Handle, dev: c_int) -> CUresult;
    pub fn cuCtxGetCurrent(ctx: *mut Handle) -> CUresult;
    pub fn cuCtxSetCurrent(ctx: Handle) -> CUresult;
    pub fn cuCtxGetDevice(dev: *mut c_int) -> CUresult;
    pub fn cuCtxSynchronize() -> CUresult;
    pub fn cuMemAlloc_v2(p: *mut CUdeviceptr, n: size_t) -> CUresult;
    pub fn cuMemAllocPitch_v2(
        p: *mut CUdeviceptr,
        pitch: *mut size_t,
        width: size_t,
        height: size_t,
        elem: c_uint,
    ) -> CUresult;
    pub fn cuMemAllocManaged(p: *mut CUdeviceptr, n: size_t, flags: c_uint) -> CUresult;
    pub fn cuMemFree_v2(p: CUdeviceptr) -> CUresult;
    pub fn cuMemHostAlloc(p: *mut *mut c_void, n: size_t, flags: c_uint) -> CUresult;
    pub fn cuMemFreeHost(p: *mut c_void) -> CUresult;
    pub fn cuMemHostRegister_v2(p: *mut c_void, n: size_t, flags: c_uint) -> CUresult;
    pub fn cuMemHostUnregister(p: *mut c_void) -> CUresult;
    pub fn cuMemcpy(dst: CUdeviceptr, src: CUdeviceptr, n: size_t) -> CUresult;
    pub fn cuMemcpyAsync(dst: CUdeviceptr, src: CUdeviceptr, n: size_t, s: Handle) -> CUresult;
    pub fn cuMemsetD8_v2(dst: CUdeviceptr, v: u8, n: size_t) -> CUresult;
    pub fn cuMemsetD8Async(dst: CUdeviceptr, v: u8, n: size_t, s: Handle) -> CUresult;
    pub fn cuStreamCreate(s: *mut Handle, flags: c_uint) -> CUresult;
    pub fn cuStreamDestroy_v2(s: Handle) -> CUresult;
    pub fn cuStreamQuery(s: Handle) -> CUresult;
    pub fn cuStreamSynchronize(s: Handle) -> CUresult;
    pub fn cuLaunchHostFunc(s: Handle, f: HostFn, data: *mut c_void) -> CUresult;
    pub fn cuEventCreate(e: *mut Handle, flags: c_uint) -> CUresult;
    pub fn cuEventDestroy_v2(e: Handle) -> CUresult;
    pub fn cuEventRecord(e: Handle, s: Handle) -> CUresult;
    pub fn cuEventQuery(e: Handle) -> CUresult;
    pub fn cuEventSynchronize(e: Handle) -> CUresult;
}
