/*
 * dlopen_main.c DIR - dlopen("libgdrapi.so") and dlopen("libgdrapi.so.2"),
 * as consumers that load the library at run time do (UCX uses the second),
 * reach the library in DIR through LD_LIBRARY_PATH, and it works.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gdrapi.h"

static void load(const char *name, const char *dir)
{
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    void (*version)(int *, int *);
    gdr_t (*open_fn)(void);
    int (*close_fn)(gdr_t);
    Dl_info where;
    char real_dir[PATH_MAX], real_lib[PATH_MAX];
    int major = -1, minor = -1;

    if (h == NULL) {
        printf("dlopen(%s): %s\n", name, dlerror());
        CHECK(!"dlopen");
        return;
    }
    version = (void (*)(int *, int *))(uintptr_t)dlsym(h, "gdr_runtime_get_version");
    open_fn = (gdr_t (*)(void))(uintptr_t)dlsym(h, "gdr_open");
    close_fn = (int (*)(gdr_t))(uintptr_t)dlsym(h, "gdr_close");
    CHECK(version != NULL && open_fn != NULL && close_fn != NULL);
    if (version == NULL || open_fn == NULL || close_fn == NULL)
        return;
    version(&major, &minor);
    CHECK_EQ(major, 2);
    CHECK_EQ(minor, 6);

    /* The library that answered is the one in DIR. */
    CHECK(dladdr((void *)(uintptr_t)version, &where) != 0);
    CHECK(realpath(dir, real_dir) != NULL && realpath(where.dli_fname, real_lib) != NULL);
    if (strncmp(real_lib, real_dir, strlen(real_dir)) != 0)
        printf("dlopen(%s) loaded %s, not from %s\n", name, real_lib, real_dir);
    CHECK(strncmp(real_lib, real_dir, strlen(real_dir)) == 0);

    {
        gdr_t g = open_fn();
        CHECK(g != NULL);
        if (g != NULL)
            CHECK_EQ(close_fn(g), 0);
    }
    dlclose(h);
}

int main(int argc, char **argv)
{
    REQUIRE(argc > 1);
    load("libgdrapi.so", argv[1]);
    load("libgdrapi.so.2", argv[1]);
    return check_done("dlopen_main");
}
