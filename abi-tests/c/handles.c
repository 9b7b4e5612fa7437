/*
 * handles.c - handle safety: NULL, zero, random, stale, double-unpinned,
 * foreign (another gdr_t's) and forged (a byte copy on the stack) values of
 * gdr_t and gdr_mh_t, and NULL output pointers, all give EINVAL and never a
 * crash; the valid handles around them keep working.
 *
 * gdrcopy 2.6 validates nothing and crashes on most of these, so against it
 * only the valid-use baseline runs.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "gdrapi.h"
#include "gdrsim.h"
#include "gpu.h"

/* The exported legacy gdr_get_info (40-byte struct), reached by name: the
 * header makes gdr_get_info a macro for gdr_get_info_v2. */
typedef int (*legacy_info_fn)(gdr_t, gdr_mh_t, void *);
static legacy_info_fn legacy_get_info;

static unsigned char host[4096];

/* Every call that takes a handle rejects this one with EINVAL. */
static void check_bad_handle(gdr_t g, gdr_mh_t bad, const char *what)
{
    gdr_info_t info;
    unsigned char v1[40];
    void *p = (void *)0x1000;
    int flag = 5;
    int fails = 0;

    fails += gdr_get_info_v2(g, bad, &info) != EINVAL;
    fails += legacy_get_info == NULL || legacy_get_info(g, bad, v1) != EINVAL;
    fails += gdr_get_callback_flag(g, bad, &flag) != EINVAL;
    fails += flag != 5;
    fails += gdr_map(g, bad, &p, GPU_PAGE_SIZE) != EINVAL;
    fails += gdr_map_v2(g, bad, &p, GPU_PAGE_SIZE, GDR_MAP_FLAG_REQ_WC_MAPPING) != EINVAL;
    fails += gdr_unmap(g, bad, p, GPU_PAGE_SIZE) != EINVAL;
    fails += gdr_copy_to_mapping(bad, p, host, 8) != EINVAL;
    fails += gdr_copy_from_mapping(bad, host, p, 8) != EINVAL;
    fails += gdr_copy_to_mapping(bad, p, host, 0) != EINVAL;
    fails += gdr_unpin_buffer(g, bad) != EINVAL;
    if (fails)
        printf("bad handle (%s): %d calls did not give EINVAL\n", what, fails);
    CHECK_EQ(fails, 0);
}

/* Every call that takes a gdr_t rejects this one with EINVAL. */
static void check_bad_gdr(gdr_t bad, gdr_mh_t mh, unsigned long addr, const char *what)
{
    gdr_info_t info;
    gdr_mh_t out = {0x5a5a};
    void *p = NULL;
    int v = 7, major = 7, minor = 7, flag = 7;
    int fails = 0;

    fails += gdr_pin_buffer(bad, addr, GPU_PAGE_SIZE, 0, 0, &out) != EINVAL;
    fails += gdr_pin_buffer_v2(bad, addr, GPU_PAGE_SIZE, 0, &out) != EINVAL;
    fails += out.h != 0x5a5a;
    fails += gdr_get_info_v2(bad, mh, &info) != EINVAL;
    fails += gdr_get_callback_flag(bad, mh, &flag) != EINVAL;
    fails += gdr_map(bad, mh, &p, GPU_PAGE_SIZE) != EINVAL;
    fails += gdr_unmap(bad, mh, (void *)0x1000, GPU_PAGE_SIZE) != EINVAL;
    fails += gdr_get_attribute(bad, GDR_ATTR_USE_PERSISTENT_MAPPING, &v) != EINVAL;
    fails += gdr_driver_get_version(bad, &major, &minor) != EINVAL;
    fails += gdr_unpin_buffer(bad, mh) != EINVAL;
    fails += gdr_close(bad) != EINVAL;
    if (fails)
        printf("bad gdr_t (%s): %d calls did not give EINVAL\n", what, fails);
    CHECK_EQ(fails, 0);
}

/* mh is a live, unmapped pin of g at base: it still works. */
static void check_still_works(gdr_t g, gdr_mh_t mh, unsigned long base)
{
    gdr_info_t info;
    void *p = NULL;
    CHECK_EQ(gdr_get_info(g, mh, &info), 0);
    CHECK_EQ(info.va, base);
    CHECK_EQ(gdr_map(g, mh, &p, GPU_PAGE_SIZE), 0);
    if (p != NULL) {
        CHECK_EQ(gdr_copy_to_mapping(mh, p, host, sizeof(host)), 0);
        CHECK_EQ(gdr_unmap(g, mh, p, GPU_PAGE_SIZE), 0);
    }
}

int main(void)
{
    CUdeviceptr raw;
    unsigned long base;
    gdr_t g, g2, gone;
    gdr_mh_t mh, mh2, stale, bad;
    struct gdrsim_counters c;
    int i;

    legacy_get_info = (legacy_info_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gdr_get_info");
    gpu_init();
    raw = gpu_alloc(8 * GPU_PAGE_SIZE);
    base = gpu_aligned(raw);

    g = gdr_open();
    g2 = gdr_open();
    REQUIRE(g != NULL && g2 != NULL);
    REQUIRE(gdr_pin_buffer_v2(g, base, GPU_PAGE_SIZE, 0, &mh) == 0);
    check_still_works(g, mh, base);

    if (!OURS()) {
        printf("handles: the reference library does not validate handles; baseline only\n");
        CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
        CHECK_EQ(gdr_close(g), 0);
        CHECK_EQ(gdr_close(g2), 0);
        return check_done("handles");
    }

    /* NULL, zero and made-up handles. */
    bad.h = 0;
    check_bad_handle(g, bad, "zero");
    bad.h = 0xdead0000beefUL;
    check_bad_handle(g, bad, "random");
    bad.h = (unsigned long)&bad;
    check_bad_handle(g, bad, "stack address");
    bad.h = mh.h + 8;
    check_bad_handle(g, bad, "inside a record");

    /* Stale: unpinned, then used again; double unpin. */
    REQUIRE(gdr_pin_buffer_v2(g, base + GPU_PAGE_SIZE, GPU_PAGE_SIZE, 0, &stale) == 0);
    CHECK_EQ(gdr_unpin_buffer(g, stale), 0);
    CHECK_EQ(gdr_unpin_buffer(g, stale), EINVAL);
    check_bad_handle(g, stale, "stale");
    /* ... and it stays stale while new pins come and go. */
    for (i = 0; i < 64; i++) {
        gdr_mh_t t;
        CHECK_EQ(gdr_pin_buffer_v2(g, base + GPU_PAGE_SIZE, GPU_PAGE_SIZE, 0, &t), 0);
        CHECK(t.h != stale.h);
        CHECK_EQ(gdr_unpin_buffer(g, t), 0);
    }
    check_bad_handle(g, stale, "stale after reuse");

    /* Stale mapped: unpinned while mapped, then copied through. */
    {
        gdr_mh_t t;
        void *p = NULL;
        CHECK_EQ(gdr_pin_buffer_v2(g, base + 2 * GPU_PAGE_SIZE, GPU_PAGE_SIZE, 0, &t), 0);
        CHECK_EQ(gdr_map(g, t, &p, GPU_PAGE_SIZE), 0);
        CHECK_EQ(gdr_unpin_buffer(g, t), 0);
        CHECK_EQ(gdr_copy_to_mapping(t, p, host, 8), EINVAL);
        CHECK_EQ(gdr_copy_from_mapping(t, host, p, 8), EINVAL);
        CHECK_EQ(gdr_unmap(g, t, p, GPU_PAGE_SIZE), EINVAL);
    }

    /* Foreign: a handle of g used with g2. */
    check_bad_handle(g2, mh, "another gdr_t's");
    check_still_works(g, mh, base);
    REQUIRE(gdr_pin_buffer_v2(g2, base + 3 * GPU_PAGE_SIZE, GPU_PAGE_SIZE, 0, &mh2) == 0);
    check_bad_handle(g, mh2, "another gdr_t's (reverse)");
    check_still_works(g2, mh2, base + 3 * GPU_PAGE_SIZE);

    /* Forged: a byte copy of a live handle record on the stack. */
    {
        unsigned char copy[104];
        memcpy(copy, (const void *)mh.h, sizeof(copy));
        bad.h = (unsigned long)copy;
        check_bad_handle(g, bad, "forged copy");
        check_still_works(g, mh, base);
    }

    /* Forged gdr_t: a byte copy of the instance (as gdrcopy_sanity makes). */
    {
        unsigned char copy[48];
        memcpy(copy, (const void *)g, sizeof(copy));
        check_bad_gdr((gdr_t)(void *)copy, mh, base, "forged copy");
        check_still_works(g, mh, base);
    }

    /* NULL and closed gdr_t. */
    check_bad_gdr(NULL, mh, base, "NULL");
    gone = gdr_open();
    REQUIRE(gone != NULL);
    {
        gdr_mh_t orphan;
        CHECK_EQ(gdr_pin_buffer_v2(gone, base + 4 * GPU_PAGE_SIZE, GPU_PAGE_SIZE, 0, &orphan), 0);
        CHECK_EQ(gdr_close(gone), 0);
        check_bad_gdr(gone, mh, base, "closed");
        /* Its handles died with it. */
        check_bad_handle(g, orphan, "of a closed gdr_t");
    }

    /* NULL output pointers. */
    {
        int v;
        CHECK_EQ(gdr_get_info_v2(g, mh, NULL), EINVAL);
        CHECK(legacy_get_info != NULL && legacy_get_info(g, mh, NULL) == EINVAL);
        CHECK_EQ(gdr_get_callback_flag(g, mh, NULL), EINVAL);
        CHECK_EQ(gdr_get_attribute(g, GDR_ATTR_USE_PERSISTENT_MAPPING, NULL), EINVAL);
        CHECK_EQ(gdr_driver_get_version(g, NULL, &v), EINVAL);
        CHECK_EQ(gdr_driver_get_version(g, &v, NULL), EINVAL);
        CHECK_EQ(gdr_get_mapping_type_string(GDR_MAPPING_TYPE_WC, NULL), EINVAL);
        CHECK_EQ(gdr_map(g, mh, NULL, GPU_PAGE_SIZE), EINVAL);
        CHECK_EQ(gdr_map_v2(g, mh, NULL, GPU_PAGE_SIZE, 0), EINVAL);
        gdr_runtime_get_version(NULL, NULL); /* must not crash (run-all.sh counts a crash) */
        check_still_works(g, mh, base);
    }

    CHECK_EQ(gdr_unpin_buffer(g, mh), 0);
    CHECK_EQ(gdr_close(g2), 0); /* still holds mh2: closing releases it */
    CHECK_EQ(gdr_close(g), 0);
    check_bad_handle(g, mh, "after close");
    c.live_pins = c.live_mappings = c.open_files = 99;
    CHECK_EQ(gdrsim_get_counters(&c, sizeof(c)), 0);
    CHECK_EQ(c.live_pins, 0);
    CHECK_EQ(c.live_mappings, 0);
    CHECK_EQ(c.open_files, 0);
    CHECK_EQ(cuMemFree(raw), CUDA_SUCCESS);
    return check_done("handles");
}
