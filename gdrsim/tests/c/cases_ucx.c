/* What UCX needs from the driver: patchable entry points, the functions its CUDA transports
 * link, pointer queries on any pointer, 2 MiB backing chunks, device mappings made through
 * syscall(SYS_mmap), and device memory named like the driver's in /proc/self/maps. */
#include "sim.h"

#include <stdarg.h>
#include <string.h>

/* Whether the function starts with at least 12 bytes of the prologue instructions a hooking
 * library relocates: push reg, push r8..r15, mov %rsp,%rbp, sub $imm32,%rsp. UCX's bistro
 * hooks overwrite 5 bytes when the hook lies within 2 GiB of the function and 12 otherwise
 * (as with a Vulkan and a CUDA driver loaded in between); one function they cannot patch
 * costs UCX all its CUDA memory hooks and with them the gdr_copy registration cache. */
static int patchable(const unsigned char *c)
{
    size_t at = 0;
    while (at < 12) {
        if (c[at] >= 0x50 && c[at] <= 0x57) {
            at += 1;
        } else if (c[at] == 0x41 && c[at + 1] >= 0x50 && c[at + 1] <= 0x57) {
            at += 2;
        } else if (c[at] == 0x48 && c[at + 1] == 0x89 && c[at + 2] == 0xe5) {
            at += 3;
        } else if (c[at] == 0x48 && c[at + 1] == 0x81 && c[at + 2] == 0xec) {
            at += 7;
        } else {
            return 0;
        }
    }
    return 1;
}

int t_hookable_entries(void)
{
#if defined(__x86_64__)
    static const char *names[] = {
        "cuMemAlloc", "cuMemAlloc_v2", "cuMemAllocManaged", "cuMemAllocPitch",
        "cuMemAllocPitch_v2", "cuMemFree", "cuMemFree_v2", "cuMemFreeHost", "cuMemAllocHost",
        "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemsetD8", "cuMemHostGetDevicePointer",
        "cuDeviceTotalMem", "cuMemGetInfo", "cuMemMap", "cuMemUnmap",
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const unsigned char *f = dlsym(RTLD_DEFAULT, names[i]);
        REQUIRE(f != NULL);
        int ok = patchable(f);
        if (!ok) {
            fprintf(stderr, "%s starts", names[i]);
            for (int b = 0; b < 13; b++) fprintf(stderr, " %02x", f[b]);
            fprintf(stderr, "\n");
        }
        CHECK(ok);
    }
    return CASE_PASS;
#else
    SKIP_IF(1);
#endif
}

static int callbacks;
static void stream_cb(CUstream s, CUresult st, void *data) { (void)s; callbacks += (st == CUDA_SUCCESS) * *(int *)data; }
static void host_fn(void *data) { callbacks += *(int *)data; }

int t_ucx_driver_functions(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUcontext primary, ctx = NULL, popped = NULL;
    CU(cuCtxGetCurrent(&primary));
    CU(cuCtxPushCurrent(primary));
    CU(cuCtxPopCurrent(&popped));
    CHECK(popped == primary);
    CU(cuCtxGetCurrent(&ctx));
    CHECK(ctx == primary); /* the one below was restored */
    unsigned long long id = 0;
    CU(cuCtxGetId(primary, &id));
    CHECK_EQ(id, 1);

    CUevent ev;
    CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CU(cuEventQuery(ev));
    CU(cuEventRecord(ev, NULL));
    CU(cuEventQuery(ev));
    CU(cuEventSynchronize(ev));
    CU(cuEventDestroy(ev));
    CHECK_EQ(cuEventDestroy(ev), CUDA_ERROR_INVALID_HANDLE);
    int one = 1, two = 2;
    CU(cuStreamAddCallback(NULL, stream_cb, &one, 0));
    CU(cuLaunchHostFunc(NULL, host_fn, &two));
    CHECK_EQ(callbacks, 3);
    CHECK_EQ(cuStreamAddCallback(NULL, stream_cb, &one, 1), CUDA_ERROR_INVALID_VALUE);

    static char host[3 * 4096];
    CU(cuMemHostRegister(host, 4096, 0));
    CHECK_EQ(cuMemHostRegister(host + 100, 4096, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CHECK_EQ(cuMemHostUnregister(host + 100), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    unsigned int mt = 9;
    CUpointer_attribute mt_attr = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
    void *mt_val = &mt;
    CU(cuPointerGetAttributes(1, &mt_attr, &mt_val, (CUdeviceptr)(host + 5)));
    CHECK_EQ(mt, CU_MEMORYTYPE_HOST);
    CU(cuMemHostUnregister(host));

    CUdeviceptr m, d = dalloc(4096);
    CU(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL));
    CHECK_EQ(cuMemAllocManaged(&m, 4096, 0), CUDA_ERROR_INVALID_VALUE);
    int loc = 7;
    CU(cuMemRangeGetAttribute(&loc, 4, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, m, 4096));
    CHECK_EQ(loc, CU_DEVICE_INVALID);
    CHECK_EQ(cuMemRangeGetAttribute(&loc, 4, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, d, 4096),
             CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr pitched;
    size_t pitch = 0;
    CU(cuMemAllocPitch(&pitched, &pitch, 100, 3, 4));
    CHECK_EQ(pitch, 512);
    CU(cuMemcpyDtoDAsync(pitched, d, 64, NULL));

    CUipcMemHandle ipc;
    CU(cuIpcGetMemHandle(&ipc, d + 10));
    CUdeviceptr opened;
    CHECK_EQ(cuIpcOpenMemHandle(&opened, ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_EQ(cuIpcGetMemHandle(&ipc, (CUdeviceptr)host), CUDA_ERROR_INVALID_VALUE);
    CUmemGenericAllocationHandle gh;
    CHECK_EQ(cuMemRetainAllocationHandle(&gh, (void *)d), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cuMemPoolDestroy(NULL), CUDA_ERROR_NOT_SUPPORTED);

    CU(cuMemFree(pitched));
    CU(cuMemFree(m));
    CU(cuMemFree(d));
    return CASE_PASS;
}

int t_pointer_attributes(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr d = dalloc(4096), m;
    CU(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL));
    void *h;
    CU(cuMemAllocHost(&h, 4096));
    char stack[16];
    CUpointer_attribute a[5] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES,
                                CU_POINTER_ATTRIBUTE_CONTEXT};
    unsigned int mt, managed, types;
    int ord;
    CUcontext ctx;
    void *v[5] = {&mt, &managed, &ord, &types, &ctx};
    struct { CUdeviceptr p; unsigned mt, managed; int ord; int ctx; } want[] = {
        {d, CU_MEMORYTYPE_DEVICE, 0, 0, 1},
        {m, CU_MEMORYTYPE_DEVICE, 1, 0, 1},
        {(CUdeviceptr)h, CU_MEMORYTYPE_HOST, 0, 0, 1},
        {(CUdeviceptr)stack, 0, 0, CU_DEVICE_INVALID, 0}, /* unknown: defaults, no error */
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        mt = managed = types = 77;
        ord = 77;
        ctx = (CUcontext)1;
        CU(cuPointerGetAttributes(5, a, v, want[i].p));
        CHECK_EQ(mt, want[i].mt);
        CHECK_EQ(managed, want[i].managed);
        CHECK_EQ(ord, want[i].ord);
        CHECK_EQ(types, 0);
        CHECK_EQ(ctx != NULL, want[i].ctx);
    }
    CHECK_EQ(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)stack),
             CUDA_ERROR_INVALID_VALUE);
    CU(cuMemFreeHost(h));
    CU(cuMemFree(m));
    CU(cuMemFree(d));
    return CASE_PASS;
}

/* Small allocations share 2 MiB chunks: a pin may start in freed bytes of a live chunk, and
 * may not leave the chunk. */
int t_chunk_pins(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr a = dalloc(3 * GPU_PAGE), b = dalloc(GPU_PAGE);
    CHECK_EQ((a & ~(CHUNK - 1)), (b & ~(CHUNK - 1)));
    CU(cuMemFree(a));
    int fd = dev_open();
    uint64_t h;
    /* UCX rounds b's registration out to 64 KiB: the start lies in a's freed bytes. */
    CHECK_EQ(pin_v1(fd, b & ~(GPU_PAGE - 1), GPU_PAGE, 0, 0, &h), 0);
    CHECK_EQ(unpin(fd, h), 0);
    /* The rest of the chunk is pinnable; past its end is not. */
    CUdeviceptr chunk = b & ~(CHUNK - 1);
    CHECK_EQ(pin_v1(fd, b, chunk + CHUNK - b, 0, 0, &h), 0);
    CHECK_EQ(unpin(fd, h), 0);
    CHECK_EQ(pin_v1(fd, b, chunk + CHUNK - b + 100 * GPU_PAGE, 0, 0, &h), EINVAL);
    CU(cuMemFree(b));
    /* A chunk with nothing live is refused. */
    CHECK_EQ(pin_v1(fd, chunk, GPU_PAGE, 0, 0, &h), EINVAL);
    /* A large allocation has chunks of its own. */
    CUdeviceptr big = dalloc(CHUNK + 1);
    CHECK_EQ(big & (CHUNK - 1), 0);
    CHECK_EQ(pin_v1(fd, big, 2 * CHUNK, 0, 0, &h), 0);
    CHECK_EQ(unpin(fd, h), 0);
    CHECK_EQ(pin_v1(fd, big, 2 * CHUNK + GPU_PAGE, 0, 0, &h), EINVAL);
    CU(cuMemFree(big));
    close(fd);
    return CASE_PASS;
}

/* A mapping made with syscall(SYS_mmap), as UCX's mmap hook makes it, reaches the driver. */
int t_syscall_mmap(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    CU(cuMemsetD8(d, 0x3c, GPU_PAGE));
    int fd = dev_open();
    uint64_t h;
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), 0);
    unsigned char *p = (unsigned char *)syscall(SYS_mmap, NULL, GPU_PAGE, PROT_READ | PROT_WRITE,
                                                MAP_SHARED, fd,
                                                (off_t)GDRDRV_MMAP_OFFSET(h, PAGE_SHIFT));
    REQUIRE(p != MAP_FAILED);
    CHECK_EQ(p[7], 0x3c);
    p[7] = 0x4d;
    unsigned char back = 0;
    CU(cuMemcpyDtoH(&back, d + 7, 1));
    CHECK_EQ(back, 0x4d);
    struct gdrsim_counters c;
    CHECK_EQ(gdrsim_get_counters(&c, sizeof(c)), 0);
    CHECK_EQ(c.live_mappings, 1);
    CHECK_EQ(munmap(p, GPU_PAGE), 0);
    CHECK_EQ(unpin(fd, h), 0);
    close(fd);
    CU(cuMemFree(raw));
    return CASE_PASS;
}

/* Device memory is named like the driver's in this process's memory map. */
int t_proc_maps(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr d = dalloc(4096);
    int fd = open("/proc/self/maps", O_RDONLY);
    REQUIRE(fd >= 0);
    static char text[1 << 20];
    size_t n = 0;
    ssize_t r;
    while ((r = read(fd, text + n, sizeof(text) - 1 - n)) > 0) n += (size_t)r;
    close(fd);
    text[n] = 0;
    CHECK(strstr(text, "gdrsim-vram") == NULL);
    int found = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && d >= lo && d < hi)
            found = strstr(line, " /dev/nvidia-uvm") != NULL;
    }
    CHECK(found);
    CU(cuMemFree(d));
    return CASE_PASS;
}
