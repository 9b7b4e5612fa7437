//! Device attribute values of the one emulated GPU.

use crate::config::{Config, Profile};

/// One past the highest attribute number `cuda.h` 13.5 defines.
pub const ATTRIBUTE_MAX: i32 = 162;

/// The value of attribute `attr` under `cfg`; `None` if `attr` is out of range.
pub fn value(cfg: &Config, attr: i32) -> Option<i32> {
    if !(1..ATTRIBUTE_MAX).contains(&attr) {
        return None;
    }
    let coherent = cfg.profile == Profile::Coherent;
    Some(match attr {
        1 => 1024,        // MAX_THREADS_PER_BLOCK
        2 | 3 => 1024,    // MAX_BLOCK_DIM_X/Y
        4 => 64,          // MAX_BLOCK_DIM_Z
        5 => i32::MAX,    // MAX_GRID_DIM_X
        6 | 7 => 65535,   // MAX_GRID_DIM_Y/Z
        8 => 49152,       // MAX_SHARED_MEMORY_PER_BLOCK
        9 => 65536,       // TOTAL_CONSTANT_MEMORY
        10 => 32,         // WARP_SIZE
        12 => 65536,      // MAX_REGISTERS_PER_BLOCK
        13 => 1_980_000,  // CLOCK_RATE (kHz)
        15 => 1,          // GPU_OVERLAP
        16 => 132,        // MULTIPROCESSOR_COUNT
        19 => 0,          // INTEGRATED
        20 => 0,          // COMPUTE_MODE: default
        31 => 1,          // CONCURRENT_KERNELS
        33 => 0x41,       // PCI_BUS_ID
        34 => 0,          // PCI_DEVICE_ID
        36 => 2_619_000,  // MEMORY_CLOCK_RATE
        37 => 5120,       // GLOBAL_MEMORY_BUS_WIDTH
        38 => 52_428_800, // L2_CACHE_SIZE
        39 => 2048,       // MAX_THREADS_PER_MULTIPROCESSOR
        40 => 2,          // ASYNC_ENGINE_COUNT
        41 => 1,          // UNIFIED_ADDRESSING
        50 => 0,          // PCI_DOMAIN_ID
        75 => {
            if coherent {
                10
            } else {
                9
            }
        } // COMPUTE_CAPABILITY_MAJOR
        76 => 0,          // COMPUTE_CAPABILITY_MINOR
        83 => 1,          // MANAGED_MEMORY
        88 => coherent as i32, // PAGEABLE_MEMORY_ACCESS
        89 => 1,          // CONCURRENT_MANAGED_ACCESS
        100 => coherent as i32, // PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES
        101 => coherent as i32, // DIRECT_MANAGED_MEM_ACCESS_FROM_HOST
        102 => 1,         // VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
        103 => 1,         // HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
        110 => 1,         // GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED
        116 => 1,         // GPU_DIRECT_RDMA_SUPPORTED
        117 => 1,         // GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS
        118 => 100,       // GPU_DIRECT_RDMA_WRITES_ORDERING: all devices
        124 => cfg.dmabuf as i32, // DMA_BUF_SUPPORTED
        152 => cfg.dmabuf as i32, // DMA_BUF_MMAP_SUPPORTED
        _ => 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_dependent_values() {
        let mut c = Config::default();
        assert_eq!(value(&c, 100), Some(0));
        assert_eq!(value(&c, 116), Some(1));
        assert_eq!(value(&c, 124), Some(1));
        c.profile = Profile::Coherent;
        c.dmabuf = false;
        assert_eq!(value(&c, 100), Some(1));
        assert_eq!(value(&c, 75), Some(10));
        assert_eq!(value(&c, 124), Some(0));
        assert_eq!(value(&c, 0), None);
        assert_eq!(value(&c, ATTRIBUTE_MAX), None);
    }
}
