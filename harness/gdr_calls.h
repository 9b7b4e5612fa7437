/*
 * gdr_calls.h - steps of the gdrapi.h API that the backend suites (abi-tests/dmabuf,
 * abi-tests/vulkan) take in most scenarios, each call checked with check.h. Header only;
 * include it after gdrapi.h.
 *
 *   pin_and_map(g, addr, size, flags, &mh, &info)
 *       Pins [addr, addr+size) with flags, maps all of the pinned range and fills mh and info
 *       (gdr_get_info_v2 after the map); returns the mapping, or NULL when a step failed (its
 *       check counted the failure, and nothing is left pinned).
 *   attribute_value(g, attr)
 *       gdr_get_attribute's value, or -100 - errno when it fails, so that one CHECK_EQ
 *       tells the two apart.
 */
#ifndef GDRAPI_GDR_CALLS_H
#define GDRAPI_GDR_CALLS_H

#include <stdint.h>
#include <string.h>

#include "check.h"

static inline void *pin_and_map(gdr_t g, unsigned long addr, size_t size, uint32_t flags,
                                gdr_mh_t *mh, gdr_info_t *info)
{
    memset(mh, 0, sizeof *mh);
    int r = gdr_pin_buffer_v2(g, addr, size, flags, mh);
    CHECK_EQ(r, 0);
    if (r)
        return NULL;
    CHECK_EQ(gdr_get_info_v2(g, *mh, info), 0);
    void *map = NULL;
    r = gdr_map(g, *mh, &map, info->mapped_size);
    CHECK_EQ(r, 0);
    if (r) {
        gdr_unpin_buffer(g, *mh);
        return NULL;
    }
    CHECK_EQ(gdr_get_info_v2(g, *mh, info), 0);
    return map;
}

static inline int attribute_value(gdr_t g, int attr)
{
    int v = -1;
    int r = gdr_get_attribute(g, (gdr_attr_t)attr, &v);
    return r == 0 ? v : -100 - r;
}

#endif
