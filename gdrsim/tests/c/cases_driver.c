/* Cases of the ioctl and mmap interface (reference part D). */
#include "sim.h"

/* D.1: GET_VERSION's value and request number. */
int t_version(void)
{
    SKIP_IF(device_blocked());
    int fd = dev_open();
    REQUIRE(fd >= 0);
    struct gdrdrv_get_version_params v = {0, 0};
    CHECK_EQ(xioctl(fd, GDRDRV_IOC_GET_VERSION, &v), 0);
    CHECK_EQ(v.gdrdrv_version, 0x20000 | driver_minor());
    CHECK_EQ(v.minimum_gdr_api_version, 0x20000);
    CHECK_EQ(close(fd), 0);
    return CASE_PASS;
}

/* D.2: the dispatcher's order of errors. */
int t_dispatcher(void)
{
    SKIP_IF(device_blocked());
    int fd = dev_open();
    REQUIRE(fd >= 0);
    char buf[64] = {0};
    /* unknown nr; right nr, wrong size; right nr, wrong direction */
    CHECK_EQ(xioctl(fd, _IOWR(GDRDRV_IOCTL_TYPE, 9, uint64_t), buf), ENOTTY);
    CHECK_EQ(xioctl(fd, _IOC(_IOC_READ | _IOC_WRITE, GDRDRV_IOCTL_TYPE, 2, 16), buf), ENOTTY);
    CHECK_EQ(xioctl(fd, _IOC(_IOC_WRITE, GDRDRV_IOCTL_TYPE, 255, 8), buf), ENOTTY);
    struct termios t;
    CHECK_EQ(xioctl(fd, TCGETS, &t), EINVAL);          /* other type: EINVAL, not ENOTTY */
    CHECK_EQ(xioctl(fd, GDRDRV_IOC_GET_VERSION, (void *)8), EFAULT); /* bad pointer */
    close(fd);
    return CASE_PASS;
}

/* D.3: PIN_BUFFER_V2 argument checks and handle numbering. */
int t_pin_v2(void)
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
    return CASE_PASS;
}

/* D.4: PIN_BUFFER (V1) and its tokens. */
int t_pin_v1_tokens(void)
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
    return CASE_PASS;
}

/* D.5: rounding to GPU pages. */
int t_rounding(void)
{
    SKIP_IF(device_blocked() || driver_minor() < 4);
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(4 * GPU_PAGE, &raw);
    int fd = dev_open();
    uint64_t h;
    CHECK_EQ(pin_v1(fd, d + 0x1234, 0x10000, 0, 0, &h), 0);
    struct gdrdrv_get_info_v2_params i;
    CHECK_EQ(info_v2(fd, h, &i), 0);
    CHECK_EQ(i.va, d);
    CHECK_EQ(i.mapped_size, 0x20000);
    CHECK_EQ(i.page_size, GPU_PAGE);
    CHECK_EQ(i.mapping_type, GDRDRV_MR_NONE);
    close(fd);
    return CASE_PASS;
}

/* D.6: mmap rules. */
int t_mmap_rules(void)
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
    REQUIRE(p != MAP_FAILED);
    CHECK(map(fd, h, GPU_PAGE) == MAP_FAILED && errno == EINVAL); /* second mapping */
    CHECK_EQ(p[5], 0x11);
    p[5] = 0x22;
    unsigned char back = 0;
    CU(cuMemcpyDtoH(&back, d + 5, 1));
    CHECK_EQ(back, 0x22);
    CHECK_EQ(munmap(p, 2 * GPU_PAGE), 0);
    /* maps again; partial (placed over a PROT_NONE reservation so the next page is known) */
    unsigned char *r = mmap(NULL, 2 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(r != MAP_FAILED);
    p = mmap(r, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
             (off_t)GDRDRV_MMAP_OFFSET(h, PAGE_SHIFT));
    REQUIRE(p == r);
    CHECK_EQ(p[5], 0x22);
    CHECK_EQ(probe(p + 4096, 0, NULL), SIGSEGV); /* past the partial mapping */
    CHECK_EQ(counters().live_mappings, 1);
    CHECK_EQ(munmap(p, 2 * 4096), 0);
    CHECK_EQ(counters().live_mappings, 0);
    close(fd);
    return CASE_PASS;
}

/* D.7 and the profiles: REQ_MAPPING_TYPE. */
int t_req_mapping_type(void)
{
    SKIP_IF(device_blocked() || driver_minor() < 5);
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    int fd = dev_open();
    uint64_t h;
    CHECK_EQ(pin(fd, d, GPU_PAGE, 0, &h), 0);
    CHECK_EQ(req_type(fd, h, 4), EINVAL);
    CHECK_EQ(req_type(fd, 4242, GDRDRV_MR_WC), EINVAL);
    CHECK_EQ(req_type(fd, h, GDRDRV_MR_DEVICE), EOPNOTSUPP);
    CHECK_EQ(req_type(fd, h, GDRDRV_MR_CACHING), coherent() ? 0 : EOPNOTSUPP);
    CHECK_EQ(req_type(fd, h, GDRDRV_MR_WC), 0);
    void *p = map(fd, h, GPU_PAGE);
    CHECK(p != MAP_FAILED);
    struct gdrdrv_get_info_v2_params i;
    CHECK_EQ(info_v2(fd, h, &i), 0);
    CHECK_EQ(i.mapping_type, GDRDRV_MR_WC);
    CHECK_EQ(req_type(fd, h, GDRDRV_MR_NONE), EBUSY);
    munmap(p, GPU_PAGE);
    if (coherent()) {
        CHECK_EQ(req_type(fd, h, GDRDRV_MR_CACHING), 0);
        p = map(fd, h, GPU_PAGE);
        CHECK_EQ(info_v2(fd, h, &i), 0);
        CHECK_EQ(i.mapping_type, GDRDRV_MR_CACHING);
        munmap(p, GPU_PAGE);
        if (persistent()) { /* FORCE_PCIE pins are never cached */
            uint64_t hf;
            CHECK_EQ(pin(fd, d, GPU_PAGE, 1, &hf), 0);
            CHECK_EQ(req_type(fd, hf, GDRDRV_MR_CACHING), EOPNOTSUPP);
            CHECK_EQ(req_type(fd, hf, GDRDRV_MR_NONE), 0);
            p = map(fd, hf, GPU_PAGE);
            CHECK_EQ(info_v2(fd, hf, &i), 0);
            CHECK_EQ(i.mapping_type, GDRDRV_MR_WC);
            munmap(p, GPU_PAGE);
        }
    }
    close(fd);
    return CASE_PASS;
}

/* D.8: GET_INFO_V2 and GET_INFO through a mapping's life. */
int t_info(void)
{
    SKIP_IF(device_blocked() || driver_minor() < 4);
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    int fd = dev_open();
    uint64_t h;
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), 0);
    struct gdrdrv_get_info_v2_params i;
    struct gdrdrv_get_info_params i1;
    CHECK_EQ(info_v2(fd, h, &i), 0);
    CHECK_EQ(i.mapping_type, GDRDRV_MR_NONE);
    void *p = map(fd, h, GPU_PAGE);
    CHECK(p != MAP_FAILED);
    uint32_t dflt = coherent() ? GDRDRV_MR_CACHING : GDRDRV_MR_WC;
    CHECK_EQ(info_v2(fd, h, &i), 0);
    CHECK_EQ(i.mapping_type, dflt);
    CHECK_EQ(info_v1(fd, h, &i1), 0);
    CHECK_EQ(i1.mapped, 1);
    CHECK_EQ(i1.wc_mapping, dflt == GDRDRV_MR_WC);
    CHECK_EQ(i1.va, d);
    munmap(p, GPU_PAGE);
    CHECK_EQ(info_v2(fd, h, &i), 0);
    CHECK_EQ(i.mapping_type, GDRDRV_MR_NONE);
    CHECK_EQ(info_v2(fd, 777, &i), EINVAL);
    close(fd);
    return CASE_PASS;
}

/* D.9: freeing pinned, mapped memory, in both modes. */
int t_free_while_mapped(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    int fd = dev_open();
    uint64_t h;
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), 0);
    volatile unsigned char *p = map(fd, h, GPU_PAGE);
    REQUIRE(p != MAP_FAILED);
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
        struct gdrdrv_get_info_params i;
        CHECK_EQ(info_v1(fd, h, &i), 0);
        CHECK_EQ(i.va, d);
        CHECK_EQ(i.mapped, 0);
    }
    CHECK_EQ(munmap((void *)p, GPU_PAGE), 0);
    if (!persistent())
        CHECK(map(fd, h, GPU_PAGE) == MAP_FAILED && errno == EINVAL);
    CHECK_EQ(unpin(fd, h), 0);
    CHECK_EQ(close(fd), 0);
    struct gdrsim_counters c = counters();
    CHECK_EQ(c.live_pins, 0);
    CHECK_EQ(c.open_files, 0);
    return CASE_PASS;
}

/* Non-persistent: only pins overlapping the freed allocation are invalidated. */
int t_invalidate_only_overlapping(void)
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
    REQUIRE(pb != MAP_FAILED);
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
    CHECK_EQ(req_type(fd, ha, GDRDRV_MR_CACHING), driver_minor() >= 5 ? EOPNOTSUPP : ENOTTY);
    CHECK_EQ(req_type(fd, ha, GDRDRV_MR_WC), driver_minor() >= 5 ? 0 : ENOTTY);
    CHECK(map(fd, ha, GPU_PAGE) == MAP_FAILED && errno == EINVAL);
    close(fd);
    return CASE_PASS;
}

/* D.10: unpin (and close through libgdrapi's order) while mapped gives SIGBUS. */
int t_unpin_while_mapped(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    int fd = dev_open();
    uint64_t h;
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), 0);
    volatile unsigned char *p = map(fd, h, GPU_PAGE);
    REQUIRE(p != MAP_FAILED);
    p[1] = 1;
    CHECK_EQ(unpin(fd, h), 0);
    CHECK_EQ(probe(p, 0, NULL), SIGBUS);
    CHECK_EQ(probe(p, 1, NULL), SIGBUS);
    CHECK_EQ(counters().live_pins, 0);
    CHECK_EQ(munmap((void *)p, GPU_PAGE), 0);
    CHECK_EQ(counters().live_mappings, 0);
    close(fd);
    return CASE_PASS;
}

/* D.13: close with pins and no mappings unpins; close with a mapping defers the release. */
int t_close_semantics(void)
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
    REQUIRE(p != MAP_FAILED);
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
    return CASE_PASS;
}

/* D.14: GET_ATTR. */
int t_get_attr(void)
{
    SKIP_IF(device_blocked());
    int fd = dev_open();
    struct gdrdrv_get_attr_params a = {1, 99};
    if (driver_minor() < 5) {
        CHECK_EQ(xioctl(fd, GDRDRV_IOC_GET_ATTR, &a), ENOTTY);
        close(fd);
        return CASE_PASS;
    }
    CHECK_EQ(xioctl(fd, GDRDRV_IOC_GET_ATTR, &a), 0);
    CHECK_EQ(a.val, persistent());
    a = (struct gdrdrv_get_attr_params){2, 99};
    CHECK_EQ(xioctl(fd, GDRDRV_IOC_GET_ATTR, &a), 0);
    CHECK_EQ(a.val, persistent());
    a = (struct gdrdrv_get_attr_params){3, 99};
    CHECK_EQ(xioctl(fd, GDRDRV_IOC_GET_ATTR, &a), EINVAL);
    CHECK_EQ(a.val, 99);
    close(fd);
    return CASE_PASS;
}

/* Old drivers answer newer ioctls with ENOTTY; the old ones work. */
int t_old_versions(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    int fd = dev_open();
    int m = driver_minor();
    uint64_t h;
    CHECK_EQ(pin_v1(fd, d, GPU_PAGE, 0, 0, &h), 0);
    struct gdrdrv_get_info_v2_params i;
    struct gdrdrv_get_info_params i1;
    CHECK_EQ(info_v2(fd, h, &i), m >= 4 ? 0 : ENOTTY);
    CHECK_EQ(pin(fd, d, GPU_PAGE, 0, NULL), m >= 5 ? 0 : ENOTTY);
    CHECK_EQ(req_type(fd, h, GDRDRV_MR_WC), m >= 5 ? 0 : ENOTTY);
    struct gdrdrv_get_attr_params a = {1, 0};
    CHECK_EQ(xioctl(fd, GDRDRV_IOC_GET_ATTR, &a), m >= 5 ? 0 : ENOTTY);
    CHECK_EQ(info_v1(fd, h, &i1), 0);
    uint32_t flag;
    CHECK_EQ(cb(fd, h, &flag), 0);
    close(fd);
    return CASE_PASS;
}

/* A pin whose result cannot be copied back fails with EFAULT and leaves no pin behind. */
int t_pin_copy_out_fault(void)
{
    SKIP_IF(device_blocked());
    cuda_up();
    CUdeviceptr raw, d = dalloc_aligned(GPU_PAGE, &raw);
    int fd = dev_open();
    struct gdrdrv_pin_buffer_params *ro = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(ro != MAP_FAILED);
    *ro = (struct gdrdrv_pin_buffer_params){d, GPU_PAGE, 0, 0, 0, 0};
    CHECK_EQ(mprotect(ro, 4096, PROT_READ), 0);
    CHECK_EQ(xioctl(fd, GDRDRV_IOC_PIN_BUFFER, ro), EFAULT);
    CHECK_EQ(counters().live_pins, 0);
    CHECK_EQ(xioctl(fd, GDRDRV_IOC_PIN_BUFFER, (void *)16), EFAULT);
    close(fd);
    return CASE_PASS;
}

/* The fast path leaves ordinary files alone. */
int t_passthrough(void)
{
    int fd = open("/dev/null", O_RDWR);
    REQUIRE(fd >= 0);
    struct termios t;
    CHECK_EQ(xioctl(fd, TCGETS, &t), ENOTTY);
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    CHECK_EQ(munmap(p, 4096), 0);
    CHECK_EQ(close(fd), 0);
    CHECK_EQ(close(fd), -1);
    CHECK_EQ(errno, EBADF);
    return CASE_PASS;
}

/* A device fd closed behind the emulator's back (a raw close system call, as close_range or
 * closefrom do) and reused is not mistaken for the device. */
int t_stale_fd(void)
{
    SKIP_IF(device_blocked());
    int fd = dev_open();
    REQUIRE(fd >= 0);
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
    return CASE_PASS;
}
