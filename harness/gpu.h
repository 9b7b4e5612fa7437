/*
 * gpu.h - device memory for the C test programs, through the CUDA driver API
 * (the emulator's libcuda on machines without a GPU).
 *
 * GDRAPI_TEST_ALLOC=vmm makes gpu_alloc() allocate as NCCL's cuMem allocator does (cuMemCreate
 * with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, reserve, map, set access): the memory the
 * Vulkan-import backend maps. The default is cuMemAlloc.
 */
#ifndef GDRAPI_ABI_GPU_H
#define GDRAPI_ABI_GPU_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Initialise CUDA and make device 0's primary context current; exits on failure. */
static inline void gpu_init(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUresult r = cuInit(0);
    if (r == CUDA_SUCCESS)
        r = cuDeviceGet(&dev, 0);
    if (r == CUDA_SUCCESS)
        r = cuDevicePrimaryCtxRetain(&ctx, dev);
    if (r == CUDA_SUCCESS)
        r = cuCtxSetCurrent(ctx);
    if (r != CUDA_SUCCESS) {
        fprintf(stdout, "gpu_init: CUDA error %d\n", (int)r);
        exit(2);
    }
}

/* Whether gpu_alloc() makes exportable VMM allocations (GDRAPI_TEST_ALLOC=vmm). */
static inline int gpu_vmm(void)
{
    const char *v = getenv("GDRAPI_TEST_ALLOC");
    return v != NULL && strcmp(v, "vmm") == 0;
}

/* The VMM allocations gpu_alloc() made and gpu_free() has not released. */
#define GPU_VMM_MAX 4096
static struct gpu_vmm_block {
    CUdeviceptr va;
    size_t size;
    CUmemGenericAllocationHandle handle;
} gpu_vmm_blocks[GPU_VMM_MAX];

/* One exportable VMM allocation of at least size bytes, mapped read-write on device 0; the
 * CUresult of the first failing step. */
static inline CUresult gpu_vmm_alloc(CUdeviceptr *out, size_t size)
{
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va = 0;
    size_t gran = 0;
    CUresult r;
    int slot;

    for (slot = 0; slot < GPU_VMM_MAX && gpu_vmm_blocks[slot].size != 0; slot++)
        ;
    if (slot == GPU_VMM_MAX)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.allocFlags.gpuDirectRDMACapable = 1;
    r = cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    if (r != CUDA_SUCCESS)
        return r;
    size = (size + gran - 1) / gran * gran;
    r = cuMemCreate(&h, size, &prop, 0);
    if (r != CUDA_SUCCESS)
        return r;
    r = cuMemAddressReserve(&va, size, gran, 0, 0);
    if (r == CUDA_SUCCESS) {
        r = cuMemMap(va, size, 0, h, 0);
        if (r == CUDA_SUCCESS) {
            memset(&access, 0, sizeof(access));
            access.location = prop.location;
            access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            r = cuMemSetAccess(va, size, &access, 1);
            if (r != CUDA_SUCCESS)
                cuMemUnmap(va, size);
        }
        if (r != CUDA_SUCCESS)
            cuMemAddressFree(va, size);
    }
    if (r != CUDA_SUCCESS) {
        cuMemRelease(h);
        return r;
    }
    gpu_vmm_blocks[slot].va = va;
    gpu_vmm_blocks[slot].size = size;
    gpu_vmm_blocks[slot].handle = h;
    *out = va;
    return CUDA_SUCCESS;
}

/* Allocate size bytes of device memory, with room for a 64 KiB aligned start
 * (gpu_aligned()); exits on failure. */
static inline CUdeviceptr gpu_alloc(size_t size)
{
    CUdeviceptr raw = 0;
    CUresult r = gpu_vmm() ? gpu_vmm_alloc(&raw, size + 0xFFFF) : cuMemAlloc(&raw, size + 0xFFFF);
    if (r != CUDA_SUCCESS) {
        fprintf(stdout, "gpu_alloc(%zu): CUDA error %d\n", size, (int)r);
        exit(2);
    }
    return raw;
}

/* Free an allocation made by gpu_alloc(): unmap, release and unreserve VMM memory, or
 * cuMemFree. */
static inline CUresult gpu_free(CUdeviceptr raw)
{
    for (int i = 0; i < GPU_VMM_MAX; i++) {
        struct gpu_vmm_block *b = &gpu_vmm_blocks[i];
        if (b->size != 0 && b->va == raw) {
            CUresult r = cuMemUnmap(b->va, b->size);
            CUresult r2 = cuMemRelease(b->handle);
            CUresult r3 = cuMemAddressFree(b->va, b->size);
            b->size = 0;
            return r != CUDA_SUCCESS ? r : r2 != CUDA_SUCCESS ? r2 : r3;
        }
    }
    return cuMemFree(raw);
}

/* The first 64 KiB aligned address inside an allocation made by gpu_alloc(). */
static inline unsigned long gpu_aligned(CUdeviceptr raw)
{
    return ((unsigned long)raw + 0xFFFFUL) & ~0xFFFFUL;
}

#endif
