//! The CUDA driver API surface: the functions gdrcopy's tests, libgdrapi's DMA-BUF backend
//! and typical callers use, working on the fake GPU of [`crate::gpu`].
//!
//! # Safety
//!
//! Every exported function has the C contract of the CUDA function of the same name: pointer
//! arguments must be NULL or valid for what that function reads or writes. NULL out-pointers
//! are refused with CUDA_ERROR_INVALID_VALUE.
#![allow(clippy::missing_safety_doc)]

pub mod attrs;
pub mod errors;
mod procaddr;

use crate::config;
use crate::gpu::VMM_GRANULARITY;
use crate::intercept::{set_kind, KIND_DMABUF};
use crate::real;
use crate::state::{pid, Dmabuf, State, STATE};
use errors as cu;
use libc::{c_char, c_int, c_uint, c_ulonglong, c_void, size_t};
use std::cell::Cell;

/// `CUresult`.
pub type CUresult = c_uint;
/// `CUdevice`.
pub type CUdevice = c_int;
/// `CUdeviceptr`.
pub type CUdeviceptr = c_ulonglong;
/// `CUcontext` (opaque).
pub type CUcontext = *mut c_void;

/// `CUmemLocation`.
#[repr(C)]
pub struct MemLocation {
    kind: c_int,
    id: c_int,
}

/// `CUmemAllocationProp`.
#[repr(C)]
pub struct MemAllocationProp {
    kind: c_int,
    requested_handle_types: c_int,
    location: MemLocation,
    win32_handle_meta_data: *mut c_void,
    compression_type: u8,
    gpu_direct_rdma_capable: u8,
    usage: u16,
    reserved: [u8; 4],
}

/// `CUmemAccessDesc`.
#[repr(C)]
pub struct MemAccessDesc {
    location: MemLocation,
    flags: c_int,
}

static PRIMARY_CTX: [u64; 8] = [0; 8];

fn primary() -> CUcontext {
    PRIMARY_CTX.as_ptr() as CUcontext
}

thread_local! {
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

fn current() -> usize {
    CURRENT.with(|c| c.get())
}

/// Runs an API function body: fault injection first, then `f`, with panics mapped to
/// CUDA_ERROR_UNKNOWN.
fn entry(name: &str, f: impl FnOnce() -> Result<(), CUresult>) -> CUresult {
    if let Some(e) = crate::fail::check(name) {
        return e as CUresult;
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(())) => cu::SUCCESS,
        Ok(Err(e)) => e,
        Err(_) => cu::UNKNOWN,
    }
}

fn initialized(st: &State) -> Result<(), CUresult> {
    st.gpu().map(|_| ()).ok_or(cu::NOT_INITIALIZED)
}

fn need_ctx() -> Result<(), CUresult> {
    if current() == 0 {
        Err(cu::INVALID_CONTEXT)
    } else {
        Ok(())
    }
}

fn check_dev(dev: CUdevice) -> Result<(), CUresult> {
    if dev == 0 {
        Ok(())
    } else {
        Err(cu::INVALID_DEVICE)
    }
}

/// Writes `v` through a caller's out-pointer, refusing NULL.
fn out<T>(p: *mut T, v: T) -> Result<(), CUresult> {
    if p.is_null() {
        return Err(cu::INVALID_VALUE);
    }
    // SAFETY: non-NULL out-pointer supplied by the caller for a value of this type, as the
    // CUDA API contract requires.
    unsafe { p.write_unaligned(v) };
    Ok(())
}

/// Checks that `[ptr, ptr + n)` is fake device memory of this process.
fn device_range(ptr: u64, n: u64) -> Result<(), CUresult> {
    let st = STATE.lock();
    let g = st.gpu().ok_or(cu::NOT_INITIALIZED)?;
    g.translate(ptr, n).map(|_| ()).ok_or(cu::INVALID_VALUE)
}

/// `cuInit`.
#[no_mangle]
pub unsafe extern "C" fn cuInit(flags: c_uint) -> CUresult {
    entry("cuInit", || {
        if flags != 0 {
            return Err(cu::INVALID_VALUE);
        }
        STATE.lock().init_gpu()
    })
}

/// `cuDriverGetVersion`: `GDRSIM_CUDA_VERSION`.
#[no_mangle]
pub unsafe extern "C" fn cuDriverGetVersion(v: *mut c_int) -> CUresult {
    entry("cuDriverGetVersion", || out(v, config::get().cuda_version))
}

/// `cuDeviceGetCount`: one device.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetCount(n: *mut c_int) -> CUresult {
    entry("cuDeviceGetCount", || {
        initialized(&STATE.lock())?;
        out(n, 1)
    })
}

/// `cuDeviceGet`: ordinal 0 only.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGet(dev: *mut CUdevice, ordinal: c_int) -> CUresult {
    entry("cuDeviceGet", || {
        initialized(&STATE.lock())?;
        check_dev(ordinal)?;
        out(dev, 0)
    })
}

/// `cuDeviceGetName`.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) -> CUresult {
    entry("cuDeviceGetName", || {
        initialized(&STATE.lock())?;
        check_dev(dev)?;
        if name.is_null() || len <= 0 {
            return Err(cu::INVALID_VALUE);
        }
        let text = b"gdrsim emulated GPU";
        let n = text.len().min(len as usize - 1);
        // SAFETY: the caller gave `len` writable bytes at `name`; we write n + 1 <= len.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), name.cast::<u8>(), n);
            *name.add(n) = 0;
        }
        Ok(())
    })
}

/// `cuDeviceGetAttribute`: values per profile (see `attrs`).
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetAttribute(
    pi: *mut c_int,
    attr: c_int,
    dev: CUdevice,
) -> CUresult {
    entry("cuDeviceGetAttribute", || {
        initialized(&STATE.lock())?;
        check_dev(dev)?;
        let v = attrs::value(config::get(), attr).ok_or(cu::INVALID_VALUE)?;
        out(pi, v)
    })
}

/// `cuDeviceTotalMem_v2`: the size of fake VRAM.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceTotalMem_v2(bytes: *mut size_t, dev: CUdevice) -> CUresult {
    entry("cuDeviceTotalMem_v2", || {
        initialized(&STATE.lock())?;
        check_dev(dev)?;
        out(bytes, config::get().vram_size as size_t)
    })
}

/// `cuDevicePrimaryCtxRetain`.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(ctx: *mut CUcontext, dev: CUdevice) -> CUresult {
    entry("cuDevicePrimaryCtxRetain", || {
        initialized(&STATE.lock())?;
        check_dev(dev)?;
        out(ctx, primary())
    })
}

fn primary_release(name: &str, dev: CUdevice) -> CUresult {
    entry(name, || {
        initialized(&STATE.lock())?;
        check_dev(dev)
    })
}

/// `cuDevicePrimaryCtxRelease_v2`.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice) -> CUresult {
    primary_release("cuDevicePrimaryCtxRelease_v2", dev)
}

/// `cuDevicePrimaryCtxRelease` (the pre-11.0 ABI name).
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease(dev: CUdevice) -> CUresult {
    primary_release("cuDevicePrimaryCtxRelease", dev)
}

/// `cuCtxSetCurrent`: the primary context or NULL, per thread.
#[no_mangle]
pub unsafe extern "C" fn cuCtxSetCurrent(ctx: CUcontext) -> CUresult {
    entry("cuCtxSetCurrent", || {
        initialized(&STATE.lock())?;
        if !ctx.is_null() && ctx != primary() {
            return Err(cu::INVALID_CONTEXT);
        }
        CURRENT.with(|c| c.set(ctx as usize));
        Ok(())
    })
}

/// `cuCtxGetCurrent`: this thread's context (NULL if none).
#[no_mangle]
pub unsafe extern "C" fn cuCtxGetCurrent(ctx: *mut CUcontext) -> CUresult {
    entry("cuCtxGetCurrent", || {
        initialized(&STATE.lock())?;
        out(ctx, current() as CUcontext)
    })
}

/// `cuCtxGetDevice`.
#[no_mangle]
pub unsafe extern "C" fn cuCtxGetDevice(dev: *mut CUdevice) -> CUresult {
    entry("cuCtxGetDevice", || {
        need_ctx()?;
        out(dev, 0)
    })
}

/// `cuCtxSynchronize`: nothing runs asynchronously, so it returns at once.
#[no_mangle]
pub unsafe extern "C" fn cuCtxSynchronize() -> CUresult {
    entry("cuCtxSynchronize", need_ctx)
}

/// `cuStreamQuery`: always idle.
#[no_mangle]
pub unsafe extern "C" fn cuStreamQuery(_stream: *mut c_void) -> CUresult {
    entry("cuStreamQuery", || Ok(()))
}

/// `cuStreamSynchronize`: always idle.
#[no_mangle]
pub unsafe extern "C" fn cuStreamSynchronize(_stream: *mut c_void) -> CUresult {
    entry("cuStreamSynchronize", || Ok(()))
}

/// `cuGetErrorName`.
#[no_mangle]
pub unsafe extern "C" fn cuGetErrorName(code: CUresult, s: *mut *const c_char) -> CUresult {
    error_text(code, s)
}

/// `cuGetErrorString` (the emulator describes each code by its name).
#[no_mangle]
pub unsafe extern "C" fn cuGetErrorString(code: CUresult, s: *mut *const c_char) -> CUresult {
    error_text(code, s)
}

fn error_text(code: CUresult, s: *mut *const c_char) -> CUresult {
    if s.is_null() {
        return cu::INVALID_VALUE;
    }
    let (name, rc) = match cu::name_of(code) {
        Some(n) => (n.as_ptr().cast::<c_char>(), cu::SUCCESS),
        None => (std::ptr::null(), cu::INVALID_VALUE),
    };
    // SAFETY: s is a non-NULL out-pointer from the caller.
    unsafe { *s = name };
    rc
}

/// `cuMemAlloc_v2`: 256-byte aligned fake device memory; needs a current context.
#[no_mangle]
pub unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, size: size_t) -> CUresult {
    entry("cuMemAlloc_v2", || {
        let mut st = STATE.lock();
        initialized(&st)?;
        need_ctx()?;
        if dptr.is_null() {
            return Err(cu::INVALID_VALUE);
        }
        let va = st
            .gpu_mut()
            .ok_or(cu::NOT_INITIALIZED)?
            .mem_alloc(size as u64)?;
        out(dptr, va)
    })
}

/// `cuMemFree_v2`: non-persistent pins of the memory are invalidated; persistent pins keep
/// its pages until unpinned.
#[no_mangle]
pub unsafe extern "C" fn cuMemFree_v2(dptr: CUdeviceptr) -> CUresult {
    entry("cuMemFree_v2", || {
        let mut st = STATE.lock();
        initialized(&st)?;
        if dptr == 0 {
            return Ok(());
        }
        let (va, size) = st.gpu_mut().ok_or(cu::NOT_INITIALIZED)?.mem_free(dptr)?;
        st.invalidate(va, size);
        st.reclaim();
        Ok(())
    })
}

/// `cuMemGetInfo_v2`.
#[no_mangle]
pub unsafe extern "C" fn cuMemGetInfo_v2(free: *mut size_t, total: *mut size_t) -> CUresult {
    entry("cuMemGetInfo_v2", || {
        let st = STATE.lock();
        let (f, t) = st.gpu().ok_or(cu::NOT_INITIALIZED)?.mem_info();
        out(free, f as size_t)?;
        out(total, t as size_t)
    })
}

/// `cuMemGetAddressRange_v2`.
#[no_mangle]
pub unsafe extern "C" fn cuMemGetAddressRange_v2(
    base: *mut CUdeviceptr,
    size: *mut size_t,
    dptr: CUdeviceptr,
) -> CUresult {
    entry("cuMemGetAddressRange_v2", || {
        let st = STATE.lock();
        let (b, s) = st
            .gpu()
            .ok_or(cu::NOT_INITIALIZED)?
            .allocation_of(dptr)
            .ok_or(cu::NOT_FOUND)?;
        if !base.is_null() {
            out(base, b)?;
        }
        if !size.is_null() {
            out(size, s as size_t)?;
        }
        Ok(())
    })
}

fn host_alloc(pp: *mut *mut c_void, size: size_t) -> Result<(), CUresult> {
    let mut st = STATE.lock();
    initialized(&st)?;
    if pp.is_null() || size == 0 {
        return Err(cu::INVALID_VALUE);
    }
    let len = (size as u64).checked_add(4095).ok_or(cu::OUT_OF_MEMORY)? & !4095;
    // SAFETY: a fresh private anonymous mapping chosen by the kernel.
    let p = unsafe {
        real::mmap(
            std::ptr::null_mut(),
            len as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(cu::OUT_OF_MEMORY);
    }
    st.host.insert(p as u64, len);
    out(pp, p)
}

/// `cuMemAllocHost_v2`: page-aligned host memory.
#[no_mangle]
pub unsafe extern "C" fn cuMemAllocHost_v2(pp: *mut *mut c_void, size: size_t) -> CUresult {
    entry("cuMemAllocHost_v2", || host_alloc(pp, size))
}

/// `cuMemHostAlloc`: page-aligned host memory (flags accepted and ignored).
#[no_mangle]
pub unsafe extern "C" fn cuMemHostAlloc(
    pp: *mut *mut c_void,
    size: size_t,
    _flags: c_uint,
) -> CUresult {
    entry("cuMemHostAlloc", || host_alloc(pp, size))
}

/// `cuMemFreeHost`.
#[no_mangle]
pub unsafe extern "C" fn cuMemFreeHost(p: *mut c_void) -> CUresult {
    entry("cuMemFreeHost", || {
        let mut st = STATE.lock();
        let len = st.host.remove(&(p as u64)).ok_or(cu::INVALID_VALUE)?;
        // SAFETY: [p, p+len) is a mapping cuMemAllocHost/cuMemHostAlloc made and handed out;
        // the caller gives it back.
        unsafe { real::munmap(p, len as usize) };
        Ok(())
    })
}

/// `cuMemHostGetDevicePointer_v2`: host memory is addressed identically by the device.
#[no_mangle]
pub unsafe extern "C" fn cuMemHostGetDevicePointer_v2(
    dptr: *mut CUdeviceptr,
    p: *mut c_void,
    flags: c_uint,
) -> CUresult {
    entry("cuMemHostGetDevicePointer_v2", || {
        let st = STATE.lock();
        initialized(&st)?;
        if flags != 0 {
            return Err(cu::INVALID_VALUE);
        }
        let a = p as u64;
        let inside = st
            .host
            .range(..=a)
            .next_back()
            .is_some_and(|(&b, &l)| a < b + l);
        if !inside {
            return Err(cu::INVALID_VALUE);
        }
        out(dptr, a)
    })
}

fn copy(dst: u64, src: u64, n: u64) -> Result<(), CUresult> {
    if n == 0 {
        return Ok(());
    }
    if dst == 0 || src == 0 {
        return Err(cu::INVALID_VALUE);
    }
    // SAFETY: both ranges were checked to be fake VRAM, or are host memory the caller vouches
    // for (as with the real driver); memmove tolerates overlap.
    unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, n as usize) };
    Ok(())
}

/// `cuMemcpy` (unified addressing: either side may be host or device memory).
#[no_mangle]
pub unsafe extern "C" fn cuMemcpy(dst: CUdeviceptr, src: CUdeviceptr, n: size_t) -> CUresult {
    entry("cuMemcpy", || copy(dst, src, n as u64))
}

/// `cuMemcpyHtoD_v2`.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyHtoD_v2(
    dst: CUdeviceptr,
    src: *const c_void,
    n: size_t,
) -> CUresult {
    entry("cuMemcpyHtoD_v2", || {
        device_range(dst, n as u64)?;
        copy(dst, src as u64, n as u64)
    })
}

/// `cuMemcpyDtoH_v2`.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoH_v2(
    dst: *mut c_void,
    src: CUdeviceptr,
    n: size_t,
) -> CUresult {
    entry("cuMemcpyDtoH_v2", || {
        device_range(src, n as u64)?;
        copy(dst as u64, src, n as u64)
    })
}

/// `cuMemcpyDtoD_v2`.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoD_v2(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    n: size_t,
) -> CUresult {
    entry("cuMemcpyDtoD_v2", || {
        device_range(src, n as u64)?;
        device_range(dst, n as u64)?;
        copy(dst, src, n as u64)
    })
}

/// `cuMemsetD8_v2`.
#[no_mangle]
pub unsafe extern "C" fn cuMemsetD8_v2(dst: CUdeviceptr, v: u8, n: size_t) -> CUresult {
    entry("cuMemsetD8_v2", || {
        device_range(dst, n as u64)?;
        // SAFETY: [dst, dst+n) is fake VRAM mapped in this process (checked above).
        unsafe { std::ptr::write_bytes(dst as *mut u8, v, n) };
        Ok(())
    })
}

/// `cuMemsetD32_v2`.
#[no_mangle]
pub unsafe extern "C" fn cuMemsetD32_v2(dst: CUdeviceptr, v: c_uint, n: size_t) -> CUresult {
    entry("cuMemsetD32_v2", || {
        if dst % 4 != 0 {
            return Err(cu::INVALID_VALUE);
        }
        device_range(dst, (n as u64).checked_mul(4).ok_or(cu::INVALID_VALUE)?)?;
        for i in 0..n {
            // SAFETY: [dst, dst+4n) is fake VRAM mapped in this process (checked above) and
            // dst is 4-byte aligned.
            unsafe { (dst as *mut u32).add(i).write(v) };
        }
        Ok(())
    })
}

/// `cuPointerSetAttribute`: SYNC_MEMOPS (6) on device memory is accepted.
#[no_mangle]
pub unsafe extern "C" fn cuPointerSetAttribute(
    _value: *const c_void,
    attr: c_int,
    ptr: CUdeviceptr,
) -> CUresult {
    entry("cuPointerSetAttribute", || {
        device_range(ptr, 1)?;
        if attr == 6 {
            Ok(())
        } else {
            Err(cu::INVALID_VALUE)
        }
    })
}

/// `cuPointerGetAttribute` for CONTEXT, MEMORY_TYPE, DEVICE_POINTER, HOST_POINTER,
/// P2P_TOKENS, SYNC_MEMOPS, BUFFER_ID, DEVICE_ORDINAL, RANGE_START_ADDR, RANGE_SIZE, MAPPED.
#[no_mangle]
pub unsafe extern "C" fn cuPointerGetAttribute(
    data: *mut c_void,
    attr: c_int,
    ptr: CUdeviceptr,
) -> CUresult {
    entry("cuPointerGetAttribute", || {
        let st = STATE.lock();
        let g = st.gpu().ok_or(cu::NOT_INITIALIZED)?;
        let dev = g.allocation_of(ptr);
        let host = st
            .host
            .range(..=ptr)
            .next_back()
            .filter(|(&b, &l)| ptr < b + l)
            .map(|(&b, &l)| (b, l));
        let (start, size, is_dev) = match (dev, host) {
            (Some((b, s)), _) => (b, s, true),
            (None, Some((b, l))) => (b, l, false),
            (None, None) => return Err(cu::INVALID_VALUE),
        };
        let gen = g.gen;
        match attr {
            1 => out(data.cast::<CUcontext>(), primary()),
            2 => out(data.cast::<c_uint>(), if is_dev { 2 } else { 1 }),
            3 => out(data.cast::<u64>(), ptr),
            4 if !is_dev => out(data.cast::<u64>(), ptr),
            5 if is_dev => {
                out(data.cast::<u64>(), 0x6764_7273_0000_0000 | gen)?;
                // SAFETY: CUDA_POINTER_ATTRIBUTE_P2P_TOKENS is {u64 p2pToken; u32 vaSpaceToken};
                // data is non-NULL (checked by `out` above).
                unsafe {
                    data.cast::<u8>()
                        .add(8)
                        .cast::<u32>()
                        .write_unaligned(pid() as u32)
                };
                Ok(())
            }
            6 => out(data.cast::<c_int>(), 1),
            7 => out(data.cast::<u64>(), start),
            9 => out(data.cast::<c_int>(), 0),
            11 => out(data.cast::<u64>(), start),
            12 => out(data.cast::<size_t>(), size as size_t),
            13 => out(data.cast::<c_int>(), 1),
            _ => Err(cu::INVALID_VALUE),
        }
    })
}

fn check_prop(prop: *const MemAllocationProp) -> Result<(), CUresult> {
    if prop.is_null() {
        return Err(cu::INVALID_VALUE);
    }
    // SAFETY: non-NULL pointer to a CUmemAllocationProp supplied by the caller.
    let p = unsafe { &*prop };
    if p.kind != 1 || p.location.kind != 1 {
        return Err(cu::INVALID_VALUE);
    }
    check_dev(p.location.id)
}

/// `cuMemGetAllocationGranularity`: 2 MiB for pinned device memory.
#[no_mangle]
pub unsafe extern "C" fn cuMemGetAllocationGranularity(
    g: *mut size_t,
    prop: *const MemAllocationProp,
    _option: c_int,
) -> CUresult {
    entry("cuMemGetAllocationGranularity", || {
        initialized(&STATE.lock())?;
        check_prop(prop)?;
        out(g, VMM_GRANULARITY as size_t)
    })
}

/// `cuMemCreate`: physical fake VRAM in multiples of the granularity.
#[no_mangle]
pub unsafe extern "C" fn cuMemCreate(
    handle: *mut u64,
    size: size_t,
    prop: *const MemAllocationProp,
    flags: c_ulonglong,
) -> CUresult {
    entry("cuMemCreate", || {
        let mut st = STATE.lock();
        initialized(&st)?;
        check_prop(prop)?;
        if flags != 0 || handle.is_null() {
            return Err(cu::INVALID_VALUE);
        }
        let h = st
            .gpu_mut()
            .ok_or(cu::NOT_INITIALIZED)?
            .vmm_create(size as u64)?;
        out(handle, h)
    })
}

/// `cuMemRelease`: the memory lives on while mapped or pinned.
#[no_mangle]
pub unsafe extern "C" fn cuMemRelease(handle: u64) -> CUresult {
    entry("cuMemRelease", || {
        let mut st = STATE.lock();
        st.gpu_mut()
            .ok_or(cu::NOT_INITIALIZED)?
            .vmm_release(handle)?;
        st.reclaim();
        Ok(())
    })
}

/// `cuMemAddressReserve`.
#[no_mangle]
pub unsafe extern "C" fn cuMemAddressReserve(
    ptr: *mut CUdeviceptr,
    size: size_t,
    align: size_t,
    _addr: CUdeviceptr,
    flags: c_ulonglong,
) -> CUresult {
    entry("cuMemAddressReserve", || {
        let mut st = STATE.lock();
        if flags != 0 || ptr.is_null() {
            return Err(cu::INVALID_VALUE);
        }
        let va = st
            .gpu_mut()
            .ok_or(cu::NOT_INITIALIZED)?
            .vmm_reserve(size as u64, align as u64)?;
        out(ptr, va)
    })
}

fn after_unmap(st: &mut State, removed: Vec<(u64, u64)>) {
    for (va, len) in removed {
        st.invalidate(va, len);
    }
    st.reclaim();
}

/// `cuMemAddressFree`.
#[no_mangle]
pub unsafe extern "C" fn cuMemAddressFree(ptr: CUdeviceptr, size: size_t) -> CUresult {
    entry("cuMemAddressFree", || {
        let mut st = STATE.lock();
        let removed = st
            .gpu_mut()
            .ok_or(cu::NOT_INITIALIZED)?
            .vmm_address_free(ptr, size as u64)?;
        after_unmap(&mut st, removed);
        Ok(())
    })
}

/// `cuMemMap`.
#[no_mangle]
pub unsafe extern "C" fn cuMemMap(
    ptr: CUdeviceptr,
    size: size_t,
    offset: size_t,
    handle: u64,
    flags: c_ulonglong,
) -> CUresult {
    entry("cuMemMap", || {
        let mut st = STATE.lock();
        if flags != 0 {
            return Err(cu::INVALID_VALUE);
        }
        st.gpu_mut()
            .ok_or(cu::NOT_INITIALIZED)?
            .vmm_map(ptr, size as u64, offset as u64, handle)
    })
}

/// `cuMemUnmap`: non-persistent pins of the range are invalidated.
#[no_mangle]
pub unsafe extern "C" fn cuMemUnmap(ptr: CUdeviceptr, size: size_t) -> CUresult {
    entry("cuMemUnmap", || {
        let mut st = STATE.lock();
        let removed = st
            .gpu_mut()
            .ok_or(cu::NOT_INITIALIZED)?
            .vmm_unmap(ptr, size as u64)?;
        after_unmap(&mut st, removed);
        Ok(())
    })
}

/// `cuMemSetAccess`: the range must be mapped; access is always read-write.
#[no_mangle]
pub unsafe extern "C" fn cuMemSetAccess(
    ptr: CUdeviceptr,
    size: size_t,
    desc: *const MemAccessDesc,
    count: size_t,
) -> CUresult {
    entry("cuMemSetAccess", || {
        if desc.is_null() || count == 0 {
            return Err(cu::INVALID_VALUE);
        }
        // SAFETY: the caller passes `count` >= 1 descriptors at `desc`, non-NULL.
        let d = unsafe { &*desc };
        if d.location.kind != 1 {
            return Err(cu::INVALID_VALUE);
        }
        check_dev(d.location.id)?;
        device_range(ptr, size as u64)
    })
}

/// `cuMemGetHandleForAddressRange`: exports `[dptr, dptr + size)` as a dma-buf fd (an fd of
/// the VRAM file whose mmap the emulator translates to the exported range).
#[no_mangle]
pub unsafe extern "C" fn cuMemGetHandleForAddressRange(
    handle: *mut c_void,
    dptr: CUdeviceptr,
    size: size_t,
    handle_type: c_int,
    flags: c_ulonglong,
) -> CUresult {
    entry("cuMemGetHandleForAddressRange", || {
        let mut st = STATE.lock();
        let g = st.gpu().ok_or(cu::NOT_INITIALIZED)?;
        if !config::get().dmabuf {
            return Err(cu::NOT_SUPPORTED);
        }
        let page = 1u64 << crate::driver::page_shift();
        let size = size as u64;
        if handle.is_null()
            || handle_type != 1
            || flags & !1 != 0
            || size == 0
            || dptr % page != 0
            || size % page != 0
        {
            return Err(cu::INVALID_VALUE);
        }
        if !g.in_live_allocation(dptr) {
            return Err(cu::INVALID_VALUE);
        }
        let segs = g.translate(dptr, size).ok_or(cu::INVALID_VALUE)?;
        let (memfd, gen) = (g.memfd, g.gen);
        // SAFETY: F_DUPFD_CLOEXEC on our own VRAM memfd.
        let fd = unsafe { libc::fcntl(memfd, libc::F_DUPFD_CLOEXEC, 0) };
        if fd < 0 {
            return Err(cu::OUT_OF_MEMORY);
        }
        let ino = crate::driver::inode_of(fd).unwrap_or(0);
        st.dmabufs.insert(
            fd,
            Dmabuf {
                segs,
                size,
                memfd,
                gen,
                pid: pid(),
                ino,
            },
        );
        set_kind(fd, KIND_DMABUF);
        out(handle.cast::<c_int>(), fd)
    })
}

/// `cuGetProcAddress` (the 4-argument ABI; a fifth argument is ignored).
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
) -> CUresult {
    // SAFETY: the caller's pointers, under the same contract; no status pointer.
    unsafe {
        procaddr::lookup(
            "cuGetProcAddress",
            symbol,
            pfn,
            version,
            flags,
            std::ptr::null_mut(),
        )
    }
}

/// `cuGetProcAddress_v2` (with the symbol status out-parameter).
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut c_int,
) -> CUresult {
    // SAFETY: the caller's pointers, under the same contract.
    unsafe { procaddr::lookup("cuGetProcAddress_v2", symbol, pfn, version, flags, status) }
}

/// Legacy unversioned names that old binaries link against.
pub mod legacy {
    use super::*;

    /// `cuMemAlloc` (pre-3.2 ABI name).
    #[no_mangle]
    pub unsafe extern "C" fn cuMemAlloc(dptr: *mut CUdeviceptr, size: size_t) -> CUresult {
        // SAFETY: same contract as this function, passed through unchanged.
        unsafe { cuMemAlloc_v2(dptr, size) }
    }
    /// `cuMemFree`.
    #[no_mangle]
    pub unsafe extern "C" fn cuMemFree(dptr: CUdeviceptr) -> CUresult {
        // SAFETY: same contract as this function, passed through unchanged.
        unsafe { cuMemFree_v2(dptr) }
    }
    /// `cuMemAllocHost`.
    #[no_mangle]
    pub unsafe extern "C" fn cuMemAllocHost(pp: *mut *mut c_void, size: size_t) -> CUresult {
        // SAFETY: same contract as this function, passed through unchanged.
        unsafe { cuMemAllocHost_v2(pp, size) }
    }
    /// `cuMemcpyHtoD`.
    #[no_mangle]
    pub unsafe extern "C" fn cuMemcpyHtoD(
        dst: CUdeviceptr,
        src: *const c_void,
        n: size_t,
    ) -> CUresult {
        // SAFETY: same contract as this function, passed through unchanged.
        unsafe { cuMemcpyHtoD_v2(dst, src, n) }
    }
    /// `cuMemcpyDtoH`.
    #[no_mangle]
    pub unsafe extern "C" fn cuMemcpyDtoH(
        dst: *mut c_void,
        src: CUdeviceptr,
        n: size_t,
    ) -> CUresult {
        // SAFETY: same contract as this function, passed through unchanged.
        unsafe { cuMemcpyDtoH_v2(dst, src, n) }
    }
    /// `cuMemsetD8`.
    #[no_mangle]
    pub unsafe extern "C" fn cuMemsetD8(dst: CUdeviceptr, v: u8, n: size_t) -> CUresult {
        // SAFETY: same contract as this function, passed through unchanged.
        unsafe { cuMemsetD8_v2(dst, v, n) }
    }
    /// `cuMemHostGetDevicePointer`.
    #[no_mangle]
    pub unsafe extern "C" fn cuMemHostGetDevicePointer(
        dptr: *mut CUdeviceptr,
        p: *mut c_void,
        flags: c_uint,
    ) -> CUresult {
        // SAFETY: same contract as this function, passed through unchanged.
        unsafe { cuMemHostGetDevicePointer_v2(dptr, p, flags) }
    }
    /// `cuDeviceTotalMem`.
    #[no_mangle]
    pub unsafe extern "C" fn cuDeviceTotalMem(bytes: *mut size_t, dev: CUdevice) -> CUresult {
        // SAFETY: same contract as this function, passed through unchanged.
        unsafe { cuDeviceTotalMem_v2(bytes, dev) }
    }
    /// `cuMemGetInfo`.
    #[no_mangle]
    pub unsafe extern "C" fn cuMemGetInfo(free: *mut size_t, total: *mut size_t) -> CUresult {
        // SAFETY: same contract as this function, passed through unchanged.
        unsafe { cuMemGetInfo_v2(free, total) }
    }
}
