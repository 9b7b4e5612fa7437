//! The virtual memory management calls (`cuMemCreate`, `cuMemMap`, ...).

use super::hookable::hookable;
use super::*;

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
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemGetAllocationGranularity`: `g` is NULL or writable for one
/// `size_t`; `prop` is NULL or points to the readable `MemAllocationProp` values the call uses.
#[no_mangle]
pub unsafe extern "C" fn cuMemGetAllocationGranularity(
    g: *mut size_t,
    prop: *const MemAllocationProp,
    _option: c_int,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemGetAllocationGranularity(g: *mut size_t, prop: *const MemAllocationProp, _option: c_int));
    entry("cuMemGetAllocationGranularity", || {
        initialized(&STATE.lock())?;
        check_prop(prop)?;
        out(g, VMM_GRANULARITY as size_t)
    })
}

/// `cuMemCreate`: physical fake VRAM in multiples of the granularity.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemCreate`: `handle` is NULL or writable for one `u64`; `prop` is
/// NULL or points to the readable `MemAllocationProp` values the call uses.
#[no_mangle]
pub unsafe extern "C" fn cuMemCreate(
    handle: *mut u64,
    size: size_t,
    prop: *const MemAllocationProp,
    flags: c_ulonglong,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemCreate(handle: *mut u64, size: size_t, prop: *const MemAllocationProp, flags: c_ulonglong));
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
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemRelease`; no argument is dereferenced, so every
/// value is accepted.
#[no_mangle]
pub unsafe extern "C" fn cuMemRelease(handle: u64) -> CUresult {
    crate::vulkan::passthrough!(cuMemRelease(handle: u64));
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
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemAddressReserve`: `ptr` is NULL or writable for one
/// `CUdeviceptr`.
#[no_mangle]
pub unsafe extern "C" fn cuMemAddressReserve(
    ptr: *mut CUdeviceptr,
    size: size_t,
    align: size_t,
    _addr: CUdeviceptr,
    flags: c_ulonglong,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemAddressReserve(ptr: *mut CUdeviceptr, size: size_t, align: size_t, _addr: CUdeviceptr, flags: c_ulonglong));
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
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemAddressFree`; no argument is dereferenced, so every
/// value is accepted.
#[no_mangle]
pub unsafe extern "C" fn cuMemAddressFree(ptr: CUdeviceptr, size: size_t) -> CUresult {
    crate::vulkan::passthrough!(cuMemAddressFree(ptr: CUdeviceptr, size: size_t));
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

hookable!(
    /// `cuMemMap`.
    ///
    /// # Safety
    ///
    /// `cuda.h`'s contract for `cuMemMap`; no argument is dereferenced, so every value is accepted.
    cuMemMap(ptr: CUdeviceptr, size: size_t, offset: size_t, handle: u64, flags: c_ulonglong)
        -> CUresult => mem_map);

/// `cuMemMap` without the patchable entry point.
///
/// # Safety
///
/// As `cuMemMap`.
unsafe extern "C" fn mem_map(
    ptr: CUdeviceptr,
    size: size_t,
    offset: size_t,
    handle: u64,
    flags: c_ulonglong,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemMap(ptr: CUdeviceptr, size: size_t, offset: size_t, handle: u64, flags: c_ulonglong));
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

hookable!(
    /// `cuMemUnmap`: non-persistent pins of the range are invalidated.
    ///
    /// # Safety
    ///
    /// `cuda.h`'s contract for `cuMemUnmap`; no argument is dereferenced, so every value is
    /// accepted.
    cuMemUnmap(ptr: CUdeviceptr, size: size_t) -> CUresult => mem_unmap);

/// `cuMemUnmap` without the patchable entry point.
///
/// # Safety
///
/// As `cuMemUnmap`.
unsafe extern "C" fn mem_unmap(ptr: CUdeviceptr, size: size_t) -> CUresult {
    crate::vulkan::passthrough!(cuMemUnmap(ptr: CUdeviceptr, size: size_t));
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
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemSetAccess`: `desc` is NULL or points to the readable
/// `MemAccessDesc` values the call uses.
#[no_mangle]
pub unsafe extern "C" fn cuMemSetAccess(
    ptr: CUdeviceptr,
    size: size_t,
    desc: *const MemAccessDesc,
    count: size_t,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemSetAccess(ptr: CUdeviceptr, size: size_t, desc: *const MemAccessDesc, count: size_t));
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
