//! The real CUDA driver with one device's primary context current: imports an opaque fd
//! exported by Vulkan as a CUDA device pointer and copies through it, allocates device memory,
//! and allocates page-locked host memory (`cuMemHostAlloc`, write-combined for the benchmarks)
//! with a device pointer to the same bytes.

use super::{fns, status, Driver};
use super::{CUdevice, CUdeviceptr, CUexternalMemory, CUresult, CUuuid};
use super::{ExternalMemoryBufferDesc, ExternalMemoryHandleDesc, LIBCUDA};
use super::{EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD, MEMHOSTALLOC_DEVICEMAP};
use crate::dl::Entry;
use crate::error::{Error, Result};
use std::ffi::{c_uint, c_void};
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};

type Fn<E> = <E as Entry>::Fn;

/// The functions used once a context is current.
struct Fns {
    ctx_synchronize: Fn<fns::cuCtxSynchronize>,
    primary_release: Fn<fns::cuDevicePrimaryCtxRelease>,
    mem_free: Fn<fns::cuMemFree_v2>,
    htod: Fn<fns::cuMemcpyHtoD_v2>,
    dtoh: Fn<fns::cuMemcpyDtoH_v2>,
}

/// The CUDA driver with the primary context of one device current on the calling thread
/// (retained until drop).
pub struct Cuda {
    driver: Driver,
    fns: Fns,
    device: CUdevice,
    ordinal: usize,
    uuid: Option<CUuuid>,
}

impl Cuda {
    /// Loads `libcuda.so.1`, initialises it and makes current the primary context of the device
    /// whose UUID is `want_uuid` (when given and found), else of device 0.
    pub fn open(want_uuid: Option<CUuuid>) -> Result<Cuda> {
        Cuda::open_at(LIBCUDA, want_uuid)
    }

    /// As [`Cuda::open`], loading the driver from `library` (a soname or a path): a process
    /// whose `libcuda.so.1` is something else (an emulator) names the real one by path.
    pub fn open_at(library: &str, want_uuid: Option<CUuuid>) -> Result<Cuda> {
        let driver = Driver::load(library, false)?;
        let lib = driver.library();
        let get_uuid = lib
            .get::<fns::cuDeviceGetUuid_v2>()
            .or_else(|_| lib.get::<fns::cuDeviceGetUuid>())
            .ok();
        let retain = lib.get::<fns::cuDevicePrimaryCtxRetain>()?;
        let set_current = lib.get::<fns::cuCtxSetCurrent>()?;
        let fns = Fns {
            ctx_synchronize: lib.get::<fns::cuCtxSynchronize>()?,
            primary_release: lib
                .get::<fns::cuDevicePrimaryCtxRelease_v2>()
                .or_else(|_| lib.get::<fns::cuDevicePrimaryCtxRelease>())?,
            mem_free: lib.get::<fns::cuMemFree_v2>()?,
            htod: lib.get::<fns::cuMemcpyHtoD_v2>()?,
            dtoh: lib.get::<fns::cuMemcpyDtoH_v2>()?,
        };
        let check = |call, r| check(&driver, call, r);
        // SAFETY: cuInit takes flags 0.
        check("cuInit", unsafe { (driver.init)(0) })?;
        let mut n = 0;
        // SAFETY: `n` is writable.
        check("cuDeviceGetCount", unsafe {
            (driver.device_get_count)(&mut n)
        })?;
        if n <= 0 {
            return Err(Error::Cuda {
                call: "cuDeviceGetCount",
                result: status::NO_DEVICE,
                name: Some("no device".into()),
            });
        }
        let mut chosen: Option<(usize, CUdevice, Option<CUuuid>)> = None;
        for i in 0..n {
            let mut d: CUdevice = 0;
            // SAFETY: `i` is a valid ordinal and `d` is writable.
            check("cuDeviceGet", unsafe { (driver.device_get)(&mut d, i) })?;
            let uuid = get_uuid.and_then(|f| {
                let mut u = [0u8; 16];
                // SAFETY: `u` is the 16-byte CUuuid the call fills.
                (unsafe { f(&mut u, d) } == status::SUCCESS).then_some(u)
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
            result: status::INVALID_DEVICE,
            name: None,
        })?;
        let mut ctx = std::ptr::null_mut();
        // SAFETY: `device` is valid; `ctx` is writable.
        check("cuDevicePrimaryCtxRetain", unsafe {
            retain(&mut ctx, device)
        })?;
        // SAFETY: `ctx` is the retained primary context.
        if let Err(e) = check("cuCtxSetCurrent", unsafe { set_current(ctx) }) {
            // SAFETY: releases the retain above, once.
            unsafe { (fns.primary_release)(device) };
            return Err(e);
        }
        Ok(Cuda {
            driver,
            fns,
            device,
            ordinal,
            uuid,
        })
    }

    /// The loaded driver.
    pub fn driver(&self) -> &Driver {
        &self.driver
    }

    /// The ordinal of the device in use.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Its UUID, when the driver reports one.
    pub fn uuid(&self) -> Option<CUuuid> {
        self.uuid
    }

    fn check(&self, call: &'static str, r: CUresult) -> Result<()> {
        check(&self.driver, call, r)
    }

    /// Imports an opaque fd of `size` bytes (from Vulkan) and maps all of it as a device pointer.
    /// The fd is consumed: CUDA owns it on success; it is closed on failure.
    pub fn import(&self, fd: OwnedFd, size: usize) -> Result<Imported<'_>> {
        if size == 0 {
            return Err(Error::Invalid("import of 0 bytes".into()));
        }
        let lib = self.driver.library();
        let import = lib.get::<fns::cuImportExternalMemory>()?;
        let mapped_buffer = lib.get::<fns::cuExternalMemoryGetMappedBuffer>()?;
        let destroy = lib.get::<fns::cuDestroyExternalMemory>()?;
        let desc = ExternalMemoryHandleDesc {
            kind: EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
            _pad: 0,
            fd: fd.as_raw_fd(),
            _union_rest: [0; 3],
            size: size as u64,
            flags: 0,
            reserved: [0; 16],
        };
        let mut ext: CUexternalMemory = std::ptr::null_mut();
        // SAFETY: `desc` is a complete descriptor; `ext` is writable.
        self.check("cuImportExternalMemory", unsafe { import(&mut ext, &desc) })?;
        // Success: CUDA owns the descriptor now.
        let _ = fd.into_raw_fd();
        let bdesc = ExternalMemoryBufferDesc {
            offset: 0,
            size: size as u64,
            flags: 0,
            reserved: [0; 16],
        };
        let mut dptr: CUdeviceptr = 0;
        // SAFETY: `ext` is live; `bdesc` lies within it; `dptr` is writable.
        let r = unsafe { mapped_buffer(&mut dptr, ext, &bdesc) };
        if let Err(e) = self.check("cuExternalMemoryGetMappedBuffer", r) {
            // SAFETY: `ext` is live and destroyed once.
            unsafe { destroy(ext) };
            return Err(e);
        }
        Ok(Imported {
            cuda: self,
            destroy,
            ext,
            dptr,
            size,
        })
    }

    /// Waits for all work of the current context (`cuCtxSynchronize`).
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: no arguments; the context is current.
        self.check("cuCtxSynchronize", unsafe { (self.fns.ctx_synchronize)() })
    }

    /// Allocates `size` bytes of device memory (`cuMemAlloc`), rounded up to 64 KiB GPU pages.
    pub fn alloc_device(&self, size: usize) -> Result<DeviceMemory<'_>> {
        let alloc = self.driver.get::<fns::cuMemAlloc_v2>()?;
        let size = size.max(1).div_ceil(1 << 16) << 16;
        let mut dptr: CUdeviceptr = 0;
        // SAFETY: `dptr` is writable; the context is current.
        self.check("cuMemAlloc", unsafe { alloc(&mut dptr, size) })?;
        Ok(DeviceMemory {
            cuda: self,
            dptr,
            size,
        })
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
        let lib = self.driver.library();
        let alloc = lib.get::<fns::cuMemHostAlloc>()?;
        let free = lib.get::<fns::cuMemFreeHost>()?;
        let device_ptr = lib.get::<fns::cuMemHostGetDevicePointer_v2>()?;
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: `p` is writable; the context is current.
        self.check("cuMemHostAlloc", unsafe { alloc(&mut p, size, flags) })?;
        if p.is_null() {
            return Err(Error::Invalid("cuMemHostAlloc returned NULL".into()));
        }
        // From here on, an error drops `mem`, which frees the allocation.
        let mut mem = HostMemory {
            cuda: self,
            free,
            ptr: p.cast(),
            dptr: 0,
            size,
        };
        let mut dptr: CUdeviceptr = 0;
        // SAFETY: `p` is the live allocation; `dptr` is writable; flags must be 0.
        self.check("cuMemHostGetDevicePointer", unsafe {
            device_ptr(&mut dptr, p, 0)
        })?;
        mem.dptr = dptr;
        Ok(mem)
    }

    /// Copies `dst.len()` bytes at `offset` of the `size`-byte device buffer `dptr` to `dst`
    /// (`cuMemcpyDtoH`, synchronous).
    fn read_device(
        &self,
        dptr: CUdeviceptr,
        size: usize,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<()> {
        in_range(size, offset, dst.len())?;
        // SAFETY: the range lies in the buffer and `dst` is writable for its length.
        self.check("cuMemcpyDtoH", unsafe {
            (self.fns.dtoh)(dst.as_mut_ptr().cast(), dptr + offset as u64, dst.len())
        })
    }

    /// Copies `src` to `offset` of the `size`-byte device buffer `dptr` (`cuMemcpyHtoD`), then
    /// synchronises the context.
    fn write_device(
        &self,
        dptr: CUdeviceptr,
        size: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<()> {
        in_range(size, offset, src.len())?;
        // SAFETY: the range lies in the buffer and `src` is readable for its length.
        self.check("cuMemcpyHtoD", unsafe {
            (self.fns.htod)(dptr + offset as u64, src.as_ptr().cast(), src.len())
        })?;
        self.synchronize()
    }
}

/// `r` as a result naming `call` and, when the driver can say, the error's name.
fn check(driver: &Driver, call: &'static str, r: CUresult) -> Result<()> {
    if r == status::SUCCESS {
        Ok(())
    } else {
        Err(Error::Cuda {
            call,
            result: r,
            name: driver.error_name(r),
        })
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
        // SAFETY: releases the primary-context retain of `open`, once; every allocation and
        // import borrows self and is gone.
        unsafe { (self.fns.primary_release)(self.device) };
    }
}

/// Vulkan memory imported into CUDA: a device pointer to the same bytes as the BAR mapping.
pub struct Imported<'a> {
    cuda: &'a Cuda,
    destroy: Fn<fns::cuDestroyExternalMemory>,
    ext: CUexternalMemory,
    dptr: CUdeviceptr,
    size: usize,
}

impl Imported<'_> {
    /// The CUDA device pointer.
    pub fn device_ptr(&self) -> CUdeviceptr {
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
            (self.destroy)(self.ext);
        }
    }
}

/// Device memory from `cuMemAlloc`, freed on drop.
pub struct DeviceMemory<'a> {
    cuda: &'a Cuda,
    dptr: CUdeviceptr,
    size: usize,
}

impl DeviceMemory<'_> {
    /// The device pointer (64 KiB aligned).
    pub fn device_ptr(&self) -> CUdeviceptr {
        self.dptr
    }

    /// Its length in bytes (a multiple of 64 KiB).
    pub fn len(&self) -> usize {
        self.size
    }

    /// Whether it is empty (never: [`Cuda::alloc_device`] allocates at least one page).
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
}

impl Drop for DeviceMemory<'_> {
    fn drop(&mut self) {
        // SAFETY: the allocation of `alloc_device`, freed once while its context is retained.
        unsafe { (self.cuda.fns.mem_free)(self.dptr) };
    }
}

/// Page-locked host memory from `cuMemHostAlloc` with its device pointer, freed on drop.
pub struct HostMemory<'a> {
    cuda: &'a Cuda,
    free: Fn<fns::cuMemFreeHost>,
    ptr: *mut u8,
    dptr: CUdeviceptr,
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
    pub fn device_ptr(&self) -> CUdeviceptr {
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

    #[test]
    fn ranges_inside_the_buffer_only() {
        assert!(in_range(4096, 0, 4096).is_ok());
        assert!(in_range(4096, 4096, 0).is_ok());
        assert!(in_range(4096, 1, 4096).is_err());
        assert!(in_range(4096, usize::MAX, 2).is_err());
    }

    #[test]
    fn a_missing_driver_or_a_library_without_it_is_an_error_not_a_crash() {
        let name = "libcuda-missing-for-this-test.so.1";
        let e = Cuda::open_at(name, None).err().expect("no such library");
        assert!(matches!(e, Error::Dl(_)), "{e:?}");
        assert!(e.to_string().contains(name), "{e}");
        let e = Cuda::open_at("libc.so.6", None)
            .err()
            .expect("libc is no CUDA driver");
        assert!(e.to_string().contains("cuInit"), "{e}");
    }
}
