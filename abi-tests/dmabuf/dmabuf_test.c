/*
 * dmabuf_test - the DMA-BUF backend through the public C API, on the emulator.
 *
 * One scenario per run (argv[1]); run.sh sets the emulator's environment for each:
 *   gdrdrv    gdr_open picks gdrdrv (the node exists, nothing forced)
 *   selected  gdr_open picks DMA-BUF (no gdrdrv node, or GDRCOPY_USE_DMABUF_MMAP=1)
 *   refused   gdr_open returns NULL (run.sh checks the log line naming the cause)
 *   api       pin/map/info/copy/unmap/unpin/close on DMA-BUF: data round trips both
 *             ways, unaligned pins (pin, do not map), mapping types, errno values of injected CUDA and
 *             mmap failures, the caller's CUDA context left alone, no dma-buf left
 *             behind (live_dmabufs) after unpin and gdr_close, threads sharing one gdr_t
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gdrapi.h"
#include "gdr_calls.h"
#include "gdrsim.h"
#include "gpu.h"

/* The legacy 40-byte info of the exported gdr_get_info symbol. */
#undef gdr_get_info
typedef struct {
    uint64_t va;
    uint64_t mapped_size;
    uint32_t page_size;
    uint64_t tm_cycles;
    uint32_t cycles_per_ms;
    unsigned mapped : 1;
    unsigned wc_mapping : 1;
} info_v1_t;
int gdr_get_info(gdr_t g, gdr_mh_t handle, info_v1_t *info);

#define MIB (1UL << 20)

static unsigned long page;

static uint64_t live_dmabufs(void)
{
    struct gdrsim_counters c;
    memset(&c, 0, sizeof c);
    if (gdrsim_get_counters(&c, sizeof c) != 0)
        return (uint64_t)-1;
    return c.live_dmabufs;
}

static int scenario_gdrdrv(void)
{
    gdr_t g = gdr_open();
    REQUIRE(g != NULL);
    CHECK_EQ(attribute_value(g, GDR_ATTR_USING_DMA_BUF_MMAP), 0);
    CHECK_EQ(gdr_close(g), 0);
    return check_done("dmabuf_test gdrdrv");
}

static int scenario_selected(void)
{
    gdr_t g = gdr_open();
    REQUIRE(g != NULL);
    CHECK_EQ(attribute_value(g, GDR_ATTR_USING_DMA_BUF_MMAP), 1);
    CHECK_EQ(attribute_value(g, GDR_ATTR_USE_PERSISTENT_MAPPING), 1);
    CHECK_EQ(attribute_value(g, GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE), 1);
    int major = -1, minor = -1;
    CHECK_EQ(gdr_driver_get_version(g, &major, &minor), 0); /* upstream aborts here */
    CHECK_EQ(major, 2);
    CHECK_EQ(minor, 6);
    /* Two sessions at once share one loaded driver. */
    gdr_t g2 = gdr_open();
    CHECK(g2 != NULL);
    if (g2)
        CHECK_EQ(gdr_close(g2), 0);
    CHECK_EQ(gdr_close(g), 0);
    return check_done("dmabuf_test selected");
}

static int scenario_refused(void)
{
    gdr_t g = gdr_open();
    CHECK(g == NULL);
    if (g)
        gdr_close(g);
    return check_done("dmabuf_test refused");
}

static void test_round_trip(gdr_t g, unsigned long d)
{
    const size_t size = 256 * 1024;
    gdr_mh_t mh;
    gdr_info_t info;
    void *map = pin_and_map(g, d, size, 0, &mh, &info);
    if (!map)
        return;
    CHECK_EQ(info.va, d);
    CHECK_EQ(info.mapped_size, size);
    CHECK_EQ(info.page_size, page);
    CHECK_EQ(info.mapped, 1);
    int wc = !sim_coherent();
    CHECK_EQ(info.wc_mapping, wc);
    CHECK_EQ(info.mapping_type, wc ? GDR_MAPPING_TYPE_WC : GDR_MAPPING_TYPE_CACHING);

    unsigned char *h = malloc(size), *back = malloc(size);
    CHECK(h != NULL && back != NULL);
    if (!h || !back) {
        free(h);
        free(back);
        return;
    }
    for (size_t i = 0; i < size; i++)
        h[i] = (unsigned char)(i * 7 + 3);

    /* Host -> mapping, read back through CUDA. */
    CHECK_EQ(gdr_copy_to_mapping(mh, map, h, size), 0);
    memset(back, 0, size);
    CHECK_EQ(cuMemcpyDtoH(back, d, size), CUDA_SUCCESS);
    CHECK(memcmp(h, back, size) == 0);

    /* CUDA -> device memory, read through the mapping. */
    for (size_t i = 0; i < size; i++)
        h[i] = (unsigned char)(i * 13 + 1);
    CHECK_EQ(cuMemcpyHtoD(d, h, size), CUDA_SUCCESS);
    memset(back, 0, size);
    CHECK_EQ(gdr_copy_from_mapping(mh, back, map, size), 0);
    CHECK(memcmp(h, back, size) == 0);

    /* A plain store through the pointer is device memory too. */
    ((volatile uint32_t *)map)[10] = 0xdeadbeef;
    uint32_t word = 0;
    CHECK_EQ(cuMemcpyDtoH(&word, d + 40, 4), CUDA_SUCCESS);
    CHECK_EQ(word, 0xdeadbeef);

    /* The legacy gdr_get_info reports the same range (upstream: EBADF). */
    info_v1_t v1;
    memset(&v1, 0xff, sizeof v1);
    CHECK_EQ(gdr_get_info(g, mh, &v1), 0);
    CHECK_EQ(v1.va, d);
    CHECK_EQ(v1.mapped_size, size);
    CHECK_EQ(v1.page_size, page);
    CHECK_EQ(v1.mapped, 1);
    CHECK_EQ(v1.wc_mapping, wc);

    int flag = -1;
    CHECK_EQ(gdr_get_callback_flag(g, mh, &flag), 0);
    CHECK_EQ(flag, 0);

    /* Already mapped: EAGAIN. Other types than the pin's: EINVAL. */
    void *again = NULL;
    CHECK_EQ(gdr_map(g, mh, &again, size), EAGAIN);
    CHECK_EQ(gdr_unmap(g, mh, map, info.mapped_size), 0);
    CHECK_EQ(gdr_get_info_v2(g, mh, &info), 0);
    CHECK_EQ(info.mapped, 0);
    CHECK_EQ(info.mapping_type, GDR_MAPPING_TYPE_NONE);
    CHECK_EQ(gdr_map_v2(g, mh, &again, size, GDR_MAP_FLAG_REQ_DEVICE_MAPPING), EINVAL);
    CHECK_EQ(gdr_map_v2(g, mh, &again, size,
                        wc ? GDR_MAP_FLAG_REQ_CACHE_MAPPING : GDR_MAP_FLAG_REQ_WC_MAPPING),
             EINVAL);
    CHECK_EQ(gdr_map_v2(g, mh, &again, size,
                        wc ? GDR_MAP_FLAG_REQ_WC_MAPPING : GDR_MAP_FLAG_REQ_CACHE_MAPPING),
             0);
    CHECK_EQ(gdr_unmap(g, mh, again, size), 0);
    CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
    free(h);
    free(back);
}

static void test_force_pcie(gdr_t g, unsigned long d)
{
    gdr_mh_t mh;
    gdr_info_t info;
    void *map = pin_and_map(g, d, 64 * 1024, GDR_PIN_FLAG_FORCE_PCIE, &mh, &info);
    if (!map)
        return;
    CHECK_EQ(info.mapping_type, GDR_MAPPING_TYPE_WC);
    CHECK_EQ(info.wc_mapping, 1);
    CHECK_EQ(gdr_unmap(g, mh, map, info.mapped_size), 0);
    CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
}

/*
 * As with upstream's DMA-BUF backend (and gdrdrv): a pin whose address is not page
 * aligned pins, reports the page-aligned range, but does not map (EINVAL, *ptr_va
 * untouched, nothing left behind); NVIDIA's sanity (basic_unaligned_mapping,
 * basic_small_buffers_mapping) asserts the refusal. Page-aligned pins inside a GPU page
 * map, as upstream's DMA-BUF backend maps them.
 */
static void test_unaligned(gdr_t g, unsigned long d)
{
    static const unsigned long offsets[] = {8, 100, 4096 + 100, 2 * 4096 - 1, 64 * 1024 + 12};
    for (size_t k = 0; k < sizeof offsets / sizeof offsets[0]; k++) {
        unsigned long addr = d + offsets[k];
        const size_t size = 5000;
        gdr_mh_t mh;
        gdr_info_t info;
        void *map = (void *)0x1;
        uint64_t before = live_dmabufs();
        CHECK_EQ(gdr_pin_buffer_v2(g, addr, size, 0, &mh), 0);
        CHECK_EQ(gdr_get_info_v2(g, mh, &info), 0);
        unsigned long off = addr - info.va;
        CHECK_EQ(info.va, addr & ~(page - 1));
        CHECK_EQ(off, addr % page);
        CHECK_EQ(info.mapped_size, (off + size + page - 1) & ~(page - 1));
        CHECK_EQ(gdr_map(g, mh, &map, size), EINVAL);
        CHECK(map == (void *)0x1);
        CHECK_EQ(gdr_get_info_v2(g, mh, &info), 0);
        CHECK_EQ(info.mapped, 0);
        CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
        CHECK_EQ(live_dmabufs(), before);
    }

    /* Two small buffers in one page: the first maps, the second does not. */
    {
        gdr_mh_t a, b;
        void *pa = NULL, *pb = NULL;
        CHECK_EQ(gdr_pin_buffer_v2(g, d, 8, 0, &a), 0);
        CHECK_EQ(gdr_pin_buffer_v2(g, d + 8, 8, 0, &b), 0);
        CHECK_EQ(gdr_map(g, a, &pa, 8), 0);
        CHECK(gdr_map(g, b, &pb, 8) != 0);
        CHECK_EQ(gdr_unmap(g, a, pa, 8), 0);
        CHECK_EQ(gdr_unpin_buffer(g, a), 0);
        CHECK_EQ(gdr_unpin_buffer(g, b), 0);
    }

    static const unsigned long aligned[] = {4096, 64 * 1024 - 4096};
    for (size_t k = 0; k < sizeof aligned / sizeof aligned[0]; k++) {
        unsigned long addr = d + aligned[k];
        const size_t size = 5000;
        gdr_mh_t mh;
        gdr_info_t info;
        void *map = pin_and_map(g, addr, size, 0, &mh, &info);
        if (!map)
            continue;
        CHECK_EQ(info.va, addr);
        unsigned char msg[5000], back[5000];
        for (size_t i = 0; i < size; i++)
            msg[i] = (unsigned char)(i ^ k ^ 0x5a);
        CHECK_EQ(gdr_copy_to_mapping(mh, map, msg, size), 0);
        memset(back, 0, size);
        CHECK_EQ(cuMemcpyDtoH(back, addr, size), CUDA_SUCCESS);
        CHECK(memcmp(msg, back, size) == 0);
        CHECK_EQ(gdr_unmap(g, mh, map, info.mapped_size), 0);
        CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
    }
}

static void test_injected_failures(gdr_t g, unsigned long d)
{
    gdr_mh_t mh;
    uint64_t before = live_dmabufs();

    /* CUresults come back as errno values, never raw. */
    static const struct {
        const char *spec;
        int errno_;
    } cases[] = {
        {"cuMemGetHandleForAddressRange:1:801", ENOTSUP}, /* NOT_SUPPORTED */
        {"cuMemGetHandleForAddressRange:1:1", EINVAL},    /* INVALID_VALUE (raw 1 = EPERM) */
        {"cuMemGetHandleForAddressRange:1:2", ENOMEM},    /* OUT_OF_MEMORY */
        {"cuPointerGetAttribute:1:1", EINVAL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        memset(&mh, 0, sizeof mh);
        CHECK_EQ(gdrsim_set_fail(cases[k].spec), 0);
        CHECK_EQ(gdr_pin_buffer_v2(g, d, 65536, 0, &mh), cases[k].errno_);
        CHECK_EQ(mh.h, 0);
        CHECK_EQ(live_dmabufs(), before);
    }
    gdrsim_set_fail("");

    /* The next pin works; a failing mmap leaves the handle unmapped and mappable. */
    CHECK_EQ(gdr_pin_buffer_v2(g, d, 65536, 0, &mh), 0);
    CHECK_EQ(live_dmabufs(), before + 1);
    void *map = NULL;
    CHECK_EQ(gdrsim_set_fail("mmap:1:ENOMEM"), 0);
    CHECK_EQ(gdr_map(g, mh, &map, 65536), ENOMEM);
    /* The kernel-internal ENOTSUPP (524) of an exporter without mmap becomes ENOTSUP. */
    CHECK_EQ(gdrsim_set_fail("mmap:1:524"), 0);
    CHECK_EQ(gdr_map(g, mh, &map, 65536), ENOTSUP);
    gdrsim_set_fail("");
    gdr_info_t info;
    CHECK_EQ(gdr_get_info_v2(g, mh, &info), 0);
    CHECK_EQ(info.mapped, 0);
    CHECK_EQ(gdr_map(g, mh, &map, 65536), 0);
    CHECK_EQ(gdr_unmap(g, mh, map, 65536), 0);
    CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
    CHECK_EQ(live_dmabufs(), before);
}

struct thread_arg {
    gdr_t g;
    unsigned long d;
    int ok;
    CUcontext after;
};

static void *pin_on_fresh_thread(void *p)
{
    struct thread_arg *a = p;
    gdr_mh_t mh;
    gdr_info_t info;
    void *map = pin_and_map(a->g, a->d, 65536, 0, &mh, &info);
    a->ok = map != NULL;
    if (map) {
        ((volatile char *)map)[0] = 'T';
        CHECK_EQ(gdr_unmap(a->g, mh, map, info.mapped_size), 0);
        CHECK_EQ(gdr_unpin_buffer(a->g, mh), 0);
    }
    a->after = (CUcontext)1;
    cuCtxGetCurrent(&a->after);
    return NULL;
}

static void test_context_left_alone(gdr_t g, unsigned long d)
{
    CUcontext mine = NULL, now = NULL;
    CHECK_EQ(cuCtxGetCurrent(&mine), CUDA_SUCCESS);
    CHECK(mine != NULL);
    gdr_mh_t mh;

    /* With a current context: used as is, still current afterwards. */
    CHECK_EQ(gdr_pin_buffer_v2(g, d, 65536, 0, &mh), 0);
    CHECK_EQ(cuCtxGetCurrent(&now), CUDA_SUCCESS);
    CHECK(now == mine);
    CHECK_EQ(gdr_unpin_buffer(g, mh), 0);

    /* Without one: the pin works and the thread still has none afterwards. */
    CHECK_EQ(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(gdr_pin_buffer_v2(g, d, 65536, 0, &mh), 0);
        now = (CUcontext)1;
        CHECK_EQ(cuCtxGetCurrent(&now), CUDA_SUCCESS);
        CHECK(now == NULL);
        CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
    }
    CHECK_EQ(cuCtxSetCurrent(mine), CUDA_SUCCESS);

    /* A thread that never touched CUDA. */
    struct thread_arg a = {g, d, 0, NULL};
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, pin_on_fresh_thread, &a), 0);
    pthread_join(t, NULL);
    CHECK(a.ok);
    CHECK(a.after == NULL);
    char c = 0;
    CHECK_EQ(cuMemcpyDtoH(&c, d, 1), CUDA_SUCCESS);
    CHECK_EQ(c, 'T');
}

struct worker {
    gdr_t g;
    unsigned long d;
    int id;
    int errors;
};

/* Pin, map, write through the mapping, read back with CUDA, unmap, unpin, many times. */
static void *worker_loop(void *p)
{
    struct worker *w = p;
    for (int i = 0; i < 50; i++) {
        gdr_mh_t mh;
        memset(&mh, 0, sizeof mh);
        void *map = NULL;
        uint64_t want = ((uint64_t)w->id << 32) | (uint64_t)i, got = 0;
        if (gdr_pin_buffer_v2(w->g, w->d, 65536, 0, &mh) != 0 || gdr_map(w->g, mh, &map, 65536) != 0) {
            w->errors++;
            continue;
        }
        if (gdr_copy_to_mapping(mh, map, &want, 8) != 0 || cuMemcpyDtoH(&got, w->d, 8) != CUDA_SUCCESS ||
            got != want)
            w->errors++;
        if (gdr_unmap(w->g, mh, map, 65536) != 0 || gdr_unpin_buffer(w->g, mh) != 0)
            w->errors++;
    }
    return NULL;
}

/* Several threads on one gdr_t, each on its own buffer (threads without a CUDA context). */
static void test_threads(gdr_t g, unsigned long d)
{
    enum { N = 4 };
    struct worker w[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        w[i] = (struct worker){g, d + (unsigned long)i * 65536, i, 0};
        CHECK_EQ(pthread_create(&t[i], NULL, worker_loop, &w[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ(w[i].errors, 0);
    }
    CHECK_EQ(live_dmabufs(), 0);
}

static int scenario_api(void)
{
    page = (unsigned long)sysconf(_SC_PAGESIZE);
    gpu_init();
    CUdeviceptr raw = gpu_alloc(4 * MIB);
    unsigned long d = gpu_aligned(raw);

    REQUIRE(live_dmabufs() == 0);
    gdr_t g = gdr_open();
    REQUIRE(g != NULL);
    REQUIRE(attribute_value(g, GDR_ATTR_USING_DMA_BUF_MMAP) == 1);

    test_round_trip(g, d);
    test_force_pcie(g, d + MIB);
    test_unaligned(g, d + 2 * MIB);
    test_injected_failures(g, d);
    test_context_left_alone(g, d);
    CHECK_EQ(live_dmabufs(), 0);
    test_threads(g, d);

    /* gdr_close releases what is still pinned and mapped. */
    gdr_mh_t mh[3];
    void *map = NULL;
    for (int i = 0; i < 3; i++)
        CHECK_EQ(gdr_pin_buffer_v2(g, d + (unsigned long)i * MIB, 65536, 0, &mh[i]), 0);
    CHECK_EQ(gdr_map(g, mh[1], &map, 65536), 0);
    CHECK_EQ(live_dmabufs(), 3);
    CHECK_EQ(gdr_close(g), 0);
    CHECK_EQ(live_dmabufs(), 0);

    /* And a second session in the same process starts clean. */
    g = gdr_open();
    CHECK(g != NULL);
    if (g) {
        CHECK_EQ(gdr_pin_buffer_v2(g, d, 65536, 0, &mh[0]), 0);
        CHECK_EQ(gdr_unpin_buffer(g, mh[0]), 0);
        CHECK_EQ(gdr_close(g), 0);
    }
    CHECK_EQ(live_dmabufs(), 0);
    cuMemFree(raw);
    return check_done("dmabuf_test api");
}

int main(int argc, char **argv)
{
    const char *s = argc > 1 ? argv[1] : "";
    if (strcmp(s, "gdrdrv") == 0)
        return scenario_gdrdrv();
    if (strcmp(s, "selected") == 0)
        return scenario_selected();
    if (strcmp(s, "refused") == 0)
        return scenario_refused();
    if (strcmp(s, "api") == 0)
        return scenario_api();
    fprintf(stderr, "usage: %s gdrdrv|selected|refused|api\n", argv[0]);
    return 2;
}
