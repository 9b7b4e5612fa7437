//! The old unversioned names of the `_v2` functions, which old binaries link against. Each is
//! an entry point of its own with a patchable prologue (see [`super::hookable`]).

use super::device::*;
use super::hookable::hookable;
use super::memory::*;
use super::*;

hookable!(
    /// `cuMemAlloc` (pre-3.2 ABI name).
    ///
    /// # Safety
    ///
    /// `cuda.h`'s contract for `cuMemAlloc`: `dptr` is NULL or writable for one `CUdeviceptr`.
    cuMemAlloc(dptr: *mut CUdeviceptr, size: size_t) -> CUresult => mem_alloc);

hookable!(
    /// `cuMemFree`.
    ///
    /// # Safety
    ///
    /// `cuda.h`'s contract for `cuMemFree`; no argument is dereferenced, so every value is accepted.
    cuMemFree(dptr: CUdeviceptr) -> CUresult => mem_free);

hookable!(
    /// `cuMemAllocHost`.
    ///
    /// # Safety
    ///
    /// `cuda.h`'s contract for `cuMemAllocHost`: `pp` is NULL or writable for one pointer.
    cuMemAllocHost(pp: *mut *mut c_void, size: size_t) -> CUresult => cuMemAllocHost_v2);

hookable!(
    /// `cuMemcpyHtoD`.
    ///
    /// # Safety
    ///
    /// `cuda.h`'s contract for `cuMemcpyHtoD`: `src` is valid for every byte the call reads through
    /// it.
    cuMemcpyHtoD(dst: CUdeviceptr, src: *const c_void, n: size_t) -> CUresult => cuMemcpyHtoD_v2);

hookable!(
    /// `cuMemcpyDtoH`.
    ///
    /// # Safety
    ///
    /// `cuda.h`'s contract for `cuMemcpyDtoH`: `dst` is valid for every byte the call writes
    /// through it.
    cuMemcpyDtoH(dst: *mut c_void, src: CUdeviceptr, n: size_t) -> CUresult => cuMemcpyDtoH_v2);

hookable!(
    /// `cuMemsetD8`.
    ///
    /// # Safety
    ///
    /// `cuda.h`'s contract for `cuMemsetD8`; no argument is dereferenced, so every value is accepted.
    cuMemsetD8(dst: CUdeviceptr, v: u8, n: size_t) -> CUresult => cuMemsetD8_v2);

hookable!(
    /// `cuMemHostGetDevicePointer`.
    ///
    /// # Safety
    ///
    /// `cuda.h`'s contract for `cuMemHostGetDevicePointer`: `dptr` is NULL or writable for one
    /// `CUdeviceptr`; `p` is only looked up, not dereferenced.
    cuMemHostGetDevicePointer(dptr: *mut CUdeviceptr, p: *mut c_void, flags: c_uint) -> CUresult => cuMemHostGetDevicePointer_v2);

hookable!(
    /// `cuDeviceTotalMem`.
    ///
    /// # Safety
    ///
    /// `cuda.h`'s contract for `cuDeviceTotalMem`: `bytes` is NULL or writable for one `size_t`.
    cuDeviceTotalMem(bytes: *mut size_t, dev: CUdevice) -> CUresult => cuDeviceTotalMem_v2);

hookable!(
    /// `cuMemGetInfo`.
    ///
    /// # Safety
    ///
    /// `cuda.h`'s contract for `cuMemGetInfo`: `free` is NULL or writable for one `size_t`; `total`
    /// is NULL or writable for one `size_t`.
    cuMemGetInfo(free: *mut size_t, total: *mut size_t) -> CUresult => cuMemGetInfo_v2);
