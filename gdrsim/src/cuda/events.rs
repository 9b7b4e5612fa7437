//! Events and host callbacks. Work never waits in the emulator, so an event is complete as
//! soon as it is recorded and a callback runs at once, on the calling thread.

use super::*;
use std::collections::HashSet;

/// Live events (their handles are the addresses of leaked boxes).
static EVENTS: parking_lot::Mutex<Option<HashSet<usize>>> = parking_lot::Mutex::new(None);

fn live(e: *mut c_void) -> Result<(), CUresult> {
    let ev = EVENTS.lock();
    if ev.as_ref().is_some_and(|s| s.contains(&(e as usize))) {
        Ok(())
    } else {
        Err(cu::INVALID_HANDLE)
    }
}

/// `cuEventCreate`.
#[no_mangle]
pub unsafe extern "C" fn cuEventCreate(e: *mut *mut c_void, _flags: c_uint) -> CUresult {
    crate::vulkan::passthrough!(cuEventCreate(e: *mut *mut c_void, _flags: c_uint));
    entry("cuEventCreate", || {
        initialized(&STATE.lock())?;
        need_ctx()?;
        if e.is_null() {
            return Err(cu::INVALID_VALUE);
        }
        let h = Box::into_raw(Box::new(0u64)) as usize;
        EVENTS.lock().get_or_insert_with(HashSet::new).insert(h);
        out(e, h as *mut c_void)
    })
}

/// `cuEventDestroy_v2`.
#[no_mangle]
pub unsafe extern "C" fn cuEventDestroy_v2(e: *mut c_void) -> CUresult {
    crate::vulkan::passthrough!(cuEventDestroy_v2(e: *mut c_void));
    entry("cuEventDestroy_v2", || {
        let mut ev = EVENTS.lock();
        if !ev.as_mut().is_some_and(|s| s.remove(&(e as usize))) {
            return Err(cu::INVALID_HANDLE);
        }
        // SAFETY: `e` was created by cuEventCreate from Box::into_raw and has just been
        // removed from the live set, so it is freed once.
        drop(unsafe { Box::from_raw(e.cast::<u64>()) });
        Ok(())
    })
}

/// `cuEventRecord`: complete at once.
#[no_mangle]
pub unsafe extern "C" fn cuEventRecord(e: *mut c_void, _stream: *mut c_void) -> CUresult {
    crate::vulkan::passthrough!(cuEventRecord(e: *mut c_void, _stream: *mut c_void));
    entry("cuEventRecord", || live(e))
}

/// `cuEventQuery`: every live event is complete.
#[no_mangle]
pub unsafe extern "C" fn cuEventQuery(e: *mut c_void) -> CUresult {
    crate::vulkan::passthrough!(cuEventQuery(e: *mut c_void));
    entry("cuEventQuery", || live(e))
}

/// `cuEventSynchronize`.
#[no_mangle]
pub unsafe extern "C" fn cuEventSynchronize(e: *mut c_void) -> CUresult {
    crate::vulkan::passthrough!(cuEventSynchronize(e: *mut c_void));
    entry("cuEventSynchronize", || live(e))
}

/// `cuStreamWaitEvent`.
#[no_mangle]
pub unsafe extern "C" fn cuStreamWaitEvent(
    _stream: *mut c_void,
    e: *mut c_void,
    _flags: c_uint,
) -> CUresult {
    crate::vulkan::passthrough!(cuStreamWaitEvent(_stream: *mut c_void, e: *mut c_void, _flags: c_uint));
    entry("cuStreamWaitEvent", || live(e))
}

/// `CUstreamCallback`.
pub type StreamCallback = Option<unsafe extern "C" fn(*mut c_void, CUresult, *mut c_void)>;
/// `CUhostFn`.
pub type HostFn = Option<unsafe extern "C" fn(*mut c_void)>;

/// `cuStreamAddCallback`: runs the callback at once with CUDA_SUCCESS; flags must be 0.
#[no_mangle]
pub unsafe extern "C" fn cuStreamAddCallback(
    stream: *mut c_void,
    cb: StreamCallback,
    data: *mut c_void,
    flags: c_uint,
) -> CUresult {
    guarded("cuStreamAddCallback", || {
        crate::vulkan::passthrough!(cuStreamAddCallback(stream: *mut c_void, cb: StreamCallback, data: *mut c_void, flags: c_uint));
        let r = entry("cuStreamAddCallback", || {
            initialized(&STATE.lock())?;
            if cb.is_none() || flags != 0 {
                return Err(cu::INVALID_VALUE);
            }
            Ok(())
        });
        if let (cu::SUCCESS, Some(f)) = (r, cb) {
            // SAFETY: the caller's callback with the caller's data, as the driver would call it;
            // no emulator lock is held.
            unsafe { f(stream, cu::SUCCESS, data) };
        }
        r
    })
}

/// `cuLaunchHostFunc`: runs the function at once.
#[no_mangle]
pub unsafe extern "C" fn cuLaunchHostFunc(
    _stream: *mut c_void,
    f: HostFn,
    data: *mut c_void,
) -> CUresult {
    guarded("cuLaunchHostFunc", || {
        crate::vulkan::passthrough!(cuLaunchHostFunc(_stream: *mut c_void, f: HostFn, data: *mut c_void));
        let r = entry("cuLaunchHostFunc", || {
            initialized(&STATE.lock())?;
            f.map(|_| ()).ok_or(cu::INVALID_VALUE)
        });
        if let (cu::SUCCESS, Some(f)) = (r, f) {
            // SAFETY: the caller's function with the caller's data; no emulator lock is held.
            unsafe { f(data) };
        }
        r
    })
}
