/*
 * copyab.c - small copies (1 B to 4 KiB, copylat's sizes) through two or three libgdrapi.so.2
 * builds in one process, on one device buffer, interleaved batch by batch.
 *
 * gdrcopy_copylat in separate processes, as compare.py runs it, sees the machine change
 * between runs (which CPU, which BAR offsets, what else runs): for writes of a few bytes,
 * where a call costs about 150 ns over real VRAM, identical code moves by more than the 5-10 ns
 * a library could lose. Here every library pins and maps the same 64 KiB of device memory in
 * its own session, and for each size one batch of copies of each library runs in turn (the
 * order rotating every round), so what differs between their times is their code. Each library
 * is loaded with dlopen(RTLD_LOCAL); the third, optional path is a copy of the second under
 * another name (the A/A control: the same code loaded twice).
 *
 * The floor (x86-64) is the same copy made by straight code in this program, without a library
 * call: 16-byte MOVNTDQ stores or MOVNTDQA loads (one naturally aligned scalar access below 16
 * bytes; the device pointer is page-aligned and every size a power of two), then SFENCE, which
 * both libraries also end a copy with. It runs as one more participant in the rotation; what a
 * library costs above it is its own code and its choice of instructions.
 *
 * Usage: copyab ROUNDS LIB_A LIB_B [LIB_B_COPY]
 *   ROUNDS batches per library, size and direction; a write batch is COPYAB_WRITES calls
 *   (default 100), a read batch COPYAB_READS (default 10); COPYAB_FLOOR=0 leaves the floor
 *   out (the rotation of the runs before it had).
 * Prints, per direction and size, each library's median time per call in ns and the median of
 * the per-round ratio B/A (and B/B'): above 1 means A is faster; with the floor, its median
 * time and the median per-round ratios A/floor and B/floor (1.0: at the floor). Then, per
 * direction, how many sizes have B/A below 1.0, and as many for the control B/B'.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gdrapi.h"
#include "gpu.h"
#include "timing.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define HAVE_FLOOR 1
#else
#define HAVE_FLOOR 0
#endif

#define SIZE 65536
#define MAX_LIBS 3
#define NSIZES 13 /* 1 B to 4 KiB, the powers of two */

enum { WRITE, READ, NDIRS };
static const char *const dir_names[NDIRS] = {"gdr_copy_to_mapping", "gdr_copy_from_mapping"};

/* One library: the entry points the copies use, its session, pin and mapping, its times. */
struct lib {
    const char *path;
    int (*close)(gdr_t);
    int (*unpin)(gdr_t, gdr_mh_t);
    int (*unmap)(gdr_t, gdr_mh_t, void *, size_t);
    int (*to)(gdr_mh_t, void *, const void *, size_t);
    int (*from)(gdr_mh_t, void *, const void *, size_t);
    gdr_t g;
    gdr_mh_t mh;
    void *map;
    char *dev; /* the pinned address's byte in the mapping */
    double *t[NDIRS][NSIZES];
};

static int load(struct lib *l, const char *path, unsigned long addr, int rounds)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("copyab: %s\n", dlerror());
        return -1;
    }
    gdr_t (*open_)(void);
    int (*pin)(gdr_t, unsigned long, size_t, uint64_t, uint32_t, gdr_mh_t *);
    int (*map)(gdr_t, gdr_mh_t, void **, size_t);
    int (*info)(gdr_t, gdr_mh_t, gdr_info_t *);
    l->path = path;
#define SYM(var, name)                                                                             \
    do {                                                                                           \
        *(void **)&(var) = dlsym(h, name);                                                         \
        if (!(var)) {                                                                              \
            printf("copyab: %s has no %s\n", path, name);                                          \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)
    SYM(open_, "gdr_open");
    SYM(pin, "gdr_pin_buffer");
    SYM(map, "gdr_map");
    SYM(info, "gdr_get_info");
    SYM(l->close, "gdr_close");
    SYM(l->unpin, "gdr_unpin_buffer");
    SYM(l->unmap, "gdr_unmap");
    SYM(l->to, "gdr_copy_to_mapping");
    SYM(l->from, "gdr_copy_from_mapping");
#undef SYM
    for (int d = 0; d < NDIRS; d++)
        for (int s = 0; s < NSIZES; s++)
            if (!(l->t[d][s] = malloc(sizeof(double) * (size_t)rounds)))
                return -1;
    gdr_info_t in;
    if (!(l->g = open_()) || pin(l->g, addr, SIZE, 0, 0, &l->mh) || map(l->g, l->mh, &l->map, SIZE)
        || info(l->g, l->mh, &in)) {
        printf("copyab: gdr_open, pin, map or get_info of %s failed\n", path);
        return -1;
    }
    l->dev = (char *)l->map + (addr - in.va);
    return 0;
}

/* One timed batch of n copies of `size` bytes in direction d; the time per call in ns. */
static double batch(const struct lib *l, int d, char *host, size_t size, int n)
{
    double t0 = now_ns();
    if (d == WRITE)
        for (int k = 0; k < n; k++)
            l->to(l->mh, l->dev, host, size);
    else
        for (int k = 0; k < n; k++)
            l->from(l->mh, host, l->dev, size);
    return (now_ns() - t0) / n;
}

#if HAVE_FLOOR
/* One naturally aligned access of n (1, 2, 4 or 8) bytes in direction d. */
static void floor_scalar(int d, char *dev, char *host, size_t n)
{
#define ACCESS(type)                                                                               \
    do {                                                                                           \
        if (d == WRITE)                                                                            \
            *(volatile type *)dev = *(const type *)host;                                           \
        else                                                                                       \
            *(type *)host = *(volatile const type *)dev;                                           \
    } while (0)
    switch (n) {
    case 1: ACCESS(uint8_t); break;
    case 2: ACCESS(uint16_t); break;
    case 4: ACCESS(uint32_t); break;
    default: ACCESS(uint64_t); break;
    }
#undef ACCESS
}

/* One timed batch of n floor copies (see the header); the time per call in ns. */
__attribute__((target("sse4.1"))) static double floor_batch(int d, char *dev, char *host,
                                                             size_t size, int n)
{
    double t0 = now_ns();
    for (int k = 0; k < n; k++) {
        if (size < 16)
            floor_scalar(d, dev, host, size);
        else if (d == WRITE)
            for (size_t i = 0; i < size; i += 16)
                _mm_stream_si128((__m128i *)(dev + i), _mm_load_si128((const __m128i *)(host + i)));
        else
            for (size_t i = 0; i < size; i += 16)
                _mm_store_si128((__m128i *)(host + i), _mm_stream_load_si128((__m128i *)(dev + i)));
        _mm_sfence();
    }
    return (now_ns() - t0) / n;
}
#endif

/* The median over rounds of b's time / a's time. */
static double ratio_median(double *a, double *b, int rounds, double *tmp)
{
    for (int i = 0; i < rounds; i++)
        tmp[i] = b[i] / a[i];
    return median(tmp, (size_t)rounds);
}

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 3 + MAX_LIBS - 1) {
        printf("usage: copyab ROUNDS LIB_A LIB_B [LIB_B_COPY]\n");
        return 2;
    }
    int rounds = atoi(argv[1]);
    int nlibs = argc - 2;
    int per_batch[NDIRS] = {env_int("COPYAB_WRITES", 100), env_int("COPYAB_READS", 10)};
    if (rounds < 1 || per_batch[WRITE] < 1 || per_batch[READ] < 1) {
        printf("copyab: ROUNDS, COPYAB_WRITES and COPYAB_READS must be at least 1\n");
        return 2;
    }
    gpu_init();
    CUdeviceptr raw = gpu_alloc(SIZE);
    unsigned long addr = gpu_aligned(raw);
    char *host = aligned_alloc(64, 4096);
    if (!host)
        return 2;
    memset(host, 0xa5, 4096);
    struct lib libs[MAX_LIBS];
    memset(libs, 0, sizeof libs);
    for (int j = 0; j < nlibs; j++)
        if (load(&libs[j], argv[2 + j], addr, rounds))
            return 2;
    /* The floor takes the slot after the libraries in the rotation, on A's mapping. */
    int with_floor = HAVE_FLOOR && env_int("COPYAB_FLOOR", 1) != 0;
    double *floor_t[NDIRS][NSIZES];
    for (int d = 0; d < NDIRS; d++)
        for (int s = 0; s < NSIZES; s++)
            if (!(floor_t[d][s] = malloc(sizeof(double) * (size_t)rounds)))
                return 2;
    int slots = nlibs + with_floor;
    /* One unmeasured round first: lazy binding, the copy kernels' selection, the TLB. */
    for (int i = -1; i < rounds; i++)
        for (int d = 0; d < NDIRS; d++)
            for (int s = 0; s < NSIZES; s++)
                for (int k = 0; k < slots; k++) {
                    int j = (i + 1 + k + s) % slots;
                    double t;
                    if (j == nlibs) {
#if HAVE_FLOOR
                        t = floor_batch(d, libs[0].dev, host, (size_t)1 << s, per_batch[d]);
#else
                        t = 0;
#endif
                        if (i >= 0)
                            floor_t[d][s][i] = t;
                        continue;
                    }
                    t = batch(&libs[j], d, host, (size_t)1 << s, per_batch[d]);
                    if (i >= 0)
                        libs[j].t[d][s][i] = t;
                }
    double *tmp = malloc(sizeof(double) * (size_t)rounds);
    if (!tmp)
        return 2;
    printf("copyab: %d interleaved rounds per library and size, %d writes or %d reads per batch; "
           "A %s, B %s%s%s\n",
           rounds, per_batch[WRITE], per_batch[READ], argv[2], argv[3], nlibs > 2 ? ", B' " : "",
           nlibs > 2 ? argv[4] : "");
    int below[NDIRS][2] = {{0, 0}, {0, 0}};
    for (int d = 0; d < NDIRS; d++) {
        printf("%s\n%-6s %10s %10s %9s%s%s\n", dir_names[d], "size", "A ns", "B ns", "B/A",
               nlibs > 2 ? "      B/B'" : "", with_floor ? "   floor ns   A/floor   B/floor" : "");
        for (int s = 0; s < NSIZES; s++) {
            /* The per-round ratios first: median() sorts the times it is given. */
            double ba = ratio_median(libs[0].t[d][s], libs[1].t[d][s], rounds, tmp);
            double bb = nlibs > 2 ? ratio_median(libs[2].t[d][s], libs[1].t[d][s], rounds, tmp) : 1;
            double af = with_floor ? ratio_median(floor_t[d][s], libs[0].t[d][s], rounds, tmp) : 0;
            double bf = with_floor ? ratio_median(floor_t[d][s], libs[1].t[d][s], rounds, tmp) : 0;
            double ma = median(libs[0].t[d][s], (size_t)rounds);
            double mb = median(libs[1].t[d][s], (size_t)rounds);
            below[d][0] += ba < 1.0;
            below[d][1] += bb < 1.0;
            printf("%-6d %10.1f %10.1f %9.3f", 1 << s, ma, mb, ba);
            if (nlibs > 2)
                printf(" %9.3f", bb);
            if (with_floor)
                printf(" %10.1f %9.3f %9.3f", median(floor_t[d][s], (size_t)rounds), af, bf);
            printf("\n");
        }
    }
    for (int d = 0; d < NDIRS; d++) {
        printf("direction: %s: %d of %d sizes with B/A below 1.0", dir_names[d], below[d][0], NSIZES);
        if (nlibs > 2)
            printf(" (control B/B': %d of %d)", below[d][1], NSIZES);
        printf("\n");
    }
    for (int j = 0; j < nlibs; j++) {
        libs[j].unmap(libs[j].g, libs[j].mh, libs[j].map, SIZE);
        libs[j].unpin(libs[j].g, libs[j].mh);
        libs[j].close(libs[j].g);
    }
    gpu_free(raw);
    return 0;
}
