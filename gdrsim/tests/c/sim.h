/* Shared declarations of the emulator's test program: shorthands for driver and CUDA calls,
 * the settings the suite runs under, and the cases. The harness is check.h with its case
 * runner (check_cases.h): CHECK counts and the case goes on, a failed REQUIRE ends the case. */
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

#include "check_cases.h"
#include "gdrdrv_abi.h"
#include "gdrsim.h"

/* The C library's fortified open entry points (called by _FORTIFY_SOURCE builds). */
extern int __open_2(const char *, int);
extern int __open64_2(const char *, int);
extern int __openat_2(int, const char *, int);
extern int __openat64_2(int, const char *, int);

/* gdrdrv's ABI (requests, parameter structs, constants) is gdrdrv_abi.h's. */
#define GPU_PAGE GDRDRV_GPU_PAGE_SIZE
#define CHUNK 0x200000UL /* the emulator's allocation chunks */
#define PAGE_SHIFT 12    /* the host's pages, in which mmap offsets count */

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
int info_v2(int fd, uint64_t h, struct gdrdrv_get_info_v2_params *i);
int info_v1(int fd, uint64_t h, struct gdrdrv_get_info_params *i);
int req_type(int fd, uint64_t h, uint32_t t);
int cb(int fd, uint64_t h, uint32_t *flag);
void *map(int fd, uint64_t h, size_t len);
struct gdrsim_counters counters(void);
void cuda_up(void);
CUdeviceptr dalloc(size_t size);
CUdeviceptr dalloc_aligned(size_t size, CUdeviceptr *raw);

/* Which signal, if any, touching `addr` raises: 0, SIGBUS or SIGSEGV. Reads (write == 0)
 * or writes (write != 0) one byte; a successful read stores the byte in *val. */
int probe(volatile unsigned char *addr, int write, unsigned char *val);

/* A CUDA call that must succeed: an assertion (CU) or a precondition (CU_REQUIRE). */
#define CU(call) CHECK_EQ((call), CUDA_SUCCESS)
#define CU_REQUIRE(call) REQUIRE_EQ((call), CUDA_SUCCESS)

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
int t_fail_panic(void);
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
int t_vk_import_limit(void);
int t_vk_import_cost(void);

#endif
