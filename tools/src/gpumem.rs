//! GPU and pinned host buffers for the tools: 64 KiB-aligned `cuMemAlloc` or VMM
//! (`cuMemCreate`, with or without a POSIX file descriptor handle type) device memory, and
//! `cuMemAllocHost` host memory; all freed on drop.

use crate::cuda::{
    CUdevice, CUdeviceptr, Cuda, CudaError, MemAccessDesc, MemAllocationProp, MemLocation,
};
use crate::gdr::GPU_PAGE_SIZE;
use gdrapi_support::cuda::{
    fns, status, MEM_ACCESS_FLAGS_PROT_READWRITE, MEM_ALLOCATION_TYPE_PINNED,
    MEM_ALLOC_GRANULARITY_RECOMMENDED, MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
    MEM_LOCATION_TYPE_DEVICE,
};
use std::ffi::c_void;

/// How device memory is allocated (upstream's `-a` flag, plus `cuMemCreateFd`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocFn {
    /// `cuMemAlloc`, over-allocated by 64 KiB - 1 and rounded up to a GPU page.
    MemAlloc,
    /// The VMM path: `cuMemCreate` + `cuMemAddressReserve` + `cuMemMap` + `cuMemSetAccess`,
    /// requesting no handle type (upstream's).
    MemCreate,
    /// The VMM path with `requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`:
    /// memory CUDA can export as a file descriptor, the only memory the Vulkan backend maps.
    MemCreateFd,
}

/// The `-a` choices, as the usage texts and the error for a bad value list them.
pub const ALLOC_CHOICES: &str = "cuMemAlloc, cuMemCreate, cuMemCreateFd";

impl AllocFn {
    /// Every choice, in the order of [`ALLOC_CHOICES`].
    pub const ALL: [AllocFn; 3] = [AllocFn::MemAlloc, AllocFn::MemCreate, AllocFn::MemCreateFd];

    /// Parses the names of [`ALLOC_CHOICES`].
    pub fn parse(s: &str) -> Option<AllocFn> {
        AllocFn::ALL.into_iter().find(|a| a.name() == s)
    }

    /// The name `-a` takes and the tools print (`gpu alloc fn: <name>`).
    pub fn name(self) -> &'static str {
        match self {
            AllocFn::MemAlloc => "cuMemAlloc",
            AllocFn::MemCreate => "cuMemCreate",
            AllocFn::MemCreateFd => "cuMemCreateFd",
        }
    }

    /// The `CUmemAllocationProp.requestedHandleTypes` of a VMM allocation.
    fn requested_handle_types(self) -> i32 {
        match self {
            AllocFn::MemCreateFd => MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            AllocFn::MemAlloc | AllocFn::MemCreate => 0,
        }
    }
}

/// Rounds `x` up to a multiple of the power of two `n`.
pub fn round_up(x: usize, n: usize) -> usize {
    x.div_ceil(n) * n
}

enum Backing {
    Plain { raw: CUdeviceptr },
    Vmm { handle: u64, reserved: usize },
}

/// Device memory starting on a GPU page.
pub struct DeviceBuffer<'c> {
    cuda: &'c Cuda,
    ptr: CUdeviceptr,
    size: usize,
    backing: Backing,
}

impl<'c> DeviceBuffer<'c> {
    /// Allocates `size` bytes (a multiple of 64 KiB is expected) on the current context's device.
    pub fn alloc(
        cuda: &'c Cuda,
        how: AllocFn,
        size: usize,
        dev: CUdevice,
    ) -> Result<DeviceBuffer<'c>, CudaError> {
        match how {
            AllocFn::MemAlloc => {
                let raw = cuda.mem_alloc(size + GPU_PAGE_SIZE - 1)?;
                let buf = DeviceBuffer {
                    cuda,
                    ptr: round_up(raw as usize, GPU_PAGE_SIZE) as CUdeviceptr,
                    size,
                    backing: Backing::Plain { raw },
                };
                cuda.set_sync_memops(raw)?;
                Ok(buf)
            }
            AllocFn::MemCreate | AllocFn::MemCreateFd => Self::alloc_vmm(cuda, how, size, dev),
        }
    }

    fn alloc_vmm(
        cuda: &'c Cuda,
        how: AllocFn,
        size: usize,
        dev: CUdevice,
    ) -> Result<DeviceBuffer<'c>, CudaError> {
        let supported = cuda.attribute(
            gdrapi_support::cuda::attr::GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
            dev,
        )?;
        if supported == 0 {
            return Err(CudaError {
                func: "cuDeviceGetAttribute",
                code: status::NOT_SUPPORTED,
                name: "GPUDirect RDMA with CUDA VMM is not supported on this GPU".into(),
            });
        }
        let prop = MemAllocationProp {
            kind: MEM_ALLOCATION_TYPE_PINNED,
            requested_handle_types: how.requested_handle_types(),
            location: MemLocation {
                kind: MEM_LOCATION_TYPE_DEVICE,
                id: dev,
            },
            win32_handle_meta_data: std::ptr::null_mut(),
            compression_type: 0,
            gpu_direct_rdma_capable: 1,
            usage: 0,
            reserved: [0; 4],
        };
        let granularity = cuda.get::<fns::cuMemGetAllocationGranularity>()?;
        let reserve = cuda.get::<fns::cuMemAddressReserve>()?;
        let create = cuda.get::<fns::cuMemCreate>()?;
        let map = cuda.get::<fns::cuMemMap>()?;
        let set_access = cuda.get::<fns::cuMemSetAccess>()?;
        let mut gran = 0usize;
        // SAFETY: valid out pointer and a fully initialised prop of the C layout.
        cuda.check("cuMemGetAllocationGranularity", unsafe {
            granularity(&mut gran, &prop, MEM_ALLOC_GRANULARITY_RECOMMENDED)
        })?;
        let gran = round_up(gran.max(1), GPU_PAGE_SIZE);
        let rounded = round_up(size, gran);
        let mut va: CUdeviceptr = 0;
        // SAFETY: valid out pointer; no fixed address requested.
        cuda.check("cuMemAddressReserve", unsafe {
            reserve(&mut va, rounded, gran, 0, 0)
        })?;
        // From here on, Drop releases whatever was set up.
        let mut buf = DeviceBuffer {
            cuda,
            ptr: va,
            size,
            backing: Backing::Vmm {
                handle: 0,
                reserved: rounded,
            },
        };
        let mut handle = 0u64;
        // SAFETY: valid out pointer and prop.
        cuda.check("cuMemCreate", unsafe {
            create(&mut handle, rounded, &prop, 0)
        })?;
        buf.backing = Backing::Vmm {
            handle,
            reserved: rounded,
        };
        // SAFETY: va..va+rounded was reserved above; handle is a fresh allocation of that size.
        cuda.check("cuMemMap", unsafe { map(va, rounded, 0, handle, 0) })?;
        let desc = MemAccessDesc {
            location: MemLocation {
                kind: MEM_LOCATION_TYPE_DEVICE,
                id: dev,
            },
            flags: MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: the range is mapped; desc is one valid descriptor.
        cuda.check("cuMemSetAccess", unsafe {
            set_access(va, rounded, &desc, 1)
        })?;
        Ok(buf)
    }

    /// The 64 KiB-aligned device address.
    pub fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// Usable size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The size of the allocation behind it: for VMM memory, rounded up to the granularity.
    pub fn allocation_size(&self) -> usize {
        match self.backing {
            Backing::Plain { .. } => self.size,
            Backing::Vmm { reserved, .. } => reserved,
        }
    }
}

impl Drop for DeviceBuffer<'_> {
    fn drop(&mut self) {
        match self.backing {
            Backing::Plain { raw } => {
                let _ = self.cuda.mem_free(raw);
            }
            Backing::Vmm { handle, reserved } => {
                if handle != 0 {
                    if let Ok(unmap) = self.cuda.get::<fns::cuMemUnmap>() {
                        // SAFETY: unmapping a range this buffer mapped (a no-op error otherwise).
                        unsafe { unmap(self.ptr, reserved) };
                    }
                    if let Ok(release) = self.cuda.get::<fns::cuMemRelease>() {
                        // SAFETY: handle came from cuMemCreate and is released once.
                        unsafe { release(handle) };
                    }
                }
                if let Ok(free) = self.cuda.get::<fns::cuMemAddressFree>() {
                    // SAFETY: the reservation made in alloc_vmm, freed once.
                    unsafe { free(self.ptr, reserved) };
                }
            }
        }
    }
}

/// Page-locked host memory from `cuMemAllocHost`, usable by `cuMemcpy`.
pub struct HostBuffer<'c> {
    cuda: &'c Cuda,
    ptr: *mut u8,
    len: usize,
}

impl<'c> HostBuffer<'c> {
    /// Allocates `len` zeroed bytes.
    pub fn alloc(cuda: &'c Cuda, len: usize) -> Result<HostBuffer<'c>, CudaError> {
        let f = cuda.get::<fns::cuMemAllocHost_v2>()?;
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out pointer.
        cuda.check("cuMemAllocHost", unsafe { f(&mut p, len.max(1)) })?;
        if p.is_null() {
            return Err(CudaError {
                func: "cuMemAllocHost",
                code: status::OUT_OF_MEMORY,
                name: "returned NULL".into(),
            });
        }
        // SAFETY: p points to at least len writable bytes just allocated.
        unsafe { std::ptr::write_bytes(p as *mut u8, 0, len) };
        Ok(HostBuffer {
            cuda,
            ptr: p as *mut u8,
            len,
        })
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised bytes for the life of self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The bytes, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// Address as a CUDA unified pointer.
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }
}

impl Drop for HostBuffer<'_> {
    fn drop(&mut self) {
        if let Ok(f) = self.cuda.get::<fns::cuMemFreeHost>() {
            // SAFETY: ptr came from cuMemAllocHost and is freed once.
            unsafe { f(self.ptr as *mut c_void) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_and_names() {
        assert_eq!(round_up(1, GPU_PAGE_SIZE), GPU_PAGE_SIZE);
        assert_eq!(round_up(GPU_PAGE_SIZE, GPU_PAGE_SIZE), GPU_PAGE_SIZE);
        assert_eq!(round_up(131072 + 1, GPU_PAGE_SIZE), 196608);
        assert_eq!(AllocFn::parse("cuMemCreate"), Some(AllocFn::MemCreate));
        assert_eq!(
            AllocFn::parse("cuMemAlloc").map(AllocFn::name),
            Some("cuMemAlloc")
        );
        assert_eq!(AllocFn::parse("malloc"), None);
        assert_eq!(AllocFn::parse("cuMemCreateFd"), Some(AllocFn::MemCreateFd));
    }

    #[test]
    fn the_choices_list_every_allocation_function_once() {
        let names: Vec<&str> = AllocFn::ALL.iter().map(|a| a.name()).collect();
        assert_eq!(ALLOC_CHOICES, names.join(", "));
        for a in AllocFn::ALL {
            assert_eq!(AllocFn::parse(a.name()), Some(a));
        }
    }

    #[test]
    fn only_cu_mem_create_fd_requests_a_file_descriptor() {
        assert_eq!(AllocFn::MemCreateFd.requested_handle_types(), 1);
        assert_eq!(AllocFn::MemCreate.requested_handle_types(), 0);
        assert_eq!(AllocFn::MemAlloc.requested_handle_types(), 0);
    }
}
