/*
 * stress.c - many threads on one gdr_t and on separate ones, with forks in the middle.
 *
 * Phase "shared": THREADS threads share one gdr_t. Each owns CHUNK bytes of one device
 * allocation and loops: pin (v1 or v2), get_info, callback flag, map (map or map_v2), copy a
 * pattern of its own in and back out at a varying offset and length (both directions, both
 * copy names), unmap, unpin; every few rounds it also queries the versions and attributes,
 * hands the library stale and forged handles (EINVAL), and opens and closes a gdr_t of its own.
 * Phase "separate": the same loop, each thread on its own gdr_t.
 * Phase "contended": all threads pin, map and unpin the same range under one gdr_t, with
 * copies only through their own mappings (one handle each, all over the same bytes).
 * During the phases the main thread forks children: a child calls functions on the parent's
 * gdr_t (each must fail with EACCES), then opens a gdr_t of its own and uses it; a child that
 * does not finish within CHILD_TIMEOUT seconds counts as a deadlock.
 * At the end, in a quiet moment, a child's calls on the parent's gdr_t reach the driver not
 * once (the emulator's ioctls counter), and the emulator counts no pin, mapping or open file.
 *
 * Everything is bounded: an alarm of TIMEOUT seconds ends the program with "deadlock?".
 * Arguments: [rounds per thread] [threads] [forks per phase]. Prints the number of library calls made.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "gdrapi.h"
#include "gdrsim.h"
#include "gpu.h"

#define MAX_THREADS 32
#define CHUNK (4 * GPU_PAGE_SIZE)
#define TIMEOUT 240
#define CHILD_TIMEOUT 10

static unsigned long base;       /* 64 KiB aligned, MAX_THREADS * CHUNK bytes */
static CUcontext ctx;
static int rounds = 200, nthreads = 8, forks_per_phase = 4;
static atomic_long calls, failures, forks_done;
static gdr_t shared_g;
static int dmabuf;       /* shared_g is on the DMA-BUF backend */
static unsigned backend; /* gdr_cache_backend(shared_g) */

#define T_CHECK(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            atomic_fetch_add(&failures, 1);                                                    \
            fprintf(stdout, "%s:%d: FAILED (thread): %s\n", __FILE__, __LINE__, #cond);        \
            fflush(stdout);                                                                    \
        }                                                                                      \
    } while (0)

/* The timeout: says where the (only, in a child) thread is stuck, then ends the process. */
static void on_alarm(int sig)
{
    void *frames[32];
    (void)sig;
    static const char msg[] = "stress: timeout: deadlock? stuck in:\n";
    (void)!write(1, msg, sizeof(msg) - 1);
    backtrace_symbols_fd(frames, backtrace(frames, 32), 1);
    _exit(3);
}

static uint32_t rnd(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* One round of pin, map, copy, unmap, unpin of [addr, addr + len) on g. */
static void one_round(gdr_t g, int id, unsigned long addr, size_t len, uint32_t *seed, int exclusive)
{
    gdr_mh_t mh;
    gdr_info_t info;
    void *va = NULL;
    unsigned char out[4096], in[4096];
    int flag = -1, rc;
    int v1 = rnd(seed) & 1;

    rc = v1 ? gdr_pin_buffer(g, addr, len, 0, 0, &mh) : gdr_pin_buffer_v2(g, addr, len, 0, &mh);
    atomic_fetch_add(&calls, 1);
    T_CHECK(rc == 0);
    if (rc != 0)
        return;
    T_CHECK(gdr_get_info(g, mh, &info) == 0 && info.va == addr && info.mapped_size == len &&
            !info.mapped);
    T_CHECK(gdr_get_callback_flag(g, mh, &flag) == 0 && flag == 0);
    rc = (rnd(seed) & 1) ? gdr_map(g, mh, &va, len) : gdr_map_v2(g, mh, &va, len, GDR_MAP_FLAG_DEFAULT);
    T_CHECK(rc == 0);
    atomic_fetch_add(&calls, 3);
    if (rc == 0) {
        size_t n = 1 + rnd(seed) % sizeof(out);
        size_t off = rnd(seed) % (len - n);
        for (size_t i = 0; i < n; i++)
            out[i] = (unsigned char)(id * 31 + i + *seed);
        memset(in, 0, n);
        if (rnd(seed) & 1)
            T_CHECK(gdr_copy_to_mapping(mh, (char *)va + off, out, n) == 0);
        else
            T_CHECK(gdr_copy_to_mapped(mh, (char *)va + off, out, n) == 0);
        if (rnd(seed) & 1)
            T_CHECK(gdr_copy_from_mapping(mh, in, (char *)va + off, n) == 0);
        else
            T_CHECK(gdr_copy_from_mapped(mh, in, (char *)va + off, n) == 0);
        /* With a range of its own the thread reads its own bytes back; on a shared range other
         * threads write too, so only the copy's success is checked. */
        if (exclusive)
            T_CHECK(memcmp(in, out, n) == 0);
        T_CHECK(gdr_get_info(g, mh, &info) == 0 && info.mapped);
        void *again = NULL;
        T_CHECK(gdr_map(g, mh, &again, len) == EAGAIN); /* one mapping per handle */
        T_CHECK(gdr_unmap(g, mh, va, len) == 0);
        atomic_fetch_add(&calls, 5);
    }
    T_CHECK(gdr_unpin_buffer(g, mh) == 0);
    /* The handle is gone: refused now, whichever thread asks. */
    T_CHECK(gdr_get_info(g, mh, &info) == EINVAL);
    T_CHECK(gdr_unpin_buffer(g, mh) == EINVAL);
    atomic_fetch_add(&calls, 3);
}

/* Queries, forged handles, a private gdr_t. */
static void noise(gdr_t g, uint32_t *seed)
{
    int major, minor, v;
    gdr_mh_t bogus = {(unsigned long)rnd(seed) << 8};
    gdr_info_t info;
    T_CHECK(gdr_driver_get_version(g, &major, &minor) == 0 && major == 2);
    T_CHECK(gdr_get_attribute(g, GDR_ATTR_USE_PERSISTENT_MAPPING, &v) == 0);
    T_CHECK(gdr_get_info(g, bogus, &info) == EINVAL);
    T_CHECK(gdr_unpin_buffer(g, bogus) == EINVAL);
    gdr_t mine = gdr_open();
    T_CHECK(mine != NULL);
    if (mine) {
        T_CHECK(gdr_get_info(mine, bogus, &info) == EINVAL);
        T_CHECK(gdr_close(mine) == 0);
        T_CHECK(gdr_close(mine) == EINVAL);
    }
    atomic_fetch_add(&calls, 9);
}

struct targ {
    int id;
    int mode; /* 0 shared gdr_t, 1 own gdr_t, 2 contended range */
};

static void *worker(void *p)
{
    struct targ *a = p;
    uint32_t seed = 0x9E3779B9u ^ (uint32_t)(a->id * 7919 + a->mode);
    gdr_t g = shared_g;
    if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        T_CHECK(!"cuCtxSetCurrent");
    if (a->mode == 1) {
        g = gdr_open();
        T_CHECK(g != NULL);
        if (!g)
            return NULL;
        atomic_fetch_add(&calls, 1);
    }
    for (int r = 0; r < rounds; r++) {
        unsigned long chunk = a->mode == 2 ? base : base + (unsigned long)a->id * CHUNK;
        size_t pages = 1 + rnd(&seed) % (CHUNK / GPU_PAGE_SIZE);
        one_round(g, a->id, chunk, pages * GPU_PAGE_SIZE, &seed, a->mode != 2);
        if (r % 16 == a->id % 16)
            noise(g, &seed);
    }
    if (a->mode == 1) {
        T_CHECK(gdr_close(g) == 0);
        atomic_fetch_add(&calls, 1);
    }
    return NULL;
}

/* A child of a process whose threads are busy in the library. */
static void fork_child(gdr_t parent_g)
{
    pid_t pid = fork();
    if (pid < 0) {
        atomic_fetch_add(&failures, 1);
        return;
    }
    if (pid == 0) {
        int bad = 0, major, minor, v;
        gdr_mh_t mh;
        gdr_info_t info;
        alarm(CHILD_TIMEOUT);
        /* Bit i set: check i failed (reported through the exit status). */
        bad |= (gdr_pin_buffer_v2(parent_g, base, GPU_PAGE_SIZE, 0, &mh) != EACCES) << 0;
        bad |= (gdr_driver_get_version(parent_g, &major, &minor) != EACCES) << 1;
        bad |= (gdr_get_attribute(parent_g, GDR_ATTR_USE_PERSISTENT_MAPPING, &v) != EACCES) << 2;
        mh.h = 0x100;
        bad |= (gdr_get_info(parent_g, mh, &info) == 0) << 3;
        gdr_t mine = gdr_open();
        /* On the DMA-BUF backend and the Vulkan import the child inherits a CUDA driver
         * initialised by its parent, which CUDA does not allow it to use: its own gdr_open may
         * fail (cleanly). */
        bad |= (mine == NULL && backend == GDR_CACHE_BACKEND_GDRDRV) << 4;
        if (mine) {
            bad |= (gdr_driver_get_version(mine, &major, &minor) != 0 || major != 2) << 5;
            bad |= (gdr_close(mine) != 0) << 6;
        }
        /* EACCES while the parent holds pins; 0 (the child's copy of the descriptor closed)
         * when it holds none. */
        v = gdr_close(parent_g);
        bad |= (v != EACCES && v != 0) << 7;
        _exit(bad);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        atomic_fetch_add(&failures, 1);
        printf("stress: forked child failed: %s %#x\n",
               WIFSIGNALED(status) ? "signal" : "exit",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        fflush(stdout);
    }
    atomic_fetch_add(&forks_done, 1);
}

static void run_phase(int mode, const char *name)
{
    pthread_t t[MAX_THREADS];
    struct targ a[MAX_THREADS];
    long before = atomic_load(&calls);
    for (int i = 0; i < nthreads; i++) {
        a[i].id = i;
        a[i].mode = mode;
        if (pthread_create(&t[i], NULL, worker, &a[i]) != 0) {
            printf("stress: pthread_create failed\n");
            exit(1);
        }
    }
    /* Forks while the workers run (a short pause between them lets the workers progress). */
    for (int f = 0; f < forks_per_phase; f++) {
        usleep(1000 + (f % 4) * 1000);
        fork_child(shared_g);
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(t[i], NULL);
    printf("phase %-10s %d threads x %d rounds: %ld library calls\n", name, nthreads, rounds,
           atomic_load(&calls) - before);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    struct gdrsim_counters c0, c1;
    if (argc > 1)
        rounds = atoi(argv[1]);
    if (argc > 2)
        nthreads = atoi(argv[2]);
    if (nthreads < 1 || nthreads > MAX_THREADS)
        nthreads = 8;
    if (argc > 3)
        forks_per_phase = atoi(argv[3]);
    {
        void *warm[4];
        backtrace(warm, 4); /* loads the unwinder now, not inside the signal handler */
    }
    signal(SIGALRM, on_alarm);
    alarm(TIMEOUT);

    gpu_init();
    REQUIRE(cuCtxGetCurrent(&ctx) == CUDA_SUCCESS);
    base = gpu_aligned(gpu_alloc(MAX_THREADS * CHUNK));
    shared_g = gdr_open();
    REQUIRE(shared_g != NULL);
    REQUIRE(gdr_get_attribute(shared_g, GDR_ATTR_USING_DMA_BUF_MMAP, &dmabuf) == 0);
    backend = gdr_cache_backend(shared_g);

    run_phase(0, "shared");
    run_phase(1, "separate");
    run_phase(2, "contended");

    /* Quiet now: a child's calls on the parent's gdr_t issue no ioctl. (Forks per phase 0: no
     * fork at all, for valgrind, whose fork of this process takes minutes.) */
    memset(&c0, 0, sizeof(c0));
    memset(&c1, 0, sizeof(c1));
    fflush(stdout);
    pid_t pid = forks_per_phase > 0 ? fork() : -2;
    REQUIRE(pid >= 0 || pid == -2);
    if (pid == 0) {
        int major, minor, v;
        gdr_mh_t mh;
        alarm(CHILD_TIMEOUT);
        gdrsim_get_counters(&c0, sizeof(c0));
        int bad = gdr_pin_buffer_v2(shared_g, base, GPU_PAGE_SIZE, 0, &mh) != EACCES;
        bad |= gdr_driver_get_version(shared_g, &major, &minor) != EACCES;
        bad |= gdr_get_attribute(shared_g, GDR_ATTR_USE_PERSISTENT_MAPPING, &v) != EACCES;
        v = gdr_close(shared_g);
        bad |= v != EACCES && v != 0;
        gdrsim_get_counters(&c1, sizeof(c1));
        bad |= (c1.ioctls != c0.ioctls) << 4;
        _exit(bad);
    }
    int status = 0;
    if (pid > 0)
        CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);

    CHECK_EQ(gdr_close(shared_g), 0);
    memset(&c1, 0, sizeof(c1));
    gdrsim_get_counters(&c1, sizeof(c1));
    CHECK_EQ(c1.live_pins, 0);
    CHECK_EQ(c1.live_mappings, 0);
    CHECK_EQ(c1.open_files, 0);
    CHECK_EQ(atomic_load(&failures), 0);
    printf("stress: %ld library calls, %ld forks during activity, %ld failed thread checks\n",
           atomic_load(&calls), atomic_load(&forks_done), atomic_load(&failures));
    return check_done("stress");
}
