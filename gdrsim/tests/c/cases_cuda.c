/* Cases of the CUDA surface: basics, VMM, and what a DMA-BUF backend needs. */
#include "sim.h"

/* The CUDA surface: versions, devices, allocation, copies, contexts. */
static void *ctx_thread(void *arg)
{
    CUcontext c = (CUcontext)1;
    cuCtxGetCurrent(&c);
    *(CUcontext *)arg = c;
    return NULL;
}

int t_cuda_basics(void)
{
    SKIP_IF(getenv("GDRSIM_FAIL") != NULL);
    int ver = 0;
    CU(cuDriverGetVersion(&ver));
    const char *want = getenv("GDRSIM_CUDA_VERSION");
    CHECK_EQ(ver, want ? atoi(want) : 13050);
    CUdeviceptr p;
    CHECK_EQ(cuMemAlloc(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
    CU(cuInit(0));
    int n = 0;
    CU(cuDeviceGetCount(&n));
    CHECK_EQ(n, 1);
    CUdevice dev;
    CHECK_EQ(cuDeviceGet(&dev, 1), CUDA_ERROR_INVALID_DEVICE);
    CU(cuDeviceGet(&dev, 0));
    char name[8];
    CU(cuDeviceGetName(name, sizeof(name), dev));
    CHECK_EQ(strlen(name), 7);
    int v;
    CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, dev));
    CHECK_EQ(v, 1);
    CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev));
    CHECK_EQ(v, 1);
    CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, dev));
    CHECK_EQ(v, CU_COMPUTEMODE_DEFAULT);
    CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, dev));
    CHECK_EQ(v, coherent());
    CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev));
    CHECK_EQ(v, !env_is("GDRSIM_DMABUF", "0"));
    CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev));
    CHECK(v >= 1024);
    CHECK_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, dev), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT); /* no current context */
    CUcontext ctx, cur;
    CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(ctx != NULL);
    CU(cuCtxSetCurrent(ctx));
    CU(cuCtxGetCurrent(&cur));
    CHECK(cur == ctx);
    pthread_t t;
    CUcontext other = (CUcontext)1;
    pthread_create(&t, NULL, ctx_thread, &other);
    pthread_join(t, NULL);
    CHECK(other == NULL); /* current context is per thread */
    CU(cuCtxGetDevice(&dev));
    CHECK_EQ(cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_VALUE);
    /* sub-allocation: 256-byte aligned, not always 64 KiB aligned */
    int unaligned = 0;
    for (int k = 0; k < 10; k++) {
        CU(cuMemAlloc(&p, GPU_PAGE + 4));
        CHECK_EQ(p % 256, 0);
        unaligned |= (p % GPU_PAGE) != 0;
    }
    CHECK(unaligned);
    char host[300], back[300];
    for (int k = 0; k < 300; k++)
        host[k] = (char)k;
    CU(cuMemcpyHtoD(p, host, sizeof(host)));
    CU(cuMemcpyDtoH(back, p, sizeof(back)));
    CHECK(memcmp(host, back, sizeof(host)) == 0);
    CU(cuMemsetD8(p, 0xab, 8));
    void *hbuf;
    CU_REQUIRE(cuMemAllocHost(&hbuf, 4096));
    CU(cuMemcpy((CUdeviceptr)hbuf, p, 8));
    CHECK_EQ(((unsigned char *)hbuf)[7], 0xab);
    CUdeviceptr hd;
    CU(cuMemHostGetDevicePointer(&hd, hbuf, 0));
    CHECK(hd == (CUdeviceptr)hbuf);
    CU(cuMemFreeHost(hbuf));
    CHECK_EQ(cuMemcpyDtoH(back, 0x1000, 4), CUDA_ERROR_INVALID_VALUE);
    int ord = -1;
    CU(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
    CHECK_EQ(ord, 0);
    CHECK_EQ(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)back), CUDA_ERROR_INVALID_VALUE);
    int one = 1;
    CU(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
    const char *s = NULL;
    CU(cuGetErrorName(CUDA_ERROR_NOT_READY, &s));
    CHECK(s != NULL && strcmp(s, "CUDA_ERROR_NOT_READY") == 0);
    CHECK_EQ(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    CU(cuStreamQuery(0));
    CU(cuStreamSynchronize(0));
    CU(cuCtxSynchronize());
    /* the rest of what a program commonly asks */
    char bus[32];
    CU(cuDeviceGetPCIBusId(bus, sizeof(bus), dev));
    CHECK(strcmp(bus, "0000:41:00.0") == 0);
    CUuuid uuid;
    CU(cuDeviceGetUuid(&uuid, dev));
    unsigned int flags = 9;
    int active = 0;
    CU(cuDevicePrimaryCtxGetState(dev, &flags, &active));
    CHECK_EQ(flags, 0);
    CHECK_EQ(active, 1);
    CUstream stream;
    CU(cuStreamCreate(&stream, 0));
    CU(cuMemcpyHtoDAsync(p, host, 16, stream));
    CU(cuMemsetD8Async(p, 0x5e, 1, stream));
    CU(cuMemcpyDtoHAsync(back, p, 16, stream));
    CU(cuStreamSynchronize(stream));
    CHECK_EQ((unsigned char)back[0], 0x5e);
    CHECK_EQ(back[15], host[15]);
    CU(cuStreamDestroy(stream));
    CUpointer_attribute which[2] = {CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
    int o = -1;
    unsigned int mt = 0;
    void *vals[2] = {&o, &mt};
    CU(cuPointerGetAttributes(2, which, vals, p));
    CHECK_EQ(o, 0);
    CHECK_EQ(mt, CU_MEMORYTYPE_DEVICE);
    CU(cuMemFree(p));
    CHECK_EQ(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
    CU(cuCtxSetCurrent(NULL));
    CU(cuDevicePrimaryCtxRelease(dev));
    CU(cuDevicePrimaryCtxGetState(dev, &flags, &active));
    CHECK_EQ(active, 0);
    return CASE_PASS;
}

/* VMM allocations: pin, map, data, and unmap invalidation. */
int t_vmm(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.allocFlags.gpuDirectRDMACapable = 1;
    size_t g = 0;
    CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    CHECK(g >= GPU_PAGE && (g & (g - 1)) == 0);
    size_t size = 2 * g;
    CUmemGenericAllocationHandle mh;
    CHECK_EQ(cuMemCreate(&mh, g / 2, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    CU(cuMemCreate(&mh, size, &prop, 0));
    CHECK_EQ(counters().live_allocations, 1);
    CUdeviceptr va;
    CU(cuMemAddressReserve(&va, size, g, 0, 0));
    CHECK_EQ(va % g, 0);
    CU(cuMemMap(va, size, 0, mh, 0));
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof(acc));
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = 0;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemSetAccess(va, size, &acc, 1));
    CU(cuMemsetD8(va, 0x3c, size));
    int fd = dev_open();
    uint64_t h;
    CHECK_EQ(pin_v1(fd, va, size, 0, 0, &h), 0);
    volatile unsigned char *p = map(fd, h, size);
    REQUIRE(p != MAP_FAILED);
    CHECK_EQ(p[size - 1], 0x3c);
    p[10] = 0x4d;
    unsigned char v;
    CU(cuMemcpyDtoH(&v, va + 10, 1));
    CHECK_EQ(v, 0x4d);
    CU(cuMemUnmap(va, size));
    CU(cuMemRelease(mh));
    CHECK_EQ(counters().live_allocations, 0);
    if (persistent()) {
        CHECK_EQ(probe(p + 10, 0, &v), 0);
        CHECK_EQ(v, 0x4d);
    } else {
        CHECK_EQ(probe(p + 10, 0, NULL), SIGBUS);
    }
    CHECK_EQ(pin_v1(fd, va, size, 0, 0, NULL), EINVAL); /* nothing mapped there now */
    munmap((void *)p, size);
    CHECK_EQ(unpin(fd, h), 0);
    CU(cuMemAddressFree(va, size));
    close(fd);
    return CASE_PASS;
}

/* A pin over two VMM handles mapped out of physical order maps both pieces in one mapping. */
int t_vmm_pieces(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    size_t g = 0;
    CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemGenericAllocationHandle h1, h2;
    CU(cuMemCreate(&h1, g, &prop, 0));
    CU(cuMemCreate(&h2, g, &prop, 0));
    CUdeviceptr va;
    CU(cuMemAddressReserve(&va, 2 * g, 0, 0, 0));
    CU(cuMemMap(va, g, 0, h2, 0));
    CU(cuMemMap(va + g, g, 0, h1, 0));
    CHECK_EQ(cuMemMap(va, g, 0, h1, 0), CUDA_ERROR_INVALID_VALUE); /* already mapped */
    CU(cuMemsetD8(va, 0x01, g));
    CU(cuMemsetD8(va + g, 0x02, g));
    int fd = dev_open();
    uint64_t h;
    CHECK_EQ(pin_v1(fd, va + g - GPU_PAGE, 2 * GPU_PAGE, 0, 0, &h), 0);
    unsigned char *p = map(fd, h, 2 * GPU_PAGE);
    REQUIRE(p != MAP_FAILED);
    CHECK_EQ(p[GPU_PAGE - 1], 0x01);
    CHECK_EQ(p[GPU_PAGE], 0x02);
    p[GPU_PAGE + 3] = 0x33;
    unsigned char v;
    CU(cuMemcpyDtoH(&v, va + g + 3, 1));
    CHECK_EQ(v, 0x33);
    munmap(p, 2 * GPU_PAGE);
    CHECK_EQ(unpin(fd, h), 0);
    CU(cuMemUnmap(va, 2 * g));
    CU(cuMemRelease(h1));
    CU(cuMemRelease(h2));
    CU(cuMemAddressFree(va, 2 * g));
    close(fd);
    return CASE_PASS;
}

/* The DMA-BUF backend's needs: cuGetProcAddress, cuMemGetHandleForAddressRange. */
typedef CUresult (*get_proc4_t)(const char *, void **, int, cuuint64_t);
typedef CUresult (*get_attr_t)(int *, CUdevice_attribute, CUdevice);

int t_dmabuf(void)
{
    SKIP_IF(getenv("GDRSIM_FAIL") != NULL);
    cuda_up();
    void *fn = NULL;
    CUdriverProcAddressQueryResult qr = 7;
    CU(cuGetProcAddress_v2("cuDeviceGetAttribute", &fn, 13030, 0, &qr));
    CHECK(fn != NULL);
    CHECK_EQ(qr, CU_GET_PROC_ADDRESS_SUCCESS);
    CHECK_EQ(cuGetProcAddress_v2("cuNoSuchFunction", &fn, 13030, 0, &qr), CUDA_ERROR_NOT_FOUND);
    CHECK_EQ(qr, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CHECK(fn == NULL);
    /* the unversioned entry point with the legacy 4-argument signature */
    get_proc4_t gp4 = (get_proc4_t)dlsym(RTLD_DEFAULT, "cuGetProcAddress");
    REQUIRE(gp4 != NULL);
    CU(gp4("cuMemGetHandleForAddressRange", &fn, 13030, 0));
    CHECK(fn != NULL);
    get_attr_t ga = NULL;
    CU(gp4("cuDeviceGetAttribute", (void **)&ga, 13030, 0));
    REQUIRE(ga != NULL);
    int v = -1;
    CU(ga(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, 0));
    CHECK_EQ(v, !env_is("GDRSIM_DMABUF", "0"));

    CUdeviceptr raw, d = dalloc_aligned(4 * GPU_PAGE, &raw);
    CU(cuMemsetD8(d, 0x61, 4 * GPU_PAGE));
    CU(cuMemsetD8(d + 2 * GPU_PAGE, 0x62, 1));
    int dfd = -1;
    CUresult r = cuMemGetHandleForAddressRange(&dfd, d + GPU_PAGE, 2 * GPU_PAGE,
                                               CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (env_is("GDRSIM_DMABUF", "0")) {
        CHECK_EQ(r, CUDA_ERROR_NOT_SUPPORTED);
        return CASE_PASS;
    }
    CU(r);
    REQUIRE(dfd >= 0);
    CHECK_EQ(counters().live_dmabufs, 1);
    unsigned char *p = mmap(NULL, 2 * GPU_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, dfd, 0);
    REQUIRE(p != MAP_FAILED);
    CHECK_EQ(p[0], 0x61);
    CHECK_EQ(p[GPU_PAGE], 0x62); /* offset 0 of the fd is the start of the exported range */
    p[1] = 0x63;
    unsigned char b;
    CU(cuMemcpyDtoH(&b, d + GPU_PAGE + 1, 1));
    CHECK_EQ(b, 0x63);
    unsigned char *q = mmap(NULL, 4096, PROT_READ, MAP_SHARED, dfd, GPU_PAGE);
    CHECK(q != MAP_FAILED && q[0] == 0x62);
    CHECK(mmap(NULL, 3 * GPU_PAGE, PROT_READ, MAP_SHARED, dfd, 0) == MAP_FAILED && errno == EINVAL);
    munmap(q, 4096);
    CHECK_EQ(cuMemGetHandleForAddressRange(&dfd, d + 1, GPU_PAGE, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(close(dfd), 0);
    CHECK_EQ(counters().live_dmabufs, 0);
    CHECK_EQ(p[1], 0x63); /* the mapping outlives the fd */
    munmap(p, 2 * GPU_PAGE);
    return CASE_PASS;
}
