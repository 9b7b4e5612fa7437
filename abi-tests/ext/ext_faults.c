/*
 * ext_faults - a fault at every driver call the allocator of gdrapi_ext.h makes, on the
 * emulator (abi-tests/reliability/faults.c does the same for libgdrapi's own calls).
 *
 * A fixed workload uses every function: gdrx_open, gdrx_info, three allocations (the first
 * makes a shared chunk, the second shares it, the third is large and gets its own), copies both
 * ways, a lookup, two frees (the shared chunk empties and is released), a fourth allocation (a
 * new chunk) and gdrx_close with two allocations live. For every call NAME the emulator can
 * fail (the CUDA functions the allocator calls, those libgdrapi calls for it, gdrdrv's ioctls,
 * open, mmap, munmap and close, and on the Vulkan import its VMM exports and Vulkan calls), each
 * error in a list and the Nth such call for N = 1..MAX_NTH, the workload runs with the rule
 * "NAME:N:ERR" armed. Every run checks:
 *   - each function returned 0 or exactly the injected error (as an errno: libgdrapi's tables
 *     for CUresult and VkResult); gdrx_open may also return ENODEV, when the fault made
 *     gdr_open fail (which reports no errno);
 *   - the failed call, repeated once the fault is spent, succeeds (gdrx_free and gdrx_close:
 *     the allocation or allocator is gone even so, and EINVAL afterwards);
 *   - copies that succeeded read back what was written;
 *   - after gdrx_close the emulator counts no pin, mapping, open device file, dma-buf, VMM
 *     export or Vulkan object more than before, and no device allocation.
 * The CUDA initialisation (once per process) is failed in a fresh child for each rule.
 *
 * Usage: ext_faults BACKEND [cumemalloc] [noinit]   (BACKEND: gdrdrv, dmabuf, vulkan; run.sh
 * sets the emulator's situation for it)
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include "check_faults.h"
#include "ext.h"
#include "gpu.h"

#define MAX_NTH 8

enum {
    S_OPEN, S_INFO, S_ALLOC1, S_ALLOC2, S_ALLOC_BIG, S_COPY_TO, S_COPY_FROM, S_LOOKUP, S_FREE1,
    S_FREE2, S_ALLOC3, S_CLOSE, S_COUNT
};
static const char *const step_names[S_COUNT] = {
    "gdrx_open", "gdrx_info", "gdrx_alloc (new chunk)", "gdrx_alloc (shared chunk)",
    "gdrx_alloc (large)", "gdrx_copy_to", "gdrx_copy_from", "gdrx_lookup",
    "gdrx_free", "gdrx_free (chunk empties)", "gdrx_alloc (chunk again)", "gdrx_close",
};

#define SKIPPED (-1000)

static unsigned open_flags;
/* rc must be 0 or the injected error; gdrx_open may also give ENODEV, when the fault made
 * gdr_open fail (which reports no errno). */
static int ok_or_injected(int step, int rc)
{
    return check_fault_result(step_names[step], rc, step == S_OPEN ? ENODEV : 0);
}

static void workload(int rc[S_COUNT])
{
    gdrx_t x = NULL;
    gdrx_mem_t m1, m2, big, m3, found;
    gdrx_info_t in;
    size_t off;
    int have1 = 0, have2 = 0, havebig = 0, have3 = 0, r;
    unsigned char out[200], back[200];

    for (int i = 0; i < S_COUNT; i++)
        rc[i] = SKIPPED;

#define STEP(id, call)                                                                         \
    do {                                                                                       \
        r = (call);                                                                            \
        rc[id] = r;                                                                            \
        if (ok_or_injected(id, r) && r != 0) {                                                 \
            r = (call);                                                                        \
            if (r != 0)                                                                        \
                check_fault_bad(step_names[id], "the call fails again once the fault is spent", r);\
        }                                                                                      \
    } while (0)

    STEP(S_OPEN, gdrx_open(&x, 0, open_flags));
    if (r != 0)
        return;
    memset(&in, 0, sizeof(in));
    STEP(S_INFO, gdrx_info(x, &in));
    STEP(S_ALLOC1, gdrx_alloc(x, 8, 0, &m1));
    have1 = r == 0;
    STEP(S_ALLOC2, gdrx_alloc(x, 100, 256, &m2));
    have2 = r == 0;
    STEP(S_ALLOC_BIG, gdrx_alloc(x, in.small_max + 4096, 0, &big));
    havebig = r == 0;
    if (have2) {
        for (int i = 0; i < (int)sizeof(out); i++)
            out[i] = (unsigned char)(i * 7 + check_fault.err);
        memset(back, 0, sizeof(back));
        STEP(S_COPY_TO, gdrx_copy_to(&m2, 0, out, 100));
        STEP(S_COPY_FROM, gdrx_copy_from(&m2, 0, back, 100));
        if (r == 0)
            CHECK(memcmp(out, back, 100) == 0);
        STEP(S_LOOKUP, gdrx_lookup(x, m2.dev_ptr + 50, &found, &off));
        if (r == 0)
            CHECK(found.handle == m2.handle && off == 50);
    }
    if (havebig) {
        CHECK_EQ(gdrx_copy_to(&big, big.size - 200, out, 200), 0);
        memset(back, 0, sizeof(back));
        CHECK_EQ(gdrx_copy_from(&big, big.size - 200, back, 200), 0);
        CHECK(memcmp(out, back, 200) == 0);
    }
    /* A free that reports an error has freed all the same. */
    if (have1) {
        r = gdrx_free(x, &m1);
        rc[S_FREE1] = r;
        ok_or_injected(S_FREE1, r);
        CHECK_EQ(gdrx_free(x, &m1), EINVAL);
    }
    if (have2) {
        r = gdrx_free(x, &m2);
        rc[S_FREE2] = r;
        ok_or_injected(S_FREE2, r);
        CHECK_EQ(gdrx_copy_to(&m2, 0, out, 1), EINVAL);
    }
    STEP(S_ALLOC3, gdrx_alloc(x, 64, 0, &m3));
    have3 = r == 0;
    (void)have3;
    r = gdrx_close(x);
    rc[S_CLOSE] = r;
    ok_or_injected(S_CLOSE, r);
    CHECK_EQ(gdrx_close(x), EINVAL);
    if (havebig)
        CHECK_EQ(gdrx_copy_to(&big, 0, out, 1), EINVAL);
#undef STEP
}

static struct left before;
/* On the Vulkan import, each of libgdrapi's pins holds the reference cuMemRetainAllocationHandle
 * took and gives it back at the unpin with a cuMemRelease whose failure it only logs: the
 * allocation then outlives the workload by that reference. Those runs do not count device allocations (the allocator's own cuMemRelease
 * failures are counted on the other backends, where only it calls cuMemRelease). */
static int skip_allocations;
static int vulkan_import; /* the backend is the Vulkan import */

static int leaks(void)
{
    struct left now = counted();
    if (skip_allocations)
        now.allocations = before.allocations;
    if (nothing_left(check_fault.spec, before, now)) {
        check_report(1, __FILE__, __LINE__, "nothing left after the workload");
        return 0;
    }
    check_report(0, __FILE__, __LINE__, "leak after the workload");
    return 1;
}

/* Before each run of the sweep: what its leak check compares with, with no context current
 * (a failed restore leaves the allocator's context current). */
static void before_run(const char *name)
{
    skip_allocations = vulkan_import && strcmp(name, "cuMemRelease") == 0;
    before = counted();
    REQUIRE(cuCtxSetCurrent(NULL) == CUDA_SUCCESS);
}

/* One gdrx_open under the fault `spec` (with the CUresult `err`), in the child that
 * check_init_faults forked: its exit code. */
static int init_fault_child(const char *spec, int err, void *arg)
{
    (void)arg;
    struct left b = counted();
    gdrx_t x;
    int code = 0;
    if (gdrsim_set_fail(spec) != 0)
        return 8;
    int rc = gdrx_open(&x, 0, open_flags);
    if (rc != 0 && rc != check_errno_of_curesult(err) && rc != ENODEV)
        code |= 2;
    if (rc != 0)
        code |= 1;
    else if (gdrx_close(x) != 0)
        code |= 4;
    if (!nothing_left(spec, b, counted()))
        code |= 4;
    if (gdrx_open(&x, 0, open_flags) != 0 || gdrx_close(x) != 0)
        code |= 16;
    return code;
}

/* The CUDA driver is loaded and initialised once per process, at the first gdrx_open: its
 * faults are injected in a fresh child for each rule. */
static long init_faults(const char *const *names, int nnames, const int *errs, int nerrs)
{
    static const struct check_init_fault f = {
        .what = "gdrx_open under an init fault",
        .call = "gdrx_open",
        .bad = {"an error that is not the injected one; ",
                "gdrx_close failed or something was left; ",
                "gdrx_open fails again once the fault is spent"},
        .run = init_fault_child,
    };
    return check_init_faults(&f, names, nnames, errs, nerrs);
}

int main(int argc, char **argv)
{
    const char *backend = argc > 1 ? argv[1] : "gdrdrv";
    int noinit = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "cumemalloc") == 0)
            open_flags |= GDRX_OPEN_CUMEMALLOC;
        if (strcmp(argv[i], "noinit") == 0)
            noinit = 1;
    }
    int vulkan = strcmp(backend, "vulkan") == 0;
    vulkan_import = vulkan;
    check_fault.dmabuf = strcmp(backend, "dmabuf") == 0;
    static const char *const sys_names[] = {
        "GET_VERSION", "GET_ATTR", "PIN_BUFFER_V2", "PIN_BUFFER", "UNPIN_BUFFER", "GET_INFO",
        "GET_INFO_V2", "REQ_MAPPING_TYPE", "open", "mmap", "munmap", "close",
    };
    static const int errnos[] = {EINVAL, EACCES, EFAULT, ENOMEM, EIO, EBUSY, 524, EAGAIN};
    static const char *const cuda_names[] = {
        "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetAttribute", "cuDevicePrimaryCtxRetain",
        "cuDevicePrimaryCtxRelease", "cuCtxGetCurrent", "cuCtxSetCurrent",
        "cuMemGetAllocationGranularity", "cuMemCreate", "cuMemAddressReserve", "cuMemMap",
        "cuMemSetAccess", "cuMemUnmap", "cuMemAddressFree", "cuMemRelease", "cuMemAlloc",
        "cuMemFree", "cuPointerSetAttribute", "cuPointerGetAttribute",
        "cuMemGetHandleForAddressRange",
    };
    static const char *const vmm_names[] = {
        "cuMemRetainAllocationHandle", "cuMemGetAllocationPropertiesFromHandle",
        "cuMemExportToShareableHandle", "cuMemGetAddressRange_v2",
    };
    static const int cuerrs[] = {1, 2, 3, 100, 201, 801, 999};
    static const char *const vk_names[] = {"vkCreateDevice", "vkAllocateMemory", "vkMapMemory"};
    static const int vkerrs[] = {-1, -2, -3, -4, -5, -10};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
    const struct check_fault_group groups[] = {
        {sys_names, COUNT(sys_names), errnos, COUNT(errnos), NULL, 0},
        {cuda_names, COUNT(cuda_names), cuerrs, COUNT(cuerrs), check_errno_of_curesult, 0},
        {vmm_names, COUNT(vmm_names), cuerrs, COUNT(cuerrs), check_errno_of_curesult, 1},
        {vk_names, COUNT(vk_names), vkerrs, COUNT(vkerrs), check_errno_of_vkresult, 1},
    };
    long runs = 0, injected = 0, total_leaks = 0;

    REQUIRE(gdrsim_present());
    gpu_init();
    /* No context current: the allocator makes its own current around its calls and puts the
     * caller's (none) back, so that cuCtxSetCurrent is called and can fail. */
    REQUIRE(cuCtxSetCurrent(NULL) == CUDA_SUCCESS);
    if (!noinit) {
        static const char *const init_names[] = {"cuInit", "cuDriverGetVersion", "cuGetProcAddress"};
        long fired = init_faults(init_names, COUNT(init_names), cuerrs, COUNT(cuerrs));
        printf("%-40s %4ld faults injected (first gdrx_open, %d rules)\n", "CUDA initialisation",
               fired, COUNT(init_names) * COUNT(cuerrs));
        injected += fired;
        runs += COUNT(init_names) * COUNT(cuerrs);
    }

    const struct check_fault_sweep sweep = {
        .nsteps = S_COUNT,
        .step_names = step_names,
        .value_step = -1,
        .max_nth = MAX_NTH,
        .before = before_run,
        .workload = workload,
        .leaks = leaks,
    };
    injected += check_fault_sweep(&sweep, groups, COUNT(groups), vulkan, &runs, &total_leaks);
#undef COUNT
    printf("faults: gdrx on the %s backend%s, %ld runs, %ld faults injected, %ld runs with a leak\n",
           backend, open_flags ? " (cuMemAlloc)" : "", runs, injected, total_leaks);
    char done[80];
    snprintf(done, sizeof(done), "ext faults (%s%s)", backend, open_flags ? ", cuMemAlloc" : "");
    return check_done(done);
}
