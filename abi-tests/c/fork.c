/*
 * fork.c - a gdr_t inherited by a forked child is refused there: every call
 * on it fails with EACCES, and (this library) the child issues no ioctl at
 * all, as the emulator's ioctl counter shows. The parent's pins and
 * mappings are unaffected, and the child can open a gdr_t of its own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "gdrapi.h"
#include "gdrsim.h"
#include "gpu.h"

enum { R_PIN, R_PIN_V1, R_INFO, R_FLAG, R_MAP, R_VERSION, R_ATTR, R_UNMAP, R_UNPIN, R_CLOSE, R_COUNT };
static const char *const names[R_COUNT] = {
    "pin_buffer_v2", "pin_buffer", "get_info", "get_callback_flag", "map",
    "driver_get_version", "get_attribute", "unmap", "unpin_buffer", "close",
};

int main(void)
{
    CUdeviceptr raw;
    unsigned long base;
    gdr_t g;
    gdr_mh_t mapped_mh, idle_mh;
    void *p = NULL;
    unsigned value = 0xF0F0A5A5u, r = 0;
    int results[R_COUNT], own_ok = 0, i;
    int to_parent[2], to_child[2];
    struct gdrsim_counters before, after;
    pid_t pid;
    int status = 0;

    gpu_init();
    raw = gpu_alloc(4 * GPU_PAGE_SIZE);
    base = gpu_aligned(raw);
    g = gdr_open();
    REQUIRE(g != NULL);
    REQUIRE(gdr_pin_buffer_v2(g, base, GPU_PAGE_SIZE, 0, &mapped_mh) == 0);
    REQUIRE(gdr_map(g, mapped_mh, &p, GPU_PAGE_SIZE) == 0);
    REQUIRE(gdr_copy_to_mapping(mapped_mh, p, &value, sizeof(value)) == 0);
    REQUIRE(gdr_pin_buffer_v2(g, base + GPU_PAGE_SIZE, GPU_PAGE_SIZE, 0, &idle_mh) == 0);
    REQUIRE(pipe(to_parent) == 0 && pipe(to_child) == 0);

    memset(&before, 0, sizeof(before));
    CHECK_EQ(gdrsim_get_counters(&before, sizeof(before)), 0);
    fflush(stdout);
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        gdr_mh_t out;
        gdr_info_t info;
        void *q = NULL;
        int v, major, minor, flag;
        char go;

        results[R_PIN] = gdr_pin_buffer_v2(g, base + 2 * GPU_PAGE_SIZE, GPU_PAGE_SIZE, 0, &out);
        results[R_PIN_V1] = gdr_pin_buffer(g, base + 2 * GPU_PAGE_SIZE, GPU_PAGE_SIZE, 0, 0, &out);
        results[R_INFO] = gdr_get_info(g, idle_mh, &info);
        results[R_FLAG] = gdr_get_callback_flag(g, idle_mh, &flag);
        results[R_MAP] = gdr_map(g, idle_mh, &q, GPU_PAGE_SIZE);
        results[R_VERSION] = gdr_driver_get_version(g, &major, &minor);
        results[R_ATTR] = gdr_get_attribute(g, GDR_ATTR_USE_PERSISTENT_MAPPING, &v);
        results[R_UNMAP] = gdr_unmap(g, mapped_mh, p, GPU_PAGE_SIZE);
        results[R_UNPIN] = gdr_unpin_buffer(g, idle_mh);
        results[R_CLOSE] = gdr_close(g);
        if (write(to_parent[1], results, sizeof(results)) != (ssize_t)sizeof(results))
            _exit(3);
        /* After the parent has read the counters: a gdr_t of its own works. */
        if (read(to_child[0], &go, 1) != 1)
            _exit(3);
        {
            gdr_t mine = gdr_open();
            own_ok = mine != NULL && gdr_driver_get_version(mine, &major, &minor) == 0 &&
                     major == 2 && gdr_close(mine) == 0;
        }
        _exit(own_ok ? 0 : 4);
    }

    if (read(to_parent[0], results, sizeof(results)) != (ssize_t)sizeof(results)) {
        CHECK(!"the child reported its results");
    } else {
        memset(&after, 0, sizeof(after));
        CHECK_EQ(gdrsim_get_counters(&after, sizeof(after)), 0);
        for (i = 0; i < R_COUNT; i++) {
            /* gdrcopy 2.6 checks the mapping state before any ioctl: its
             * child unmaps its (absent) copy of the mapping and succeeds. */
            if (i == R_UNMAP && !OURS())
                continue;
            /* gdrcopy 2.6 answers this attribute from memory on old drivers. */
            if (i == R_ATTR && !OURS() && sim_driver_minor() < 5)
                continue;
            if (results[i] != EACCES)
                printf("child: gdr_%s returned %d, want EACCES\n", names[i], results[i]);
            CHECK_EQ(results[i], EACCES);
        }
        if (OURS())
            CHECK_EQ(after.ioctls - before.ioctls, 0);
        else
            CHECK(after.ioctls > before.ioctls);
    }
    if (write(to_child[1], "g", 1) != 1)
        CHECK(!"released the child");
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* The parent is unaffected. */
    CHECK_EQ(gdr_copy_from_mapping(mapped_mh, &r, p, sizeof(r)), 0);
    CHECK_EQ(r, value);
    {
        gdr_info_t info;
        CHECK_EQ(gdr_get_info(g, idle_mh, &info), 0);
        CHECK_EQ(info.va, base + GPU_PAGE_SIZE);
    }
    CHECK_EQ(gdr_unmap(g, mapped_mh, p, GPU_PAGE_SIZE), 0);
    CHECK_EQ(gdr_unpin_buffer(g, mapped_mh), 0);
    CHECK_EQ(gdr_unpin_buffer(g, idle_mh), 0);
    CHECK_EQ(gdr_close(g), 0);
    memset(&after, 0xff, sizeof(after));
    CHECK_EQ(gdrsim_get_counters(&after, sizeof(after)), 0);
    CHECK_EQ(after.live_pins, 0);
    CHECK_EQ(after.live_mappings, 0);
    CHECK_EQ(after.open_files, 0);
    CHECK_EQ(cuMemFree(raw), CUDA_SUCCESS);
    return check_done("fork");
}
