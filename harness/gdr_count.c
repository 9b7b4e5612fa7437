/*
 * gdr_count.so: counts the calls of gdr_copy_to_mapping and gdr_copy_from_mapping that reach
 * libgdrapi.so.2, and of the pin, map, unmap and unpin calls (pin and map in both API
 * versions), and prints "GDRCOUNT to=N from=M pin=P map=Q unmap=R unpin=S" on stderr at exit,
 * to show which UCX runs move their data through our library and how often UCX registers
 * memory. Preloaded after the emulator; forwards every call to the libgdrapi.so.2 the process
 * loaded.
 *
 * make test-nccl builds the same file as a libgdrapi.so of its own (soname libgdrapi.so,
 * needing libgdrapi.so.2) put first on LD_LIBRARY_PATH: NCCL dlopens "libgdrapi.so" and takes
 * each function with dlsym on that handle, which a preloaded object cannot interpose
 * (abi-tests/nccl/README.md).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The functions are defined here with gdrapi.h's prototypes (a mismatch does not compile) and
 * forwarded through pointers of their own type. */
#include "gdrapi.h"

static unsigned long to_count, from_count, pin_count, map_count, unmap_count, unpin_count;

static void *lookup(const char *name)
{
    void *lib = dlopen("libgdrapi.so.2", RTLD_NOW | RTLD_NOLOAD);
    void *f = lib ? dlsym(lib, name) : NULL;
    if (f == NULL) {
        fprintf(stderr, "gdr_count: %s not found\n", name);
        abort();
    }
    return f;
}

int gdr_pin_buffer(gdr_t g, unsigned long addr, size_t size, uint64_t token, uint32_t va_space,
                   gdr_mh_t *handle)
{
    static __typeof__(&gdr_pin_buffer) f;
    if (f == NULL) f = (__typeof__(f))lookup("gdr_pin_buffer");
    __atomic_add_fetch(&pin_count, 1, __ATOMIC_RELAXED);
    return f(g, addr, size, token, va_space, handle);
}

/* UCX 1.22 pins with the 2.5 API. */
int gdr_pin_buffer_v2(gdr_t g, unsigned long addr, size_t size, uint32_t flags, gdr_mh_t *handle)
{
    static __typeof__(&gdr_pin_buffer_v2) f;
    if (f == NULL) f = (__typeof__(f))lookup("gdr_pin_buffer_v2");
    __atomic_add_fetch(&pin_count, 1, __ATOMIC_RELAXED);
    return f(g, addr, size, flags, handle);
}

int gdr_map_v2(gdr_t g, gdr_mh_t mh, void **va, size_t size, int flags)
{
    static __typeof__(&gdr_map_v2) f;
    if (f == NULL) f = (__typeof__(f))lookup("gdr_map_v2");
    __atomic_add_fetch(&map_count, 1, __ATOMIC_RELAXED);
    return f(g, mh, va, size, flags);
}

int gdr_map(gdr_t g, gdr_mh_t mh, void **va, size_t size)
{
    static __typeof__(&gdr_map) f;
    if (f == NULL) f = (__typeof__(f))lookup("gdr_map");
    __atomic_add_fetch(&map_count, 1, __ATOMIC_RELAXED);
    return f(g, mh, va, size);
}

int gdr_unmap(gdr_t g, gdr_mh_t mh, void *va, size_t size)
{
    static __typeof__(&gdr_unmap) f;
    if (f == NULL) f = (__typeof__(f))lookup("gdr_unmap");
    __atomic_add_fetch(&unmap_count, 1, __ATOMIC_RELAXED);
    return f(g, mh, va, size);
}

int gdr_unpin_buffer(gdr_t g, gdr_mh_t mh)
{
    static __typeof__(&gdr_unpin_buffer) f;
    if (f == NULL) f = (__typeof__(f))lookup("gdr_unpin_buffer");
    __atomic_add_fetch(&unpin_count, 1, __ATOMIC_RELAXED);
    return f(g, mh);
}

int gdr_copy_to_mapping(gdr_mh_t mh, void *map_d_ptr, const void *h_ptr, size_t size)
{
    static __typeof__(&gdr_copy_to_mapping) f;
    if (f == NULL) f = (__typeof__(f))lookup("gdr_copy_to_mapping");
    __atomic_add_fetch(&to_count, 1, __ATOMIC_RELAXED);
    return f(mh, map_d_ptr, h_ptr, size);
}

int gdr_copy_from_mapping(gdr_mh_t mh, void *h_ptr, const void *map_d_ptr, size_t size)
{
    static __typeof__(&gdr_copy_from_mapping) f;
    if (f == NULL) f = (__typeof__(f))lookup("gdr_copy_from_mapping");
    __atomic_add_fetch(&from_count, 1, __ATOMIC_RELAXED);
    return f(mh, h_ptr, map_d_ptr, size);
}

__attribute__((destructor)) static void report(void)
{
    fprintf(stderr, "GDRCOUNT to=%lu from=%lu pin=%lu map=%lu unmap=%lu unpin=%lu\n", to_count,
            from_count, pin_count, map_count, unmap_count, unpin_count);
}
