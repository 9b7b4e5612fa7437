/*
 * header_compile.c - gdrapi_ext.h compiles without a warning as C99, C11, C++11 and C++17 with
 * -pedantic, alone and after gdrapi.h, twice (include guard); every function has the type
 * written here; the constants have their documented values. With HC_MAIN it is a program
 * linked against the library, so that every function resolves under its C name.
 */
#include "gdrapi_ext.h"
#include "gdrapi_ext.h"
#include "gdrapi.h"

#if GDRX_API_MAJOR_VERSION != 0 || GDRX_API_MINOR_VERSION != 1
#error "version"
#endif
#if GDRX_MIN_ALIGNMENT != 64 || GDRX_MAX_ALIGNMENT != 65536
#error "alignment"
#endif
#if GDRX_BACKEND_GDRDRV != 0 || GDRX_BACKEND_DMABUF != 1 || GDRX_BACKEND_VULKAN != 2
#error "backends"
#endif

typedef char hc_mem_size[sizeof(gdrx_mem_t) == 32 ? 1 : -1];
typedef char hc_info_size[sizeof(gdrx_info_t) == 96 ? 1 : -1];

void (*hc_version)(int *, int *) = gdrx_runtime_get_version;
int (*hc_open)(gdrx_t *, int, unsigned int) = gdrx_open;
int (*hc_close)(gdrx_t) = gdrx_close;
int (*hc_alloc)(gdrx_t, size_t, size_t, gdrx_mem_t *) = gdrx_alloc;
int (*hc_free)(gdrx_t, const gdrx_mem_t *) = gdrx_free;
int (*hc_copy_to)(const gdrx_mem_t *, size_t, const void *, size_t) = gdrx_copy_to;
int (*hc_copy_from)(const gdrx_mem_t *, size_t, void *, size_t) = gdrx_copy_from;
int (*hc_lookup)(gdrx_t, unsigned long long, gdrx_mem_t *, size_t *) = gdrx_lookup;
int (*hc_info)(gdrx_t, gdrx_info_t *) = gdrx_info;

#ifdef HC_MAIN
int main(void)
{
    int major = -1, minor = -1;
    hc_version(&major, &minor);
    return major == GDRX_API_MAJOR_VERSION && minor == GDRX_API_MINOR_VERSION ? 0 : 1;
}
#endif
