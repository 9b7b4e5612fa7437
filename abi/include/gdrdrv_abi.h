/*
 * gdrdrv_abi.h - the user-space ABI of NVIDIA's gdrdrv kernel driver (gdrcopy 2.6) as this
 * project's C programs speak it: the ioctl request values, their parameter structs, and the
 * constants that go into or come out of them. Written from the facts of the driver's interface
 * (the reference notes, part A.2), not copied from its header. The Rust declarations, which the
 * library, the emulator and the doctor use, are abi/src/gdrdrv.rs; abi/tests/gdrdrv_header.rs
 * compiles this header with a static assertion of each of their request values, struct sizes,
 * field offsets and constants. Used by the emulator's C cases (gdrsim/tests/c/sim.h) and
 * real-VRAM checks (gdrsim/tests/vkreal.c), which drive the device with raw ioctls.
 *
 * Every request is declared as the driver declares it, with _IOWR, and the header checks at
 * compile time what that gives: type 0xDA, the number, read-write, the encoded size (8 where
 * the driver put a pointer type inside _IOWR, so the size is the pointer's, not the struct's),
 * and on the LP64 architectures with the generic encoding (x86-64, aarch64) the request value
 * itself, as a number. A request, a struct layout or a constant that disagrees with the driver
 * fails the build of every program that includes this header.
 *
 * The driver copies the whole struct in and back for every request, whatever size the request
 * encodes. The mmap offset of a pin is its handle times the host page size
 * (GDRDRV_MMAP_OFFSET).
 */
#ifndef GDRAPI_GDRDRV_ABI_H
#define GDRAPI_GDRDRV_ABI_H

#include <linux/ioctl.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define GDRDRV_STATIC_ASSERT static_assert
#else
#define GDRDRV_STATIC_ASSERT _Static_assert
#endif

/* ---- the device and versions ---- */

#define GDRDRV_DEVICE_PATH "/dev/gdrdrv"

/* ioctl type of every request. */
#define GDRDRV_IOCTL_TYPE 0xDA

/* A version word: major << 16 | minor. */
#define GDRDRV_VERSION(major, minor) (((uint32_t)(major) << 16) | (uint32_t)(minor))
#define GDRDRV_VERSION_MAJOR(word) ((uint32_t)(word) >> 16)
#define GDRDRV_VERSION_MINOR(word) ((uint32_t)(word) & 0xffffu)

/* What GET_VERSION reports for gdrdrv 2.6, and the oldest library it accepts. */
#define GDRDRV_DRIVER_VERSION_2_6 GDRDRV_VERSION(2, 6)
#define GDRDRV_MINIMUM_GDR_API_VERSION GDRDRV_VERSION(2, 0)

/* The driver version that introduced a request (older drivers answer it with ENOTTY). */
#define GDRDRV_MINIMUM_VERSION_WITH_GET_INFO_V2 GDRDRV_VERSION(2, 4)
#define GDRDRV_MINIMUM_VERSION_WITH_GET_ATTR GDRDRV_VERSION(2, 5)
#define GDRDRV_MINIMUM_VERSION_WITH_PIN_BUFFER_V2 GDRDRV_VERSION(2, 5)
#define GDRDRV_MINIMUM_VERSION_WITH_REQ_MAPPING_TYPE GDRDRV_VERSION(2, 5)

/* ---- constants of the parameters ---- */

/* GPU pages: pins are rounded to them. */
#define GDRDRV_GPU_PAGE_SHIFT 16
#define GDRDRV_GPU_PAGE_SIZE (1UL << GDRDRV_GPU_PAGE_SHIFT)

/* Mapping types (GET_INFO_V2's mapping_type, REQ_MAPPING_TYPE's request). */
#define GDRDRV_MR_NONE 0
#define GDRDRV_MR_WC 1
#define GDRDRV_MR_CACHING 2
#define GDRDRV_MR_DEVICE 3

/* PIN_BUFFER_V2 flags. */
#define GDRDRV_PIN_FLAG_DEFAULT 0
#define GDRDRV_PIN_FLAG_FORCE_PCIE 1

/* GET_ATTR attributes. */
#define GDRDRV_ATTR_USE_PERSISTENT_MAPPING 1
#define GDRDRV_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE 2

/* The mmap offset of a pin: its handle in host pages. */
#define GDRDRV_MMAP_OFFSET(handle, host_page_shift) ((uint64_t)(handle) << (host_page_shift))

/* ---- the parameter structs (natural alignment; "in" read by the driver, "out" written) ---- */

struct gdrdrv_pin_buffer_params {
    uint64_t addr;      /* in */
    uint64_t size;      /* in */
    uint64_t p2p_token; /* in */
    uint32_t va_space;  /* in */
    uint32_t pad;
    uint64_t handle;    /* out */
};

struct gdrdrv_unpin_buffer_params {
    uint64_t handle; /* in */
};

struct gdrdrv_get_cb_flag_params {
    uint64_t handle; /* in */
    uint32_t flag;   /* out: 1 once the invalidation callback ran */
    uint32_t pad;
};

struct gdrdrv_get_info_params {
    uint64_t handle;      /* in */
    uint64_t va;          /* out: start of the pinned (rounded) range */
    uint64_t mapped_size; /* out */
    uint32_t page_size;   /* out */
    uint32_t tsc_khz;     /* out */
    uint64_t tm_cycles;   /* out */
    uint32_t mapped;      /* out: 0 or 1 */
    uint32_t wc_mapping;  /* out: 1 when mapped write-combining */
};

struct gdrdrv_get_info_v2_params {
    uint64_t handle;       /* in */
    uint64_t va;           /* out */
    uint64_t mapped_size;  /* out */
    uint32_t page_size;    /* out */
    uint32_t tsc_khz;      /* out */
    uint64_t tm_cycles;    /* out */
    uint32_t mapping_type; /* out: the current GDRDRV_MR_* */
    uint32_t pad;
};

struct gdrdrv_get_attr_params {
    uint32_t attr; /* in: GDRDRV_ATTR_* */
    uint32_t val;  /* out */
};

struct gdrdrv_pin_buffer_v2_params {
    uint64_t addr;   /* in */
    uint64_t size;   /* in */
    uint32_t flags;  /* in: GDRDRV_PIN_FLAG_* */
    uint32_t pad;    /* in, ignored */
    uint64_t handle; /* out */
};

struct gdrdrv_req_mapping_type_params {
    uint64_t handle;       /* in */
    uint32_t mapping_type; /* in: GDRDRV_MR_* */
    uint32_t pad;
};

struct gdrdrv_get_version_params {
    uint32_t gdrdrv_version;          /* out */
    uint32_t minimum_gdr_api_version; /* out */
};

/* ---- the requests, declared as the driver declares them ---- */

#define GDRDRV_IOC_PIN_BUFFER _IOWR(GDRDRV_IOCTL_TYPE, 1, struct gdrdrv_pin_buffer_params)
#define GDRDRV_IOC_UNPIN_BUFFER _IOWR(GDRDRV_IOCTL_TYPE, 2, struct gdrdrv_unpin_buffer_params *)
#define GDRDRV_IOC_GET_CB_FLAG _IOWR(GDRDRV_IOCTL_TYPE, 3, struct gdrdrv_get_cb_flag_params *)
#define GDRDRV_IOC_GET_INFO _IOWR(GDRDRV_IOCTL_TYPE, 4, struct gdrdrv_get_info_params *)
#define GDRDRV_IOC_GET_INFO_V2 _IOWR(GDRDRV_IOCTL_TYPE, 5, struct gdrdrv_get_info_v2_params *)
#define GDRDRV_IOC_GET_ATTR _IOWR(GDRDRV_IOCTL_TYPE, 6, struct gdrdrv_get_attr_params *)
#define GDRDRV_IOC_PIN_BUFFER_V2 _IOWR(GDRDRV_IOCTL_TYPE, 7, struct gdrdrv_pin_buffer_v2_params)
#define GDRDRV_IOC_REQ_MAPPING_TYPE _IOWR(GDRDRV_IOCTL_TYPE, 8, struct gdrdrv_req_mapping_type_params *)
#define GDRDRV_IOC_GET_VERSION _IOWR(GDRDRV_IOCTL_TYPE, 255, struct gdrdrv_get_version_params *)

/* ---- the checks ---- */

GDRDRV_STATIC_ASSERT(sizeof(void *) == 8, "gdrdrv's ABI is the one of 64-bit processes");

/* Layouts: sizes and offsets. */
#define GDRDRV_CHECK_FIELD(s, f, off) \
    GDRDRV_STATIC_ASSERT(offsetof(struct s, f) == (off), #s "." #f " at offset " #off)
#define GDRDRV_CHECK_SIZE(s, n) GDRDRV_STATIC_ASSERT(sizeof(struct s) == (n), #s " is " #n " bytes")

GDRDRV_CHECK_SIZE(gdrdrv_pin_buffer_params, 40);
GDRDRV_CHECK_FIELD(gdrdrv_pin_buffer_params, addr, 0);
GDRDRV_CHECK_FIELD(gdrdrv_pin_buffer_params, size, 8);
GDRDRV_CHECK_FIELD(gdrdrv_pin_buffer_params, p2p_token, 16);
GDRDRV_CHECK_FIELD(gdrdrv_pin_buffer_params, va_space, 24);
GDRDRV_CHECK_FIELD(gdrdrv_pin_buffer_params, handle, 32);
GDRDRV_CHECK_SIZE(gdrdrv_unpin_buffer_params, 8);
GDRDRV_CHECK_SIZE(gdrdrv_get_cb_flag_params, 16);
GDRDRV_CHECK_FIELD(gdrdrv_get_cb_flag_params, flag, 8);
GDRDRV_CHECK_SIZE(gdrdrv_get_info_params, 48);
GDRDRV_CHECK_FIELD(gdrdrv_get_info_params, va, 8);
GDRDRV_CHECK_FIELD(gdrdrv_get_info_params, mapped_size, 16);
GDRDRV_CHECK_FIELD(gdrdrv_get_info_params, page_size, 24);
GDRDRV_CHECK_FIELD(gdrdrv_get_info_params, tsc_khz, 28);
GDRDRV_CHECK_FIELD(gdrdrv_get_info_params, tm_cycles, 32);
GDRDRV_CHECK_FIELD(gdrdrv_get_info_params, mapped, 40);
GDRDRV_CHECK_FIELD(gdrdrv_get_info_params, wc_mapping, 44);
GDRDRV_CHECK_SIZE(gdrdrv_get_info_v2_params, 48);
GDRDRV_CHECK_FIELD(gdrdrv_get_info_v2_params, va, 8);
GDRDRV_CHECK_FIELD(gdrdrv_get_info_v2_params, mapped_size, 16);
GDRDRV_CHECK_FIELD(gdrdrv_get_info_v2_params, page_size, 24);
GDRDRV_CHECK_FIELD(gdrdrv_get_info_v2_params, tsc_khz, 28);
GDRDRV_CHECK_FIELD(gdrdrv_get_info_v2_params, tm_cycles, 32);
GDRDRV_CHECK_FIELD(gdrdrv_get_info_v2_params, mapping_type, 40);
GDRDRV_CHECK_SIZE(gdrdrv_get_attr_params, 8);
GDRDRV_CHECK_FIELD(gdrdrv_get_attr_params, val, 4);
GDRDRV_CHECK_SIZE(gdrdrv_pin_buffer_v2_params, 32);
GDRDRV_CHECK_FIELD(gdrdrv_pin_buffer_v2_params, size, 8);
GDRDRV_CHECK_FIELD(gdrdrv_pin_buffer_v2_params, flags, 16);
GDRDRV_CHECK_FIELD(gdrdrv_pin_buffer_v2_params, handle, 24);
GDRDRV_CHECK_SIZE(gdrdrv_req_mapping_type_params, 16);
GDRDRV_CHECK_FIELD(gdrdrv_req_mapping_type_params, mapping_type, 8);
GDRDRV_CHECK_SIZE(gdrdrv_get_version_params, 8);
GDRDRV_CHECK_FIELD(gdrdrv_get_version_params, minimum_gdr_api_version, 4);

/* Requests: type, number, direction and encoded size, on every architecture. */
#define GDRDRV_CHECK_REQUEST(req, nr, size)                                                   \
    GDRDRV_STATIC_ASSERT(_IOC_TYPE(req) == GDRDRV_IOCTL_TYPE && _IOC_NR(req) == (nr) &&        \
                             _IOC_DIR(req) == (_IOC_READ | _IOC_WRITE) && _IOC_SIZE(req) == (size), \
                         #req ": type 0xDA, number " #nr ", read-write, size " #size)

GDRDRV_CHECK_REQUEST(GDRDRV_IOC_PIN_BUFFER, 1, 40);
GDRDRV_CHECK_REQUEST(GDRDRV_IOC_UNPIN_BUFFER, 2, 8);
GDRDRV_CHECK_REQUEST(GDRDRV_IOC_GET_CB_FLAG, 3, 8);
GDRDRV_CHECK_REQUEST(GDRDRV_IOC_GET_INFO, 4, 8);
GDRDRV_CHECK_REQUEST(GDRDRV_IOC_GET_INFO_V2, 5, 8);
GDRDRV_CHECK_REQUEST(GDRDRV_IOC_GET_ATTR, 6, 8);
GDRDRV_CHECK_REQUEST(GDRDRV_IOC_PIN_BUFFER_V2, 7, 32);
GDRDRV_CHECK_REQUEST(GDRDRV_IOC_REQ_MAPPING_TYPE, 8, 8);
GDRDRV_CHECK_REQUEST(GDRDRV_IOC_GET_VERSION, 255, 8);

/* The values themselves, where the encoding is the generic one (dir << 30 | size << 16 |
 * type << 8 | nr) and pointers are 8 bytes: the numbers the reference's table gives. */
#if (defined(__x86_64__) || defined(__aarch64__)) && defined(__LP64__)
GDRDRV_STATIC_ASSERT(GDRDRV_IOC_PIN_BUFFER == 0xC028DA01UL, "PIN_BUFFER is 0xC028DA01");
GDRDRV_STATIC_ASSERT(GDRDRV_IOC_UNPIN_BUFFER == 0xC008DA02UL, "UNPIN_BUFFER is 0xC008DA02");
GDRDRV_STATIC_ASSERT(GDRDRV_IOC_GET_CB_FLAG == 0xC008DA03UL, "GET_CB_FLAG is 0xC008DA03");
GDRDRV_STATIC_ASSERT(GDRDRV_IOC_GET_INFO == 0xC008DA04UL, "GET_INFO is 0xC008DA04");
GDRDRV_STATIC_ASSERT(GDRDRV_IOC_GET_INFO_V2 == 0xC008DA05UL, "GET_INFO_V2 is 0xC008DA05");
GDRDRV_STATIC_ASSERT(GDRDRV_IOC_GET_ATTR == 0xC008DA06UL, "GET_ATTR is 0xC008DA06");
GDRDRV_STATIC_ASSERT(GDRDRV_IOC_PIN_BUFFER_V2 == 0xC020DA07UL, "PIN_BUFFER_V2 is 0xC020DA07");
GDRDRV_STATIC_ASSERT(GDRDRV_IOC_REQ_MAPPING_TYPE == 0xC008DA08UL, "REQ_MAPPING_TYPE is 0xC008DA08");
GDRDRV_STATIC_ASSERT(GDRDRV_IOC_GET_VERSION == 0xC008DAFFUL, "GET_VERSION is 0xC008DAFF");
#endif

/* Constants. */
GDRDRV_STATIC_ASSERT(GDRDRV_DRIVER_VERSION_2_6 == 0x00020006u, "gdrdrv 2.6 reports 0x00020006");
GDRDRV_STATIC_ASSERT(GDRDRV_MINIMUM_GDR_API_VERSION == 0x00020000u, "the oldest library is 2.0");
GDRDRV_STATIC_ASSERT(GDRDRV_GPU_PAGE_SIZE == 65536, "GPU pages are 64 KiB");

#undef GDRDRV_CHECK_FIELD
#undef GDRDRV_CHECK_SIZE
#undef GDRDRV_CHECK_REQUEST

#endif
