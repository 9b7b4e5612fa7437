//! The real CUDA driver (`libcuda.so.1`, loaded at run time): imports an opaque fd exported
//! by Vulkan as a CUDA device pointer and copies through it, so that bytes written through
//! the BAR can be checked from the GPU's side and the reverse. It also allocates page-locked
//! host memory (`cuMemHostAlloc`, write-combined for `barbench --host-wc`) with a device
//! pointer to the same bytes, checked the same way.

use crate::dl::Library;
use crate::error::{Error, Result};
use std::ffi::{c_int, c_uint, c_void};
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};

type CuResult = c_int;
type CuDevice = c_int;
type CuContext = *mut c_void;
type CuExternalMemory = *mut c_void;
type CuDevicePtr = u64;

/// `CU_MEMHOSTALLOC_DEVICEMAP`: the allocation also gets a device pointer.
pub const MEMHOSTALLOC_DEVICEMAP: c_uint = 0x02;
/// `CU_MEMHOSTALLOC_WRITECOMBINED`: the CPU maps the allocation write-combining.
pub const MEMHOSTALLOC_WRITECOMBINED: c_uint = 0x04;

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

/// The functions of page-locked host memory, resolved when first needed (the emulator's
/// real-VRAM mode loads this module without using them).
struct HostFns {
    alloc: unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> CuResult,
    free: unsafe extern "C" fn(*mut c_void) -> CuResult,
    device_ptr: unsafe extern "C" fn(*mut CuDevicePtr, *mut c_void, c_uint) -> CuResult,
}

/// The CUDA driver with the primary context of one device current on the calling thread.
pub struct Cuda {
    lib: Library,
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
            lib,
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

    /// Allocates `size` bytes of page-locked host memory (`cuMemHostAlloc` with `flags`, which
    /// must include [`MEMHOSTALLOC_DEVICEMAP`]) and gets its device pointer
    /// (`cuMemHostGetDevicePointer`).
    pub fn host_alloc(&self, size: usize, flags: c_uint) -> Result<HostMemory<'_>> {
        if size == 0 || flags & MEMHOSTALLOC_DEVICEMAP == 0 {
            return Err(Error::Invalid(format!(
                "host allocation of {size} bytes with flags {flags:#x} (needs DEVICEMAP)"
            )));
        }
        // SAFETY (all three): each type is the one `cuda.h` declares for that name.
        let fns = HostFns {
            alloc: unsafe { sym(&self.lib, "cuMemHostAlloc")? },
            free: unsafe { sym(&self.lib, "cuMemFreeHost")? },
            device_ptr: unsafe { sym(&self.lib, "cuMemHostGetDevicePointer_v2")? },
        };
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: `p` is writable; the context is current.
        ok("cuMemHostAlloc", unsafe {
            (fns.alloc)(&mut p, size, flags)
        })?;
        if p.is_null() {
            return Err(Error::Invalid("cuMemHostAlloc returned NULL".into()));
        }
        // From here on, an error drops `mem`, which frees the allocation.
        let mut mem = HostMemory {
            cuda: self,
            free: fns.free,
            ptr: p.cast(),
            dptr: 0,
            size,
        };
        let mut dptr: CuDevicePtr = 0;
        // SAFETY: `p` is the live allocation; `dptr` is writable; flags must be 0.
        ok("cuMemHostGetDevicePointer", unsafe {
            (fns.device_ptr)(&mut dptr, p, 0)
        })?;
        mem.dptr = dptr;
        Ok(mem)
    }

    /// Copies `dst.len()` bytes at `offset` of the `size`-byte device buffer `dptr` to `dst`
    /// (`cuMemcpyDtoH`, synchronous).
    fn read_device(
        &self,
        dptr: CuDevicePtr,
        size: usize,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<()> {
        in_range(size, offset, dst.len())?;
        // SAFETY: the range lies in the buffer and `dst` is writable for its length.
        ok("cuMemcpyDtoH", unsafe {
            (self.fns.dtoh)(dst.as_mut_ptr().cast(), dptr + offset as u64, dst.len())
        })
    }

    /// Copies `src` to `offset` of the `size`-byte device buffer `dptr` (`cuMemcpyHtoD`), then
    /// synchronises the context.
    fn write_device(
        &self,
        dptr: CuDevicePtr,
        size: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<()> {
        in_range(size, offset, src.len())?;
        // SAFETY: the range lies in the buffer and `src` is readable for its length.
        ok("cuMemcpyHtoD", unsafe {
            (self.fns.htod)(dptr + offset as u64, src.as_ptr().cast(), src.len())
        })?;
        self.synchronize()
    }
}

/// Whether `offset..offset + n` lies within `size` bytes.
fn in_range(size: usize, offset: usize, n: usize) -> Result<()> {
    match offset.checked_add(n) {
        Some(end) if end <= size => Ok(()),
        _ => Err(Error::Invalid(format!(
            "range {offset}+{n} past {size} bytes"
        ))),
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

    /// Copies `dst.len()` bytes at `offset` of the buffer to `dst` (`cuMemcpyDtoH`, synchronous).
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.cuda.read_device(self.dptr, self.size, offset, dst)
    }

    /// Copies `src` to `offset` of the buffer (`cuMemcpyHtoD`), then synchronises the context.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        self.cuda.write_device(self.dptr, self.size, offset, src)
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

/// Page-locked host memory from `cuMemHostAlloc` with its device pointer, freed on drop.
pub struct HostMemory<'a> {
    cuda: &'a Cuda,
    free: unsafe extern "C" fn(*mut c_void) -> CuResult,
    ptr: *mut u8,
    dptr: CuDevicePtr,
    size: usize,
}

impl HostMemory<'_> {
    /// The CPU address of the allocation.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.size
    }

    /// Whether it is empty (never: [`Cuda::host_alloc`] refuses 0 bytes).
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The device pointer to the same bytes (`cuMemHostGetDevicePointer`).
    pub fn device_ptr(&self) -> u64 {
        self.dptr
    }

    /// Copies `dst.len()` bytes at `offset` to `dst` through the device pointer
    /// (`cuMemcpyDtoH`, synchronous).
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.cuda.read_device(self.dptr, self.size, offset, dst)
    }

    /// Copies `src` to `offset` through the device pointer (`cuMemcpyHtoD`), then synchronises
    /// the context.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        self.cuda.write_device(self.dptr, self.size, offset, src)
    }
}

impl Drop for HostMemory<'_> {
    fn drop(&mut self) {
        // SAFETY: the allocation of `host_alloc`, freed once, while the context that made it
        // is retained (`cuda` outlives this value).
        unsafe { (self.free)(self.ptr.cast()) };
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

    #[test]
    fn ranges_inside_the_buffer_only() {
        assert!(in_range(4096, 0, 4096).is_ok());
        assert!(in_range(4096, 4096, 0).is_ok());
        assert!(in_range(4096, 1, 4096).is_err());
        assert!(in_range(4096, usize::MAX, 2).is_err());
    }
}
