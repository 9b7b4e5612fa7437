/*
 * layout.c - every public type of gdrapi.h has gdrcopy 2.6's size, alignment,
 * field offsets and enum values (LP64). The sizes and offsets are checked at
 * compile time; the bit positions of the two bitfields, which C cannot
 * express as constants, are measured at run time through a byte view.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "gdrapi.h"

#define LAYOUT(cond) _Static_assert(cond, #cond)

LAYOUT(sizeof(void *) == 8);
LAYOUT(sizeof(gdr_t) == 8);
LAYOUT(sizeof(gdr_mh_t) == 8 && _Alignof(gdr_mh_t) == 8);
LAYOUT(offsetof(gdr_mh_t, h) == 0);

LAYOUT(sizeof(gdr_info_v2_t) == 48 && _Alignof(gdr_info_v2_t) == 8);
LAYOUT(offsetof(gdr_info_v2_t, va) == 0);
LAYOUT(offsetof(gdr_info_v2_t, mapped_size) == 8);
LAYOUT(offsetof(gdr_info_v2_t, page_size) == 16);
LAYOUT(offsetof(gdr_info_v2_t, tm_cycles) == 24);
LAYOUT(offsetof(gdr_info_v2_t, cycles_per_ms) == 32);
LAYOUT(offsetof(gdr_info_v2_t, mapping_type) == 40);
LAYOUT(sizeof(gdr_info_t) == 48);

LAYOUT(sizeof(gdr_pin_flags_t) == 4);
LAYOUT(sizeof(gdr_mapping_type_t) == 4);
LAYOUT(sizeof(gdr_map_flags_t) == 4);
LAYOUT(sizeof(gdr_attr_t) == 4);

LAYOUT(GDR_PIN_FLAG_DEFAULT == 0 && GDR_PIN_FLAG_FORCE_PCIE == 1);
LAYOUT(GDR_MAPPING_TYPE_NONE == 0 && GDR_MAPPING_TYPE_WC == 1);
LAYOUT(GDR_MAPPING_TYPE_CACHING == 2 && GDR_MAPPING_TYPE_DEVICE == 3);
LAYOUT(GDR_MAPPING_TYPE_MAX == 4);
LAYOUT(GDR_MAP_FLAG_DEFAULT == 0 && GDR_MAP_FLAG_REQ_WC_MAPPING == 1);
LAYOUT(GDR_MAP_FLAG_REQ_CACHE_MAPPING == 2 && GDR_MAP_FLAG_REQ_DEVICE_MAPPING == 3);
LAYOUT(GDR_ATTR_USE_PERSISTENT_MAPPING == 1 && GDR_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE == 2);
LAYOUT(GDR_ATTR_USING_DMA_BUF_MMAP == 3 && GDR_ATTR_MAX == 4);

LAYOUT(GDR_API_VERSION == 131078);
LAYOUT(MINIMUM_GDRDRV_VERSION == 0x20000);
LAYOUT(GPU_PAGE_SIZE == 65536UL && GPU_PAGE_MASK == 0xFFFFFFFFFFFF0000UL);

union info_bytes {
    gdr_info_v2_t info;
    unsigned char bytes[sizeof(gdr_info_v2_t)];
};

/* Byte index and mask of the single bit that setting one bitfield changes. */
static void bit_of(int wc, int *byte, int *mask)
{
    union info_bytes u;
    size_t i;
    memset(&u, 0, sizeof(u));
    if (wc)
        u.info.wc_mapping = 1;
    else
        u.info.mapped = 1;
    *byte = -1;
    *mask = 0;
    for (i = 0; i < sizeof(u.bytes); i++) {
        if (u.bytes[i]) {
            CHECK(*byte == -1); /* exactly one byte changes */
            *byte = (int)i;
            *mask = u.bytes[i];
        }
    }
}

int main(void)
{
    int byte, mask;
    union info_bytes u;

    bit_of(0, &byte, &mask);
    CHECK_EQ(byte, 36);
    CHECK_EQ(mask, 0x01);
    bit_of(1, &byte, &mask);
    CHECK_EQ(byte, 36);
    CHECK_EQ(mask, 0x02);

    /* The fields before and after the bitfield unit keep their bytes. */
    memset(&u, 0, sizeof(u));
    u.info.cycles_per_ms = 0xFFFFFFFFu;
    u.info.mapping_type = (gdr_mapping_type_t)0x7FFFFFFF;
    CHECK_EQ(u.bytes[36], 0);
    u.info.mapped = 1;
    u.info.wc_mapping = 1;
    CHECK_EQ(u.bytes[36], 0x03);
    CHECK_EQ(u.bytes[35], 0xFF);
    CHECK_EQ(u.bytes[40], 0xFF);

    /* The same numbers at run time, so the tally shows them. */
    CHECK_EQ(sizeof(gdr_info_v2_t), 48);
    CHECK_EQ(offsetof(gdr_info_v2_t, mapping_type), 40);
    CHECK_EQ(sizeof(gdr_mh_t), 8);
    CHECK_EQ(GDR_API_VERSION, 0x20006);
    CHECK_EQ(GPU_PAGE_MASK, 0xFFFFFFFFFFFF0000UL);

    return check_done("layout");
}
