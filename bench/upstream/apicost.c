/*
 * apicost.c - the CPU time of pin, get_info, map, unmap and unpin, with warm and with cold
 * caches, for whichever libgdrapi.so.2 the dynamic loader finds.
 *
 * gdrcopy_apiperf times each call right after the one before it in a pin/map/get_info/unmap/
 * unpin cycle; where map and unmap are slow (milliseconds through a Vulkan import on the
 * emulator's real-VRAM mode, or a driver that touches many pages), the calls after them find
 * the caches cold, and the time then depends on how many distinct cache lines a library's code
 * and data touch. This program measures both cases: "warm" repeats one call back to back,
 * "cold" first evicts the caches by streaming through a buffer larger than the last-level
 * cache. The driver's own cost is in both; compare two libraries on the same machine.
 *
 * Usage: apicost [iterations] [evict MiB] (defaults 2000, 128). Prints, in ns per call, the
 * median, mean and 90th percentile of the warm calls and the median of the cold ones.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gdrapi.h"
#include "gpu.h"
#include "evict.h"
#include "timing.h"

#define SIZE 65536

enum { PIN, INFO, MAP, UNMAP, UNPIN, NCALLS };
static const char *const names[NCALLS] = {"pin", "get_info", "map", "unmap", "unpin"};

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 2000;
    size_t evict_mib = argc > 2 ? strtoul(argv[2], NULL, 0) : 128;
    if (iters < 1)
        iters = 1;
    if (evict_init(evict_mib))
        return 2;
    double *t[2][NCALLS];
    for (int c = 0; c < 2; c++)
        for (int k = 0; k < NCALLS; k++)
            t[c][k] = malloc(sizeof(double) * (size_t)iters);

    gpu_init();
    CUdeviceptr raw = gpu_alloc(SIZE);
    unsigned long addr = gpu_aligned(raw);
    gdr_t g = gdr_open();
    if (!g) {
        printf("apicost: gdr_open failed\n");
        return 2;
    }
    for (int cold = 0; cold < 2; cold++) {
        for (int i = 0; i < iters; i++) {
            gdr_mh_t mh;
            gdr_info_t info;
            void *va = NULL;
            double t0;
            int rc = 0;
#define TIMED(k, call)                                                                             \
    do {                                                                                           \
        if (cold)                                                                                  \
            evict();                                                                               \
        t0 = now_ns();                                                                             \
        rc |= (call);                                                                              \
        t[cold][k][i] = now_ns() - t0;                                                             \
    } while (0)
            TIMED(PIN, gdr_pin_buffer(g, addr, SIZE, 0, 0, &mh));
            TIMED(MAP, gdr_map(g, mh, &va, SIZE));
            TIMED(INFO, gdr_get_info(g, mh, &info));
            TIMED(UNMAP, gdr_unmap(g, mh, va, SIZE));
            TIMED(UNPIN, gdr_unpin_buffer(g, mh));
            if (rc) {
                printf("apicost: a call failed in iteration %d\n", i);
                return 1;
            }
        }
    }
    printf("%-10s %12s %12s %12s %12s   (ns per call, %d iterations, %zu MiB evicted before each "
           "cold call)\n",
           "call", "warm", "warm mean", "warm p90", "cold", iters, evict_mib);
    for (int k = 0; k < NCALLS; k++) {
        /* gdrcopy_apiperf reports means, which a few slow calls move: the mean and the 90th
         * percentile show such a tail beside the median. */
        double sum = 0;
        for (int i = 0; i < iters; i++)
            sum += t[0][k][i];
        double warm = median(t[0][k], (size_t)iters); /* sorts t[0][k] */
        printf("%-10s %12.0f %12.0f %12.0f %12.0f\n", names[k], warm, sum / iters,
               t[0][k][(size_t)iters * 9 / 10], median(t[1][k], (size_t)iters));
    }
    gdr_close(g);
    cuMemFree(raw);
    return 0;
}
