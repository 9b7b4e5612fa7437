/*
 * fork.c - a gdr_t inherited by a child process is refused there: every call
 * on it fails with EACCES, and (this library) the child issues no ioctl at
 * all, as the emulator's ioctl counter shows. The parent's mappings are not
 * inherited (gdrdrv marks them VM_DONTCOPY; this library does the same for
 * DMA-BUF mappings with MADV_DONTFORK), and a copy through the parent's handle
 * fails with EINVAL (the handle is not the child's) instead of faulting. The parent's pins and mappings are
 * unaffected, and the child can open a gdr_t of its own. The child is made
 * three ways: fork() (fork handlers run), glibc's _Fork() and a raw clone
 * system call (no fork handler runs), so that the library recognises a new
 * process whatever created it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "gdrapi.h"
#include "gdrsim.h"
#include "gpu.h"

enum { R_PIN, R_PIN_V1, R_INFO, R_INFO_V2, R_FLAG, R_MAP, R_VERSION, R_ATTR, R_COPY_TO,
       R_COPY_FROM, R_UNMAP, R_UNPIN, R_CLOSE, R_COUNT };
static const char *const names[R_COUNT] = {
    "pin_buffer_v2", "pin_buffer", "get_info", "get_info_v2", "get_callback_flag", "map",
    "driver_get_version", "get_attribute", "copy_to_mapping", "copy_from_mapping", "unmap",
    "unpin_buffer", "close",
};

enum how { BY_FORK, BY_UNDERSCORE_FORK, BY_RAW_CLONE };
static const char *const how_names[] = {"fork()", "_Fork()", "raw clone syscall"};

/* A child process made `how`; 0 in the child, as fork() returns. -1 with
 * errno ENOSYS when this C library has no such call. */
static pid_t make_child(enum how how)
{
    switch (how) {
    case BY_FORK:
        return fork();
    case BY_UNDERSCORE_FORK:
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
        return _Fork();
#else
        errno = ENOSYS;
        return -1;
#endif
    case BY_RAW_CLONE:
        /* fork(2) as the kernel sees it, behind the C library's back: no fork
         * handler runs. The argument order of clone differs between
         * architectures, but only the flags are non-zero here. */
        return (pid_t)syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L);
    }
    return -1;
}

static int using_dmabuf;
static unsigned backend; /* gdr_cache_backend() */

/* One parent/child round with a child made `how`. */
static void child_case(enum how how, unsigned long base)
{
    gdr_t g;
    gdr_mh_t mapped_mh, idle_mh;
    void *p = NULL;
    unsigned value = 0xF0F0A5A5u ^ (unsigned)how, r = 0;
    int results[R_COUNT], own_ok = 0, i, mapped_in_child = -1;
    int to_parent[2], to_child[2];
    struct gdrsim_counters before, after;
    pid_t pid;
    int status = 0;

    g = gdr_open();
    if (g == NULL) {
        CHECK(!"gdr_open");
        return;
    }
    if (gdr_pin_buffer_v2(g, base, GPU_PAGE_SIZE, 0, &mapped_mh) != 0 ||
        gdr_map(g, mapped_mh, &p, GPU_PAGE_SIZE) != 0 ||
        gdr_copy_to_mapping(mapped_mh, p, &value, sizeof(value)) != 0 ||
        gdr_pin_buffer_v2(g, base + GPU_PAGE_SIZE, GPU_PAGE_SIZE, 0, &idle_mh) != 0 ||
        pipe(to_parent) != 0 || pipe(to_child) != 0) {
        CHECK(!"set-up of the parent");
        return;
    }

    memset(&before, 0, sizeof(before));
    if (gdrsim_present())
        CHECK_EQ(gdrsim_get_counters(&before, sizeof(before)), 0);
    fflush(stdout);
    pid = make_child(how);
    if (pid < 0 && errno == ENOSYS) {
        printf("fork: %s is not available here, skipped\n", how_names[how]);
        gdr_close(g);
        return;
    }
    if (pid < 0) {
        CHECK(!"the child was created");
        return;
    }
    if (pid == 0) {
        gdr_mh_t out;
        gdr_info_t info;
        gdr_info_v2_t info2;
        void *q = NULL;
        unsigned word = 0;
        int v, major, minor, flag;
        char go;

        close(to_parent[0]);
        close(to_child[1]);
        results[R_PIN] = gdr_pin_buffer_v2(g, base + 2 * GPU_PAGE_SIZE, GPU_PAGE_SIZE, 0, &out);
        results[R_PIN_V1] = gdr_pin_buffer(g, base + 2 * GPU_PAGE_SIZE, GPU_PAGE_SIZE, 0, 0, &out);
        results[R_INFO] = gdr_get_info(g, idle_mh, &info);
        results[R_INFO_V2] = gdr_get_info_v2(g, idle_mh, &info2);
        results[R_FLAG] = gdr_get_callback_flag(g, idle_mh, &flag);
        results[R_MAP] = gdr_map(g, idle_mh, &q, GPU_PAGE_SIZE);
        results[R_VERSION] = gdr_driver_get_version(g, &major, &minor);
        results[R_ATTR] = gdr_get_attribute(g, GDR_ATTR_USE_PERSISTENT_MAPPING, &v);
        /* The parent's mapping is not inherited (msync of an unmapped range: ENOMEM). */
        mapped_in_child = !(msync(p, GPU_PAGE_SIZE, MS_ASYNC) != 0 && errno == ENOMEM);
        /* gdrcopy 2.6 copies through the absent mapping and faults: only this library. */
        results[R_COPY_TO] = OURS() ? gdr_copy_to_mapping(mapped_mh, p, &word, sizeof(word)) : EINVAL;
        results[R_COPY_FROM] = OURS() ? gdr_copy_from_mapping(mapped_mh, &word, p, sizeof(word)) : EINVAL;
        results[R_UNMAP] = gdr_unmap(g, mapped_mh, p, GPU_PAGE_SIZE);
        results[R_UNPIN] = gdr_unpin_buffer(g, idle_mh);
        results[R_CLOSE] = gdr_close(g);
        if (write(to_parent[1], results, sizeof(results)) != (ssize_t)sizeof(results) ||
            write(to_parent[1], &mapped_in_child, sizeof(int)) != (ssize_t)sizeof(int))
            _exit(3);
        /* After the parent has read the counters: a gdr_t of its own works. */
        if (read(to_child[0], &go, 1) != 1)
            _exit(3);
        {
            gdr_t mine = gdr_open();
            own_ok = mine != NULL && gdr_driver_get_version(mine, &major, &minor) == 0 &&
                     major == 2 && gdr_close(mine) == 0;
            /* On DMA-BUF and the Vulkan import, gdr_open needs CUDA, which a child of a
             * process that initialised it cannot use (as with the real driver): a clean
             * refusal is right there. */
            if (backend != GDR_CACHE_BACKEND_GDRDRV && mine == NULL)
                own_ok = 1;
        }
        _exit(own_ok ? 0 : 4);
    }

    /* Only the child holds these ends now: a child that dies shows as end of file. */
    close(to_parent[1]);
    close(to_child[0]);
    printf("fork: child made by %s\n", how_names[how]);
    if (read(to_parent[0], results, sizeof(results)) != (ssize_t)sizeof(results) ||
        read(to_parent[0], &mapped_in_child, sizeof(int)) != (ssize_t)sizeof(int)) {
        CHECK(!"the child reported its results");
    } else {
        memset(&after, 0, sizeof(after));
        if (gdrsim_present())
            CHECK_EQ(gdrsim_get_counters(&after, sizeof(after)), 0);
        for (i = 0; i < R_COUNT; i++) {
            /* gdrcopy 2.6 checks the mapping state before any ioctl: its
             * child unmaps its (absent) copy of the mapping and succeeds. */
            if (i == R_UNMAP && !OURS())
                continue;
            /* gdrcopy 2.6 answers this attribute from memory on old drivers. */
            if (i == R_ATTR && !OURS() && sim_driver_minor() < 5)
                continue;
            /* gdrcopy 2.6 answers these from memory on DMA-BUF. */
            if (!OURS() && using_dmabuf &&
                (i == R_INFO || i == R_INFO_V2 || i == R_FLAG || i == R_VERSION || i == R_ATTR ||
                 i == R_MAP || i == R_PIN || i == R_PIN_V1 || i == R_UNPIN || i == R_CLOSE))
                continue;
            {
                /* A copy takes no gdr_t: the handle is simply not one of the child's. */
                int want = (i == R_COPY_TO || i == R_COPY_FROM) ? EINVAL : EACCES;
                if (results[i] != want)
                    printf("child (%s): gdr_%s returned %d, want %d\n", how_names[how], names[i],
                           results[i], want);
                CHECK_EQ(results[i], want);
            }
        }
        /* gdrcopy 2.6's DMA-BUF mappings are inherited. */
        if (OURS() || !using_dmabuf) {
            if (mapped_in_child)
                printf("child (%s): the parent's mapping is present in the child\n", how_names[how]);
            CHECK_EQ(mapped_in_child, 0);
        }
        if (OURS())
            CHECK_EQ(after.ioctls - before.ioctls, 0);
        else if (!using_dmabuf)
            CHECK(after.ioctls > before.ioctls);
    }
    if (write(to_child[1], "g", 1) != 1)
        CHECK(!"released the child");
    waitpid(pid, &status, 0);
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        printf("child (%s): status 0x%x\n", how_names[how], status);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(to_parent[0]);
    close(to_child[1]);

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
    if (gdrsim_present()) {
        memset(&after, 0xff, sizeof(after));
        CHECK_EQ(gdrsim_get_counters(&after, sizeof(after)), 0);
        CHECK_EQ(after.live_pins, 0);
        CHECK_EQ(after.live_mappings, 0);
        CHECK_EQ(after.open_files, 0);
        CHECK_EQ(after.live_dmabufs, 0);
    }
}

int main(void)
{
    CUdeviceptr raw;
    unsigned long base;
    gdr_t probe;

    /* A child that died must show as a failed check, not kill the parent's write to it. */
    signal(SIGPIPE, SIG_IGN);
    gpu_init();
    raw = gpu_alloc(4 * GPU_PAGE_SIZE);
    base = gpu_aligned(raw);
    probe = gdr_open();
    REQUIRE(probe != NULL);
    REQUIRE(gdr_get_attribute(probe, GDR_ATTR_USING_DMA_BUF_MMAP, &using_dmabuf) == 0);
    backend = gdr_cache_backend(probe);
    REQUIRE(gdr_close(probe) == 0);
    printf("fork: %s backend\n", backend == GDR_CACHE_BACKEND_VULKAN ? "Vulkan import" : using_dmabuf ? "DMA-BUF" : "gdrdrv");
    child_case(BY_FORK, base);
    child_case(BY_UNDERSCORE_FORK, base);
    child_case(BY_RAW_CLONE, base);
    CHECK_EQ(gpu_free(raw), CUDA_SUCCESS);
    return check_done("fork");
}
