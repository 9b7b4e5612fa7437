/*
 * threads.c - many threads pin, map, copy, query, unmap and unpin on one
 * gdr_t at the same time, while others copy through one shared mapping
 * (copies take no lock). Every call must succeed, every byte must arrive,
 * and nothing may be left pinned or mapped afterwards.
 *
 * gdrcopy 2.6 is not thread-safe, so against it one thread runs the same
 * loop (which still proves the loop's own expectations).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "gdrapi.h"
#include "gdrsim.h"
#include "gpu.h"

#define MAX_THREADS 8
#define ITERATIONS 150
#define SLICE (2 * GPU_PAGE_SIZE)
#define SHARED_CHUNK 4096

static gdr_t g;
static unsigned long base;         /* MAX_THREADS slices, then the shared page */
static gdr_mh_t shared_mh;
static unsigned char *shared_map;
static int nthreads;
static pthread_barrier_t start;

struct worker {
    int id;
    int errors;
    int first_line;
    int ops;
};

#define EXPECT(w, cond)                          \
    do {                                         \
        (w)->ops++;                              \
        if (!(cond)) {                           \
            if ((w)->errors++ == 0)              \
                (w)->first_line = __LINE__;      \
        }                                        \
    } while (0)

static void *worker_main(void *arg)
{
    struct worker *w = (struct worker *)arg;
    unsigned long mine = base + (unsigned long)w->id * SLICE;
    unsigned char out[SHARED_CHUNK], in[SHARED_CHUNK];
    int it;
    size_t i;

    pthread_barrier_wait(&start);
    for (it = 0; it < ITERATIONS; it++) {
        gdr_mh_t mh;
        gdr_info_t info;
        void *p = NULL;
        int v = -1;
        size_t len = 1 + (size_t)((it * 977 + w->id * 131) % (SHARED_CHUNK - 1));

        for (i = 0; i < len; i++)
            out[i] = (unsigned char)(i + (size_t)it * 13 + (size_t)w->id * 101);

        /* A private pin and mapping, with the whole life cycle each time. */
        EXPECT(w, gdr_pin_buffer_v2(g, mine, SLICE, 0, &mh) == 0);
        EXPECT(w, gdr_map(g, mh, &p, SLICE) == 0);
        if (p != NULL) {
            unsigned char *m = (unsigned char *)p + (it % 64);
            EXPECT(w, gdr_copy_to_mapping(mh, m, out, len) == 0);
            memset(in, 0, len);
            EXPECT(w, gdr_copy_from_mapping(mh, in, m, len) == 0);
            EXPECT(w, memcmp(in, out, len) == 0);
        }
        EXPECT(w, gdr_get_info(g, mh, &info) == 0 && info.va == mine && info.mapped == 1);
        if (p != NULL)
            EXPECT(w, gdr_unmap(g, mh, p, SLICE) == 0);
        EXPECT(w, gdr_unpin_buffer(g, mh) == 0);

        /* Instances of their own come and go meanwhile, closed with a pin live. */
        if (it % 30 == 0) {
            gdr_t own = gdr_open();
            gdr_mh_t o;
            EXPECT(w, own != NULL);
            if (own != NULL) {
                EXPECT(w, gdr_pin_buffer_v2(own, mine, GPU_PAGE_SIZE, 0, &o) == 0);
                EXPECT(w, gdr_close(own) == 0);
            }
        }

        /* Queries in between. */
        EXPECT(w, gdr_get_attribute(g, GDR_ATTR_USING_DMA_BUF_MMAP, &v) == 0 && v == 0);

        /* The shared mapping: each thread owns one chunk of it. */
        {
            unsigned char *chunk = shared_map + (size_t)w->id * SHARED_CHUNK;
            EXPECT(w, gdr_copy_to_mapping(shared_mh, chunk, out, len) == 0);
            memset(in, 0, len);
            EXPECT(w, gdr_copy_from_mapping(shared_mh, in, chunk, len) == 0);
            EXPECT(w, memcmp(in, out, len) == 0);
        }
    }
    return NULL;
}

/* Races on one handle: every thread tries the same operation at once. */
enum race_op { RACE_MAP, RACE_UNMAP, RACE_UNPIN };

static gdr_mh_t race_mh;
static void *race_va;
static enum race_op race_op;
static pthread_barrier_t race_start;

struct racer {
    int ret;
    void *va;
};

static void *racer_main(void *arg)
{
    struct racer *r = (struct racer *)arg;
    pthread_barrier_wait(&race_start);
    switch (race_op) {
    case RACE_MAP:
        r->ret = gdr_map(g, race_mh, &r->va, GPU_PAGE_SIZE);
        break;
    case RACE_UNMAP:
        r->ret = gdr_unmap(g, race_mh, race_va, GPU_PAGE_SIZE);
        break;
    case RACE_UNPIN:
        r->ret = gdr_unpin_buffer(g, race_mh);
        break;
    }
    return NULL;
}

/* Runs op on all threads at once: exactly one wins, the others get loser_err. */
static void race(enum race_op op, int loser_err, const char *what)
{
    pthread_t tid[MAX_THREADS];
    struct racer r[MAX_THREADS];
    int t, wins = 0, losses = 0;

    race_op = op;
    pthread_barrier_init(&race_start, NULL, MAX_THREADS);
    for (t = 0; t < MAX_THREADS; t++) {
        memset(&r[t], 0, sizeof(r[t]));
        pthread_create(&tid[t], NULL, racer_main, &r[t]);
    }
    for (t = 0; t < MAX_THREADS; t++) {
        pthread_join(tid[t], NULL);
        if (r[t].ret == 0) {
            wins++;
            if (op == RACE_MAP)
                race_va = r[t].va;
        } else if (r[t].ret == loser_err) {
            losses++;
        } else {
            printf("race %s: a thread got %d\n", what, r[t].ret);
        }
    }
    pthread_barrier_destroy(&race_start);
    if (wins != 1)
        printf("race %s: %d winners\n", what, wins);
    CHECK_EQ(wins, 1);
    CHECK_EQ(losses, MAX_THREADS - 1);
}

static void races(void)
{
    int round;
    for (round = 0; round < 20; round++) {
        if (gdr_pin_buffer_v2(g, base, GPU_PAGE_SIZE, 0, &race_mh) != 0) {
            CHECK(!"pin for races");
            return;
        }
        race(RACE_MAP, EAGAIN, "map");
        race(RACE_UNMAP, EINVAL, "unmap");
        race(RACE_UNPIN, EINVAL, "unpin");
    }
}

int main(void)
{
    CUdeviceptr raw;
    pthread_t tid[MAX_THREADS];
    struct worker w[MAX_THREADS];
    struct gdrsim_counters c;
    void *p = NULL;
    int t, total_ops = 0;

    nthreads = OURS() ? MAX_THREADS : 1;
    gpu_init();
    raw = gpu_alloc(MAX_THREADS * SLICE + GPU_PAGE_SIZE);
    base = gpu_aligned(raw);

    g = gdr_open();
    REQUIRE(g != NULL);
    REQUIRE(gdr_pin_buffer_v2(g, base + MAX_THREADS * SLICE, GPU_PAGE_SIZE, 0, &shared_mh) == 0);
    REQUIRE(gdr_map(g, shared_mh, &p, GPU_PAGE_SIZE) == 0);
    shared_map = (unsigned char *)p;

    pthread_barrier_init(&start, NULL, (unsigned)nthreads);
    for (t = 0; t < nthreads; t++) {
        memset(&w[t], 0, sizeof(w[t]));
        w[t].id = t;
        CHECK_EQ(pthread_create(&tid[t], NULL, worker_main, &w[t]), 0);
    }
    for (t = 0; t < nthreads; t++) {
        pthread_join(tid[t], NULL);
        if (w[t].errors)
            printf("thread %d: %d of %d operations failed, first at threads.c:%d\n", t,
                   w[t].errors, w[t].ops, w[t].first_line);
        CHECK_EQ(w[t].errors, 0);
        total_ops += w[t].ops;
    }
    pthread_barrier_destroy(&start);
    printf("threads: %d threads, %d operations\n", nthreads, total_ops);

    /* gdrcopy 2.6 is not thread-safe (and double unpin crashes it). */
    if (OURS())
        races();

    CHECK_EQ(gdr_unmap(g, shared_mh, p, GPU_PAGE_SIZE), 0);
    CHECK_EQ(gdr_unpin_buffer(g, shared_mh), 0);
    memset(&c, 0xff, sizeof(c));
    CHECK_EQ(gdrsim_get_counters(&c, sizeof(c)), 0);
    CHECK_EQ(c.live_pins, 0);
    CHECK_EQ(c.live_mappings, 0);
    CHECK_EQ(gdr_close(g), 0);
    CHECK_EQ(cuMemFree(raw), CUDA_SUCCESS);
    return check_done("threads");
}
