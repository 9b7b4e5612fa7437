/* Shared declarations of the emulator's test program: gdrdrv's ABI as a client sees it,
 * shorthands for driver and CUDA calls, the settings the suite runs under, and the cases. */
#ifndef SIM_H
#define SIM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "gdrsim.h"
#include "harness.h"

/* The C library's fortified open entry points (called by _FORTIFY_SOURCE builds). */
extern int __open_2(const char *, int);
extern int __open64_2(const char *, int);
extern int __openat_2(int, const char *, int);
extern int __openat64_2(int, const char *, int);

/* gdrdrv's request values (x86-64/aarch64) and parameter layouts. */
#define IOC_PIN_BUFFER 0xC028DA01UL
#define IOC_UNPIN_BUFFER 0xC008DA02UL
#define IOC_GET_CB_FLAG 0xC008DA03UL
#define IOC_GET_INFO 0xC008DA04UL
#define IOC_GET_INFO_V2 0xC008DA05UL
#define IOC_GET_ATTR 0xC008DA06UL
#define IOC_PIN_BUFFER_V2 0xC020DA07UL
#define IOC_REQ_MAPPING_TYPE 0xC008DA08UL
#define IOC_GET_VERSION 0xC008DAFFUL

struct pin_v1 { uint64_t addr, size, p2p_token; uint32_t va_space, pad; uint64_t handle; };
struct pin_v2 { uint64_t addr, size; uint32_t flags, pad; uint64_t handle; };
struct cb_flag { uint64_t handle; uint32_t flag, pad; };
struct info {
    uint64_t handle, va, mapped_size;
    uint32_t page_size, tsc_khz;
    uint64_t tm_cycles;
    uint32_t mapped_or_type, wc;
};
struct attr { uint32_t attr, val; };
struct req { uint64_t handle; uint32_t type, pad; };
struct version { uint32_t version, min_api; };

enum { MR_NONE, MR_WC, MR_CACHING, MR_DEVICE };
#define GPU_PAGE 0x10000UL
#define CHUNK 0x200000UL
#define PAGE_SHIFT 12

/* ---- shorthands (sim_util.c) ---- */

int env_is(const char *name, const char *value);
int driver_minor(void);
int persistent(void);
int coherent(void);
int device_blocked(void);
int xioctl(int fd, unsigned long req, void *arg);
int dev_open(void);
int pin(int fd, uint64_t addr, uint64_t size, uint32_t flags, uint64_t *h);
int pin_v1(int fd, uint64_t addr, uint64_t size, uint64_t token, uint32_t vas, uint64_t *h);
int unpin(int fd, uint64_t h);
int info_v2(int fd, uint64_t h, struct info *i);
int info_v1(int fd, uint64_t h, struct info *i);
int req_type(int fd, uint64_t h, uint32_t t);
int cb(int fd, uint64_t h, uint32_t *flag);
void *map(int fd, uint64_t h, size_t len);
struct gdrsim_counters counters(void);
void cuda_up(void);
CUdeviceptr dalloc(size_t size);
CUdeviceptr dalloc_aligned(size_t size, CUdeviceptr *raw);

#define CU(call) CHECK_EQ((call), CUDA_SUCCESS)

#define SKIP_IF(cond)          \
    do {                       \
        if (cond)              \
            return SKIP;       \
    } while (0)

/* ---- the cases ---- */

int t_version(void);
int t_dispatcher(void);
int t_pin_v2(void);
int t_pin_v1_tokens(void);
int t_rounding(void);
int t_mmap_rules(void);
int t_req_mapping_type(void);
int t_info(void);
int t_free_while_mapped(void);
int t_invalidate_only_overlapping(void);
int t_unpin_while_mapped(void);
int t_fork_child(void);
int t_scm_rights(void);
int t_close_semantics(void);
int t_get_attr(void);
int t_threads(void);
int t_fork_busy(void);
int t_old_versions(void);
int t_fail_injection(void);
int t_fail_env(void);
int t_device_node(void);
int t_counters(void);
int t_cuda_basics(void);
int t_fork_before_init(void);
int t_pin_foreign_memory(void);
int t_vmm(void);
int t_vmm_pieces(void);
int t_hookable_entries(void);
int t_ucx_driver_functions(void);
int t_pointer_attributes(void);
int t_chunk_pins(void);
int t_syscall_mmap(void);
int t_proc_maps(void);
int t_pin_copy_out_fault(void);
int t_dmabuf(void);
int t_passthrough(void);
int t_stale_fd(void);
int t_node_stat(void);
int t_node_stat_passthrough(void);
int t_node_open(void);
int t_vmm_export(void);
int t_vk_device(void);
int t_vk_import(void);
int t_vk_fail(void);
int t_vk_fork(void);
int t_vk_threads(void);
int t_vk_bar1(void);

#endif
