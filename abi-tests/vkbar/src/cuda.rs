//! The real CUDA driver (`libcuda.so.1`, loaded at run time): imports an opaque fd exported
//! by Vulkan as a CUDA device pointer and copies through it, so that bytes written through
//! the BAR can be checked from the GPU's side and the reverse.

use crate::dl::Library;
use crate::error::{Error, Result};
use std::ffi::{c_int, c_uint, c_void};
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};

type CuResult = c_int;
type CuDevice = c_int;
type CuContext = *mut c_void;
type CuExternalMemory = *mut c_void;
type CuDevicePtr = u64;

/// `CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD`.
const EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD: c_uint = 1;

/// `CUDA_EXTERNAL_MEMORY_HANDLE_DESC` (LP64 layout of `cuda.h`).
#[repr(C)]
struct ExternalMemoryHandleDesc {
    kind: c_uint,
    _pad: c_uint,
    // The handle union: an `int fd` for OPAQUE_FD, 16 bytes in all, 8-aligned.
    fd: c_int,
    _union_rest: [u32; 3],
    size: u64,
    flags: c_uint,
    reserved: [c_uint; 16],
}

/// `CUDA_EXTERNAL_MEMORY_BUFFER_DESC`.
#[repr(C)]
struct ExternalMemoryBufferDesc {
    offset: u64,
    size: u64,
    flags: c_uint,
    reserved: [c_uint; 16],
}

struct Fns {
    ctx_synchronize: unsafe extern "C" fn() -> CuResult,
    primary_release: unsafe extern "C" fn(CuDevice) -> CuResult,
    import:
        unsafe extern "C" fn(*mut CuExternalMemory, *const ExternalMemoryHandleDesc) -> CuResult,
    mapped_buffer: unsafe extern "C" fn(
        *mut CuDevicePtr,
        CuExternalMemory,
        *const ExternalMemoryBufferDesc,
    ) -> CuResult,
    destroy_external: unsafe extern "C" fn(CuExternalMemory) -> CuResult,
    mem_free: unsafe extern "C" fn(CuDevicePtr) -> CuResult,
    htod: unsafe extern "C" fn(CuDevicePtr, *const c_void, usize) -> CuResult,
    dtoh: unsafe extern "C" fn(*mut c_void, CuDevicePtr, usize) -> CuResult,
}

/// The CUDA driver with the primary context of one device current on the calling thread.
pub struct Cuda {
    _lib: Library,
    fns: Fns,
    device: CuDevice,
    ordinal: usize,
    uuid: Option<[u8; 16]>,
}

fn ok(call: &'static str, r: CuResult) -> Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(Error::Cuda { call, result: r })
    }
}

/// Resolves `name` from `lib` as function type `F`.
///
/// # Safety
/// `F` must be the `extern "C"` function pointer type of `name`.
unsafe fn sym<F: Copy>(lib: &Library, name: &str) -> Result<F> {
    let p = lib.symbol(name)?;
    // SAFETY: the caller names the matching type; a code pointer is pointer-sized.
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
}

impl Cuda {
    /// Loads `libcuda.so.1`, initialises it and makes current the primary context of the device
    /// whose UUID is `want_uuid` (when given and found), else of device 0.
    pub fn open(want_uuid: Option<[u8; 16]>) -> Result<Cuda> {
        Cuda::open_at("libcuda.so.1", want_uuid)
    }

    /// As [`Cuda::open`], loading the driver from `library` (a soname or a path): a process
    /// whose `libcuda.so.1` is something else (an emulator) names the real one by path.
    pub fn open_at(library: &str, want_uuid: Option<[u8; 16]>) -> Result<Cuda> {
        let lib = Library::open(library)?;
        // SAFETY (all `sym` calls): each type is the one `cuda.h` declares for that name.
        let init: unsafe extern "C" fn(c_uint) -> CuResult = unsafe { sym(&lib, "cuInit")? };
        let count: unsafe extern "C" fn(*mut c_int) -> CuResult =
            unsafe { sym(&lib, "cuDeviceGetCount")? };
        let get: unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult =
            unsafe { sym(&lib, "cuDeviceGet")? };
        let get_uuid: Option<unsafe extern "C" fn(*mut [u8; 16], CuDevice) -> CuResult> =
            unsafe { sym(&lib, "cuDeviceGetUuid_v2") }
                .or_else(|_| unsafe { sym(&lib, "cuDeviceGetUuid") })
                .ok();
        let retain: unsafe extern "C" fn(*mut CuContext, CuDevice) -> CuResult =
            unsafe { sym(&lib, "cuDevicePrimaryCtxRetain")? };
        let set_current: unsafe extern "C" fn(CuContext) -> CuResult =
            unsafe { sym(&lib, "cuCtxSetCurrent")? };
        let fns = Fns {
            ctx_synchronize: unsafe { sym(&lib, "cuCtxSynchronize")? },
            primary_release: unsafe { sym(&lib, "cuDevicePrimaryCtxRelease_v2") }
                .or_else(|_| unsafe { sym(&lib, "cuDevicePrimaryCtxRelease") })?,
            import: unsafe { sym(&lib, "cuImportExternalMemory")? },
            mapped_buffer: unsafe { sym(&lib, "cuExternalMemoryGetMappedBuffer")? },
            destroy_external: unsafe { sym(&lib, "cuDestroyExternalMemory")? },
            mem_free: unsafe { sym(&lib, "cuMemFree_v2")? },
            htod: unsafe { sym(&lib, "cuMemcpyHtoD_v2")? },
            dtoh: unsafe { sym(&lib, "cuMemcpyDtoH_v2")? },
        };
        // SAFETY: cuInit takes flags 0.
        ok("cuInit", unsafe { init(0) })?;
        let mut n = 0;
        // SAFETY: `n` is writable.
        ok("cuDeviceGetCount", unsafe { count(&mut n) })?;
        if n <= 0 {
            return Err(Error::Cuda {
                call: "cuDeviceGetCount",
                result: 100,
            });
        }
        let mut chosen: Option<(usize, CuDevice, Option<[u8; 16]>)> = None;
        for i in 0..n {
            let mut d: CuDevice = 0;
            // SAFETY: `i` is a valid ordinal and `d` is writable.
            ok("cuDeviceGet", unsafe { get(&mut d, i) })?;
            let uuid = get_uuid.and_then(|f| {
                let mut u = [0u8; 16];
                // SAFETY: `u` is the 16-byte CUuuid the call fills.
                (unsafe { f(&mut u, d) } == 0).then_some(u)
            });
            let matches = want_uuid.is_some() && uuid == want_uuid;
            if chosen.is_none() || matches {
                chosen = Some((i as usize, d, uuid));
            }
            if matches {
                break;
            }
        }
        let (ordinal, device, uuid) = chosen.ok_or(Error::Cuda {
            call: "cuDeviceGet",
            result: 101,
        })?;
        let mut ctx: CuContext = std::ptr::null_mut();
        // SAFETY: `device` is valid; `ctx` is writable.
        ok("cuDevicePrimaryCtxRetain", unsafe {
            retain(&mut ctx, device)
        })?;
        // SAFETY: `ctx` is the retained primary context.
        if let Err(e) = ok("cuCtxSetCurrent", unsafe { set_current(ctx) }) {
            // SAFETY: releases the retain above, once.
            unsafe { (fns.primary_release)(device) };
            return Err(e);
        }
        Ok(Cuda {
            _lib: lib,
            fns,
            device,
            ordinal,
            uuid,
        })
    }

    /// The ordinal of the device in use.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Its UUID, when the driver reports one.
    pub fn uuid(&self) -> Option<[u8; 16]> {
        self.uuid
    }

    /// Imports an opaque fd of `size` bytes (from Vulkan) and maps all of it as a device pointer.
    /// The fd is consumed: CUDA owns it on success; it is closed on failure.
    pub fn import(&self, fd: OwnedFd, size: usize) -> Result<Imported<'_>> {
        if size == 0 {
            return Err(Error::Invalid("import of 0 bytes".into()));
        }
        let desc = ExternalMemoryHandleDesc {
            kind: EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
            _pad: 0,
            fd: fd.as_raw_fd(),
            _union_rest: [0; 3],
            size: size as u64,
            flags: 0,
            reserved: [0; 16],
        };
        let mut ext: CuExternalMemory = std::ptr::null_mut();
        // SAFETY: `desc` is a complete descriptor; `ext` is writable.
        ok("cuImportExternalMemory", unsafe {
            (self.fns.import)(&mut ext, &desc)
        })?;
        // Success: CUDA owns the descriptor now.
        let _ = fd.into_raw_fd();
        let bdesc = ExternalMemoryBufferDesc {
            offset: 0,
            size: size as u64,
            flags: 0,
            reserved: [0; 16],
        };
        let mut dptr: CuDevicePtr = 0;
        // SAFETY: `ext` is live; `bdesc` lies within it; `dptr` is writable.
        let r = unsafe { (self.fns.mapped_buffer)(&mut dptr, ext, &bdesc) };
        if r != 0 {
            // SAFETY: `ext` is live and destroyed once.
            unsafe { (self.fns.destroy_external)(ext) };
            return Err(Error::Cuda {
                call: "cuExternalMemoryGetMappedBuffer",
                result: r,
            });
        }
        Ok(Imported {
            cuda: self,
            ext,
            dptr,
            size,
        })
    }

    /// Waits for all work of the current context (`cuCtxSynchronize`).
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: no arguments; the context is current.
        ok("cuCtxSynchronize", unsafe { (self.fns.ctx_synchronize)() })
    }
}

impl Drop for Cuda {
    fn drop(&mut self) {
        // SAFETY: releases the primary-context retain of `open`, once; every Imported
        // borrows self and is gone.
        unsafe { (self.fns.primary_release)(self.device) };
    }
}

/// Vulkan memory imported into CUDA: a device pointer to the same bytes as the BAR mapping.
pub struct Imported<'a> {
    cuda: &'a Cuda,
    ext: CuExternalMemory,
    dptr: CuDevicePtr,
    size: usize,
}

impl Imported<'_> {
    /// The CUDA device pointer.
    pub fn device_ptr(&self) -> u64 {
        self.dptr
    }

    fn range(&self, offset: usize, n: usize) -> Result<()> {
        match offset.checked_add(n) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(Error::Invalid(format!(
                "range {offset}+{n} past {} bytes",
                self.size
            ))),
        }
    }

    /// Copies `dst.len()` bytes at `offset` of the buffer to `dst` (`cuMemcpyDtoH`, synchronous).
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.range(offset, dst.len())?;
        // SAFETY: the range lies in the mapped buffer and `dst` is writable for its length.
        ok("cuMemcpyDtoH", unsafe {
            (self.cuda.fns.dtoh)(
                dst.as_mut_ptr().cast(),
                self.dptr + offset as u64,
                dst.len(),
            )
        })
    }

    /// Copies `src` to `offset` of the buffer (`cuMemcpyHtoD`), then synchronises the context.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        self.range(offset, src.len())?;
        // SAFETY: the range lies in the mapped buffer and `src` is readable for its length.
        ok("cuMemcpyHtoD", unsafe {
            (self.cuda.fns.htod)(self.dptr + offset as u64, src.as_ptr().cast(), src.len())
        })?;
        self.cuda.synchronize()
    }
}

impl Drop for Imported<'_> {
    fn drop(&mut self) {
        // SAFETY: the mapped buffer and the external memory are live and released once,
        // the buffer first, as the CUDA documentation requires.
        unsafe {
            (self.cuda.fns.mem_free)(self.dptr);
            (self.cuda.fns.destroy_external)(self.ext);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn descriptor_layouts_match_cuda_h() {
        assert_eq!(offset_of!(ExternalMemoryHandleDesc, fd), 8);
        assert_eq!(offset_of!(ExternalMemoryHandleDesc, size), 24);
        assert_eq!(offset_of!(ExternalMemoryHandleDesc, flags), 32);
        assert_eq!(size_of::<ExternalMemoryHandleDesc>(), 104);
        assert_eq!(offset_of!(ExternalMemoryBufferDesc, flags), 16);
        assert_eq!(size_of::<ExternalMemoryBufferDesc>(), 88);
    }
}
