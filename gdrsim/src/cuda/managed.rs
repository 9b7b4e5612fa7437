//! Managed and pitched allocations, host memory registration, managed-range queries and the
//! device-to-device async copy.
//!
//! Managed memory is fake VRAM like `cuMemAlloc` memory (the host reaches both), told apart by
//! `CU_POINTER_ATTRIBUTE_IS_MANAGED`.

use super::hookable::hookable;
use super::memory::mem_alloc;
use super::*;
use std::collections::{BTreeMap, BTreeSet};

/// `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED`.
const HOST_MEMORY_ALREADY_REGISTERED: CUresult = 712;
/// `CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED`.
const HOST_MEMORY_NOT_REGISTERED: CUresult = 713;
/// `CU_DEVICE_INVALID`.
const DEVICE_INVALID: c_int = -2;

/// Start addresses of the live managed allocations.
static MANAGED: parking_lot::Mutex<BTreeSet<u64>> = parking_lot::Mutex::new(BTreeSet::new());
/// Host ranges registered with `cuMemHostRegister`: start -> length.
static REGISTERED: parking_lot::Mutex<BTreeMap<u64, u64>> =
    parking_lot::Mutex::new(BTreeMap::new());

/// Whether the allocation starting at `start` is managed memory.
pub fn is_managed(start: u64) -> bool {
    MANAGED.lock().contains(&start)
}

/// Forgets the managed allocation starting at `start` (called when it is freed).
pub fn forget(start: u64) {
    MANAGED.lock().remove(&start);
}

/// The registered host range containing `p`: (start, length).
pub fn registered(p: u64) -> Option<(u64, u64)> {
    REGISTERED
        .lock()
        .range(..=p)
        .next_back()
        .filter(|(&s, &l)| p < s + l)
        .map(|(&s, &l)| (s, l))
}

unsafe extern "C" fn alloc_managed(
    dptr: *mut CUdeviceptr,
    size: size_t,
    flags: c_uint,
) -> CUresult {
    guarded("cuMemAllocManaged", || {
        crate::vulkan::passthrough!(cuMemAllocManaged(dptr: *mut CUdeviceptr, size: size_t, flags: c_uint));
        // CU_MEM_ATTACH_GLOBAL (1) or CU_MEM_ATTACH_HOST (2), exactly one.
        if flags != 1 && flags != 2 {
            return cu::INVALID_VALUE;
        }
        // SAFETY: same out-pointer contract as cuMemAlloc_v2.
        let r = unsafe { mem_alloc(dptr, size) };
        if r == cu::SUCCESS {
            // SAFETY: cuMemAlloc_v2 succeeded, so dptr is a valid, written out-pointer.
            MANAGED.lock().insert(unsafe { dptr.read_unaligned() });
        }
        r
    })
}

hookable!(
    /// `cuMemAllocManaged`: fake VRAM flagged as managed; `flags` is CU_MEM_ATTACH_GLOBAL or
    /// CU_MEM_ATTACH_HOST.
    cuMemAllocManaged(dptr: *mut CUdeviceptr, size: size_t, flags: c_uint) -> CUresult
        => alloc_managed);

unsafe extern "C" fn alloc_pitch(
    dptr: *mut CUdeviceptr,
    pitch: *mut size_t,
    width: size_t,
    height: size_t,
    elem: c_uint,
) -> CUresult {
    guarded("cuMemAllocPitch_v2", || {
        if pitch.is_null() || width == 0 || height == 0 || !matches!(elem, 4 | 8 | 16) {
            return cu::INVALID_VALUE;
        }
        // Rows aligned to 512 bytes, as the driver's texture pitch alignment.
        let Some(p) = width.checked_add(511).map(|w| w & !511) else {
            return cu::INVALID_VALUE;
        };
        let Some(total) = p.checked_mul(height) else {
            return cu::OUT_OF_MEMORY;
        };
        // SAFETY: same out-pointer contract as cuMemAlloc_v2.
        let r = unsafe { mem_alloc(dptr, total) };
        if r == cu::SUCCESS {
            // SAFETY: pitch is a non-NULL out-pointer from the caller.
            unsafe { pitch.write_unaligned(p) };
        }
        r
    })
}

hookable!(
    /// `cuMemAllocPitch_v2`: rows of `width` bytes padded to 512.
    cuMemAllocPitch_v2(dptr: *mut CUdeviceptr, pitch: *mut size_t, width: size_t, height: size_t,
                       elem: c_uint) -> CUresult => alloc_pitch);
hookable!(
    /// `cuMemAllocPitch` (pre-3.2 ABI name).
    cuMemAllocPitch(dptr: *mut CUdeviceptr, pitch: *mut size_t, width: size_t, height: size_t,
                    elem: c_uint) -> CUresult => alloc_pitch);

/// `cuMemHostRegister_v2`: page-locks (records) a host range; overlapping an already
/// registered range gives CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED.
#[no_mangle]
pub unsafe extern "C" fn cuMemHostRegister_v2(
    p: *mut c_void,
    n: size_t,
    _flags: c_uint,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemHostRegister_v2(p: *mut c_void, n: size_t, _flags: c_uint));
    entry("cuMemHostRegister_v2", || {
        initialized(&STATE.lock())?;
        need_ctx()?;
        let (s, l) = (p as u64, n as u64);
        if p.is_null() || n == 0 || s.checked_add(l).is_none() {
            return Err(cu::INVALID_VALUE);
        }
        let mut reg = REGISTERED.lock();
        let overlaps = reg
            .range(..s + l)
            .next_back()
            .is_some_and(|(&rs, &rl)| s < rs + rl);
        if overlaps {
            return Err(HOST_MEMORY_ALREADY_REGISTERED);
        }
        reg.insert(s, l);
        Ok(())
    })
}

/// `cuMemHostRegister` (pre-6.5 ABI name).
#[no_mangle]
pub unsafe extern "C" fn cuMemHostRegister(p: *mut c_void, n: size_t, flags: c_uint) -> CUresult {
    guarded("cuMemHostRegister", || {
        // SAFETY: same contract.
        unsafe { cuMemHostRegister_v2(p, n, flags) }
    })
}

/// `cuMemHostUnregister`: `p` must be the start of a registered range.
#[no_mangle]
pub unsafe extern "C" fn cuMemHostUnregister(p: *mut c_void) -> CUresult {
    crate::vulkan::passthrough!(cuMemHostUnregister(p: *mut c_void));
    entry("cuMemHostUnregister", || {
        initialized(&STATE.lock())?;
        REGISTERED
            .lock()
            .remove(&(p as u64))
            .map(|_| ())
            .ok_or(HOST_MEMORY_NOT_REGISTERED)
    })
}

/// `cuMemRangeGetAttribute` on managed memory: not read-mostly, no preferred location, no
/// accessed-by device, never prefetched (the defaults of untouched managed memory).
#[no_mangle]
pub unsafe extern "C" fn cuMemRangeGetAttribute(
    data: *mut c_void,
    size: size_t,
    attr: c_int,
    ptr: CUdeviceptr,
    count: size_t,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemRangeGetAttribute(data: *mut c_void, size: size_t, attr: c_int, ptr: CUdeviceptr, count: size_t));
    entry("cuMemRangeGetAttribute", || {
        let st = STATE.lock();
        let g = st.gpu().ok_or(cu::NOT_INITIALIZED)?;
        let (start, len) = g.allocation_of(ptr).ok_or(cu::INVALID_VALUE)?;
        if data.is_null() || count == 0 || !is_managed(start) || ptr + count as u64 > start + len {
            return Err(cu::INVALID_VALUE);
        }
        let ints = size / 4;
        let fill = |v: c_int, n: usize| {
            for i in 0..n {
                // SAFETY: data holds `size` bytes, and i < size / 4.
                unsafe { data.cast::<c_int>().add(i).write_unaligned(v) };
            }
        };
        match attr {
            // READ_MOSTLY
            1 if size == 4 => fill(0, 1),
            // PREFERRED_LOCATION, LAST_PREFETCH_LOCATION
            2 | 4 if size == 4 => fill(DEVICE_INVALID, 1),
            // ACCESSED_BY: a multiple of 4 bytes
            3 if size.is_multiple_of(4) && ints > 0 => fill(DEVICE_INVALID, ints),
            _ => return Err(cu::INVALID_VALUE),
        }
        Ok(())
    })
}

/// `cuMemcpyDtoDAsync_v2` (runs synchronously).
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoDAsync_v2(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    n: size_t,
    _stream: *mut c_void,
) -> CUresult {
    guarded("cuMemcpyDtoDAsync_v2", || {
        crate::vulkan::passthrough!(cuMemcpyDtoDAsync_v2(dst: CUdeviceptr, src: CUdeviceptr, n: size_t, _stream: *mut c_void));
        // SAFETY: same contract as cuMemcpyDtoD_v2.
        unsafe { super::memory::cuMemcpyDtoD_v2(dst, src, n) }
    })
}
