/*
 * freshness.c - does gdr_copy_from_mapping return what the GPU wrote last?
 *
 * For each read size, many times over: the GPU writes a new 32-bit pattern over the buffer
 * (cuMemsetD32, then cuCtxSynchronize, so the write is complete before the CPU reads), and the
 * CPU reads the same bytes through the library's mapping. A read that returns any word of an
 * earlier pattern is stale. Each round reads the same address as the round before, which is
 * where a CPU's streaming-load buffer could answer a read without going to the device.
 *
 * Usage: freshness [iterations] (default 2000). Prints one line per size with the stale count
 * and the median time per read, and exits 1 if any read was stale. It needs device memory the
 * CPU reaches through a BAR to say anything about hardware: the emulator's Vulkan backing on a
 * GPU machine (GDRSIM_BACKING=vulkan), or a real gdrdrv. On ordinary memory it only shows that
 * the program works.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gdrapi.h"
#include "gpu.h"
#include "timing.h"

#define BUF 65536

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 2000;
    if (iters < 1)
        iters = 1;
    static const size_t sizes[] = {4, 8, 16, 32, 64, 128, 256, 1024, 4096};
    gpu_init();
    CUdeviceptr raw = gpu_alloc(BUF);
    unsigned long addr = gpu_aligned(raw);

    gdr_t g = gdr_open();
    if (!g) {
        printf("freshness: gdr_open failed\n");
        return 2;
    }
    gdr_mh_t mh;
    void *va = NULL;
    if (gdr_pin_buffer(g, addr, BUF, 0, 0, &mh) || gdr_map(g, mh, &va, BUF)) {
        printf("freshness: pin or map failed\n");
        return 2;
    }
    gdr_info_t info;
    gdr_get_info(g, mh, &info);
    printf("mapping type %d (1 write-combining, 2 caching, 3 device), %d iterations per size\n",
           (int)info.mapping_type, iters);
    printf("%8s %8s %8s %14s\n", "size", "reads", "stale", "median ns");

    uint32_t host[4096 / 4];
    double *t = malloc(sizeof(double) * (size_t)iters);
    int any_stale = 0;
    uint32_t pattern = 0x9e3779b9u;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        unsigned long stale = 0;
        for (int i = 0; i < iters; i++) {
            pattern = pattern * 1664525u + 1013904223u;
            if (cuMemsetD32(addr, pattern, n / 4) != CUDA_SUCCESS ||
                cuCtxSynchronize() != CUDA_SUCCESS) {
                printf("freshness: cuMemsetD32 failed\n");
                return 2;
            }
            memset(host, 0, n);
            double t0 = now_ns();
            gdr_copy_from_mapping(mh, host, va, n);
            t[i] = now_ns() - t0;
            for (size_t w = 0; w < n / 4; w++) {
                if (host[w] != pattern) {
                    stale++;
                    break;
                }
            }
        }
        printf("%8zu %8d %8lu %14.0f\n", n, iters, stale, median(t, (size_t)iters));
        any_stale |= stale != 0;
    }
    free(t);
    gdr_unmap(g, mh, va, BUF);
    gdr_unpin_buffer(g, mh);
    gdr_close(g);
    cuMemFree(raw);
    printf("freshness: %s\n", any_stale ? "STALE reads seen" : "every read returned the GPU's last write");
    return any_stale ? 1 : 0;
}
