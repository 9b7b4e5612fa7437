/* Tests of the gdrdrv / CUDA emulator through raw open/ioctl/mmap, exactly as a driver
 * client sees them. Each case adapts to the GDRSIM_* settings it runs under (run.sh runs the
 * suite under several) and skips itself where it does not apply. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "gdrsim.h"

/* The C library's fortified open entry points (called by _FORTIFY_SOURCE builds). */
extern int __open_2(const char *, int);
extern int __open64_2(const char *, int);
extern int __openat_2(int, const char *, int);
extern int __openat64_2(int, const char *, int);
#include "harness.h"

/* gdrdrv's request values (x86-64/aarch64) and parameter layouts. */
#define IOC_PIN_BUFFER 0xC028DA01UL
#define IOC_UNPIN_BUFFER 0xC008DA02UL
#define IOC_GET_CB_FLAG 0xC008DA03UL
#define IOC_GET_INFO 0xC008DA04UL
#define IOC_GET_INFO_V2 0xC008DA05UL
#define IOC_GET_ATTR 0xC008DA06UL
#define IOC_PIN_BUFFER_V2 0xC020DA07UL
#define IOC_REQ_MAPPING_TYPE 0xC008DA08UL
#define IOC_GET_VERSION 0xC008DAFFUL

struct pin_v1 { uint64_t addr, size, p2p_token; uint32_t va_space, pad; uint64_t handle; };
struct pin_v2 { uint64_t addr, size; uint32_t flags, pad; uint64_t handle; };
struct cb_flag { uint64_t handle; uint32_t flag, pad; };
struct info {
    uint64_t handle, va, mapped_size;
    uint32_t page_size, tsc_khz;
    uint64_t tm_cycles;
    uint32_t mapped_or_type, wc;
};
struct attr { uint32_t attr, val; };
struct req { uint64_t handle; uint32_t type, pad; };
struct version { uint32_t version, min_api; };

enum { MR_NONE, MR_WC, MR_CACHING, MR_DEVICE };
#define GPU_PAGE 0x10000UL
#define PAGE_SHIFT 12

/* ---- the settings the suite runs under ---- */

static int env_is(const char *name, const char *value)
{
    const char *v = getenv(name);
    return v && strcmp(v, value) == 0;
}

static int driver_minor(void)
{
    const char *v = getenv("GDRSIM_DRIVER_VERSION");
    return v && strncmp(v, "2.", 2) == 0 ? atoi(v + 2) : 6;
}

static int persistent(void) { return !env_is("GDRSIM_PERSISTENT", "0") && driver_minor() >= 5; }
static int coherent(void) { return env_is("GDRSIM_PROFILE", "coherent"); }
/* Settings that make the device unusable: most cases skip under them. */
static int device_blocked(void)
{
    return env_is("GDRSIM_NO_DEVICE", "1") || getenv("GDRSIM_DEVICE_MODE") || getenv("GDRSIM_FAIL");
}

/* ---- driver calls: 0 or the errno ---- */

static int xioctl(int fd, unsigned long req, void *arg) { return ioctl(fd, req, arg) == 0 ? 0 : errno; }

static int dev_open(void) { return open("/dev/gdrdrv", O_RDWR | O_CLOEXEC); }

static int pin(int fd, uint64_t addr, uint64_t size, uint32_t flags, uint64_t *h)
{
    struct pin_v2 p = {addr, size, flags, 0, ~0ULL};
    int e = xioctl(fd, IOC_PIN_BUFFER_V2, &p);
    if (!e && h)
        *h = p.handle;
    return e;
}

static int pin_v1(int fd, uint64_t addr, uint64_t size, uint64_t token, uint32_t vas, uint64_t *h)
{
    struct pin_v1 p = {addr, size, token, vas, 0, ~0ULL};
    int e = xioctl(fd, IOC_PIN_BUFFER, &p);
    if (!e && h)
        *h = p.handle;
    return e;
}

static int unpin(int fd, uint64_t h)
{
    uint64_t x = h;
    return xioctl(fd, IOC_UNPIN_BUFFER, &x);
}

static int info_v2(int fd, uint64_t h, struct info *i)
{
    memset(i, 0, sizeof(*i));
    i->handle = h;
    return xioctl(fd, IOC_GET_INFO_V2, i);
}

static int info_v1(int fd, uint64_t h, struct info *i)
{
    memset(i, 0, sizeof(*i));
    i->handle = h;
    return xioctl(fd, IOC_GET_INFO, i);
}

static int req_type(int fd, uint64_t h, uint32_t t)
{
    struct req r = {h, t, 0};
    return xioctl(fd, IOC_REQ_MAPPING_TYPE, &r);
}

static int cb(int fd, uint64_t h, uint32_t *flag)
{
    struct cb_flag c = {h, 7, 0};
    int e = xioctl(fd, IOC_GET_CB_FLAG, &c);
    *flag = c.flag;
    return e;
}

static void *map(int fd, uint64_t h, size_t len)
{
    return mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)(h << PAGE_SHIFT));
}

static struct gdrsim_counters counters(void)
{
    struct gdrsim_counters c;
    memset(&c, 0xff, sizeof(c));
    CHECK_EQ(gdrsim_get_counters(&c, sizeof(c)), 0);
    return c;
}

/* ---- CUDA shorthands ---- */

#define CU(call) CHECK_EQ((call), CUDA_SUCCESS)

static void cuda_up(void)
{
    CUdevice dev;
    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDeviceGet(&dev, 0));
    CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU(cuCtxSetCurrent(ctx));
}

static CUdeviceptr dalloc(size_t size)
{
    CUdeviceptr p = 0;
    CU(cuMemAlloc(&p, size));
    return p;
}

/* A 64 KiB-aligned pointer inside an allocation of size + 64 KiB. */
static CUdeviceptr dalloc_aligned(size_t size, CUdeviceptr *raw)
{
    *raw = dalloc(size + GPU_PAGE);
    return (*raw + GPU_PAGE - 1) & ~(GPU_PAGE - 1);
}

#define SKIP_IF(cond)          \
    do {                       \
        if (cond)              \
            return SKIP;       \
    } while (0)

/* ================================ cases ================================ */

/* D.1: GET_VERSION's value and request number. */
static int t_version(void)
{
    SKIP_IF(device_blocked());
    CHECK_EQ(IOC_GET_VERSION, 0xC008DAFFUL);
    int fd = dev_open();
    CHECK(fd >= 0);
    struct version v = {0, 0};
    CHECK_EQ(xioctl(fd, IOC_GET_VERSION, &v), 0);
    CHECK_EQ(v.version, 0x20000 | driver_minor());
    CHECK_EQ(v.min_api, 0x20000);
    CHECK_EQ(close(fd), 0);
    return PASS;
}

/* D.2: the dispatcher's order of errors. */
static int t_dispatcher(void)
{
    SKIP_IF(device_blocked());
    int fd = dev_open();
    CHECK(fd >= 0);
    char buf[64] = {0};
    CHECK_EQ(xioctl(fd, 0xC008DA09UL, buf), ENOTTY);   /* unknown nr */
    CHECK_EQ(xioctl(fd, 0xC010DA02UL, buf), ENOTTY);   /* right nr, wrong size */
    CHECK_EQ(xioctl(fd, 0x4008DAFFUL, buf), ENOTTY);   /* right nr, wrong direction */
    struct termios t;
    CHECK_EQ(xioctl(fd, TCGETS, &t), EINVAL);          /* other type: EINVAL, not ENOTTY */
    CHECK_EQ(xioctl(fd, IOC_GET_VERSION, (void *)8), EFAULT); /* bad pointer */
    close(fd);
    return PASS;
}

/* D.3: PIN_BUFFER_V2 argument checks and handle numbering. */
static int t_pin_v2(void)
{
    SKIP_IF(device_blocked() || driver_minor() < 5);
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(512 << 10, &raw);
    int fd = dev_open();
    uint64_t h = 99;
    CHECK_EQ(pin(fd, 0, GPU_PAGE, 0, &h), EINVAL);
    CHECK_EQ(pin(fd, d, GPU_PAGE, 2, &h), EINVAL);
    CHECK_EQ(pin(fd, d, GPU_PAGE, 1, &h), persistent() ? 0 : EINVAL);
    if (persistent())
        CHECK_EQ(unpin(fd, h), 0);
    static char host[GPU_PAGE * 2];
    CHECK_EQ(pin(fd, (uint64_t)host, GPU_PAGE, 0, &h), EINVAL);
    CHECK_EQ(pin(fd, d, 0, 0, &h), EINVAL); /* aligned address, size 0 */
    close(fd);

    fd = dev_open();
    uint64_t h0, h1, h2;
    CHECK_EQ(pin(fd, d, 320 << 10, 0, &h0), 0);
    CHECK_EQ(pin(fd, d, GPU_PAGE, 0, &h1), 0);
    CHECK_EQ(pin(fd, d, GPU_PAGE, 0, &h2), 0);
    CHECK_EQ(h0, 0);
    CHECK_EQ(h1, 80);
    CHECK_EQ(h2, 96);
    CHECK_EQ(unpin(fd, h1), 0);
    uint64_t h3;
    CHECK_EQ(pin(fd, d + 5, 1, 0, &h3), 0); /* unaligned, tiny: still one page */
    CHECK_EQ(h3, 112);                      /* numbers are never reused */
    CHECK_EQ(unpin(fd, h1), EINVAL);        /* gone */
    CHECK_EQ(unpin(fd, 1), EINVAL);         /* never existed: EINVAL, not the oldest MR */
    struct gdrsim_counters c = counters();
    CHECK_EQ(c.live_pins, 3);
    close(fd);
    CHECK_EQ(counters().live_pins, 0);
    return PASS;
}

/* D.4: PIN_BUFFER (V1) and its tokens. */
static int t_pin_v1_tokens(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    CUDA_POINTER_ATTRIBUTE_P2P_TOKENS tok;
    CU(cuPointerGetAttribute(&tok, CU_POINTER_ATTRIBUTE_P2P_TOKENS, d));
    int fd = dev_open();
    uint64_t h;
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, tok.p2pToken, tok.vaSpaceToken, &h), persistent() ? EINVAL : 0);
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), 0);
    CHECK_EQ(pin_v1(fd, 0, GPU_PAGE, 0, 0, &h), EINVAL);
    close(fd);
    return PASS;
}

/* D.5: rounding to GPU pages. */
static int t_rounding(void)
{
    SKIP_IF(device_blocked() || driver_minor() < 4);
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(4 * GPU_PAGE, &raw);
    int fd = dev_open();
    uint64_t h;
    CHECK_EQ(pin_v1(fd, d + 0x1234, 0x10000, 0, 0, &h), 0);
    struct info i;
    CHECK_EQ(info_v2(fd, h, &i), 0);
    CHECK_EQ(i.va, d);
    CHECK_EQ(i.mapped_size, 0x20000);
    CHECK_EQ(i.page_size, GPU_PAGE);
    CHECK_EQ(i.mapped_or_type, MR_NONE);
    close(fd);
    return PASS;
}

/* D.6: mmap rules. */
static int t_mmap_rules(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(4 * GPU_PAGE, &raw);
    CU(cuMemsetD8(d, 0x11, 4 * GPU_PAGE));
    int fd = dev_open();
    uint64_t hu, h;
    CHECK_EQ(pin_v1(fd, d + 0x100, GPU_PAGE, 0, 0, &hu), 0);
    CHECK(map(fd, hu, GPU_PAGE) == MAP_FAILED && errno == EINVAL); /* unaligned pin */
    CHECK_EQ(pin_v1(fd, d, 2 * GPU_PAGE, 0, 0, &h), 0);
    CHECK(map(fd, h, 3 * GPU_PAGE) == MAP_FAILED && errno == EINVAL); /* too long */
    CHECK(map(fd, 12345, GPU_PAGE) == MAP_FAILED && errno == EINVAL); /* no such handle */
    unsigned char *p = map(fd, h, 2 * GPU_PAGE);
    CHECK(p != MAP_FAILED);
    CHECK(map(fd, h, GPU_PAGE) == MAP_FAILED && errno == EINVAL); /* second mapping */
    CHECK_EQ(p[5], 0x11);
    p[5] = 0x22;
    unsigned char back = 0;
    CU(cuMemcpyDtoH(&back, d + 5, 1));
    CHECK_EQ(back, 0x22);
    CHECK_EQ(munmap(p, 2 * GPU_PAGE), 0);
    /* maps again; partial (placed over a PROT_NONE reservation so the next page is known) */
    unsigned char *r = mmap(NULL, 2 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(r != MAP_FAILED);
    p = mmap(r, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, (off_t)(h << PAGE_SHIFT));
    CHECK(p == r);
    CHECK_EQ(p[5], 0x22);
    CHECK_EQ(probe(p + 4096, 0, NULL), SIGSEGV); /* past the partial mapping */
    CHECK_EQ(counters().live_mappings, 1);
    CHECK_EQ(munmap(p, 2 * 4096), 0);
    CHECK_EQ(counters().live_mappings, 0);
    close(fd);
    return PASS;
}

/* D.7 and the profiles: REQ_MAPPING_TYPE. */
static int t_req_mapping_type(void)
{
    SKIP_IF(device_blocked() || driver_minor() < 5);
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    int fd = dev_open();
    uint64_t h;
    CHECK_EQ(pin(fd, d, GPU_PAGE, 0, &h), 0);
    CHECK_EQ(req_type(fd, h, 4), EINVAL);
    CHECK_EQ(req_type(fd, 4242, MR_WC), EINVAL);
    CHECK_EQ(req_type(fd, h, MR_DEVICE), EOPNOTSUPP);
    CHECK_EQ(req_type(fd, h, MR_CACHING), coherent() ? 0 : EOPNOTSUPP);
    CHECK_EQ(req_type(fd, h, MR_WC), 0);
    void *p = map(fd, h, GPU_PAGE);
    CHECK(p != MAP_FAILED);
    struct info i;
    CHECK_EQ(info_v2(fd, h, &i), 0);
    CHECK_EQ(i.mapped_or_type, MR_WC);
    CHECK_EQ(req_type(fd, h, MR_NONE), EBUSY);
    munmap(p, GPU_PAGE);
    if (coherent()) {
        CHECK_EQ(req_type(fd, h, MR_CACHING), 0);
        p = map(fd, h, GPU_PAGE);
        CHECK_EQ(info_v2(fd, h, &i), 0);
        CHECK_EQ(i.mapped_or_type, MR_CACHING);
        munmap(p, GPU_PAGE);
        if (persistent()) { /* FORCE_PCIE pins are never cached */
            uint64_t hf;
            CHECK_EQ(pin(fd, d, GPU_PAGE, 1, &hf), 0);
            CHECK_EQ(req_type(fd, hf, MR_CACHING), EOPNOTSUPP);
            CHECK_EQ(req_type(fd, hf, MR_NONE), 0);
            p = map(fd, hf, GPU_PAGE);
            CHECK_EQ(info_v2(fd, hf, &i), 0);
            CHECK_EQ(i.mapped_or_type, MR_WC);
            munmap(p, GPU_PAGE);
        }
    }
    close(fd);
    return PASS;
}

/* D.8: GET_INFO_V2 and GET_INFO through a mapping's life. */
static int t_info(void)
{
    SKIP_IF(device_blocked() || driver_minor() < 4);
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    int fd = dev_open();
    uint64_t h;
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), 0);
    struct info i;
    CHECK_EQ(info_v2(fd, h, &i), 0);
    CHECK_EQ(i.mapped_or_type, MR_NONE);
    void *p = map(fd, h, GPU_PAGE);
    CHECK(p != MAP_FAILED);
    uint32_t dflt = coherent() ? MR_CACHING : MR_WC;
    CHECK_EQ(info_v2(fd, h, &i), 0);
    CHECK_EQ(i.mapped_or_type, dflt);
    CHECK_EQ(info_v1(fd, h, &i), 0);
    CHECK_EQ(i.mapped_or_type, 1);
    CHECK_EQ(i.wc, dflt == MR_WC);
    CHECK_EQ(i.va, d);
    munmap(p, GPU_PAGE);
    CHECK_EQ(info_v2(fd, h, &i), 0);
    CHECK_EQ(i.mapped_or_type, MR_NONE);
    CHECK_EQ(info_v2(fd, 777, &i), EINVAL);
    close(fd);
    return PASS;
}

/* D.9: freeing pinned, mapped memory, in both modes. */
static int t_free_while_mapped(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    int fd = dev_open();
    uint64_t h;
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), 0);
    volatile unsigned char *p = map(fd, h, GPU_PAGE);
    CHECK(p != MAP_FAILED);
    p[0] = 0x77;
    CU(cuMemFree(raw));
    CHECK_EQ(counters().live_allocations, 0);
    uint32_t flag = 9;
    if (persistent()) {
        unsigned char v = 0;
        CHECK_EQ(probe(p, 0, &v), 0);
        CHECK_EQ(v, 0x77);
        /* the pinned pages are not handed out again while pinned */
        CUdeviceptr again = dalloc(GPU_PAGE * 2);
        CHECK(again + 2 * GPU_PAGE <= d || again >= d + GPU_PAGE);
        CHECK_EQ(cb(fd, h, &flag), 0);
        CHECK_EQ(flag, 0);
    } else {
        CHECK_EQ(probe(p, 0, NULL), SIGBUS);
        CHECK_EQ(cb(fd, h, &flag), 0);
        CHECK_EQ(flag, 1);
        struct info i;
        CHECK_EQ(info_v1(fd, h, &i), 0);
        CHECK_EQ(i.va, d);
        CHECK_EQ(i.mapped_or_type, 0);
    }
    CHECK_EQ(munmap((void *)p, GPU_PAGE), 0);
    if (!persistent())
        CHECK(map(fd, h, GPU_PAGE) == MAP_FAILED && errno == EINVAL);
    CHECK_EQ(unpin(fd, h), 0);
    CHECK_EQ(close(fd), 0);
    struct gdrsim_counters c = counters();
    CHECK_EQ(c.live_pins, 0);
    CHECK_EQ(c.open_files, 0);
    return PASS;
}

/* Non-persistent: only pins overlapping the freed allocation are invalidated. */
static int t_invalidate_only_overlapping(void)
{
    SKIP_IF(device_blocked() || persistent());
    cuda_up();
    CUdeviceptr ra, a = dalloc_aligned(GPU_PAGE, &ra);
    CUdeviceptr rb, b = dalloc_aligned(GPU_PAGE, &rb);
    int fd = dev_open();
    uint64_t ha, hb;
    CHECK_EQ(pin_v1(fd, a, GPU_PAGE, 0, 0, &ha), 0);
    CHECK_EQ(pin_v1(fd, b, GPU_PAGE, 0, 0, &hb), 0);
    volatile unsigned char *pb = map(fd, hb, GPU_PAGE);
    pb[0] = 3;
    CU(cuMemFree(ra));
    uint32_t fa, fb;
    CHECK_EQ(cb(fd, ha, &fa), 0);
    CHECK_EQ(cb(fd, hb, &fb), 0);
    CHECK_EQ(fa, 1);
    CHECK_EQ(fb, 0);
    unsigned char v = 0;
    CHECK_EQ(probe(pb, 0, &v), 0);
    CHECK_EQ(v, 3);
    /* after the callback: NONE and WC requests are still accepted, CACHING never */
    CHECK_EQ(req_type(fd, ha, MR_CACHING), driver_minor() >= 5 ? EOPNOTSUPP : ENOTTY);
    CHECK_EQ(req_type(fd, ha, MR_WC), driver_minor() >= 5 ? 0 : ENOTTY);
    CHECK(map(fd, ha, GPU_PAGE) == MAP_FAILED && errno == EINVAL);
    close(fd);
    return PASS;
}

/* D.10: unpin (and close through libgdrapi's order) while mapped gives SIGBUS. */
static int t_unpin_while_mapped(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    int fd = dev_open();
    uint64_t h;
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), 0);
    volatile unsigned char *p = map(fd, h, GPU_PAGE);
    CHECK(p != MAP_FAILED);
    p[1] = 1;
    CHECK_EQ(unpin(fd, h), 0);
    CHECK_EQ(probe(p, 0, NULL), SIGBUS);
    CHECK_EQ(probe(p, 1, NULL), SIGBUS);
    CHECK_EQ(counters().live_pins, 0);
    CHECK_EQ(munmap((void *)p, GPU_PAGE), 0);
    CHECK_EQ(counters().live_mappings, 0);
    close(fd);
    return PASS;
}

/* D.11: a forked child may not use the parent's file and has none of its mappings. */
static int t_fork_child(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    int fd = dev_open();
    uint64_t h, h2;
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), 0);
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h2), 0);
    volatile unsigned char *p = map(fd, h, GPU_PAGE);
    p[0] = 42;
    uint64_t before = counters().ioctls;
    pid_t pid = fork();
    if (pid == 0) {
        struct version v;
        if (xioctl(fd, IOC_GET_VERSION, &v) != EACCES)
            _exit(10);
        if (xioctl(fd, 0xC008DA09UL, &v) != EACCES) /* ownership is checked before the request */
            _exit(11);
        if (pin_v1(fd, d, GPU_PAGE, 0, 0, NULL) != EACCES || unpin(fd, h) != EACCES)
            _exit(12);
        if (map(fd, h2, GPU_PAGE) != MAP_FAILED || errno != EACCES)
            _exit(13);
        if (probe(p, 0, NULL) != SIGSEGV)
            _exit(14);
        if (close(fd) != 0) /* does not release the parent's file */
            _exit(15);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st));
    CHECK_EQ(WEXITSTATUS(st), 0);
    CHECK_EQ(counters().ioctls, before + 4); /* the child's ioctls reached the driver */
    unsigned char v = 0;
    CHECK_EQ(probe(p, 0, &v), 0);
    CHECK_EQ(v, 42);
    struct info i;
    CHECK_EQ(info_v1(fd, h, &i), 0);
    CHECK_EQ(counters().live_pins, 2);
    close(fd);
    return PASS;
}

/* D.12: an fd received over a unix socket is refused. */
static int t_scm_rights(void)
{
    SKIP_IF(device_blocked());
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
    pid_t pid = fork();
    if (pid == 0) {
        char byte;
        char cbuf[CMSG_SPACE(sizeof(int))];
        struct iovec iov = {&byte, 1};
        struct msghdr m = {0};
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = cbuf;
        m.msg_controllen = sizeof(cbuf);
        if (recvmsg(sv[1], &m, 0) != 1)
            _exit(20);
        int fd;
        memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
        struct version v;
        if (xioctl(fd, IOC_GET_VERSION, &v) != EACCES)
            _exit(21);
        struct termios t;
        if (xioctl(fd, TCGETS, &t) != EINVAL)
            _exit(22);
        if (map(fd, 0, GPU_PAGE) != MAP_FAILED || errno != EACCES)
            _exit(23);
        _exit(0);
    }
    int fd = dev_open();
    CHECK(fd >= 0);
    char byte = 'x';
    char cbuf[CMSG_SPACE(sizeof(int))];
    memset(cbuf, 0, sizeof(cbuf));
    struct iovec iov = {&byte, 1};
    struct msghdr m = {0};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = cbuf;
    m.msg_controllen = sizeof(cbuf);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    CHECK_EQ(sendmsg(sv[0], &m, 0), 1);
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st));
    CHECK_EQ(WEXITSTATUS(st), 0);
    struct version v;
    CHECK_EQ(xioctl(fd, IOC_GET_VERSION, &v), 0); /* still fine for the opener */
    close(fd);
    return PASS;
}

/* D.13: close with pins and no mappings unpins; close with a mapping defers the release. */
static int t_close_semantics(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(2 * GPU_PAGE, &raw);
    int fd = dev_open();
    uint64_t h;
    for (int k = 0; k < 3; k++)
        CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), 0);
    struct gdrsim_counters c = counters();
    CHECK_EQ(c.live_pins, 3);
    CHECK_EQ(c.open_files, 1);
    CHECK_EQ(close(fd), 0);
    c = counters();
    CHECK_EQ(c.live_pins, 0);
    CHECK_EQ(c.open_files, 0);

    fd = dev_open();
    CHECK_EQ(pin_v1(fd, d, 2 * GPU_PAGE, 0, 0, &h), 0);
    volatile unsigned char *p = map(fd, h, 2 * GPU_PAGE);
    CHECK(p != MAP_FAILED);
    CHECK_EQ(close(fd), 0);
    p[GPU_PAGE] = 9; /* still usable */
    unsigned char v = 0;
    CU(cuMemcpyDtoH(&v, d + GPU_PAGE, 1));
    CHECK_EQ(v, 9);
    c = counters();
    CHECK_EQ(c.live_pins, 1);
    CHECK_EQ(c.open_files, 1);
    CHECK_EQ(munmap((void *)p, 2 * GPU_PAGE), 0);
    c = counters();
    CHECK_EQ(c.live_pins, 0);
    CHECK_EQ(c.open_files, 0);
    CHECK_EQ(c.live_mappings, 0);
    return PASS;
}

/* D.14: GET_ATTR. */
static int t_get_attr(void)
{
    SKIP_IF(device_blocked());
    int fd = dev_open();
    struct attr a = {1, 99};
    if (driver_minor() < 5) {
        CHECK_EQ(xioctl(fd, IOC_GET_ATTR, &a), ENOTTY);
        close(fd);
        return PASS;
    }
    CHECK_EQ(xioctl(fd, IOC_GET_ATTR, &a), 0);
    CHECK_EQ(a.val, persistent());
    a = (struct attr){2, 99};
    CHECK_EQ(xioctl(fd, IOC_GET_ATTR, &a), 0);
    CHECK_EQ(a.val, persistent());
    a = (struct attr){3, 99};
    CHECK_EQ(xioctl(fd, IOC_GET_ATTR, &a), EINVAL);
    CHECK_EQ(a.val, 99);
    close(fd);
    return PASS;
}

/* D.15: pins, maps, unmaps and unpins from several threads at once. */
static int thread_fd;
static CUdeviceptr thread_buf;

static void *worker(void *arg)
{
    (void)arg;
    for (int k = 0; k < 200; k++) {
        uint64_t h;
        if (pin_v1(thread_fd, thread_buf, 4 * GPU_PAGE, 0, 0, &h))
            return (void *)1;
        volatile unsigned char *p = map(thread_fd, h, 4 * GPU_PAGE);
        if (p == MAP_FAILED)
            return (void *)2;
        p[k] = (unsigned char)k;
        if (p[k] != (unsigned char)k)
            return (void *)3;
        if (munmap((void *)p, 4 * GPU_PAGE) || unpin(thread_fd, h))
            return (void *)4;
    }
    return NULL;
}

static int t_threads(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw;
    thread_buf = dalloc_aligned(4 * GPU_PAGE, &raw);
    thread_fd = dev_open();
    pthread_t t[4];
    for (int k = 0; k < 4; k++)
        CHECK_EQ(pthread_create(&t[k], NULL, worker, NULL), 0);
    for (int k = 0; k < 4; k++) {
        void *r;
        pthread_join(t[k], &r);
        CHECK(r == NULL);
    }
    struct gdrsim_counters c = counters();
    CHECK_EQ(c.live_pins, 0);
    CHECK_EQ(c.live_mappings, 0);
    close(thread_fd);
    return PASS;
}

/* Old drivers answer newer ioctls with ENOTTY; the old ones work. */
static int t_old_versions(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    int fd = dev_open();
    int m = driver_minor();
    uint64_t h;
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), 0);
    struct info i;
    CHECK_EQ(info_v2(fd, h, &i), m >= 4 ? 0 : ENOTTY);
    CHECK_EQ(pin(fd, d, GPU_PAGE, 0, NULL), m >= 5 ? 0 : ENOTTY);
    CHECK_EQ(req_type(fd, h, MR_WC), m >= 5 ? 0 : ENOTTY);
    struct attr a = {1, 0};
    CHECK_EQ(xioctl(fd, IOC_GET_ATTR, &a), m >= 5 ? 0 : ENOTTY);
    CHECK_EQ(info_v1(fd, h, &i), 0);
    uint32_t flag;
    CHECK_EQ(cb(fd, h, &flag), 0);
    close(fd);
    return PASS;
}

/* Fault injection through gdrsim_set_fail. */
static int t_fail_injection(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    CHECK_EQ(gdrsim_set_fail("PIN_BUFFER:2:ENOMEM,open:1:EMFILE"), 0);
    CHECK_EQ(dev_open(), -1);
    CHECK_EQ(errno, EMFILE);
    int fd = dev_open();
    CHECK(fd >= 0);
    uint64_t h;
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), 0);
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), ENOMEM);
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), 0);
    CHECK_EQ(gdrsim_set_fail("GET_VERSION:*:EIO,mmap:1:EAGAIN,munmap:1:EINVAL,close:1:EINTR"), 0);
    struct version v;
    CHECK_EQ(xioctl(fd, IOC_GET_VERSION, &v), EIO);
    CHECK_EQ(xioctl(fd, IOC_GET_VERSION, &v), EIO);
    CHECK(map(fd, h, GPU_PAGE) == MAP_FAILED && errno == EAGAIN);
    void *p = map(fd, h, GPU_PAGE);
    CHECK(p != MAP_FAILED);
    void *anon = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK_EQ(munmap(anon, 4096), 0); /* not ours: not counted */
    CHECK_EQ(munmap(p, GPU_PAGE), -1);
    CHECK_EQ(errno, EINVAL);
    CHECK_EQ(munmap(p, GPU_PAGE), 0);
    CHECK_EQ(close(fd), -1);
    CHECK_EQ(errno, EINTR);
    CHECK_EQ(gdrsim_set_fail("cuMemAlloc_v2:1:2,cuInit:*:CUDA_ERROR_NO_DEVICE"), 0);
    CUdeviceptr q;
    CHECK_EQ(cuMemAlloc(&q, 16), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(cuMemAlloc(&q, 16), CUDA_SUCCESS);
    CHECK_EQ(cuInit(0), CUDA_ERROR_NO_DEVICE);
    CHECK_EQ(gdrsim_set_fail("bogus:1:EINVAL"), EINVAL);
    CHECK_EQ(gdrsim_set_fail("PIN_BUFFER:0:EINVAL"), EINVAL);
    CHECK_EQ(gdrsim_set_fail("PIN_BUFFER:1:ENOPE"), EINVAL);
    CHECK_EQ(cuInit(0), CUDA_ERROR_NO_DEVICE); /* a bad spec leaves the old one */
    CHECK_EQ(gdrsim_set_fail(NULL), 0);
    CHECK_EQ(cuInit(0), CUDA_SUCCESS);
    CHECK_EQ(close(fd), 0);
    return PASS;
}

/* GDRSIM_FAIL from the environment (run.sh sets GET_VERSION:1:EIO,cuInit:2:999). */
static int t_fail_env(void)
{
    SKIP_IF(!env_is("GDRSIM_FAIL", "GET_VERSION:1:EIO,cuInit:2:999"));
    int fd = dev_open();
    struct version v;
    CHECK_EQ(xioctl(fd, IOC_GET_VERSION, &v), EIO);
    CHECK_EQ(xioctl(fd, IOC_GET_VERSION, &v), 0);
    CHECK_EQ(cuInit(0), CUDA_SUCCESS);
    CHECK_EQ(cuInit(0), CUDA_ERROR_UNKNOWN);
    CHECK_EQ(cuInit(0), CUDA_SUCCESS);
    close(fd);
    return PASS;
}

/* GDRSIM_NO_DEVICE and GDRSIM_DEVICE_MODE. */
static int t_device_node(void)
{
    if (env_is("GDRSIM_NO_DEVICE", "1")) {
        CHECK_EQ(dev_open(), -1);
        CHECK_EQ(errno, ENOENT);
        CHECK_EQ(open("/dev/gdrdrv", O_RDONLY), -1);
        return PASS;
    }
    if (env_is("GDRSIM_DEVICE_MODE", "0604") && env_is("GDRSIM_AS_USER", "1")) {
        CHECK_EQ(dev_open(), -1);
        CHECK_EQ(errno, EACCES);
        int fd = open("/dev/gdrdrv", O_RDONLY);
        CHECK(fd >= 0);
        struct version v;
        CHECK_EQ(xioctl(fd, IOC_GET_VERSION, &v), 0);
        /* a read-only file cannot be mapped shared and writable */
        CHECK(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED && errno == EACCES);
        close(fd);
        return PASS;
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
        struct version v = {0, 0};
        CHECK(fds[k] >= 0);
        CHECK_EQ(xioctl(fds[k], IOC_GET_VERSION, &v), 0);
        CHECK_EQ(v.min_api, 0x20000);
    }
    CHECK_EQ(counters().open_files, 8);
    for (int k = 0; k < 8; k++)
        CHECK_EQ(close(fds[k]), 0);
    CHECK_EQ(counters().open_files, 0);
    CHECK_EQ(open("/dev/gdrdrv1", O_RDWR), -1); /* only the one node */
    return PASS;
}

/* Counters: ioctls, allocations. */
static int t_counters(void)
{
    SKIP_IF(device_blocked());
    struct gdrsim_counters c0 = counters();
    CHECK_EQ(c0.live_allocations, 0);
    cuda_up();
    CUdeviceptr a = dalloc(100), b = dalloc(200);
    CHECK_EQ(counters().live_allocations, 2);
    int fd = dev_open();
    struct version v;
    xioctl(fd, IOC_GET_VERSION, &v);
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
    return PASS;
}

/* The CUDA surface: versions, devices, allocation, copies, contexts. */
static void *ctx_thread(void *arg)
{
    CUcontext c = (CUcontext)1;
    cuCtxGetCurrent(&c);
    *(CUcontext *)arg = c;
    return NULL;
}

static int t_cuda_basics(void)
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
    CU(cuMemAllocHost(&hbuf, 4096));
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
    CHECK(strcmp(s, "CUDA_ERROR_NOT_READY") == 0);
    CHECK_EQ(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    CU(cuStreamQuery(0));
    CU(cuStreamSynchronize(0));
    CU(cuCtxSynchronize());
    CU(cuMemFree(p));
    CHECK_EQ(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
    CU(cuCtxSetCurrent(NULL));
    CU(cuDevicePrimaryCtxRelease(dev));
    return PASS;
}

/* Each process has its own fake GPU: a child forked before cuInit gets another one. */
static int t_fork_before_init(void)
{
    SKIP_IF(getenv("GDRSIM_FAIL") != NULL);
    int go[2], done[2];
    CHECK_EQ(pipe(go), 0);
    CHECK_EQ(pipe(done), 0);
    pid_t pid = fork();
    cuda_up();
    CUdeviceptr d = dalloc(4096);
    if (pid == 0) {
        char c;
        if (read(go[0], &c, 1) != 1) /* the parent has written its memory */
            _exit(1);
        if (cuMemsetD8(d, 0xc0, 4096) != CUDA_SUCCESS)
            _exit(2);
        write(done[1], &d, sizeof(d));
        _exit(0);
    }
    CU(cuMemsetD8(d, 0x0a, 4096));
    CHECK_EQ(write(go[1], "x", 1), 1);
    CUdeviceptr cd;
    CHECK_EQ(read(done[0], &cd, sizeof(cd)), sizeof(cd));
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    unsigned char v;
    CU(cuMemcpyDtoH(&v, d, 1));
    CHECK_EQ(v, 0x0a); /* the child wrote its own GPU's memory, not ours */
    return PASS;
}

/* A child that never initialised CUDA cannot pin the parent's memory. */
static int t_pin_foreign_memory(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = dev_open();
        _exit(pin_v1(fd, d, GPU_PAGE, 0, 0, NULL) == EINVAL ? 0 : 1);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return PASS;
}

/* VMM allocations: pin, map, data, and unmap invalidation. */
static int t_vmm(void)
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
    CHECK(p != MAP_FAILED);
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
    return PASS;
}

/* A pin over two VMM handles mapped out of physical order maps both pieces in one mapping. */
static int t_vmm_pieces(void)
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
    CHECK(p != MAP_FAILED);
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
    return PASS;
}

/* A pin whose result cannot be copied back fails with EFAULT and leaves no pin behind. */
static int t_pin_copy_out_fault(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    int fd = dev_open();
    struct pin_v1 *ro = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(ro != MAP_FAILED);
    *ro = (struct pin_v1){d, GPU_PAGE, 0, 0, 0, 0};
    CHECK_EQ(mprotect(ro, 4096, PROT_READ), 0);
    CHECK_EQ(xioctl(fd, IOC_PIN_BUFFER, ro), EFAULT);
    CHECK_EQ(counters().live_pins, 0);
    CHECK_EQ(xioctl(fd, IOC_PIN_BUFFER, (void *)16), EFAULT);
    close(fd);
    return PASS;
}

/* The DMA-BUF backend's needs: cuGetProcAddress, cuMemGetHandleForAddressRange. */
typedef CUresult (*get_proc4_t)(const char *, void **, int, cuuint64_t);
typedef CUresult (*get_attr_t)(int *, CUdevice_attribute, CUdevice);

static int t_dmabuf(void)
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
    CHECK(gp4 != NULL);
    CU(gp4("cuMemGetHandleForAddressRange", &fn, 13030, 0));
    CHECK(fn != NULL);
    get_attr_t ga = NULL;
    CU(gp4("cuDeviceGetAttribute", (void **)&ga, 13030, 0));
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
        return PASS;
    }
    CU(r);
    CHECK(dfd >= 0);
    CHECK_EQ(counters().live_dmabufs, 1);
    unsigned char *p = mmap(NULL, 2 * GPU_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, dfd, 0);
    CHECK(p != MAP_FAILED);
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
    return PASS;
}

/* The fast path leaves ordinary files alone. */
static int t_passthrough(void)
{
    int fd = open("/dev/null", O_RDWR);
    CHECK(fd >= 0);
    struct termios t;
    CHECK_EQ(xioctl(fd, TCGETS, &t), ENOTTY);
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    CHECK_EQ(munmap(p, 4096), 0);
    CHECK_EQ(close(fd), 0);
    CHECK_EQ(close(fd), -1);
    CHECK_EQ(errno, EBADF);
    return PASS;
}

/* A device fd closed behind the emulator's back (a raw close system call, as close_range or
 * closefrom do) and reused is not mistaken for the device. */
static int t_stale_fd(void)
{
    SKIP_IF(device_blocked());
    int fd = dev_open();
    CHECK(fd >= 0);
    CHECK_EQ(counters().open_files, 1);
    CHECK_EQ(syscall(SYS_close, fd), 0);
    int nfd = open("/dev/null", O_RDWR);
    CHECK_EQ(nfd, fd);
    struct termios t;
    CHECK_EQ(xioctl(nfd, TCGETS, &t), ENOTTY);
    CHECK_EQ(counters().open_files, 0);
    /* the real /dev/null answers, not the emulated driver */
    CHECK(mmap(NULL, 4096, PROT_READ, MAP_SHARED, nfd, 0) == MAP_FAILED && errno == ENODEV);
    CHECK_EQ(close(nfd), 0);
    return PASS;
}

static const struct test_case cases[] = {
    {"version", t_version},
    {"dispatcher", t_dispatcher},
    {"pin_v2", t_pin_v2},
    {"pin_v1_tokens", t_pin_v1_tokens},
    {"rounding", t_rounding},
    {"mmap_rules", t_mmap_rules},
    {"req_mapping_type", t_req_mapping_type},
    {"info", t_info},
    {"free_while_mapped", t_free_while_mapped},
    {"invalidate_only_overlapping", t_invalidate_only_overlapping},
    {"unpin_while_mapped", t_unpin_while_mapped},
    {"fork_child", t_fork_child},
    {"scm_rights", t_scm_rights},
    {"close_semantics", t_close_semantics},
    {"get_attr", t_get_attr},
    {"threads", t_threads},
    {"old_versions", t_old_versions},
    {"fail_injection", t_fail_injection},
    {"fail_env", t_fail_env},
    {"device_node", t_device_node},
    {"counters", t_counters},
    {"cuda_basics", t_cuda_basics},
    {"fork_before_init", t_fork_before_init},
    {"pin_foreign_memory", t_pin_foreign_memory},
    {"vmm", t_vmm},
    {"vmm_pieces", t_vmm_pieces},
    {"pin_copy_out_fault", t_pin_copy_out_fault},
    {"dmabuf", t_dmabuf},
    {"passthrough", t_passthrough},
    {"stale_fd", t_stale_fd},
};

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    return run_tests(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
