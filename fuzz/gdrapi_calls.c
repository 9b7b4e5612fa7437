/*
 * gdrapi_calls.c - coverage-guided fuzz target (libFuzzer) for the C ABI of libgdrapi.so.2.
 *
 * Each input is a program: a stream of bytes decoded into calls of every exported function
 * (gdr_open, gdr_close, gdr_pin_buffer, gdr_pin_buffer_v2, gdr_unpin_buffer,
 * gdr_get_callback_flag, gdr_get_info, gdr_get_info_v2, gdr_map, gdr_map_v2, gdr_unmap, the four
 * copies, both version queries, gdr_get_attribute, gdr_get_mapping_type_string), interleaved
 * with cuMemAlloc_v2 / cuMemFree_v2 of the emulator and, optionally, a driver fault armed with
 * gdrsim_set_fail. Arguments are valid, stale (unpinned handles, closed gdr_t), foreign (another
 * gdr_t's handle), NULL, misaligned, random or out of range.
 *
 * A model of what is open, pinned and mapped predicts each result. The target aborts (libFuzzer
 * records the input) when:
 *   - a return value is outside the set the function may return for that kind of argument,
 *   - a call the model says must succeed fails (while no fault is armed),
 *   - a copy through a live mapping does not read back what was written,
 *   - after every gdr_t is closed, the emulator still counts a pin, a mapping or an open file,
 *     or an allocation of the input is still live.
 * A crash or a hang (libFuzzer's -timeout) is a finding by itself.
 *
 * Runs on the emulator (LD_PRELOAD of its libcuda.so.1), x86 profile, in one of four situations
 * (GDRAPI_FUZZ_SITUATION names the one make fuzz set up; the target asks the library which one it
 * is in and stops at once if they disagree):
 *   gdrdrv                 /dev/gdrdrv, persistent mode: 64 KiB pages, freed memory stays pinned;
 *   gdrdrv-nonpersistent   GDRSIM_PERSISTENT=0: freeing memory invalidates every pin whose 64 KiB
 *                          pages overlap it (callback flag 1, info reports it unmapped, a map
 *                          fails, its mapping must not be touched again: SIGBUS);
 *   dmabuf                 no device node (GDRSIM_NO_DEVICE=1): the DMA-BUF backend, whose pins
 *                          cover host pages (info.va and mapped_size in host pages, page_size the
 *                          host page), whose maps are predicted exactly (a host-page-aligned pin,
 *                          a size inside its pages, the default or WC type), attributes 1, 1, 1;
 *   vulkan                 the Vulkan import (below).
 * Each gdr_t's backend is read from struct gdr's cache_backend (a u32 at offset 40: 0 gdrdrv,
 * 1 DMA-BUF, 2 the Vulkan import) and must agree with GDR_ATTR_USING_DMA_BUF_MMAP; a gdrdrv
 * situation's gdr_t may fall back to DMA-BUF only when an armed fault made opening the device
 * fail.
 *
 * With GDRAPI_TEST_ALLOC=vmm (as harness/gpu.h reads it; make test-fuzz sets it with the
 * rest of the Vulkan import's situation, SIM_VULKAN_ENV) the target runs the Vulkan import
 * backend: device memory comes from cuMemCreate (reserve, map, set access; freed by unmap,
 * release, unreserve), mostly with the POSIX-fd handle type, some without it, some from
 * cuMemAlloc, some reservations with an unmapped tail or two allocations side by side. The
 * model then predicts every pin and map exactly, by gdrdrv's rules as the backend follows them:
 * pins cover whole 64 KiB pages, which must lie inside one exportable allocation's mapping
 * (anything else is EINVAL), unaligned pins pin but do not map, the callback flag is 0,
 * GDR_ATTR_USING_DMA_BUF_MMAP 0 and struct gdr's cache_backend 2; memory freed while pinned
 * keeps its bytes, read through the mapping, until the unpin. Faults are drawn from the CUDA
 * and Vulkan calls of that backend, and the final leak check also counts VMM exports, Vulkan
 * imports, mappings, devices and instances.
 *
 * References to VMM allocations are counted exactly. A cuMemRelease that an injected fault fails
 * has no effect, so a failed release by the library keeps one reference, which only another
 * cuMemRelease can drop (the library logs it and goes on). The emulator's injected_faults
 * counter, read around every step while a cuMemRelease rule is armed, says whether the rule
 * fired there; one that fired in the target's own cuMemRelease is the target's (it releases
 * again), one that fired inside a library call is a reference the library kept, on the
 * allocation that call released: the pin's for gdr_pin_buffer and gdr_unpin_buffer, one of those
 * the gdr_t ever pinned for gdr_close, any for other calls. At the end, once everything is
 * closed and freed, the target releases each allocation until it is gone: the references left
 * must be exactly one per failed release, each on an allocation its call could have released
 * (a matching of failures to references); one more is a leak, one fewer a release the library
 * made twice.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gdrapi.h"
#include "gdrsim.h"

#define NG 3       /* gdr_t slots */
#define NH 24      /* handle records */
#define NA 4       /* device allocations */
#define MAXCOPY (256 * 1024)
#define MAXSTEPS 256
#define NCREATED (2 * MAXSTEPS + 2) /* VMM handles one input can make */
#define NWORDS ((NCREATED + 63) / 64)

typedef int (*legacy_info_fn)(gdr_t, gdr_mh_t, void *);

/* struct gdr's cache_backend (a u32 at offset 40, as abi-tests/c/check.h reads it). */
#define CACHE_BACKEND_OFFSET 40
enum backend { B_GDRDRV = 0, B_DMABUF = 1, B_VULKAN = 2 };

enum situation { SIT_GDRDRV, SIT_GDRDRV_NONPERSISTENT, SIT_DMABUF, SIT_VULKAN };
static const char *const situation_names[] = {"gdrdrv", "gdrdrv-nonpersistent", "dmabuf", "vulkan"};

/* A set of VMM handles of the input, by index in S.created. */
struct hset {
    uint64_t w[NWORDS];
};

struct grec {
    gdr_t g;
    int live;         /* opened and not closed */
    unsigned backend; /* cache_backend: a gdrdrv situation's gdr_t falls back to DMA-BUF when
                         a fault fails the device open */
    struct hset pinned; /* the VMM handles its pins ever lay in */
};

struct hrec {
    int used;
    int live;       /* pinned and not unpinned (nor its gdr_t closed) */
    int g;          /* slot of its gdr_t */
    gdr_mh_t mh;
    unsigned long addr;
    size_t size;
    int mapped;
    void *va;
    size_t map_size; /* size given to gdr_map */
    size_t extent;   /* bytes really mapped: map_size rounded up to the host page */
    int invalidated; /* non-persistent gdrdrv: the memory under its pages was freed */
    int created;     /* the Vulkan situation: S.created index of its allocation, or -1 */
};

/* One allocation of the input. In the Vulkan situation a VMM reservation holds one or two
 * cuMemCreate allocations (parts), side by side from its start, and may end in unmapped bytes. */
struct part {
    CUdeviceptr va;
    size_t size;
    CUmemGenericAllocationHandle h;
    int exportable; /* created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR */
    int created;    /* index of h in S.created */
};

struct arec {
    CUdeviceptr p;
    size_t size; /* bytes pins are drawn from: the allocation, or the whole reservation */
    int live;
    int vmm;     /* a VMM reservation (else cuMemAlloc memory) */
    int nparts;
    struct part part[2];
};

static struct {
    const uint8_t *d;
    size_t n, i;
    struct grec g[NG];
    struct hrec h[NH];
    struct arec a[NA];
    int faults;      /* a fault was armed in this input: driver errnos may come back */
    int step;
    uint64_t allocations_at_start;
    CUmemGenericAllocationHandle created[NCREATED]; /* the VMM handles this input made */
    int ncreated;
    /* References kept by the library's failed cuMemRelease calls (see the top). */
    int release_armed;   /* the rule armed now is a cuMemRelease one that has not fired */
    int own_fired;       /* faults the current step's own cuMemRelease calls took */
    int cand_any;        /* the current step's library calls may release any allocation... */
    struct hset cand;    /* ...else only these */
    int nfailed;         /* the library's failed releases so far */
    struct failed_release {
        int any;
        struct hset cand; /* allocations it may have been on */
        int step;
    } failed[MAXSTEPS];
} S;

static uint8_t host_a[MAXCOPY + 64], host_b[MAXCOPY + 64];
static int no_munmap_faults;
static int trace; /* GDRAPI_FUZZ_TRACE=1: print each call and its result (to replay a finding) */
static int vk_mode; /* GDRAPI_TEST_ALLOC=vmm: the Vulkan import's situation (see the top) */
static enum situation situation;
static size_t host_page; /* the DMA-BUF backend's granule */
static size_t vmm_gran; /* cuMemGetAllocationGranularity of exportable device memory */

#define TRACE(...)                                                                                 \
    do {                                                                                           \
        if (trace)                                                                                 \
            fprintf(stderr, __VA_ARGS__);                                                          \
    } while (0)
static legacy_info_fn legacy_info;

/* ---- input decoding ---- */

static uint8_t u8(void)
{
    return S.i < S.n ? S.d[S.i++] : 0;
}

static uint32_t u32(void)
{
    uint32_t v = 0;
    for (int k = 0; k < 4; k++)
        v |= (uint32_t)u8() << (8 * k);
    return v;
}

static uint64_t u64(void)
{
    return (uint64_t)u32() | ((uint64_t)u32() << 32);
}

/* ---- failure reporting ---- */

static void fail(const char *what, int rc)
{
    fprintf(stderr, "gdrapi_calls: step %d: %s (rc=%d)\n", S.step, what, rc);
    abort();
}

/* rc must be 0 or one of the listed errnos (0-terminated list); with a fault armed, the
 * errnos a fault can inject are accepted too. */
static void expect_in(const char *fn, int rc, const int *set)
{
    /* The errnos injected into system calls (op_fault's errs). */
    static const int injected[] = {EINVAL, ENOMEM, EIO, EFAULT, EACCES, EBUSY, ENODEV, EAGAIN, 0};
    /* What the CUresults and VkResults injected in the DMA-BUF and Vulkan situations come back
     * as (the library's tables, src/cuda/result.rs and src/vulkan/mod.rs). */
    static const int injected_cu[] = {EINVAL, ENOMEM, EIO, ENODEV, ENOTSUP, 0};
    if (rc == 0)
        return;
    for (const int *p = set; *p; p++)
        if (rc == *p)
            return;
    if (S.faults) {
        /* gdrdrv: system calls; DMA-BUF: mmap and CUDA; the Vulkan import: CUDA and Vulkan. */
        for (const int *p = situation == SIT_VULKAN ? injected_cu : injected; *p; p++)
            if (rc == *p)
                return;
        if (situation == SIT_DMABUF)
            for (const int *p = injected_cu; *p; p++)
                if (rc == *p)
                    return;
    }
    char msg[128];
    snprintf(msg, sizeof(msg), "%s returned a value outside its documented set", fn);
    fail(msg, rc);
}

/* A call the model says must succeed (only enforced while no fault is armed). */
static void expect_ok(const char *fn, int rc)
{
    if (rc != 0 && !S.faults) {
        char msg[128];
        snprintf(msg, sizeof(msg), "%s failed where it must succeed", fn);
        fail(msg, rc);
    }
}

/* A call the model says must fail with exactly this errno (e.g. EINVAL for a stale handle). */
static void expect_eq(const char *fn, int rc, int want)
{
    if (rc != want && !(S.faults && rc != 0)) {
        char msg[160];
        snprintf(msg, sizeof(msg), "%s returned %d, want %d", fn, rc, want);
        fail(msg, rc);
    }
}

static const int SET_EINVAL[] = {EINVAL, 0};

/* ---- argument choosers ---- */

/* The live slot whose gdr_t is g, or -1 (a closed slot's pointer may have been handed out
 * again by a later gdr_open: then it is live in that slot). */
static int slot_of(gdr_t g)
{
    for (int i = 0; i < NG; i++)
        if (S.g[i].live && g != NULL && S.g[i].g == g)
            return i;
    return -1;
}

/* A gdr_t: live, closed, NULL or forged. Sets *slot to the slot of a live one, else -1. */
static gdr_t pick_g(int *slot)
{
    uint8_t k = u8();
    gdr_t g;
    switch ((k >> 4) % 8) {
    case 0:
        g = NULL;
        break;
    case 1:
        g = (gdr_t)(uintptr_t)u64();
        break;
    case 2:
        g = (gdr_t)(uintptr_t)(host_a + (k & 15)); /* a pointer to something else */
        break;
    default:
        g = S.g[k % NG].g; /* NULL if never opened; dangling if closed */
        break;
    }
    *slot = slot_of(g);
    return g;
}

enum hkind { H_LIVE, H_STALE, H_FOREIGN, H_BOGUS };

/* A handle: a live record's, a dead record's, or a forged value. Returns the index of the live
 * record holding that value (or -1) and the handle's kind with respect to gdr_t slot gs. Values
 * are resolved against the live records, since the library may hand a value out again. */
static int pick_h(int gs, gdr_mh_t *mh, enum hkind *kind)
{
    uint8_t k = u8();
    int i = k % NH;
    if ((k >> 5) == 7 || !S.h[i].used)
        mh->h = (k & 1) ? 0 : (unsigned long)u64();
    else
        *mh = S.h[i].mh;
    for (int j = 0; j < NH; j++)
        if (S.h[j].used && S.h[j].live && S.h[j].mh.h == mh->h) {
            *kind = S.h[j].g == gs ? H_LIVE : H_FOREIGN;
            return j;
        }
    *kind = (k >> 5) == 7 || !S.h[i].used ? H_BOGUS : H_STALE;
    return -1;
}

static int new_hrec(void)
{
    for (int i = 0; i < NH; i++)
        if (!S.h[i].used || !S.h[i].live) {
            memset(&S.h[i], 0, sizeof(S.h[i]));
            return i;
        }
    return -1;
}

/* The records of slot gs die with it. */
static void kill_handles_of(int gs)
{
    for (int i = 0; i < NH; i++)
        if (S.h[i].used && S.h[i].live && S.h[i].g == gs) {
            S.h[i].live = 0;
            S.h[i].mapped = 0;
        }
}

static void hset_add(struct hset *set, int i)
{
    if (i >= 0 && i < NCREATED)
        set->w[i / 64] |= 1ull << (i % 64);
}

static int hset_has(const struct hset *set, int i)
{
    return (int)((set->w[i / 64] >> (i % 64)) & 1);
}

/* The backend of a gdr_t of this situation whose open no fault disturbed. */
static unsigned situation_backend(void)
{
    return situation == SIT_VULKAN ? B_VULKAN : situation == SIT_DMABUF ? B_DMABUF : B_GDRDRV;
}

static unsigned cache_backend(gdr_t g)
{
    unsigned backend;
    memcpy(&backend, (const char *)g + CACHE_BACKEND_OFFSET, sizeof(backend));
    return backend;
}

/* What a backend's pins are made of: 64 KiB GPU pages, host pages on DMA-BUF. */
static size_t granule_of(unsigned backend)
{
    return backend == B_DMABUF ? host_page : GPU_PAGE_SIZE;
}

/* The range a live pin covers, as its backend rounds it: [*va, *va + return value). */
static size_t pinned_of(const struct hrec *h, unsigned long *va)
{
    unsigned long g = granule_of(S.g[h->g].backend);
    unsigned long start = h->addr & ~(g - 1), end = (h->addr + h->size + g - 1) & ~(g - 1);
    if (va != NULL)
        *va = start;
    return end - start;
}

/* GDR_ATTR_USE_PERSISTENT_MAPPING, _SUPPORT_PIN_FLAG_FORCE_PCIE and _USING_DMA_BUF_MMAP of a
 * gdr_t of this backend: gdrdrv answers the driver's persistence for the first two (the
 * emulator's GET_ATTR), DMA-BUF 1, 1, 1, the Vulkan import 1, 1, 0. */
static int attr_want(unsigned backend, int attr)
{
    if (backend == B_DMABUF)
        return 1;
    if (attr == GDR_ATTR_USING_DMA_BUF_MMAP)
        return 0;
    return backend == B_VULKAN || situation != SIT_GDRDRV_NONPERSISTENT;
}

/* A gdr_t just opened into slot i: its backend is the situation's (a gdrdrv situation's falls
 * back to DMA-BUF when an armed fault made opening the device fail), and
 * GDR_ATTR_USING_DMA_BUF_MMAP agrees with it. */
static void note_open(int i, gdr_t g)
{
    unsigned backend = cache_backend(g), want = situation_backend();
    int dmabuf = -1;
    memset(&S.g[i], 0, sizeof(S.g[i]));
    S.g[i].g = g;
    S.g[i].live = 1;
    S.g[i].backend = backend;
    if (backend != want && !(S.faults && want == B_GDRDRV && backend == B_DMABUF)) {
        fprintf(stderr, "cache_backend %u in the %s situation\n", backend, situation_names[situation]);
        fail("a gdr_t of another backend than the situation's", (int)backend);
    }
    if (gdr_get_attribute(g, GDR_ATTR_USING_DMA_BUF_MMAP, &dmabuf) != 0) {
        if (!S.faults)
            fail("gdr_get_attribute(GDR_ATTR_USING_DMA_BUF_MMAP) on a new gdr_t", 0);
        return;
    }
    if (dmabuf != (backend == B_DMABUF))
        fail("GDR_ATTR_USING_DMA_BUF_MMAP disagrees with cache_backend", dmabuf);
}

/* ---- references the library keeps (see the top) ---- */

static uint64_t injected_faults(void)
{
    struct gdrsim_counters c;
    memset(&c, 0, sizeof(c));
    if (gdrsim_get_counters(&c, sizeof(c)) != 0)
        fail("gdrsim_get_counters", 0);
    return c.injected_faults;
}

/* The current step's library calls release only allocations of set (those added next). */
static void release_only(void)
{
    S.cand_any = 0;
}

/* Counts the library's failed releases of a step: faults that fired during it, less those its
 * own cuMemRelease calls took. */
static void note_failed_releases(int armed, uint64_t before)
{
    if (!armed)
        return;
    for (uint64_t n = injected_faults() - before - (uint64_t)S.own_fired; n > 0; n--) {
        S.release_armed = 0; /* a rule with a count fires once */
        TRACE("  a cuMemRelease of the library failed: it keeps a reference\n");
        if (S.nfailed < MAXSTEPS) {
            S.failed[S.nfailed].any = S.cand_any;
            S.failed[S.nfailed].cand = S.cand;
            S.failed[S.nfailed].step = S.step;
            S.nfailed++;
        }
    }
}

/* Whether each failed release can be given a reference left on an allocation it may have been
 * on, kept[] being the references left per allocation (a matching, by augmenting paths). */
static int assign_failed(int f, const int *kept, int *load, int *owner, unsigned char *seen)
{
    for (int i = 0; i < S.ncreated; i++) {
        if (seen[i] || !(S.failed[f].any || hset_has(&S.failed[f].cand, i)))
            continue;
        seen[i] = 1;
        if (load[i] < kept[i]) {
            owner[f] = i;
            load[i]++;
            return 1;
        }
        for (int o = 0; o < f; o++)
            if (owner[o] == i && assign_failed(o, kept, load, owner, seen)) {
                owner[f] = i; /* o moved to another allocation; f takes its place here */
                return 1;
            }
    }
    return 0;
}

static int failures_explain(const int *kept)
{
    static int load[NCREATED], owner[MAXSTEPS];
    static unsigned char seen[NCREATED];
    memset(load, 0, sizeof(load));
    for (int f = 0; f < S.nfailed; f++) {
        owner[f] = -1;
        memset(seen, 0, sizeof(seen));
        if (!assign_failed(f, kept, load, owner, seen))
            return 0;
    }
    return 1;
}

/* ---- device memory ---- */

static int note_created(CUmemGenericAllocationHandle h)
{
    if (S.ncreated >= NCREATED)
        fail("more VMM handles than the model holds", S.ncreated);
    S.created[S.ncreated] = h;
    return S.ncreated++;
}

/* The target's own cuMemRelease of a handle of the input. When the armed cuMemRelease rule fires
 * here, the call had no effect and the fault is the target's, not the library's: it releases
 * again (a rule with a count fires once). */
static CUresult release(CUmemGenericAllocationHandle h)
{
    uint64_t before = S.release_armed ? injected_faults() : 0;
    CUresult r = cuMemRelease(h);
    if (S.release_armed && injected_faults() != before) {
        TRACE("  the target's own cuMemRelease took the fault\n");
        S.release_armed = 0;
        S.own_fired++;
        r = cuMemRelease(h);
    }
    return r;
}

/* One cuMemCreate allocation of size bytes (a multiple of the granularity), mapped read-write
 * at va, as NCCL's cuMem allocator makes them (exportable: with the POSIX-fd handle type). */
static void vmm_part(struct part *pt, CUdeviceptr va, size_t size, int exportable)
{
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    CUresult r;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes =
        exportable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.allocFlags.gpuDirectRDMACapable = 1;
    if ((r = cuMemCreate(&pt->h, size, &prop, 0)) != CUDA_SUCCESS)
        fail("cuMemCreate failed", (int)r);
    pt->created = note_created(pt->h);
    if ((r = cuMemMap(va, size, 0, pt->h, 0)) != CUDA_SUCCESS)
        fail("cuMemMap failed", (int)r);
    memset(&access, 0, sizeof(access));
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if ((r = cuMemSetAccess(va, size, &access, 1)) != CUDA_SUCCESS)
        fail("cuMemSetAccess failed", (int)r);
    pt->va = va;
    pt->size = size;
    pt->exportable = exportable;
}

/* VMM memory, by shape: 1 one allocation without the POSIX-fd handle type; 2 one exportable
 * allocation in a reservation twice its size (an unmapped tail); 3 two exportable allocations
 * side by side in one reservation; anything else one exportable allocation. */
static void vmm_alloc(struct arec *a, int shape, size_t size)
{
    int parts = shape == 3 ? 2 : 1;
    size_t reserved = shape == 2 || shape == 3 ? 2 * size : size;
    CUdeviceptr va = 0;
    CUresult r = cuMemAddressReserve(&va, reserved, vmm_gran, 0, 0);
    if (r != CUDA_SUCCESS)
        fail("cuMemAddressReserve failed", (int)r);
    for (int i = 0; i < parts; i++)
        vmm_part(&a->part[i], va + i * size, size, shape != 1);
    a->p = va;
    a->size = reserved;
    a->vmm = 1;
    a->nparts = parts;
    a->live = 1;
}

/* Unmap, release, unreserve. */
static void vmm_free(struct arec *a)
{
    CUresult r;
    for (int i = 0; i < a->nparts; i++) {
        if ((r = cuMemUnmap(a->part[i].va, a->part[i].size)) != CUDA_SUCCESS)
            fail("cuMemUnmap failed", (int)r);
        if ((r = release(a->part[i].h)) != CUDA_SUCCESS)
            fail("cuMemRelease failed", (int)r);
    }
    if ((r = cuMemAddressFree(a->p, a->size)) != CUDA_SUCCESS)
        fail("cuMemAddressFree failed", (int)r);
    a->live = 0;
}

/* The allocation of the input that holds addr (a part of a live VMM reservation), or NULL. */
static const struct part *part_at(unsigned long addr)
{
    for (int i = 0; i < NA; i++) {
        const struct arec *a = &S.a[i];
        if (!a->live || !a->vmm)
            continue;
        for (int j = 0; j < a->nparts; j++)
            if (addr >= a->part[j].va && addr - a->part[j].va < a->part[j].size)
                return &a->part[j];
    }
    return NULL;
}

/* What the Vulkan import answers a pin of addr, size with (no fault armed): 0 when its whole
 * 64 KiB pages lie inside one exportable allocation's mapping, else EINVAL. */
static int vk_pin_result(unsigned long addr, size_t size)
{
    const struct part *pt = part_at(addr);
    unsigned long end = addr + size;
    if (size == 0 || end < addr || end + GPU_PAGE_OFFSET < end || pt == NULL || !pt->exportable)
        return EINVAL;
    end = (end + GPU_PAGE_OFFSET) & GPU_PAGE_MASK;
    if ((addr & GPU_PAGE_MASK) < pt->va || end > pt->va + pt->size)
        return EINVAL;
    return 0;
}

/* ---- operations ---- */

static void op_open(void)
{
    int i = u8() % NG;
    if (S.g[i].live)
        return;
    gdr_t g = gdr_open();
    TRACE("open slot=%d -> %p\n", i, (void *)g);
    if (g == NULL) {
        if (!S.faults)
            fail("gdr_open returned NULL", 0);
        return;
    }
    note_open(i, g);
}

static void op_close(void)
{
    int gs;
    gdr_t g = pick_g(&gs);
    release_only(); /* what its pins lay in (nothing for a gdr_t that is not live) */
    if (gs >= 0)
        S.cand = S.g[gs].pinned;
    int rc = gdr_close(g);
    TRACE("close g=%p slot=%d -> %d\n", (void *)g, gs, rc);
    if (gs >= 0) {
        expect_ok("gdr_close", rc);
        expect_in("gdr_close", rc, SET_EINVAL);
        S.g[gs].live = 0; /* closed even when it reports an error */
        kill_handles_of(gs);
    } else {
        expect_eq("gdr_close(invalid)", rc, EINVAL); /* never opened, closed, forged */
    }
}

static void op_alloc(void)
{
    static const size_t sizes[] = {1, 256, 4096, 65536, 65536 + 4, 131072, 3 * 65536 + 100, 1 << 20};
    int i = u8() % NA;
    if (S.a[i].live)
        return;
    uint8_t k = u8();
    size_t size = sizes[k % 8];
    CUdeviceptr p = 0;
    /* The Vulkan situation: shape (k >> 3) % 8, 0 cuMemAlloc memory, else VMM memory (see
     * vmm_alloc) of one or two granules per allocation. */
    if (vk_mode && (k >> 3) % 8 != 0) {
        memset(&S.a[i], 0, sizeof(S.a[i]));
        vmm_alloc(&S.a[i], (k >> 3) % 8, vmm_gran * (1 + ((k & 7) == 7)));
        TRACE("vmm alloc %d shape=%d parts=%d %#llx+%#zx\n", i, (k >> 3) % 8, S.a[i].nparts,
              (unsigned long long)S.a[i].p, S.a[i].size);
        return;
    }
    CUresult r = cuMemAlloc_v2(&p, size);
    TRACE("cuMemAlloc %d %#zx -> %d %#llx\n", i, size, (int)r, (unsigned long long)p);
    if (r != CUDA_SUCCESS) {
        if (!S.faults)
            fail("cuMemAlloc_v2 failed", (int)r);
        return;
    }
    memset(&S.a[i], 0, sizeof(S.a[i]));
    S.a[i].p = p;
    S.a[i].size = size;
    S.a[i].live = 1;
}

static void op_free(void)
{
    int i = u8() % NA;
    if (!S.a[i].live)
        return;
    if (S.a[i].vmm) {
        /* A mapped pin in the reservation keeps its memory: what it holds before the free,
         * it holds after it, until its unpin. */
        struct arec *a = &S.a[i];
        int probe = -1;
        const size_t n = 64; /* a mapping's extent is at least a host page */
        for (int j = 0; j < NH && probe < 0; j++)
            if (S.h[j].used && S.h[j].live && S.h[j].mapped && S.h[j].addr >= a->p &&
                S.h[j].addr - a->p < a->size)
                probe = j;
        if (probe >= 0) {
            for (size_t b = 0; b < n; b++)
                host_a[b] = (uint8_t)(b * 13 + S.step + 1);
            expect_eq("gdr_copy_to_mapping (before a free)",
                      gdr_copy_to_mapping(S.h[probe].mh, S.h[probe].va, host_a, n), 0);
        }
        vmm_free(a);
        TRACE("vmm free %d %#llx (probe %d)\n", i, (unsigned long long)a->p, probe);
        if (probe >= 0) {
            memset(host_b, 0, n);
            expect_eq("gdr_copy_from_mapping (after a free)",
                      gdr_copy_from_mapping(S.h[probe].mh, host_b, S.h[probe].va, n), 0);
            if (memcmp(host_a, host_b, n))
                fail("memory freed while pinned lost its bytes before the unpin", (int)n);
        }
        return;
    }
    CUresult r = cuMemFree_v2(S.a[i].p);
    TRACE("cuMemFree %d %#llx -> %d\n", i, (unsigned long long)S.a[i].p, (int)r);
    if (r != CUDA_SUCCESS)
        fail("cuMemFree_v2 failed", (int)r);
    S.a[i].live = 0; /* persistent pins keep the pages until unpinned */
    if (situation != SIT_GDRDRV_NONPERSISTENT)
        return;
    /* Non-persistent gdrdrv invalidates every pin whose 64 KiB pages overlap the freed bytes
     * (DMA-BUF pins, of gdr_ts that fell back, hold their pages until closed). */
    for (int j = 0; j < NH; j++) {
        struct hrec *h = &S.h[j];
        unsigned long va;
        if (!h->used || !h->live || h->invalidated || S.g[h->g].backend != B_GDRDRV)
            continue;
        size_t len = pinned_of(h, &va);
        if (va < S.a[i].p + S.a[i].size && S.a[i].p < va + len) {
            h->invalidated = 1;
            TRACE("  invalidates h=%#lx\n", h->mh.h);
        }
    }
}

/* Address and size for a pin. *gpu is set when the range is live device memory of this
 * process with its start inside an allocation (the driver then pins it). */
static void pick_range(unsigned long *addr, size_t *size, int *gpu, int *not_gpu)
{
    uint8_t k = u8();
    struct arec *a = &S.a[(k >> 4) % NA];
    *gpu = 0;
    *not_gpu = k % 8 < 2;
    switch (k % 8) {
    case 0:
        *addr = 0;
        break;
    case 1:
        *addr = (unsigned long)(uintptr_t)host_a; /* host memory */
        break;
    case 2:
        *addr = (unsigned long)u64();
        break;
    default:
        if (!a->live) {
            *addr = (unsigned long)a->p; /* freed or never allocated */
            break;
        }
        if (vk_mode && k % 8 == 3) {
            /* Whole GPU pages into the reservation, or a few bytes. */
            uint8_t b = u8();
            *addr = (unsigned long)a->p + ((b & 0x80) ? ((b & 0x7fUL) * GPU_PAGE_SIZE) % a->size : b);
        } else {
            *addr = (unsigned long)a->p + (k % 8 == 3 ? (u8() % a->size) : 0);
        }
        *gpu = 1;
        break;
    }
    uint8_t s = u8();
    switch (s % 6) {
    case 0:
        *size = 0;
        break;
    case 1:
        *size = 1 + (s >> 3);
        break;
    case 2:
        *size = GPU_PAGE_SIZE;
        break;
    case 3:
        *size = (size_t)u64();
        *gpu = 0;
        break;
    default:
        *size = (*gpu && a->live) ? a->size - (*addr - (unsigned long)a->p) : GPU_PAGE_SIZE;
        if (vk_mode && *gpu && a->live) {
            /* To the end of the allocation that holds addr (4), or a little past it (5). */
            const struct part *pt = part_at(*addr);
            if (pt != NULL)
                *size = pt->va + pt->size - *addr;
            if (s % 6 == 5)
                *size += 1 + (s >> 3);
        }
        break;
    }
}

static void op_pin(int v2)
{
    static const int set[] = {EINVAL, ENOMEM, EFAULT, 0};
    int gs;
    gdr_t g = pick_g(&gs);
    unsigned long addr;
    size_t size;
    int gpu, not_gpu;
    pick_range(&addr, &size, &gpu, &not_gpu);
    (void)gpu;
    uint8_t k = u8();
    int null_out = (k & 7) == 7;
    uint64_t token = 0;
    uint32_t va_space = 0, flags = 0;
    if (v2)
        flags = (k >> 3) % 4 == 3 ? u32() : (k >> 3) % 2; /* DEFAULT, FORCE_PCIE or junk */
    else if ((k >> 3) % 4 == 3) {
        token = u64();
        va_space = u32();
    }
    gdr_mh_t mh = {0};
    int want = vk_mode ? vk_pin_result(addr, size) : 0;
    /* A pin releases, if anything, the allocation it retained: the one holding addr. */
    const struct part *pt = vk_mode ? part_at(addr) : NULL;
    release_only();
    if (pt != NULL)
        hset_add(&S.cand, pt->created);
    int rc = v2 ? gdr_pin_buffer_v2(g, addr, size, flags, null_out ? NULL : &mh)
                : gdr_pin_buffer(g, addr, size, token, va_space, null_out ? NULL : &mh);
    TRACE("pin v2=%d slot=%d addr=%#lx size=%#zx flags=%u -> %d h=%#lx\n", v2, gs, addr, size, flags, rc, mh.h);
    const char *fn = v2 ? "gdr_pin_buffer_v2" : "gdr_pin_buffer";
    expect_in(fn, rc, set);
    if (gs < 0 || null_out) {
        expect_eq(fn, rc, EINVAL);
        return;
    }
    if (vk_mode)
        expect_eq(fn, rc, want); /* the flags and p2p tokens change nothing there */
    if (rc != 0)
        return;
    if (not_gpu)
        fail("pin of address 0 or of host memory succeeded", rc);
    int r = new_hrec();
    if (r < 0) {
        (void)gdr_unpin_buffer(g, mh); /* no room in the model: give it back */
        return;
    }
    S.h[r].used = 1;
    S.h[r].live = 1;
    S.h[r].g = gs;
    S.h[r].mh = mh;
    S.h[r].addr = addr;
    S.h[r].size = size;
    S.h[r].created = pt != NULL ? pt->created : -1;
    if (pt != NULL)
        hset_add(&S.g[gs].pinned, pt->created);
}

static void op_unpin(void)
{
    int gs;
    gdr_t g = pick_g(&gs);
    gdr_mh_t mh;
    enum hkind kind;
    int r = pick_h(gs, &mh, &kind);
    release_only(); /* the pin's allocation, and nothing for a handle that is not live */
    if (gs >= 0 && kind == H_LIVE)
        hset_add(&S.cand, S.h[r].created);
    int rc = gdr_unpin_buffer(g, mh);
    TRACE("unpin slot=%d h=%#lx kind=%d -> %d\n", gs, mh.h, kind, rc);
    if (gs >= 0 && kind == H_LIVE) {
        expect_ok("gdr_unpin_buffer", rc);
        expect_in("gdr_unpin_buffer", rc, SET_EINVAL);
        if (rc != 0 && S.h[r].mapped) {
            /* A mapped handle whose unmap failed stays pinned and mapped (the caller may
             * retry); one whose unpin ioctl failed is gone. Ask, with the fault disarmed. */
            gdr_info_t info;
            (void)gdrsim_set_fail("");
            S.release_armed = 0;
            int still = gdr_get_info(g, mh, &info);
            TRACE("  unpin failed: handle %s\n", still == 0 ? "kept" : "gone");
            expect_in("gdr_get_info_v2 after a failed unpin", still, SET_EINVAL);
            if (still == 0) {
                if (!info.mapped && !S.h[r].invalidated)
                    fail("a handle kept by a failed unpin is no longer mapped", 0);
                return;
            }
        }
        S.h[r].live = 0; /* gone even when the driver refused */
        S.h[r].mapped = 0;
    } else {
        expect_eq("gdr_unpin_buffer(stale/foreign)", rc, EINVAL);
    }
}

static void op_cb_flag(void)
{
    int gs;
    gdr_t g = pick_g(&gs);
    gdr_mh_t mh;
    enum hkind kind;
    int r = pick_h(gs, &mh, &kind);
    int flag = 0x55;
    int null_out = (u8() & 7) == 7;
    int rc = gdr_get_callback_flag(g, mh, null_out ? NULL : &flag);
    TRACE("cb_flag slot=%d h=%#lx kind=%d -> %d\n", gs, mh.h, kind, rc);
    if (gs >= 0 && kind == H_LIVE && !null_out) {
        expect_ok("gdr_get_callback_flag", rc);
        expect_in("gdr_get_callback_flag", rc, SET_EINVAL);
        /* Set once non-persistent gdrdrv invalidated the pin, never elsewhere. */
        if (rc == 0 && flag != S.h[r].invalidated)
            fail("callback flag disagrees with the model", flag);
    } else {
        expect_eq("gdr_get_callback_flag(invalid)", rc, EINVAL);
    }
}

static void op_info(void)
{
    int gs;
    gdr_t g = pick_g(&gs);
    gdr_mh_t mh;
    enum hkind kind;
    int r = pick_h(gs, &mh, &kind);
    uint8_t k = u8();
    int null_out = (k & 7) == 7;
    int legacy = (k >> 3) & 1;
    gdr_info_v2_t info;
    unsigned char canary[sizeof(gdr_info_v2_t)];
    memset(&info, 0xA5, sizeof(info));
    memcpy(canary, &info, sizeof(canary));
    int rc = legacy ? legacy_info(g, mh, null_out ? NULL : &info)
                    : gdr_get_info_v2(g, mh, null_out ? NULL : &info);
    TRACE("info legacy=%d slot=%d h=%#lx kind=%d -> %d\n", legacy, gs, mh.h, kind, rc);
    const char *fn = legacy ? "gdr_get_info" : "gdr_get_info_v2";
    if (gs >= 0 && kind == H_LIVE && !null_out) {
        expect_ok(fn, rc);
        expect_in(fn, rc, SET_EINVAL);
        if (rc != 0)
            return;
        struct hrec *h = &S.h[r];
        /* The pin's whole pages: 64 KiB GPU pages, host pages on DMA-BUF (which reports the
         * host page as the pin's granule, as upstream does). */
        unsigned long va;
        size_t len = pinned_of(h, &va);
        if (info.va != va || info.page_size != granule_of(S.g[gs].backend) || info.mapped_size != len) {
            fprintf(stderr, "pin %#lx+%#zx: va=%#llx mapped_size=%#llx page_size=%u, want %#lx, %#zx, %zu\n",
                    h->addr, h->size, (unsigned long long)info.va, (unsigned long long)info.mapped_size,
                    info.page_size, va, len, granule_of(S.g[gs].backend));
            fail("info va, page size or mapped size is not the pin's whole pages", 0);
        }
        /* An invalidated pin's mapping is gone for the driver (the library keeps its record
         * until gdr_unmap). */
        int mapped = h->mapped && !h->invalidated;
        if (info.mapped != (unsigned)mapped)
            fail("info.mapped disagrees with the model", info.mapped);
        if (legacy && memcmp((unsigned char *)&info + 40, canary + 40, sizeof(info) - 40))
            fail("legacy gdr_get_info wrote past its 40-byte struct", 0);
        if (!legacy && info.mapping_type != (mapped ? GDR_MAPPING_TYPE_WC : GDR_MAPPING_TYPE_NONE))
            fail("mapping type is not WC for a mapped handle on x86, or not NONE", info.mapping_type);
    } else {
        expect_eq(fn, rc, EINVAL);
        if (rc != 0 && memcmp(&info, canary, sizeof(info)))
            fail("a failed info query wrote its output", rc);
    }
}

static void op_map(int v2)
{
    static const int set[] = {EINVAL, EAGAIN, EOPNOTSUPP, ENOMEM, 0};
    int gs;
    gdr_t g = pick_g(&gs);
    gdr_mh_t mh;
    enum hkind kind;
    int r = pick_h(gs, &mh, &kind);
    uint8_t k = u8();
    int null_out = (k & 15) == 15;
    int flags = v2 ? ((k >> 4) < 12 ? (k >> 4) % 4 : (int)u32()) : 0;
    size_t size;
    size_t pinned = r >= 0 ? pinned_of(&S.h[r], NULL) : GPU_PAGE_SIZE;
    switch (u8() % 5) {
    case 0:
        size = 0;
        break;
    case 1:
        size = pinned + GPU_PAGE_SIZE;
        break;
    case 2:
        size = (size_t)u64();
        break;
    case 3:
        size = 1 + u8() * 64;
        break;
    default:
        size = pinned;
        break;
    }
    void *va = NULL;
    int rc = v2 ? gdr_map_v2(g, mh, null_out ? NULL : &va, size, flags)
                : gdr_map(g, mh, null_out ? NULL : &va, size);
    TRACE("map v2=%d slot=%d h=%#lx kind=%d size=%#zx flags=%d -> %d va=%p\n", v2, gs, mh.h, kind, size, flags, rc, va);
    const char *fn = v2 ? "gdr_map_v2" : "gdr_map";
    expect_in(fn, rc, set);
    if (gs < 0 || kind != H_LIVE || null_out) {
        if (rc == 0)
            fail("map of an invalid handle or with NULL va succeeded", rc);
        return;
    }
    struct hrec *h = &S.h[r];
    unsigned backend = S.g[h->g].backend;
    if (h->mapped) {
        if (rc == 0)
            fail("a second map of a mapped handle succeeded", rc);
        return;
    }
    if (h->invalidated) {
        if (rc == 0)
            fail("a map of an invalidated pin succeeded", rc);
        return;
    }
    if (backend != B_GDRDRV) {
        /* The Vulkan import and DMA-BUF: a type the memory gives (default or WC), a size
         * inside the pin's pages, a pin whose address is a page boundary (64 KiB, the host page
         * on DMA-BUF); memory freed since the pin maps all the same. */
        int ok = (flags == GDR_MAP_FLAG_DEFAULT || flags == GDR_MAP_FLAG_REQ_WC_MAPPING) &&
                 size != 0 && size <= pinned && !(h->addr & (granule_of(backend) - 1));
        expect_eq(fn, rc, ok ? 0 : EINVAL);
    }
    if (rc != 0)
        return;
    if (va == NULL || ((uintptr_t)va & 4095))
        fail("map returned a NULL or unaligned pointer", rc);
    /* gdrdrv maps only pins of 64 KiB aligned addresses, DMA-BUF only those of page aligned
     * ones (upstream's mmap at a sub-page offset fails). */
    int unaligned = (h->addr & (granule_of(backend) - 1)) != 0;
    if (size == 0 || size > pinned || unaligned)
        fail("map accepted a size of 0, beyond the pin, or an unaligned pin", (int)(size > pinned));
    if (flags == GDR_MAP_FLAG_REQ_CACHE_MAPPING || flags == GDR_MAP_FLAG_REQ_DEVICE_MAPPING ||
        flags < 0 || flags > 3)
        fail("map accepted a type x86 cannot give", flags);
    h->mapped = 1;
    h->va = va;
    h->map_size = size;
    h->extent = (size + 4095) & ~(size_t)4095;
}

static void op_unmap(void)
{
    int gs;
    gdr_t g = pick_g(&gs);
    gdr_mh_t mh;
    enum hkind kind;
    int r = pick_h(gs, &mh, &kind);
    uint8_t k = u8();
    void *va = NULL;
    size_t size = GPU_PAGE_SIZE;
    if (r >= 0 && S.h[r].mapped) {
        va = S.h[r].va;
        size = S.h[r].map_size;
    }
    switch (k % 6) {
    case 0:
        va = (char *)va + 4096;
        break;
    case 1:
        size += 1 + (k >> 3);
        break;
    case 2:
        va = NULL;
        break;
    default:
        break;
    }
    int rc = gdr_unmap(g, mh, va, size);
    TRACE("unmap slot=%d h=%#lx kind=%d va=%p size=%#zx -> %d\n", gs, mh.h, kind, va, size, rc);
    /* The mapping is identified by its address and its size rounded up to the host page, as
     * munmap sees it: a size that rounds to the same extent is the same mapping. */
    int exact = r >= 0 && va == S.h[r].va && ((size + 4095) & ~(size_t)4095) == S.h[r].extent;
    if (gs >= 0 && kind == H_LIVE && S.h[r].mapped && exact) {
        expect_ok("gdr_unmap", rc);
        expect_in("gdr_unmap", rc, SET_EINVAL);
        if (rc == 0)
            S.h[r].mapped = 0;
    } else {
        expect_eq("gdr_unmap(invalid)", rc, EINVAL);
    }
}

static void op_copy(void)
{
    int gs = -1;
    gdr_mh_t mh;
    enum hkind kind;
    int slot = u8() % NG;
    if (S.g[slot].live)
        gs = slot;
    int r = pick_h(gs, &mh, &kind);
    uint8_t k = u8();
    int dir = k & 1, alias = (k >> 1) & 1;
    /* An invalidated pin's mapping is an empty file now (SIGBUS): only refusals go there. */
    int in_range = r >= 0 && S.h[r].live && S.h[r].mapped && !S.h[r].invalidated;
    size_t off = 0, n = 0;
    char *dev = (char *)host_b; /* a pointer that is not a mapping */
    if (in_range) {
        size_t ms = S.h[r].extent;
        off = u32() % ms;
        n = u32() % (ms - off + 1);
        if (n > MAXCOPY)
            n = MAXCOPY;
        dev = (char *)S.h[r].va + off;
    } else {
        n = u8();
    }
    int variant = (k >> 2) % 4; /* 0 in range, 1 past the end, 2 before the start, 3 NULL host */
    if (in_range && variant == 1) {
        size_t ms = S.h[r].extent;
        off = ms - 1 - (u8() % (ms < 256 ? ms : 256)); /* near the end, so n stays small */
        dev = (char *)S.h[r].va + off;
        n = ms - off + 1 + u8();
    } else if (in_range && variant == 2) {
        dev = (char *)S.h[r].va - 1 - u8();
        if (n == 0)
            n = 1;
    }
    void *host = (variant == 3 && n) ? NULL : (void *)(host_a + (k >> 4));
    if (n > MAXCOPY)
        n = MAXCOPY; /* host_a holds MAXCOPY + 64 bytes, so host stays in bounds */
    int valid = in_range && variant == 0;
    if (valid)
        for (size_t i = 0; i < n; i++)
            host_a[(k >> 4) + i] = (uint8_t)(i * 7 + S.step);
    int rc;
    if (dir == 0)
        rc = alias ? gdr_copy_to_mapped(mh, dev, host, n) : gdr_copy_to_mapping(mh, dev, host, n);
    else
        rc = alias ? gdr_copy_from_mapped(mh, host, dev, n) : gdr_copy_from_mapping(mh, host, dev, n);
    TRACE("copy dir=%d h=%#lx kind=%d in_range=%d variant=%d dev=%p n=%zu -> %d\n", dir, mh.h, kind, in_range, variant, (void *)dev, n, rc);
    if (valid) {
        expect_eq("gdr_copy (in range)", rc, 0);
        if (dir == 0 && n) {
            memset(host_b, 0, n);
            rc = gdr_copy_from_mapping(mh, host_b, dev, n);
            expect_eq("gdr_copy_from_mapping (read back)", rc, 0);
            if (memcmp(host_b, host_a + (k >> 4), n))
                fail("copy did not read back what was written", (int)n);
        }
    } else if (in_range && n == 0) {
        expect_in("gdr_copy (0 bytes)", rc, SET_EINVAL);
    } else {
        expect_eq("gdr_copy (invalid)", rc, EINVAL);
    }
}

static void op_queries(void)
{
    int gs;
    gdr_t g = pick_g(&gs);
    uint8_t k = u8();
    int major = -1, minor = -1, v = -1, rc;
    const char *str = NULL;
    switch (k % 4) {
    case 0:
        gdr_runtime_get_version((k & 16) ? NULL : &major, (k & 32) ? NULL : &minor);
        if (!(k & 16) && major != GDR_API_MAJOR_VERSION)
            fail("gdr_runtime_get_version major", major);
        if (!(k & 32) && minor != GDR_API_MINOR_VERSION)
            fail("gdr_runtime_get_version minor", minor);
        break;
    case 1:
        rc = gdr_driver_get_version(g, (k & 16) ? NULL : &major, (k & 32) ? NULL : &minor);
        if (gs >= 0 && !(k & 48)) {
            expect_ok("gdr_driver_get_version", rc);
            expect_in("gdr_driver_get_version", rc, SET_EINVAL);
            if (rc == 0 && (major != 2 || minor != 6))
                fail("driver version is not 2.6", major * 100 + minor);
        } else {
            expect_eq("gdr_driver_get_version(invalid)", rc, EINVAL);
        }
        break;
    case 2: {
        int attr = (k >> 6) == 3 ? (int)u32() : (int)(u8() % 6);
        rc = gdr_get_attribute(g, (gdr_attr_t)attr, (k & 16) ? NULL : &v);
        if (gs >= 0 && !(k & 16) && attr >= 1 && attr <= 3) {
            expect_ok("gdr_get_attribute", rc);
            expect_in("gdr_get_attribute", rc, SET_EINVAL);
            if (rc == 0 && v != attr_want(S.g[gs].backend, attr))
                fail("gdr_get_attribute value disagrees with the backend", attr * 10 + v);
        } else {
            expect_eq("gdr_get_attribute(invalid)", rc, EINVAL);
        }
        break;
    }
    default: {
        int t = (k >> 6) == 3 ? (int)u32() : (int)(u8() % 6) - 1;
        rc = gdr_get_mapping_type_string((gdr_mapping_type_t)t, (k & 16) ? NULL : &str);
        if (t >= 0 && t <= 3 && !(k & 16)) {
            expect_eq("gdr_get_mapping_type_string", rc, 0);
            if (str == NULL || str[0] == '\0')
                fail("mapping type string empty", t);
        } else {
            expect_eq("gdr_get_mapping_type_string(invalid)", rc, EINVAL);
        }
        break;
    }
    }
}

static void op_fault(void)
{
    static const char *const names[] = {
        "PIN_BUFFER", "PIN_BUFFER_V2", "UNPIN_BUFFER", "GET_CB_FLAG", "GET_INFO",
        "GET_INFO_V2", "GET_ATTR", "REQ_MAPPING_TYPE", "GET_VERSION", "open", "mmap", "munmap",
    };
    static const char *const errs[] = {"EINVAL", "ENOMEM", "EIO", "EFAULT", "EACCES", "EBUSY", "ENODEV", "EAGAIN"};
    /* The Vulkan situation: the calls of the Vulkan import's pin and map, Vulkan ones with a
     * VkResult, CUDA ones with a CUresult (as abi-tests/reliability/faults.c injects them). */
    static const char *const vk_names[] = {
        "vkCreateDevice", "vkAllocateMemory", "vkMapMemory", "cuMemRetainAllocationHandle",
        "cuMemGetAllocationPropertiesFromHandle", "cuMemExportToShareableHandle", "cuMemRelease",
        "cuMemGetAddressRange_v2", "cuPointerGetAttribute", "cuDeviceGet", "cuCtxGetCurrent",
        "cuCtxSetCurrent",
    };
    /* The DMA-BUF situation: the CUDA calls of that backend's open, pin and close, with a
     * CUresult, and the mmap of a dma-buf with an errno (munmap of one is not the emulator's). */
    static const char *const dmabuf_names[] = {
        "mmap", "cuMemGetHandleForAddressRange", "cuPointerGetAttribute", "cuDeviceGet",
        "cuDeviceGetAttribute", "cuDeviceGetCount", "cuCtxGetCurrent", "cuCtxSetCurrent",
        "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease",
    };
    static const int vkresults[] = {-1, -2, -3, -4, -5, -7, -10, -1000072003};
    static const int curesults[] = {1, 2, 3, 100, 101, 201, 801, 999};
    char spec[96];
    uint8_t k = u8();
    S.release_armed = 0; /* the new spec replaces the old one */
    if (vk_mode) {
        const char *name = vk_names[k % 12];
        int err = name[0] == 'v' ? vkresults[(k >> 4) % 8] : curesults[(k >> 4) % 8];
        snprintf(spec, sizeof(spec), "%s:%u:%d", name, 1u + (u8() % 4), err);
        S.release_armed = strcmp(name, "cuMemRelease") == 0;
    } else if (situation == SIT_DMABUF) {
        const char *name = dmabuf_names[k % 10];
        if (name[0] == 'c')
            snprintf(spec, sizeof(spec), "%s:%u:%d", name, 1u + (u8() % 4), curesults[(k >> 4) % 8]);
        else
            snprintf(spec, sizeof(spec), "%s:%u:%s", name, 1u + (u8() % 4), errs[(k >> 4) % 8]);
    } else {
        const char *name = names[k % 12];
        /* GDRAPI_FUZZ_NO_MUNMAP_FAULTS=1 leaves munmap out (it was needed while finding F1 of
         * RELIABILITY.md, a leak after a failed munmap inside unpin or close, was open). */
        if (no_munmap_faults && strcmp(name, "munmap") == 0)
            name = "mmap";
        snprintf(spec, sizeof(spec), "%s:%u:%s", name, 1u + (u8() % 4), errs[(k >> 4) % 8]);
    }
    TRACE("fault %s\n", spec);
    if (gdrsim_set_fail(spec) != 0)
        fail("gdrsim_set_fail refused a valid spec", 0);
    S.faults = 1;
}

/* ---- one input ---- */

static void finish(void)
{
    struct gdrsim_counters c;
    (void)gdrsim_set_fail(NULL);
    S.release_armed = 0;
    for (int i = 0; i < NG; i++)
        if (S.g[i].live) {
            int rc = gdr_close(S.g[i].g);
            expect_ok("gdr_close (end)", rc);
            S.g[i].live = 0;
        }
    memset(&c, 0, sizeof(c));
    if (gdrsim_get_counters(&c, sizeof(c)) != 0)
        fail("gdrsim_get_counters", 0);
    if (c.live_pins || c.live_mappings || c.open_files || c.live_dmabufs || c.live_vmm_exports ||
        c.live_vk_imports || c.live_vk_mappings || c.live_vk_devices || c.live_vk_instances) {
        fprintf(stderr,
                "after gdr_close: live_pins=%llu live_mappings=%llu open_files=%llu "
                "live_dmabufs=%llu live_vmm_exports=%llu live_vk_imports=%llu "
                "live_vk_mappings=%llu live_vk_devices=%llu live_vk_instances=%llu\n",
                (unsigned long long)c.live_pins, (unsigned long long)c.live_mappings,
                (unsigned long long)c.open_files, (unsigned long long)c.live_dmabufs,
                (unsigned long long)c.live_vmm_exports, (unsigned long long)c.live_vk_imports,
                (unsigned long long)c.live_vk_mappings, (unsigned long long)c.live_vk_devices,
                (unsigned long long)c.live_vk_instances);
        fail("leak: the emulator still counts pins, mappings, files, exports, imports, Vulkan "
             "devices or instances", 0);
    }
    for (int i = 0; i < NA; i++)
        if (S.a[i].live && S.a[i].vmm) {
            vmm_free(&S.a[i]);
        } else if (S.a[i].live) {
            if (cuMemFree_v2(S.a[i].p) != CUDA_SUCCESS)
                fail("cuMemFree_v2 at the end", 0);
            S.a[i].live = 0;
        }
    /* What is left of each VMM allocation now is the references the library kept: one per
     * cuMemRelease of its that failed (the library logs it and goes on, and nothing but
     * another cuMemRelease, made here, can drop it). Each allocation is released until it is
     * gone, and the references must be exactly the failed releases, each on an allocation its
     * call could have released. */
    static int kept[NCREATED];
    int total = 0;
    for (int i = 0; i < S.ncreated; i++) {
        kept[i] = 0;
        while (kept[i] <= S.nfailed && cuMemRelease(S.created[i]) == CUDA_SUCCESS)
            kept[i]++;
        total += kept[i];
    }
    if (total != S.nfailed || !failures_explain(kept)) {
        fprintf(stderr, "failed cuMemRelease calls of the library: %d, references left: %d\n",
                S.nfailed, total);
        for (int f = 0; f < S.nfailed; f++) {
            fprintf(stderr, "  failed at step %d, on", S.failed[f].step);
            for (int i = 0; i < S.ncreated; i++)
                if (S.failed[f].any || hset_has(&S.failed[f].cand, i))
                    fprintf(stderr, " %d", i);
            fprintf(stderr, "%s\n", S.failed[f].any ? " (any)" : "");
        }
        for (int i = 0; i < S.ncreated; i++)
            if (kept[i])
                fprintf(stderr, "  allocation %d (handle %#llx): %d references left\n", i,
                        (unsigned long long)S.created[i], kept[i]);
        if (total > S.nfailed)
            fail("leak: the library kept references to VMM allocations beyond its failed releases",
                 total - S.nfailed);
        if (total < S.nfailed)
            fail("fewer references left than the library's failed releases: one released twice",
                 S.nfailed - total);
        fail("references left on allocations that no failed release could have been on", total);
    }
    if (gdrsim_get_counters(&c, sizeof(c)) != 0 || c.live_allocations != S.allocations_at_start)
        fail("leak: device allocations", (int)c.live_allocations);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    CUdevice dev;
    CUcontext ctx;
    struct gdrsim_counters c;
    (void)argc;
    (void)argv;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        fprintf(stderr, "gdrapi_calls: no CUDA device (run on the emulator)\n");
        exit(2);
    }
    trace = getenv("GDRAPI_FUZZ_TRACE") != NULL;
    const char *alloc = getenv("GDRAPI_TEST_ALLOC");
    vk_mode = alloc != NULL && strcmp(alloc, "vmm") == 0;
    if (vk_mode) {
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof(prop));
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        if (cuMemGetAllocationGranularity(&vmm_gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) !=
                CUDA_SUCCESS ||
            vmm_gran == 0 || vmm_gran % GPU_PAGE_SIZE) {
            fprintf(stderr, "gdrapi_calls: no VMM granularity\n");
            exit(2);
        }
    }
    no_munmap_faults = getenv("GDRAPI_FUZZ_NO_MUNMAP_FAULTS") != NULL;
    legacy_info = (legacy_info_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "gdr_get_info");
    if (legacy_info == NULL) {
        fprintf(stderr, "gdrapi_calls: gdr_get_info is not exported\n");
        exit(2);
    }
    long page = sysconf(_SC_PAGESIZE);
    host_page = page > 0 ? (size_t)page : 4096;
    /* The situation, as the library sees it: the backend of a gdr_t, and for gdrdrv whether
     * the driver keeps freed memory pinned. */
    gdr_t g = gdr_open();
    int persistent = -1;
    if (g == NULL) {
        fprintf(stderr, "gdrapi_calls: gdr_open failed before any fault\n");
        exit(2);
    }
    unsigned backend = cache_backend(g);
    if (gdr_get_attribute(g, GDR_ATTR_USE_PERSISTENT_MAPPING, &persistent) != 0 || gdr_close(g) != 0) {
        fprintf(stderr, "gdrapi_calls: gdr_get_attribute or gdr_close failed before any fault\n");
        exit(2);
    }
    situation = backend == B_VULKAN   ? SIT_VULKAN
                : backend == B_DMABUF ? SIT_DMABUF
                : persistent == 0     ? SIT_GDRDRV_NONPERSISTENT
                                      : SIT_GDRDRV;
    const char *want = getenv("GDRAPI_FUZZ_SITUATION");
    if (want != NULL && strcmp(want, situation_names[situation]) != 0) {
        fprintf(stderr, "gdrapi_calls: GDRAPI_FUZZ_SITUATION=%s, but the library is in the %s situation\n",
                want, situation_names[situation]);
        exit(2);
    }
    if (vk_mode != (situation == SIT_VULKAN)) {
        fprintf(stderr, "gdrapi_calls: GDRAPI_TEST_ALLOC=vmm goes with the Vulkan import, and only with it "
                        "(the library is in the %s situation)\n", situation_names[situation]);
        exit(2);
    }
    fprintf(stderr, "gdrapi_calls: the %s situation\n", situation_names[situation]);
    memset(&c, 0, sizeof(c));
    gdrsim_get_counters(&c, sizeof(c));
    S.allocations_at_start = c.live_allocations;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memset(&S.g, 0, sizeof(S.g));
    memset(&S.h, 0, sizeof(S.h));
    memset(&S.a, 0, sizeof(S.a));
    S.d = data;
    S.n = size;
    S.i = 0;
    S.faults = 0;
    S.ncreated = 0;
    S.release_armed = 0;
    S.nfailed = 0;
    /* Every input starts with one gdr_t and one allocation, so that short inputs reach pins. */
    gdr_t g = gdr_open();
    if (g == NULL)
        fail("gdr_open returned NULL", 0);
    note_open(0, g);
    if (vk_mode) {
        vmm_alloc(&S.a[0], 4, vmm_gran);
    } else {
        if (cuMemAlloc_v2(&S.a[0].p, 4 * GPU_PAGE_SIZE) != CUDA_SUCCESS)
            fail("cuMemAlloc_v2 failed", 0);
        S.a[0].size = 4 * GPU_PAGE_SIZE;
        S.a[0].live = 1;
    }
    for (S.step = 0; S.i < S.n && S.step < MAXSTEPS; S.step++) {
        /* While a cuMemRelease rule is armed, the faults that fire in the step's library calls
         * are releases the library could not make (see note_failed_releases). */
        int armed = S.release_armed;
        uint64_t before = armed ? injected_faults() : 0;
        S.own_fired = 0;
        S.cand_any = 1;
        memset(&S.cand, 0, sizeof(S.cand));
        switch (u8() % 17) {
        case 0: op_open(); break;
        case 1: op_close(); break;
        case 2: op_alloc(); break;
        case 3: op_free(); break;
        case 4: op_pin(0); break;
        case 5: case 6: op_pin(1); break;
        case 7: op_unpin(); break;
        case 8: op_cb_flag(); break;
        case 9: op_info(); break;
        case 10: op_map(0); break;
        case 11: op_map(1); break;
        case 12: op_unmap(); break;
        case 13: case 14: op_copy(); break;
        case 15: op_queries(); break;
        default:
            if (u8() < 32) /* faults stay rare, so that most inputs check exact results */
                op_fault();
            break;
        }
        note_failed_releases(armed, before);
    }
    finish();
    return 0;
}
