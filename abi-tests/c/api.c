/*
 * api.c - every function of the API and every errno path of gdrcopy 2.6,
 * on the emulator. The expectations follow the emulator settings the
 * harness runs it with (GDRSIM_PERSISTENT, GDRSIM_DRIVER_VERSION,
 * GDRSIM_PROFILE), so one program covers drivers 2.0 to 2.6 (version gates
 * of the v1/v2 ioctls, attributes answering 0 before 2.5, the mapping type
 * check after mmap), persistent and non-persistent pins, and the x86 and
 * coherent mapping profiles. Failures of the driver are injected with
 * gdrsim_set_fail().
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gdrapi.h"
#include "gdrsim.h"
#include "gpu.h"

/* The exported legacy entry point gdr_get_info, which takes the 40-byte 2.3
 * struct. Code compiled against this header never reaches it (gdr_get_info is
 * a macro for gdr_get_info_v2), so it is looked up by name. */
typedef int (*legacy_info_fn)(gdr_t, gdr_mh_t, void *);

static legacy_info_fn legacy_get_info(void)
{
    return (legacy_info_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gdr_get_info");
}

#define REGION (1UL << 20)

static int drv;            /* minor version of the emulated driver */
static int persistent;     /* pins survive cuMemFree */
static int coherent;       /* the coherent (cacheable) profile */
static int force_pcie_ok;  /* GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE */

static struct gdrsim_counters counters(void)
{
    struct gdrsim_counters c;
    memset(&c, 0, sizeof(c));
    CHECK_EQ(gdrsim_get_counters(&c, sizeof(c)), 0);
    return c;
}

static int pin(gdr_t g, unsigned long addr, size_t size, gdr_mh_t *mh)
{
    return gdr_pin_buffer_v2(g, addr, size, GDR_PIN_FLAG_DEFAULT, mh);
}

/* What the driver holds: its pins and the process's mappings of the device, as the emulator
 * counts them. A call that reports success must have changed them, whatever the library's
 * own records say (a gdr_unmap or gdr_unpin_buffer that returns 0 and does nothing passes
 * every check made through the library). */
static void check_driver_holds(struct gdrsim_counters before, long pins, long mappings)
{
    struct gdrsim_counters now = counters();
    CHECK_EQ(now.live_pins - before.live_pins, pins);
    CHECK_EQ(now.live_mappings - before.live_mappings, mappings);
}

static gdr_mapping_type_t default_type(void)
{
    return coherent ? GDR_MAPPING_TYPE_CACHING : GDR_MAPPING_TYPE_WC;
}

static void test_versions(gdr_t g)
{
    int major = -1, minor = -1;
    gdr_runtime_get_version(&major, &minor);
    CHECK_EQ(major, GDR_API_MAJOR_VERSION);
    CHECK_EQ(minor, GDR_API_MINOR_VERSION);

    major = minor = -1;
    CHECK_EQ(gdr_driver_get_version(g, &major, &minor), 0);
    CHECK_EQ(major, 2);
    CHECK_EQ(minor, drv);
}

static void test_attributes(gdr_t g)
{
    int v = 77;
    static const int bad[] = {0, 4, 5, 1000, -1};
    size_t i;

    CHECK_EQ(gdr_get_attribute(g, GDR_ATTR_USE_PERSISTENT_MAPPING, &v), 0);
    CHECK_EQ(v, drv >= 5 ? persistent : 0);

    v = 77;
    CHECK_EQ(gdr_get_attribute(g, GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE, &v), 0);
    if (drv < 5 || !persistent)
        CHECK_EQ(v, 0);
    else
        CHECK(v == 0 || v == 1);
    force_pcie_ok = (v == 1);

    v = 77;
    CHECK_EQ(gdr_get_attribute(g, GDR_ATTR_USING_DMA_BUF_MMAP, &v), 0);
    CHECK_EQ(v, 0);

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 77;
        CHECK_EQ(gdr_get_attribute(g, (gdr_attr_t)bad[i], &v), EINVAL);
        CHECK_EQ(v, 0);
    }
}

static void test_type_strings(void)
{
    static const char *const names[] = {"None", "Write Combining", "Caching", "Device"};
    static const char sentinel[] = "sentinel";
    const char *s;
    int t;

    for (t = 0; t < 4; t++) {
        s = NULL;
        CHECK_EQ(gdr_get_mapping_type_string((gdr_mapping_type_t)t, &s), 0);
        CHECK(s != NULL && strcmp(s, names[t]) == 0);
    }
    s = sentinel;
    CHECK_EQ(gdr_get_mapping_type_string(GDR_MAPPING_TYPE_MAX, &s), EINVAL);
    CHECK(s == sentinel);
    CHECK_EQ(gdr_get_mapping_type_string((gdr_mapping_type_t)-1, &s), EINVAL);
    CHECK(s == sentinel);
}

static void test_pin(gdr_t g, unsigned long base)
{
    gdr_mh_t mh;
    int local = 0;
    int ret;

    /* No place for the handle. */
    CHECK_EQ(gdr_pin_buffer_v2(g, base, GPU_PAGE_SIZE, 0, NULL), EINVAL);
    CHECK_EQ(gdr_pin_buffer(g, base, GPU_PAGE_SIZE, 0, 0, NULL), EINVAL);

    /* Refused by the driver: the handle is left as it was. */
    mh.h = 0x5a5a;
    CHECK_EQ(pin(g, 0, GPU_PAGE_SIZE, &mh), EINVAL);
    CHECK_EQ(mh.h, 0x5a5a);
    CHECK_EQ(pin(g, (unsigned long)&local, sizeof(local), &mh), EINVAL);
    CHECK_EQ(mh.h, 0x5a5a);

    /* Plain pins, both entry points; a handle is never 0. */
    mh.h = 0;
    CHECK_EQ(pin(g, base, GPU_PAGE_SIZE, &mh), 0);
    CHECK(mh.h != 0);
    CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
    mh.h = 0;
    CHECK_EQ(gdr_pin_buffer(g, base, GPU_PAGE_SIZE, 0, 0, &mh), 0);
    CHECK(mh.h != 0);
    CHECK_EQ(gdr_unpin_buffer(g, mh), 0);

    /* Unknown flag bits: dropped from 2.5 on, refused by older drivers. */
    mh.h = 0x5a5a;
    ret = gdr_pin_buffer_v2(g, base, GPU_PAGE_SIZE, 2, &mh);
    if (drv >= 5) {
        CHECK_EQ(ret, 0);
        if (ret == 0)
            CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
    } else {
        CHECK_EQ(ret, EINVAL);
        CHECK_EQ(mh.h, 0x5a5a);
    }

    /* FORCE_PCIE: only with a 2.5+ persistent driver that supports it. */
    mh.h = 0x5a5a;
    ret = gdr_pin_buffer_v2(g, base, GPU_PAGE_SIZE, GDR_PIN_FLAG_FORCE_PCIE, &mh);
    if (drv >= 5 && persistent && force_pcie_ok) {
        CHECK_EQ(ret, 0);
        if (ret == 0)
            CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
    } else {
        CHECK_EQ(ret, EINVAL);
        CHECK_EQ(mh.h, 0x5a5a);
    }

    /* p2p tokens: dropped by the v2 ioctl (2.5+); the v1 ioctl passes them,
     * and a persistent driver refuses them. */
    mh.h = 0x5a5a;
    ret = gdr_pin_buffer(g, base, GPU_PAGE_SIZE, 0x1234, 7, &mh);
    if (drv >= 5 || !persistent) {
        CHECK_EQ(ret, 0);
        if (ret == 0)
            CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
    } else {
        CHECK_EQ(ret, EINVAL);
        CHECK_EQ(mh.h, 0x5a5a);
    }

    /* Overlapping pins of one range get distinct handles. */
    {
        gdr_mh_t a, b;
        CHECK_EQ(pin(g, base, 2 * GPU_PAGE_SIZE, &a), 0);
        CHECK_EQ(pin(g, base + GPU_PAGE_SIZE, GPU_PAGE_SIZE, &b), 0);
        CHECK(a.h != b.h);
        CHECK_EQ(gdr_unpin_buffer(g, b), 0);
        CHECK_EQ(gdr_unpin_buffer(g, a), 0);
    }
}

static void check_info_unmapped(gdr_t g, gdr_mh_t mh, unsigned long va, unsigned long size)
{
    gdr_info_t info;
    memset(&info, 0xEE, sizeof(info));
    CHECK_EQ(gdr_get_info(g, mh, &info), 0); /* the macro: gdr_get_info_v2 */
    CHECK_EQ(info.va, va);
    CHECK_EQ(info.mapped_size, size);
    CHECK_EQ(info.page_size, GPU_PAGE_SIZE);
    CHECK_EQ(info.mapped, 0);
    CHECK_EQ(info.wc_mapping, 0);
    CHECK_EQ(info.mapping_type, GDR_MAPPING_TYPE_NONE);
}

static void check_info_mapped(gdr_t g, gdr_mh_t mh, gdr_mapping_type_t type)
{
    gdr_info_v2_t info;
    memset(&info, 0, sizeof(info));
    CHECK_EQ(gdr_get_info_v2(g, mh, &info), 0);
    CHECK_EQ(info.mapped, 1);
    CHECK_EQ(info.wc_mapping, type == GDR_MAPPING_TYPE_WC);
    CHECK_EQ(info.mapping_type, type);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    size_t i;
    for (i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 7 + seed);
}

static void test_map_and_copy(gdr_t g, unsigned long base)
{
    const size_t size = 256 * 1024 + 16; /* pins 320 KiB */
    const size_t mapped = 5 * GPU_PAGE_SIZE;
    static unsigned char host[5 * 65536], back[5 * 65536];
    struct gdrsim_counters c0 = counters();
    gdr_mh_t mh;
    void *p = NULL;
    unsigned char *m;
    size_t i;
    int ok;

    if (pin(g, base, size, &mh) != 0) {
        CHECK(!"pin for map/copy");
        return;
    }
    check_info_unmapped(g, mh, base, mapped);
    check_driver_holds(c0, 1, 0);

    /* A copy through an unmapped handle fails, even an empty one. */
    CHECK_EQ(gdr_copy_to_mapping(mh, (void *)base, host, 16), EINVAL);
    CHECK_EQ(gdr_copy_to_mapping(mh, (void *)base, host, 0), EINVAL);
    CHECK_EQ(gdr_copy_from_mapping(mh, back, (void *)base, 0), EINVAL);
    CHECK_EQ(gdr_unmap(g, mh, (void *)base, mapped), EINVAL);

    CHECK_EQ(gdr_map(g, mh, &p, mapped), 0);
    CHECK(p != NULL);
    if (p == NULL) {
        gdr_unpin_buffer(g, mh);
        return;
    }
    m = (unsigned char *)p;
    check_info_mapped(g, mh, default_type());
    check_driver_holds(c0, 1, 1);

    /* One mapping per handle; "already mapped" wins over bad flags. */
    {
        void *q = NULL;
        CHECK_EQ(gdr_map(g, mh, &q, mapped), EAGAIN);
        CHECK_EQ(gdr_map_v2(g, mh, &q, mapped, 9), EAGAIN);
    }

    /* Host -> mapping, checked through CUDA. */
    fill(host, mapped, 1);
    CHECK_EQ(gdr_copy_to_mapping(mh, m, host, mapped), 0);
    memset(back, 0, mapped);
    CHECK_EQ(cuMemcpyDtoH(back, (CUdeviceptr)base, mapped), CUDA_SUCCESS);
    CHECK(memcmp(back, host, mapped) == 0);

    /* Unaligned offsets and sizes on both sides. */
    fill(host, 4096, 9);
    CHECK_EQ(gdr_copy_to_mapping(mh, m + 3, host + 5, 1021), 0);
    CHECK_EQ(cuMemcpyDtoH(back, (CUdeviceptr)(base + 3), 1021), CUDA_SUCCESS);
    CHECK(memcmp(back, host + 5, 1021) == 0);

    /* CUDA -> mapping -> host. */
    CHECK_EQ(cuMemsetD8((CUdeviceptr)(base + 0x100), 0x3c, 1000), CUDA_SUCCESS);
    memset(back, 0, 1002);
    CHECK_EQ(gdr_copy_from_mapping(mh, back + 1, m + 0x100, 1000), 0);
    ok = back[0] == 0 && back[1001] == 0;
    for (i = 1; i <= 1000; i++)
        ok = ok && back[i] == 0x3c;
    CHECK(ok);
    CHECK_EQ(m[0x100], 0x3c); /* plain loads through the mapping work too */

    /* Round trip over the whole mapping at an odd size. */
    fill(host, mapped, 77);
    CHECK_EQ(gdr_copy_to_mapping(mh, m + 1, host, mapped - 1), 0);
    memset(back, 0, mapped);
    CHECK_EQ(gdr_copy_from_mapping(mh, back, m + 1, mapped - 1), 0);
    CHECK(memcmp(back, host, mapped - 1) == 0);

    /* Empty copies of a mapped handle succeed. */
    CHECK_EQ(gdr_copy_to_mapping(mh, m, host, 0), 0);
    CHECK_EQ(gdr_copy_from_mapping(mh, back, m, 0), 0);

    if (OURS()) {
        typedef int (*copy_fn)(gdr_mh_t, void *, const void *, size_t);
        copy_fn to = (copy_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gdr_copy_to_mapped");
        copy_fn from = (copy_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gdr_copy_from_mapped");
        void *q = NULL;

        /* The aliases are the same functions. */
        CHECK(to != NULL && from != NULL);
        if (to != NULL && from != NULL) {
            fill(host, 512, 33);
            CHECK_EQ(to(mh, m + 64, host, 512), 0);
            memset(back, 0, 512);
            CHECK_EQ(from(mh, back, m + 64, 512), 0);
            CHECK(memcmp(back, host, 512) == 0);
            CHECK_EQ(to(mh, m, host, 0), 0);
            CHECK_EQ(from(mh, back, m, 0), 0);
            CHECK_EQ(to(mh, m + mapped, host, 1), EINVAL);
            CHECK_EQ(from(mh, back, m + mapped, 1), EINVAL);
        }

        /* Copies stay inside the mapping. */
        CHECK_EQ(gdr_copy_to_mapping(mh, m + mapped - 8, host, 16), EINVAL);
        CHECK_EQ(gdr_copy_to_mapping(mh, m + mapped, host, 1), EINVAL);
        CHECK_EQ(gdr_copy_from_mapping(mh, back, m - 8, 8), EINVAL);
        CHECK_EQ(gdr_copy_from_mapping(mh, back, m + 1, (size_t)-1), EINVAL);
        CHECK_EQ(gdr_copy_to_mapping(mh, host, back, 8), EINVAL);
        CHECK_EQ(gdr_copy_to_mapping(mh, m + mapped - 8, host, 8), 0);
        CHECK_EQ(gdr_copy_from_mapping(mh, back, m, mapped), 0);

        /* gdr_unmap takes only the mapping's own address and size. */
        CHECK_EQ(gdr_unmap(g, mh, m + 4096, mapped - 4096), EINVAL);
        CHECK_EQ(gdr_unmap(g, mh, m, 4096), EINVAL);
        CHECK_EQ(gdr_unmap(g, mh, NULL, mapped), EINVAL);
        check_info_mapped(g, mh, default_type());

        /* NULL output pointer of gdr_map. */
        CHECK_EQ(gdr_map(g, mh, NULL, mapped), EINVAL);
        (void)q;
    }

    CHECK_EQ(gdr_unmap(g, mh, p, mapped), 0);
    check_info_unmapped(g, mh, base, mapped);
    check_driver_holds(c0, 1, 0); /* the mapping is gone, the pin is not */
    CHECK_EQ(gdr_unmap(g, mh, p, mapped), EINVAL);
    CHECK_EQ(gdr_copy_to_mapping(mh, m, host, 16), EINVAL);
    CHECK_EQ(gdr_copy_from_mapping(mh, back, m, 0), EINVAL);

    /* Map again, partially: the first bytes of the pinned range. */
    p = NULL;
    CHECK_EQ(gdr_map(g, mh, &p, GPU_PAGE_SIZE), 0);
    if (p != NULL) {
        m = (unsigned char *)p;
        CHECK_EQ(cuMemsetD8((CUdeviceptr)base, 0x5e, 64), CUDA_SUCCESS);
        CHECK_EQ(m[63], 0x5e);
        CHECK_EQ(gdr_unmap(g, mh, p, GPU_PAGE_SIZE), 0);
    }

    /* Longer than the pinned range: refused by the driver. */
    p = NULL;
    CHECK_EQ(gdr_map(g, mh, &p, mapped + GPU_PAGE_SIZE), EINVAL);
    check_info_unmapped(g, mh, base, mapped);
    check_driver_holds(c0, 1, 0);

    CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
    check_driver_holds(c0, 0, 0);
}

/* Expected result of gdr_map_v2(flags) with this driver and profile. */
static int map_expect(int flags, gdr_mapping_type_t dflt, gdr_mapping_type_t *type)
{
    gdr_mapping_type_t want = flags == 0 ? dflt : (gdr_mapping_type_t)flags;
    *type = want;
    if (drv >= 5) {
        /* The driver is asked first; it refuses what the platform lacks. */
        if (want == GDR_MAPPING_TYPE_DEVICE || (want == GDR_MAPPING_TYPE_CACHING && !coherent))
            return EOPNOTSUPP;
        return 0;
    }
    /* Older drivers map their default; the library then checks the type. */
    *type = dflt;
    return (flags == 0 || want == dflt) ? 0 : EINVAL;
}

static void test_map_flags(gdr_t g, unsigned long base)
{
    gdr_mh_t mh;
    gdr_mapping_type_t dflt = default_type(), type;
    void *p;
    int flags, ret, want;

    if (pin(g, base, GPU_PAGE_SIZE, &mh) != 0) {
        CHECK(!"pin for map flags");
        return;
    }

    /* What the platform gives by default. */
    p = NULL;
    CHECK_EQ(gdr_map_v2(g, mh, &p, GPU_PAGE_SIZE, GDR_MAP_FLAG_DEFAULT), 0);
    if (p != NULL) {
        gdr_info_t info;
        CHECK_EQ(gdr_get_info(g, mh, &info), 0);
        if (drv >= 5 || !coherent)
            CHECK_EQ(info.mapping_type, dflt);
        dflt = info.mapping_type;
        CHECK_EQ(gdr_unmap(g, mh, p, GPU_PAGE_SIZE), 0);
    }

    for (flags = 0; flags <= 3; flags++) {
        want = map_expect(flags, dflt, &type);
        p = NULL;
        ret = gdr_map_v2(g, mh, &p, GPU_PAGE_SIZE, flags);
        CHECK_EQ(ret, want);
        if (ret == 0) {
            check_info_mapped(g, mh, type);
            CHECK_EQ(gdr_unmap(g, mh, p, GPU_PAGE_SIZE), 0);
        } else {
            check_info_unmapped(g, mh, base, GPU_PAGE_SIZE);
        }
    }
    p = NULL;
    CHECK_EQ(gdr_map_v2(g, mh, &p, GPU_PAGE_SIZE, 4), EINVAL);
    CHECK_EQ(gdr_map_v2(g, mh, &p, GPU_PAGE_SIZE, -1), EINVAL);

    /* A failed request leaves the handle usable. */
    p = NULL;
    CHECK_EQ(gdr_map(g, mh, &p, GPU_PAGE_SIZE), 0);
    if (p != NULL)
        CHECK_EQ(gdr_unmap(g, mh, p, GPU_PAGE_SIZE), 0);
    CHECK_EQ(gdr_unpin_buffer(g, mh), 0);

    /* A FORCE_PCIE pin maps write-combining and is never cached. */
    if (force_pcie_ok) {
        CHECK_EQ(gdr_pin_buffer_v2(g, base, GPU_PAGE_SIZE, GDR_PIN_FLAG_FORCE_PCIE, &mh), 0);
        p = NULL;
        CHECK_EQ(gdr_map(g, mh, &p, GPU_PAGE_SIZE), 0);
        if (p != NULL) {
            check_info_mapped(g, mh, GDR_MAPPING_TYPE_WC);
            CHECK_EQ(gdr_unmap(g, mh, p, GPU_PAGE_SIZE), 0);
        }
        CHECK_EQ(gdr_map_v2(g, mh, &p, GPU_PAGE_SIZE, GDR_MAP_FLAG_REQ_CACHE_MAPPING), EOPNOTSUPP);
        CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
    }
}

static void test_unaligned(gdr_t g, unsigned long base)
{
    gdr_mh_t a, b;
    void *p = NULL, *q = NULL;

    /* An unaligned pin pins whole GPU pages but cannot be mapped. */
    CHECK_EQ(pin(g, base + 0x100, 64, &a), 0);
    check_info_unmapped(g, a, base, GPU_PAGE_SIZE);
    CHECK_EQ(gdr_map(g, a, &p, GPU_PAGE_SIZE), EINVAL);
    check_info_unmapped(g, a, base, GPU_PAGE_SIZE);
    CHECK_EQ(gdr_unpin_buffer(g, a), 0);

    /* Two handles on one range: two mappings of the same memory. */
    CHECK_EQ(pin(g, base, GPU_PAGE_SIZE, &a), 0);
    CHECK_EQ(pin(g, base, GPU_PAGE_SIZE, &b), 0);
    CHECK_EQ(gdr_map(g, a, &p, GPU_PAGE_SIZE), 0);
    CHECK_EQ(gdr_map(g, b, &q, GPU_PAGE_SIZE), 0);
    if (p != NULL && q != NULL) {
        unsigned v = 0xC0FFEE11u, r = 0;
        CHECK(p != q);
        CHECK_EQ(gdr_copy_to_mapping(a, (char *)p + 128, &v, sizeof(v)), 0);
        CHECK_EQ(gdr_copy_from_mapping(b, &r, (char *)q + 128, sizeof(r)), 0);
        CHECK_EQ(r, v);
        /* Each handle's copies are bound to its own mapping. */
        if (OURS())
            CHECK_EQ(gdr_copy_from_mapping(a, &r, (char *)q + 128, sizeof(r)), EINVAL);
        CHECK_EQ(gdr_unmap(g, a, p, GPU_PAGE_SIZE), 0);
        CHECK_EQ(gdr_unmap(g, b, q, GPU_PAGE_SIZE), 0);
    }
    CHECK_EQ(gdr_unpin_buffer(g, a), 0);
    CHECK_EQ(gdr_unpin_buffer(g, b), 0);
}

static int canary_intact(const unsigned char *buf, size_t from, size_t to)
{
    size_t i;
    for (i = from; i < to; i++)
        if (buf[i] != 0xAA)
            return 0;
    return 1;
}

static void test_legacy_info(gdr_t g, unsigned long base)
{
    unsigned char buf[64], v1_bytes[40];
    uint64_t u64, v1_u64;
    uint32_t u32, v1_u32;
    gdr_mh_t mh;
    void *p = NULL;
    gdr_mapping_type_t type = default_type();
    legacy_info_fn v1 = legacy_get_info();

    CHECK(v1 != NULL);
    if (v1 == NULL)
        return;

    if (pin(g, base + 0x10, 2 * GPU_PAGE_SIZE, &mh) != 0) {
        CHECK(!"pin for legacy info");
        return;
    }

    /* gdr_get_info (the symbol) writes the 40-byte 2.3 struct and nothing after. */
    memset(buf, 0xAA, sizeof(buf));
    CHECK_EQ(v1(g, mh, buf), 0);
    memcpy(&u64, buf + 0, 8);
    CHECK_EQ(u64, base);
    memcpy(&u64, buf + 8, 8);
    CHECK_EQ(u64, 3 * GPU_PAGE_SIZE);
    memcpy(&u32, buf + 16, 4);
    CHECK_EQ(u32, GPU_PAGE_SIZE);
    CHECK_EQ(buf[36] & 0x03, 0);
    CHECK(canary_intact(buf, 40, sizeof(buf)));

    /* gdr_get_info_v2 writes 48 bytes; both describe the same pin, down to the deprecated
     * timing fields the driver recorded for it (tm_cycles at 24, cycles_per_ms at 32). */
    memcpy(v1_bytes, buf, sizeof(v1_bytes));
    memset(buf, 0xAA, sizeof(buf));
    CHECK_EQ(gdr_get_info_v2(g, mh, (gdr_info_v2_t *)(void *)buf), 0);
    memcpy(&u32, buf + 40, 4);
    CHECK_EQ(u32, GDR_MAPPING_TYPE_NONE);
    CHECK(canary_intact(buf, 48, sizeof(buf)));
    CHECK(memcmp(buf, v1_bytes, 20) == 0); /* va, mapped_size, page_size */
    memcpy(&u64, buf + 24, 8);
    memcpy(&v1_u64, v1_bytes + 24, 8);
    CHECK_EQ(u64, v1_u64);
    memcpy(&u32, buf + 32, 4);
    memcpy(&v1_u32, v1_bytes + 32, 4);
    CHECK_EQ(u32, v1_u32);
    gdr_unpin_buffer(g, mh);

    /* Mapped: the two bits of the v1 struct. */
    if (pin(g, base, 2 * GPU_PAGE_SIZE, &mh) != 0) {
        CHECK(!"pin for legacy info");
        return;
    }
    CHECK_EQ(gdr_map(g, mh, &p, 2 * GPU_PAGE_SIZE), 0);
    if (p != NULL) {
        gdr_info_t info;
        if (gdr_get_info_v2(g, mh, &info) == 0)
            type = info.mapping_type;
        memset(buf, 0xAA, sizeof(buf));
        CHECK_EQ(v1(g, mh, buf), 0);
        CHECK_EQ(buf[36] & 0x03, type == GDR_MAPPING_TYPE_WC ? 0x03 : 0x01);
        CHECK(canary_intact(buf, 40, sizeof(buf)));
        CHECK_EQ(gdr_unmap(g, mh, p, 2 * GPU_PAGE_SIZE), 0);
    }
    CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
}

static void test_callback_flag(gdr_t g)
{
    CUdeviceptr raw = gpu_alloc(GPU_PAGE_SIZE);
    unsigned long base = gpu_aligned(raw);
    gdr_mh_t mh;
    void *p = NULL;
    int flag = -1;
    unsigned v = 0x12345678u;

    if (pin(g, base, GPU_PAGE_SIZE, &mh) != 0) {
        CHECK(!"pin for callback flag");
        return;
    }
    CHECK_EQ(gdr_get_callback_flag(g, mh, &flag), 0);
    CHECK_EQ(flag, 0);
    CHECK_EQ(gdr_map(g, mh, &p, GPU_PAGE_SIZE), 0);
    if (p == NULL) {
        gdr_unpin_buffer(g, mh);
        return;
    }
    CHECK_EQ(gdr_copy_to_mapping(mh, p, &v, sizeof(v)), 0);

    /* Free the memory while it is pinned and mapped. */
    CHECK_EQ(cuMemFree(raw), CUDA_SUCCESS);
    flag = -1;
    CHECK_EQ(gdr_get_callback_flag(g, mh, &flag), 0);
    if (persistent) {
        /* The pages live on until unpin, data kept. */
        unsigned r = 0;
        CHECK_EQ(flag, 0);
        CHECK_EQ(gdr_copy_from_mapping(mh, &r, p, sizeof(r)), 0);
        CHECK_EQ(r, v);
        check_info_mapped(g, mh, default_type());
        CHECK_EQ(gdr_unmap(g, mh, p, GPU_PAGE_SIZE), 0);
    } else {
        /* Invalidated: the driver reports it and refuses a new mapping. */
        gdr_info_t info;
        CHECK_EQ(flag, 1);
        CHECK_EQ(gdr_get_info(g, mh, &info), 0);
        CHECK_EQ(info.mapping_type, GDR_MAPPING_TYPE_NONE);
        CHECK_EQ(gdr_unmap(g, mh, p, GPU_PAGE_SIZE), 0);
        p = NULL;
        CHECK_EQ(gdr_map(g, mh, &p, GPU_PAGE_SIZE), EINVAL);
    }
    CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
}

static void test_injected_failures(gdr_t g, unsigned long base)
{
    gdr_mh_t mh, keep;
    gdr_info_t info, before;
    void *p = NULL;
    int flag, v, major, minor;

    /* Pin refused by the driver. */
    CHECK_EQ(gdrsim_set_fail(drv >= 5 ? "PIN_BUFFER_V2:1:ENOMEM" : "PIN_BUFFER:1:ENOMEM"), 0);
    mh.h = 0x5a5a;
    CHECK_EQ(pin(g, base, GPU_PAGE_SIZE, &mh), ENOMEM);
    CHECK_EQ(mh.h, 0x5a5a);
    gdrsim_set_fail("");

    if (pin(g, base, GPU_PAGE_SIZE, &keep) != 0) {
        CHECK(!"pin for injected failures");
        return;
    }

    /* get_info: the error comes back, *info is untouched. */
    CHECK_EQ(gdrsim_set_fail(drv >= 4 ? "GET_INFO_V2:1:EIO" : "GET_INFO:1:EIO"), 0);
    memset(&info, 0x5c, sizeof(info));
    before = info;
    CHECK_EQ(gdr_get_info(g, keep, &info), EIO);
    CHECK(memcmp(&info, &before, sizeof(info)) == 0);
    gdrsim_set_fail("");

    /* The legacy gdr_get_info symbol too (whichever info ioctl it issues). */
    if (legacy_get_info() != NULL) {
        CHECK_EQ(gdrsim_set_fail("GET_INFO:1:EIO,GET_INFO_V2:1:EIO"), 0);
        memset(&info, 0x5c, sizeof(info));
        CHECK_EQ(legacy_get_info()(g, keep, &info), EIO);
        CHECK(memcmp(&info, &before, sizeof(info)) == 0);
        gdrsim_set_fail("");
    }

    CHECK_EQ(gdrsim_set_fail("GET_CB_FLAG:1:EIO"), 0);
    flag = 42;
    CHECK_EQ(gdr_get_callback_flag(g, keep, &flag), EIO);
    CHECK_EQ(flag, 42);
    gdrsim_set_fail("");

    if (drv >= 5) {
        CHECK_EQ(gdrsim_set_fail("GET_ATTR:1:EIO"), 0);
        v = 42;
        CHECK_EQ(gdr_get_attribute(g, GDR_ATTR_USE_PERSISTENT_MAPPING, &v), EIO);
        CHECK_EQ(v, 0);
        gdrsim_set_fail("");

        CHECK_EQ(gdrsim_set_fail("REQ_MAPPING_TYPE:1:EBUSY"), 0);
        CHECK_EQ(gdr_map(g, keep, &p, GPU_PAGE_SIZE), EBUSY);
        check_info_unmapped(g, keep, base, GPU_PAGE_SIZE);
        gdrsim_set_fail("");
    }

    CHECK_EQ(gdrsim_set_fail("GET_VERSION:1:EIO"), 0);
    CHECK_EQ(gdr_driver_get_version(g, &major, &minor), EIO);
    gdrsim_set_fail("");

    /* mmap refused: reported, and the handle stays unmapped and usable. */
    CHECK_EQ(gdrsim_set_fail("mmap:1:ENOMEM"), 0);
    CHECK_EQ(gdr_map(g, keep, &p, GPU_PAGE_SIZE), ENOMEM);
    gdrsim_set_fail("");
    check_info_unmapped(g, keep, base, GPU_PAGE_SIZE);
    p = NULL;
    CHECK_EQ(gdr_map(g, keep, &p, GPU_PAGE_SIZE), 0);

    /* munmap refused: reported, and the handle stays mapped. */
    if (p != NULL) {
        CHECK_EQ(gdrsim_set_fail("munmap:1:EINVAL"), 0);
        CHECK_EQ(gdr_unmap(g, keep, p, GPU_PAGE_SIZE), EINVAL);
        gdrsim_set_fail("");
        check_info_mapped(g, keep, default_type());
        CHECK_EQ(gdr_unmap(g, keep, p, GPU_PAGE_SIZE), 0);
    }

    /* Unpin refused by the driver. */
    CHECK_EQ(pin(g, base, GPU_PAGE_SIZE, &mh), 0);
    CHECK_EQ(gdrsim_set_fail("UNPIN_BUFFER:1:EIO"), 0);
    CHECK_EQ(gdr_unpin_buffer(g, mh), EIO);
    gdrsim_set_fail("");
    /* As in gdrcopy 2.6 the handle is gone all the same (which there makes
     * any further use a use-after-free; here it is EINVAL). */
    if (OURS())
        CHECK_EQ(gdr_get_info_v2(g, mh, &info), EINVAL);

    CHECK_EQ(gdr_unpin_buffer(g, keep), 0);

    /* gdr_open when the driver cannot be used: NULL, or the dma-buf backend. */
    {
        static const char *const specs[] = {"open:1:ENOENT", "GET_VERSION:1:EIO"};
        size_t i;
        for (i = 0; i < 2; i++) {
            gdr_t g2;
            CHECK_EQ(gdrsim_set_fail(specs[i]), 0);
            g2 = gdr_open();
            gdrsim_set_fail("");
            if (g2 != NULL) {
                v = 0;
                CHECK_EQ(gdr_get_attribute(g2, GDR_ATTR_USING_DMA_BUF_MMAP, &v), 0);
                CHECK_EQ(v, 1);
                CHECK_EQ(gdr_close(g2), 0);
            }
        }
    }
}

static void test_close_releases(unsigned long base)
{
    struct gdrsim_counters c0 = counters(), c1, c2;
    gdr_t g2 = gdr_open();
    gdr_mh_t mh[3];
    void *p[3] = {NULL, NULL, NULL};
    int i;

    CHECK(g2 != NULL);
    if (g2 == NULL)
        return;
    for (i = 0; i < 3; i++)
        CHECK_EQ(pin(g2, base + (unsigned long)i * GPU_PAGE_SIZE, GPU_PAGE_SIZE, &mh[i]), 0);
    /* gdrcopy 2.6 leaves live mappings behind in gdr_close; this library removes them. */
    for (i = 0; i < (OURS() ? 2 : 0); i++)
        CHECK_EQ(gdr_map(g2, mh[i], &p[i], GPU_PAGE_SIZE), 0);
    c1 = counters();
    CHECK_EQ(c1.live_pins, c0.live_pins + 3);
    CHECK_EQ(c1.open_files, c0.open_files + 1);
    CHECK_EQ(gdr_close(g2), 0);
    c2 = counters();
    CHECK_EQ(c2.live_pins, c0.live_pins);
    CHECK_EQ(c2.live_mappings, c0.live_mappings);
    CHECK_EQ(c2.open_files, c0.open_files);
}

/* gdr_close goes on past an unpin the driver refuses and reports it. */
static void test_close_unpin_failure(unsigned long base)
{
    struct gdrsim_counters c0 = counters(), c1;
    gdr_t g2 = gdr_open();
    gdr_mh_t a, b;

    CHECK(g2 != NULL);
    if (g2 == NULL)
        return;
    CHECK_EQ(pin(g2, base, GPU_PAGE_SIZE, &a), 0);
    CHECK_EQ(pin(g2, base + GPU_PAGE_SIZE, GPU_PAGE_SIZE, &b), 0);
    CHECK_EQ(gdrsim_set_fail("UNPIN_BUFFER:1:EIO"), 0);
    CHECK_EQ(gdr_close(g2), EIO);
    gdrsim_set_fail("");
    c1 = counters();
    /* gdrcopy 2.6 returns at the first failure and leaks the instance and its
     * file; this library releases everything and returns the first error. */
    if (OURS()) {
        CHECK_EQ(c1.open_files, c0.open_files);
        CHECK_EQ(c1.live_pins, c0.live_pins);
    }
}

/* Map when the driver fails the info query that follows the mmap: the error
 * comes back and no mapping is left behind. */
static void test_map_info_failure(gdr_t g, unsigned long base)
{
    struct gdrsim_counters c0, c1;
    gdr_mh_t mh;
    void *p = NULL;
    int ret;

    if (pin(g, base, GPU_PAGE_SIZE, &mh) != 0) {
        CHECK(!"pin for map/info failure");
        return;
    }
    c0 = counters();
    CHECK_EQ(gdrsim_set_fail(drv >= 4 ? "GET_INFO_V2:1:EIO" : "GET_INFO:1:EIO"), 0);
    ret = gdr_map(g, mh, &p, GPU_PAGE_SIZE);
    gdrsim_set_fail("");
    c1 = counters();
    /* This library may learn the mapping type without asking the driver again. */
    if (OURS() && ret == 0) {
        CHECK_EQ(c1.live_mappings, c0.live_mappings + 1);
        CHECK_EQ(gdr_unmap(g, mh, p, GPU_PAGE_SIZE), 0);
    } else {
        CHECK_EQ(ret, EIO);
        CHECK_EQ(c1.live_mappings, c0.live_mappings);
        check_info_unmapped(g, mh, base, GPU_PAGE_SIZE);
    }
    p = NULL;
    CHECK_EQ(gdr_map(g, mh, &p, GPU_PAGE_SIZE), 0);
    if (p != NULL)
        CHECK_EQ(gdr_unmap(g, mh, p, GPU_PAGE_SIZE), 0);
    CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
}

/* GDRCOPY_USE_DMABUF_MMAP selects the DMA-BUF backend only when it is exactly "1". */
static void test_dmabuf_selection(void)
{
    static const char *const not_one[] = {"0", "", "yes", "true", "1 ", "01"};
    size_t i;
    gdr_t g2;
    int v;

    for (i = 0; i < sizeof(not_one) / sizeof(not_one[0]); i++) {
        setenv("GDRCOPY_USE_DMABUF_MMAP", not_one[i], 1);
        g2 = gdr_open();
        CHECK(g2 != NULL);
        if (g2 != NULL) {
            v = -1;
            CHECK_EQ(gdr_get_attribute(g2, GDR_ATTR_USING_DMA_BUF_MMAP, &v), 0);
            if (v != 0)
                printf("GDRCOPY_USE_DMABUF_MMAP=\"%s\" selected DMA-BUF\n", not_one[i]);
            CHECK_EQ(v, 0);
            CHECK_EQ(gdr_close(g2), 0);
        }
    }

    if (sim_real_driver()) {
        /* The kernel backing's memory is a PCI BAR: it offers no dma-buf. */
        printf("skipped on the real driver: the DMA-BUF backend\n");
        return;
    }
    setenv("GDRCOPY_USE_DMABUF_MMAP", "1", 1);
    g2 = gdr_open();
    unsetenv("GDRCOPY_USE_DMABUF_MMAP");
    CHECK(g2 != NULL); /* the emulated CUDA driver supports dma-buf mmap */
    if (g2 == NULL)
        return;
    for (v = GDR_ATTR_USE_PERSISTENT_MAPPING; v <= GDR_ATTR_USING_DMA_BUF_MMAP; v++) {
        int val = -1;
        CHECK_EQ(gdr_get_attribute(g2, (gdr_attr_t)v, &val), 0);
        CHECK_EQ(val, 1);
    }
    if (OURS()) {
        /* gdrcopy 2.6 aborts here (assert on its file descriptor). */
        int major = -1, minor = -1;
        int ret = gdr_driver_get_version(g2, &major, &minor);
        CHECK(major != -1 && minor != -1);
        if (ret != 0)
            CHECK(major == 0 && minor == 0);
    }
    CHECK_EQ(gdr_close(g2), 0);
}

/* close() of the device refused: gdr_close reports it (the descriptor is
 * released all the same, as Linux does). */
static void test_close_failure(void)
{
    gdr_t g2 = gdr_open();
    CHECK(g2 != NULL);
    if (g2 != NULL) {
        CHECK_EQ(gdrsim_set_fail("close:1:EIO"), 0);
        CHECK_EQ(gdr_close(g2), EIO);
        gdrsim_set_fail("");
    }
}

int main(void)
{
    CUdeviceptr raw;
    unsigned long base;
    struct gdrsim_counters c;
    gdr_t g;

    drv = sim_driver_minor();
    persistent = sim_persistent();
    coherent = sim_coherent();
    printf("api: driver 2.%d, %s, %s profile, %s library\n", drv,
           persistent ? "persistent" : "non-persistent", coherent ? "coherent" : "x86",
           OURS() ? "this" : "reference");

    gpu_init();
    raw = gpu_alloc(REGION);
    base = gpu_aligned(raw);

    test_type_strings();
    g = gdr_open();
    REQUIRE(g != NULL);
    test_versions(g);
    test_attributes(g);
    test_pin(g, base);
    test_map_and_copy(g, base);
    test_map_flags(g, base);
    test_unaligned(g, base);
    test_legacy_info(g, base);
    test_callback_flag(g);
    if (emulated_driver("injected driver failures"))
        test_injected_failures(g, base);
    if (emulated_driver("a failed info query after mmap"))
        test_map_info_failure(g, base);
    test_dmabuf_selection();
    test_close_releases(base);
    CHECK_EQ(gdr_close(g), 0);

    c = counters();
    CHECK_EQ(c.live_pins, 0);
    CHECK_EQ(c.live_mappings, 0);
    CHECK_EQ(c.open_files, 0);
    if (emulated_driver("an unpin the driver refuses in gdr_close"))
        test_close_unpin_failure(base);
    if (emulated_driver("a refused close of the device"))
        test_close_failure();
    CHECK_EQ(cuMemFree(raw), CUDA_SUCCESS);
    return check_done("api");
}
