/*
 * gdrapi_ext.h - host-written GPU memory in one call (libgdrapi_ext.so.0, gdrapi-rs).
 *
 * GPU memory that the CPU writes with plain stores and the GPU reads (flags, doorbells, work
 * FIFOs, counters), and the reverse: gdrx_alloc() allocates device memory on one GPU and
 * returns its device pointer and a CPU pointer to the same bytes. The library is built on the
 * public API of libgdrapi.so.2 (gdrapi.h, which stays gdrcopy's): it opens a gdr_t, allocates
 * the memory in the way the backend gdr_open() chose can map (gdrdrv, DMA-BUF, or the Vulkan
 * import of GDRAPI_USE_VULKAN=1, which maps only cuMemCreate memory exportable as a POSIX file
 * descriptor), pins and maps it, and keeps the offsets. Small allocations share one pinned and
 * mapped chunk, so a thousand 8-byte flags cost one pin and one BAR mapping, not a thousand.
 *
 * Link with -lgdrapi_ext (pkg-config gdrapi_ext); the library needs libgdrapi.so.2 and loads
 * the CUDA driver (libcuda.so.1) at run time. No CUDA header is needed to compile against this
 * one.
 *
 * CONTRACT
 *
 * Errors. Every function returning int returns 0 or a positive errno value, as gdrapi.h's do:
 *   EINVAL  a NULL, unknown, closed or forged gdrx_t; a NULL, stale (freed), forged or another
 *           allocator's gdrx_mem_t; a double free; an offset and length outside the allocation;
 *           a size of 0; an alignment that is not a power of two or exceeds GDRX_MAX_ALIGNMENT;
 *           unknown flags; a NULL output pointer. Never a crash.
 *   EACCES  a gdrx_t used in a child process (see Fork).
 *   ENODEV  no CUDA driver, no such device, or no backend can map GPU memory here (gdr_open()
 *           failed: install and load the gdrdrv module, or on a machine without it, such as a
 *           cloud GPU or a container, set GDRAPI_USE_VULKAN=1 in the environment before the
 *           process starts; the log says which).
 *   ENOTSUP GDRX_OPEN_CUMEMALLOC on a backend that cannot map cuMemAlloc memory (the Vulkan
 *           import), or a device without the memory the backend needs.
 *   ENOENT  gdrx_lookup(): the address lies in no live allocation of the allocator.
 *   others  what a failed driver call returned (ENOMEM when device memory or BAR1 space runs
 *           out, ...), with the call named in the log.
 * Nothing is printed unless GDRCOPY_ENABLE_LOGGING is set (libgdrapi's convention, same prefixes;
 * GDRCOPY_LOG_LEVEL sets the threshold).
 *
 * Threads. Every function may be called concurrently from any number of threads, on one
 * gdrx_t or several. Allocation and free take the allocator's lock; copies take no lock (they
 * check the allocation with atomic loads, then call gdr_copy_to/from_mapping). Copying through
 * an allocation that another thread is freeing at that moment is the caller's error, as with
 * any memory being freed; of two frees of one allocation exactly one succeeds, the other gets
 * EINVAL.
 *
 * Alignment. dev_ptr is a multiple of the alignment asked for, and of at least
 * GDRX_MIN_ALIGNMENT (64 bytes, a cache line): an 8-byte atomic, a 16-byte vector store or a
 * whole 64-byte line never straddles two lines. Every allocation takes whole 64-byte lines, so
 * two allocations never share a line. cpu_ptr has the same alignment up to the host page size
 * (4 KiB on x86-64); above that (up to GDRX_MAX_ALIGNMENT, 64 KiB) only dev_ptr is aligned.
 *
 * Memory. Allocations of up to gdrx_info_t.small_max bytes (a quarter of a chunk: 512 KiB with
 * the usual 2 MiB chunks) are carved from shared chunks: one device allocation of
 * gdrx_info_t.chunk_size bytes (the device's VMM granularity, 2 MiB on current GPUs), pinned
 * and mapped whole once. Larger allocations get a device allocation, a pin and a mapping of
 * their own, rounded up to 64 KiB (cuMemAlloc) or the granularity (cuMemCreate). The memory
 * is allocated with cuMemCreate (requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
 * gpuDirectRDMACapable = 1) where the device supports GPUDirect RDMA with VMM memory (every
 * backend maps it), with cuMemCreate without the RDMA flag on the Vulkan import otherwise
 * (the only memory it can map), and with cuMemAlloc elsewhere (or with GDRX_OPEN_CUMEMALLOC).
 * It belongs to the device's primary context (the CUDA runtime's), which the allocator retains
 * until gdrx_close(); dev_ptr may be used in kernels, copies and streams of that device. Its
 * contents are not initialised. Do not free it with CUDA.
 *
 * Ordering. The mapping is write-combining on x86 (cached on coherent platforms; see
 * gdrx_info_t.mapping_type).
 *   CPU writes, GPU reads: a store through cpu_ptr is posted; on a write-combining mapping it
 *   may wait in the CPU's write-combining buffers. gdrx_copy_to() ends with a store fence (as
 *   gdr_copy_to_mapping does): once it returns, the bytes are on their way, ordered before any
 *   later store of this thread. After plain stores through cpu_ptr, issue a store fence
 *   (_mm_sfence() on x86; C11 atomic_thread_fence(memory_order_release) is not enough for
 *   write-combining memory on x86) before the store that tells the GPU (a flag, a doorbell):
 *   PCIe keeps posted writes in order, so a GPU thread that sees the flag (reading it as
 *   volatile, ld.volatile or ld.acquire.sys, never from a cached copy) then sees the data
 *   stored before the fence. Nothing orders these stores with CUDA stream work: a kernel or a
 *   cuMemcpy that reads the memory must be started after the fence, or wait for a flag.
 *   GPU writes, CPU reads: a load through cpu_ptr (or gdrx_copy_from()) crosses PCIe on every
 *   access (about a microsecond on x86; keep polling loops on one flag). It sees what the GPU
 *   wrote once the GPU made the write visible to the system: the kernel writes the data, then
 *   __threadfence_system() (or st.release.sys), then the flag. Write-combining loads are weakly
 *   ordered: read the flag, then a load fence (_mm_lfence(), or run with GDRAPI_READ_FENCE=1 to
 *   have gdrx_copy_from() add it), then the data.
 *
 * Fork. The memory is not inherited: gdrdrv's mappings are VM_DONTCOPY, the others
 * MADV_DONTFORK, so the parent's cpu_ptr is unmapped in a child. In a child process, a gdrx_t
 * opened by the parent gives EACCES from every function that takes it, and a copy through the
 * parent's gdrx_mem_t gives EINVAL; nothing crashes and the parent's memory is untouched. (CUDA
 * itself cannot be used in a child of a process that initialised it: a child that needs
 * host-written memory execs a program that opens its own allocator.)
 *
 * Lifetime. gdrx_free() frees one allocation; when a chunk holds no allocation any more, it is
 * unmapped, unpinned and its device memory freed. gdrx_close() frees every allocation still
 * live (their pointers become invalid), closes the gdr_t and releases the context. A
 * gdrx_mem_t is a plain value: copies of it name the same allocation, and once it is freed
 * every copy is refused with EINVAL (handles are not reused until 2^32 later allocations in
 * the same slot).
 */
#ifndef GDRAPI_EXT_H
#define GDRAPI_EXT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GDRX_API_MAJOR_VERSION 0
#define GDRX_API_MINOR_VERSION 1

/* Every allocation's alignment is at least this (a cache line), and at most GDRX_MAX_ALIGNMENT. */
#define GDRX_MIN_ALIGNMENT 64
#define GDRX_MAX_ALIGNMENT 65536

/* gdrx_open() flags. */
#define GDRX_OPEN_DEFAULT 0u
/* Allocate with cuMemAlloc even where cuMemCreate memory would be used (ENOTSUP on the Vulkan
 * import, which maps only cuMemCreate memory). */
#define GDRX_OPEN_CUMEMALLOC 1u

/* gdrx_info_t.backend: the libgdrapi backend the allocator's gdr_t uses. */
#define GDRX_BACKEND_GDRDRV 0
#define GDRX_BACKEND_DMABUF 1
#define GDRX_BACKEND_VULKAN 2

/* gdrx_info_t.memory: how device memory is allocated. */
#define GDRX_MEMORY_CUMEMALLOC 0
#define GDRX_MEMORY_CUMEMCREATE 1

/* An allocator: one device, one gdr_t. Opaque; the library checks every value it is given. */
typedef struct gdrx *gdrx_t;

/* One allocation. All fields are written by gdrx_alloc() (and gdrx_lookup()); do not change
 * them: the library checks them against its own record. */
typedef struct gdrx_mem {
    unsigned long long dev_ptr; /* device address of the first byte (a CUdeviceptr) */
    void *cpu_ptr;              /* CPU address of the same byte */
    size_t size;                /* usable bytes from either pointer: the size asked for */
    uint64_t handle;            /* the allocation, for gdrx_free() and the copies; never 0 */
} gdrx_mem_t;

/* What gdrx_info() reports. */
typedef struct gdrx_info {
    int device;            /* CUDA device ordinal */
    int backend;           /* GDRX_BACKEND_* */
    int memory;            /* GDRX_MEMORY_* */
    int mapping_type;      /* gdr_mapping_type_t of the mappings: 1 WC, 2 CACHING; 0 before the first */
    size_t chunk_size;     /* bytes of one shared chunk */
    size_t small_max;      /* largest allocation carved from a shared chunk */
    size_t allocations;    /* live allocations */
    size_t pins;           /* live pins (and mappings): shared chunks plus large allocations */
    size_t bytes_pinned;   /* bytes those pins cover */
    size_t bytes_in_use;   /* bytes of live allocations, each rounded to 64 */
    uint64_t reserved[4];  /* zero */
} gdrx_info_t;

/* The version of this API (GDRX_API_*_VERSION of the library, not of the header). */
void gdrx_runtime_get_version(int *major, int *minor);

/* Opens an allocator on CUDA device `device` (an ordinal) with GDRX_OPEN_* `flags`: loads and
 * initialises the CUDA driver, opens a gdr_t and decides how to allocate. */
int gdrx_open(gdrx_t *allocator, int device, unsigned int flags);

/* Frees every allocation still live, closes the gdr_t and releases the device's primary
 * context. Returns 0 or the first error; the allocator is gone in any case (EINVAL then). */
int gdrx_close(gdrx_t allocator);

/* Allocates `size` bytes (> 0) aligned to `alignment` (0 for GDRX_MIN_ALIGNMENT, else a power
 * of two up to GDRX_MAX_ALIGNMENT; smaller ones are raised to GDRX_MIN_ALIGNMENT) and fills
 * *mem. *mem is left untouched on failure. */
int gdrx_alloc(gdrx_t allocator, size_t size, size_t alignment, gdrx_mem_t *mem);

/* Frees the allocation *mem names (a gdrx_mem_t that gdrx_alloc() of this allocator filled).
 * Returns 0, EINVAL (not a live allocation of this allocator: nothing happens), or the error
 * of a driver call made to release an emptied chunk (the allocation is freed all the same). */
int gdrx_free(gdrx_t allocator, const gdrx_mem_t *mem);

/* Copies `len` bytes from `src` to the allocation at byte `offset`, through its mapping
 * (gdr_copy_to_mapping: write-combining stores, then a store fence). */
int gdrx_copy_to(const gdrx_mem_t *mem, size_t offset, const void *src, size_t len);

/* Copies `len` bytes of the allocation from byte `offset` to `dst` (gdr_copy_from_mapping). */
int gdrx_copy_from(const gdrx_mem_t *mem, size_t offset, void *dst, size_t len);

/* Which live allocation of the allocator holds `addr`, a device address or a CPU address
 * (cast to an integer) of its bytes: fills *mem and *offset (may be NULL) and returns 0, or
 * ENOENT. */
int gdrx_lookup(gdrx_t allocator, unsigned long long addr, gdrx_mem_t *mem, size_t *offset);

/* Fills *info. */
int gdrx_info(gdrx_t allocator, gdrx_info_t *info);

#ifdef __cplusplus
}
#endif

#endif /* GDRAPI_EXT_H */
