/*
 * nccl_pattern - NCCL's use of gdrcopy, on memory allocated the way NCCL's cuMem allocator
 * allocates it: the Vulkan-import backend's real consumer.
 *
 * Allocation (NCCL's ncclCuMemAlloc): cuMemCreate with requestedHandleTypes =
 * CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR and gpuDirectRDMACapable, the size rounded to the
 * recommended granularity, cuMemAddressReserve, cuMemMap, cuMemSetAccess. Each gdrcopy buffer
 * (ncclGdrCudaCalloc) is carved at an offset of such an allocation, with 64 KiB of slack so that
 * its 64 KiB aligned start can be pinned.
 *
 * The gdrcopy sequence (NCCL's gdrwrap): dlopen("libgdrapi.so", RTLD_NOW); the required symbols
 * by dlsym (gdr_pin_buffer_v2 optional); gdr_open once; gdr_runtime_get_version and
 * gdr_driver_get_version (its out-parameters read whatever it returns; both >= 2.1); per buffer
 * the v2 pin (runtime >= 2.5) of the aligned start, gdr_map of the size, the legacy v1
 * gdr_get_info (the 40-byte struct), the CPU pointer = map + (info.va - aligned start) + the
 * buffer's offset in its page; every call under one global mutex. Then what NCCL does with the
 * buffers: the proxy's head/tail words written with plain stores and an sfence, the work FIFO
 * filled with gdr_copy_to_mapping, a flush read of 8 bytes with gdr_copy_from_mapping, a raw
 * load of a flag; the GPU's view checked with cuMemcpyDtoH, and a GPU write seen by the CPU.
 * Teardown: gdr_unmap, gdr_unpin_buffer, free, gdr_close.
 *
 * Needs GDRAPI_USE_VULKAN=1 where neither gdrdrv nor DMA-BUF mmap serves. Prints
 * "N passed, N failed".
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

#define GPU_PAGE 0x10000UL

/* NCCL's own 2.1-era declarations: an opaque gdr_t, the handle struct, the v1 info. */
typedef struct gdr *gdr_t;
typedef struct {
    unsigned long h;
} gdr_mh_t;
typedef struct {
    uint64_t va;
    uint64_t mapped_size;
    uint32_t page_size;
    uint64_t tm_cycles;
    uint32_t cycles_per_ms;
    unsigned mapped : 1;
    unsigned wc_mapping : 1;
} gdr_info_v1_t;

static struct {
    gdr_t (*open)(void);
    int (*close)(gdr_t);
    int (*pin)(gdr_t, unsigned long, size_t, uint64_t, uint32_t, gdr_mh_t *);
    int (*pin_v2)(gdr_t, unsigned long, size_t, uint32_t, gdr_mh_t *);
    int (*unpin)(gdr_t, gdr_mh_t);
    int (*get_info)(gdr_t, gdr_mh_t, gdr_info_v1_t *);
    int (*map)(gdr_t, gdr_mh_t, void **, size_t);
    int (*unmap)(gdr_t, gdr_mh_t, void *, size_t);
    void (*runtime_version)(int *, int *);
    void (*driver_version)(gdr_t, int *, int *); /* NCCL declares it void */
    int (*copy_to)(gdr_mh_t, void *, const void *, size_t);
    int (*copy_from)(gdr_mh_t, void *, const void *, size_t);
} gdr;

/* NCCL's wc_store_fence: sfence on x86, a full barrier elsewhere. */
static inline void store_fence(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_sfence();
#else
    __sync_synchronize();
#endif
}

static pthread_mutex_t gdr_lock = PTHREAD_MUTEX_INITIALIZER;
#define LOCKED(call)                                                                       \
    ({                                                                                     \
        pthread_mutex_lock(&gdr_lock);                                                     \
        __typeof__(call) r_ = (call);                                                      \
        pthread_mutex_unlock(&gdr_lock);                                                   \
        r_;                                                                                \
    })

static int load(void)
{
    void *lib = dlopen("libgdrapi.so", RTLD_NOW);
    if (!lib) {
        printf("dlopen(libgdrapi.so): %s\n", dlerror());
        return 0;
    }
#define SYM(field, name)                                                                   \
    do {                                                                                   \
        *(void **)&gdr.field = dlsym(lib, name);                                           \
        if (!gdr.field) {                                                                  \
            printf("missing %s\n", name);                                                  \
            return 0;                                                                      \
        }                                                                                  \
    } while (0)
    SYM(open, "gdr_open");
    SYM(close, "gdr_close");
    SYM(pin, "gdr_pin_buffer");
    SYM(unpin, "gdr_unpin_buffer");
    SYM(get_info, "gdr_get_info");
    SYM(map, "gdr_map");
    SYM(unmap, "gdr_unmap");
    SYM(runtime_version, "gdr_runtime_get_version");
    SYM(driver_version, "gdr_driver_get_version");
    SYM(copy_to, "gdr_copy_to_mapping");
    SYM(copy_from, "gdr_copy_from_mapping");
#undef SYM
    *(void **)&gdr.pin_v2 = dlsym(lib, "gdr_pin_buffer_v2");
    return 1;
}

/* One allocation of NCCL's cuMem allocator. */
struct cumem {
    CUdeviceptr va;
    size_t size;
    CUmemGenericAllocationHandle handle;
};

static CUresult cumem_alloc(struct cumem *m, size_t want)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.allocFlags.gpuDirectRDMACapable = 1;
    size_t gran = 0;
    CUresult r = cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    if (r != CUDA_SUCCESS)
        return r;
    m->size = (want + gran - 1) / gran * gran;
    if ((r = cuMemCreate(&m->handle, m->size, &prop, 0)) != CUDA_SUCCESS)
        return r;
    if ((r = cuMemAddressReserve(&m->va, m->size, gran, 0, 0)) != CUDA_SUCCESS)
        return r;
    if ((r = cuMemMap(m->va, m->size, 0, m->handle, 0)) != CUDA_SUCCESS)
        return r;
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return cuMemSetAccess(m->va, m->size, &acc, 1);
}

static void cumem_free(struct cumem *m)
{
    CHECK_EQ(cuMemUnmap(m->va, m->size), CUDA_SUCCESS);
    CHECK_EQ(cuMemRelease(m->handle), CUDA_SUCCESS);
    CHECK_EQ(cuMemAddressFree(m->va, m->size), CUDA_SUCCESS);
}

/* ncclGdrCudaCalloc's bookkeeping for one buffer. */
struct gdr_buf {
    CUdeviceptr dev;  /* the buffer's device address */
    void *cpu;        /* the CPU's view of dev */
    gdr_mh_t mh;
    void *map;
    size_t map_size;
};

static int runtime_major, runtime_minor;

/* Carves `size` bytes at `offset` of m (64 KiB of slack after it) and maps them as NCCL does. */
static int gdr_calloc(gdr_t g, struct cumem *m, size_t offset, size_t size, struct gdr_buf *b)
{
    size_t mapped = (size + GPU_PAGE - 1) & ~(GPU_PAGE - 1);
    CUdeviceptr dev = m->va + offset;
    CUdeviceptr aligned = (dev + GPU_PAGE - 1) & ~(GPU_PAGE - 1);
    CHECK(aligned + mapped <= m->va + m->size);
    CHECK_EQ(cuMemsetD8(dev, 0, size + GPU_PAGE), CUDA_SUCCESS);
    CHECK_EQ(cuCtxSynchronize(), CUDA_SUCCESS); /* the memset runs asynchronously */
    memset(&b->mh, 0, sizeof b->mh);
    int r;
    if (gdr.pin_v2 && (runtime_major > 2 || (runtime_major == 2 && runtime_minor >= 5)))
        r = LOCKED(gdr.pin_v2(g, aligned, mapped, 0, &b->mh));
    else
        r = LOCKED(gdr.pin(g, aligned, mapped, 0, 0, &b->mh));
    CHECK_EQ(r, 0);
    if (r)
        return 0;
    b->map = NULL;
    r = LOCKED(gdr.map(g, b->mh, &b->map, mapped));
    CHECK_EQ(r, 0);
    if (r)
        return 0;
    gdr_info_v1_t info;
    memset(&info, 0, sizeof info);
    CHECK_EQ(LOCKED(gdr.get_info(g, b->mh, &info)), 0);
    CHECK_EQ(info.va, aligned);
    CHECK(info.mapped_size >= mapped);
    CHECK_EQ(info.mapped, 1);
    /* The CPU's view of `aligned`, as NCCL computes it. */
    b->cpu = (char *)b->map + (info.va - aligned);
    b->dev = aligned;
    b->map_size = mapped;
    return 1;
}

static void gdr_free(gdr_t g, struct gdr_buf *b)
{
    CHECK_EQ(LOCKED(gdr.unmap(g, b->mh, b->map, b->map_size)), 0);
    CHECK_EQ(LOCKED(gdr.unpin(g, b->mh)), 0);
}

int main(void)
{
    REQUIRE(load());
    CUdevice dev;
    CUcontext ctx;
    REQUIRE(cuInit(0) == CUDA_SUCCESS);
    REQUIRE(cuDeviceGet(&dev, 0) == CUDA_SUCCESS);
    REQUIRE(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
    REQUIRE(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);

    /* Init, once per process. */
    gdr_t g = gdr.open();
    REQUIRE(g != NULL);
    gdr.runtime_version(&runtime_major, &runtime_minor);
    int drv_major = 0, drv_minor = 0;
    gdr.driver_version(g, &drv_major, &drv_minor);
    printf("gdrcopy runtime %d.%d, driver %d.%d\n", runtime_major, runtime_minor, drv_major,
           drv_minor);
    CHECK(runtime_major > 2 || (runtime_major == 2 && runtime_minor >= 1));
    CHECK(drv_major > 2 || (drv_major == 2 && drv_minor >= 1));

    /* One cuMem allocation holding the proxy's head/tail words, a flush word and the work
     * FIFO, each at an offset that is not 64 KiB aligned. */
    struct cumem m;
    REQUIRE(cumem_alloc(&m, 4 << 20) == CUDA_SUCCESS);
    struct gdr_buf head, flush, fifo;
    REQUIRE(gdr_calloc(g, &m, 3 * GPU_PAGE + 256, 64, &head));
    REQUIRE(gdr_calloc(g, &m, 7 * GPU_PAGE + 64, 8, &flush));
    REQUIRE(gdr_calloc(g, &m, 12 * GPU_PAGE + 4096, 512 * 1024, &fifo));

    /* The proxy publishes a step with a plain store and an sfence; the GPU sees it. */
    for (uint64_t step = 1; step <= 100; step++) {
        *(volatile uint64_t *)head.cpu = step;
        store_fence();
    }
    uint64_t seen = 0;
    CHECK_EQ(cuMemcpyDtoH(&seen, head.dev, 8), CUDA_SUCCESS);
    CHECK_EQ(seen, 100);

    /* Work FIFO entries go in with gdr_copy_to_mapping. */
    unsigned char entry[64], back[64];
    for (int slot = 0; slot < 1024; slot++) {
        for (int i = 0; i < 64; i++)
            entry[i] = (unsigned char)(slot * 3 + i);
        size_t off = (size_t)slot * 64 % (512 * 1024);
        CHECK_EQ(LOCKED(gdr.copy_to(fifo.mh, (char *)fifo.cpu + off, entry, 64)), 0);
    }
    CHECK_EQ(cuMemcpyDtoH(back, fifo.dev + 1023 * 64, 64), CUDA_SUCCESS);
    for (int i = 0; i < 64; i++)
        entry[i] = (unsigned char)(1023 * 3 + i);
    CHECK(memcmp(entry, back, 64) == 0);

    /* The GPU writes the flush word; the CPU reads it with gdr_copy_from_mapping (NCCL's
     * PCIe-flushing read) and with a raw load. */
    uint64_t word = 0x0123456789abcdefULL, got = 0;
    CHECK_EQ(cuMemcpyHtoD(flush.dev, &word, 8), CUDA_SUCCESS);
    CHECK_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK_EQ(LOCKED(gdr.copy_from(flush.mh, &got, flush.cpu, 8)), 0);
    CHECK_EQ(got, word);
    CHECK_EQ(*(volatile uint64_t *)flush.cpu, word);

    gdr_free(g, &fifo);
    gdr_free(g, &flush);
    gdr_free(g, &head);
    cumem_free(&m);
    CHECK_EQ(gdr.close(g), 0);
    return check_done("nccl_pattern");
}
