/* Cases of the emulator's own interface: fault injection, device node settings, counters. */
#include "sim.h"

/* Fault injection through gdrsim_set_fail. */
int t_fail_injection(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    CHECK_EQ(gdrsim_set_fail("PIN_BUFFER:2:ENOMEM,open:1:EMFILE"), 0);
    CHECK_EQ(dev_open(), -1);
    CHECK_EQ(errno, EMFILE);
    int fd = dev_open();
    REQUIRE(fd >= 0);
    uint64_t h;
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), 0);
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), ENOMEM);
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), 0);
    CHECK_EQ(gdrsim_set_fail("GET_VERSION:*:EIO,mmap:1:EAGAIN,munmap:1:EINVAL,close:1:EINTR"), 0);
    struct gdrdrv_get_version_params v;
    CHECK_EQ(xioctl(fd, GDRDRV_IOC_GET_VERSION, &v), EIO);
    CHECK_EQ(xioctl(fd, GDRDRV_IOC_GET_VERSION, &v), EIO);
    CHECK(map(fd, h, GPU_PAGE) == MAP_FAILED && errno == EAGAIN);
    void *p = map(fd, h, GPU_PAGE);
    CHECK(p != MAP_FAILED);
    void *anon = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK_EQ(munmap(anon, 4096), 0); /* not ours: not counted */
    CHECK_EQ(munmap(p, GPU_PAGE), -1);
    CHECK_EQ(errno, EINVAL);
    CHECK_EQ(munmap(p, GPU_PAGE), 0);
    struct gdrsim_counters c0, c1;
    CHECK_EQ(gdrsim_get_counters(&c0, sizeof(c0)), 0);
    CHECK_EQ(close(fd), -1);
    CHECK_EQ(errno, EINTR);
    /* As on Linux, the descriptor and the file are released all the same. */
    CHECK_EQ(gdrsim_get_counters(&c1, sizeof(c1)), 0);
    CHECK_EQ(c1.open_files + 1, c0.open_files);
    CHECK(fcntl(fd, F_GETFD) == -1 && errno == EBADF);
    CHECK_EQ(gdrsim_set_fail("cuMemAlloc_v2:1:2,cuInit:*:CUDA_ERROR_NO_DEVICE"), 0);
    CUdeviceptr q;
    /* injected_faults counts the calls a rule failed, and only those. */
    CHECK_EQ(gdrsim_get_counters(&c0, sizeof(c0)), 0);
    CHECK_EQ(cuMemAlloc(&q, 16), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(gdrsim_get_counters(&c1, sizeof(c1)), 0);
    CHECK_EQ(c1.injected_faults, c0.injected_faults + 1);
    CHECK_EQ(cuMemAlloc(&q, 16), CUDA_SUCCESS);
    CHECK_EQ(gdrsim_get_counters(&c0, sizeof(c0)), 0);
    CHECK_EQ(c0.injected_faults, c1.injected_faults);
    CHECK_EQ(cuInit(0), CUDA_ERROR_NO_DEVICE);
    CHECK_EQ(gdrsim_get_counters(&c1, sizeof(c1)), 0);
    CHECK_EQ(c1.injected_faults, c0.injected_faults + 1);
    CHECK_EQ(gdrsim_set_fail("bogus:1:EINVAL"), EINVAL);
    CHECK_EQ(gdrsim_set_fail("PIN_BUFFER:0:EINVAL"), EINVAL);
    CHECK_EQ(gdrsim_set_fail("PIN_BUFFER:1:ENOPE"), EINVAL);
    CHECK_EQ(cuInit(0), CUDA_ERROR_NO_DEVICE); /* a bad spec leaves the old one */
    CHECK_EQ(gdrsim_set_fail(NULL), 0);
    CHECK_EQ(cuInit(0), CUDA_SUCCESS);
    return CASE_PASS;
}

/* A rule's ERR `panic` makes the call panic inside its exported function: the panic guard
 * answers with the function's failure value and the process goes on, every call after it
 * served as before. */
int t_fail_panic(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    CHECK_EQ(gdrsim_set_fail("cuMemAlloc_v2:1:panic,open:1:panic,PIN_BUFFER:1:panic,"
                             "close:1:panic"), 0);
    CUdeviceptr q;
    CHECK_EQ(cuMemAlloc(&q, 16), CUDA_ERROR_UNKNOWN);
    CHECK_EQ(cuMemAlloc(&q, 16), CUDA_SUCCESS);
    CHECK_EQ(cuMemFree(q), CUDA_SUCCESS);
    CHECK_EQ(dev_open(), -1);
    CHECK_EQ(errno, EIO);
    int fd = dev_open();
    REQUIRE(fd >= 0);
    uint64_t h;
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), EIO);
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), 0);
    CHECK_EQ(close(fd), -1);
    CHECK_EQ(errno, EIO);
    CHECK_EQ(gdrsim_set_fail(NULL), 0);
    CHECK_EQ(close(fd), 0);
    return CASE_PASS;
}

/* GDRSIM_FAIL from the environment (run.sh sets GET_VERSION:1:EIO,cuInit:2:999). */
int t_fail_env(void)
{
    SKIP_IF(!env_is("GDRSIM_FAIL", "GET_VERSION:1:EIO,cuInit:2:999"));
    int fd = dev_open();
    struct gdrdrv_get_version_params v;
    CHECK_EQ(xioctl(fd, GDRDRV_IOC_GET_VERSION, &v), EIO);
    CHECK_EQ(xioctl(fd, GDRDRV_IOC_GET_VERSION, &v), 0);
    CHECK_EQ(cuInit(0), CUDA_SUCCESS);
    CHECK_EQ(cuInit(0), CUDA_ERROR_UNKNOWN);
    CHECK_EQ(cuInit(0), CUDA_SUCCESS);
    close(fd);
    return CASE_PASS;
}

/* GDRSIM_NO_DEVICE and GDRSIM_DEVICE_MODE. */
int t_device_node(void)
{
    if (env_is("GDRSIM_NO_DEVICE", "1")) {
        CHECK_EQ(dev_open(), -1);
        CHECK_EQ(errno, ENOENT);
        CHECK_EQ(open("/dev/gdrdrv", O_RDONLY), -1);
        return CASE_PASS;
    }
    if (env_is("GDRSIM_DEVICE_MODE", "0604") && env_is("GDRSIM_AS_USER", "1")) {
        CHECK_EQ(dev_open(), -1);
        CHECK_EQ(errno, EACCES);
        int fd = open("/dev/gdrdrv", O_RDONLY);
        REQUIRE(fd >= 0);
        struct gdrdrv_get_version_params v;
        CHECK_EQ(xioctl(fd, GDRDRV_IOC_GET_VERSION, &v), 0);
        /* a read-only file cannot be mapped shared and writable */
        CHECK(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED && errno == EACCES);
        close(fd);
        return CASE_PASS;
    }
    SKIP_IF(device_blocked());
    /* every way into open(2) reaches the emulated device */
    int fds[8];
    fds[0] = open("/dev/gdrdrv", O_RDWR);
    fds[1] = open64("/dev/gdrdrv", O_RDWR);
    fds[2] = openat(AT_FDCWD, "/dev/gdrdrv", O_RDWR);
    fds[3] = openat64(-1, "/dev/gdrdrv", O_RDWR); /* absolute path: dirfd unused */
    fds[4] = __open_2("/dev/gdrdrv", O_RDWR);
    fds[5] = __open64_2("/dev/gdrdrv", O_RDWR);
    fds[6] = __openat_2(AT_FDCWD, "/dev/gdrdrv", O_RDWR);
    fds[7] = __openat64_2(AT_FDCWD, "/dev/gdrdrv", O_RDWR);
    for (int k = 0; k < 8; k++) {
        struct gdrdrv_get_version_params v = {0, 0};
        CHECK(fds[k] >= 0);
        CHECK_EQ(xioctl(fds[k], GDRDRV_IOC_GET_VERSION, &v), 0);
        CHECK_EQ(v.minimum_gdr_api_version, 0x20000);
    }
    CHECK_EQ(counters().open_files, 8);
    for (int k = 0; k < 8; k++)
        CHECK_EQ(close(fds[k]), 0);
    CHECK_EQ(counters().open_files, 0);
    CHECK_EQ(open("/dev/gdrdrv1", O_RDWR), -1); /* only the one node */
    return CASE_PASS;
}

/* Counters: ioctls, allocations. */
int t_counters(void)
{
    SKIP_IF(device_blocked());
    struct gdrsim_counters c0 = counters();
    CHECK_EQ(c0.live_allocations, 0);
    cuda_up();
    CUdeviceptr a = dalloc(100), b = dalloc(200);
    CHECK_EQ(counters().live_allocations, 2);
    int fd = dev_open();
    struct gdrdrv_get_version_params v;
    xioctl(fd, GDRDRV_IOC_GET_VERSION, &v);
    xioctl(fd, TCGETS, &v);
    CHECK_EQ(counters().ioctls, c0.ioctls + 2);
    struct termios t;
    tcgetattr(0, &t); /* not the device: not counted */
    CHECK_EQ(counters().ioctls, c0.ioctls + 2);
    CU(cuMemFree(a));
    CU(cuMemFree(b));
    CHECK_EQ(counters().live_allocations, 0);
    /* a short size copies only what fits */
    struct gdrsim_counters part;
    memset(&part, 0xee, sizeof(part));
    CHECK_EQ(gdrsim_get_counters(&part, 8), 0);
    CHECK_EQ(part.live_pins, 0);
    CHECK_EQ(part.live_mappings, 0xeeeeeeeeeeeeeeeeULL);
    CHECK_EQ(gdrsim_get_counters(NULL, 8), EINVAL);
    close(fd);
    return CASE_PASS;
}
