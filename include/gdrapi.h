/*
 * gdrapi.h - public C interface of libgdrapi.so.2 (gdrapi-rs).
 *
 * Source- and binary-compatible with the gdrcopy 2.6 user-space API: the same
 * macros, types, layouts and prototypes, so code written against gdrcopy 2.6
 * compiles and links against this library unchanged.
 *
 * Overview
 * --------
 * A process opens the library with gdr_open(), pins a range of GPU memory
 * with gdr_pin_buffer_v2(), maps the pinned range into its address space with
 * gdr_map_v2(), and then moves data between host memory and the mapping with
 * gdr_copy_to_mapping() / gdr_copy_from_mapping(). Teardown is the reverse:
 * gdr_unmap(), gdr_unpin_buffer(), gdr_close().
 *
 * Unless a function says otherwise it returns 0 on success or a positive
 * errno value (EINVAL, ENOMEM, ...) on failure; it never returns a negative
 * number.
 *
 * Thread safety
 * -------------
 * - Every function may be called concurrently from several threads, also on
 *   one and the same gdr_t and on the same handles.
 * - The copy functions take no lock; they only read the handle's state.
 * - Every gdr_t and gdr_mh_t is checked against the library's own records
 *   before it is used: NULL, stale (already closed / unpinned), forged and
 *   foreign (a handle of another gdr_t) values are rejected with EINVAL
 *   and never dereferenced.
 * - A gdr_t is bound to the process that opened it. Using it in a child after
 *   fork() fails with EACCES and touches no driver state.
 * - Unmapping or unpinning a mapping while another thread is still copying
 *   through it is a caller error: the copy may fault. The library cannot
 *   know when the caller's pointer arithmetic is done.
 *
 * This header is self-contained: it needs no CUDA header.
 */

#ifndef __GDRAPI_H__
#define __GDRAPI_H__

#include <stdint.h>
#include <stddef.h>
#include <stdarg.h>

/* ---------------------------------------------------------------------- */
/* Versions. A version is encoded as (major << 16) | minor.                */
/* The two GDR_API_*_VERSION lines are parsed by build scripts with awk:   */
/* keep them in the plain "#define NAME VALUE" form.                      */
/* ---------------------------------------------------------------------- */

#define MAJOR_VERSION_SHIFT     16
#define MINOR_VERSION_MASK      (((uint32_t)1 << MAJOR_VERSION_SHIFT) - 1)

#define GDR_API_MAJOR_VERSION    2
#define GDR_API_MINOR_VERSION    6
#define GDR_API_VERSION          ((GDR_API_MAJOR_VERSION << MAJOR_VERSION_SHIFT) | GDR_API_MINOR_VERSION)

/* Oldest gdrdrv kernel driver this library accepts. */
#define MINIMUM_GDRDRV_MAJOR_VERSION    2
#define MINIMUM_GDRDRV_MINOR_VERSION    0
#define MINIMUM_GDRDRV_VERSION          ((MINIMUM_GDRDRV_MAJOR_VERSION << MAJOR_VERSION_SHIFT) | MINIMUM_GDRDRV_MINOR_VERSION)

/* ---------------------------------------------------------------------- */
/* GPU pages: pins and mappings are done in units of 64 KiB.              */
/* ---------------------------------------------------------------------- */

#define GPU_PAGE_SHIFT   16
#define GPU_PAGE_SIZE    (1UL << GPU_PAGE_SHIFT)
#define GPU_PAGE_OFFSET  (GPU_PAGE_SIZE - 1)
#define GPU_PAGE_MASK    (~GPU_PAGE_OFFSET)

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------- */
/* Library instance                                                       */
/* ---------------------------------------------------------------------- */

/* Opaque library instance. */
struct gdr;
typedef struct gdr *gdr_t;

/*
 * Open the library: connect to the gdrdrv driver or, when that is not
 * available or GDRCOPY_USE_DMABUF_MMAP=1, to the CUDA driver's dma-buf
 * support. Returns NULL on failure (the reason is logged when
 * GDRCOPY_ENABLE_LOGGING is set). Prints nothing when logging is off.
 */
gdr_t gdr_open(void);

/*
 * Release an instance: every mapping and pin it still owns is released too.
 * Returns 0, or the first error met. The gdr_t is invalid afterwards.
 */
int gdr_close(gdr_t g);

/* ---------------------------------------------------------------------- */
/* Pinning                                                                */
/* ---------------------------------------------------------------------- */

/* Handle of one pinned range. Passed by value. A zero h is never valid. */
typedef struct gdr_mh_s {
    unsigned long h;
} gdr_mh_t;

/*
 * Pin [addr, addr + size) of GPU memory (addr is a CUdeviceptr). The driver
 * widens the range to whole GPU pages. p2p_token and va_space are only
 * forwarded to drivers older than 2.5. On success *handle is set.
 */
int gdr_pin_buffer(gdr_t g, unsigned long addr, size_t size, uint64_t p2p_token, uint32_t va_space, gdr_mh_t *handle);

/* Flags of gdr_pin_buffer_v2(). */
typedef enum gdr_pin_flags {
    GDR_PIN_FLAG_DEFAULT    = 0,
    GDR_PIN_FLAG_FORCE_PCIE = 1  /* map through PCIe BAR even on coherent platforms */
} gdr_pin_flags_t;

/* Like gdr_pin_buffer() with gdr_pin_flags_t flags instead of the tokens. */
int gdr_pin_buffer_v2(gdr_t g, unsigned long addr, size_t size, uint32_t flags, gdr_mh_t *handle);

/* Unpin; a mapping still live on the handle is removed first. */
int gdr_unpin_buffer(gdr_t g, gdr_mh_t handle);

/*
 * *flag becomes non-zero once the GPU memory behind the handle has been
 * freed and the pin invalidated (non-persistent mode).
 */
int gdr_get_callback_flag(gdr_t g, gdr_mh_t handle, int *flag);

/* ---------------------------------------------------------------------- */
/* Information                                                            */
/* ---------------------------------------------------------------------- */

/* How a mapping reaches GPU memory. */
typedef enum gdr_mapping_type {
    GDR_MAPPING_TYPE_NONE    = 0,  /* not mapped */
    GDR_MAPPING_TYPE_WC      = 1,  /* write-combining (PCIe BAR) */
    GDR_MAPPING_TYPE_CACHING = 2,  /* cached (coherent platforms) */
    GDR_MAPPING_TYPE_DEVICE  = 3,  /* device / uncached */
    GDR_MAPPING_TYPE_MAX           /* count of the above; not a type */
} gdr_mapping_type_t;

/* State of a pinned range. Size 48 on LP64. */
typedef struct gdr_info_v2 {
    uint64_t va;            /* GPU address of the start of the pinned, GPU-page aligned range */
    uint64_t mapped_size;   /* bytes pinned, a multiple of page_size */
    uint32_t page_size;     /* granule of the pin */
    uint64_t tm_cycles;     /* deprecated */
    uint32_t cycles_per_ms; /* deprecated */
    unsigned mapped:1;      /* a CPU mapping exists */
    unsigned wc_mapping:1;  /* that mapping is write-combining */
    gdr_mapping_type_t mapping_type;
} gdr_info_v2_t;

typedef gdr_info_v2_t gdr_info_t;

/*
 * Fill *info for the handle. Code compiled against this header calls
 * gdr_get_info_v2 through the macro below; the exported symbol gdr_get_info
 * keeps the older 40-byte layout (no mapping_type) for binaries built
 * against gdrcopy 2.3 and earlier.
 */
int gdr_get_info_v2(gdr_t g, gdr_mh_t handle, gdr_info_v2_t *info);

#define gdr_get_info gdr_get_info_v2

/* ---------------------------------------------------------------------- */
/* Mapping                                                                */
/* ---------------------------------------------------------------------- */

/* Same as gdr_map_v2() with GDR_MAP_FLAG_DEFAULT. */
int gdr_map(gdr_t g, gdr_mh_t handle, void **va, size_t size);

/* Requested mapping type of gdr_map_v2(). */
typedef enum gdr_map_flags {
    GDR_MAP_FLAG_DEFAULT            = 0,  /* whatever the platform gives */
    GDR_MAP_FLAG_REQ_WC_MAPPING     = 1,
    GDR_MAP_FLAG_REQ_CACHE_MAPPING  = 2,
    GDR_MAP_FLAG_REQ_DEVICE_MAPPING = 3
} gdr_map_flags_t;

/*
 * Map the pinned range into the process. *ptr_va receives the CPU address
 * of the start of the GPU-page aligned range (info.va); add
 * (addr - info.va) to reach the pinned address. One mapping per handle:
 * mapping a mapped handle gives EAGAIN. A type the platform cannot give
 * gives EINVAL or EOPNOTSUPP.
 */
int gdr_map_v2(gdr_t g, gdr_mh_t handle, void **ptr_va, size_t size, int flags);

/* Remove the mapping made by gdr_map*(); va and size must be those of the mapping. */
int gdr_unmap(gdr_t g, gdr_mh_t handle, void *va, size_t size);

/* ---------------------------------------------------------------------- */
/* Copies                                                                 */
/* ---------------------------------------------------------------------- */

/*
 * Copy size bytes between host memory and the mapping of handle.
 * [map_d_ptr, map_d_ptr + size) must lie inside the handle's mapping
 * (EINVAL otherwise; also EINVAL for an unmapped handle, even for size 0).
 * The copy is complete and visible when the function returns. No lock taken.
 */
int gdr_copy_to_mapping(gdr_mh_t handle, void *map_d_ptr, const void *h_ptr, size_t size);

int gdr_copy_from_mapping(gdr_mh_t handle, void *h_ptr, const void *map_d_ptr, size_t size);

/*
 * Aliases: the same functions under the names some callers use
 * (gdr_copy_to_mapped == gdr_copy_to_mapping,
 *  gdr_copy_from_mapped == gdr_copy_from_mapping).
 */
int gdr_copy_to_mapped(gdr_mh_t handle, void *map_d_ptr, const void *h_ptr, size_t size);

int gdr_copy_from_mapped(gdr_mh_t handle, void *h_ptr, const void *map_d_ptr, size_t size);

/* ---------------------------------------------------------------------- */
/* Versions and attributes                                                */
/* ---------------------------------------------------------------------- */

/* Version of this library: GDR_API_MAJOR_VERSION.GDR_API_MINOR_VERSION. */
void gdr_runtime_get_version(int *major, int *minor);

/* Version of the driver behind g. */
int gdr_driver_get_version(gdr_t g, int *major, int *minor);

/* Queries of gdr_get_attribute(). */
typedef enum gdr_attr {
    GDR_ATTR_USE_PERSISTENT_MAPPING      = 1,  /* pins survive cuMemFree until unpinned */
    GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE = 2,  /* GDR_PIN_FLAG_FORCE_PCIE is honoured */
    GDR_ATTR_USING_DMA_BUF_MMAP          = 3,  /* the dma-buf backend is in use */
    GDR_ATTR_MAX
} gdr_attr_t;

/* *v is set to 0 first, then to the attribute's value; EINVAL for an unknown attr. */
int gdr_get_attribute(gdr_t g, gdr_attr_t attr, int *v);

/* *pstr receives a static, human-readable name; EINVAL for an unknown type. */
int gdr_get_mapping_type_string(gdr_mapping_type_t mapping_type, const char **pstr);

#ifdef __cplusplus
}
#endif

#endif /* __GDRAPI_H__ */
