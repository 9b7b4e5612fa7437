/*
 * mutant.c - a libgdrapi.so.2 with one exported function broken, for the mutation check.
 *
 * Built as a shared library named libgdrapi.so.2 (soname libgdrapi.so.2) that exports the
 * 19 functions of abi-tests/c/symbols.txt. Put in front of the library under test through
 * LD_LIBRARY_PATH (or LD_PRELOAD), it is what programs linked with -lgdrapi bind to and what
 * dlopen("libgdrapi.so.2") / dlopen("libgdrapi.so") return. On the first call it dlopens the
 * real library by path, RTLD_LOCAL, and forwards every function to it, except the one named
 * by GDRAPI_MUTANT, which it breaks in the way named there:
 *
 *   GDRAPI_MUTANT=<function>:<kind>   e.g. gdr_unmap:noop, gdr_copy_to_mapping:short
 *   GDRAPI_MUTANT_REAL=<path>         the real libgdrapi.so.2 (required)
 *   GDRAPI_MUTANT_HITS=<path>         optional: a line is appended the first time in each
 *                                     process that the mutant changes a result
 *   GDRAPI_MUTANT_LOADS=<path>        optional: a line "<program> <backend asked for>" is
 *                                     appended by each process that loads the real library
 *                                     through the shim ("vulkan" with GDRAPI_USE_VULKAN=1,
 *                                     else "-"), so the harness can tell that a suite's
 *                                     programs reached the shim
 *
 * Without GDRAPI_MUTANT every call is forwarded unchanged (the harness's control run). An
 * unknown mutant aborts. Kinds:
 *
 *   noop       returns success (0, or a non-NULL gdr_t) and does nothing: outputs untouched
 *   errno      when the real call fails, returns a different errno (EINVAL <-> EFAULT)
 *   null       gdr_open returns NULL
 *   leak       returns success and the library forgets the object, but the driver keeps
 *              one: gdr_unpin_buffer leaves a pin of the same range behind, gdr_unmap a
 *              mapping of it (on a pin of its own), gdr_close an open device file (a second
 *              gdr_t); all made through the real library, which still releases them at exit
 *   flags      the flags argument is dropped (0 passed instead)
 *   offset     gdr_map*: the address returned is one byte past the mapping's start;
 *              copies: the mapping-side pointer is one byte further (same size)
 *   short      copies move one byte less (size - 1 when size > 0)
 *   nofence    copies: the bytes are moved by this shim with no fence after them, once the
 *              real function has accepted the same arguments (validated by a real copy from
 *              the mapping into scratch); toward the device with streaming stores into lines
 *              evicted first (x86-64), the weak ordering of write-combining memory
 *   va, size, pagesize, tmcycles, cyclesperms, mapped, wc, type
 *              queries: that field of the result is wrong (+1 / +64 KiB / bit flipped /
 *              another mapping type)
 *   v2layout   the legacy gdr_get_info symbol writes the 48-byte v2 struct
 *   value      gdr_get_callback_flag, gdr_get_attribute: the value flipped (v ^ 1);
 *              gdr_get_mapping_type_string: the name of another type
 *   major, minor  the version's major / minor number + 1
 *
 * mutants-list (this file built with -DMUTANTS_LIST_MAIN) prints the catalogue, one
 * "function:kind<TAB>description" per line; the harness (run.sh) takes the mutants from it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "gdrapi.h"

#undef gdr_get_info

enum fn {
    F_OPEN, F_CLOSE, F_PIN, F_PIN_V2, F_UNPIN, F_CB_FLAG, F_INFO, F_INFO_V2, F_MAP, F_MAP_V2,
    F_UNMAP, F_TO, F_FROM, F_TO_ALIAS, F_FROM_ALIAS, F_RT_VERSION, F_DRV_VERSION, F_ATTR,
    F_TYPE_STRING, F_COUNT
};

static const char *const fn_names[F_COUNT] = {
    "gdr_open", "gdr_close", "gdr_pin_buffer", "gdr_pin_buffer_v2", "gdr_unpin_buffer",
    "gdr_get_callback_flag", "gdr_get_info", "gdr_get_info_v2", "gdr_map", "gdr_map_v2",
    "gdr_unmap", "gdr_copy_to_mapping", "gdr_copy_from_mapping", "gdr_copy_to_mapped",
    "gdr_copy_from_mapped", "gdr_runtime_get_version", "gdr_driver_get_version",
    "gdr_get_attribute", "gdr_get_mapping_type_string",
};

enum kind {
    K_NONE, K_NOOP, K_ERRNO, K_NULL, K_LEAK, K_FLAGS, K_OFFSET, K_SHORT, K_NOFENCE, K_VA, K_SIZE,
    K_PAGESIZE, K_TMCYCLES, K_CYCLESPERMS, K_MAPPED, K_WC, K_TYPE, K_V2LAYOUT, K_VALUE,
    K_MAJOR, K_MINOR, K_COUNT
};

static const char *const kind_names[K_COUNT] = {
    "none", "noop", "errno", "null", "leak", "flags", "offset", "short", "nofence", "va", "size",
    "pagesize", "tmcycles", "cyclesperms", "mapped", "wc", "type", "v2layout", "value",
    "major", "minor",
};

struct mutant {
    enum fn fn;
    enum kind kind;
    const char *what;
};

#define COPY_MUTANTS(F)                                                                  \
    {F, K_NOOP, "returns 0 and copies nothing"},                                         \
    {F, K_ERRNO, "a failure returns EFAULT for EINVAL (else EINVAL)"},                   \
    {F, K_SHORT, "copies size - 1 bytes"},                                               \
    {F, K_OFFSET, "the mapping-side pointer is one byte further"},                       \
    {F, K_NOFENCE, "the same copy with no fence after it"}

#define INFO_MUTANTS(F)                                                                  \
    {F, K_NOOP, "returns 0 and writes nothing"},                                         \
    {F, K_ERRNO, "a failure returns EFAULT for EINVAL (else EINVAL)"},                   \
    {F, K_VA, "va + 64 KiB"},                                                            \
    {F, K_SIZE, "mapped_size + 64 KiB"},                                                 \
    {F, K_PAGESIZE, "page_size + 1"},                                                    \
    {F, K_TMCYCLES, "tm_cycles + 1"},                                                    \
    {F, K_CYCLESPERMS, "cycles_per_ms + 1"},                                             \
    {F, K_MAPPED, "the mapped bit flipped"},                                             \
    {F, K_WC, "the wc_mapping bit flipped"}

/* The catalogue: every mutant the harness runs. */
static const struct mutant catalogue[] = {
    {F_OPEN, K_NOOP, "returns a non-NULL gdr_t and opens nothing"},
    {F_OPEN, K_NULL, "returns NULL"},
    {F_CLOSE, K_NOOP, "returns 0 and releases nothing"},
    {F_CLOSE, K_ERRNO, "a failure returns EFAULT for EINVAL (else EINVAL)"},
    {F_CLOSE, K_LEAK, "returns 0, but a device file stays open"},
    {F_PIN, K_NOOP, "returns 0, pins nothing, leaves *handle as it was"},
    {F_PIN, K_ERRNO, "a failure returns EFAULT for EINVAL (else EINVAL)"},
    {F_PIN_V2, K_NOOP, "returns 0, pins nothing, leaves *handle as it was"},
    {F_PIN_V2, K_ERRNO, "a failure returns EFAULT for EINVAL (else EINVAL)"},
    {F_PIN_V2, K_FLAGS, "the flags are dropped (GDR_PIN_FLAG_DEFAULT)"},
    {F_UNPIN, K_NOOP, "returns 0 and unpins nothing"},
    {F_UNPIN, K_ERRNO, "a failure returns EFAULT for EINVAL (else EINVAL)"},
    {F_UNPIN, K_LEAK, "returns 0, but a pin of the range stays in the driver"},
    {F_CB_FLAG, K_NOOP, "returns 0 and writes nothing"},
    {F_CB_FLAG, K_ERRNO, "a failure returns EFAULT for EINVAL (else EINVAL)"},
    {F_CB_FLAG, K_VALUE, "the flag flipped"},
    INFO_MUTANTS(F_INFO),
    {F_INFO, K_V2LAYOUT, "writes the 48-byte gdr_info_v2_t (8 bytes past the 40-byte struct)"},
    INFO_MUTANTS(F_INFO_V2),
    {F_INFO_V2, K_TYPE, "mapping_type is another type"},
    {F_MAP, K_NOOP, "returns 0, maps nothing, leaves *va as it was"},
    {F_MAP, K_ERRNO, "a failure returns EFAULT for EINVAL (else EINVAL)"},
    {F_MAP, K_OFFSET, "*va is one byte past the mapping"},
    {F_MAP_V2, K_NOOP, "returns 0, maps nothing, leaves *ptr_va as it was"},
    {F_MAP_V2, K_ERRNO, "a failure returns EFAULT for EINVAL (else EINVAL)"},
    {F_MAP_V2, K_OFFSET, "*ptr_va is one byte past the mapping"},
    {F_MAP_V2, K_FLAGS, "the requested mapping type is dropped (GDR_MAP_FLAG_DEFAULT)"},
    {F_UNMAP, K_NOOP, "returns 0 and unmaps nothing"},
    {F_UNMAP, K_ERRNO, "a failure returns EFAULT for EINVAL (else EINVAL)"},
    {F_UNMAP, K_LEAK, "returns 0, but a mapping of the range stays"},
    COPY_MUTANTS(F_TO),
    COPY_MUTANTS(F_FROM),
    COPY_MUTANTS(F_TO_ALIAS),
    COPY_MUTANTS(F_FROM_ALIAS),
    {F_RT_VERSION, K_NOOP, "writes nothing"},
    {F_RT_VERSION, K_MAJOR, "major + 1"},
    {F_RT_VERSION, K_MINOR, "minor + 1"},
    {F_DRV_VERSION, K_NOOP, "returns 0 and writes nothing"},
    {F_DRV_VERSION, K_ERRNO, "a failure returns EFAULT for EINVAL (else EINVAL)"},
    {F_DRV_VERSION, K_MAJOR, "major + 1"},
    {F_DRV_VERSION, K_MINOR, "minor + 1"},
    {F_ATTR, K_NOOP, "returns 0 and writes nothing"},
    {F_ATTR, K_ERRNO, "a failure returns EFAULT for EINVAL (else EINVAL)"},
    {F_ATTR, K_VALUE, "the value flipped"},
    {F_TYPE_STRING, K_NOOP, "returns 0 and writes nothing"},
    {F_TYPE_STRING, K_ERRNO, "a failure returns EFAULT for EINVAL (else EINVAL)"},
    {F_TYPE_STRING, K_VALUE, "the name of the next type"},
};

#define CATALOGUE_LEN (sizeof(catalogue) / sizeof(catalogue[0]))

#ifdef MUTANTS_LIST_MAIN

int main(void)
{
    size_t i;
    for (i = 0; i < CATALOGUE_LEN; i++)
        printf("%s:%s\t%s\n", fn_names[catalogue[i].fn], kind_names[catalogue[i].kind],
               catalogue[i].what);
    return 0;
}

#else /* the shim */

/* The real library's functions. */
typedef int (*copy_fn)(gdr_mh_t, void *, const void *, size_t);
static struct {
    gdr_t (*open)(void);
    int (*close)(gdr_t);
    int (*pin)(gdr_t, unsigned long, size_t, uint64_t, uint32_t, gdr_mh_t *);
    int (*pin_v2)(gdr_t, unsigned long, size_t, uint32_t, gdr_mh_t *);
    int (*unpin)(gdr_t, gdr_mh_t);
    int (*cb_flag)(gdr_t, gdr_mh_t, int *);
    int (*info)(gdr_t, gdr_mh_t, void *);
    int (*info_v2)(gdr_t, gdr_mh_t, gdr_info_v2_t *);
    int (*map)(gdr_t, gdr_mh_t, void **, size_t);
    int (*map_v2)(gdr_t, gdr_mh_t, void **, size_t, int);
    int (*unmap)(gdr_t, gdr_mh_t, void *, size_t);
    copy_fn to, from, to_alias, from_alias;
    void (*rt_version)(int *, int *);
    int (*drv_version)(gdr_t, int *, int *);
    int (*attr)(gdr_t, gdr_attr_t, int *);
    int (*type_string)(gdr_mapping_type_t, const char **);
} real;

static enum fn active_fn = F_COUNT; /* F_COUNT: no mutant */
static enum kind active_kind = K_NONE;
static pthread_once_t loaded = PTHREAD_ONCE_INIT;

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "libgdrapi mutant shim: %s%s%s\n", what, detail ? ": " : "",
            detail ? detail : "");
    abort();
}

static void *resolve(void *lib, const char *name)
{
    void *f = dlsym(lib, name);
    if (f == NULL)
        die("symbol missing in the real library", name);
    return f;
}

static void parse_mutant(const char *spec)
{
    size_t i;
    for (i = 0; i < CATALOGUE_LEN; i++) {
        const char *fn = fn_names[catalogue[i].fn], *kind = kind_names[catalogue[i].kind];
        size_t n = strlen(fn);
        if (strncmp(spec, fn, n) == 0 && spec[n] == ':' && strcmp(spec + n + 1, kind) == 0) {
            active_fn = catalogue[i].fn;
            active_kind = catalogue[i].kind;
            return;
        }
    }
    die("unknown GDRAPI_MUTANT (see mutants-list)", spec);
}

/* Notes that this process reached the shim (GDRAPI_MUTANT_LOADS). */
static void note_load(void)
{
    const char *path = getenv("GDRAPI_MUTANT_LOADS");
    const char *vk = getenv("GDRAPI_USE_VULKAN");
    char line[256];
    int fd, n;

    if (path == NULL || *path == '\0')
        return;
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    n = snprintf(line, sizeof(line), "%s %s\n", program_invocation_short_name,
                 vk != NULL && strcmp(vk, "1") == 0 ? "vulkan" : "-");
    if (n > 0 && write(fd, line, (size_t)n) < 0)
        n = 0;
    close(fd);
}

static void load(void)
{
    const char *path = getenv("GDRAPI_MUTANT_REAL");
    const char *spec = getenv("GDRAPI_MUTANT");
    void *lib;

    if (path == NULL || *path == '\0')
        die("GDRAPI_MUTANT_REAL (path of the real libgdrapi.so.2) is not set", NULL);
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        die("cannot load the real library", dlerror());
    if (spec != NULL && *spec != '\0')
        parse_mutant(spec);
    note_load();

#define R(field, name) real.field = (__typeof__(real.field))(uintptr_t)resolve(lib, name)
    R(open, "gdr_open");
    R(close, "gdr_close");
    R(pin, "gdr_pin_buffer");
    R(pin_v2, "gdr_pin_buffer_v2");
    R(unpin, "gdr_unpin_buffer");
    R(cb_flag, "gdr_get_callback_flag");
    R(info, "gdr_get_info");
    R(info_v2, "gdr_get_info_v2");
    R(map, "gdr_map");
    R(map_v2, "gdr_map_v2");
    R(unmap, "gdr_unmap");
    R(to, "gdr_copy_to_mapping");
    R(from, "gdr_copy_from_mapping");
    R(to_alias, "gdr_copy_to_mapped");
    R(from_alias, "gdr_copy_from_mapped");
    R(rt_version, "gdr_runtime_get_version");
    R(drv_version, "gdr_driver_get_version");
    R(attr, "gdr_get_attribute");
    R(type_string, "gdr_get_mapping_type_string");
#undef R
}

/* The kind of mutation of function f, K_NONE when f is not the mutant; loads on first use. */
static enum kind mutation(enum fn f)
{
    pthread_once(&loaded, load);
    return f == active_fn ? active_kind : K_NONE;
}

/* Notes (once per process) that the mutant changed a result, for the harness's report. */
static void hit(void)
{
    static int noted;
    const char *path;
    char line[128];
    int fd, n;

    if (__atomic_exchange_n(&noted, 1, __ATOMIC_RELAXED))
        return;
    path = getenv("GDRAPI_MUTANT_HITS");
    if (path == NULL || *path == '\0')
        return;
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    n = snprintf(line, sizeof(line), "%s:%s %d\n", fn_names[active_fn], kind_names[active_kind],
                 (int)getpid());
    if (n > 0 && write(fd, line, (size_t)n) < 0)
        n = 0;
    close(fd);
}

/* The wrong errno of the errno kind. */
static int wrong_errno(int ret)
{
    if (ret == 0)
        return 0;
    hit();
    return ret == EINVAL ? EFAULT : EINVAL;
}

/* A non-NULL gdr_t that the real library never handed out. */
static char fake_gdr[64];

gdr_t gdr_open(void)
{
    switch (mutation(F_OPEN)) {
    case K_NOOP:
        hit();
        return (gdr_t)(void *)fake_gdr;
    case K_NULL:
        hit();
        return NULL;
    default:
        return real.open();
    }
}

int gdr_close(gdr_t g)
{
    switch (mutation(F_CLOSE)) {
    case K_NOOP:
        hit();
        return 0;
    case K_ERRNO:
        return wrong_errno(real.close(g));
    case K_LEAK: {
        int ret = real.close(g);
        if (ret == 0 && real.open() != NULL)
            hit();
        return ret;
    }
    default:
        return real.close(g);
    }
}

int gdr_pin_buffer(gdr_t g, unsigned long addr, size_t size, uint64_t p2p_token,
                   uint32_t va_space, gdr_mh_t *handle)
{
    switch (mutation(F_PIN)) {
    case K_NOOP:
        hit();
        return 0;
    case K_ERRNO:
        return wrong_errno(real.pin(g, addr, size, p2p_token, va_space, handle));
    default:
        return real.pin(g, addr, size, p2p_token, va_space, handle);
    }
}

int gdr_pin_buffer_v2(gdr_t g, unsigned long addr, size_t size, uint32_t flags, gdr_mh_t *handle)
{
    switch (mutation(F_PIN_V2)) {
    case K_NOOP:
        hit();
        return 0;
    case K_ERRNO:
        return wrong_errno(real.pin_v2(g, addr, size, flags, handle));
    case K_FLAGS:
        if (flags != 0)
            hit();
        return real.pin_v2(g, addr, size, 0, handle);
    default:
        return real.pin_v2(g, addr, size, flags, handle);
    }
}

int gdr_unpin_buffer(gdr_t g, gdr_mh_t handle)
{
    switch (mutation(F_UNPIN)) {
    case K_NOOP:
        hit();
        return 0;
    case K_ERRNO:
        return wrong_errno(real.unpin(g, handle));
    case K_LEAK: {
        gdr_info_v2_t info;
        gdr_mh_t kept;
        int ret = real.info_v2(g, handle, &info);
        if (ret == 0)
            ret = real.unpin(g, handle);
        else
            return real.unpin(g, handle);
        if (ret == 0 && real.pin_v2(g, info.va, info.mapped_size, 0, &kept) == 0)
            hit();
        return ret;
    }
    default:
        return real.unpin(g, handle);
    }
}

int gdr_get_callback_flag(gdr_t g, gdr_mh_t handle, int *flag)
{
    int ret;
    switch (mutation(F_CB_FLAG)) {
    case K_NOOP:
        hit();
        return 0;
    case K_ERRNO:
        return wrong_errno(real.cb_flag(g, handle, flag));
    case K_VALUE:
        ret = real.cb_flag(g, handle, flag);
        if (ret == 0) {
            hit();
            *flag ^= 1;
        }
        return ret;
    default:
        return real.cb_flag(g, handle, flag);
    }
}

/* The common fields of the v1 (40-byte) and v2 (48-byte) info structs, mutated in place.
 * Offsets as in gdrcopy 2.6 (see abi-tests/c/layout.c): the bitfield unit is at 36. */
static void mutate_info(void *info, enum kind k)
{
    unsigned char *b = (unsigned char *)info;
    uint64_t u64;
    uint32_t u32;

    hit();
    switch (k) {
    case K_VA:
    case K_SIZE:
        memcpy(&u64, b + (k == K_VA ? 0 : 8), 8);
        u64 += GPU_PAGE_SIZE;
        memcpy(b + (k == K_VA ? 0 : 8), &u64, 8);
        break;
    case K_PAGESIZE:
    case K_CYCLESPERMS:
        memcpy(&u32, b + (k == K_PAGESIZE ? 16 : 32), 4);
        u32 += 1;
        memcpy(b + (k == K_PAGESIZE ? 16 : 32), &u32, 4);
        break;
    case K_TMCYCLES:
        memcpy(&u64, b + 24, 8);
        u64 += 1;
        memcpy(b + 24, &u64, 8);
        break;
    case K_MAPPED:
        b[36] ^= 0x01;
        break;
    case K_WC:
        b[36] ^= 0x02;
        break;
    case K_TYPE:
        memcpy(&u32, b + 40, 4);
        u32 = (u32 + 1) % GDR_MAPPING_TYPE_MAX;
        memcpy(b + 40, &u32, 4);
        break;
    default:
        break;
    }
}

int gdr_get_info(gdr_t g, gdr_mh_t handle, void *info)
{
    enum kind k = mutation(F_INFO);
    int ret;
    switch (k) {
    case K_NONE:
        return real.info(g, handle, info);
    case K_NOOP:
        hit();
        return 0;
    case K_ERRNO:
        return wrong_errno(real.info(g, handle, info));
    case K_V2LAYOUT:
        hit();
        return real.info_v2(g, handle, (gdr_info_v2_t *)info);
    default:
        ret = real.info(g, handle, info);
        if (ret == 0)
            mutate_info(info, k);
        return ret;
    }
}

int gdr_get_info_v2(gdr_t g, gdr_mh_t handle, gdr_info_v2_t *info)
{
    enum kind k = mutation(F_INFO_V2);
    int ret;
    switch (k) {
    case K_NONE:
        return real.info_v2(g, handle, info);
    case K_NOOP:
        hit();
        return 0;
    case K_ERRNO:
        return wrong_errno(real.info_v2(g, handle, info));
    default:
        ret = real.info_v2(g, handle, info);
        if (ret == 0)
            mutate_info(info, k);
        return ret;
    }
}

/* gdr_map and gdr_map_v2 share their mutants. */
static int map_mutant(enum kind k, int ret, void **va)
{
    if (k == K_OFFSET && ret == 0) {
        hit();
        *va = (char *)*va + 1;
    }
    return ret;
}

int gdr_map(gdr_t g, gdr_mh_t handle, void **va, size_t size)
{
    enum kind k = mutation(F_MAP);
    switch (k) {
    case K_NOOP:
        hit();
        return 0;
    case K_ERRNO:
        return wrong_errno(real.map(g, handle, va, size));
    default:
        return map_mutant(k, real.map(g, handle, va, size), va);
    }
}

int gdr_map_v2(gdr_t g, gdr_mh_t handle, void **ptr_va, size_t size, int flags)
{
    enum kind k = mutation(F_MAP_V2);
    switch (k) {
    case K_NOOP:
        hit();
        return 0;
    case K_ERRNO:
        return wrong_errno(real.map_v2(g, handle, ptr_va, size, flags));
    case K_FLAGS:
        if (flags != 0)
            hit();
        return real.map_v2(g, handle, ptr_va, size, 0);
    default:
        return map_mutant(k, real.map_v2(g, handle, ptr_va, size, flags), ptr_va);
    }
}

int gdr_unmap(gdr_t g, gdr_mh_t handle, void *va, size_t size)
{
    switch (mutation(F_UNMAP)) {
    case K_NOOP:
        hit();
        return 0;
    case K_ERRNO:
        return wrong_errno(real.unmap(g, handle, va, size));
    case K_LEAK: {
        gdr_info_v2_t info;
        gdr_mh_t kept;
        void *kept_va = NULL;
        int ret = real.info_v2(g, handle, &info);
        if (ret != 0)
            return real.unmap(g, handle, va, size);
        ret = real.unmap(g, handle, va, size);
        if (ret == 0 && real.pin_v2(g, info.va, info.mapped_size, 0, &kept) == 0) {
            if (real.map(g, kept, &kept_va, size) == 0)
                hit();
            else
                real.unpin(g, kept);
        }
        return ret;
    }
    default:
        return real.unmap(g, handle, va, size);
    }
}

/* Stores with no fence after them: non-temporal where x86-64 has them (weakly ordered, as
 * the library's write-combining kernels are), plain stores elsewhere. */
static void store_unfenced(unsigned char *dst, const unsigned char *src, size_t n)
{
#if defined(__x86_64__)
    while (n > 0 && ((uintptr_t)dst & 3) != 0) {
        *dst++ = *src++;
        n--;
    }
    while (n >= 4) {
        int v;
        memcpy(&v, src, 4);
        _mm_stream_si32((int *)(void *)dst, v);
        dst += 4, src += 4, n -= 4;
    }
    while (n > 0) {
        *dst++ = *src++;
        n--;
    }
#else
    memcpy(dst, src, n);
#endif
}

/* Takes the lines of [p, p + n) out of every cache, as if the validation above had not read
 * them: write-combining memory is never cached, and streaming stores into a line this CPU has
 * just read are ordered like ordinary ones. The full fence completes the eviction before the
 * copy starts; none follows the copy. */
static void evict(const void *p, size_t n)
{
#if defined(__x86_64__)
    uintptr_t line = (uintptr_t)p & ~(uintptr_t)63, end = (uintptr_t)p + n;
    for (; line < end; line += 64)
        _mm_clflush((const void *)line);
    _mm_mfence();
#else
    (void)p;
    (void)n;
#endif
}

/* The nofence kind: the real library validates the arguments (a real copy from the same
 * mapping range into scratch memory, which checks what a copy to it checks), then the bytes
 * move here with no fence after them. */
static int copy_unfenced(copy_fn real_from, gdr_mh_t handle, void *dev, void *host, size_t size,
                         int to_device)
{
    unsigned char one;
    unsigned char *scratch = size > 1 ? malloc(size) : &one;
    int ret;

    /* A size no buffer can hold lies outside any mapping: the real function refuses it. */
    if (scratch == NULL)
        return to_device ? real.to(handle, dev, host, size) : real.from(handle, host, dev, size);
    ret = real_from(handle, scratch, dev, size);
    if (scratch != &one)
        free(scratch);
    if (ret != 0 || size == 0)
        return ret;
    hit();
    if (to_device) {
        evict(dev, size);
        store_unfenced((unsigned char *)dev, (const unsigned char *)host, size);
    }
    else
        memcpy(host, dev, size);
    return 0;
}

/* Copies toward the device: h is the source, d the mapping. */
static int copy_to(enum fn f, copy_fn fn, gdr_mh_t handle, void *d, const void *h, size_t size)
{
    switch (mutation(f)) {
    case K_NOOP:
        hit();
        return 0;
    case K_ERRNO:
        return wrong_errno(fn(handle, d, h, size));
    case K_SHORT:
        if (size > 0)
            hit();
        return fn(handle, d, h, size > 0 ? size - 1 : 0);
    case K_OFFSET:
        hit();
        return fn(handle, (char *)d + 1, h, size);
    case K_NOFENCE:
        return copy_unfenced(real.from, handle, d, (void *)(uintptr_t)h, size, 1);
    default:
        return fn(handle, d, h, size);
    }
}

/* Copies toward the host: h is the destination, d the mapping. */
static int copy_from(enum fn f, copy_fn fn, gdr_mh_t handle, void *h, const void *d, size_t size)
{
    switch (mutation(f)) {
    case K_NOOP:
        hit();
        return 0;
    case K_ERRNO:
        return wrong_errno(fn(handle, h, d, size));
    case K_SHORT:
        if (size > 0)
            hit();
        return fn(handle, h, d, size > 0 ? size - 1 : 0);
    case K_OFFSET:
        hit();
        return fn(handle, h, (const char *)d + 1, size);
    case K_NOFENCE:
        return copy_unfenced(real.from, handle, (void *)(uintptr_t)d, h, size, 0);
    default:
        return fn(handle, h, d, size);
    }
}

int gdr_copy_to_mapping(gdr_mh_t handle, void *map_d_ptr, const void *h_ptr, size_t size)
{
    return copy_to(F_TO, real.to, handle, map_d_ptr, h_ptr, size);
}

int gdr_copy_from_mapping(gdr_mh_t handle, void *h_ptr, const void *map_d_ptr, size_t size)
{
    return copy_from(F_FROM, real.from, handle, h_ptr, map_d_ptr, size);
}

int gdr_copy_to_mapped(gdr_mh_t handle, void *map_d_ptr, const void *h_ptr, size_t size)
{
    return copy_to(F_TO_ALIAS, real.to_alias, handle, map_d_ptr, h_ptr, size);
}

int gdr_copy_from_mapped(gdr_mh_t handle, void *h_ptr, const void *map_d_ptr, size_t size)
{
    return copy_from(F_FROM_ALIAS, real.from_alias, handle, h_ptr, map_d_ptr, size);
}

void gdr_runtime_get_version(int *major, int *minor)
{
    switch (mutation(F_RT_VERSION)) {
    case K_NOOP:
        hit();
        return;
    case K_MAJOR:
        real.rt_version(major, minor);
        hit();
        *major += 1;
        return;
    case K_MINOR:
        real.rt_version(major, minor);
        hit();
        *minor += 1;
        return;
    default:
        real.rt_version(major, minor);
        return;
    }
}

int gdr_driver_get_version(gdr_t g, int *major, int *minor)
{
    int ret;
    enum kind k = mutation(F_DRV_VERSION);
    switch (k) {
    case K_NOOP:
        hit();
        return 0;
    case K_ERRNO:
        return wrong_errno(real.drv_version(g, major, minor));
    case K_MAJOR:
    case K_MINOR:
        ret = real.drv_version(g, major, minor);
        if (ret == 0) {
            hit();
            *(k == K_MAJOR ? major : minor) += 1;
        }
        return ret;
    default:
        return real.drv_version(g, major, minor);
    }
}

int gdr_get_attribute(gdr_t g, gdr_attr_t attr, int *v)
{
    int ret;
    switch (mutation(F_ATTR)) {
    case K_NOOP:
        hit();
        return 0;
    case K_ERRNO:
        return wrong_errno(real.attr(g, attr, v));
    case K_VALUE:
        ret = real.attr(g, attr, v);
        if (ret == 0) {
            hit();
            *v ^= 1;
        }
        return ret;
    default:
        return real.attr(g, attr, v);
    }
}

int gdr_get_mapping_type_string(gdr_mapping_type_t mapping_type, const char **pstr)
{
    int ret;
    switch (mutation(F_TYPE_STRING)) {
    case K_NOOP:
        hit();
        return 0;
    case K_ERRNO:
        return wrong_errno(real.type_string(mapping_type, pstr));
    case K_VALUE:
        ret = real.type_string(mapping_type, pstr);
        if (ret == 0) {
            hit();
            ret = real.type_string(
                (gdr_mapping_type_t)((mapping_type + 1) % GDR_MAPPING_TYPE_MAX), pstr);
        }
        return ret;
    default:
        return real.type_string(mapping_type, pstr);
    }
}

#endif /* MUTANTS_LIST_MAIN */
