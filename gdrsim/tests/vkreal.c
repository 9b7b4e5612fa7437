/*
 * vkreal.c - the emulator's Vulkan backing (GDRSIM_BACKING=vulkan), through the raw driver
 * interface and the CUDA API: a pin's mapping is its own Vulkan mapping of the arena and
 * shows the device's bytes both ways; a short mapping, a zap (SIGBUS, munmap still works),
 * a forked child (no mapping, a clean exit), no leak over many cycles, and refusals (memory the emulator did not allocate, MAP_FIXED,
 * VMM memory). Runs on a GPU (real CUDA) or on lavapipe with GDRSIM_REAL_LIBCUDA=none.
 * Prints "N passed, N failed".
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "gdrdrv_abi.h"
#include "gdrsim.h"

#define GPU_PAGE GDRDRV_GPU_PAGE_SIZE
#define PAGE_SHIFT 12 /* the host's pages, in which mmap offsets count */

#define CU(call) CHECK_EQ((call), CUDA_SUCCESS)

static int pin(int fd, uint64_t addr, uint64_t size, uint64_t *h)
{
    struct gdrdrv_pin_buffer_v2_params p = {addr, size, GDRDRV_PIN_FLAG_DEFAULT, 0, 0};
    if (ioctl(fd, GDRDRV_IOC_PIN_BUFFER_V2, &p) != 0)
        return errno;
    *h = p.handle;
    return 0;
}

static int unpin(int fd, uint64_t h)
{
    struct gdrdrv_unpin_buffer_params p = {h};
    return ioctl(fd, GDRDRV_IOC_UNPIN_BUFFER, &p) == 0 ? 0 : errno;
}

static void *map(int fd, uint64_t h, size_t len)
{
    return mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                (off_t)GDRDRV_MMAP_OFFSET(h, PAGE_SHIFT));
}

static struct gdrsim_counters counters(void)
{
    struct gdrsim_counters c;
    memset(&c, 0, sizeof(c));
    gdrsim_get_counters(&c, sizeof(c));
    return c;
}

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* The /proc/self/maps line of the mapping that contains p, printed; 0 if none. */
static int show_mapping(const char *what, const void *p)
{
    char line[512];
    int found = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)p >= lo && (uintptr_t)p < hi) {
            printf("%s: %s", what, line);
            found = !strstr(line, "gdrsim-vram");
            break;
        }
    }
    fclose(f);
    return found;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 131 + seed * 7 + (i >> 9));
}

static sigjmp_buf on_bus;
static void bus_handler(int sig)
{
    (void)sig;
    siglongjmp(on_bus, 1);
}

/* Whether reading *p raises SIGBUS. */
static int raises_sigbus(volatile unsigned char *p)
{
    struct sigaction sa, old;
    int hit = 0;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = bus_handler;
    sigaction(SIGBUS, &sa, &old);
    if (sigsetjmp(on_bus, 1) == 0)
        (void)*p;
    else
        hit = 1;
    sigaction(SIGBUS, &old, NULL);
    return hit;
}

static CUdeviceptr aligned(CUdeviceptr raw)
{
    return (raw + GPU_PAGE - 1) & ~(CUdeviceptr)(GPU_PAGE - 1);
}

static void test_bytes_both_ways(int fd, CUdeviceptr d)
{
    const size_t n = 4 * GPU_PAGE;
    static unsigned char in[4 * 0x10000], out[4 * 0x10000];
    uint64_t h = 0;
    CHECK_EQ(pin(fd, d, n, &h), 0);
    unsigned char *m = map(fd, h, n);
    CHECK(m != MAP_FAILED);
    if (m == MAP_FAILED)
        return;
    CHECK((CUdeviceptr)(uintptr_t)m != d);
    CHECK(show_mapping("pin mapping", m));
    /* CPU through the mapping, then the device's view. */
    fill(in, n, 1);
    memcpy(m, in, n);
    __sync_synchronize();
    CU(cuMemcpyDtoH(out, d, n));
    CHECK(memcmp(in, out, n) == 0);
    /* The device writes, the mapping shows it; bytes around stay. */
    CU(cuMemsetD8(d + 3 * GPU_PAGE + 17, 0x5a, 1000));
    CU(cuCtxSynchronize());
    memcpy(out, m, n);
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        int inside = i >= 3 * GPU_PAGE + 17 && i < 3 * GPU_PAGE + 17 + 1000;
        if (out[i] != (inside ? 0x5a : in[i]))
            ok = 0;
    }
    CHECK(ok);
    CHECK_EQ(counters().live_mappings, 1);
    CHECK_EQ(munmap(m, n), 0);
    CHECK_EQ(counters().live_mappings, 0);
    CHECK_EQ(unpin(fd, h), 0);
    CHECK_EQ(counters().live_pins, 0);
}

static void test_short_mapping(int fd, CUdeviceptr d)
{
    static unsigned char in[0x10000], out[0x10000];
    uint64_t h = 0;
    CHECK_EQ(pin(fd, d + GPU_PAGE, 3 * GPU_PAGE, &h), 0);
    unsigned char *m = map(fd, h, GPU_PAGE);
    CHECK(m != MAP_FAILED);
    if (m == MAP_FAILED)
        return;
    fill(in, sizeof(in), 2);
    memcpy(m, in, sizeof(in));
    __sync_synchronize();
    CU(cuMemcpyDtoH(out, d + GPU_PAGE, sizeof(out)));
    CHECK(memcmp(in, out, sizeof(in)) == 0);
    CHECK_EQ(munmap(m, GPU_PAGE), 0);
    CHECK_EQ(unpin(fd, h), 0);
}

static void test_zap(int fd, CUdeviceptr d)
{
    uint64_t h = 0;
    CHECK_EQ(pin(fd, d, GPU_PAGE, &h), 0);
    unsigned char *m = map(fd, h, GPU_PAGE);
    CHECK(m != MAP_FAILED);
    if (m == MAP_FAILED)
        return;
    m[5] = 7;
    CHECK(!raises_sigbus(m + 5));
    CHECK_EQ(unpin(fd, h), 0);
    CHECK(raises_sigbus(m + 5));
    CHECK_EQ(counters().live_mappings, 1);
    CHECK_EQ(munmap(m, GPU_PAGE), 0);
    CHECK_EQ(counters().live_mappings, 0);
}

/* A forked child does not inherit the mapping (touching it faults) and exits normally,
 * running the exit handlers the GPU drivers registered. */
static void test_fork(int fd, CUdeviceptr d)
{
    uint64_t h = 0;
    CHECK_EQ(pin(fd, d, GPU_PAGE, &h), 0);
    volatile unsigned char *m = map(fd, h, GPU_PAGE);
    CHECK(m != MAP_FAILED);
    if (m == MAP_FAILED)
        return;
    m[9] = 3;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct sigaction sa;
        int faulted;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = bus_handler;
        sigaction(SIGSEGV, &sa, NULL);
        sigaction(SIGBUS, &sa, NULL);
        if (sigsetjmp(on_bus, 1) == 0) {
            (void)m[9];
            faulted = 0;
        } else {
            faulted = 1;
        }
        exit(faulted ? 0 : 3);
    }
    CHECK(pid > 0);
    int status = -1, waited = 0;
    for (int i = 0; i < 200 && pid > 0; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            waited = 1;
            break;
        }
        struct timespec ts = { 0, 50 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    if (!waited && pid > 0) {
        printf("fork: the child did not exit within 10 s\n");
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    CHECK(waited);
    if (WIFSIGNALED(status))
        printf("fork: the child died of signal %d\n", WTERMSIG(status));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_EQ(m[9], 3);
    CHECK_EQ(munmap((void *)m, GPU_PAGE), 0);
    CHECK_EQ(unpin(fd, h), 0);
}

static void test_no_leak(int fd, CUdeviceptr d)
{
    int fds = open_fds(), bad = 0;
    for (int i = 0; i < 200; i++) {
        uint64_t h = 0;
        if (pin(fd, d, 2 * GPU_PAGE, &h) != 0) {
            bad++;
            break;
        }
        unsigned char *m = map(fd, h, 2 * GPU_PAGE);
        if (m == MAP_FAILED) {
            bad++;
            unpin(fd, h);
            break;
        }
        m[i] = (unsigned char)i;
        if (munmap(m, 2 * GPU_PAGE) != 0 || unpin(fd, h) != 0)
            bad++;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(open_fds(), fds);
    CHECK_EQ(counters().live_mappings, 0);
    CHECK_EQ(counters().live_pins, 0);
}

static void test_refusals(int fd, CUdeviceptr d)
{
    uint64_t h = 0;
    void *host = NULL;
    CU(cuMemAllocHost(&host, 2 * GPU_PAGE));
    CHECK_EQ(pin(fd, aligned((CUdeviceptr)(uintptr_t)host), GPU_PAGE, &h), EINVAL);
    static unsigned char plain[3 * 0x10000];
    CHECK_EQ(pin(fd, aligned((CUdeviceptr)(uintptr_t)plain), GPU_PAGE, &h), EINVAL);
    CU(cuMemFreeHost(host));

    /* Vulkan chooses the address: MAP_FIXED cannot be honoured. */
    CHECK_EQ(pin(fd, d, GPU_PAGE, &h), 0);
    void *spot = mmap(NULL, GPU_PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *m = mmap(spot, GPU_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                   (off_t)GDRDRV_MMAP_OFFSET(h, PAGE_SHIFT));
    CHECK(m == MAP_FAILED && errno == EINVAL);
    munmap(spot, GPU_PAGE);
    CHECK_EQ(unpin(fd, h), 0);

    /* VMM memory: not in the arena, so it cannot be pinned (or not even created). */
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.allocFlags.gpuDirectRDMACapable = 1;
    size_t gran = 0;
    CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (gran == 0)
        gran = 2 << 20;
    CUmemGenericAllocationHandle mh;
    CUresult r = cuMemCreate(&mh, gran, &prop, 0);
    if (r == CUDA_ERROR_NOT_SUPPORTED) {
        CHECK(1);
        return;
    }
    CU(r);
    CUdeviceptr va = 0;
    CU(cuMemAddressReserve(&va, gran, 0, 0, 0));
    CU(cuMemMap(va, gran, 0, mh, 0));
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof(acc));
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemSetAccess(va, gran, &acc, 1));
    CHECK_EQ(pin(fd, va, GPU_PAGE, &h), EINVAL);
    CU(cuMemUnmap(va, gran));
    CU(cuMemAddressFree(va, gran));
    CU(cuMemRelease(mh));
}

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr raw = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    REQUIRE(cuInit(0) == CUDA_SUCCESS);
    REQUIRE(cuDeviceGet(&dev, 0) == CUDA_SUCCESS);
    REQUIRE(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
    REQUIRE(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    REQUIRE(cuMemAlloc(&raw, 8 * GPU_PAGE) == CUDA_SUCCESS);
    CUdeviceptr d = aligned(raw);
    int fd = open(GDRDRV_DEVICE_PATH, O_RDWR | O_CLOEXEC);
    REQUIRE(fd >= 0);

    test_bytes_both_ways(fd, d);
    test_short_mapping(fd, d);
    test_zap(fd, d);
    test_fork(fd, d);
    test_no_leak(fd, d);
    test_refusals(fd, d);

    CHECK_EQ(close(fd), 0);
    CU(cuMemFree(raw));
    CHECK_EQ(counters().live_allocations, 0);
    return check_done(__FILE__);
}
