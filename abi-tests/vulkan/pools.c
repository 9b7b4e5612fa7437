/*
 * pools - the Vulkan-import backend at the scale of memory pools, on the emulator's Vulkan
 * stand-in or on a real GPU (`make test-gpu`): many pins inside one allocation, as a
 * registration cache over a pool, PyTorch's expandable segments or NVSHMEM's heap make them.
 *
 *   pools ranges SIZE_MIB COUNT
 *       COUNT ranges of 64 KiB spread evenly over one allocation of SIZE_MIB: each pinned,
 *       mapped and written through its mapping while all stay pinned, then every one checked
 *       through CUDA, unmapped (its old address must fault) and unpinned. On the emulator the
 *       allocation has one import however many pins it holds.
 *   pools allocations COUNT SIZE_MIB
 *       COUNT allocations of SIZE_MIB, one 64 KiB pin of each, written, checked and released.
 *   pools firstpin REPEATS SIZE_MIB...
 *       the first pin and map of an allocation of each size (its import), and the unmap and
 *       unpin that free it, REPEATS times each.
 *
 * Prints, besides the checks' "N passed, N failed", one "pools:" line per figure: the first
 * pin+map and the last unmap+unpin of a run, and the median and worst of the others (us).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "gdrapi.h"
#include "gdrsim.h"
#include "gpu.h"

#define KIB (1UL << 10)
#define MIB (1UL << 20)
#define RANGE (64 * KIB)
#define LINE 64

static int (*sim_counters)(struct gdrsim_counters *, size_t);

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* "pools: WHAT: median M us, worst W us (N)" over t[0..n). */
static void summary(const char *what, double *t, size_t n)
{
    if (n == 0)
        return;
    qsort(t, n, sizeof *t, by_value);
    printf("pools: %s: median %.1f us, worst %.1f us (%zu)\n", what, t[n / 2], t[n - 1], n);
}

/* The emulator's counters (all zero on a GPU, where sim_counters is NULL). */
static struct gdrsim_counters counters(void)
{
    struct gdrsim_counters c;
    memset(&c, 0, sizeof c);
    if (sim_counters)
        REQUIRE_EQ(sim_counters(&c, sizeof c), 0);
    return c;
}

/* Live Vulkan imports on the emulator; -1 on a GPU. */
static long live_imports(void)
{
    return sim_counters ? (long)counters().live_vk_imports : -1;
}

/* The 64 bytes written at the start of range i. */
static void line_of(size_t i, unsigned char *b)
{
    for (size_t k = 0; k < LINE; k++)
        b[k] = (unsigned char)(i * 7 + k * 13 + (i >> 8));
}

struct range {
    gdr_mh_t mh;
    void *map;
};

/* Pins and maps [d, d+RANGE), then writes its line; the time of the pin and map in *t. */
static int pin_map_write(gdr_t g, CUdeviceptr d, size_t i, struct range *r, double *t)
{
    const char *step = "gdr_pin_buffer_v2";
    r->map = NULL;
    double t0 = now_us();
    int rc = gdr_pin_buffer_v2(g, d, RANGE, 0, &r->mh);
    if (rc == 0) {
        step = "gdr_map";
        rc = gdr_map(g, r->mh, &r->map, RANGE);
        if (rc != 0)
            gdr_unpin_buffer(g, r->mh);
    }
    *t = now_us() - t0;
    if (rc != 0) {
        printf("pools: range %zu at %#llx: %s failed: %d\n", i, (unsigned long long)d, step, rc);
        return rc;
    }
    unsigned char b[LINE];
    line_of(i, b);
    CHECK_EQ(gdr_copy_to_mapping(r->mh, r->map, b, LINE), 0);
    return 0;
}

/* The line of range i, read back through CUDA. */
static int line_seen(CUdeviceptr d, size_t i)
{
    unsigned char want[LINE], got[LINE];
    line_of(i, want);
    memset(got, 0, sizeof got);
    return cuMemcpyDtoH(got, d, LINE) == CUDA_SUCCESS && memcmp(want, got, LINE) == 0;
}

/* Unmaps and unpins r; the time in *t. */
static int unmap_unpin(gdr_t g, struct range *r, double *t)
{
    double t0 = now_us();
    int rc = gdr_unmap(g, r->mh, r->map, RANGE);
    int rc2 = gdr_unpin_buffer(g, r->mh);
    *t = now_us() - t0;
    return rc != 0 ? rc : rc2;
}

static int scenario_ranges(size_t size, size_t count)
{
    REQUIRE(count > 0 && size / count >= RANGE);
    const size_t stride = size / count / RANGE * RANGE;
    CUdeviceptr base = 0;
    REQUIRE_EQ(gpu_vmm_alloc(&base, size), CUDA_SUCCESS);
    gdr_t g = gdr_open();
    REQUIRE(g != NULL);
    struct range *r = calloc(count, sizeof *r);
    double *pin_t = calloc(count, sizeof *pin_t), *unpin_t = calloc(count, sizeof *unpin_t);
    REQUIRE(r != NULL && pin_t != NULL && unpin_t != NULL);

    uint64_t made_before = counters().vk_imports_made;
    size_t pinned = 0;
    for (; pinned < count; pinned++)
        if (pin_map_write(g, base + pinned * stride, pinned, &r[pinned], &pin_t[pinned]) != 0)
            break;
    CHECK_EQ(pinned, count);
    printf("pools: %zu of %zu ranges of a %zu MiB allocation pinned and mapped\n", pinned,
           count, size >> 20);
    long imports = live_imports();
    if (imports != -1) {
        uint64_t made = counters().vk_imports_made - made_before;
        printf("pools: live imports with every range pinned: %ld (%llu made)\n", imports,
               (unsigned long long)made);
        CHECK_EQ(imports, 1);
        CHECK_EQ(made, 1);
        CHECK_EQ(counters().live_vk_import_bytes, size);
    }
    size_t seen = 0;
    for (size_t i = 0; i < pinned; i++)
        seen += line_seen(base + i * stride, i);
    CHECK_EQ(seen, pinned);

    size_t unpinned = 0, faulted = 0, probed = 0, others_ok = 0;
    for (size_t i = 0; i < pinned; i++) {
        unpinned += unmap_unpin(g, &r[i], &unpin_t[i]) == 0;
        /* Every 256th: its old address faults, and the next range's mapping still works. */
        if (i % 256 == 0) {
            probed++;
            faulted += check_read_faults(r[i].map) != 0;
            if (i + 1 < pinned) {
                unsigned char b[LINE], want[LINE];
                line_of(i + 1, want);
                others_ok += gdr_copy_from_mapping(r[i + 1].mh, b, r[i + 1].map, LINE) == 0 &&
                             memcmp(b, want, LINE) == 0;
            } else {
                others_ok++;
            }
        }
    }
    CHECK_EQ(unpinned, pinned);
    CHECK_EQ(faulted, probed);
    CHECK_EQ(others_ok, probed);
    if (imports != -1)
        CHECK_EQ(live_imports(), 0);
    if (pinned > 0) {
        printf("pools: first pin+map (the import): %.1f us\n", pin_t[0]);
        printf("pools: last unmap+unpin (frees the import): %.1f us\n", unpin_t[pinned - 1]);
        summary("pin+map in an imported allocation", pin_t + 1, pinned - 1);
        summary("unmap+unpin, not the last", unpin_t, pinned - 1);
    }
    CHECK_EQ(gdr_close(g), 0);
    CHECK_EQ(gpu_free(base), CUDA_SUCCESS);
    free(r);
    free(pin_t);
    free(unpin_t);
    return check_done("pools ranges");
}

static int scenario_allocations(size_t count, size_t size)
{
    CUdeviceptr *d = calloc(count, sizeof *d);
    struct range *r = calloc(count, sizeof *r);
    double *pin_t = calloc(count, sizeof *pin_t), *unpin_t = calloc(count, sizeof *unpin_t);
    REQUIRE(d != NULL && r != NULL && pin_t != NULL && unpin_t != NULL);
    gdr_t g = gdr_open();
    REQUIRE(g != NULL);
    size_t made = 0, pinned = 0;
    for (; made < count; made++) {
        if (gpu_vmm_alloc(&d[made], size) != CUDA_SUCCESS)
            break;
        if (pin_map_write(g, d[made], made, &r[made], &pin_t[made]) != 0) {
            made++;
            break;
        }
        pinned++;
    }
    CHECK_EQ(made, count);
    CHECK_EQ(pinned, count);
    printf("pools: %zu of %zu allocations of %zu MiB pinned and mapped\n", pinned, count,
           size >> 20);
    long imports = live_imports();
    if (imports != -1)
        CHECK_EQ(imports, (long)pinned);
    size_t seen = 0, unpinned = 0;
    for (size_t i = 0; i < pinned; i++)
        seen += line_seen(d[i], i);
    CHECK_EQ(seen, pinned);
    for (size_t i = 0; i < pinned; i++)
        unpinned += unmap_unpin(g, &r[i], &unpin_t[i]) == 0;
    CHECK_EQ(unpinned, pinned);
    summary("pin+map, one allocation each", pin_t, pinned);
    summary("unmap+unpin, one allocation each", unpin_t, pinned);
    CHECK_EQ(gdr_close(g), 0);
    size_t freed = 0;
    for (size_t i = 0; i < made; i++)
        freed += gpu_free(d[i]) == CUDA_SUCCESS;
    CHECK_EQ(freed, made);
    free(d);
    free(r);
    free(pin_t);
    free(unpin_t);
    return check_done("pools allocations");
}

static int scenario_firstpin(int repeats, char **sizes, int n)
{
    REQUIRE(repeats > 0);
    gdr_t g = gdr_open();
    REQUIRE(g != NULL);
    double *pin_t = calloc((size_t)repeats, sizeof *pin_t);
    double *unpin_t = calloc((size_t)repeats, sizeof *unpin_t);
    REQUIRE(pin_t != NULL && unpin_t != NULL);
    for (int s = 0; s < n; s++) {
        size_t size = strtoul(sizes[s], NULL, 0) * MIB;
        CUdeviceptr d = 0;
        REQUIRE_EQ(gpu_vmm_alloc(&d, size), CUDA_SUCCESS);
        int done = 0;
        for (int k = 0; k < repeats; k++) {
            struct range r;
            if (pin_map_write(g, d, (size_t)k, &r, &pin_t[k]) != 0)
                break;
            CHECK(line_seen(d, (size_t)k));
            CHECK_EQ(unmap_unpin(g, &r, &unpin_t[k]), 0);
            done++;
        }
        CHECK_EQ(done, repeats);
        char what[96];
        snprintf(what, sizeof what, "first pin+map of a %zu MiB allocation", size >> 20);
        summary(what, pin_t, (size_t)done);
        snprintf(what, sizeof what, "unmap+unpin freeing a %zu MiB allocation's import",
                 size >> 20);
        summary(what, unpin_t, (size_t)done);
        CHECK_EQ(gpu_free(d), CUDA_SUCCESS);
    }
    CHECK_EQ(gdr_close(g), 0);
    free(pin_t);
    free(unpin_t);
    return check_done("pools firstpin");
}

int main(int argc, char **argv)
{
    sim_counters = (int (*)(struct gdrsim_counters *, size_t))(uintptr_t)dlsym(
        RTLD_DEFAULT, "gdrsim_get_counters");
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *s = argc > 1 ? argv[1] : "";
    gpu_init();
    if (strcmp(s, "ranges") == 0 && argc == 4)
        return scenario_ranges(strtoul(argv[2], NULL, 0) * MIB, strtoul(argv[3], NULL, 0));
    if (strcmp(s, "allocations") == 0 && argc == 4)
        return scenario_allocations(strtoul(argv[2], NULL, 0), strtoul(argv[3], NULL, 0) * MIB);
    if (strcmp(s, "firstpin") == 0 && argc >= 4)
        return scenario_firstpin(atoi(argv[2]), argv + 3, argc - 3);
    fprintf(stderr, "usage: %s ranges SIZE_MIB COUNT | allocations COUNT SIZE_MIB | "
                    "firstpin REPEATS SIZE_MIB...\n",
            argv[0]);
    return 2;
}
