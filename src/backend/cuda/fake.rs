//! A CUDA driver made of Rust functions, for unit tests of the DMA-BUF backend without libcuda.
//! Exports are memfds, so that maps and data round trips are real. State is process-global
//! (the entry points take no user pointer): tests hold [`lock`] while they use it.

use super::driver::{Api, Driver};
use super::types::*;
use parking_lot::{Mutex, MutexGuard};
use std::cell::Cell;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering::SeqCst};
use std::sync::OnceLock;

/// Devices the fake has (at most 4).
pub static DEVICES: AtomicI32 = AtomicI32::new(2);
/// Bit n set: device n reports attribute 124.
pub static DMABUF_MASK: AtomicU32 = AtomicU32::new(0b11);
/// Attribute 100 on every device.
pub static COHERENT: AtomicBool = AtomicBool::new(false);
/// What `cuPointerGetAttribute(DEVICE_ORDINAL)` answers.
pub static POINTER_ORDINAL: AtomicI32 = AtomicI32::new(0);
/// Non-zero: the next export fails with this `CUresult`.
pub static EXPORT_FAIL: AtomicI32 = AtomicI32::new(0);
/// Non-zero: `cuDeviceGetCount` fails with this `CUresult`.
pub static COUNT_FAIL: AtomicI32 = AtomicI32::new(0);
/// Primary-context retain count per device.
pub static RETAINED: [AtomicI32; 4] = [const { AtomicI32::new(0) }; 4];
/// Number of `cuDevicePrimaryCtxRetain` calls.
pub static RETAIN_CALLS: AtomicI32 = AtomicI32::new(0);

/// One export: address, size, flags, and the context current at the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Export {
    pub addr: u64,
    pub size: usize,
    pub flags: u64,
    pub ctx: usize,
}

/// Exports made since the last [`lock`].
pub static EXPORTS: Mutex<Vec<Export>> = Mutex::new(Vec::new());

thread_local! {
    /// The calling thread's current context (0 = none), as in the real driver.
    pub static CURRENT: Cell<usize> = const { Cell::new(0) };
}

static LOCK: Mutex<()> = Mutex::new(());

/// The context value the fake hands out for `dev`'s primary context.
pub fn primary_ctx(dev: CUdevice) -> usize {
    0x1000 + dev as usize
}

/// Serialises tests that use the fake and resets it to two devices, both with dma-buf support,
/// not coherent, no failures, nothing retained, no current context on this thread.
pub fn lock() -> MutexGuard<'static, ()> {
    let g = LOCK.lock();
    DEVICES.store(2, SeqCst);
    DMABUF_MASK.store(0b11, SeqCst);
    COHERENT.store(false, SeqCst);
    POINTER_ORDINAL.store(0, SeqCst);
    EXPORT_FAIL.store(0, SeqCst);
    COUNT_FAIL.store(0, SeqCst);
    RETAIN_CALLS.store(0, SeqCst);
    for r in &RETAINED {
        r.store(0, SeqCst);
    }
    EXPORTS.lock().clear();
    CURRENT.with(|c| c.set(0));
    g
}

unsafe extern "C" fn init(_flags: c_uint) -> CUresult {
    0
}
unsafe extern "C" fn device_get(d: *mut CUdevice, ordinal: c_int) -> CUresult {
    if ordinal < 0 || ordinal >= DEVICES.load(SeqCst) {
        return 101;
    }
    // SAFETY: the caller passes a valid out pointer.
    unsafe { *d = ordinal };
    0
}
unsafe extern "C" fn device_get_count(n: *mut c_int) -> CUresult {
    let fail = COUNT_FAIL.load(SeqCst);
    if fail != 0 {
        return fail;
    }
    // SAFETY: valid out pointer.
    unsafe { *n = DEVICES.load(SeqCst) };
    0
}
unsafe extern "C" fn device_get_attribute(v: *mut c_int, attr: c_int, dev: CUdevice) -> CUresult {
    if dev < 0 || dev >= DEVICES.load(SeqCst) {
        return 101;
    }
    let value = match attr {
        attr::DMA_BUF_SUPPORTED => (DMABUF_MASK.load(SeqCst) >> dev) & 1 != 0,
        attr::PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES => COHERENT.load(SeqCst),
        _ => return 1,
    };
    // SAFETY: valid out pointer.
    unsafe { *v = c_int::from(value) };
    0
}
unsafe extern "C" fn export(
    h: *mut c_void,
    addr: CUdeviceptr,
    size: usize,
    ty: c_int,
    flags: u64,
) -> CUresult {
    let ctx = CURRENT.with(Cell::get);
    if ctx == 0 {
        return 201; // CUDA_ERROR_INVALID_CONTEXT, as the real driver without a context
    }
    if ty != MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || size == 0 {
        return 1;
    }
    let fail = EXPORT_FAIL.swap(0, SeqCst);
    if fail != 0 {
        return fail;
    }
    // SAFETY: the name is NUL-terminated.
    let fd = unsafe { libc::memfd_create(c"fake-dmabuf".as_ptr(), libc::MFD_CLOEXEC) };
    // SAFETY: fd is ours.
    if fd < 0 || unsafe { libc::ftruncate(fd, size as libc::off_t) } != 0 {
        return 2;
    }
    EXPORTS.lock().push(Export {
        addr,
        size,
        flags,
        ctx,
    });
    // SAFETY: the caller's out buffer holds an int.
    unsafe { *h.cast::<c_int>() = fd };
    0
}
unsafe extern "C" fn ctx_get_current(c: *mut CUcontext) -> CUresult {
    // SAFETY: valid out pointer.
    unsafe { *c = CURRENT.with(Cell::get) as CUcontext };
    0
}
unsafe extern "C" fn ctx_set_current(c: CUcontext) -> CUresult {
    CURRENT.with(|cur| cur.set(c as usize));
    0
}
unsafe extern "C" fn retain(c: *mut CUcontext, dev: CUdevice) -> CUresult {
    if dev < 0 || dev >= DEVICES.load(SeqCst) {
        return 101;
    }
    RETAIN_CALLS.fetch_add(1, SeqCst);
    RETAINED[dev as usize].fetch_add(1, SeqCst);
    // SAFETY: valid out pointer.
    unsafe { *c = primary_ctx(dev) as CUcontext };
    0
}
unsafe extern "C" fn release(dev: CUdevice) -> CUresult {
    if dev < 0 || dev >= DEVICES.load(SeqCst) {
        return 101;
    }
    RETAINED[dev as usize].fetch_sub(1, SeqCst);
    0
}
unsafe extern "C" fn pointer_get_attribute(
    v: *mut c_void,
    attr: c_int,
    addr: CUdeviceptr,
) -> CUresult {
    if attr != POINTER_ATTRIBUTE_DEVICE_ORDINAL || addr == 0 {
        return 1;
    }
    // SAFETY: DEVICE_ORDINAL writes one int.
    unsafe { *v.cast::<c_int>() = POINTER_ORDINAL.load(SeqCst) };
    0
}

/// The fake as a loaded driver (version 13030).
pub fn driver() -> &'static Driver {
    static D: OnceLock<&'static Driver> = OnceLock::new();
    D.get_or_init(|| {
        let api = Api {
            init,
            device_get,
            device_get_count,
            device_get_attribute,
            mem_get_handle_for_address_range: Ok(export),
            ctx_get_current,
            ctx_set_current,
            primary_ctx_retain: retain,
            primary_ctx_release: release,
            pointer_get_attribute,
            get_error_name: None,
            get_error_string: None,
            vmm: Err(super::Missing {
                name: "cuMemRetainAllocationHandle",
                code: status::NOT_FOUND,
                status: 0,
                version: MIN_DMABUF_MMAP_VERSION,
            }),
        };
        Box::leak(Box::new(Driver::new(api, MIN_DMABUF_MMAP_VERSION)))
    })
}
