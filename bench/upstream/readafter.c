/*
 * readafter.c - reads through a mapping before and after a pass of writes to it, for
 * whichever libgdrapi.so.2 the dynamic loader finds.
 *
 * gdrcopy_copylat runs its write pass first and its read pass after it, in one process. On
 * memory the CPU caches (the emulator's, a benchmark's), what the writes leave in the cache
 * changes what the reads cost: lines left dirty are written back as the reads evict them.
 * Through a BAR (write-combining memory) nothing is cached and both columns agree. This
 * program times each read alone (a clock read on each side), first on a fresh mapping, then
 * after copylat's write pass: WRITES copies of every power of two from 1 byte to the mapping's
 * size. Run it in a fresh process per library: the point is the state one process leaves.
 *
 * Usage: readafter [reads per size] [writes per size] (defaults 1000, 10000). Prints per read
 * size the median ns of the reads before and after the write pass, and after / before.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdrapi.h"
#include "gpu.h"
#include "timing.h"

#define MAP_SIZE (1 << 20)

static const size_t sizes[] = {32 << 10, 128 << 10, 512 << 10};
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* The median ns of `reads` reads of `n` bytes, each timed alone, after 100 untimed ones. */
static double reads_median(gdr_mh_t mh, void *host, const void *va, size_t n, int reads,
                           double *t)
{
    for (int i = 0; i < 100; i++)
        gdr_copy_from_mapping(mh, host, va, n);
    for (int i = 0; i < reads; i++) {
        double t0 = now_ns();
        gdr_copy_from_mapping(mh, host, va, n);
        t[i] = now_ns() - t0;
    }
    return median(t, (size_t)reads);
}

int main(int argc, char **argv)
{
    int reads = argc > 1 ? atoi(argv[1]) : 1000;
    int writes = argc > 2 ? atoi(argv[2]) : 10000;
    if (reads < 1 || writes < 0) {
        printf("usage: readafter [reads per size >= 1] [writes per size >= 0]\n");
        return 2;
    }
    gpu_init();
    CUdeviceptr raw = gpu_alloc(MAP_SIZE);
    unsigned long addr = gpu_aligned(raw);
    gdr_t g = gdr_open();
    gdr_mh_t mh;
    void *va = NULL;
    char *host = aligned_alloc(4096, MAP_SIZE);
    double *t = malloc(sizeof(double) * (size_t)reads);
    double before[NSIZES], after[NSIZES];
    if (!g || !host || !t || gdr_pin_buffer(g, addr, MAP_SIZE, 0, 0, &mh) ||
        gdr_map(g, mh, &va, MAP_SIZE)) {
        printf("readafter: setting up the mapping failed\n");
        return 1;
    }
    memset(host, 0x5a, MAP_SIZE);
    for (size_t s = 0; s < NSIZES; s++)
        before[s] = reads_median(mh, host, va, sizes[s], reads, t);
    for (size_t n = 1; n <= MAP_SIZE; n *= 2)
        for (int i = 0; i < writes; i++)
            gdr_copy_to_mapping(mh, va, host, n);
    for (size_t s = 0; s < NSIZES; s++)
        after[s] = reads_median(mh, host, va, sizes[s], reads, t);
    printf("readafter: %d reads per size, each timed alone, before and after %d writes of "
           "each size from 1 B to %d KiB\n",
           reads, writes, MAP_SIZE >> 10);
    printf("%-8s %12s %12s %9s\n", "size", "before ns", "after ns", "after/before");
    for (size_t s = 0; s < NSIZES; s++)
        printf("%-8zu %12.0f %12.0f %9.3f\n", sizes[s], before[s], after[s], after[s] / before[s]);
    gdr_unmap(g, mh, va, MAP_SIZE);
    gdr_unpin_buffer(g, mh);
    gdr_close(g);
    cuMemFree(raw);
    free(t);
    free(host);
    return 0;
}
