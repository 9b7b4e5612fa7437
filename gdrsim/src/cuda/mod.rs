//! The CUDA driver API surface: the functions gdrcopy's tests, libgdrapi's DMA-BUF backend
//! and typical callers use, working on the fake GPU of [`crate::gpu`].
//!
//! # Safety
//!
//! Every exported function has the C contract of the CUDA function of the same name: pointer
//! arguments must be NULL or valid for what that function reads or writes. NULL out-pointers
//! are refused with CUDA_ERROR_INVALID_VALUE.

pub mod attrs;
mod context;
mod device;
mod dmabuf;
pub mod errors;
mod events;
mod hookable;
mod ipc;
mod legacy;
mod managed;
mod memory;
mod pointer;
mod procaddr;
mod vmm;

pub(crate) use device::UUID;

use crate::config;
use crate::gpu::VMM_GRANULARITY;
use crate::intercept::{set_kind, KIND_DMABUF, KIND_VMMFD};
use crate::real;
use crate::state::{pid, Dmabuf, State, VmmExport, STATE};
use errors as cu;
use libc::{c_char, c_int, c_uint, c_ulonglong, c_void, size_t};
use std::cell::Cell;

pub use gdrapi_abi::cuda::{
    CUcontext, CUdevice, CUdeviceptr, CUresult, MemAccessDesc, MemAllocationProp,
};

/// The CUDA functions other modules' unit tests drive the fake GPU with.
#[cfg(test)]
pub(crate) mod testing {
    pub use super::device::{cuDeviceGetUuid_v2, cuInit};
    pub use super::memory::{
        cuMemGetAddressRange_v2, cuMemGetInfo_v2, cuMemcpyDtoH_v2, cuMemsetD32_v2,
    };
    pub use super::pointer::cuPointerGetAttributes;
    pub use super::vmm::{
        cuMemAddressFree, cuMemAddressReserve, cuMemCreate, cuMemExportToShareableHandle,
        cuMemGetAllocationPropertiesFromHandle, cuMemMap, cuMemRelease,
        cuMemRetainAllocationHandle, cuMemUnmap,
    };
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

/// Runs an API function body: fault injection first, then `f`, inside [`guarded`].
fn entry(name: &'static str, f: impl FnOnce() -> Result<(), CUresult>) -> CUresult {
    guarded(name, || {
        if let Some(e) = crate::fail::check(name) {
            return e as CUresult;
        }
        match f() {
            Ok(()) => cu::SUCCESS,
            Err(e) => e,
        }
    })
}

/// Runs the whole body of the exported CUDA function `name` inside `gdrapi-boundary`'s guard:
/// a panic returns CUDA_ERROR_UNKNOWN instead of unwinding into C.
pub(crate) fn guarded(name: &'static str, body: impl FnOnce() -> CUresult) -> CUresult {
    gdrapi_boundary::guard_or(name, || cu::UNKNOWN, body)
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
