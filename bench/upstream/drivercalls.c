/*
 * drivercalls.c - how many driver calls (open, ioctl, mmap, munmap, close) each gdrapi
 * function makes, for whichever libgdrapi.so.2 the dynamic loader finds.
 *
 * The program defines open, ioctl, mmap, munmap and close itself. Symbol lookup starts at the
 * executable, so every such call the library makes lands here first, is counted, and is passed
 * on with dlsym(RTLD_NEXT) (to the emulator when it is preloaded, else to the C library). Only
 * calls made while a gdrapi function runs are counted, and only those on the gdrdrv file (or,
 * for open, on a path naming gdrdrv), so CUDA's own activity does not show.
 *
 * Output: one line per function, "name open ioctl mmap munmap close", for a fixed sequence
 * (open, pin, get_info, map, copies, unmap, unpin, close). Exit status 0 when every call
 * succeeded, 1 otherwise. Runs on the emulator and on a real gdrdrv.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gdrapi.h"
#include "gpu.h"

enum { C_OPEN, C_IOCTL, C_MMAP, C_MUNMAP, C_CLOSE, C_COUNT };
static const char *const call_names[C_COUNT] = {"open", "ioctl", "mmap", "munmap", "close"};

static int counting;      /* set while a gdrapi function runs */
static int gdrdrv_fd = -1; /* the fd open() returned for a gdrdrv path */
static unsigned long counts[C_COUNT];

static void *next(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "drivercalls: dlsym(RTLD_NEXT, %s) failed\n", name);
        abort();
    }
    return f;
}

int open(const char *path, int flags, ...)
{
    static int (*real)(const char *, int, ...);
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    if (!real)
        real = (int (*)(const char *, int, ...))next("open");
    int fd = real(path, flags, mode);
    if (counting && strstr(path, "gdrdrv")) {
        counts[C_OPEN]++;
        gdrdrv_fd = fd;
    }
    return fd;
}

/* glibc's own name for open with large-file semantics; some builds of the library call it. */
int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    return open(path, flags, mode);
}

int ioctl(int fd, unsigned long request, ...)
{
    static int (*real)(int, unsigned long, ...);
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (!real)
        real = (int (*)(int, unsigned long, ...))next("ioctl");
    if (counting && fd == gdrdrv_fd)
        counts[C_IOCTL]++;
    return real(fd, request, arg);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    static void *(*real)(void *, size_t, int, int, int, off_t);
    if (!real)
        real = (void *(*)(void *, size_t, int, int, int, off_t))next("mmap");
    if (counting && fd == gdrdrv_fd && fd >= 0)
        counts[C_MMAP]++;
    return real(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return mmap(addr, len, prot, flags, fd, off);
}

/* A munmap is counted when it comes from inside a gdrapi function: the address alone does
 * not say which file it belonged to, and gdrapi unmaps only what it mapped. */
int munmap(void *addr, size_t len)
{
    static int (*real)(void *, size_t);
    if (!real)
        real = (int (*)(void *, size_t))next("munmap");
    if (counting)
        counts[C_MUNMAP]++;
    return real(addr, len);
}

int close(int fd)
{
    static int (*real)(int);
    if (!real)
        real = (int (*)(int))next("close");
    if (counting && fd == gdrdrv_fd)
        counts[C_CLOSE]++;
    return real(fd);
}

static int failures;

static void report(const char *name, int ok)
{
    printf("%-24s", name);
    for (int i = 0; i < C_COUNT; i++)
        printf(" %6lu", counts[i]);
    printf("%s\n", ok ? "" : "   FAILED");
    if (!ok)
        failures++;
    memset(counts, 0, sizeof counts);
}

#define MEASURE(name, expr_ok)                                                                     \
    do {                                                                                           \
        memset(counts, 0, sizeof counts);                                                          \
        counting = 1;                                                                              \
        int ok_ = (expr_ok);                                                                       \
        counting = 0;                                                                              \
        report(name, ok_);                                                                         \
    } while (0)

int main(int argc, char **argv)
{
    size_t size = argc > 1 ? strtoul(argv[1], NULL, 0) : 65536;
    gpu_init();
    CUdeviceptr raw = gpu_alloc(size);
    unsigned long addr = gpu_aligned(raw);
    char *host = malloc(size);
    if (!host)
        return 2;
    memset(host, 0x5a, size);

    printf("%-24s", "function");
    for (int i = 0; i < C_COUNT; i++)
        printf(" %6s", call_names[i]);
    printf("\n");

    gdr_t g = NULL;
    gdr_mh_t mh = {0};
    gdr_info_t info;
    void *va = NULL;
    int major = 0, minor = 0, flag = 0;
    int version = 0;

    MEASURE("gdr_open", (g = gdr_open()) != NULL);
    if (!g) {
        printf("gdr_open failed: nothing else measured\n");
        return 1;
    }
    MEASURE("gdr_runtime_get_version", (gdr_runtime_get_version(&major, &minor), major == 2));
    MEASURE("gdr_driver_get_version", gdr_driver_get_version(g, &major, &minor) == 0);
    MEASURE("gdr_get_attribute", gdr_get_attribute(g, GDR_ATTR_USE_PERSISTENT_MAPPING, &version) == 0);
    MEASURE("gdr_pin_buffer", gdr_pin_buffer(g, addr, size, 0, 0, &mh) == 0);
    MEASURE("gdr_get_info_v2", gdr_get_info(g, mh, &info) == 0);
    MEASURE("gdr_get_callback_flag", gdr_get_callback_flag(g, mh, &flag) == 0);
    MEASURE("gdr_map", gdr_map(g, mh, &va, size) == 0);
    MEASURE("gdr_copy_to_mapping", gdr_copy_to_mapping(mh, va, host, size) == 0);
    MEASURE("gdr_copy_from_mapping", gdr_copy_from_mapping(mh, host, va, size) == 0);
    MEASURE("gdr_unmap", gdr_unmap(g, mh, va, size) == 0);
    MEASURE("gdr_unpin_buffer", gdr_unpin_buffer(g, mh) == 0);
    MEASURE("gdr_close", gdr_close(g) == 0);

    free(host);
    cuMemFree(raw);
    return failures ? 1 : 0;
}
