//! The CUDA driver as the allocator uses it: loaded at run time (`libcuda.so.1`, never a link
//! dependency), with the primary context of a device made current around each group of calls
//! and the caller's own context put back after, and device memory allocated the two ways the
//! backends can map: `cuMemAlloc`, and `cuMemCreate` memory exportable as a POSIX file
//! descriptor (reserved, mapped and made accessible as NCCL's cuMem allocator does).
//!
//! A failed call is logged with its name and `CUresult` and becomes an errno
//! (`gdrapi_boundary::errno`, the table libgdrapi uses).

use crate::error::{Errno, Result};
use gdrapi_support::cuda::{
    attr, fns, status, CUcontext, CUdevice, CUdeviceptr, CUmemGenericAllocationHandle, CUresult,
    Driver, MemAccessDesc, MemAllocationProp, MemLocation, LIBCUDA,
    MEM_ACCESS_FLAGS_PROT_READWRITE, MEM_ALLOCATION_TYPE_PINNED, MEM_ALLOC_GRANULARITY_RECOMMENDED,
    MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, MEM_LOCATION_TYPE_DEVICE, POINTER_ATTRIBUTE_SYNC_MEMOPS,
};
use gdrapi_support::dl::Entry;
use parking_lot::Mutex;
use std::ffi::{c_int, c_void};

type F<E> = <E as Entry>::Fn;

/// The GPU page: pins start on one.
pub const GPU_PAGE: usize = 1 << 16;

/// The VMM functions (CUDA 10.2+), resolved together.
struct Vmm {
    granularity: F<fns::cuMemGetAllocationGranularity>,
    create: F<fns::cuMemCreate>,
    release: F<fns::cuMemRelease>,
    reserve: F<fns::cuMemAddressReserve>,
    address_free: F<fns::cuMemAddressFree>,
    map: F<fns::cuMemMap>,
    unmap: F<fns::cuMemUnmap>,
    set_access: F<fns::cuMemSetAccess>,
}

/// The loaded driver, initialised.
pub struct Cuda {
    driver: Driver,
    version: c_int,
    retain: F<fns::cuDevicePrimaryCtxRetain>,
    release: F<fns::cuDevicePrimaryCtxRelease>,
    get_current: F<fns::cuCtxGetCurrent>,
    set_current: F<fns::cuCtxSetCurrent>,
    mem_alloc: F<fns::cuMemAlloc_v2>,
    mem_free: F<fns::cuMemFree_v2>,
    pointer_set_attribute: F<fns::cuPointerSetAttribute>,
    vmm: Option<Vmm>,
}

impl std::fmt::Debug for Cuda {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cuda")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// The driver once loaded: kept for the process (after `cuInit` the driver owns threads and
/// process-wide state). A failed load is not kept, and tried again at the next open.
static LOADED: Mutex<Option<&'static Cuda>> = Mutex::new(None);

/// The process's CUDA driver, loaded and initialised at the first call.
pub fn load() -> Result<&'static Cuda> {
    let mut slot = LOADED.lock();
    if let Some(c) = *slot {
        return Ok(c);
    }
    let c: &'static Cuda = Box::leak(Box::new(Cuda::load()?));
    *slot = Some(c);
    Ok(c)
}

impl Cuda {
    fn load() -> Result<Cuda> {
        let driver = Driver::load(LIBCUDA, false).map_err(|e| {
            gdr_err!("gdrx: cannot use the CUDA driver: {e}");
            Errno(libc::ENODEV)
        })?;
        let lib = driver.library();
        let missing = |e: gdrapi_support::dl::DlError| {
            gdr_err!("gdrx: cannot use the CUDA driver: {e}");
            Errno(libc::ENOTSUP)
        };
        let vmm = (|| {
            Ok::<_, gdrapi_support::dl::DlError>(Vmm {
                granularity: lib.get::<fns::cuMemGetAllocationGranularity>()?,
                create: lib.get::<fns::cuMemCreate>()?,
                release: lib.get::<fns::cuMemRelease>()?,
                reserve: lib.get::<fns::cuMemAddressReserve>()?,
                address_free: lib.get::<fns::cuMemAddressFree>()?,
                map: lib.get::<fns::cuMemMap>()?,
                unmap: lib.get::<fns::cuMemUnmap>()?,
                set_access: lib.get::<fns::cuMemSetAccess>()?,
            })
        })();
        if let Err(e) = &vmm {
            gdr_info!("gdrx: no VMM allocations (cuMemCreate): {e}");
        }
        let cuda = Cuda {
            version: 0,
            retain: lib
                .get::<fns::cuDevicePrimaryCtxRetain>()
                .map_err(missing)?,
            release: lib
                .get::<fns::cuDevicePrimaryCtxRelease_v2>()
                .or_else(|_| lib.get::<fns::cuDevicePrimaryCtxRelease>())
                .map_err(missing)?,
            get_current: lib.get::<fns::cuCtxGetCurrent>().map_err(missing)?,
            set_current: lib.get::<fns::cuCtxSetCurrent>().map_err(missing)?,
            mem_alloc: lib.get::<fns::cuMemAlloc_v2>().map_err(missing)?,
            mem_free: lib.get::<fns::cuMemFree_v2>().map_err(missing)?,
            pointer_set_attribute: lib.get::<fns::cuPointerSetAttribute>().map_err(missing)?,
            vmm: vmm.ok(),
            driver,
        };
        // SAFETY: cuInit takes flags 0.
        cuda.check("cuInit", unsafe { (cuda.driver.init)(0) })?;
        let mut version = 0;
        // SAFETY: `version` is writable.
        cuda.check("cuDriverGetVersion", unsafe {
            (cuda.driver.driver_get_version)(&mut version)
        })?;
        gdr_dbg!("gdrx: CUDA driver {version} loaded");
        Ok(Cuda { version, ..cuda })
    }

    /// `cuDriverGetVersion`'s answer.
    pub fn version(&self) -> c_int {
        self.version
    }

    /// Whether the VMM entry points are there.
    pub fn has_vmm(&self) -> bool {
        self.vmm.is_some()
    }

    /// `r` as a result: a failure is logged with `call`'s name and becomes its errno.
    pub fn check(&self, call: &str, r: CUresult) -> Result<()> {
        if r == status::SUCCESS {
            return Ok(());
        }
        let name = self.driver.error_name(r).unwrap_or_else(|| "?".into());
        gdr_err!("gdrx: \"{call}\" failed ({r}: {name})");
        Err(Errno(gdrapi_boundary::errno::of_curesult(r)))
    }

    /// The number of devices.
    pub fn device_count(&self) -> Result<c_int> {
        let mut n = 0;
        // SAFETY: `n` is writable.
        self.check("cuDeviceGetCount", unsafe {
            (self.driver.device_get_count)(&mut n)
        })?;
        Ok(n)
    }

    /// The device of ordinal `ordinal`.
    pub fn device(&self, ordinal: c_int) -> Result<CUdevice> {
        let mut d = 0;
        // SAFETY: `d` is writable; the driver checks the ordinal.
        self.check("cuDeviceGet", unsafe {
            (self.driver.device_get)(&mut d, ordinal)
        })?;
        Ok(d)
    }

    /// Device attribute `attr` of `dev`.
    pub fn attribute(&self, attr: c_int, dev: CUdevice) -> Result<c_int> {
        let mut v = 0;
        // SAFETY: `v` is writable; the driver checks the attribute and the device.
        self.check("cuDeviceGetAttribute", unsafe {
            (self.driver.device_get_attribute)(&mut v, attr, dev)
        })?;
        Ok(v)
    }

    /// Whether `dev` supports GPUDirect RDMA on VMM memory
    /// (`CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED`).
    pub fn rdma_with_vmm(&self, dev: CUdevice) -> Result<bool> {
        Ok(self.attribute(attr::GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev)? != 0)
    }

    /// Retains `dev`'s primary context (released by [`Cuda::release_primary`]).
    pub fn retain_primary(&self, dev: CUdevice) -> Result<usize> {
        let mut ctx: CUcontext = std::ptr::null_mut();
        // SAFETY: `ctx` is writable; the driver checks the device.
        self.check("cuDevicePrimaryCtxRetain", unsafe {
            (self.retain)(&mut ctx, dev)
        })?;
        Ok(ctx as usize)
    }

    /// Releases a retain of [`Cuda::retain_primary`].
    pub fn release_primary(&self, dev: CUdevice) -> Result<()> {
        // SAFETY: the caller retained the context once for this release.
        self.check("cuDevicePrimaryCtxRelease", unsafe { (self.release)(dev) })
    }

    /// Runs `f` with context `ctx` current on this thread, then makes the caller's context
    /// current again.
    pub fn with_context<T>(&self, ctx: usize, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let mut prev: CUcontext = std::ptr::null_mut();
        // SAFETY: `prev` is writable.
        self.check("cuCtxGetCurrent", unsafe { (self.get_current)(&mut prev) })?;
        if prev as usize == ctx {
            return f();
        }
        // SAFETY: `ctx` is a context the allocator retained.
        self.check("cuCtxSetCurrent", unsafe {
            (self.set_current)(ctx as CUcontext)
        })?;
        let r = f();
        // SAFETY: `prev` was current on this thread a moment ago (or is NULL: none).
        let back = unsafe { (self.set_current)(prev) };
        if back != status::SUCCESS {
            gdr_warn!("gdrx: cannot make the caller's CUDA context current again ({back})");
        }
        r
    }

    /// The VMM granularity (recommended) of exportable memory on device ordinal `device`.
    pub fn granularity(&self, device: c_int, rdma: bool) -> Result<usize> {
        let vmm = self.vmm.as_ref().ok_or(Errno(libc::ENOTSUP))?;
        let prop = vmm_prop(device, rdma);
        let mut g = 0usize;
        // SAFETY: valid property struct and out pointer.
        self.check("cuMemGetAllocationGranularity", unsafe {
            (vmm.granularity)(&mut g, &prop, MEM_ALLOC_GRANULARITY_RECOMMENDED)
        })?;
        Ok(g.max(1))
    }

    /// `size` bytes from `cuMemAlloc`, with room for a 64 KiB aligned start; the memory's
    /// operations made synchronous (`CU_POINTER_ATTRIBUTE_SYNC_MEMOPS`), as gdrcopy asks of
    /// pinned memory. Needs the context current.
    pub fn alloc_plain(&self, size: usize) -> Result<(Backing, u64)> {
        let mut raw: CUdeviceptr = 0;
        let total = size.checked_add(GPU_PAGE).ok_or(Errno(libc::ENOMEM))?;
        // SAFETY: `raw` is writable.
        self.check("cuMemAlloc", unsafe { (self.mem_alloc)(&mut raw, total) })?;
        let backing = Backing::Plain { raw, freed: false };
        let aligned = (raw + GPU_PAGE as u64 - 1) & !(GPU_PAGE as u64 - 1);
        let one: c_int = 1;
        // SAFETY: a valid attribute value for a pointer into the allocation just made.
        let r = unsafe {
            (self.pointer_set_attribute)(
                (&one as *const c_int).cast::<c_void>(),
                POINTER_ATTRIBUTE_SYNC_MEMOPS,
                aligned,
            )
        };
        if let Err(e) = self.check("cuPointerSetAttribute", r) {
            let mut b = backing;
            self.free(&mut b).ok();
            return Err(e);
        }
        Ok((backing, aligned))
    }

    /// `size` bytes (a multiple of the granularity `gran`) of `cuMemCreate` memory on device
    /// ordinal `device`, exportable as a POSIX fd (and GPUDirect RDMA capable with `rdma`),
    /// reserved at a `gran`-aligned address, mapped and made readable and writable by the
    /// device. Needs the context current.
    pub fn alloc_vmm(
        &self,
        device: c_int,
        size: usize,
        gran: usize,
        rdma: bool,
    ) -> Result<(Backing, u64)> {
        let vmm = self.vmm.as_ref().ok_or(Errno(libc::ENOTSUP))?;
        let prop = vmm_prop(device, rdma);
        let mut handle: CUmemGenericAllocationHandle = 0;
        // SAFETY: valid out pointer and property struct.
        self.check("cuMemCreate", unsafe {
            (vmm.create)(&mut handle, size, &prop, 0)
        })?;
        let mut b = Backing::Vmm {
            va: 0,
            size,
            handle,
            created: true,
            reserved: false,
            mapped: false,
        };
        let r = self.map_vmm(vmm, &mut b, device, size, gran);
        if let Err(e) = r {
            self.free(&mut b).ok();
            return Err(e);
        }
        let Backing::Vmm { va, .. } = b else {
            unreachable!()
        };
        Ok((b, va))
    }

    fn map_vmm(
        &self,
        vmm: &Vmm,
        b: &mut Backing,
        device: c_int,
        size: usize,
        gran: usize,
    ) -> Result<()> {
        let Backing::Vmm {
            va,
            handle,
            reserved,
            mapped,
            ..
        } = b
        else {
            return Err(Errno(libc::EINVAL));
        };
        // SAFETY: valid out pointer; no fixed address is asked for.
        self.check("cuMemAddressReserve", unsafe {
            (vmm.reserve)(va, size, gran, 0, 0)
        })?;
        *reserved = true;
        // SAFETY: the whole reservation, at offset 0 of the whole allocation.
        self.check("cuMemMap", unsafe { (vmm.map)(*va, size, 0, *handle, 0) })?;
        *mapped = true;
        let access = MemAccessDesc {
            location: MemLocation {
                kind: MEM_LOCATION_TYPE_DEVICE,
                id: device,
            },
            flags: MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: the range just mapped and one valid descriptor.
        self.check("cuMemSetAccess", unsafe {
            (vmm.set_access)(*va, size, &access, 1)
        })
    }

    /// Frees `b` as far as the driver lets it; what is done is not done again, so a failed
    /// free can be retried. Returns the first error. Needs the context current.
    pub fn free(&self, b: &mut Backing) -> Result<()> {
        match b {
            Backing::Plain { raw, freed } => {
                if !*freed {
                    // SAFETY: an allocation of cuMemAlloc, freed once.
                    self.check("cuMemFree", unsafe { (self.mem_free)(*raw) })?;
                    *freed = true;
                }
                Ok(())
            }
            Backing::Vmm {
                va,
                size,
                handle,
                created,
                reserved,
                mapped,
            } => {
                let vmm = self.vmm.as_ref().ok_or(Errno(libc::ENOTSUP))?;
                let mut first = Ok(());
                if *mapped {
                    // SAFETY: the whole range mapped by alloc_vmm, unmapped once.
                    match self.check("cuMemUnmap", unsafe { (vmm.unmap)(*va, *size) }) {
                        Ok(()) => *mapped = false,
                        Err(e) => first = Err(e),
                    }
                }
                if *reserved && !*mapped {
                    // SAFETY: the reservation of alloc_vmm, nothing mapped in it any more.
                    match self.check("cuMemAddressFree", unsafe {
                        (vmm.address_free)(*va, *size)
                    }) {
                        Ok(()) => *reserved = false,
                        Err(e) => first = first.and(Err(e)),
                    }
                }
                if *created {
                    // SAFETY: the handle of cuMemCreate, released once.
                    match self.check("cuMemRelease", unsafe { (vmm.release)(*handle) }) {
                        Ok(()) => *created = false,
                        Err(e) => first = first.and(Err(e)),
                    }
                }
                first
            }
        }
    }
}

/// The properties of an exportable VMM allocation on device ordinal `device`.
fn vmm_prop(device: c_int, rdma: bool) -> MemAllocationProp {
    MemAllocationProp {
        kind: MEM_ALLOCATION_TYPE_PINNED,
        requested_handle_types: MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
        location: MemLocation {
            kind: MEM_LOCATION_TYPE_DEVICE,
            id: device,
        },
        win32_handle_meta_data: std::ptr::null_mut(),
        compression_type: 0,
        gpu_direct_rdma_capable: u8::from(rdma),
        usage: 0,
        reserved: [0; 4],
    }
}

/// Device memory and what is left to free of it.
#[derive(Debug)]
pub enum Backing {
    /// `cuMemAlloc` memory.
    Plain { raw: CUdeviceptr, freed: bool },
    /// `cuMemCreate` memory mapped at `va`.
    Vmm {
        va: CUdeviceptr,
        size: usize,
        handle: CUmemGenericAllocationHandle,
        created: bool,
        reserved: bool,
        mapped: bool,
    },
}

impl Backing {
    /// Whether nothing is left to free.
    pub fn is_freed(&self) -> bool {
        match self {
            Backing::Plain { freed, .. } => *freed,
            Backing::Vmm {
                created,
                reserved,
                mapped,
                ..
            } => !(*created || *reserved || *mapped),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exportable_memory_asks_for_the_posix_fd_type() {
        let p = vmm_prop(3, true);
        assert_eq!(
            p.requested_handle_types,
            MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        );
        assert_eq!(p.location.id, 3);
        assert_eq!(p.gpu_direct_rdma_capable, 1);
        assert_eq!(vmm_prop(0, false).gpu_direct_rdma_capable, 0);
    }

    #[test]
    fn a_backing_is_freed_when_no_step_is_left() {
        let b = Backing::Vmm {
            va: 1,
            size: 2,
            handle: 3,
            created: false,
            reserved: true,
            mapped: false,
        };
        assert!(!b.is_freed());
        assert!(Backing::Plain {
            raw: 1,
            freed: true
        }
        .is_freed());
    }
}
