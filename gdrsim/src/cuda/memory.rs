//! Device and host memory: allocation, copies, memsets, pointer attributes.

use super::hookable::hookable;
use super::*;

hookable!(
    /// `cuMemAlloc_v2`: 256-byte aligned fake device memory; needs a current context.
    ///
    /// # Safety
    ///
    /// `cuda.h`'s contract for `cuMemAlloc_v2`: `dptr` is NULL or writable for one `CUdeviceptr`.
    cuMemAlloc_v2(dptr: *mut CUdeviceptr, size: size_t) -> CUresult => mem_alloc);

/// `cuMemAlloc_v2` and the calls that allocate like it, without the patchable entry point.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemAlloc_v2`: `dptr` is NULL or writable for one `CUdeviceptr`.
pub(super) unsafe extern "C" fn mem_alloc(dptr: *mut CUdeviceptr, size: size_t) -> CUresult {
    entry("cuMemAlloc_v2", || {
        let mut st = STATE.lock();
        initialized(&st)?;
        crate::vulkan::ctx_check().unwrap_or_else(need_ctx)?;
        if dptr.is_null() {
            return Err(cu::INVALID_VALUE);
        }
        let gpu = st.gpu_mut().ok_or(cu::NOT_INITIALIZED)?;
        let va = gpu.mem_alloc(size as u64)?;
        if let Err(e) = crate::kernel::back(va, size as u64) {
            let _ = gpu.mem_free(va);
            gpu.reclaim(&[]);
            return Err(e);
        }
        out(dptr, va)
    })
}

hookable!(
    /// `cuMemFree_v2`: non-persistent pins of the memory are invalidated; persistent pins keep
    /// its pages until unpinned.
    ///
    /// # Safety
    ///
    /// `cuda.h`'s contract for `cuMemFree_v2`; no argument is dereferenced, so every
    /// value is accepted.
    cuMemFree_v2(dptr: CUdeviceptr) -> CUresult => mem_free);

/// `cuMemFree_v2` without the patchable entry point.
///
/// # Safety
///
/// As `cuMemFree_v2`.
pub(super) unsafe extern "C" fn mem_free(dptr: CUdeviceptr) -> CUresult {
    guarded("cuMemFree_v2", || {
        if crate::vulkan::foreign(dptr) {
            crate::vulkan::passthrough!(cuMemFree_v2(dptr: CUdeviceptr));
        }
        entry("cuMemFree_v2", || {
            let mut st = STATE.lock();
            initialized(&st)?;
            if dptr == 0 {
                return Ok(());
            }
            let (va, size) = st.gpu_mut().ok_or(cu::NOT_INITIALIZED)?.mem_free(dptr)?;
            crate::kernel::release(va);
            super::managed::forget(va);
            st.invalidate(va, size);
            st.reclaim();
            Ok(())
        })
    })
}

/// `cuMemGetInfo_v2`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemGetInfo_v2`: `free` is NULL or writable for one `size_t`;
/// `total` is NULL or writable for one `size_t`.
#[no_mangle]
pub unsafe extern "C" fn cuMemGetInfo_v2(free: *mut size_t, total: *mut size_t) -> CUresult {
    crate::vulkan::passthrough!(cuMemGetInfo_v2(free: *mut size_t, total: *mut size_t));
    entry("cuMemGetInfo_v2", || {
        let st = STATE.lock();
        let (f, t) = st.gpu().ok_or(cu::NOT_INITIALIZED)?.mem_info();
        out(free, f as size_t)?;
        out(total, t as size_t)
    })
}

/// `cuMemGetAddressRange_v2`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemGetAddressRange_v2`: `base` is NULL or writable for one
/// `CUdeviceptr`; `size` is NULL or writable for one `size_t`.
#[no_mangle]
pub unsafe extern "C" fn cuMemGetAddressRange_v2(
    base: *mut CUdeviceptr,
    size: *mut size_t,
    dptr: CUdeviceptr,
) -> CUresult {
    guarded("cuMemGetAddressRange_v2", || {
        if crate::vulkan::foreign(dptr) {
            crate::vulkan::passthrough!(cuMemGetAddressRange_v2(base: *mut CUdeviceptr, size: *mut size_t, dptr: CUdeviceptr));
        }
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
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemAllocHost_v2`: `pp` is NULL or writable for one pointer.
#[no_mangle]
pub unsafe extern "C" fn cuMemAllocHost_v2(pp: *mut *mut c_void, size: size_t) -> CUresult {
    crate::vulkan::passthrough!(cuMemAllocHost_v2(pp: *mut *mut c_void, size: size_t));
    entry("cuMemAllocHost_v2", || host_alloc(pp, size))
}

/// `cuMemHostAlloc`: page-aligned host memory (flags accepted and ignored).
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemHostAlloc`: `pp` is NULL or writable for one pointer.
#[no_mangle]
pub unsafe extern "C" fn cuMemHostAlloc(
    pp: *mut *mut c_void,
    size: size_t,
    _flags: c_uint,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemHostAlloc(pp: *mut *mut c_void, size: size_t, _flags: c_uint));
    entry("cuMemHostAlloc", || host_alloc(pp, size))
}

hookable!(
    /// `cuMemFreeHost`.
    ///
    /// # Safety
    ///
    /// `cuda.h`'s contract for `cuMemFreeHost`: nothing uses the allocation `p` after the call.
    cuMemFreeHost(p: *mut c_void) -> CUresult => mem_free_host);

/// `cuMemFreeHost` without the patchable entry point.
///
/// # Safety
///
/// As `cuMemFreeHost`.
unsafe extern "C" fn mem_free_host(p: *mut c_void) -> CUresult {
    crate::vulkan::passthrough!(cuMemFreeHost(p: *mut c_void));
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
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemHostGetDevicePointer_v2`: `dptr` is NULL or writable for one
/// `CUdeviceptr`; `p` is only looked up, not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuMemHostGetDevicePointer_v2(
    dptr: *mut CUdeviceptr,
    p: *mut c_void,
    flags: c_uint,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemHostGetDevicePointer_v2(dptr: *mut CUdeviceptr, p: *mut c_void, flags: c_uint));
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
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemcpy` under unified addressing: `dst` and `src` are each device
/// memory of this process or host memory valid for `n` bytes (written, read).
#[no_mangle]
pub unsafe extern "C" fn cuMemcpy(dst: CUdeviceptr, src: CUdeviceptr, n: size_t) -> CUresult {
    crate::vulkan::passthrough!(cuMemcpy(dst: CUdeviceptr, src: CUdeviceptr, n: size_t));
    entry("cuMemcpy", || copy(dst, src, n as u64))
}

/// `cuMemcpyHtoD_v2`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemcpyHtoD_v2`: `src` is valid for every byte the call reads
/// through it.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyHtoD_v2(
    dst: CUdeviceptr,
    src: *const c_void,
    n: size_t,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemcpyHtoD_v2(dst: CUdeviceptr, src: *const c_void, n: size_t));
    entry("cuMemcpyHtoD_v2", || {
        device_range(dst, n as u64)?;
        copy(dst, src as u64, n as u64)
    })
}

/// `cuMemcpyDtoH_v2`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemcpyDtoH_v2`: `dst` is valid for every byte the call writes
/// through it.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoH_v2(
    dst: *mut c_void,
    src: CUdeviceptr,
    n: size_t,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemcpyDtoH_v2(dst: *mut c_void, src: CUdeviceptr, n: size_t));
    entry("cuMemcpyDtoH_v2", || {
        device_range(src, n as u64)?;
        copy(dst as u64, src, n as u64)
    })
}

/// `cuMemcpyDtoD_v2`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemcpyDtoD_v2`; no argument is dereferenced, so every
/// value is accepted.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoD_v2(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    n: size_t,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemcpyDtoD_v2(dst: CUdeviceptr, src: CUdeviceptr, n: size_t));
    entry("cuMemcpyDtoD_v2", || {
        device_range(src, n as u64)?;
        device_range(dst, n as u64)?;
        copy(dst, src, n as u64)
    })
}

/// `cuMemsetD8_v2`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemsetD8_v2`; no argument is dereferenced, so every
/// value is accepted.
#[no_mangle]
pub unsafe extern "C" fn cuMemsetD8_v2(dst: CUdeviceptr, v: u8, n: size_t) -> CUresult {
    crate::vulkan::passthrough!(sync cuMemsetD8_v2(dst: CUdeviceptr, v: u8, n: size_t));
    entry("cuMemsetD8_v2", || {
        device_range(dst, n as u64)?;
        // SAFETY: [dst, dst+n) is fake VRAM mapped in this process (checked above).
        unsafe { std::ptr::write_bytes(dst as *mut u8, v, n) };
        Ok(())
    })
}

/// `cuMemsetD32_v2`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemsetD32_v2`; no argument is dereferenced, so every
/// value is accepted.
#[no_mangle]
pub unsafe extern "C" fn cuMemsetD32_v2(dst: CUdeviceptr, v: c_uint, n: size_t) -> CUresult {
    crate::vulkan::passthrough!(sync cuMemsetD32_v2(dst: CUdeviceptr, v: c_uint, n: size_t));
    entry("cuMemsetD32_v2", || {
        if !dst.is_multiple_of(4) {
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
///
/// # Safety
///
/// `cuda.h`'s contract for `cuPointerSetAttribute`: `_value` is valid for every byte the call
/// reads through it.
#[no_mangle]
pub unsafe extern "C" fn cuPointerSetAttribute(
    _value: *const c_void,
    attr: c_int,
    ptr: CUdeviceptr,
) -> CUresult {
    guarded("cuPointerSetAttribute", || {
        if crate::vulkan::foreign(ptr) {
            crate::vulkan::passthrough!(cuPointerSetAttribute(_value: *const c_void, attr: c_int, ptr: CUdeviceptr));
        }
        entry("cuPointerSetAttribute", || {
            device_range(ptr, 1)?;
            if attr == 6 {
                Ok(())
            } else {
                Err(cu::INVALID_VALUE)
            }
        })
    })
}

/// `cuPointerGetAttribute` for CONTEXT, MEMORY_TYPE, DEVICE_POINTER, HOST_POINTER,
/// P2P_TOKENS, SYNC_MEMOPS, BUFFER_ID, DEVICE_ORDINAL, RANGE_START_ADDR, RANGE_SIZE, MAPPED.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuPointerGetAttribute`: `data` is valid for every byte the call
/// writes through it.
#[no_mangle]
pub unsafe extern "C" fn cuPointerGetAttribute(
    data: *mut c_void,
    attr: c_int,
    ptr: CUdeviceptr,
) -> CUresult {
    guarded("cuPointerGetAttribute", || {
        if crate::vulkan::forward_attribute(attr, ptr) {
            crate::vulkan::passthrough!(cuPointerGetAttribute(data: *mut c_void, attr: c_int, ptr: CUdeviceptr));
        }
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
    })
}

/// `cuMemcpyAsync` (runs synchronously).
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemcpyAsync`, as for [`cuMemcpy`]; `_s` is NULL or a live
/// stream.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyAsync(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    n: size_t,
    _s: *mut c_void,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemcpyAsync(dst: CUdeviceptr, src: CUdeviceptr, n: size_t, _s: *mut c_void));
    entry("cuMemcpyAsync", || copy(dst, src, n as u64))
}

/// `cuMemcpyHtoDAsync_v2` (runs synchronously).
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemcpyHtoDAsync_v2`: `src` is valid for every byte the call reads
/// through it; `_s` is NULL or a live stream.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyHtoDAsync_v2(
    dst: CUdeviceptr,
    src: *const c_void,
    n: size_t,
    _s: *mut c_void,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemcpyHtoDAsync_v2(dst: CUdeviceptr, src: *const c_void, n: size_t, _s: *mut c_void));
    entry("cuMemcpyHtoDAsync_v2", || {
        device_range(dst, n as u64)?;
        copy(dst, src as u64, n as u64)
    })
}

/// `cuMemcpyDtoHAsync_v2` (runs synchronously).
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemcpyDtoHAsync_v2`: `dst` is valid for every byte the call
/// writes through it; `_s` is NULL or a live stream.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoHAsync_v2(
    dst: *mut c_void,
    src: CUdeviceptr,
    n: size_t,
    _s: *mut c_void,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: CUdeviceptr, n: size_t, _s: *mut c_void));
    entry("cuMemcpyDtoHAsync_v2", || {
        device_range(src, n as u64)?;
        copy(dst as u64, src, n as u64)
    })
}

/// `cuMemsetD8Async` (runs synchronously).
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemsetD8Async`: `_s` is NULL or a live stream.
#[no_mangle]
pub unsafe extern "C" fn cuMemsetD8Async(
    dst: CUdeviceptr,
    v: u8,
    n: size_t,
    _s: *mut c_void,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemsetD8Async(dst: CUdeviceptr, v: u8, n: size_t, _s: *mut c_void));
    entry("cuMemsetD8Async", || {
        device_range(dst, n as u64)?;
        // SAFETY: [dst, dst+n) is fake VRAM mapped in this process (checked above).
        unsafe { std::ptr::write_bytes(dst as *mut u8, v, n) };
        Ok(())
    })
}
