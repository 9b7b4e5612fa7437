/*
 * gdrsim.h: test interface of the gdrdrv / CUDA driver emulator (libcuda.so.1 built from
 * gdrsim). Programs running on the emulator may call these to read its counters
 * and to inject faults at run time. See gdrsim/README.md.
 *
 * The functions are declared weak: a program built against the emulator also runs over a real
 * CUDA driver (make test-gpu), where they are NULL; gdrsim_present() tells which.
 */
#ifndef GDRSIM_H
#define GDRSIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct gdrsim_counters {
    uint64_t live_pins;        /* pinned regions of device files this process opened */
    uint64_t live_mappings;    /* CPU mappings of the device not yet munmapped */
    uint64_t live_allocations; /* cuMemAlloc allocations + unreleased cuMemCreate handles */
    uint64_t open_files;       /* device files this process opened, not yet released */
    uint64_t ioctls;           /* ioctls that reached the emulated driver (any process) */
    uint64_t live_dmabufs;     /* dma-buf fds from cuMemGetHandleForAddressRange not closed */
    /* appended fields (older callers pass a smaller size and get the fields above) */
    uint64_t live_vmm_exports;  /* fds from cuMemExportToShareableHandle not closed or imported */
    uint64_t live_vk_imports;   /* Vulkan stand-in memory objects not freed */
    uint64_t live_vk_mappings;  /* Vulkan stand-in vkMapMemory mappings not unmapped */
    uint64_t live_vk_devices;   /* Vulkan stand-in VkDevices not destroyed */
    uint64_t live_vk_instances; /* Vulkan stand-in VkInstances not destroyed */
    uint64_t vk_imports_made;   /* Vulkan stand-in imports this process made: a running total */
    uint64_t live_vk_import_bytes; /* bytes its live imports hold, each at its allocation's size */
    uint64_t injected_faults;   /* calls a GDRSIM_FAIL rule failed, since the process started */
};

/* Copies min(out_size, sizeof(struct gdrsim_counters)) bytes of the current counters to
 * out. Returns 0 (EINVAL if out is NULL). */
int gdrsim_get_counters(struct gdrsim_counters *out, size_t out_size) __attribute__((weak));

/* Replaces the fault-injection spec (same syntax as GDRSIM_FAIL: comma-separated
 * NAME:N:ERR). NULL or "" clears it. Returns 0, or EINVAL for a bad spec (the previous
 * spec then stays in force). */
int gdrsim_set_fail(const char *spec) __attribute__((weak));

/* BAR1: its size (GDRSIM_BAR1_SIZE), the bytes in use (GDRSIM_BAR1_RESERVED plus this
 * process's live pins, dma-buf exports and the allocations its Vulkan stand-in imports hold,
 * each once) and the VRAM size. Returns 0, or -1 for a NULL pointer. */
int gdrsim_bar1_info(uint64_t *bar1_total, uint64_t *bar1_used, uint64_t *vram_total)
    __attribute__((weak));

/* Whether the emulator is the CUDA driver of this process (its test interface is there). */
static inline int gdrsim_present(void)
{
    return gdrsim_get_counters != NULL;
}

#ifdef __cplusplus
}
#endif

#endif /* GDRSIM_H */
