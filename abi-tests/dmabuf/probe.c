/*
 * dmabuf-probe - what this machine's CUDA driver says about DMA-BUF mmap, and
 * what gdr_open does with it.
 *
 * Built without CUDA headers or libraries: libcuda is dlopened at run time
 * (libcuda.so.1, then libcuda.so), so the binary has no link dependency on it.
 * libgdrapi is dlopened too (libgdrapi.so.2), so the probe runs even where the
 * library cannot be found.
 *
 * Steps, each printed on one line:
 *   1. gdr_open() with GDRCOPY_USE_DMABUF_MMAP=1 (no gdrdrv) and logging on:
 *      either the backend is used, or the refusal and its log line (stderr).
 *   2. cuDriverGetVersion.
 *   3. per device: attribute 124 (DMA_BUF_SUPPORTED), attribute 100
 *      (PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES).
 *   4. on device 0: cuMemAlloc of 2 MiB, one cuMemGetHandleForAddressRange
 *      (DMA_BUF_FD, flags 0) and, if an fd came back, one mmap of it, a write
 *      and a read back through cuMemcpyDtoH.
 *
 * Usage: dmabuf-probe [--no-gdr]     (exit status 0 unless the probe itself broke)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;

typedef CUresult (*fn_int_t)(int *);
typedef CUresult (*fn_init_t)(unsigned int);
typedef CUresult (*fn_device_get_t)(CUdevice *, int);
typedef CUresult (*fn_attr_t)(int *, int, CUdevice);
typedef CUresult (*fn_retain_t)(CUcontext *, CUdevice);
typedef CUresult (*fn_release_t)(CUdevice);
typedef CUresult (*fn_set_ctx_t)(CUcontext);
typedef CUresult (*fn_alloc_t)(CUdeviceptr *, size_t);
typedef CUresult (*fn_free_t)(CUdeviceptr);
typedef CUresult (*fn_export_t)(void *, CUdeviceptr, size_t, int, unsigned long long);
typedef CUresult (*fn_dtoh_t)(void *, CUdeviceptr, size_t);
typedef CUresult (*fn_memset_t)(CUdeviceptr, unsigned char, size_t);
typedef CUresult (*fn_errtext_t)(CUresult, const char **);

static void *libcuda;
static fn_errtext_t err_name;

static void *sym(const char *name)
{
    void *p = dlsym(libcuda, name);
    if (p == NULL)
        printf("  %s: not exported\n", name);
    return p;
}

static const char *name_of(CUresult r)
{
    const char *s = NULL;
    if (err_name != NULL && err_name(r, &s) == 0 && s != NULL)
        return s;
    return "?";
}

/* Step 1: gdr_open through a dlopened libgdrapi. */
static void probe_gdr_open(void)
{
    void *gdr = dlopen("libgdrapi.so.2", RTLD_NOW | RTLD_LOCAL);
    if (gdr == NULL) {
        printf("gdr_open: libgdrapi.so.2 not loadable (%s)\n", dlerror());
        return;
    }
    void *(*gdr_open)(void) = (void *(*)(void))dlsym(gdr, "gdr_open");
    int (*gdr_close)(void *) = (int (*)(void *))dlsym(gdr, "gdr_close");
    int (*get_attr)(void *, int, int *) = (int (*)(void *, int, int *))dlsym(gdr, "gdr_get_attribute");
    if (gdr_open == NULL || gdr_close == NULL) {
        printf("gdr_open: symbol missing in libgdrapi.so.2\n");
        return;
    }
    fflush(stdout);
    void *g = gdr_open();
    if (g == NULL) {
        printf("gdr_open (GDRCOPY_USE_DMABUF_MMAP=1): NULL, errno=%d (%s); the ERR lines above name the cause\n",
               errno, strerror(errno));
        return;
    }
    int v = -1;
    int r = get_attr ? get_attr(g, 3 /* GDR_ATTR_USING_DMA_BUF_MMAP */, &v) : -1;
    printf("gdr_open (GDRCOPY_USE_DMABUF_MMAP=1): OK, gdr_get_attribute(USING_DMA_BUF_MMAP) = %d (ret %d)\n", v, r);
    printf("gdr_close: %d\n", gdr_close(g));
}

static int probe_export(void)
{
    fn_device_get_t device_get = (fn_device_get_t)sym("cuDeviceGet");
    fn_retain_t retain = (fn_retain_t)sym("cuDevicePrimaryCtxRetain");
    fn_release_t release = (fn_release_t)sym("cuDevicePrimaryCtxRelease");
    fn_set_ctx_t set_ctx = (fn_set_ctx_t)sym("cuCtxSetCurrent");
    fn_alloc_t alloc = (fn_alloc_t)sym("cuMemAlloc_v2");
    fn_free_t mfree = (fn_free_t)sym("cuMemFree_v2");
    fn_export_t exp = (fn_export_t)sym("cuMemGetHandleForAddressRange");
    fn_dtoh_t dtoh = (fn_dtoh_t)sym("cuMemcpyDtoH_v2");
    fn_memset_t memset8 = (fn_memset_t)sym("cuMemsetD8_v2");
    if (!device_get || !retain || !release || !set_ctx || !alloc || !mfree || !exp || !dtoh || !memset8)
        return 1;

    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr d = 0;
    const size_t size = 2 << 20;
    CUresult r = device_get(&dev, 0);
    if (r == 0)
        r = retain(&ctx, dev);
    if (r == 0)
        r = set_ctx(ctx);
    if (r != 0) {
        printf("device 0 context: error %d (%s)\n", r, name_of(r));
        return 1;
    }
    r = alloc(&d, size);
    printf("cuMemAlloc(2 MiB): %d (%s) ptr=0x%llx\n", r, name_of(r), d);
    if (r != 0)
        return 1;
    memset8(d, 0x5a, size);

    int fd[2] = {-1, -1};
    r = exp(fd, d, size, 1 /* DMA_BUF_FD */, 0);
    printf("cuMemGetHandleForAddressRange(DMA_BUF_FD, flags 0): %d (%s) fd=%d\n", r, name_of(r), fd[0]);
    int fd_pcie[2] = {-1, -1};
    CUresult rp = exp(fd_pcie, d, size, 1, 1 /* MAPPING_TYPE_PCIE */);
    printf("cuMemGetHandleForAddressRange(DMA_BUF_FD, flags PCIE): %d (%s) fd=%d\n", rp, name_of(rp),
           fd_pcie[0]);
    if (fd_pcie[0] >= 0)
        close(fd_pcie[0]);

    if (r == 0 && fd[0] >= 0) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd[0], 0);
        if (p == MAP_FAILED) {
            int e = errno;
            /* 524 is the kernel's ENOTSUPP: the exporter has no mmap (drivers before CUDA 13.3). */
            printf("mmap(dma-buf fd, 2 MiB): failed, errno=%d (%s)\n", e,
                   e == 524 ? "ENOTSUPP: this dma-buf exporter does not support mmap" : strerror(e));
        } else {
            volatile unsigned char *m = p;
            unsigned char first = m[0];
            m[4096] = 0xa5;
            __sync_synchronize();
            unsigned char back = 0;
            CUresult rr = dtoh(&back, d + 4096, 1);
            printf("mmap(dma-buf fd, 2 MiB): OK at %p; read 0x%02x (device memset 0x5a); "
                   "wrote 0xa5, cuMemcpyDtoH read 0x%02x (ret %d)\n",
                   p, first, back, rr);
            munmap(p, size);
        }
        close(fd[0]);
    }
    mfree(d);
    set_ctx(NULL);
    release(dev);
    return 0;
}

int main(int argc, char **argv)
{
    int with_gdr = !(argc > 1 && strcmp(argv[1], "--no-gdr") == 0);
    if (with_gdr) {
        setenv("GDRCOPY_USE_DMABUF_MMAP", "1", 1);
        setenv("GDRCOPY_ENABLE_LOGGING", "1", 0);
        setenv("GDRCOPY_LOG_LEVEL", "2", 0);
        probe_gdr_open();
    }

    const char *loaded = "libcuda.so.1";
    libcuda = dlopen(loaded, RTLD_NOW | RTLD_LOCAL);
    if (libcuda == NULL) {
        loaded = "libcuda.so";
        libcuda = dlopen(loaded, RTLD_NOW | RTLD_LOCAL);
    }
    if (libcuda == NULL) {
        printf("libcuda: not loadable (%s)\n", dlerror());
        return 0;
    }
    printf("libcuda: %s\n", loaded);
    err_name = (fn_errtext_t)dlsym(libcuda, "cuGetErrorName");

    fn_int_t version = (fn_int_t)sym("cuDriverGetVersion");
    fn_init_t init = (fn_init_t)sym("cuInit");
    fn_int_t count = (fn_int_t)sym("cuDeviceGetCount");
    fn_device_get_t device_get = (fn_device_get_t)sym("cuDeviceGet");
    fn_attr_t attr = (fn_attr_t)sym("cuDeviceGetAttribute");
    if (!version || !init || !count || !device_get || !attr)
        return 1;

    int v = 0;
    CUresult r = version(&v);
    printf("cuDriverGetVersion: %d (ret %d) = CUDA %d.%d; DMA-BUF mmap needs >= 13030\n", v, r, v / 1000,
           (v % 1000) / 10);
    r = init(0);
    printf("cuInit(0): %d (%s)\n", r, name_of(r));
    if (r != 0)
        return 0;
    int n = 0;
    r = count(&n);
    printf("cuDeviceGetCount: %d (ret %d)\n", n, r);
    for (int i = 0; i < n; i++) {
        CUdevice dev;
        int a124 = -1, a100 = -1;
        device_get(&dev, i);
        CUresult r124 = attr(&a124, 124, dev);
        CUresult r100 = attr(&a100, 100, dev);
        printf("device %d: attr 124 DMA_BUF_SUPPORTED = %d (ret %d); "
               "attr 100 PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES = %d (ret %d)\n",
               i, a124, r124, a100, r100);
    }
    if (n > 0 && probe_export() != 0)
        printf("export probe could not run\n");
    return 0;
}
