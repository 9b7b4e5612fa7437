/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * nv-p2p.h - the kernel interface of NVIDIA's peer-to-peer ("GPUDirect RDMA") pinning API,
 * as the gdrapi-rs test provider (nvp2p.ko) implements it.
 *
 * Written for this project from the published contract (NVIDIA's GPUDirect RDMA
 * documentation): a kernel client pins a range of GPU virtual addresses and gets back a page
 * table of 64 KiB GPU pages, each with the bus address of its BAR window. Structure layouts,
 * constant values and function signatures follow that contract so that an unmodified client
 * (gdrdrv) builds against this header; nothing here is NVIDIA's text.
 */
#ifndef GDRAPI_VM_NV_P2P_H
#define GDRAPI_VM_NV_P2P_H

#include <linux/types.h>

/* Version words: major in the upper 16 bits, minor in the lower 16. */
#define NVIDIA_P2P_MAJOR_VERSION_MASK 0xffff0000
#define NVIDIA_P2P_MINOR_VERSION_MASK 0x0000ffff
#define NVIDIA_P2P_MAJOR_VERSION(v) (((v) & NVIDIA_P2P_MAJOR_VERSION_MASK) >> 16)
#define NVIDIA_P2P_MINOR_VERSION(v) ((v) & NVIDIA_P2P_MINOR_VERSION_MASK)
#define NVIDIA_P2P_MAJOR_VERSION_MATCHES(p, v) \
	(NVIDIA_P2P_MAJOR_VERSION((p)->version) == NVIDIA_P2P_MAJOR_VERSION(v))
#define NVIDIA_P2P_VERSION_COMPATIBLE(p, v) \
	(NVIDIA_P2P_MAJOR_VERSION_MATCHES(p, v) && \
	 NVIDIA_P2P_MINOR_VERSION((p)->version) >= NVIDIA_P2P_MINOR_VERSION(v))

/* Page-table layout 2.0: the table carries a flags word. */
#define NVIDIA_P2P_PAGE_TABLE_VERSION 0x00020000
#define NVIDIA_P2P_PAGE_TABLE_VERSION_COMPATIBLE(p) \
	NVIDIA_P2P_VERSION_COMPATIBLE(p, NVIDIA_P2P_PAGE_TABLE_VERSION)

/* The GPU pages' size, as an index. */
enum nvidia_p2p_page_size_type {
	NVIDIA_P2P_PAGE_SIZE_4KB = 0,
	NVIDIA_P2P_PAGE_SIZE_64KB = 1,
	NVIDIA_P2P_PAGE_SIZE_128KB = 2,
	NVIDIA_P2P_PAGE_SIZE_COUNT
};

/* One GPU page: the bus address of its BAR window (and registers of very old GPUs). */
typedef struct nvidia_p2p_page {
	uint64_t physical_address;
	union nvidia_p2p_request_registers {
		struct {
			uint32_t wreqmb_h;
			uint32_t rreqmb_h;
			uint32_t rreqmb_0;
			uint32_t reserved[3];
		} fermi;
	} registers;
} nvidia_p2p_page_t;

/* Table flag: the CPU may map the pages cached (coherent platforms). */
#define NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE 0x1

/* The result of a pin: entries pages of page_size, in GPU virtual address order. */
typedef struct nvidia_p2p_page_table {
	uint32_t version;
	uint32_t page_size;
	struct nvidia_p2p_page **pages;
	uint32_t entries;
	uint8_t *gpu_uuid;
	uint32_t flags;
} nvidia_p2p_page_table_t;

/* The persistent API exists: pins that survive the memory's free until they are put. */
#define NVIDIA_P2P_CAP_GET_PAGES_PERSISTENT_API

/* Flags of the persistent pin. */
#define NVIDIA_P2P_FLAGS_DEFAULT 0
#define NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING 1

/*
 * Pins [virtual_address, virtual_address + length) of the caller's GPU address space; both
 * 64 KiB aligned, inside one allocation. free_callback (required) runs with data when the
 * memory is freed before nvidia_p2p_put_pages: it must call nvidia_p2p_free_page_table.
 * p2p_token and va_space are legacy and ignored.
 */
int nvidia_p2p_get_pages(uint64_t p2p_token, uint32_t va_space, uint64_t virtual_address,
			 uint64_t length, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data);

/* Unpins a table of nvidia_p2p_get_pages; waits for a free callback in flight (-EINVAL then). */
int nvidia_p2p_put_pages(uint64_t p2p_token, uint32_t va_space, uint64_t virtual_address,
			 struct nvidia_p2p_page_table *page_table);

/* Frees a table whose memory was freed: called from the free callback. */
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table);

/* A pin without callback: the pages stay the caller's until put, even after the free. */
int nvidia_p2p_get_pages_persistent(uint64_t virtual_address, uint64_t length,
				    struct nvidia_p2p_page_table **page_table, uint32_t flags);

/* Unpins a table of nvidia_p2p_get_pages_persistent. */
int nvidia_p2p_put_pages_persistent(uint64_t virtual_address,
				    struct nvidia_p2p_page_table *page_table, uint32_t flags);

#endif
