/*
 * gpu.h - device memory for the C ABI tests, through the CUDA driver API
 * (the emulator's libcuda on machines without a GPU).
 */
#ifndef GDRAPI_ABI_GPU_H
#define GDRAPI_ABI_GPU_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

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

/* Allocate size bytes of device memory, 64 KiB aligned; exits on failure. */
static inline CUdeviceptr gpu_alloc(size_t size)
{
    CUdeviceptr raw = 0;
    CUresult r = cuMemAlloc(&raw, size + 0xFFFF);
    if (r != CUDA_SUCCESS) {
        fprintf(stdout, "gpu_alloc(%zu): CUDA error %d\n", size, (int)r);
        exit(2);
    }
    return raw;
}

/* The first 64 KiB aligned address inside an allocation made by gpu_alloc(). */
static inline unsigned long gpu_aligned(CUdeviceptr raw)
{
    return ((unsigned long)raw + 0xFFFFUL) & ~0xFFFFUL;
}

#endif
