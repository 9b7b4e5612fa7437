//! `gdrapi_abi::cuda` against the real `cuda.h` (from the nvidia-cuda-runtime wheel): a C
//! program with a static assertion of each type's size, each structure's size and member
//! offsets, each constant, each `CUresult` name's value and each prototype of `pfn`, compiled
//! with the header.
//!
//! The header is found as the Makefile finds it: `CUDA_INCLUDE`, else the `nvidia` Python
//! package. Without it the test says so and passes, except under `CI`, where it fails.

mod c;

use c::Layout;
use gdrapi_abi::cuda::*;
use std::fmt::Write as _;
use std::mem::size_of;

fn layouts() -> Vec<Layout> {
    vec![
        layout!("CUmemLocation", MemLocation, [kind => "type", id]),
        layout!(
            "CUmemAllocationProp",
            MemAllocationProp,
            [
                kind => "type",
                requested_handle_types => "requestedHandleTypes",
                location,
                win32_handle_meta_data => "win32HandleMetaData",
                compression_type => "allocFlags.compressionType",
                gpu_direct_rdma_capable => "allocFlags.gpuDirectRDMACapable",
                usage => "allocFlags.usage",
                reserved => "allocFlags.reserved",
            ]
        ),
        layout!("CUmemAccessDesc", MemAccessDesc, [location, flags]),
        layout!(
            "CUDA_EXTERNAL_MEMORY_HANDLE_DESC",
            ExternalMemoryHandleDesc,
            [kind => "type", fd => "handle.fd", size, flags, reserved]
        ),
        layout!(
            "CUDA_EXTERNAL_MEMORY_BUFFER_DESC",
            ExternalMemoryBufferDesc,
            [offset, size, flags, reserved]
        ),
    ]
}

/// `(cuda.h name, Rust value)` of each constant.
fn constants() -> Vec<(&'static str, i64)> {
    vec![
        ("CUDA_SUCCESS", status::SUCCESS.into()),
        ("CUDA_ERROR_INVALID_VALUE", status::INVALID_VALUE.into()),
        ("CUDA_ERROR_OUT_OF_MEMORY", status::OUT_OF_MEMORY.into()),
        ("CUDA_ERROR_NOT_INITIALIZED", status::NOT_INITIALIZED.into()),
        ("CUDA_ERROR_NO_DEVICE", status::NO_DEVICE.into()),
        ("CUDA_ERROR_INVALID_DEVICE", status::INVALID_DEVICE.into()),
        ("CUDA_ERROR_INVALID_CONTEXT", status::INVALID_CONTEXT.into()),
        ("CUDA_ERROR_INVALID_HANDLE", status::INVALID_HANDLE.into()),
        ("CUDA_ERROR_NOT_FOUND", status::NOT_FOUND.into()),
        ("CUDA_ERROR_NOT_SUPPORTED", status::NOT_SUPPORTED.into()),
        ("CUDA_ERROR_UNKNOWN", status::UNKNOWN.into()),
        ("CU_DEVICE_ATTRIBUTE_PCI_BUS_ID", attr::PCI_BUS_ID.into()),
        (
            "CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID",
            attr::PCI_DEVICE_ID.into(),
        ),
        (
            "CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID",
            attr::PCI_DOMAIN_ID.into(),
        ),
        (
            "CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES",
            attr::PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES.into(),
        ),
        (
            "CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED",
            attr::GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED.into(),
        ),
        (
            "CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED",
            attr::GPU_DIRECT_RDMA_SUPPORTED.into(),
        ),
        (
            "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED",
            attr::DMA_BUF_SUPPORTED.into(),
        ),
        (
            "CU_POINTER_ATTRIBUTE_SYNC_MEMOPS",
            POINTER_ATTRIBUTE_SYNC_MEMOPS.into(),
        ),
        (
            "CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL",
            POINTER_ATTRIBUTE_DEVICE_ORDINAL.into(),
        ),
        ("CU_MEMHOSTALLOC_DEVICEMAP", MEMHOSTALLOC_DEVICEMAP.into()),
        (
            "CU_MEMHOSTALLOC_WRITECOMBINED",
            MEMHOSTALLOC_WRITECOMBINED.into(),
        ),
        (
            "CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD",
            EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD.into(),
        ),
        (
            "CU_MEM_LOCATION_TYPE_DEVICE",
            MEM_LOCATION_TYPE_DEVICE.into(),
        ),
        (
            "CU_MEM_ALLOCATION_TYPE_PINNED",
            MEM_ALLOCATION_TYPE_PINNED.into(),
        ),
        (
            "CU_MEM_ACCESS_FLAGS_PROT_READWRITE",
            MEM_ACCESS_FLAGS_PROT_READWRITE.into(),
        ),
        (
            "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR",
            MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR.into(),
        ),
        (
            "CU_MEM_ALLOC_GRANULARITY_RECOMMENDED",
            MEM_ALLOC_GRANULARITY_RECOMMENDED.into(),
        ),
        (
            "CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD",
            MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD.into(),
        ),
        (
            "CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE",
            MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE as i64,
        ),
        (
            "CU_GET_PROC_ADDRESS_DEFAULT",
            GET_PROC_ADDRESS_DEFAULT as i64,
        ),
    ]
}

/// `(cuda.h type, Rust size)` of each scalar or opaque type.
fn types() -> Vec<(&'static str, usize)> {
    vec![
        ("CUresult", size_of::<CUresult>()),
        ("CUdevice", size_of::<CUdevice>()),
        ("CUdeviceptr", size_of::<CUdeviceptr>()),
        ("CUcontext", size_of::<CUcontext>()),
        ("CUstream", size_of::<CUstream>()),
        ("CUexternalMemory", size_of::<CUexternalMemory>()),
        (
            "CUmemGenericAllocationHandle",
            size_of::<CUmemGenericAllocationHandle>(),
        ),
        ("CUuuid", size_of::<CUuuid>()),
    ]
}

/// Each function with the prototype of `pfn`'s type of that name, spelled in C.
const PROTOTYPES: [(&str, &str); 43] = [
    ("cuInit", "CUresult (*)(unsigned int)"),
    ("cuDriverGetVersion", "CUresult (*)(int *)"),
    ("cuGetErrorName", "CUresult (*)(CUresult, const char **)"),
    ("cuGetErrorString", "CUresult (*)(CUresult, const char **)"),
    ("cuGetProcAddress_v2", "CUresult (*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *)"),
    ("cuDeviceGetCount", "CUresult (*)(int *)"),
    ("cuDeviceGet", "CUresult (*)(CUdevice *, int)"),
    ("cuDeviceGetName", "CUresult (*)(char *, int, CUdevice)"),
    ("cuDeviceGetAttribute", "CUresult (*)(int *, CUdevice_attribute, CUdevice)"),
    ("cuDeviceGetUuid_v2", "CUresult (*)(CUuuid *, CUdevice)"),
    ("cuDevicePrimaryCtxRetain", "CUresult (*)(CUcontext *, CUdevice)"),
    ("cuDevicePrimaryCtxRelease_v2", "CUresult (*)(CUdevice)"),
    ("cuCtxGetCurrent", "CUresult (*)(CUcontext *)"),
    ("cuCtxSetCurrent", "CUresult (*)(CUcontext)"),
    ("cuCtxSynchronize", "CUresult (*)(void)"),
    ("cuMemAlloc_v2", "CUresult (*)(CUdeviceptr *, size_t)"),
    ("cuMemFree_v2", "CUresult (*)(CUdeviceptr)"),
    ("cuMemAllocHost_v2", "CUresult (*)(void **, size_t)"),
    ("cuMemHostAlloc", "CUresult (*)(void **, size_t, unsigned int)"),
    ("cuMemFreeHost", "CUresult (*)(void *)"),
    ("cuMemHostGetDevicePointer_v2", "CUresult (*)(CUdeviceptr *, void *, unsigned int)"),
    ("cuMemcpy", "CUresult (*)(CUdeviceptr, CUdeviceptr, size_t)"),
    ("cuMemcpyHtoD_v2", "CUresult (*)(CUdeviceptr, const void *, size_t)"),
    ("cuMemcpyDtoH_v2", "CUresult (*)(void *, CUdeviceptr, size_t)"),
    ("cuMemsetD8_v2", "CUresult (*)(CUdeviceptr, unsigned char, size_t)"),
    ("cuPointerGetAttribute", "CUresult (*)(void *, CUpointer_attribute, CUdeviceptr)"),
    ("cuPointerSetAttribute", "CUresult (*)(const void *, CUpointer_attribute, CUdeviceptr)"),
    ("cuMemGetAddressRange_v2", "CUresult (*)(CUdeviceptr *, size_t *, CUdeviceptr)"),
    ("cuMemGetHandleForAddressRange", "CUresult (*)(void *, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long)"),
    ("cuMemGetAllocationGranularity", "CUresult (*)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags)"),
    ("cuMemAddressReserve", "CUresult (*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long)"),
    ("cuMemAddressFree", "CUresult (*)(CUdeviceptr, size_t)"),
    ("cuMemCreate", "CUresult (*)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long)"),
    ("cuMemRelease", "CUresult (*)(CUmemGenericAllocationHandle)"),
    ("cuMemMap", "CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long)"),
    ("cuMemUnmap", "CUresult (*)(CUdeviceptr, size_t)"),
    ("cuMemSetAccess", "CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t)"),
    ("cuMemRetainAllocationHandle", "CUresult (*)(CUmemGenericAllocationHandle *, void *)"),
    ("cuMemGetAllocationPropertiesFromHandle", "CUresult (*)(CUmemAllocationProp *, CUmemGenericAllocationHandle)"),
    ("cuMemExportToShareableHandle", "CUresult (*)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long)"),
    ("cuImportExternalMemory", "CUresult (*)(CUexternalMemory *, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *)"),
    ("cuExternalMemoryGetMappedBuffer", "CUresult (*)(CUdeviceptr *, CUexternalMemory, const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *)"),
    ("cuDestroyExternalMemory", "CUresult (*)(CUexternalMemory)"),
];

/// The legacy functions `pfn` also has: `cuda.h` declares them only for the driver's own
/// build (`__CUDA_API_VERSION_INTERNAL`), `#define`-ing their names to the newer versions.
const LEGACY_PROTOTYPES: [(&str, &str); 3] = [
    (
        "cuGetProcAddress",
        "CUresult (*)(const char *, void **, int, cuuint64_t)",
    ),
    ("cuDeviceGetUuid", "CUresult (*)(CUuuid *, CUdevice)"),
    ("cuDevicePrimaryCtxRelease", "CUresult (*)(CUdevice)"),
];

/// Static assertions that each function of `protos` has its prototype.
fn prototype_asserts(protos: &[(&str, &str)]) -> String {
    let mut src = String::new();
    for (f, proto) in protos {
        writeln!(
            src,
            "_Static_assert(__builtin_types_compatible_p(__typeof__(&{f}), {proto}), \"{f} is {proto}\");"
        )
        .unwrap();
    }
    src
}

#[test]
fn the_declarations_are_cuda_hs() {
    let hint = "pip install nvidia-cuda-runtime";
    let Some(include) = c::wheel_include("CUDA_INCLUDE", "cuda.h", hint) else {
        return;
    };
    let mut src = String::from("#include <stddef.h>\n#include <cuda.h>\n\n");
    for (t, size) in types() {
        writeln!(
            src,
            "_Static_assert(sizeof({t}) == {size}, \"{t} is {size} bytes\");"
        )
        .unwrap();
    }
    // CUresult is an enum in C: as wide as the int the Rust side has, whatever its signedness.
    src += "_Static_assert(sizeof(CUresult) == sizeof(int), \"CUresult is an int\");\n";
    for l in layouts() {
        src += &l.asserts();
    }
    for (c, v) in constants() {
        writeln!(src, "_Static_assert({c} == {v}, \"{c} is {v}\");").unwrap();
    }
    for (code, name) in ERROR_NAMES {
        let name = name.to_str().unwrap();
        writeln!(
            src,
            "_Static_assert({name} == {code}, \"{name} is {code}\");"
        )
        .unwrap();
    }
    // The prototypes of `pfn`, spelled in C here, are the header's.
    src += &prototype_asserts(&PROTOTYPES);
    src += "\nint main(void) { return 0; }\n";
    c::compile_and_run("cuda_header", &src, &[&include]);
    let legacy = String::from("#define __CUDA_API_VERSION_INTERNAL\n#include <cuda.h>\n\n")
        + &prototype_asserts(&LEGACY_PROTOTYPES)
        + "\nint main(void) { return 0; }\n";
    c::compile_and_run("cuda_header_legacy", &legacy, &[&include]);
}
