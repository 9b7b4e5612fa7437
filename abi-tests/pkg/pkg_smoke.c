/*
 * pkg_smoke: uses an installed libgdrapi the way its users do, and checks that every way of
 * reaching it lands on one expected file.
 *
 *   pkg_smoke EXPECTED_FILE OPEN_MODE
 *
 * EXPECTED_FILE is the real path of the library that must be used (libgdrapi.so.2.6 of the
 * installed package or prefix). OPEN_MODE says what gdr_open() must do here:
 *   null  it must return NULL (no /dev/gdrdrv and no CUDA driver on this machine),
 *   open  it must succeed (for example on the emulator), and gdr_driver_get_version and
 *         gdr_close must succeed too,
 *   any   either (a machine whose state the test does not know).
 *
 * Built twice: linked with `pkg-config --libs gdrapi` (as UCX and libfabric link), and with
 * -DDLOPEN_ONLY, not linked at all (as NCCL, NVSHMEM and aws-ofi-nccl load it). Either way
 * it dlopens "libgdrapi.so" and "libgdrapi.so.2", the two names users pass.
 * The harness is the C suites' harness/check.h (-Iharness; the installed headers come
 * from pkg-config): each failed check prints "file:line: FAILED: what", and the program ends
 * with "N passed, N failed" and exit status 0 when every check passed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gdrapi.h>
#include <gdrconfig.h>

#include "check.h"

#if GDR_API_MAJOR_VERSION != 2 || GDR_API_MINOR_VERSION != 6
#error "the installed gdrapi.h is not API 2.6"
#endif

typedef void (*runtime_version_fn)(int *, int *);
typedef gdr_t (*open_fn)(void);
typedef int (*close_fn)(gdr_t);
typedef int (*driver_version_fn)(gdr_t, int *, int *);

/* A check with a message made at run time. */
#define check(ok, what) check_report(!!(ok), __FILE__, __LINE__, (what))

/* Real path of the object that holds addr, or "" when dladdr cannot tell. */
static const char *object_of(const void *addr, char *buf)
{
    Dl_info info;
    if (addr == NULL || dladdr(addr, &info) == 0 || info.dli_fname == NULL)
        return "";
    if (realpath(info.dli_fname, buf) == NULL)
        return "";
    return buf;
}

static void check_version(runtime_version_fn get, const char *how)
{
    char what[256];
    int major = -1, minor = -1;
    get(&major, &minor);
    snprintf(what, sizeof what, "%s: gdr_runtime_get_version says %d.%d (want 2.6)", how, major, minor);
    check(major == 2 && minor == 6, what);
}

static void check_open(open_fn op, close_fn cl, driver_version_fn dv, const char *mode, const char *how)
{
    char what[256];
    gdr_t g = op();
    if (strcmp(mode, "null") == 0) {
        snprintf(what, sizeof what, "%s: gdr_open returns NULL without a driver", how);
        check(g == NULL, what);
    } else if (strcmp(mode, "open") == 0) {
        snprintf(what, sizeof what, "%s: gdr_open succeeds", how);
        check(g != NULL, what);
    }
    if (g != NULL) {
        int major = -1, minor = -1;
        int rc = dv(g, &major, &minor);
        snprintf(what, sizeof what, "%s: gdr_driver_get_version returns 0 with 2.x (got %d, %d.%d)",
                 how, rc, major, minor);
        check(rc == 0 && major == 2, what);
        rc = cl(g);
        snprintf(what, sizeof what, "%s: gdr_close returns 0 (got %d)", how, rc);
        check(rc == 0, what);
    }
}

static void check_dlopen(const char *name, const char *expected, const char *mode)
{
    char what[PATH_MAX + 128], buf[PATH_MAX];
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    snprintf(what, sizeof what, "dlopen(\"%s\") succeeds%s%s", name, h ? "" : ": ", h ? "" : dlerror());
    check(h != NULL, what);
    if (h == NULL)
        return;
    void *sym = dlsym(h, "gdr_open");
    const char *where = object_of(sym, buf);
    snprintf(what, sizeof what, "dlopen(\"%s\") resolves gdr_open in %s (got '%s')", name, expected, where);
    check(strcmp(where, expected) == 0, what);
#ifndef DLOPEN_ONLY
    snprintf(what, sizeof what, "dlopen(\"%s\") gives the already linked gdr_open", name);
    check(sym == (void *)gdr_open, what);
#endif
    runtime_version_fn get = (runtime_version_fn)dlsym(h, "gdr_runtime_get_version");
    check(get != NULL, "dlsym finds gdr_runtime_get_version");
    if (get != NULL)
        check_version(get, name);
    open_fn op = (open_fn)dlsym(h, "gdr_open");
    close_fn cl = (close_fn)dlsym(h, "gdr_close");
    driver_version_fn dv = (driver_version_fn)dlsym(h, "gdr_driver_get_version");
    check(op && cl && dv, "dlsym finds gdr_open, gdr_close, gdr_driver_get_version");
    if (op && cl && dv)
        check_open(op, cl, dv, mode, name);
    check(dlclose(h) == 0, "dlclose succeeds");
}

int main(int argc, char **argv)
{
    char expected[PATH_MAX];
    if (argc != 3 || (strcmp(argv[2], "null") && strcmp(argv[2], "open") && strcmp(argv[2], "any"))) {
        fprintf(stderr, "usage: %s EXPECTED_LIBRARY_FILE null|open|any\n", argv[0]);
        return 2;
    }
    if (realpath(argv[1], expected) == NULL) {
        perror(argv[1]);
        return 2;
    }
#ifndef DLOPEN_ONLY
    char buf[PATH_MAX], what[PATH_MAX + 64];
    const char *where = object_of((const void *)gdr_runtime_get_version, buf);
    snprintf(what, sizeof what, "linked gdr_runtime_get_version is in %s (got '%s')", expected, where);
    check(strcmp(where, expected) == 0, what);
    check_version(gdr_runtime_get_version, "linked");
    check_open(gdr_open, gdr_close, gdr_driver_get_version, argv[2], "linked");
#endif
    check_dlopen("libgdrapi.so", expected, argv[2]);
    check_dlopen("libgdrapi.so.2", expected, argv[2]);
    return check_done("pkg_smoke");
}
