/*
 * copysweep - byte-exact copies both ways through a mapping of real device memory, for every
 * size from 1 B to 4 MiB that a copy kernel treats differently, at every offset class.
 *
 * Sizes: every size from 1 to 1024, then from 1 KiB to 4 MiB every power of two, each with its
 * neighbours (-1, +1) and one in between (x3/2). Offset classes: the device offset in its cache
 * line (0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 33, 48, 63) against the host offset (0, 1, 8, 63),
 * all pairs for sizes up to 1 KiB, the aligned pair and four mixed ones above.
 *
 * Each case writes a fresh pattern with gdr_copy_to_mapping between guard bytes the device
 * already holds, reads the whole window back through CUDA (cuMemcpyDtoH: the GPU's view) and
 * checks the pattern and both guards; then reads the range back with gdr_copy_from_mapping
 * into a host buffer between host guards and checks it too. On memory from gpu_alloc()
 * (GDRAPI_TEST_ALLOC=vmm for the Vulkan backend). Prints "N passed, N failed" with one check
 * per direction and case.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gdrapi.h"
#include "gpu.h"

#define MIB (1UL << 20)
#define MAX_SIZE (4 * MIB)
#define GUARD 128
#define WINDOW (MAX_SIZE + 2 * GUARD + 64)

static const size_t dev_offsets[] = {0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 33, 48, 63};
static const size_t host_offsets[] = {0, 1, 8, 63};
#define N_DEV (sizeof dev_offsets / sizeof dev_offsets[0])
#define N_HOST (sizeof host_offsets / sizeof host_offsets[0])

static size_t sizes[2048];
static size_t n_sizes;

static void add_size(size_t s)
{
    if (s == 0 || s > MAX_SIZE)
        return;
    for (size_t i = 0; i < n_sizes; i++)
        if (sizes[i] == s)
            return;
    sizes[n_sizes++] = s;
}

static unsigned char *host, *back, *expect;
static unsigned seq;

static int one_case(gdr_mh_t mh, char *map, CUdeviceptr d, size_t size, size_t doff, size_t hoff)
{
    const unsigned char guard = (unsigned char)(0xA5 ^ seq);
    size_t start = GUARD + doff; /* where the copy lands in the window */
    size_t span = start + size + GUARD;
    int ok = 1;
    seq++;
    /* The device window: guard bytes everywhere. */
    if (cuMemsetD8(d, guard, span) != CUDA_SUCCESS || cuCtxSynchronize() != CUDA_SUCCESS)
        return 0;
    for (size_t i = 0; i < size; i++)
        host[hoff + i] = (unsigned char)(i * 29 + seq * 7 + (i >> 8));
    if (gdr_copy_to_mapping(mh, map + start, host + hoff, size) != 0)
        return 0;
    if (cuMemcpyDtoH(back, d, span) != CUDA_SUCCESS)
        return 0;
    for (size_t i = 0; i < span; i++) {
        unsigned char want = (i >= start && i < start + size) ? host[hoff + i - start] : guard;
        if (back[i] != want) {
            printf("to_mapping size %zu doff %zu hoff %zu: byte %zu is 0x%02x, want 0x%02x\n",
                   size, doff, hoff, i, back[i], want);
            ok = 0;
            break;
        }
    }
    CHECK(ok);

    /* And back: the device now holds the pattern; read it between host guards. */
    int ok2 = 1;
    memset(expect, 0x5A, hoff + size + GUARD);
    if (gdr_copy_from_mapping(mh, expect + hoff, map + start, size) != 0)
        return 0;
    for (size_t i = 0; i < hoff + size + GUARD; i++) {
        unsigned char want = (i >= hoff && i < hoff + size) ? host[i] : 0x5A;
        if (expect[i] != want) {
            printf("from_mapping size %zu doff %zu hoff %zu: byte %zu is 0x%02x, want 0x%02x\n",
                   size, doff, hoff, i, expect[i], want);
            ok2 = 0;
            break;
        }
    }
    CHECK(ok2);
    return 1;
}

int main(void)
{
    for (size_t s = 1; s <= 1024; s++)
        add_size(s);
    for (size_t p = 2048; p <= MAX_SIZE; p <<= 1) {
        add_size(p - 1);
        add_size(p);
        add_size(p + 1);
        add_size(p / 2 * 3);
    }
    host = malloc(MAX_SIZE + 128);
    back = malloc(WINDOW);
    expect = malloc(MAX_SIZE + 128 + GUARD);
    REQUIRE(host && back && expect);

    gpu_init();
    CUdeviceptr raw = gpu_alloc(WINDOW);
    unsigned long d = gpu_aligned(raw);
    size_t mapped = (WINDOW + 0xFFFF) & ~0xFFFFUL;
    gdr_t g = gdr_open();
    REQUIRE(g != NULL);
    gdr_mh_t mh;
    REQUIRE(gdr_pin_buffer_v2(g, d, mapped, 0, &mh) == 0);
    void *map = NULL;
    REQUIRE(gdr_map(g, mh, &map, mapped) == 0);
    gdr_info_t info;
    REQUIRE(gdr_get_info_v2(g, mh, &info) == 0);
    printf("copysweep: %zu sizes, mapping type %d (%s)\n", n_sizes, info.mapping_type,
           info.wc_mapping ? "write-combining" : "not write-combining");

    long cases = 0, broken = 0;
    for (size_t k = 0; k < n_sizes; k++) {
        size_t size = sizes[k];
        for (size_t a = 0; a < N_DEV; a++) {
            for (size_t b = 0; b < N_HOST; b++) {
                /* Above 1 KiB: the aligned pair and four mixed ones. */
                if (size > 1024 && !(a == 0 && b == 0) && !(a == b + 5) && !(a == 13 && b == 3))
                    continue;
                cases++;
                if (!one_case(mh, map, d, size, dev_offsets[a], host_offsets[b])) {
                    broken++;
                    CHECK(!"a copy or CUDA call failed");
                }
            }
        }
    }
    printf("copysweep: %ld cases, %ld with a failed call\n", cases, broken);
    CHECK_EQ(gdr_unmap(g, mh, map, mapped), 0);
    CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
    CHECK_EQ(gdr_close(g), 0);
    CHECK_EQ(gpu_free(raw), CUDA_SUCCESS);
    free(host);
    free(back);
    free(expect);
    return check_done("copysweep");
}
