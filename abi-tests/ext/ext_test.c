/*
 * ext_test - gdrapi_ext.h (libgdrapi_ext.so.0) through its C API, on the emulator (every
 * backend: run.sh sets the situation) or a real GPU.
 *
 * One scenario per run (argv[1]), with the backend the allocator must get (argv[2]: gdrdrv,
 * dmabuf, vulkan) and, for api, argv[3] "cumemalloc" for GDRX_OPEN_CUMEMALLOC:
 *   api       open and info; argument errors; 1000 8-byte flags from one pin, written by the
 *             CPU (copies and plain stores plus a store fence) and read by the GPU
 *             (cuMemcpyDtoH), written by the GPU (cuMemcpyHtoD, cuMemsetD32) and read by the
 *             CPU (copies and plain loads); every alignment; sizes at line edges; a large
 *             allocation with its own pin; lookups by device and CPU address; stale, forged,
 *             double-freed and foreign gdrx_mem_t values; a chunk released when it empties;
 *             close with live allocations; the caller's CUDA context left current; nothing
 *             left behind (the emulator's counters)
 *   threads   8 threads allocate, copy, check and free on one allocator while others open and
 *             close allocators of their own; racing frees of one allocation have one winner
 *   fork      a child gets EACCES from every allocator call and EINVAL from copies, the parent
 *             goes on unharmed
 *   refused   gdrx_open fails with ENODEV (run.sh checks the log line that says what to do)
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ext.h"
#include "gpu.h"

#define FLAGS 1000

static int want_backend = -1;

static CUcontext current_context(void)
{
    CUcontext c = NULL;
    cuCtxGetCurrent(&c);
    return c;
}

static int backend_code(const char *name)
{
    if (strcmp(name, "gdrdrv") == 0)
        return GDRX_BACKEND_GDRDRV;
    if (strcmp(name, "dmabuf") == 0)
        return GDRX_BACKEND_DMABUF;
    if (strcmp(name, "vulkan") == 0)
        return GDRX_BACKEND_VULKAN;
    return -1;
}

static gdrx_info_t info_of(gdrx_t x)
{
    gdrx_info_t i;
    memset(&i, 0xff, sizeof(i));
    CHECK_EQ(gdrx_info(x, &i), 0);
    return i;
}

/* The CPU writes every flag (odd ones with gdrx_copy_to, even ones with a plain store and one
 * fence after all of them), then the GPU reads each. */
static void cpu_writes_gpu_reads(gdrx_mem_t *flags, int n, unsigned round)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        uint64_t v = pattern(i, round);
        if (i & 1)
            CHECK_EQ(gdrx_copy_to(&flags[i], 0, &v, sizeof(v)), 0);
        else
            *(volatile uint64_t *)flags[i].cpu_ptr = v;
    }
    store_fence();
    for (int i = 0; i < n; i++)
        if (gpu_read64(flags[i].dev_ptr) != pattern(i, round))
            bad++;
    CHECK_EQ(bad, 0);
}

/* The GPU writes every flag (cuMemcpyHtoD, or cuMemsetD32 for each half), then the CPU reads
 * each (gdrx_copy_from, or a plain load). */
static void gpu_writes_cpu_reads(gdrx_mem_t *flags, int n, unsigned round)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        uint64_t v = pattern(i, round);
        if (i % 3 == 0) {
            CHECK_EQ(cuMemsetD32((CUdeviceptr)flags[i].dev_ptr, (unsigned)v, 1), CUDA_SUCCESS);
            CHECK_EQ(cuMemsetD32((CUdeviceptr)flags[i].dev_ptr + 4, (unsigned)(v >> 32), 1),
                     CUDA_SUCCESS);
        } else {
            CHECK_EQ(cuMemcpyHtoD((CUdeviceptr)flags[i].dev_ptr, &v, sizeof(v)), CUDA_SUCCESS);
        }
    }
    CHECK_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    for (int i = 0; i < n; i++) {
        uint64_t v = 0;
        if (i & 1) {
            CHECK_EQ(gdrx_copy_from(&flags[i], 0, &v, sizeof(v)), 0);
        } else {
            v = *(volatile uint64_t *)flags[i].cpu_ptr;
            load_fence();
        }
        if (v != pattern(i, round))
            bad++;
    }
    CHECK_EQ(bad, 0);
}

static void flags_from_one_pin(gdrx_t x)
{
    static gdrx_mem_t f[FLAGS];
    int misaligned = 0, overlap = 0;
    for (int i = 0; i < FLAGS; i++) {
        CHECK_EQ(gdrx_alloc(x, 8, 0, &f[i]), 0);
        misaligned += f[i].dev_ptr % GDRX_MIN_ALIGNMENT != 0 ||
                      (uintptr_t)f[i].cpu_ptr % GDRX_MIN_ALIGNMENT != 0 || f[i].size != 8 ||
                      f[i].handle == 0;
        if (i > 0) {
            /* Each takes whole lines of the same chunk: a fixed CPU-device distance. */
            overlap += (long long)(f[i].dev_ptr - f[0].dev_ptr) !=
                       (long long)((uintptr_t)f[i].cpu_ptr - (uintptr_t)f[0].cpu_ptr);
            overlap += f[i].dev_ptr / 64 == f[i - 1].dev_ptr / 64;
        }
    }
    CHECK_EQ(misaligned, 0);
    CHECK_EQ(overlap, 0);
    gdrx_info_t in = info_of(x);
    CHECK_EQ(in.pins, 1);
    CHECK_EQ(in.allocations, FLAGS);
    CHECK_EQ(in.bytes_in_use, FLAGS * 64);
    CHECK_EQ(in.bytes_pinned, in.chunk_size);
    CHECK(in.mapping_type == 1 || in.mapping_type == 2);
    for (unsigned round = 1; round <= 3; round++) {
        cpu_writes_gpu_reads(f, FLAGS, round);
        gpu_writes_cpu_reads(f, FLAGS, round + 10);
    }
    /* Lookups: the device and the CPU address of a byte inside, and the padding after it. */
    gdrx_mem_t m;
    size_t off = 99;
    CHECK_EQ(gdrx_lookup(x, f[7].dev_ptr + 5, &m, &off), 0);
    CHECK(memcmp(&m, &f[7], sizeof(m)) == 0);
    CHECK_EQ(off, 5);
    CHECK_EQ(gdrx_lookup(x, (uintptr_t)f[7].cpu_ptr + 7, &m, NULL), 0);
    CHECK_EQ(m.handle, f[7].handle);
    CHECK_EQ(gdrx_lookup(x, f[7].dev_ptr + 8, &m, &off), ENOENT);
    CHECK_EQ(gdrx_lookup(x, 0x10, &m, &off), ENOENT);
    CHECK_EQ(gdrx_lookup(x, f[0].dev_ptr, NULL, &off), EINVAL);
    /* Free all but one: the chunk stays; then the last: it goes. */
    for (int i = 1; i < FLAGS; i++)
        CHECK_EQ(gdrx_free(x, &f[i]), 0);
    in = info_of(x);
    CHECK_EQ(in.pins, 1);
    CHECK_EQ(in.allocations, 1);
    CHECK_EQ(gdrx_free(x, &f[0]), 0);
    in = info_of(x);
    CHECK_EQ(in.pins, 0);
    CHECK_EQ(in.bytes_pinned, 0);
    CHECK_EQ(gdrx_lookup(x, f[7].dev_ptr, &m, &off), ENOENT);
}

static void alignments_and_sizes(gdrx_t x)
{
    gdrx_mem_t m[32];
    int n = 0;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t a = 1; a <= GDRX_MAX_ALIGNMENT; a <<= 1) {
        CHECK_EQ(gdrx_alloc(x, 100, a, &m[n]), 0);
        size_t want = a < GDRX_MIN_ALIGNMENT ? GDRX_MIN_ALIGNMENT : a;
        CHECK_EQ(m[n].dev_ptr % want, 0);
        CHECK_EQ((uintptr_t)m[n].cpu_ptr % (want < page ? want : page), 0);
        n++;
    }
    /* Sizes around a line: copies reach the last byte and not one more. */
    static const size_t sizes[] = {1, 63, 64, 65, 4095, 4097};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t s = sizes[k];
        gdrx_mem_t *p = &m[n++];
        unsigned char b = (unsigned char)(0xa0 + k), r = 0;
        CHECK_EQ(gdrx_alloc(x, s, 0, p), 0);
        CHECK_EQ(p->size, s);
        CHECK_EQ(gdrx_copy_to(p, s - 1, &b, 1), 0);
        CHECK_EQ(gdrx_copy_from(p, s - 1, &r, 1), 0);
        CHECK_EQ(r, b);
        CHECK_EQ(gdrx_copy_to(p, s, &b, 1), EINVAL);
        CHECK_EQ(gdrx_copy_from(p, s - 1, &r, 2), EINVAL);
        CHECK_EQ(gdrx_copy_to(p, s, &b, 0), 0);
        CHECK_EQ(gdrx_copy_to(p, (size_t)-1, &b, 2), EINVAL);
        CHECK_EQ(gdrx_copy_to(p, 0, NULL, 1), EINVAL);
        CHECK_EQ(gdrx_copy_from(p, 0, NULL, 1), EINVAL);
        uint8_t g = 0;
        CHECK_EQ(cuMemcpyDtoH(&g, (CUdeviceptr)p->dev_ptr + s - 1, 1), CUDA_SUCCESS);
        CHECK_EQ(g, b);
    }
    for (int i = 0; i < n; i++)
        CHECK_EQ(gdrx_free(x, &m[i]), 0);
    CHECK_EQ(info_of(x).pins, 0);
}

static void large_allocation(gdrx_t x)
{
    gdrx_mem_t small, big;
    gdrx_info_t in = info_of(x);
    size_t size = in.small_max + 1;
    CHECK_EQ(gdrx_alloc(x, 8, 0, &small), 0);
    CHECK_EQ(gdrx_alloc(x, size, 4096, &big), 0);
    CHECK_EQ(big.dev_ptr % (64 * KIB), 0);
    in = info_of(x);
    CHECK_EQ(in.pins, 2);
    CHECK(in.bytes_pinned >= in.chunk_size + size);
    /* A pattern over the whole allocation, both ways. */
    size_t n = size / 8;
    uint64_t *buf = malloc(n * 8), *back = malloc(n * 8);
    REQUIRE_V(buf && back);
    for (size_t i = 0; i < n; i++)
        buf[i] = pattern((unsigned)i, 77);
    CHECK_EQ(gdrx_copy_to(&big, 0, buf, n * 8), 0);
    memset(back, 0, n * 8);
    CHECK_EQ(cuMemcpyDtoH(back, (CUdeviceptr)big.dev_ptr, n * 8), CUDA_SUCCESS);
    CHECK(memcmp(buf, back, n * 8) == 0);
    for (size_t i = 0; i < n; i++)
        buf[i] = ~buf[i];
    CHECK_EQ(cuMemcpyHtoD((CUdeviceptr)big.dev_ptr, buf, n * 8), CUDA_SUCCESS);
    /* From pageable memory the copy may still be on its way when cuMemcpyHtoD returns. */
    CHECK_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    memset(back, 0, n * 8);
    CHECK_EQ(gdrx_copy_from(&big, 0, back, n * 8), 0);
    CHECK(memcmp(buf, back, n * 8) == 0);
    CHECK_EQ(gdrx_copy_to(&big, size - 1, buf, 1), 0);
    CHECK_EQ(gdrx_copy_to(&big, size, buf, 1), EINVAL);
    free(buf);
    free(back);
    CHECK_EQ(gdrx_free(x, &big), 0);
    CHECK_EQ(info_of(x).pins, 1);
    CHECK_EQ(gdrx_free(x, &small), 0);
    CHECK_EQ(info_of(x).pins, 0);
}

static void bad_values(gdrx_t x)
{
    gdrx_mem_t m, other, forged;
    uint64_t v = 1;
    gdrx_t y;
    CHECK_EQ(gdrx_alloc(x, 0, 0, &m), EINVAL);
    CHECK_EQ(gdrx_alloc(x, 8, 3, &m), EINVAL);
    CHECK_EQ(gdrx_alloc(x, 8, 2 * GDRX_MAX_ALIGNMENT, &m), EINVAL);
    CHECK_EQ(gdrx_alloc(x, 8, 0, NULL), EINVAL);
    CHECK_EQ(gdrx_alloc(NULL, 8, 0, &m), EINVAL);
    CHECK_EQ(gdrx_alloc((gdrx_t)((uintptr_t)x + 1), 8, 0, &m), EINVAL);
    CHECK_EQ(gdrx_alloc((gdrx_t)(uintptr_t)0xdeadbeef, 8, 0, &m), EINVAL);
    CHECK_EQ(gdrx_alloc(x, (size_t)-1, 0, &m), ENOMEM);
    CHECK_EQ(gdrx_info(x, NULL), EINVAL);
    CHECK_EQ(gdrx_info(NULL, &(gdrx_info_t){0}), EINVAL);
    CHECK_EQ(gdrx_free(x, NULL), EINVAL);
    CHECK_EQ(gdrx_copy_to(NULL, 0, &v, 8), EINVAL);
    CHECK_EQ(gdrx_copy_from(NULL, 0, &v, 8), EINVAL);
    CHECK_EQ(gdrx_open(NULL, 0, 0), EINVAL);
    CHECK_EQ(gdrx_open(&y, 0, 0x80), EINVAL);
    CHECK_EQ(gdrx_open(&y, -1, 0), EINVAL);
    CHECK_EQ(gdrx_open(&y, 4096, 0), ENODEV);

    REQUIRE_V(gdrx_alloc(x, 8, 0, &m) == 0);
    /* A forged copy: the handle of a live allocation with other fields. */
    forged = m;
    forged.size = 4096;
    CHECK_EQ(gdrx_copy_to(&forged, 1000, &v, 8), EINVAL);
    CHECK_EQ(gdrx_free(x, &forged), EINVAL);
    forged = m;
    forged.handle ^= 1ULL << 32;
    CHECK_EQ(gdrx_copy_from(&forged, 0, &v, 8), EINVAL);
    CHECK_EQ(gdrx_free(x, &forged), EINVAL);
    forged.handle = 0;
    CHECK_EQ(gdrx_free(x, &forged), EINVAL);
    /* Another allocator's allocation: copies work, its free through this one does not. */
    REQUIRE_V(gdrx_open(&y, 0, 0) == 0);
    REQUIRE_V(gdrx_alloc(y, 8, 0, &other) == 0);
    CHECK_EQ(gdrx_copy_to(&other, 0, &v, 8), 0);
    CHECK_EQ(gdrx_free(x, &other), EINVAL);
    CHECK_EQ(gdrx_free(y, &m), EINVAL);
    CHECK_EQ(gdrx_free(y, &other), 0);
    CHECK_EQ(gdrx_close(y), 0);
    CHECK_EQ(gdrx_close(y), EINVAL);
    CHECK_EQ(gdrx_alloc(y, 8, 0, &other), EINVAL);
    /* Still live after every refusal above. */
    CHECK_EQ(gdrx_copy_to(&m, 0, &v, 8), 0);
    CHECK_EQ(gdrx_free(x, &m), 0);
    /* Stale: a double free, copies through a freed allocation. */
    CHECK_EQ(gdrx_free(x, &m), EINVAL);
    CHECK_EQ(gdrx_copy_to(&m, 0, &v, 8), EINVAL);
    CHECK_EQ(gdrx_copy_from(&m, 0, &v, 8), EINVAL);
    CHECK_EQ(gdrx_lookup(x, m.dev_ptr, &forged, NULL), ENOENT);
    CHECK_EQ(info_of(x).pins, 0);
}

static int api(int argc, char **argv)
{
    int cumemalloc = argc > 3 && strcmp(argv[3], "cumemalloc") == 0;
    unsigned flags = cumemalloc ? GDRX_OPEN_CUMEMALLOC : GDRX_OPEN_DEFAULT;
    struct left before = counted();
    CUcontext mine = current_context();
    int major = -1, minor = -1;
    gdrx_runtime_get_version(&major, &minor);
    CHECK_EQ(major, GDRX_API_MAJOR_VERSION);
    CHECK_EQ(minor, GDRX_API_MINOR_VERSION);

    gdrx_t x = NULL;
    int rc = gdrx_open(&x, 0, flags);
    if (cumemalloc && want_backend == GDRX_BACKEND_VULKAN) {
        CHECK_EQ(rc, ENOTSUP);
        CHECK(x == NULL);
        CHECK(nothing_left("refused open", before, counted()));
        return check_done("ext api (vulkan, GDRX_OPEN_CUMEMALLOC refused)");
    }
    REQUIRE(rc == 0 && x != NULL);
    CHECK(current_context() == mine);
    gdrx_info_t in = info_of(x);
    CHECK_EQ(in.device, 0);
    CHECK_EQ(in.backend, want_backend);
    CHECK_EQ(in.memory, cumemalloc ? GDRX_MEMORY_CUMEMALLOC : GDRX_MEMORY_CUMEMCREATE);
    CHECK_EQ(in.mapping_type, 0);
    CHECK(in.chunk_size >= 2 * MIB && in.chunk_size % (64 * KIB) == 0);
    CHECK_EQ(in.small_max, in.chunk_size / 4);
    CHECK_EQ(in.allocations, 0);
    CHECK_EQ(in.pins, 0);
    CHECK(in.reserved[0] == 0 && in.reserved[3] == 0);

    /* A caller with no current context keeps none. */
    gdrx_mem_t t;
    CHECK_EQ(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    CHECK_EQ(gdrx_alloc(x, 8, 0, &t), 0);
    CHECK(current_context() == NULL);
    CHECK_EQ(gdrx_free(x, &t), 0);
    CHECK(current_context() == NULL);
    CHECK_EQ(cuCtxSetCurrent(mine), CUDA_SUCCESS);

    flags_from_one_pin(x);
    alignments_and_sizes(x);
    large_allocation(x);
    bad_values(x);
    CHECK(current_context() == mine);

    /* Close with live allocations: everything goes, and every handle with it. */
    gdrx_mem_t live[3];
    for (int i = 0; i < 3; i++)
        CHECK_EQ(gdrx_alloc(x, i == 2 ? 4 * MIB : 16, 0, &live[i]), 0);
    CHECK_EQ(info_of(x).pins, 2);
    CHECK_EQ(gdrx_close(x), 0);
    CHECK(current_context() == mine);
    uint64_t v = 0;
    CHECK_EQ(gdrx_copy_to(&live[0], 0, &v, 8), EINVAL);
    CHECK_EQ(gdrx_free(x, &live[1]), EINVAL);
    CHECK_EQ(gdrx_close(x), EINVAL);
    CHECK_EQ(gdrx_info(x, &in), EINVAL);
    CHECK(nothing_left("after gdrx_close", before, counted()));
    char name[64];
    snprintf(name, sizeof(name), "ext api (%s%s)", argv[2], cumemalloc ? ", cuMemAlloc" : "");
    return check_done(name);
}

/* ---- threads ---- */

#define THREADS 8
#define ROUNDS 150

static gdrx_t shared_x;
static gdrx_mem_t shared_mem;
static int thread_errors[THREADS];

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg, errors = 0;
    unsigned seed = (unsigned)t * 7919u + 1;
    unsigned char buf[8192], back[8192];
    for (int r = 0; r < ROUNDS; r++) {
        size_t size = 8 + rand_r(&seed) % 4096;
        if (r % 50 == 49)
            size = 600 * KIB; /* a large one now and then: its own pin */
        size_t align = (size_t)64 << (rand_r(&seed) % 6);
        gdrx_mem_t m;
        if (gdrx_alloc(shared_x, size, align, &m) != 0) {
            errors++;
            continue;
        }
        errors += m.dev_ptr % align != 0;
        size_t n = size < sizeof(buf) ? size : sizeof(buf);
        for (size_t i = 0; i < n; i++)
            buf[i] = (unsigned char)(i * 31 + t + r);
        errors += gdrx_copy_to(&m, size - n, buf, n) != 0;
        memset(back, 0, n);
        errors += gdrx_copy_from(&m, size - n, back, n) != 0;
        errors += memcmp(buf, back, n) != 0;
        /* A line of its own in the shared allocation. */
        uint64_t v = pattern((unsigned)t, (unsigned)r);
        errors += gdrx_copy_to(&shared_mem, (size_t)t * 64, &v, 8) != 0;
        errors += gdrx_free(shared_x, &m) != 0;
        errors += gdrx_free(shared_x, &m) != EINVAL;
    }
    thread_errors[t] = errors;
    return NULL;
}

/* Others open and close allocators of their own meanwhile. */
static void *opener(void *arg)
{
    (void)arg;
    for (int r = 0; r < 20; r++) {
        gdrx_t y;
        gdrx_mem_t m;
        if (gdrx_open(&y, 0, 0) != 0)
            return (void *)1;
        if (gdrx_alloc(y, 8, 0, &m) != 0 || gdrx_close(y) != 0)
            return (void *)1;
    }
    return NULL;
}

static gdrx_mem_t race_mem;
static int race_wins;
static pthread_barrier_t race_start;

static void *racer(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&race_start);
    if (gdrx_free(shared_x, &race_mem) == 0)
        __sync_fetch_and_add(&race_wins, 1);
    return NULL;
}

static int threads(void)
{
    struct left before = counted();
    pthread_t th[THREADS], op[2];
    REQUIRE(gdrx_open(&shared_x, 0, 0) == 0);
    REQUIRE(gdrx_alloc(shared_x, THREADS * 64, 0, &shared_mem) == 0);
    for (int t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
    for (int t = 0; t < 2; t++)
        pthread_create(&op[t], NULL, opener, NULL);
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        CHECK_EQ(thread_errors[t], 0);
    }
    for (int t = 0; t < 2; t++) {
        void *rv;
        pthread_join(op[t], &rv);
        CHECK(rv == NULL);
    }
    for (int t = 0; t < THREADS; t++)
        CHECK_EQ(gpu_read64(shared_mem.dev_ptr + (unsigned long long)t * 64),
                 pattern((unsigned)t, ROUNDS - 1));
    /* Racing frees of one allocation: one winner. */
    for (int round = 0; round < 50; round++) {
        pthread_t rt[4];
        race_wins = 0;
        REQUIRE(gdrx_alloc(shared_x, 8, 0, &race_mem) == 0);
        pthread_barrier_init(&race_start, NULL, 4);
        for (int t = 0; t < 4; t++)
            pthread_create(&rt[t], NULL, racer, NULL);
        for (int t = 0; t < 4; t++)
            pthread_join(rt[t], NULL);
        pthread_barrier_destroy(&race_start);
        CHECK_EQ(race_wins, 1);
    }
    CHECK_EQ(gdrx_free(shared_x, &shared_mem), 0);
    gdrx_info_t in = info_of(shared_x);
    CHECK_EQ(in.pins, 0);
    CHECK_EQ(in.allocations, 0);
    CHECK_EQ(gdrx_close(shared_x), 0);
    CHECK(nothing_left("after the threads", before, counted()));
    return check_done("ext threads");
}

/* ---- fork ---- */

static int fork_case(void)
{
    gdrx_t x;
    gdrx_mem_t m, other;
    uint64_t v = 0x5151515151515151ULL, r = 0;
    REQUIRE(gdrx_open(&x, 0, 0) == 0);
    REQUIRE(gdrx_alloc(x, 8, 0, &m) == 0);
    CHECK_EQ(gdrx_copy_to(&m, 0, &v, 8), 0);
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        int code = 0;
        gdrx_info_t in;
        size_t off;
        code |= (gdrx_alloc(x, 8, 0, &other) != EACCES) << 0;
        code |= (gdrx_free(x, &m) != EACCES) << 1;
        code |= (gdrx_info(x, &in) != EACCES) << 2;
        code |= (gdrx_lookup(x, m.dev_ptr, &other, &off) != EACCES) << 3;
        code |= (gdrx_copy_to(&m, 0, &v, 8) != EINVAL) << 4;
        code |= (gdrx_copy_from(&m, 0, &r, 8) != EINVAL) << 5;
        code |= (gdrx_close(x) != EACCES) << 6;
        _exit(code);
    }
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
    /* The parent's allocation and allocator are untouched. */
    CHECK_EQ(gdrx_copy_from(&m, 0, &r, 8), 0);
    CHECK_EQ(r, v);
    CHECK_EQ(gpu_read64(m.dev_ptr), v);
    CHECK_EQ(gdrx_alloc(x, 8, 0, &other), 0);
    CHECK_EQ(gdrx_free(x, &other), 0);
    CHECK_EQ(gdrx_free(x, &m), 0);
    CHECK_EQ(gdrx_close(x), 0);
    return check_done("ext fork");
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "api";
    if (argc > 2)
        want_backend = backend_code(argv[2]);
    if (strcmp(what, "refused") == 0) {
        gdrx_t x = NULL;
        CHECK_EQ(gdrx_open(&x, 0, 0), ENODEV);
        CHECK(x == NULL);
        return check_done("ext refused");
    }
    gpu_init();
    if (strcmp(what, "api") == 0)
        return api(argc, argv);
    if (strcmp(what, "threads") == 0)
        return threads();
    if (strcmp(what, "fork") == 0)
        return fork_case();
    printf("unknown scenario %s\n", what);
    return 2;
}
