/*
 * vulkan_test - the Vulkan-import backend through the public C API, on the emulator's Vulkan
 * stand-in or on a real GPU (no emulator: `make test-gpu`).
 *
 * One scenario per run (argv[1]); run.sh sets the environment for each:
 *   selected  gdr_open picks the Vulkan import: attributes, versions, struct gdr
 *   refused   gdr_open returns NULL (run.sh checks the log line naming the cause)
 *   open      gdr_open succeeds (with whichever backend; run.sh checks which from the log)
 *   api       on memory from gpu_vmm_alloc() (cuMemCreate with the POSIX-fd handle type):
 *             gdr_get_info fields, data both ways through copies and plain stores, second map,
 *             mapping types, short maps, unaligned and small pins (pin, do not map), pins
 *             inside a larger allocation, memory the backend cannot map (cuMemAlloc, VMM
 *             without the fd type, host memory, a pin past its allocation) refused with EINVAL,
 *             threads sharing one gdr_t, gdr_close of mapped handles
 *   lifetime  CUDA unmaps and releases an allocation while it is pinned and mapped: copies
 *             through the mapping neither fault nor change, and the memory is freed at the
 *             unpin, made with no context current (cuMemGetInfo before and after; on the
 *             emulator also its counters)
 *   faults    (emulator) injected CUDA and Vulkan failures come back as errno values, and
 *             leave nothing behind
 * On the emulator, every scenario ends with no import, mapping, export or pin left (counters);
 * on a GPU, the counters are not there and cuMemGetInfo stands in.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
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

#define KIB (1UL << 10)
#define MIB (1UL << 20)
#define GPU_PAGE (64 * KIB)

/* The emulator's test interface, when the emulator is the CUDA driver (NULL on a GPU). */
static int (*sim_counters)(struct gdrsim_counters *, size_t);
static int (*sim_set_fail)(const char *);

static void find_emulator(void)
{
    sim_counters = (int (*)(struct gdrsim_counters *, size_t))(uintptr_t)dlsym(
        RTLD_DEFAULT, "gdrsim_get_counters");
    sim_set_fail = (int (*)(const char *))(uintptr_t)dlsym(RTLD_DEFAULT, "gdrsim_set_fail");
}

/* Imports, mappings, exports and pins the emulator still counts; 0 on a GPU. With `all`, also
 * Vulkan devices and instances (a session makes its device at its first pin, so they are
 * counted only where no session is open). */
static uint64_t counted(int all)
{
    struct gdrsim_counters c;
    if (!sim_counters)
        return 0;
    memset(&c, 0, sizeof c);
    if (sim_counters(&c, sizeof c) != 0)
        return (uint64_t)-1;
    uint64_t n = c.live_vk_imports + c.live_vk_mappings + c.live_vmm_exports + c.live_pins +
                 c.live_dmabufs;
    return all ? n + c.live_vk_devices + c.live_vk_instances : n;
}

static uint64_t left_behind(void)
{
    return counted(0);
}

/* Everything a closed session must have released: 0 with no session open. */
static uint64_t left_after_close(void)
{
    return counted(1);
}

static size_t free_vram(void)
{
    size_t f = 0, t = 0;
    CHECK_EQ(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    return f;
}

static int scenario_selected(void)
{
    gdr_t g = gdr_open();
    REQUIRE(g != NULL);
    CHECK_EQ(attribute_value(g, GDR_ATTR_USING_DMA_BUF_MMAP), 0);
    CHECK_EQ(attribute_value(g, GDR_ATTR_USE_PERSISTENT_MAPPING), 1);
    CHECK_EQ(attribute_value(g, GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE), 1);
    CHECK_EQ(*(const int *)g, -1); /* struct gdr's fd: no driver node */
    CHECK_EQ(gdr_cache_backend(g), GDR_CACHE_BACKEND_VULKAN);
    int major = -1, minor = -1;
    CHECK_EQ(gdr_driver_get_version(g, &major, &minor), 0);
    CHECK_EQ(major, 2);
    CHECK_EQ(minor, 6);
    /* Two sessions at once. */
    gdr_t g2 = gdr_open();
    CHECK(g2 != NULL);
    if (g2)
        CHECK_EQ(gdr_close(g2), 0);
    CHECK_EQ(gdr_close(g), 0);
    CHECK_EQ(left_after_close(), 0);
    return check_done("vulkan_test selected");
}

static int scenario_refused(void)
{
    gdr_t g = gdr_open();
    CHECK(g == NULL);
    if (g)
        gdr_close(g);
    CHECK_EQ(left_after_close(), 0);
    return check_done("vulkan_test refused");
}

static unsigned char pattern(size_t i, unsigned seed)
{
    return (unsigned char)(i * 131 + seed * 7 + (i >> 9));
}

/* Data both ways through [d, d+size) mapped at map: copies, plain stores, CUDA's view. */
static void round_trip(gdr_mh_t mh, void *map, CUdeviceptr d, size_t size, unsigned seed)
{
    unsigned char *h = malloc(size), *back = malloc(size);
    CHECK(h != NULL && back != NULL);
    if (!h || !back) {
        free(h);
        free(back);
        return;
    }
    for (size_t i = 0; i < size; i++)
        h[i] = pattern(i, seed);
    CHECK_EQ(gdr_copy_to_mapping(mh, map, h, size), 0);
    memset(back, 0, size);
    CHECK_EQ(cuMemcpyDtoH(back, d, size), CUDA_SUCCESS);
    CHECK(memcmp(h, back, size) == 0);

    for (size_t i = 0; i < size; i++)
        h[i] = pattern(i, seed + 1);
    CHECK_EQ(cuMemcpyHtoD(d, h, size), CUDA_SUCCESS);
    /* From pageable memory the copy may still be on its way when cuMemcpyHtoD returns. */
    CHECK_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    memset(back, 0, size);
    CHECK_EQ(gdr_copy_from_mapping(mh, back, map, size), 0);
    CHECK(memcmp(h, back, size) == 0);

    /* A plain store is device memory too, and a device write is seen by a plain load. */
    ((volatile uint32_t *)map)[3] = 0xdeadbeef;
    uint32_t word = 0;
    CHECK_EQ(cuMemcpyDtoH(&word, d + 12, 4), CUDA_SUCCESS);
    CHECK_EQ(word, 0xdeadbeef);
    CHECK_EQ(cuMemsetD32(d + 64, 0xcafef00d, 4), CUDA_SUCCESS);
    CHECK_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK_EQ(((volatile uint32_t *)map)[16], 0xcafef00d);
    free(h);
    free(back);
}

static void test_info_and_data(gdr_t g, CUdeviceptr d)
{
    const size_t size = 4 * MIB;
    gdr_mh_t mh;
    gdr_info_t info;
    void *map = pin_and_map(g, d, size, 0, &mh, &info);
    if (!map)
        return;
    CHECK_EQ(info.va, d);
    CHECK_EQ(info.mapped_size, size);
    CHECK_EQ(info.page_size, GPU_PAGE);
    CHECK_EQ(info.mapped, 1);
    CHECK_EQ(info.wc_mapping, 1);
    CHECK_EQ(info.mapping_type, GDR_MAPPING_TYPE_WC);
    round_trip(mh, map, d, size, 1);

    int flag = -1;
    CHECK_EQ(gdr_get_callback_flag(g, mh, &flag), 0);
    CHECK_EQ(flag, 0);

    /* Already mapped: EAGAIN. Types other than write-combining: EINVAL. */
    void *again = NULL;
    CHECK_EQ(gdr_map(g, mh, &again, size), EAGAIN);
    CHECK_EQ(gdr_unmap(g, mh, map, size), 0);
    CHECK_EQ(gdr_get_info_v2(g, mh, &info), 0);
    CHECK_EQ(info.mapped, 0);
    CHECK_EQ(info.mapping_type, GDR_MAPPING_TYPE_NONE);
    CHECK_EQ(gdr_map_v2(g, mh, &again, size, GDR_MAP_FLAG_REQ_DEVICE_MAPPING), EINVAL);
    CHECK_EQ(gdr_map_v2(g, mh, &again, size, GDR_MAP_FLAG_REQ_CACHE_MAPPING), EINVAL);
    CHECK_EQ(gdr_map_v2(g, mh, &again, size, GDR_MAP_FLAG_REQ_WC_MAPPING), 0);
    CHECK_EQ(gdr_unmap(g, mh, again, size), 0);

    /* A short map maps the first bytes; a copy past them is refused. */
    CHECK_EQ(gdr_map(g, mh, &again, 100 * KIB), 0);
    if (again) {
        unsigned char b[16] = {0};
        CHECK_EQ(gdr_copy_to_mapping(mh, again, b, sizeof b), 0);
        if (OURS())
            CHECK_EQ(gdr_copy_to_mapping(mh, (char *)again + 100 * KIB + 4 * KIB, b, 1), EINVAL);
        CHECK_EQ(gdr_unmap(g, mh, again, 100 * KIB), 0);
    }
    CHECK_EQ(gdr_map(g, mh, &again, size + GPU_PAGE), EINVAL);
    CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
}

/* As gdrdrv: an unaligned pin pins its whole GPU pages but does not map; of two small
 * buffers in one page, the first maps. */
static void test_unaligned(gdr_t g, CUdeviceptr d)
{
    static const unsigned long offsets[] = {8, 100, 4096, GPU_PAGE - 4};
    for (size_t k = 0; k < sizeof offsets / sizeof offsets[0]; k++) {
        unsigned long addr = d + GPU_PAGE + offsets[k];
        gdr_mh_t mh;
        gdr_info_t info;
        void *map = (void *)0x1;
        CHECK_EQ(gdr_pin_buffer_v2(g, addr, 5000, 0, &mh), 0);
        CHECK_EQ(gdr_get_info_v2(g, mh, &info), 0);
        CHECK_EQ(info.va, d + GPU_PAGE);
        CHECK_EQ(info.mapped_size, (offsets[k] + 5000 + GPU_PAGE - 1) & ~(GPU_PAGE - 1));
        CHECK_EQ(gdr_map(g, mh, &map, 5000), EINVAL);
        CHECK(map == (void *)0x1);
        CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
    }
    gdr_mh_t a, b;
    void *pa = NULL, *pb = NULL;
    CHECK_EQ(gdr_pin_buffer_v2(g, d, 8, 0, &a), 0);
    CHECK_EQ(gdr_pin_buffer_v2(g, d + 8, 8, 0, &b), 0);
    CHECK_EQ(gdr_map(g, a, &pa, 8), 0);
    CHECK(gdr_map(g, b, &pb, 8) != 0);
    if (pa) {
        ((volatile uint64_t *)pa)[0] = 0x1122334455667788ULL;
        uint64_t v = 0;
        CHECK_EQ(cuMemcpyDtoH(&v, d, 8), CUDA_SUCCESS);
        CHECK_EQ(v, 0x1122334455667788ULL);
        CHECK_EQ(gdr_unmap(g, a, pa, 8), 0);
    }
    CHECK_EQ(gdr_unpin_buffer(g, a), 0);
    CHECK_EQ(gdr_unpin_buffer(g, b), 0);
}

/* A 64 KiB aligned pin inside a larger allocation maps the bytes at its own offset. */
static void test_inner_pin(gdr_t g, CUdeviceptr d, size_t alloc_size)
{
    static const unsigned long at[] = {GPU_PAGE, MIB, 3 * MIB + 5 * GPU_PAGE};
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
        if (at[k] + 2 * GPU_PAGE > alloc_size)
            continue;
        gdr_mh_t mh;
        gdr_info_t info;
        void *map = pin_and_map(g, d + at[k], 2 * GPU_PAGE, 0, &mh, &info);
        if (!map)
            continue;
        CHECK_EQ(info.va, d + at[k]);
        round_trip(mh, map, d + at[k], 2 * GPU_PAGE, (unsigned)k + 10);
        CHECK_EQ(gdr_unmap(g, mh, map, info.mapped_size), 0);
        CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
    }
    /* Its pages must lie inside the allocation. */
    gdr_mh_t mh;
    memset(&mh, 0, sizeof mh);
    CHECK_EQ(gdr_pin_buffer_v2(g, d + alloc_size - 4 * KIB, 8 * KIB, 0, &mh), EINVAL);
    CHECK_EQ(mh.h, 0);
}

/* Live Vulkan imports on the emulator; -1 on a GPU. */
static long live_imports(void)
{
    struct gdrsim_counters c;
    if (!sim_counters)
        return -1;
    memset(&c, 0, sizeof c);
    return sim_counters(&c, sizeof c) == 0 ? (long)c.live_vk_imports : -2;
}

/* Pins in one allocation share its import: two overlapping pins map the same bytes, and once
 * one is unmapped its bytes fault unless the other still maps them. */
static void test_shared_import(gdr_t g, CUdeviceptr d)
{
    gdr_mh_t a, b;
    gdr_info_t ia, ib;
    unsigned char *pa = pin_and_map(g, d, 2 * GPU_PAGE, 0, &a, &ia);
    unsigned char *pb = pin_and_map(g, d + GPU_PAGE, 2 * GPU_PAGE, 0, &b, &ib);
    if (!pa || !pb)
        return;
    if (sim_counters)
        CHECK_EQ(live_imports(), 1);
    uint64_t v = 0x0123456789abcdefULL, back = 0;
    CHECK_EQ(gdr_copy_to_mapping(b, pb, &v, sizeof v), 0);
    CHECK_EQ(gdr_copy_from_mapping(a, &back, pa + GPU_PAGE, sizeof back), 0);
    CHECK_EQ(back, v);
    CHECK_EQ(gdr_unmap(g, a, pa, ia.mapped_size), 0);
    CHECK(check_read_faults(pa) != 0);
    CHECK(check_read_faults(pa + GPU_PAGE - 1) != 0);
    CHECK_EQ(check_read_faults(pb), 0);
    CHECK_EQ(check_read_faults(pb + 2 * GPU_PAGE - 1), 0);
    back = 0;
    CHECK_EQ(gdr_copy_from_mapping(b, &back, pb, sizeof back), 0);
    CHECK_EQ(back, v);
    /* Mapped again, a sees the same bytes. */
    CHECK_EQ(gdr_map(g, a, (void **)&pa, ia.mapped_size), 0);
    back = 0;
    CHECK_EQ(gdr_copy_from_mapping(a, &back, pa + GPU_PAGE, sizeof back), 0);
    CHECK_EQ(back, v);
    CHECK_EQ(gdr_unmap(g, a, pa, ia.mapped_size), 0);
    CHECK_EQ(gdr_unmap(g, b, pb, ib.mapped_size), 0);
    CHECK(check_read_faults(pb) != 0);
    CHECK(check_read_faults(pb + 2 * GPU_PAGE - 1) != 0);
    CHECK_EQ(gdr_unpin_buffer(g, a), 0);
    if (sim_counters)
        CHECK_EQ(live_imports(), 1);
    CHECK_EQ(gdr_unpin_buffer(g, b), 0);
    if (sim_counters)
        CHECK_EQ(live_imports(), 0);
}

/* Memory the backend cannot map: EINVAL, nothing pinned or left behind. */
static void test_refused_memory(gdr_t g)
{
    gdr_mh_t mh;
    uint64_t before = left_behind();

    CUdeviceptr plain = 0;
    CHECK_EQ(cuMemAlloc(&plain, 2 * GPU_PAGE), CUDA_SUCCESS);
    memset(&mh, 0, sizeof mh);
    CHECK_EQ(gdr_pin_buffer_v2(g, gpu_aligned(plain), GPU_PAGE, 0, &mh), EINVAL);
    CHECK_EQ(mh.h, 0);
    CHECK_EQ(cuMemFree(plain), CUDA_SUCCESS);

    /* VMM memory made without CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR. */
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CHECK_EQ(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
             CUDA_SUCCESS);
    CUmemGenericAllocationHandle h;
    CUdeviceptr va = 0;
    if (gran && cuMemCreate(&h, gran, &prop, 0) == CUDA_SUCCESS) {
        CHECK_EQ(cuMemAddressReserve(&va, gran, gran, 0, 0), CUDA_SUCCESS);
        CHECK_EQ(cuMemMap(va, gran, 0, h, 0), CUDA_SUCCESS);
        CUmemAccessDesc acc;
        memset(&acc, 0, sizeof acc);
        acc.location = prop.location;
        acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        CHECK_EQ(cuMemSetAccess(va, gran, &acc, 1), CUDA_SUCCESS);
        memset(&mh, 0, sizeof mh);
        CHECK_EQ(gdr_pin_buffer_v2(g, va, GPU_PAGE, 0, &mh), EINVAL);
        CHECK_EQ(mh.h, 0);
        CHECK_EQ(cuMemUnmap(va, gran), CUDA_SUCCESS);
        CHECK_EQ(cuMemRelease(h), CUDA_SUCCESS);
        CHECK_EQ(cuMemAddressFree(va, gran), CUDA_SUCCESS);
    } else {
        CHECK(0);
    }

    /* Host memory is no device memory at all. */
    static char host[2 * GPU_PAGE];
    memset(&mh, 0, sizeof mh);
    CHECK_EQ(gdr_pin_buffer_v2(g, (unsigned long)host, GPU_PAGE, 0, &mh), EINVAL);
    CHECK_EQ(left_behind(), before);
}

struct worker {
    gdr_t g;
    CUdeviceptr d;
    int rounds;
    int failures;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < w->rounds; i++) {
        gdr_mh_t mh;
        void *map = NULL;
        uint64_t v = (uint64_t)(uintptr_t)w ^ (uint64_t)i, back = 0;
        if (gdr_pin_buffer_v2(w->g, w->d, GPU_PAGE, 0, &mh) != 0) {
            w->failures++;
            continue;
        }
        if (gdr_map(w->g, mh, &map, GPU_PAGE) == 0) {
            if (gdr_copy_to_mapping(mh, map, &v, 8) != 0 ||
                gdr_copy_from_mapping(mh, &back, map, 8) != 0 || back != v)
                w->failures++;
            if (gdr_unmap(w->g, mh, map, GPU_PAGE) != 0)
                w->failures++;
        } else {
            w->failures++;
        }
        if (gdr_unpin_buffer(w->g, mh) != 0)
            w->failures++;
    }
    return NULL;
}

static void test_threads(gdr_t g, CUdeviceptr d)
{
    enum { N = 4 };
    pthread_t t[N];
    struct worker w[N];
    for (int i = 0; i < N; i++) {
        w[i] = (struct worker){g, d + (unsigned long)i * GPU_PAGE, 50, 0};
        CHECK_EQ(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        CHECK_EQ(pthread_join(t[i], NULL), 0);
        CHECK_EQ(w[i].failures, 0);
    }
}

static int scenario_api(void)
{
    gpu_init();
    CUdeviceptr d = 0;
    const size_t size = 8 * MIB;
    REQUIRE(gpu_vmm_alloc(&d, size) == CUDA_SUCCESS);
    gdr_t g = gdr_open();
    REQUIRE(g != NULL);
    CHECK_EQ(gdr_cache_backend(g), GDR_CACHE_BACKEND_VULKAN);
    test_info_and_data(g, d);
    test_unaligned(g, d);
    test_inner_pin(g, d, size);
    test_shared_import(g, d);
    test_refused_memory(g);
    test_threads(g, d);

    /* gdr_close unmaps and unpins what is left. */
    gdr_mh_t a, b;
    gdr_info_t info;
    void *ma = pin_and_map(g, d, GPU_PAGE, 0, &a, &info);
    CHECK(ma != NULL);
    CHECK_EQ(gdr_pin_buffer_v2(g, d + MIB, GPU_PAGE, 0, &b), 0);
    CHECK_EQ(gdr_close(g), 0);
    CHECK_EQ(left_after_close(), 0);
    CHECK_EQ(gpu_free(d), CUDA_SUCCESS);
    return check_done("vulkan_test api");
}

/* CUDA lets go of a pinned, mapped allocation: the import keeps it until the unpin. */
static int scenario_lifetime(void)
{
    gpu_init();
    const size_t size = 16 * MIB;
    size_t free0 = free_vram();
    CUdeviceptr d = 0;
    REQUIRE(gpu_vmm_alloc(&d, size) == CUDA_SUCCESS);
    gdr_t g = gdr_open();
    REQUIRE(g != NULL);
    gdr_mh_t mh;
    gdr_info_t info;
    void *map = pin_and_map(g, d, size, 0, &mh, &info);
    REQUIRE(map != NULL);
    unsigned char *h = malloc(size), *back = malloc(size);
    REQUIRE(h != NULL && back != NULL);
    for (size_t i = 0; i < size; i++)
        h[i] = pattern(i, 42);
    CHECK_EQ(gdr_copy_to_mapping(mh, map, h, size), 0);

    /* The allocation's last CUDA references go: unmapped, released, unreserved. */
    CHECK_EQ(gpu_free(d), CUDA_SUCCESS);
    size_t free_pinned = free_vram();
    printf("lifetime: free VRAM %zu MiB before the allocation, %zu MiB after CUDA released it "
           "while pinned\n", free0 >> 20, free_pinned >> 20);
    CHECK(free_pinned + size <= free0 + 2 * MIB); /* still held by the import */

    /* Copies through the mapping neither fault nor lose the bytes. */
    memset(back, 0, size);
    CHECK_EQ(gdr_copy_from_mapping(mh, back, map, size), 0);
    CHECK(memcmp(h, back, size) == 0);
    for (size_t i = 0; i < size; i += 4096)
        h[i] ^= 0xff;
    CHECK_EQ(gdr_copy_to_mapping(mh, map, h, size), 0);
    memset(back, 0, size);
    CHECK_EQ(gdr_copy_from_mapping(mh, back, map, size), 0);
    CHECK(memcmp(h, back, size) == 0);

    CHECK_EQ(gdr_unmap(g, mh, map, size), 0);
    /* The unpin gives the allocation back with no CUDA context current on its thread. */
    CUcontext ctx = NULL;
    CHECK_EQ(cuCtxGetCurrent(&ctx), CUDA_SUCCESS);
    CHECK_EQ(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
    CHECK_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    size_t free_after = free_vram();
    printf("lifetime: free VRAM %zu MiB after the unpin\n", free_after >> 20);
    CHECK(free_after >= free_pinned + size); /* freed at the unpin */
    CHECK_EQ(gdr_close(g), 0);
    CHECK_EQ(left_after_close(), 0);
    free(h);
    free(back);
    return check_done("vulkan_test lifetime");
}

/* Each CUDA and Vulkan call of a pin or a map, failed: the errno of the library's tables
 * (src/cuda/result.rs, src/vulkan/mod.rs), no handle, nothing left behind. */
static int scenario_faults(void)
{
    if (!sim_set_fail) {
        printf("skipped: fault injection needs the emulator\n");
        return check_done("vulkan_test faults");
    }
    gpu_init();
    CUdeviceptr d = 0;
    REQUIRE(gpu_vmm_alloc(&d, 2 * MIB) == CUDA_SUCCESS);
    gdr_t g = gdr_open();
    REQUIRE(g != NULL);
    static const struct {
        const char *spec;
        int pin_errno, map_errno;
    } cases[] = {
        {"cuPointerGetAttribute:1:1", EINVAL, 0},
        {"cuMemRetainAllocationHandle:1:1", EINVAL, 0},
        {"cuMemGetAllocationPropertiesFromHandle:1:1", EINVAL, 0},
        {"cuMemGetAddressRange_v2:1:1", EINVAL, 0},
        {"cuMemExportToShareableHandle:1:2", ENOMEM, 0},
        {"cuMemExportToShareableHandle:1:801", ENOTSUP, 0},
        {"vkAllocateMemory:1:-2", ENOMEM, 0},                /* OUT_OF_DEVICE_MEMORY */
        {"vkAllocateMemory:1:-1000072003", EINVAL, 0},       /* INVALID_EXTERNAL_HANDLE */
        {"vkMapMemory:1:-5", 0, ENOMEM},                     /* MEMORY_MAP_FAILED */
        {"vkMapMemory:1:-4", 0, EIO},                        /* DEVICE_LOST */
        {"cuMemRelease:1:1", 0, 0},                          /* a warning only */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        gdr_mh_t mh;
        memset(&mh, 0, sizeof mh);
        uint64_t before = left_behind();
        CHECK_EQ(sim_set_fail(cases[k].spec), 0);
        int r = gdr_pin_buffer_v2(g, d, GPU_PAGE, 0, &mh);
        if (r != cases[k].pin_errno)
            printf("  with %s\n", cases[k].spec);
        CHECK_EQ(r, cases[k].pin_errno);
        if (r == 0) {
            void *map = NULL;
            int m = gdr_map(g, mh, &map, GPU_PAGE);
            if (m != cases[k].map_errno)
                printf("  with %s\n", cases[k].spec);
            CHECK_EQ(m, cases[k].map_errno);
            if (m == 0)
                CHECK_EQ(gdr_unmap(g, mh, map, GPU_PAGE), 0);
            /* The handle stays usable after a failed map. */
            sim_set_fail("");
            CHECK_EQ(gdr_map(g, mh, &map, GPU_PAGE), 0);
            if (map)
                CHECK_EQ(gdr_unmap(g, mh, map, GPU_PAGE), 0);
            CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
        } else {
            CHECK_EQ(mh.h, 0);
        }
        sim_set_fail("");
        CHECK_EQ(left_behind(), before);
    }
    CHECK_EQ(gdr_close(g), 0);
    CHECK_EQ(left_after_close(), 0);
    CHECK_EQ(gpu_free(d), CUDA_SUCCESS);
    return check_done("vulkan_test faults");
}

int main(int argc, char **argv)
{
    find_emulator();
    const char *s = argc > 1 ? argv[1] : "";
    if (strcmp(s, "selected") == 0)
        return scenario_selected();
    if (strcmp(s, "refused") == 0)
        return scenario_refused();
    if (strcmp(s, "open") == 0) {
        gdr_t g = gdr_open();
        REQUIRE(g != NULL);
        printf("opened: cache_backend %u\n", gdr_cache_backend(g));
        CHECK_EQ(gdr_close(g), 0);
        return check_done("vulkan_test open");
    }
    if (strcmp(s, "api") == 0)
        return scenario_api();
    if (strcmp(s, "lifetime") == 0)
        return scenario_lifetime();
    if (strcmp(s, "faults") == 0)
        return scenario_faults();
    fprintf(stderr, "usage: %s selected|refused|open|api|lifetime|faults\n", argv[0]);
    return 2;
}
