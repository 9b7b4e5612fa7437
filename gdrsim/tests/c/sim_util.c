/* Shorthands for driver and CUDA calls, and the settings the suite runs under. */
#include "sim.h"

#include <setjmp.h>
#include <signal.h>

/* ---- the settings the suite runs under ---- */

int env_is(const char *name, const char *value)
{
    const char *v = getenv(name);
    return v && strcmp(v, value) == 0;
}

int driver_minor(void)
{
    const char *v = getenv("GDRSIM_DRIVER_VERSION");
    return v && strncmp(v, "2.", 2) == 0 ? atoi(v + 2) : 6;
}

int persistent(void) { return !env_is("GDRSIM_PERSISTENT", "0") && driver_minor() >= 5; }
int coherent(void) { return env_is("GDRSIM_PROFILE", "coherent"); }
/* Settings that make the device unusable: most cases skip under them. */
int device_blocked(void)
{
    return env_is("GDRSIM_NO_DEVICE", "1") || getenv("GDRSIM_DEVICE_MODE") || getenv("GDRSIM_FAIL") ||
           (getenv("GDRSIM_DEVICE_NODE") && !env_is("GDRSIM_DEVICE_NODE", "char"));
}

/* ---- driver calls: 0 or the errno ---- */

int xioctl(int fd, unsigned long req, void *arg) { return ioctl(fd, req, arg) == 0 ? 0 : errno; }

int dev_open(void) { return open(GDRDRV_DEVICE_PATH, O_RDWR | O_CLOEXEC); }

int pin(int fd, uint64_t addr, uint64_t size, uint32_t flags, uint64_t *h)
{
    struct gdrdrv_pin_buffer_v2_params p = {addr, size, flags, 0, ~0ULL};
    int e = xioctl(fd, GDRDRV_IOC_PIN_BUFFER_V2, &p);
    if (!e && h)
        *h = p.handle;
    return e;
}

int pin_v1(int fd, uint64_t addr, uint64_t size, uint64_t token, uint32_t vas, uint64_t *h)
{
    struct gdrdrv_pin_buffer_params p = {addr, size, token, vas, 0, ~0ULL};
    int e = xioctl(fd, GDRDRV_IOC_PIN_BUFFER, &p);
    if (!e && h)
        *h = p.handle;
    return e;
}

int unpin(int fd, uint64_t h)
{
    struct gdrdrv_unpin_buffer_params p = {h};
    return xioctl(fd, GDRDRV_IOC_UNPIN_BUFFER, &p);
}

int info_v2(int fd, uint64_t h, struct gdrdrv_get_info_v2_params *i)
{
    memset(i, 0, sizeof(*i));
    i->handle = h;
    return xioctl(fd, GDRDRV_IOC_GET_INFO_V2, i);
}

int info_v1(int fd, uint64_t h, struct gdrdrv_get_info_params *i)
{
    memset(i, 0, sizeof(*i));
    i->handle = h;
    return xioctl(fd, GDRDRV_IOC_GET_INFO, i);
}

int req_type(int fd, uint64_t h, uint32_t t)
{
    struct gdrdrv_req_mapping_type_params r = {h, t, 0};
    return xioctl(fd, GDRDRV_IOC_REQ_MAPPING_TYPE, &r);
}

int cb(int fd, uint64_t h, uint32_t *flag)
{
    struct gdrdrv_get_cb_flag_params c = {h, 7, 0};
    int e = xioctl(fd, GDRDRV_IOC_GET_CB_FLAG, &c);
    *flag = c.flag;
    return e;
}

void *map(int fd, uint64_t h, size_t len)
{
    return mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                (off_t)GDRDRV_MMAP_OFFSET(h, PAGE_SHIFT));
}

struct gdrsim_counters counters(void)
{
    struct gdrsim_counters c;
    memset(&c, 0xff, sizeof(c));
    REQUIRE_EQ(gdrsim_get_counters(&c, sizeof(c)), 0);
    return c;
}

/* Which signal touching addr raises (sim.h). */
static sigjmp_buf probe_env;

static void on_fault(int sig)
{
    siglongjmp(probe_env, sig);
}

int probe(volatile unsigned char *addr, int write, unsigned char *val)
{
    struct sigaction sa, old_bus, old_segv;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &old_bus);
    sigaction(SIGSEGV, &sa, &old_segv);
    int sig = sigsetjmp(probe_env, 1);
    if (sig == 0) {
        if (write)
            *addr = 0x5a;
        else if (val)
            *val = *addr;
        else
            (void)*addr;
    }
    sigaction(SIGBUS, &old_bus, NULL);
    sigaction(SIGSEGV, &old_segv, NULL);
    return sig;
}

/* ---- CUDA shorthands: preconditions of the cases that call them ---- */

void cuda_up(void)
{
    CUdevice dev;
    CUcontext ctx;
    CU_REQUIRE(cuInit(0));
    CU_REQUIRE(cuDeviceGet(&dev, 0));
    CU_REQUIRE(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU_REQUIRE(cuCtxSetCurrent(ctx));
}

CUdeviceptr dalloc(size_t size)
{
    CUdeviceptr p = 0;
    CU_REQUIRE(cuMemAlloc(&p, size));
    return p;
}

/* A 64 KiB-aligned pointer inside an allocation of size + 64 KiB. */
CUdeviceptr dalloc_aligned(size_t size, CUdeviceptr *raw)
{
    *raw = dalloc(size + GPU_PAGE);
    return (*raw + GPU_PAGE - 1) & ~(GPU_PAGE - 1);
}
