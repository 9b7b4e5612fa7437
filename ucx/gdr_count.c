/*
 * gdr_count.so: counts the calls of gdr_copy_to_mapping and gdr_copy_from_mapping that reach
 * libgdrapi.so.2 and prints "GDRCOUNT to=N from=M" on stderr at exit, to show which UCX runs
 * move their data through our library. Preloaded after the emulator; forwards every call to
 * the libgdrapi.so.2 the process loaded.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct { unsigned long h; } gdr_mh_t;
typedef int (*copy_fn)(gdr_mh_t, void *, const void *, size_t);

static unsigned long to_count, from_count;

static copy_fn lookup(const char *name)
{
    void *lib = dlopen("libgdrapi.so.2", RTLD_NOW | RTLD_NOLOAD);
    copy_fn f = lib ? (copy_fn)dlsym(lib, name) : NULL;
    if (f == NULL) {
        fprintf(stderr, "gdr_count: %s not found\n", name);
        abort();
    }
    return f;
}

int gdr_copy_to_mapping(gdr_mh_t mh, void *map_d_ptr, const void *h_ptr, size_t size)
{
    static copy_fn f;
    if (f == NULL) f = lookup("gdr_copy_to_mapping");
    __atomic_add_fetch(&to_count, 1, __ATOMIC_RELAXED);
    return f(mh, map_d_ptr, h_ptr, size);
}

int gdr_copy_from_mapping(gdr_mh_t mh, void *h_ptr, const void *map_d_ptr, size_t size)
{
    static copy_fn f;
    if (f == NULL) f = lookup("gdr_copy_from_mapping");
    __atomic_add_fetch(&from_count, 1, __ATOMIC_RELAXED);
    return f(mh, h_ptr, (void *)map_d_ptr, size);
}

__attribute__((destructor)) static void report(void)
{
    fprintf(stderr, "GDRCOUNT to=%lu from=%lu\n", to_count, from_count);
}
