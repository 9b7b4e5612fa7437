/*
 * apiab.c - gdrcopy_apiperf's cycle (pin, map, get_info, unmap, unpin) for two or three
 * libgdrapi.so.2 builds in one process, interleaved call cycle by call cycle.
 *
 * Separate processes, as gdrcopy_apiperf and compare.py run them, see the machine change
 * between runs (which physical pages, which BAR offsets, what else runs on the host): over
 * real VRAM, identical code moves by 10-20 % from one run to the next. Here every library
 * runs in the same process, on the same device buffer, one cycle each in turn (the order
 * rotating every iteration), so what differs between their times is their code. Each library
 * is loaded with dlopen(RTLD_LOCAL) and has its own session; the third, optional path is a copy
 * of the second under another name (an A/A control: the same code loaded twice).
 *
 * Where a library is loaded moves its calls' times by a few per cent (the load order decides
 * its addresses, and so which cache sets and pages its code and data share). The fourth,
 * optional path, a copy of the first, balances that: loaded A, B, B', A', the two copies of
 * each library sit on average at the same place in the load order, and the last column
 * compares the two pairs.
 *
 * Usage: apiab ITERATIONS LIB_A LIB_B [LIB_B_COPY [LIB_A_COPY]]
 *   (paths to libgdrapi.so.2 files; ITERATIONS cycles per library). With APIAB_EVICT_MIB=N
 *   in the environment, N MiB are streamed through before each timed call, so that every
 *   call finds the caches cold, as it does after a slow map or unmap over real VRAM.
 * Prints, per call, each library's median and mean in ns, and the median of the per-iteration
 * ratio B/A (and B/B'; with four, (B + B')/(A + A')): above 1 means A is faster.
 *
 * With ioctlstamp.so preloaded ahead of the emulator (make bench-apiab APIAB_SPLIT=1), it also
 * splits pin, get_info and unpin, which make one driver call each, into the time before the
 * ioctl, in it and after it, and prints each library's medians: whether a difference lies in
 * the library's own code or in the driver's work.
 *
 * With APIAB_PMU=code or APIAB_PMU=data, it also counts cycles, instructions, branch misses and
 * cache and TLB misses (code: L1i and iTLB; data: L1d and dTLB; both: LLC) around each call
 * (user space, and the kernel too with APIAB_PMU_KERNEL=1; bench/upstream/pmu.h), and prints
 * each library's mean per call: where a difference in time comes from. APIAB_PMU=sw counts
 * the kernel's software events instead (task clock, page faults, context switches), which
 * machines without a PMU have. Without counters (no PMU, perf_event_paranoid) it says so and
 * exits with 2.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdrapi.h"
#include "gpu.h"
#include "evict.h"
#include "pmu.h"
#include "timing.h"

#define SIZE 65536
#define MAX_LIBS 4

enum { PIN, MAP, INFO, UNMAP, UNPIN, NCALLS };
static const char *const names[NCALLS] = {"pin", "map", "get_info", "unmap", "unpin"};

/* The entry points apiperf's cycle uses, as one library exports them. */
struct lib {
    const char *path;
    gdr_t (*open)(void);
    int (*close)(gdr_t);
    int (*pin)(gdr_t, unsigned long, size_t, uint64_t, uint32_t, gdr_mh_t *);
    int (*unpin)(gdr_t, gdr_mh_t);
    int (*map)(gdr_t, gdr_mh_t, void **, size_t);
    int (*unmap)(gdr_t, gdr_mh_t, void *, size_t);
    int (*info)(gdr_t, gdr_mh_t, gdr_info_v2_t *);
    gdr_t g;
    double *t[NCALLS];
    /* With ioctlstamp.so: for each call that makes one ioctl, ns before it, in it and after
     * it, per iteration (NULL for the other calls). */
    double *split[NCALLS][3];
    /* With APIAB_PMU: each counter's count summed over the calls both of whose reads
     * succeeded, and how many calls those were. */
    double counts[NCALLS][PMU_EVENTS];
    int counted[NCALLS];
};

/* The one-ioctl calls (split when ioctlstamp.so is preloaded), and the stamps it exports. */
static const int one_ioctl[NCALLS] = {[PIN] = 1, [INFO] = 1, [UNPIN] = 1};
static const double *stamp_enter, *stamp_exit;

static struct pmu pmu;
static int pmu_on, pmu_kernel;
static int pmu_lost; /* calls left out: the group was not on the CPU throughout */

static int load(struct lib *l, const char *path, int iters)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("apiab: %s\n", dlerror());
        return -1;
    }
    l->path = path;
#define SYM(field, name)                                                                           \
    do {                                                                                           \
        *(void **)&l->field = dlsym(h, name);                                                      \
        if (!l->field) {                                                                           \
            printf("apiab: %s has no %s\n", path, name);                                           \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)
    SYM(open, "gdr_open");
    SYM(close, "gdr_close");
    SYM(pin, "gdr_pin_buffer");
    SYM(unpin, "gdr_unpin_buffer");
    SYM(map, "gdr_map");
    SYM(unmap, "gdr_unmap");
    SYM(info, "gdr_get_info_v2");
#undef SYM
    for (int k = 0; k < NCALLS; k++) {
        if (!(l->t[k] = malloc(sizeof(double) * (size_t)iters)))
            return -1;
        for (int p = 0; p < 3; p++)
            if (stamp_enter && one_ioctl[k] && !(l->split[k][p] = malloc(sizeof(double) * (size_t)iters)))
                return -1;
    }
    l->g = l->open();
    if (!l->g) {
        printf("apiab: gdr_open of %s failed\n", path);
        return -1;
    }
    return 0;
}

/* One timed pin/map/get_info/unmap/unpin cycle of `l` on `addr`, as apiperf times it. */
static int cycle(struct lib *l, unsigned long addr, int i)
{
    gdr_mh_t mh;
    gdr_info_v2_t info;
    void *va = NULL;
    int rc = 0;
    double t0;
    uint64_t c0[PMU_EVENTS], c1[PMU_EVENTS];
#define TIMED(k, call)                                                                             \
    do {                                                                                           \
        evict();                                                                                   \
        int before = pmu_on && pmu_read(&pmu, c0) == 0;                                            \
        t0 = now_ns();                                                                             \
        rc |= (call);                                                                              \
        double t1 = now_ns();                                                                      \
        l->t[k][i] = t1 - t0;                                                                      \
        if (l->split[k][0]) {                                                                      \
            l->split[k][0][i] = *stamp_enter - t0;                                                 \
            l->split[k][1][i] = *stamp_exit - *stamp_enter;                                        \
            l->split[k][2][i] = t1 - *stamp_exit;                                                  \
        }                                                                                          \
        if (pmu_on) {                                                                              \
            if (before && pmu_read(&pmu, c1) == 0) {                                               \
                for (int e = 0; e < pmu.n; e++)                                                    \
                    l->counts[k][e] += (double)(c1[e] - c0[e]);                                    \
                l->counted[k]++;                                                                   \
            } else {                                                                               \
                pmu_lost++;                                                                        \
            }                                                                                      \
        }                                                                                          \
    } while (0)
    TIMED(PIN, l->pin(l->g, addr, SIZE, 0, 0, &mh));
    if (rc)
        return rc;
    TIMED(MAP, l->map(l->g, mh, &va, SIZE));
    TIMED(INFO, l->info(l->g, mh, &info));
    TIMED(UNMAP, l->unmap(l->g, mh, va, SIZE));
    TIMED(UNPIN, l->unpin(l->g, mh));
#undef TIMED
    return rc;
}

/* The median over iterations of (b + b2)'s time / (a + a2)'s time for call k; with a2 = a and
 * b2 = b, of b's time / a's time (doubling is exact). */
static double ratio_median(const struct lib *a, const struct lib *a2, const struct lib *b,
                           const struct lib *b2, int k, int iters, double *tmp)
{
    for (int i = 0; i < iters; i++)
        tmp[i] = (b->t[k][i] + b2->t[k][i]) / (a->t[k][i] + a2->t[k][i]);
    return median(tmp, (size_t)iters);
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 3 + MAX_LIBS - 1) {
        printf("usage: apiab ITERATIONS LIB_A LIB_B [LIB_B_COPY [LIB_A_COPY]]\n");
        return 2;
    }
    int iters = atoi(argv[1]);
    int nlibs = argc - 2;
    if (iters < 1) {
        printf("apiab: ITERATIONS must be at least 1\n");
        return 2;
    }
    const char *mib = getenv("APIAB_EVICT_MIB");
    if (evict_init(mib && *mib ? strtoul(mib, NULL, 0) : 0))
        return 2;
    const char *set = getenv("APIAB_PMU");
    if (set && *set) {
        const char *k = getenv("APIAB_PMU_KERNEL");
        pmu_kernel = k && strcmp(k, "1") == 0;
        int e = pmu_open(&pmu, set, pmu_kernel);
        if (e) {
            printf("apiab: no PMU counters for APIAB_PMU=%s: %s\n", set, strerror(e));
            return 2;
        }
        pmu_on = 1;
    }
    stamp_enter = dlsym(RTLD_DEFAULT, "ioctlstamp_enter");
    stamp_exit = dlsym(RTLD_DEFAULT, "ioctlstamp_exit");
    if (!stamp_exit)
        stamp_enter = NULL;
    gpu_init();
    CUdeviceptr raw = gpu_alloc(SIZE);
    unsigned long addr = gpu_aligned(raw);
    struct lib libs[MAX_LIBS];
    memset(libs, 0, sizeof libs);
    for (int j = 0; j < nlibs; j++)
        if (load(&libs[j], argv[2 + j], iters))
            return 2;
    for (int i = 0; i < iters; i++) {
        for (int s = 0; s < nlibs; s++) {
            struct lib *l = &libs[(i + s) % nlibs];
            if (cycle(l, addr, i)) {
                printf("apiab: a call of %s failed in iteration %d\n", l->path, i);
                return 1;
            }
        }
    }
    double *tmp = malloc(sizeof(double) * (size_t)iters);
    if (!tmp)
        return 2;
    printf("apiab: %d interleaved cycles per library, %d bytes, %zu MiB evicted before each "
           "call; A %s, B %s%s%s%s%s\n",
           iters, SIZE, evict_words * sizeof(uint64_t) >> 20, argv[2], argv[3],
           nlibs > 2 ? ", B' " : "", nlibs > 2 ? argv[4] : "", nlibs > 3 ? ", A' " : "",
           nlibs > 3 ? argv[5] : "");
    printf("%-9s %10s %10s %10s %10s %9s%s%s\n", "call", "A median", "B median", "A mean",
           "B mean", "B/A", nlibs > 2 ? "      B/B'" : "", nlibs > 3 ? "  BB'/AA'" : "");
    for (int k = 0; k < NCALLS; k++) {
        double ba = ratio_median(&libs[0], &libs[0], &libs[1], &libs[1], k, iters, tmp);
        double bb = nlibs > 2 ? ratio_median(&libs[2], &libs[2], &libs[1], &libs[1], k, iters, tmp) : 0;
        /* Before the medians below, which sort the arrays they are given. */
        double pooled =
            nlibs > 3 ? ratio_median(&libs[0], &libs[3], &libs[1], &libs[2], k, iters, tmp) : 0;
        double mean[2] = {0, 0};
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < iters; i++)
                mean[j] += libs[j].t[k][i] / iters;
        double ma = median(libs[0].t[k], (size_t)iters);
        double mb = median(libs[1].t[k], (size_t)iters);
        printf("%-9s %10.0f %10.0f %10.0f %10.0f %9.3f", names[k], ma, mb, mean[0], mean[1], ba);
        if (nlibs > 2)
            printf(" %9.3f", bb);
        if (nlibs > 3)
            printf(" %9.3f", pooled);
        printf("\n");
    }
    if (stamp_enter) {
        printf("split: ns before the ioctl, in it and after it (medians)\n");
        printf("%-9s %-3s %10s %10s %10s\n", "call", "lib", "before", "ioctl", "after");
        for (int k = 0; k < NCALLS; k++)
            for (int j = 0; one_ioctl[k] && j < nlibs; j++) {
                printf("%-9s %-3s", names[k], (const char *[]){"A", "B", "B'", "A'"}[j]);
                for (int p = 0; p < 3; p++)
                    printf(" %10.0f", median(libs[j].split[k][p], (size_t)iters));
                printf("\n");
            }
    }
    if (pmu_on) {
        printf("pmu: %s counters, %s, mean per call%s\n", set,
               pmu_kernel ? "user space and kernel" : "user space",
               pmu_lost ? " (some calls left out: the group was not on the CPU throughout)" : "");
        printf("%-9s %-12s %10s %10s%s%s\n", "call", "counter", "A", "B", nlibs > 2 ? "         B'" : "",
               nlibs > 3 ? "         A'" : "");
        for (int k2 = 0; k2 < NCALLS; k2++)
            for (int e = 0; e < pmu.n; e++) {
                printf("%-9s %-12s", names[k2], pmu.names[e]);
                for (int j = 0; j < nlibs; j++)
                    printf(" %10.1f", libs[j].counted[k2]
                                          ? libs[j].counts[k2][e] / libs[j].counted[k2]
                                          : 0.0);
                printf("\n");
            }
        if (pmu_lost)
            printf("pmu: %d calls left out\n", pmu_lost);
    }
    for (int j = 0; j < nlibs; j++)
        libs[j].close(libs[j].g);
    cuMemFree(raw);
    return 0;
}
