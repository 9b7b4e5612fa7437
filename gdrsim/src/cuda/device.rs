//! Initialisation, the device, contexts, streams and error strings.

use super::*;
use std::sync::atomic::{AtomicI64, Ordering};

/// Copies `text` (truncated) and a NUL into the caller's buffer of `len` bytes.
fn copy_string(buf: *mut c_char, len: c_int, text: &[u8]) -> Result<(), CUresult> {
    if buf.is_null() || len <= 0 {
        return Err(cu::INVALID_VALUE);
    }
    let n = text.len().min(len as usize - 1);
    // SAFETY: the caller gave `len` writable bytes at `buf`; we write n + 1 <= len.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
    }
    Ok(())
}

/// `cuInit`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuInit`; no argument is dereferenced, so every value is accepted.
#[no_mangle]
pub unsafe extern "C" fn cuInit(flags: c_uint) -> CUresult {
    guarded("cuInit", || {
        match crate::vulkan::real_init(flags) {
            Some(r) if r != cu::SUCCESS => return r,
            _ => {}
        }
        entry("cuInit", || {
            if flags != 0 {
                return Err(cu::INVALID_VALUE);
            }
            STATE.lock().init_gpu()
        })
    })
}

/// `cuDriverGetVersion`: `GDRSIM_CUDA_VERSION`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuDriverGetVersion`: `v` is NULL or writable for one `c_int`.
#[no_mangle]
pub unsafe extern "C" fn cuDriverGetVersion(v: *mut c_int) -> CUresult {
    crate::vulkan::passthrough!(cuDriverGetVersion(v: *mut c_int));
    entry("cuDriverGetVersion", || out(v, config::get().cuda_version))
}

/// `cuDeviceGetCount`: one device.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuDeviceGetCount`: `n` is NULL or writable for one `c_int`.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetCount(n: *mut c_int) -> CUresult {
    crate::vulkan::passthrough!(cuDeviceGetCount(n: *mut c_int));
    entry("cuDeviceGetCount", || {
        initialized(&STATE.lock())?;
        out(n, 1)
    })
}

/// `cuDeviceGet`: ordinal 0 only.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuDeviceGet`: `dev` is NULL or writable for one `CUdevice`.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGet(dev: *mut CUdevice, ordinal: c_int) -> CUresult {
    crate::vulkan::passthrough!(cuDeviceGet(dev: *mut CUdevice, ordinal: c_int));
    entry("cuDeviceGet", || {
        initialized(&STATE.lock())?;
        check_dev(ordinal)?;
        out(dev, 0)
    })
}

/// `cuDeviceGetName`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuDeviceGetName`: `name` is NULL or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) -> CUresult {
    crate::vulkan::passthrough!(cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice));
    entry("cuDeviceGetName", || {
        initialized(&STATE.lock())?;
        check_dev(dev)?;
        copy_string(name, len, b"gdrsim emulated GPU")
    })
}

/// `cuDeviceGetAttribute`: values per profile (see `attrs`).
///
/// # Safety
///
/// `cuda.h`'s contract for `cuDeviceGetAttribute`: `pi` is NULL or writable for one `c_int`.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetAttribute(
    pi: *mut c_int,
    attr: c_int,
    dev: CUdevice,
) -> CUresult {
    crate::vulkan::passthrough!(cuDeviceGetAttribute(pi: *mut c_int, attr: c_int, dev: CUdevice));
    entry("cuDeviceGetAttribute", || {
        initialized(&STATE.lock())?;
        check_dev(dev)?;
        let v = attrs::value(config::get(), attr).ok_or(cu::INVALID_VALUE)?;
        out(pi, v)
    })
}

/// `cuDeviceTotalMem_v2`: the size of fake VRAM.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuDeviceTotalMem_v2`: `bytes` is NULL or writable for one `size_t`.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceTotalMem_v2(bytes: *mut size_t, dev: CUdevice) -> CUresult {
    crate::vulkan::passthrough!(cuDeviceTotalMem_v2(bytes: *mut size_t, dev: CUdevice));
    entry("cuDeviceTotalMem_v2", || {
        initialized(&STATE.lock())?;
        check_dev(dev)?;
        out(bytes, config::get().vram_size as size_t)
    })
}

/// `cuDevicePrimaryCtxRetain`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuDevicePrimaryCtxRetain`: `ctx` is NULL or writable for one
/// `CUcontext`.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(ctx: *mut CUcontext, dev: CUdevice) -> CUresult {
    crate::vulkan::passthrough!(cuDevicePrimaryCtxRetain(ctx: *mut CUcontext, dev: CUdevice));
    entry("cuDevicePrimaryCtxRetain", || {
        initialized(&STATE.lock())?;
        check_dev(dev)?;
        out(ctx, primary())?;
        PRIMARY_RETAINS.fetch_add(1, Ordering::Relaxed);
        Ok(())
    })
}

/// How many retains of the primary context are outstanding (for `cuDevicePrimaryCtxGetState`).
static PRIMARY_RETAINS: AtomicI64 = AtomicI64::new(0);

fn primary_release(name: &'static str, dev: CUdevice) -> CUresult {
    entry(name, || {
        initialized(&STATE.lock())?;
        check_dev(dev)?;
        let _ = PRIMARY_RETAINS.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n > 0).then(|| n - 1)
        });
        Ok(())
    })
}

/// `cuDevicePrimaryCtxGetState`: flags 0; active while retained.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuDevicePrimaryCtxGetState`: `flags` is NULL or writable for one
/// `c_uint`; `active` is NULL or writable for one `c_int`.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxGetState(
    dev: CUdevice,
    flags: *mut c_uint,
    active: *mut c_int,
) -> CUresult {
    crate::vulkan::passthrough!(cuDevicePrimaryCtxGetState(dev: CUdevice, flags: *mut c_uint, active: *mut c_int));
    entry("cuDevicePrimaryCtxGetState", || {
        initialized(&STATE.lock())?;
        check_dev(dev)?;
        out(flags, 0)?;
        out(
            active,
            (PRIMARY_RETAINS.load(Ordering::Relaxed) > 0) as c_int,
        )
    })
}

/// `cuDeviceGetPCIBusId`: the bus id the PCI attributes describe.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuDeviceGetPCIBusId`: `bus_id` is NULL or writable for `len`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetPCIBusId(
    bus_id: *mut c_char,
    len: c_int,
    dev: CUdevice,
) -> CUresult {
    crate::vulkan::passthrough!(cuDeviceGetPCIBusId(bus_id: *mut c_char, len: c_int, dev: CUdevice));
    entry("cuDeviceGetPCIBusId", || {
        initialized(&STATE.lock())?;
        check_dev(dev)?;
        let cfg = config::get();
        let field = |a| attrs::value(cfg, a).unwrap_or(0);
        let text = format!("{:04x}:{:02x}:{:02x}.0", field(50), field(33), field(34));
        copy_string(bus_id, len, text.as_bytes())
    })
}

/// The emulated device's UUID (the Vulkan stand-in's device reports it too).
pub(crate) const UUID: [u8; 16] = *b"gdrsim-device-00";

/// `cuDeviceGetUuid`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuDeviceGetUuid`: `uuid` is NULL or writable for one `[u8; 16]`.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetUuid(uuid: *mut [u8; 16], dev: CUdevice) -> CUresult {
    crate::vulkan::passthrough!(cuDeviceGetUuid(uuid: *mut [u8; 16], dev: CUdevice));
    entry("cuDeviceGetUuid", || {
        initialized(&STATE.lock())?;
        check_dev(dev)?;
        out(uuid, UUID)
    })
}

/// `cuDeviceGetUuid_v2`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuDeviceGetUuid_v2`: `uuid` is NULL or writable for one `[u8; 16]`.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetUuid_v2(uuid: *mut [u8; 16], dev: CUdevice) -> CUresult {
    crate::vulkan::passthrough!(cuDeviceGetUuid_v2(uuid: *mut [u8; 16], dev: CUdevice));
    entry("cuDeviceGetUuid_v2", || {
        initialized(&STATE.lock())?;
        check_dev(dev)?;
        out(uuid, UUID)
    })
}

/// `cuStreamCreate`: streams are a name only; everything runs synchronously.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuStreamCreate`: `stream` is NULL or writable for one pointer.
#[no_mangle]
pub unsafe extern "C" fn cuStreamCreate(stream: *mut *mut c_void, _flags: c_uint) -> CUresult {
    crate::vulkan::passthrough!(cuStreamCreate(stream: *mut *mut c_void, _flags: c_uint));
    entry("cuStreamCreate", || {
        initialized(&STATE.lock())?;
        need_ctx()?;
        out(stream, primary())
    })
}

/// `cuStreamDestroy_v2`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuStreamDestroy_v2`: `_stream` is NULL or a live stream.
#[no_mangle]
pub unsafe extern "C" fn cuStreamDestroy_v2(_stream: *mut c_void) -> CUresult {
    crate::vulkan::passthrough!(cuStreamDestroy_v2(_stream: *mut c_void));
    entry("cuStreamDestroy_v2", || Ok(()))
}

/// `cuDevicePrimaryCtxRelease_v2`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuDevicePrimaryCtxRelease_v2`; no argument is dereferenced, so every
/// value is accepted.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice) -> CUresult {
    guarded("cuDevicePrimaryCtxRelease_v2", || {
        crate::vulkan::passthrough!(cuDevicePrimaryCtxRelease_v2(dev: CUdevice));
        primary_release("cuDevicePrimaryCtxRelease_v2", dev)
    })
}

/// `cuDevicePrimaryCtxRelease` (the pre-11.0 ABI name).
///
/// # Safety
///
/// `cuda.h`'s contract for `cuDevicePrimaryCtxRelease`; no argument is dereferenced, so every
/// value is accepted.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease(dev: CUdevice) -> CUresult {
    guarded("cuDevicePrimaryCtxRelease", || {
        crate::vulkan::passthrough!(cuDevicePrimaryCtxRelease(dev: CUdevice));
        primary_release("cuDevicePrimaryCtxRelease", dev)
    })
}

/// `cuCtxSetCurrent`: the primary context or NULL, per thread.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuCtxSetCurrent`; no argument is dereferenced, so every
/// value is accepted.
#[no_mangle]
pub unsafe extern "C" fn cuCtxSetCurrent(ctx: CUcontext) -> CUresult {
    crate::vulkan::passthrough!(cuCtxSetCurrent(ctx: CUcontext));
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
///
/// # Safety
///
/// `cuda.h`'s contract for `cuCtxGetCurrent`: `ctx` is NULL or writable for one `CUcontext`.
#[no_mangle]
pub unsafe extern "C" fn cuCtxGetCurrent(ctx: *mut CUcontext) -> CUresult {
    crate::vulkan::passthrough!(cuCtxGetCurrent(ctx: *mut CUcontext));
    entry("cuCtxGetCurrent", || {
        initialized(&STATE.lock())?;
        out(ctx, current() as CUcontext)
    })
}

/// `cuCtxGetDevice`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuCtxGetDevice`: `dev` is NULL or writable for one `CUdevice`.
#[no_mangle]
pub unsafe extern "C" fn cuCtxGetDevice(dev: *mut CUdevice) -> CUresult {
    crate::vulkan::passthrough!(cuCtxGetDevice(dev: *mut CUdevice));
    entry("cuCtxGetDevice", || {
        need_ctx()?;
        out(dev, 0)
    })
}

/// `cuCtxSynchronize`: nothing runs asynchronously, so it returns at once.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuCtxSynchronize`; no argument is dereferenced, so every
/// value is accepted.
#[no_mangle]
pub unsafe extern "C" fn cuCtxSynchronize() -> CUresult {
    crate::vulkan::passthrough!(cuCtxSynchronize());
    entry("cuCtxSynchronize", need_ctx)
}

/// `cuStreamQuery`: always idle.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuStreamQuery`: `_stream` is NULL or a live stream.
#[no_mangle]
pub unsafe extern "C" fn cuStreamQuery(_stream: *mut c_void) -> CUresult {
    crate::vulkan::passthrough!(cuStreamQuery(_stream: *mut c_void));
    entry("cuStreamQuery", || Ok(()))
}

/// `cuStreamSynchronize`: always idle.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuStreamSynchronize`: `_stream` is NULL or a live stream.
#[no_mangle]
pub unsafe extern "C" fn cuStreamSynchronize(_stream: *mut c_void) -> CUresult {
    crate::vulkan::passthrough!(cuStreamSynchronize(_stream: *mut c_void));
    entry("cuStreamSynchronize", || Ok(()))
}

/// `cuGetErrorName`.
///
/// # Safety
///
/// `cuda.h`'s contract for `cuGetErrorName`: `s` is NULL or writable for one pointer.
#[no_mangle]
pub unsafe extern "C" fn cuGetErrorName(code: CUresult, s: *mut *const c_char) -> CUresult {
    guarded("cuGetErrorName", || {
        crate::vulkan::passthrough!(cuGetErrorName(code: CUresult, s: *mut *const c_char));
        error_text(code, s)
    })
}

/// `cuGetErrorString` (the emulator describes each code by its name).
///
/// # Safety
///
/// `cuda.h`'s contract for `cuGetErrorString`: `s` is NULL or writable for one pointer.
#[no_mangle]
pub unsafe extern "C" fn cuGetErrorString(code: CUresult, s: *mut *const c_char) -> CUresult {
    guarded("cuGetErrorString", || {
        crate::vulkan::passthrough!(cuGetErrorString(code: CUresult, s: *mut *const c_char));
        error_text(code, s)
    })
}

fn error_text(code: CUresult, s: *mut *const c_char) -> CUresult {
    if s.is_null() {
        return cu::INVALID_VALUE;
    }
    let (name, rc) = match cu::name_of(code) {
        Some(n) => (n.as_ptr(), cu::SUCCESS),
        None => (std::ptr::null(), cu::INVALID_VALUE),
    };
    // SAFETY: s is a non-NULL out-pointer from the caller.
    unsafe { *s = name };
    rc
}
