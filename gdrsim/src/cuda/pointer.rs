//! `cuPointerGetAttributes`: every attribute of a device, host or unknown pointer at once.
//!
//! As documented, a pointer the driver does not know (plain host memory) is no error: each
//! attribute gets its default NULL value and the call succeeds.

use super::memory::cuPointerGetAttribute;
use super::*;

/// What the driver knows about a pointer.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// `cuMemAlloc`/`cuMemAllocManaged` memory (managed if the flag is set).
    Device { managed: bool },
    /// Memory mapped from a `cuMemCreate` handle, with the handle types it was created with.
    Vmm(u32),
    /// `cuMemAllocHost`/`cuMemHostAlloc` memory.
    Host,
    /// Host memory registered with `cuMemHostRegister`: (start, length).
    Registered(u64, u64),
    /// Memory the driver does not know.
    Unknown,
}

fn kind_of(ptr: CUdeviceptr) -> Result<Kind, CUresult> {
    let st = STATE.lock();
    let g = st.gpu().ok_or(cu::NOT_INITIALIZED)?;
    if let Some((start, _)) = g.allocation_of(ptr) {
        return Ok(if let Some(types) = g.vmm_handle_types_at(ptr) {
            Kind::Vmm(types)
        } else {
            Kind::Device {
                managed: super::managed::is_managed(start),
            }
        });
    }
    let host = st
        .host
        .range(..=ptr)
        .next_back()
        .is_some_and(|(&b, &l)| ptr < b + l);
    if host {
        return Ok(Kind::Host);
    }
    Ok(match super::managed::registered(ptr) {
        Some((s, l)) => Kind::Registered(s, l),
        None => Kind::Unknown,
    })
}

/// Writes the default (NULL) value of `attr` for a pointer the driver does not know.
fn default_value(attr: c_int, data: *mut c_void) -> Result<(), CUresult> {
    match attr {
        1 | 3 | 4 | 7 | 11 | 17 | 19 | 20 => out(data.cast::<u64>(), 0),
        5 => out(data.cast::<[u64; 2]>(), [0, 0]),
        12 | 18 => out(data.cast::<size_t>(), 0),
        // DEVICE_ORDINAL: CU_DEVICE_INVALID
        9 => out(data.cast::<c_int>(), -2),
        2 | 6 | 8 | 10 | 13 | 14 | 15 | 16 => out(data.cast::<c_uint>(), 0),
        _ => Err(cu::INVALID_VALUE),
    }
}

/// One attribute of a pointer of kind `k`.
fn value(k: Kind, attr: c_int, data: *mut c_void, ptr: CUdeviceptr) -> Result<(), CUresult> {
    let device = matches!(k, Kind::Device { .. } | Kind::Vmm(_));
    match (k, attr) {
        (Kind::Unknown, _) => default_value(attr, data),
        // IS_MANAGED
        (Kind::Device { managed }, 8) => out(data.cast::<c_uint>(), managed as c_uint),
        (_, 8) => out(data.cast::<c_uint>(), 0),
        // IS_LEGACY_CUDA_IPC_CAPABLE: cuMemAlloc memory
        (_, 10) => out(
            data.cast::<c_uint>(),
            matches!(k, Kind::Device { managed: false }) as c_uint,
        ),
        // ALLOWED_HANDLE_TYPES: VMM memory's requested types; none for the rest
        (Kind::Vmm(types), 14) => out(data.cast::<c_uint>(), types),
        (_, 14) => out(data.cast::<c_uint>(), 0),
        // IS_GPU_DIRECT_RDMA_CAPABLE
        (_, 15) => out(data.cast::<c_uint>(), device as c_uint),
        // ACCESS_FLAGS: CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE
        (_, 16) => out(data.cast::<c_uint>(), 3),
        // MEMPOOL_HANDLE: not from a pool
        (_, 17) => out(data.cast::<u64>(), 0),
        // MAPPING_SIZE, MAPPING_BASE_ADDR: the allocation's range
        (_, 18) => {
            // SAFETY: RANGE_SIZE writes a size_t, as MAPPING_SIZE does.
            Err(unsafe { cuPointerGetAttribute(data, 12, ptr) }).or_else(ok_if_success)
        }
        (_, 19) => {
            // SAFETY: RANGE_START_ADDR writes a CUdeviceptr, as MAPPING_BASE_ADDR does.
            Err(unsafe { cuPointerGetAttribute(data, 11, ptr) }).or_else(ok_if_success)
        }
        // MEMORY_BLOCK_ID: the buffer id
        (_, 20) => {
            // SAFETY: BUFFER_ID writes an unsigned long long, as MEMORY_BLOCK_ID does.
            Err(unsafe { cuPointerGetAttribute(data, 7, ptr) }).or_else(ok_if_success)
        }
        (Kind::Registered(start, len), _) => registered_value(attr, data, ptr, start, len),
        _ => {
            // SAFETY: the caller's data pointer is valid for its attribute.
            Err(unsafe { cuPointerGetAttribute(data, attr, ptr) }).or_else(ok_if_success)
        }
    }
}

fn ok_if_success(r: CUresult) -> Result<(), CUresult> {
    if r == cu::SUCCESS {
        Ok(())
    } else {
        Err(r)
    }
}

/// Attributes of registered host memory: host memory of the current context, addressed
/// identically on the device.
fn registered_value(
    attr: c_int,
    data: *mut c_void,
    ptr: CUdeviceptr,
    start: u64,
    len: u64,
) -> Result<(), CUresult> {
    match attr {
        1 => out(data.cast::<CUcontext>(), primary()),
        2 => out(data.cast::<c_uint>(), 1),
        3 | 4 => out(data.cast::<u64>(), ptr),
        6 | 13 => out(data.cast::<c_int>(), 1),
        7 => out(data.cast::<u64>(), start),
        9 => out(data.cast::<c_int>(), 0),
        11 => out(data.cast::<u64>(), start),
        12 => out(data.cast::<size_t>(), len as size_t),
        _ => default_value(attr, data),
    }
}

/// `cuPointerGetAttributes`: each attribute in turn, device and host memory as
/// `cuPointerGetAttribute` answers them, memory the driver does not know with default values.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuPointerGetAttributes`: `attrs` is NULL or points to the readable
/// `c_int` values the call uses; `data` is NULL or holds `n` pointers, each NULL or writable
/// for the value of its attribute.
#[no_mangle]
pub unsafe extern "C" fn cuPointerGetAttributes(
    n: c_uint,
    attrs: *const c_int,
    data: *mut *mut c_void,
    ptr: CUdeviceptr,
) -> CUresult {
    guarded("cuPointerGetAttributes", || {
        if crate::vulkan::foreign(ptr) {
            crate::vulkan::passthrough!(cuPointerGetAttributes(n: c_uint, attrs: *const c_int, data: *mut *mut c_void, ptr: CUdeviceptr));
        }
        entry("cuPointerGetAttributes", || {
            if n == 0 {
                return Ok(());
            }
            if attrs.is_null() || data.is_null() {
                return Err(cu::INVALID_VALUE);
            }
            let k = kind_of(ptr)?;
            for i in 0..n as usize {
                // SAFETY: the caller passes `n` attributes and `n` data pointers.
                let (a, d) = unsafe { (*attrs.add(i), *data.add(i)) };
                if d.is_null() {
                    return Err(cu::INVALID_VALUE);
                }
                value(k, a, d, ptr)?;
            }
            Ok(())
        })
    })
}
