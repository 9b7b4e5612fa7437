/*
 * threads.c - many threads pin, map, copy, query, unmap and unpin on one
 * gdr_t at the same time, while others copy through one shared mapping
 * (copies take no lock). Every call must succeed, every byte must arrive,
 * and nothing may be left pinned or mapped afterwards. Then races on one
 * handle: identical calls (one winner), queries against an unpin (they
 * describe the right buffer or fail with EINVAL, never another buffer), and
 * an unpin against a map or unmap (it succeeds or, having lost, fails with
 * EAGAIN and changes nothing), and a close against a pin, map, unmap or
 * unpin (it waits and succeeds, leaving nothing pinned or mapped). Runs on
 * both backends.
 *
 * gdrcopy 2.6 is not thread-safe, so against it one thread runs the same
 * loop (which still proves the loop's own expectations).
 *
 * Then a copy's visibility to another thread: a copy is complete and visible
 * when the call returns, so a thread that sees a flag raised after the copy
 * finds every byte in the mapping.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

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
static int using_dmabuf;
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
        EXPECT(w, gdr_get_attribute(g, GDR_ATTR_USING_DMA_BUF_MMAP, &v) == 0 && v == using_dmabuf);

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

/* Visibility: one thread copies into the mapping and then raises a flag (a release store in
 * host memory); another waits for the flag (acquire) and reads the mapping with plain loads.
 * It must find the bytes of that copy. Where the copy's stores are weakly ordered (write-
 * combining memory; streaming stores, which the emulator's write-back mapping also reorders)
 * only the fence at the end of the copy guarantees this: without it the reader sees stale
 * bytes, most often when the copy ends in a partly written 64-byte line.
 *
 * A missing fence shows only while the reader runs on another CPU at the moment the flag
 * goes up (a context switch on the copier's CPU drains its write-combining buffers), so a
 * round counts only when the copier has just seen the reader's heartbeat move; rounds run
 * until HANDOFFS have counted, a stale read ends them, or HANDOFF_BUDGET_NS has passed (a
 * machine with one CPU, or a very busy one, may then check fewer rounds). */
#define HANDOFFS 200
#define HANDOFF_BUDGET_NS 250000000LL
#define HANDOFF_DONE (~0UL)

typedef int (*copy_fn)(gdr_mh_t, void *, const void *, size_t);

static struct {
    size_t size;
    atomic_ulong turn;      /* 2r - 1: round r copied; 2r: round r read; HANDOFF_DONE */
    atomic_ulong heartbeat; /* moved by the reader while it waits */
    atomic_int stale;       /* the round of the first stale read, 0 if none */
} handoff;

static unsigned char handoff_byte(unsigned long round, size_t i)
{
    return (unsigned char)(round * 31 + i);
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Waits until turn is want or HANDOFF_DONE; returns what it saw. */
static unsigned long handoff_wait(unsigned long want, int beat)
{
    unsigned spins = 0;
    unsigned long t;
    while ((t = atomic_load_explicit(&handoff.turn, memory_order_acquire)) != want &&
           t != HANDOFF_DONE) {
        if (beat)
            atomic_fetch_add_explicit(&handoff.heartbeat, 1, memory_order_relaxed);
        if (++spins % 4096 == 0)
            sched_yield();
        cpu_relax();
    }
    return t;
}

/* True when the reader's heartbeat moves within a short spin: it is running right now. */
static int reader_running(void)
{
    unsigned long hb = atomic_load_explicit(&handoff.heartbeat, memory_order_relaxed);
    int i;
    for (i = 0; i < 2000; i++) {
        if (atomic_load_explicit(&handoff.heartbeat, memory_order_relaxed) != hb)
            return 1;
        cpu_relax();
    }
    return 0;
}

static void *handoff_reader(void *arg)
{
    const volatile unsigned char *dev = (const volatile unsigned char *)arg;
    unsigned long round;
    size_t i;

    for (round = 1;; round++) {
        if (handoff_wait(2 * round - 1, 1) == HANDOFF_DONE)
            break;
        for (i = 0; i < handoff.size; i++) {
            if (dev[i] != handoff_byte(round, i)) {
                atomic_store(&handoff.stale, (int)round);
                break;
            }
        }
        atomic_store_explicit(&handoff.turn, 2 * round, memory_order_release);
    }
    return NULL;
}

/* Puts the copier and the reader on two different CPUs where there are two (a thread created
 * on the copier's CPU can otherwise stay there, taking turns with it, for the whole budget). */
static int split_cpus(pthread_t reader, cpu_set_t *saved)
{
    cpu_set_t allowed, one;
    int cpu, first = -1, second = -1;

    if (pthread_getaffinity_np(pthread_self(), sizeof(allowed), &allowed) != 0)
        return 0;
    *saved = allowed;
    for (cpu = 0; cpu < CPU_SETSIZE && second < 0; cpu++) {
        if (CPU_ISSET(cpu, &allowed)) {
            if (first < 0)
                first = cpu;
            else
                second = cpu;
        }
    }
    if (second < 0)
        return 0;
    CPU_ZERO(&one);
    CPU_SET(second, &one);
    pthread_setaffinity_np(reader, sizeof(one), &one);
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
    return 1;
}

static void check_visibility(copy_fn copy, const char *name)
{
    static const size_t sizes[] = {4, 68};
    static unsigned char src[68];
    size_t k, i;

    for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        long long deadline = now_ns() + HANDOFF_BUDGET_NS;
        unsigned long round = 0;
        int counted = 0, stale, split;
        pthread_t reader;
        cpu_set_t saved;

        handoff.size = sizes[k];
        atomic_store(&handoff.turn, 0);
        atomic_store(&handoff.stale, 0);
        memset(shared_map, 0, sizes[k]);
        CHECK_EQ(pthread_create(&reader, NULL, handoff_reader, shared_map), 0);
        split = split_cpus(reader, &saved);
        while (counted < HANDOFFS && !atomic_load(&handoff.stale) && now_ns() < deadline) {
            if (!reader_running()) {
                sched_yield();
                continue;
            }
            round++;
            for (i = 0; i < sizes[k]; i++)
                src[i] = handoff_byte(round, i);
            if (copy(shared_mh, shared_map, src, sizes[k]) != 0) {
                CHECK(!"copy for the visibility check");
                break;
            }
            atomic_store_explicit(&handoff.turn, 2 * round - 1, memory_order_release);
            counted++;
            handoff_wait(2 * round, 0);
        }
        atomic_store_explicit(&handoff.turn, HANDOFF_DONE, memory_order_release);
        pthread_join(reader, NULL);
        if (split)
            pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
        stale = atomic_load(&handoff.stale);
        if (stale)
            printf("visibility: %s of %zu bytes: the reader saw stale bytes in round %d\n", name,
                   sizes[k], stale);
        else if (counted < HANDOFFS)
            printf("visibility: %s of %zu bytes: %d of %d rounds with both threads running\n",
                   name, sizes[k], counted, HANDOFFS);
        CHECK_EQ(stale, 0);
    }
}

/*
 * Queries racing an unpin of the same handle. One thread pins and unpins a
 * buffer over and over, publishing each handle; others query whatever handle
 * is published. A query must describe that buffer (its va and size) or fail
 * with EINVAL: never return an all-zero record or another live buffer's (the
 * shared buffer, pinned first, is the one a zeroed driver handle would name).
 */
#define QUERY_ROUNDS 4000
#define QUERY_SECONDS 3
#define QUERIERS 2

static volatile gdr_mh_t published;
static volatile int publishing;
static volatile long query_attempts;

struct querier {
    long ok, refused, wrong, bad_errno;
    unsigned long wrong_va, wrong_size;
    int wrong_ret;
};

static void *querier_main(void *arg)
{
    struct querier *q = (struct querier *)arg;
    while (__atomic_load_n(&publishing, __ATOMIC_ACQUIRE)) {
        gdr_mh_t mh;
        gdr_info_v2_t v2;
        gdr_info_t v1;
        int flag = 7, rc, k;
        mh.h = __atomic_load_n(&published.h, __ATOMIC_ACQUIRE);
        if (mh.h == 0)
            continue;
        __atomic_add_fetch(&query_attempts, 1, __ATOMIC_RELEASE);
        for (k = 0; k < 3; k++) {
            memset(&v2, 0, sizeof(v2));
            memset(&v1, 0, sizeof(v1));
            if (k == 0)
                rc = gdr_get_info_v2(g, mh, &v2);
            else if (k == 1)
                rc = gdr_get_info(g, mh, &v1);
            else
                rc = gdr_get_callback_flag(g, mh, &flag);
            if (k == 1) {
                v2.va = v1.va;
                v2.mapped_size = v1.mapped_size;
            }
            if (rc == EINVAL) {
                q->refused++;
            } else if (rc != 0) {
                q->bad_errno++;
                q->wrong_ret = rc;
            } else if (k == 2 ? flag != 0 : v2.va != base || v2.mapped_size != GPU_PAGE_SIZE) {
                q->wrong++;
                q->wrong_va = (unsigned long)v2.va;
                q->wrong_size = (unsigned long)v2.mapped_size;
            } else {
                q->ok++;
            }
        }
    }
    return NULL;
}

static void queries_against_unpin(void)
{
    pthread_t tid[QUERIERS];
    struct querier q[QUERIERS];
    long ok = 0, refused = 0, wrong = 0, bad = 0;
    int t, round, pin_failures = 0, unpin_failures = 0;
    time_t until = time(NULL) + QUERY_SECONDS;

    publishing = 1;
    for (t = 0; t < QUERIERS; t++) {
        memset(&q[t], 0, sizeof(q[t]));
        pthread_create(&tid[t], NULL, querier_main, &q[t]);
    }
    for (round = 0; round < QUERY_ROUNDS && (round < 50 || time(NULL) < until); round++) {
        gdr_mh_t mh;
        if (gdr_pin_buffer_v2(g, base, GPU_PAGE_SIZE, 0, &mh) != 0) {
            pin_failures++;
            continue;
        }
        {
            /* Let the queriers see the live handle for a varying while, then unpin under them. */
            long seen = __atomic_load_n(&query_attempts, __ATOMIC_ACQUIRE);
            __atomic_store_n(&published.h, mh.h, __ATOMIC_RELEASE);
            while (__atomic_load_n(&query_attempts, __ATOMIC_ACQUIRE) < seen + round % 3)
                ;
        }
        if (gdr_unpin_buffer(g, mh) != 0)
            unpin_failures++;
    }
    __atomic_store_n(&publishing, 0, __ATOMIC_RELEASE);
    for (t = 0; t < QUERIERS; t++) {
        pthread_join(tid[t], NULL);
        ok += q[t].ok;
        refused += q[t].refused;
        wrong += q[t].wrong;
        bad += q[t].bad_errno;
        if (q[t].wrong)
            printf("queries against unpin: %ld answers described another buffer (last: va 0x%lx size %lu)\n",
                   q[t].wrong, q[t].wrong_va, q[t].wrong_size);
        if (q[t].bad_errno)
            printf("queries against unpin: %ld answers were errno %d, want 0 or EINVAL\n",
                   q[t].bad_errno, q[t].wrong_ret);
    }
    printf("queries against unpin: %d rounds, %ld right, %ld refused, %ld wrong, %ld bad errno\n",
           round, ok, refused, wrong, bad);
    CHECK_EQ(pin_failures, 0);
    CHECK_EQ(unpin_failures, 0);
    CHECK_EQ(wrong, 0);
    CHECK_EQ(bad, 0);
    CHECK(ok > 0);
}

/*
 * An unpin racing a map or an unmap of the same handle: the unpin either
 * wins (0) or loses with EAGAIN and leaves the handle as it was, so that a
 * retry succeeds; the map or unmap either wins or finds the handle gone
 * (EINVAL). Never another errno.
 */
#define UNPIN_ROUNDS 3000
#define UNPIN_SECONDS 3

static gdr_t flip_g;
static gdr_mh_t flip_mh;
static volatile int flip_stop;
static volatile long flips;
static long flip_bad;
static int flip_bad_ret;

static void *flipper_main(void *arg)
{
    long cycles = (long)(intptr_t)arg;
    while (!__atomic_load_n(&flip_stop, __ATOMIC_ACQUIRE) && cycles-- > 0) {
        void *p = NULL;
        int rc = gdr_map(flip_g, flip_mh, &p, GPU_PAGE_SIZE);
        __atomic_add_fetch(&flips, 1, __ATOMIC_RELEASE);
        if (rc == 0) {
            rc = gdr_unmap(flip_g, flip_mh, p, GPU_PAGE_SIZE);
            if (rc != 0 && rc != EINVAL) {
                flip_bad++;
                flip_bad_ret = rc;
            }
        } else if (rc != EINVAL && rc != EAGAIN) {
            flip_bad++;
            flip_bad_ret = rc;
        }
    }
    return NULL;
}

static void unpin_against_map(void)
{
    int round, lost = 0, bad = 0, bad_ret = 0, unfinished = 0;
    time_t until = time(NULL) + UNPIN_SECONDS;
    flip_g = g;
    flip_bad = 0;
    for (round = 0; round < UNPIN_ROUNDS && (round < 100 || time(NULL) < until); round++) {
        pthread_t tid;
        int rc, tries;
        if (gdr_pin_buffer_v2(g, base, GPU_PAGE_SIZE, 0, &flip_mh) != 0) {
            CHECK(!"pin for unpin_against_map");
            return;
        }
        flip_stop = 0;
        flips = 0;
        /* A few map/unmap cycles, so that a losing unpin wins once they are over. */
        pthread_create(&tid, NULL, flipper_main, (void *)(intptr_t)(2 + round % 5));
        /* Let the flipper get going, then unpin under it at a varying moment. */
        while (__atomic_load_n(&flips, __ATOMIC_ACQUIRE) < 1 + round % 2)
            ;
        for (tries = 0; tries < (round % 64) * 16; tries++)
            __asm__ __volatile__("" ::: "memory");
        for (tries = 0; tries < 1000000; tries++) {
            rc = gdr_unpin_buffer(g, flip_mh);
            if (rc == 0)
                break;
            if (rc == EAGAIN) {
                lost++;
                sched_yield();
                continue;
            }
            bad++;
            bad_ret = rc;
            break;
        }
        if (rc != 0)
            unfinished++;
        __atomic_store_n(&flip_stop, 1, __ATOMIC_RELEASE);
        pthread_join(tid, NULL);
    }
    printf("unpin against map/unmap: %d rounds, %d lost unpins retried, %d bad, %ld bad map/unmap\n",
           round, lost, bad, flip_bad);
    if (bad)
        printf("unpin against map/unmap: an unpin returned %d, want 0 or EAGAIN\n", bad_ret);
    if (flip_bad)
        printf("unpin against map/unmap: a map or unmap returned %d, want 0, EINVAL or EAGAIN\n",
               flip_bad_ret);
    CHECK_EQ(bad, 0);
    CHECK_EQ(unfinished, 0);
    CHECK_EQ(flip_bad, 0);
}

/*
 * gdr_close racing a pin, a map, an unmap or an unpin on another thread:
 * the close succeeds, having waited for the call under way (none of them
 * takes the session lock on a gdrdrv handle), and unmaps and unpins
 * everything left, the new pin's handle included; the pin either wins or
 * finds the session closed (EINVAL), the map or unmap wins or finds the
 * handle gone (EINVAL) or mapped already (EAGAIN), and the unpin wins or
 * finds it gone (EINVAL). Nothing stays pinned or mapped.
 */
#define CLOSE_ROUNDS 3000
#define CLOSE_SECONDS 4

enum close_racer { CLOSE_VS_FLIPS, CLOSE_VS_UNPIN, CLOSE_VS_PIN, CLOSE_RACERS };

static const char *const racer_names[CLOSE_RACERS] = {"map/unmap", "unpin", "pin"};
static long long racer_at;
static enum close_racer racer_op;
static int racer_ret;

/* Unpins flip_mh, or pins a new handle on flip_g, at racer_at (CLOCK_MONOTONIC ns). */
static void *one_call_racer_main(void *arg)
{
    gdr_mh_t mh;
    (void)arg;
    while (now_ns() < racer_at)
        ;
    if (racer_op == CLOSE_VS_UNPIN)
        racer_ret = gdr_unpin_buffer(flip_g, flip_mh);
    else
        racer_ret = gdr_pin_buffer_v2(flip_g, base, GPU_PAGE_SIZE, 0, &mh);
    return NULL;
}

static void close_against_calls(void)
{
    int round, bad = 0, bad_ret = 0, opened = 0;
    int won[CLOSE_RACERS] = {0}, bad_calls[CLOSE_RACERS] = {0}, bad_call_ret[CLOSE_RACERS] = {0};
    time_t until = time(NULL) + CLOSE_SECONDS;
    struct gdrsim_counters before, after;
    enum close_racer op;
    memset(&before, 0, sizeof(before));
    if (gdrsim_present())
        CHECK_EQ(gdrsim_get_counters(&before, sizeof(before)), 0);
    flip_bad = 0;
    for (round = 0; round < CLOSE_ROUNDS && (round < 150 || time(NULL) < until); round++) {
        pthread_t tid;
        int rc, tries;
        op = (enum close_racer)(round % CLOSE_RACERS);
        flip_g = gdr_open();
        if (flip_g == NULL) {
            CHECK(!"open for close_against_calls");
            return;
        }
        opened++;
        if (gdr_pin_buffer_v2(flip_g, base, GPU_PAGE_SIZE, 0, &flip_mh) != 0) {
            CHECK(!"pin for close_against_calls");
            gdr_close(flip_g);
            return;
        }
        flip_stop = 0;
        flips = 0;
        if (op == CLOSE_VS_FLIPS) {
            pthread_create(&tid, NULL, flipper_main, (void *)(intptr_t)(2 + round % 5));
            while (__atomic_load_n(&flips, __ATOMIC_ACQUIRE) < 1 + round % 2)
                ;
            for (tries = 0; tries < (round % 64) * 16; tries++)
                __asm__ __volatile__("" ::: "memory");
        } else {
            /* The call starts from 1.5 us before the close to 1.6 us after it. */
            long long close_at = now_ns() + 100000;
            racer_at = close_at - 1500 + (round / CLOSE_RACERS % 32) * 100;
            racer_op = op;
            pthread_create(&tid, NULL, one_call_racer_main, NULL);
            while (now_ns() < close_at)
                ;
        }
        rc = gdr_close(flip_g);
        if (rc != 0) {
            bad++;
            bad_ret = rc;
        }
        __atomic_store_n(&flip_stop, 1, __ATOMIC_RELEASE);
        pthread_join(tid, NULL);
        if (op != CLOSE_VS_FLIPS) {
            won[op] += racer_ret == 0;
            if (racer_ret != 0 && racer_ret != EINVAL) {
                bad_calls[op]++;
                bad_call_ret[op] = racer_ret;
            }
        }
    }
    memset(&after, 0, sizeof(after));
    if (gdrsim_present())
        CHECK_EQ(gdrsim_get_counters(&after, sizeof(after)), 0);
    printf("close against calls: %d rounds, %d bad closes, %ld bad map/unmap, unpins %d won "
           "%d bad, pins %d won %d bad; live pins %ld -> %ld, mappings %ld -> %ld\n",
           round, bad, flip_bad, won[CLOSE_VS_UNPIN], bad_calls[CLOSE_VS_UNPIN], won[CLOSE_VS_PIN],
           bad_calls[CLOSE_VS_PIN], (long)before.live_pins, (long)after.live_pins,
           (long)before.live_mappings, (long)after.live_mappings);
    if (bad)
        printf("close against calls: a close returned %d, want 0\n", bad_ret);
    if (flip_bad)
        printf("close against calls: a map or unmap returned %d, want 0, EINVAL or EAGAIN\n",
               flip_bad_ret);
    for (op = CLOSE_VS_UNPIN; op < CLOSE_RACERS; op++)
        if (bad_calls[op])
            printf("close against calls: %s returned %d, want 0 or EINVAL\n", racer_names[op],
                   bad_call_ret[op]);
    CHECK(opened > 0);
    CHECK_EQ(bad, 0);
    CHECK_EQ(flip_bad, 0);
    CHECK_EQ(bad_calls[CLOSE_VS_UNPIN], 0);
    CHECK_EQ(bad_calls[CLOSE_VS_PIN], 0);
    if (gdrsim_present()) {
        CHECK_EQ(after.live_pins, before.live_pins);
        CHECK_EQ(after.live_mappings, before.live_mappings);
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
    REQUIRE(gdr_get_attribute(g, GDR_ATTR_USING_DMA_BUF_MMAP, &using_dmabuf) == 0);
    printf("threads: %s backend\n", using_dmabuf ? "DMA-BUF" : "gdrdrv");
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

    /* One thread calls the library, the other only reads memory: fine for gdrcopy 2.6 too. */
    check_visibility(gdr_copy_to_mapping, "gdr_copy_to_mapping");
    if (OURS()) {
        copy_fn alias = (copy_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gdr_copy_to_mapped");
        CHECK(alias != NULL);
        if (alias != NULL)
            check_visibility(alias, "gdr_copy_to_mapped");
    }

    /* gdrcopy 2.6 is not thread-safe (and double unpin crashes it). */
    if (OURS()) {
        races();
        queries_against_unpin();
        unpin_against_map();
        close_against_calls();
    }

    CHECK_EQ(gdr_unmap(g, shared_mh, p, GPU_PAGE_SIZE), 0);
    CHECK_EQ(gdr_unpin_buffer(g, shared_mh), 0);
    if (gdrsim_present()) {
        memset(&c, 0xff, sizeof(c));
        CHECK_EQ(gdrsim_get_counters(&c, sizeof(c)), 0);
        CHECK_EQ(c.live_pins, 0);
        CHECK_EQ(c.live_mappings, 0);
        CHECK_EQ(c.live_dmabufs, 0);
    }
    CHECK_EQ(gdr_close(g), 0);
    CHECK_EQ(gpu_free(raw), CUDA_SUCCESS);
    return check_done("threads");
}
