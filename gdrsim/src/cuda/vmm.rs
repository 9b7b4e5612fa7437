//! The virtual memory management calls (`cuMemCreate`, `cuMemMap`, ...).

use super::hookable::hookable;
use super::*;
use gdrapi_abi::cuda::{MemLocation, MEM_ALLOCATION_TYPE_PINNED, MEM_LOCATION_TYPE_DEVICE};

fn check_prop(prop: *const MemAllocationProp) -> Result<(), CUresult> {
    if prop.is_null() {
        return Err(cu::INVALID_VALUE);
    }
    // SAFETY: non-NULL pointer to a CUmemAllocationProp supplied by the caller.
    let p = unsafe { &*prop };
    if p.kind != MEM_ALLOCATION_TYPE_PINNED || p.location.kind != MEM_LOCATION_TYPE_DEVICE {
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

/// `cuMemCreate`: physical fake VRAM in multiples of the granularity; `requestedHandleTypes`
/// 0 or `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR` (other known types
/// CUDA_ERROR_NOT_SUPPORTED, unknown bits CUDA_ERROR_INVALID_VALUE).
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
        // SAFETY: checked non-NULL by check_prop; the caller's CUmemAllocationProp.
        let types = unsafe { (*prop).requested_handle_types } as u32;
        let h = st
            .gpu_mut()
            .ok_or(cu::NOT_INITIALIZED)?
            .vmm_create(size as u64, types)?;
        out(handle, h)
    })
}

/// `cuMemRelease`: drops one reference (`cuMemCreate` and each `cuMemRetainAllocationHandle`
/// give one); the memory lives on while referenced, mapped, pinned, exported or imported.
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
        if d.location.kind != MEM_LOCATION_TYPE_DEVICE {
            return Err(cu::INVALID_VALUE);
        }
        check_dev(d.location.id)?;
        device_range(ptr, size as u64)
    })
}

/// `cuMemRetainAllocationHandle`: the `cuMemCreate` handle mapped at `addr` (anywhere inside
/// a `cuMemMap`'d range), with one more reference for `cuMemRelease` to drop. Any other
/// address (`cuMemAlloc` memory, reserved but unmapped addresses, host memory) and a NULL
/// `handle` give CUDA_ERROR_INVALID_VALUE.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemRetainAllocationHandle`: `handle` is NULL or writable for one
/// `CUmemGenericAllocationHandle`; `addr` is not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn cuMemRetainAllocationHandle(
    handle: *mut u64,
    addr: *mut c_void,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemRetainAllocationHandle(handle: *mut u64, addr: *mut c_void));
    entry("cuMemRetainAllocationHandle", || {
        let mut st = STATE.lock();
        let g = st.gpu_mut().ok_or(cu::NOT_INITIALIZED)?;
        if handle.is_null() {
            return Err(cu::INVALID_VALUE);
        }
        let h = g.vmm_retain(addr as u64)?;
        out(handle, h)
    })
}

/// `cuMemGetAllocationPropertiesFromHandle`: pinned device memory of device 0 with the
/// handle types it was created with; everything else zero. A released or unknown handle
/// gives CUDA_ERROR_INVALID_VALUE.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemGetAllocationPropertiesFromHandle`: `prop` is NULL or
/// writable for one `CUmemAllocationProp`.
#[no_mangle]
pub unsafe extern "C" fn cuMemGetAllocationPropertiesFromHandle(
    prop: *mut MemAllocationProp,
    handle: u64,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemGetAllocationPropertiesFromHandle(prop: *mut MemAllocationProp, handle: u64));
    entry("cuMemGetAllocationPropertiesFromHandle", || {
        let st = STATE.lock();
        let g = st.gpu().ok_or(cu::NOT_INITIALIZED)?;
        if prop.is_null() {
            return Err(cu::INVALID_VALUE);
        }
        let types = g.vmm_handle_types(handle)?;
        out(
            prop,
            MemAllocationProp {
                kind: MEM_ALLOCATION_TYPE_PINNED,
                requested_handle_types: types as c_int,
                location: MemLocation {
                    kind: MEM_LOCATION_TYPE_DEVICE,
                    id: 0,
                },
                win32_handle_meta_data: std::ptr::null_mut(),
                compression_type: 0,
                gpu_direct_rdma_capable: 0,
                usage: 0,
                reserved: [0; 4],
            },
        )
    })
}

/// A new empty memfd standing for an opaque export fd: recognised by its number and inode.
fn export_fd() -> Option<c_int> {
    // SAFETY: the name is a NUL-terminated literal.
    let fd = unsafe { libc::memfd_create(c"gdrsim-vmm-export".as_ptr(), libc::MFD_CLOEXEC) };
    (fd >= 0).then_some(fd)
}

/// `cuMemExportToShareableHandle`: for `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR` (1) and an
/// allocation created with that type, writes a new `int` fd (each call a new one). The fd
/// holds the physical allocation until it is closed or a Vulkan import (the stand-in,
/// the Vulkan stand-in) consumes it; it cannot be mapped (mmap: ENODEV). Other handle types,
/// flags other than 0, a NULL out-pointer and unknown or released handles give
/// CUDA_ERROR_INVALID_VALUE; an allocation created without the POSIX fd type
/// [`crate::gpu::EXPORT_NOT_REQUESTED`].
///
/// # Safety
///
/// `cuda.h`'s contract for `cuMemExportToShareableHandle`: `shareable` is NULL or writable for
/// the handle `handle_type` names (an `int` for a POSIX fd).
#[no_mangle]
pub unsafe extern "C" fn cuMemExportToShareableHandle(
    shareable: *mut c_void,
    handle: u64,
    handle_type: c_int,
    flags: c_ulonglong,
) -> CUresult {
    crate::vulkan::passthrough!(cuMemExportToShareableHandle(shareable: *mut c_void, handle: u64, handle_type: c_int, flags: c_ulonglong));
    entry("cuMemExportToShareableHandle", || {
        let mut st = STATE.lock();
        let g = st.gpu_mut().ok_or(cu::NOT_INITIALIZED)?;
        if shareable.is_null()
            || flags != 0
            || handle_type != crate::gpu::HANDLE_TYPE_POSIX_FD as c_int
        {
            return Err(cu::INVALID_VALUE);
        }
        let gen = g.gen;
        let size = g.vmm_export(handle)?;
        let Some(fd) = export_fd() else {
            g.vmm_unhold(handle);
            return Err(cu::OUT_OF_MEMORY);
        };
        let ino = crate::driver::inode_of(fd).unwrap_or(0);
        st.vmm_exports.insert(
            fd,
            VmmExport {
                handle,
                size,
                gen,
                pid: pid(),
                ino,
            },
        );
        set_kind(fd, KIND_VMMFD);
        out(shareable.cast::<c_int>(), fd)
    })
}
