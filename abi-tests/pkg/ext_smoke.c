/*
 * ext_smoke: uses an installed libgdrapi_ext (host-written GPU memory) as its users do: built
 * with `pkg-config --cflags --libs gdrapi_ext`, it checks which file the loader took and that
 * it needs the libgdrapi.so.2 beside it, then allocates, copies and frees.
 *
 *   ext_smoke EXPECTED_FILE OPEN_MODE
 *
 * EXPECTED_FILE is the real path of the libgdrapi_ext.so.0.* that must be used. OPEN_MODE:
 *   open  gdrx_open must succeed (on the emulator), and so must an allocation of 8 bytes,
 *         copies both ways through it, its free and gdrx_close;
 *   any   gdrx_open may fail (a machine whose GPU the test does not know), with ENODEV.
 * Exit status 0 when every check passed; each failure is printed on stderr.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gdrapi_ext.h>

static int failures;

static void fail(const char *what)
{
    fprintf(stderr, "ext_smoke: FAIL: %s\n", what);
    failures++;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: ext_smoke EXPECTED_FILE open|any\n");
        return 2;
    }
    int open_mode = strcmp(argv[2], "open") == 0;
    char want[PATH_MAX], got[PATH_MAX];
    Dl_info info;
    if (!realpath(argv[1], want))
        fail("the expected file does not exist");
    else if (!dladdr((void *)(uintptr_t)gdrx_alloc, &info) || !realpath(info.dli_fname, got))
        fail("dladdr cannot tell which file gdrx_alloc comes from");
    else if (strcmp(want, got) != 0) {
        fprintf(stderr, "ext_smoke: gdrx_alloc comes from %s, not %s\n", got, want);
        fail("the library is not the expected one");
    }
    int major = -1, minor = -1;
    gdrx_runtime_get_version(&major, &minor);
    if (major != GDRX_API_MAJOR_VERSION || minor != GDRX_API_MINOR_VERSION)
        fail("gdrx_runtime_get_version is not the header's version");
    if (!dlsym(RTLD_DEFAULT, "gdr_open"))
        fail("libgdrapi.so.2 was not loaded with libgdrapi_ext.so.0");

    gdrx_t x;
    int rc = gdrx_open(&x, 0, GDRX_OPEN_DEFAULT);
    if (rc != 0) {
        if (open_mode || rc != ENODEV)
            fail("gdrx_open");
        fprintf(stderr, "ext_smoke: gdrx_open: %d (no GPU here)\n", rc);
    } else {
        gdrx_mem_t m;
        uint64_t v = 0x0123456789abcdefULL, r = 0;
        if (gdrx_alloc(x, 8, 0, &m) != 0)
            fail("gdrx_alloc");
        else {
            if (m.dev_ptr % GDRX_MIN_ALIGNMENT != 0)
                fail("alignment");
            if (gdrx_copy_to(&m, 0, &v, 8) != 0 || gdrx_copy_from(&m, 0, &r, 8) != 0 || r != v)
                fail("copies");
            if (gdrx_free(x, &m) != 0)
                fail("gdrx_free");
        }
        if (gdrx_close(x) != 0)
            fail("gdrx_close");
    }
    if (failures == 0)
        printf("ext_smoke: ok (%s)\n", rc == 0 ? "allocated, copied, freed" : "no GPU");
    return failures ? 1 : 0;
}
