//! Sharing memory between processes: legacy IPC handles, memory pools and shareable handles.
//!
//! The fake VRAM of one process cannot be mapped into another, so these calls return the
//! documented error a driver gives when sharing is impossible; what can be answered within one
//! process (exporting an IPC handle, refusing to open it in its own process) is. With the
//! Vulkan backing's real driver, only handles of arena memory stay the emulator's.

use super::*;

/// `CUipcMemHandle`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IpcMemHandle {
    reserved: [u8; 64],
}

/// `CUDA_ERROR_MAP_FAILED`.
const MAP_FAILED: CUresult = 205;
const MAGIC: &[u8; 8] = b"gdrsimip";

/// `cuIpcGetMemHandle`: a handle naming the allocation of `dptr` in this process.
#[no_mangle]
pub unsafe extern "C" fn cuIpcGetMemHandle(
    handle: *mut IpcMemHandle,
    dptr: CUdeviceptr,
) -> CUresult {
    guarded("cuIpcGetMemHandle", || {
        // Arena memory is `cuMemAlloc` memory, which the real driver can export; its import into
        // CUDA (external memory) cannot be, so the emulator answers for it.
        if crate::vulkan::foreign(dptr) {
            crate::vulkan::passthrough!(cuIpcGetMemHandle(handle: *mut IpcMemHandle, dptr: CUdeviceptr));
        }
        entry("cuIpcGetMemHandle", || {
            let st = STATE.lock();
            let g = st.gpu().ok_or(cu::NOT_INITIALIZED)?;
            let (base, size) = g.allocation_of(dptr).ok_or(cu::INVALID_VALUE)?;
            let mut h = IpcMemHandle { reserved: [0; 64] };
            h.reserved[..8].copy_from_slice(MAGIC);
            h.reserved[8..12].copy_from_slice(&pid().to_ne_bytes());
            h.reserved[16..24].copy_from_slice(&g.gen.to_ne_bytes());
            h.reserved[24..32].copy_from_slice(&base.to_ne_bytes());
            h.reserved[32..40].copy_from_slice(&size.to_ne_bytes());
            out(handle, h)
        })
    })
}

/// `cuIpcOpenMemHandle_v2`: CUDA_ERROR_INVALID_CONTEXT for a handle of this process (the
/// driver does not open its own process's handles), CUDA_ERROR_MAP_FAILED for another
/// process's, CUDA_ERROR_INVALID_VALUE for anything else.
#[no_mangle]
pub unsafe extern "C" fn cuIpcOpenMemHandle_v2(
    dptr: *mut CUdeviceptr,
    handle: IpcMemHandle,
    _flags: c_uint,
) -> CUresult {
    guarded("cuIpcOpenMemHandle_v2", || {
        if &handle.reserved[..8] != MAGIC {
            crate::vulkan::passthrough!(cuIpcOpenMemHandle_v2(dptr: *mut CUdeviceptr, handle: IpcMemHandle, _flags: c_uint));
        }
        entry("cuIpcOpenMemHandle_v2", || {
            initialized(&STATE.lock())?;
            if dptr.is_null() || &handle.reserved[..8] != MAGIC {
                return Err(cu::INVALID_VALUE);
            }
            let mut p = [0u8; 4];
            p.copy_from_slice(&handle.reserved[8..12]);
            if i32::from_ne_bytes(p) == pid() {
                Err(cu::INVALID_CONTEXT)
            } else {
                Err(MAP_FAILED)
            }
        })
    })
}

/// `cuIpcCloseMemHandle`: nothing is ever opened.
#[no_mangle]
pub unsafe extern "C" fn cuIpcCloseMemHandle(_dptr: CUdeviceptr) -> CUresult {
    guarded("cuIpcCloseMemHandle", || {
        if crate::vulkan::foreign(_dptr) {
            crate::vulkan::passthrough!(cuIpcCloseMemHandle(_dptr: CUdeviceptr));
        }
        entry("cuIpcCloseMemHandle", || Err(cu::INVALID_VALUE))
    })
}

/// Defines functions that answer CUDA_ERROR_NOT_SUPPORTED: the device reports no memory pools
/// (attribute 115), and shareable handles are not imported back into CUDA.
macro_rules! not_supported {
    ($($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*);)*) => {$(
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> CUresult {
            crate::vulkan::passthrough!($name($($arg: $ty),*));
            entry(stringify!($name), || {
                initialized(&STATE.lock())?;
                Err(cu::NOT_SUPPORTED)
            })
        }
    )*};
}

not_supported! {
    /// `cuMemPoolDestroy`.
    cuMemPoolDestroy(_pool: *mut c_void);
    /// `cuMemPoolSetAccess`.
    cuMemPoolSetAccess(_pool: *mut c_void, _map: *const MemAccessDesc, _count: size_t);
    /// `cuMemPoolExportPointer`.
    cuMemPoolExportPointer(_out: *mut c_void, _ptr: CUdeviceptr);
    /// `cuMemPoolImportPointer`.
    cuMemPoolImportPointer(_ptr: *mut CUdeviceptr, _pool: *mut c_void, _data: *mut c_void);
    /// `cuMemPoolExportToShareableHandle`.
    cuMemPoolExportToShareableHandle(_out: *mut c_void, _pool: *mut c_void, _kind: c_int,
                                     _flags: c_ulonglong);
    /// `cuMemPoolImportFromShareableHandle`.
    cuMemPoolImportFromShareableHandle(_pool: *mut *mut c_void, _handle: *mut c_void,
                                       _kind: c_int, _flags: c_ulonglong);
    /// `cuMemImportFromShareableHandle`: an export fd is for the Vulkan stand-in; the
    /// emulator does not import it back into CUDA.
    cuMemImportFromShareableHandle(_handle: *mut u64, _os: *mut c_void, _kind: c_int);
}
