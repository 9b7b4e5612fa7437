/*
 * faults.c - a fault at every driver call the library makes.
 *
 * A fixed workload uses every function that reaches the driver: gdr_open, gdr_driver_get_version,
 * gdr_get_attribute (three attributes), gdr_pin_buffer_v2, gdr_pin_buffer, gdr_get_callback_flag,
 * gdr_get_info_v2, the legacy gdr_get_info, gdr_map, gdr_map_v2, copies both ways, gdr_unmap,
 * gdr_unpin_buffer and gdr_close (which also unmaps and unpins a second buffer left mapped).
 * For every call NAME the emulator can fail (each ioctl, open, mmap, munmap, close and each CUDA
 * function the library may call), every errno (or CUresult) the driver can return, and the Nth
 * such call for N = 1..MAX_NTH, the workload runs with the rule "NAME:N:ERR" armed
 * (gdrsim_set_fail). A run in which some result differs from the fault-free run is a fault that
 * was injected. Every run checks:
 *   - each public function returned 0 or exactly the injected error (gdr_open: NULL);
 *   - the failed call, repeated once the fault is spent, succeeds: the gdr_t stays usable
 *     (except gdr_unpin_buffer and gdr_close, after which the handle / gdr_t is gone by contract:
 *     then the handle must be refused with EINVAL);
 *   - a copy that succeeded reads back what was written;
 *   - after the workload the emulator counts no pin, no mapping, no open device file, no dma-buf.
 *
 * argv[1]: "gdrdrv" (default), "dmabuf" (run with GDRSIM_NO_DEVICE=1: the DMA-BUF backend) or
 * "vulkan" (run in the Vulkan import's situation: GDRSIM_NO_DEVICE=1 GDRSIM_CUDA_VERSION=13000
 * GDRAPI_USE_VULKAN=1 GDRAPI_TEST_ALLOC=vmm, the emulator's Vulkan stand-in first on the path;
 * then the stand-in's Vulkan functions fail too, with VkResult values);
 * argv[2] "noinit" leaves out the initialisation faults (one fork each: slow under valgrind).
 * Prints the number of faults injected per call name and in total.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "check_faults.h"
#include "gdrapi.h"
#include "gdrsim.h"
#include "gpu.h"

#define MAX_NTH 8

enum {
    S_OPEN, S_DRV_VERSION, S_ATTR1, S_ATTR2, S_ATTR3, S_PIN_V2, S_PIN_V1, S_CB_FLAG, S_INFO_V2,
    S_INFO_V1, S_MAP, S_MAP_V2, S_COPY_TO, S_COPY_FROM, S_UNMAP, S_UNPIN, S_CLOSE, S_BACKEND,
    S_COUNT
};
static const char *const step_names[S_COUNT] = {
    "gdr_open", "gdr_driver_get_version", "gdr_get_attribute(1)", "gdr_get_attribute(2)",
    "gdr_get_attribute(3)", "gdr_pin_buffer_v2", "gdr_pin_buffer", "gdr_get_callback_flag",
    "gdr_get_info_v2", "gdr_get_info", "gdr_map", "gdr_map_v2", "gdr_copy_to_mapping",
    "gdr_copy_from_mapping", "gdr_unmap", "gdr_unpin_buffer", "gdr_close",
    "backend (GDR_ATTR_USING_DMA_BUF_MMAP)",
};

#define SKIPPED (-1000) /* the step's precondition (a handle, a mapping) was missing */

typedef int (*legacy_info_fn)(gdr_t, gdr_mh_t, void *);
static legacy_info_fn legacy_info;
static unsigned long base;
static int vulkan_mode;

/* rc must be 0 or the injected error. */
static int ok_or_injected(int step, int rc)
{
    return check_fault_result(step_names[step], rc, 0);
}

/* Runs the workload; rc[step] gets each first result. Returns the number of repeated calls. */
static void workload(int rc[S_COUNT])
{
    gdr_t g;
    gdr_mh_t mh1 = {0}, mh2 = {0};
    void *va1 = NULL, *va2 = NULL;
    int have1 = 0, have2 = 0, map1 = 0, map2 = 0, v, major, minor, flag, r;
    gdr_info_v2_t info;
    unsigned char out[256], in[256];

    for (int i = 0; i < S_COUNT; i++)
        rc[i] = SKIPPED;

    g = gdr_open();
    rc[S_OPEN] = g ? 0 : 1;
    if (!g) {
        g = gdr_open(); /* the fault is spent: must work now */
        if (!g) {
            check_fault_bad("gdr_open", "gdr_open fails again after the fault", 0);
            return;
        }
    }

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

    STEP(S_DRV_VERSION, gdr_driver_get_version(g, &major, &minor));
    STEP(S_ATTR1, gdr_get_attribute(g, GDR_ATTR_USE_PERSISTENT_MAPPING, &v));
    STEP(S_ATTR2, gdr_get_attribute(g, GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE, &v));
    STEP(S_ATTR3, gdr_get_attribute(g, GDR_ATTR_USING_DMA_BUF_MMAP, &v));
    /* A failed open of the device falls back to the DMA-BUF backend: part of the outcome. */
    rc[S_BACKEND] = r == 0 ? v : SKIPPED;
    STEP(S_PIN_V2, gdr_pin_buffer_v2(g, base, 2 * GPU_PAGE_SIZE, 0, &mh1));
    have1 = r == 0;
    STEP(S_PIN_V1, gdr_pin_buffer(g, base + 2 * GPU_PAGE_SIZE, GPU_PAGE_SIZE, 0, 0, &mh2));
    have2 = r == 0;
    if (have1) {
        STEP(S_CB_FLAG, gdr_get_callback_flag(g, mh1, &flag));
        STEP(S_INFO_V2, gdr_get_info_v2(g, mh1, &info));
    }
    if (have2)
        STEP(S_INFO_V1, legacy_info(g, mh2, &info));
    if (have1) {
        STEP(S_MAP, gdr_map(g, mh1, &va1, 2 * GPU_PAGE_SIZE));
        map1 = r == 0;
    }
    if (have2) {
        STEP(S_MAP_V2, gdr_map_v2(g, mh2, &va2, GPU_PAGE_SIZE, GDR_MAP_FLAG_DEFAULT));
        map2 = r == 0;
    }
    if (map1) {
        for (int i = 0; i < (int)sizeof(out); i++)
            out[i] = (unsigned char)(i * 13 + check_fault.err);
        memset(in, 0, sizeof(in));
        STEP(S_COPY_TO, gdr_copy_to_mapping(mh1, (char *)va1 + 100, out, sizeof(out)));
        STEP(S_COPY_FROM, gdr_copy_from_mapping(mh1, in, (char *)va1 + 100, sizeof(in)));
        if (r == 0)
            CHECK(memcmp(in, out, sizeof(in)) == 0);
        STEP(S_UNMAP, gdr_unmap(g, mh1, va1, 2 * GPU_PAGE_SIZE));
    }
    if (have1) {
        /* An unpin that fails still gives the handle up (the library forgets it, as
         * upstream does): no repetition, but the handle must be gone. */
        r = gdr_unpin_buffer(g, mh1);
        rc[S_UNPIN] = r;
        ok_or_injected(S_UNPIN, r);
        CHECK_EQ(gdr_get_info_v2(g, mh1, &info), EINVAL);
    }
    (void)map2;
    (void)va2;
    /* mh2 stays pinned and mapped: gdr_close removes both. */
    r = gdr_close(g);
    rc[S_CLOSE] = r;
    ok_or_injected(S_CLOSE, r);
    CHECK_EQ(gdr_close(g), EINVAL); /* closed even when it reported an error */
#undef STEP
}

static struct gdrsim_counters before;

static void snapshot(void)
{
    memset(&before, 0, sizeof(before));
    gdrsim_get_counters(&before, sizeof(before));
}

/* What the last run left behind, compared with the snapshot taken before it (so that one leak
 * is counted once, not in every later run). */
static int leaks(void)
{
    struct gdrsim_counters c;
    memset(&c, 0, sizeof(c));
    gdrsim_get_counters(&c, sizeof(c));
    c.live_pins -= before.live_pins;
    c.live_mappings -= before.live_mappings;
    c.open_files -= before.open_files;
    c.live_dmabufs -= before.live_dmabufs;
    /* The Vulkan import's: exports, imports, mappings, and the devices and instances a closed
     * session must have destroyed. */
    uint64_t vk = (c.live_vmm_exports - before.live_vmm_exports) +
                  (c.live_vk_imports - before.live_vk_imports) +
                  (c.live_vk_mappings - before.live_vk_mappings) +
                  (c.live_vk_devices - before.live_vk_devices) +
                  (c.live_vk_instances - before.live_vk_instances);
    /* A failed close(2) on Linux still releases the descriptor, and so does the emulator's
     * injected close failure: an open file left after any run is a leak. */
    if (c.live_pins || c.live_mappings || c.open_files || c.live_dmabufs || vk) {
        check_report(0, __FILE__, __LINE__, "leak after the workload");
        printf("    with %s: live_pins=%llu live_mappings=%llu open_files=%llu live_dmabufs=%llu "
               "vulkan=%llu\n",
               check_fault.spec, (unsigned long long)c.live_pins, (unsigned long long)c.live_mappings,
               (unsigned long long)c.open_files, (unsigned long long)c.live_dmabufs,
               (unsigned long long)vk);
        return 1;
    }
    check_report(1, __FILE__, __LINE__, "no leak after the workload");
    return 0;
}

/* Before each run of the sweep: what its leak check compares with. */
static void before_run(const char *name)
{
    (void)name;
    snapshot();
}

/* One gdr_open under the fault `spec`, in the child that check_init_faults forked: its exit
 * code. */
static int init_fault_child(const char *spec, int err, void *arg)
{
    (void)err;
    (void)arg;
    struct gdrsim_counters c;
    int code = 0;
    if (gdrsim_set_fail(spec) != 0)
        return 8;
    gdr_t g = gdr_open();
    if (g == NULL)
        code |= 1; /* the fault made gdr_open fail */
    else if (gdr_close(g) != 0)
        code |= 2;
    memset(&c, 0, sizeof(c));
    gdrsim_get_counters(&c, sizeof(c));
    if (c.open_files || c.live_dmabufs || c.live_vk_instances || c.live_vk_devices)
        code |= 4;
    g = gdr_open();
    if (g == NULL || gdr_close(g) != 0)
        code |= 16;
    return code;
}

/* The library loads and initialises the CUDA driver once per process, at the first gdr_open
 * that needs it (the DMA-BUF and Vulkan backends), so faults in that path are injected in a
 * fresh child for each rule: gdr_open must fail cleanly (NULL, nothing left open), and the next
 * gdr_open, with the fault spent, must succeed. Returns the number of faults that made
 * gdr_open fail. */
static long init_faults(const char *const *names, int nnames, const int *errs, int nerrs)
{
    static const struct check_init_fault f = {
        .what = "gdr_open under an init fault",
        .call = "gdr_open",
        .bad = {"gdr_close failed; ", "a file or dma-buf left open; ",
                "gdr_open fails again once the fault is spent"},
        .run = init_fault_child,
    };
    return check_init_faults(&f, names, nnames, errs, nerrs);
}

int main(int argc, char **argv)
{
    static const char *const sys_names[] = {
        "GET_VERSION", "GET_ATTR", "PIN_BUFFER_V2", "PIN_BUFFER", "UNPIN_BUFFER", "GET_CB_FLAG",
        "GET_INFO", "GET_INFO_V2", "REQ_MAPPING_TYPE", "open", "mmap", "munmap", "close",
    };
    /* Every errno the driver, the kernel's mmap/munmap/close paths and NVIDIA's p2p layer can
     * give (reference A.2): 524 is the kernel-internal ENOTSUPP. */
    static const int errnos[] = {EINVAL, EACCES, ENOTTY, EFAULT, ENOMEM, EIO, EBUSY, ENODEV,
                                 524, EOPNOTSUPP, EAGAIN, EPERM, ENOENT, ENXIO, EMFILE, EINTR};
    static const char *const cuda_names[] = {
        "cuInit", "cuDriverGetVersion", "cuDeviceGet", "cuDeviceGetCount", "cuDeviceGetAttribute",
        "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease", "cuCtxGetCurrent",
        "cuCtxSetCurrent", "cuPointerGetAttribute", "cuMemGetHandleForAddressRange",
    };
    /* Those only the Vulkan import calls. */
    static const char *const vmm_names[] = {
        "cuMemRetainAllocationHandle", "cuMemGetAllocationPropertiesFromHandle",
        "cuMemExportToShareableHandle", "cuMemRelease", "cuMemGetAddressRange_v2",
    };
    /* CUDA_ERROR_INVALID_VALUE, OUT_OF_MEMORY, NOT_INITIALIZED, NO_DEVICE, INVALID_DEVICE,
     * INVALID_CONTEXT, NOT_SUPPORTED, UNKNOWN. */
    static const int cuerrs[] = {1, 2, 3, 100, 101, 201, 801, 999};
    /* The Vulkan stand-in's functions after gdr_open, and the VkResults they may return:
     * OUT_OF_HOST_MEMORY, OUT_OF_DEVICE_MEMORY, INITIALIZATION_FAILED, DEVICE_LOST,
     * MEMORY_MAP_FAILED, EXTENSION_NOT_PRESENT, TOO_MANY_OBJECTS, INVALID_EXTERNAL_HANDLE. */
    static const char *const vk_names[] = {"vkCreateDevice", "vkAllocateMemory", "vkMapMemory"};
    static const int vkerrs[] = {-1, -2, -3, -4, -5, -7, -10, -1000072003};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
    /* Each group of names, with the errors injected and the errno each comes back as. */
    const struct check_fault_group groups[] = {
        {sys_names, COUNT(sys_names), errnos, COUNT(errnos), NULL, 0},
        {cuda_names, COUNT(cuda_names), cuerrs, COUNT(cuerrs), check_errno_of_curesult, 0},
        {vmm_names, COUNT(vmm_names), cuerrs, COUNT(cuerrs), check_errno_of_curesult, 1},
        {vk_names, COUNT(vk_names), vkerrs, COUNT(vkerrs), check_errno_of_vkresult, 1},
    };
    long runs = 0, injected = 0, total_leaks = 0;

    check_fault.dmabuf = argc > 1 && strcmp(argv[1], "dmabuf") == 0;
    vulkan_mode = argc > 1 && strcmp(argv[1], "vulkan") == 0;
    gpu_init();
    base = gpu_aligned(gpu_alloc(4 * GPU_PAGE_SIZE));
    legacy_info = (legacy_info_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gdr_get_info");
    REQUIRE(legacy_info != NULL);

    /* First, while this process has not loaded CUDA through the library: each child's first
     * gdr_open is the library's first. */
    if ((check_fault.dmabuf || vulkan_mode) && !(argc > 2 && strcmp(argv[2], "noinit") == 0)) {
        static const char *const init_names[] = {
            "cuInit", "cuDriverGetVersion", "cuGetProcAddress", "cuDeviceGetCount", "cuDeviceGet",
            "cuDeviceGetAttribute",
        };
        static const char *const vk_init_names[] = {
            "cuDeviceGetUuid_v2", "vkCreateInstance", "vkEnumeratePhysicalDevices",
            "vkEnumerateDeviceExtensionProperties",
        };
        long fired = init_faults(init_names, COUNT(init_names), cuerrs, COUNT(cuerrs));
        long rules = COUNT(init_names) * (long)COUNT(cuerrs);
        if (vulkan_mode) {
            /* cuDeviceGetUuid_v2 with CUresults, the others with VkResults. */
            fired += init_faults(vk_init_names, 1, cuerrs, COUNT(cuerrs));
            fired += init_faults(vk_init_names + 1, COUNT(vk_init_names) - 1, vkerrs,
                                 COUNT(vkerrs));
            rules += COUNT(cuerrs) + (COUNT(vk_init_names) - 1) * (long)COUNT(vkerrs);
        }
        printf("%-32s %4ld faults injected (first gdr_open, %ld rules)\n",
               vulkan_mode ? "CUDA and Vulkan initialisation" : "CUDA initialisation", fired,
               rules);
        injected += fired;
        runs += rules;
    }
    const struct check_fault_sweep sweep = {
        .nsteps = S_COUNT,
        .step_names = step_names,
        .value_step = S_BACKEND,
        .max_nth = MAX_NTH,
        .before = before_run,
        .workload = workload,
        .leaks = leaks,
    };
    injected += check_fault_sweep(&sweep, groups, COUNT(groups), vulkan_mode, &runs, &total_leaks);
#undef COUNT
    const char *mode = vulkan_mode ? "vulkan" : check_fault.dmabuf ? "dma-buf" : "gdrdrv";
    printf("faults: %s backend, %ld runs, %ld faults injected, %ld runs with a leak\n", mode, runs,
           injected, total_leaks);
    char done[64];
    snprintf(done, sizeof(done), "faults (%s)", mode);
    return check_done(done);
}
