//! The context stack (`cuCtxPushCurrent`/`cuCtxPopCurrent`) and created contexts.
//!
//! The emulated device has one address space, so a created context is the primary context:
//! `cuCtxCreate` retains and pushes it, `cuCtxDestroy` pops it where current.

use super::*;
use std::cell::RefCell;

thread_local! {
    /// Contexts pushed over the current one, innermost last.
    static STACK: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

fn valid(ctx: CUcontext) -> Result<(), CUresult> {
    if ctx.is_null() || ctx != primary() {
        Err(cu::INVALID_CONTEXT)
    } else {
        Ok(())
    }
}

/// `cuCtxPushCurrent_v2`: makes `ctx` current, keeping the previous one below it.
#[no_mangle]
pub unsafe extern "C" fn cuCtxPushCurrent_v2(ctx: CUcontext) -> CUresult {
    crate::vulkan::passthrough!(cuCtxPushCurrent_v2(ctx: CUcontext));
    entry("cuCtxPushCurrent_v2", || {
        initialized(&STATE.lock())?;
        valid(ctx)?;
        STACK.with(|s| s.borrow_mut().push(current()));
        CURRENT.with(|c| c.set(ctx as usize));
        Ok(())
    })
}

/// `cuCtxPopCurrent_v2`: returns the current context and restores the one pushed below it.
#[no_mangle]
pub unsafe extern "C" fn cuCtxPopCurrent_v2(ctx: *mut CUcontext) -> CUresult {
    crate::vulkan::passthrough!(cuCtxPopCurrent_v2(ctx: *mut CUcontext));
    entry("cuCtxPopCurrent_v2", || {
        initialized(&STATE.lock())?;
        let cur = current();
        if cur == 0 {
            return Err(cu::INVALID_CONTEXT);
        }
        let below = STACK.with(|s| s.borrow_mut().pop()).unwrap_or(0);
        CURRENT.with(|c| c.set(below));
        if !ctx.is_null() {
            out(ctx, cur as CUcontext)?;
        }
        Ok(())
    })
}

/// `cuCtxCreate_v2`: the primary context, made current (see the module documentation).
#[no_mangle]
pub unsafe extern "C" fn cuCtxCreate_v2(
    ctx: *mut CUcontext,
    _flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    crate::vulkan::passthrough!(cuCtxCreate_v2(ctx: *mut CUcontext, _flags: c_uint, dev: CUdevice));
    entry("cuCtxCreate_v2", || {
        initialized(&STATE.lock())?;
        check_dev(dev)?;
        if ctx.is_null() {
            return Err(cu::INVALID_VALUE);
        }
        STACK.with(|s| s.borrow_mut().push(current()));
        CURRENT.with(|c| c.set(primary() as usize));
        out(ctx, primary())
    })
}

/// `cuCtxDestroy_v2`: pops the context where it is current.
#[no_mangle]
pub unsafe extern "C" fn cuCtxDestroy_v2(ctx: CUcontext) -> CUresult {
    crate::vulkan::passthrough!(cuCtxDestroy_v2(ctx: CUcontext));
    entry("cuCtxDestroy_v2", || {
        initialized(&STATE.lock())?;
        valid(ctx)?;
        if current() == ctx as usize {
            let below = STACK.with(|s| s.borrow_mut().pop()).unwrap_or(0);
            CURRENT.with(|c| c.set(below));
        }
        Ok(())
    })
}

/// `cuCtxDetach` (the pre-4.0 name of `cuCtxDestroy`).
#[no_mangle]
pub unsafe extern "C" fn cuCtxDetach(ctx: CUcontext) -> CUresult {
    guarded("cuCtxDetach", || {
        // SAFETY: same contract.
        unsafe { cuCtxDestroy_v2(ctx) }
    })
}

/// `cuCtxGetId`: the primary context's id is 1.
#[no_mangle]
pub unsafe extern "C" fn cuCtxGetId(ctx: CUcontext, id: *mut c_ulonglong) -> CUresult {
    crate::vulkan::passthrough!(cuCtxGetId(ctx: CUcontext, id: *mut c_ulonglong));
    entry("cuCtxGetId", || {
        initialized(&STATE.lock())?;
        let ctx = if ctx.is_null() {
            current() as CUcontext
        } else {
            ctx
        };
        valid(ctx)?;
        out(id, 1)
    })
}
