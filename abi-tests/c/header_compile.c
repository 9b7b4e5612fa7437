/*
 * header_compile.c - compile-only check of include/gdrapi.h and
 * include/gdrconfig.h. Built as C99, C11, C++11 and C++17 with -pedantic
 * -Wall -Wextra -Werror: the header must be clean in every one of them,
 * every prototype must have exactly gdrcopy 2.6's type (each is assigned to
 * a pointer of the expected type) and the macros must have 2.6's values.
 * Built with -DHC_MAIN it is also linked against the library, from C and
 * from C++, which proves every function is exported under its C name
 * (extern "C" in the header).
 */
#include "gdrapi.h"
#include "gdrapi.h" /* the include guard works */
#include "gdrconfig.h"

#if !defined(GDRAPI_X86) && !defined(GDRAPI_ARM64) && !defined(GDRAPI_POWER)
#error "gdrconfig.h defined no architecture"
#endif

/* A compile-time assertion usable in C99 as well as C++. */
#define HC_ASSERT(name, cond) typedef char hc_assert_##name[(cond) ? 1 : -1]

HC_ASSERT(major, GDR_API_MAJOR_VERSION == 2);
HC_ASSERT(minor, GDR_API_MINOR_VERSION == 6);
HC_ASSERT(version, GDR_API_VERSION == 0x20006);
HC_ASSERT(shift, MAJOR_VERSION_SHIFT == 16);
HC_ASSERT(mask, MINOR_VERSION_MASK == 0xFFFFu);
HC_ASSERT(min_major, MINIMUM_GDRDRV_MAJOR_VERSION == 2);
HC_ASSERT(min_minor, MINIMUM_GDRDRV_MINOR_VERSION == 0);
HC_ASSERT(min_version, MINIMUM_GDRDRV_VERSION == 0x20000);
HC_ASSERT(page_shift, GPU_PAGE_SHIFT == 16);
HC_ASSERT(page_size, GPU_PAGE_SIZE == 65536UL);
HC_ASSERT(page_offset, GPU_PAGE_OFFSET == 0xFFFFUL);
HC_ASSERT(page_mask, GPU_PAGE_MASK == ~0xFFFFUL);
HC_ASSERT(page_size_type, sizeof(GPU_PAGE_SIZE) == sizeof(unsigned long));
HC_ASSERT(mask_type, sizeof(MINOR_VERSION_MASK) == sizeof(uint32_t));
HC_ASSERT(mh_size, sizeof(gdr_mh_t) == sizeof(unsigned long));
HC_ASSERT(info_same, sizeof(gdr_info_t) == sizeof(gdr_info_v2_t));
HC_ASSERT(enum_max, GDR_MAPPING_TYPE_MAX == 4);
HC_ASSERT(attr_max, GDR_ATTR_MAX == 4);

/* Every function of the API, with the exact 2.6 type. */
struct hc_api {
    gdr_t (*open)(void);
    int (*close)(gdr_t);
    int (*pin_buffer)(gdr_t, unsigned long, size_t, uint64_t, uint32_t, gdr_mh_t *);
    int (*pin_buffer_v2)(gdr_t, unsigned long, size_t, uint32_t, gdr_mh_t *);
    int (*unpin_buffer)(gdr_t, gdr_mh_t);
    int (*get_callback_flag)(gdr_t, gdr_mh_t, int *);
    int (*get_info_v2)(gdr_t, gdr_mh_t, gdr_info_v2_t *);
    int (*get_info)(gdr_t, gdr_mh_t, gdr_info_t *);
    int (*map)(gdr_t, gdr_mh_t, void **, size_t);
    int (*map_v2)(gdr_t, gdr_mh_t, void **, size_t, int);
    int (*unmap)(gdr_t, gdr_mh_t, void *, size_t);
    int (*copy_to_mapping)(gdr_mh_t, void *, const void *, size_t);
    int (*copy_from_mapping)(gdr_mh_t, void *, const void *, size_t);
    int (*copy_to_mapped)(gdr_mh_t, void *, const void *, size_t);
    int (*copy_from_mapped)(gdr_mh_t, void *, const void *, size_t);
    void (*runtime_get_version)(int *, int *);
    int (*driver_get_version)(gdr_t, int *, int *);
    int (*get_attribute)(gdr_t, gdr_attr_t, int *);
    int (*get_mapping_type_string)(gdr_mapping_type_t, const char **);
};

extern const struct hc_api hc_api_table;
const struct hc_api hc_api_table = {
    gdr_open,
    gdr_close,
    gdr_pin_buffer,
    gdr_pin_buffer_v2,
    gdr_unpin_buffer,
    gdr_get_callback_flag,
    gdr_get_info_v2,
    gdr_get_info, /* the macro: resolves to gdr_get_info_v2 */
    gdr_map,
    gdr_map_v2,
    gdr_unmap,
    gdr_copy_to_mapping,
    gdr_copy_from_mapping,
    gdr_copy_to_mapped,
    gdr_copy_from_mapped,
    gdr_runtime_get_version,
    gdr_driver_get_version,
    gdr_get_attribute,
    gdr_get_mapping_type_string,
};

/* The enumerators and typedefs that callers name. */
extern int hc_use_names(void);
int hc_use_names(void)
{
    gdr_pin_flags_t pf = GDR_PIN_FLAG_FORCE_PCIE;
    gdr_map_flags_t mf = GDR_MAP_FLAG_REQ_DEVICE_MAPPING;
    gdr_mapping_type_t mt = GDR_MAPPING_TYPE_CACHING;
    gdr_attr_t at = GDR_ATTR_USING_DMA_BUF_MMAP;
    gdr_info_t info;
    gdr_mh_t mh;
    struct gdr *g = (gdr_t)0;
    info.mapped = 1;
    info.wc_mapping = 0;
    info.mapping_type = GDR_MAPPING_TYPE_WC;
    mh.h = 0;
    return (int)pf + (int)mf + (int)mt + (int)at + (int)info.mapped + (int)info.mapping_type +
           (int)mh.h + (g == 0) + GDR_PIN_FLAG_DEFAULT + GDR_MAP_FLAG_DEFAULT +
           GDR_MAP_FLAG_REQ_WC_MAPPING + GDR_MAP_FLAG_REQ_CACHE_MAPPING +
           GDR_MAPPING_TYPE_NONE + GDR_MAPPING_TYPE_DEVICE +
           GDR_ATTR_USE_PERSISTENT_MAPPING + GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE;
}

#ifdef HC_MAIN
int main(void)
{
    return hc_api_table.open == 0 || hc_use_names() == 0;
}
#endif
