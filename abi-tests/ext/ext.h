/*
 * ext.h - helpers of the gdrapi_ext.h test programs: fences, the emulator's counters (when the
 * emulator is the CUDA driver), the device-side checks through CUDA.
 */
#ifndef GDRAPI_EXT_TEST_H
#define GDRAPI_EXT_TEST_H

#define _GNU_SOURCE
#include <cuda.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "gdrapi_ext.h"
#include "gdrsim.h"

/* REQUIRE for a function returning void: report and leave it. */
#define REQUIRE_V(cond)                                                                  \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            check_report(0, __FILE__, __LINE__, "precondition: " #cond);                 \
            return;                                                                      \
        }                                                                                \
    } while (0)

#define KIB (1UL << 10)
#define MIB (1UL << 20)

/* The store fence to issue after plain stores through a write-combining mapping, before the
 * store that tells the GPU (gdrapi_ext.h, Ordering). */
static inline void store_fence(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_sfence();
#elif defined(__aarch64__)
    __asm__ volatile("dmb oshst" ::: "memory");
#else
    __sync_synchronize();
#endif
}

/* The load fence between reading a flag and reading the data it announces. */
static inline void load_fence(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_lfence();
#elif defined(__aarch64__)
    __asm__ volatile("dmb oshld" ::: "memory");
#else
    __sync_synchronize();
#endif
}

/* What the emulator counts that a closed allocator must have given back (0 on a GPU). */
struct left {
    uint64_t pins, mappings, allocations, files, dmabufs, vk;
};

static inline struct left counted(void)
{
    struct left l;
    memset(&l, 0, sizeof(l));
    if (!gdrsim_present())
        return l;
    struct gdrsim_counters c;
    memset(&c, 0, sizeof(c));
    gdrsim_get_counters(&c, sizeof(c));
    l.pins = c.live_pins;
    l.mappings = c.live_mappings;
    l.allocations = c.live_allocations;
    l.files = c.open_files;
    l.dmabufs = c.live_dmabufs;
    l.vk = c.live_vmm_exports + c.live_vk_imports + c.live_vk_mappings + c.live_vk_devices +
           c.live_vk_instances;
    return l;
}

/* Whether `now` counts nothing more than `before`; prints the difference when not. */
static inline int nothing_left(const char *where, struct left before, struct left now)
{
    if (memcmp(&before, &now, sizeof(now)) == 0)
        return 1;
    printf("%s: left behind: pins %lld, mappings %lld, allocations %lld, files %lld, dma-bufs %lld, "
           "vulkan objects %lld\n",
           where, (long long)(now.pins - before.pins), (long long)(now.mappings - before.mappings),
           (long long)(now.allocations - before.allocations), (long long)(now.files - before.files),
           (long long)(now.dmabufs - before.dmabufs), (long long)(now.vk - before.vk));
    return 0;
}

/* The 8 bytes at device address `dev`, read by the GPU's copy engine (cuMemcpyDtoH). */
static inline uint64_t gpu_read64(unsigned long long dev)
{
    uint64_t v = 0;
    CUresult r = cuMemcpyDtoH(&v, (CUdeviceptr)dev, sizeof(v));
    if (r != CUDA_SUCCESS)
        printf("cuMemcpyDtoH(%#llx): CUDA error %d\n", dev, (int)r);
    return v;
}

/* The value flag i holds in round `round`. */
static inline uint64_t pattern(unsigned i, unsigned round)
{
    uint64_t v = (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ULL;
    return v ^ ((uint64_t)round << 56) ^ round;
}

#endif
