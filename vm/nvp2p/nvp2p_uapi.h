/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * nvp2p_uapi.h - the user interface of /dev/nvp2p, the gdrapi-rs test provider's "GPU".
 *
 * One open file is one process's GPU context. Its device memory is seen through one window:
 * mmap(NULL, window, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) reserves it, and the
 * window's addresses are the context's GPU virtual addresses (as with CUDA's unified
 * addressing, a device pointer is a valid CPU address). NVP2P_IOC_ALLOC backs a 64 KiB
 * aligned range of the window with BAR pages, NVP2P_IOC_FREE gives them back (running the
 * free callbacks of non-persistent pins); pread/pwrite at a device address copy to and from
 * the memory as cuMemcpy would.
 */
#ifndef GDRAPI_VM_NVP2P_UAPI_H
#define GDRAPI_VM_NVP2P_UAPI_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/ioctl.h>
#else
#include <stdint.h>
#include <sys/ioctl.h>
#endif

#define NVP2P_PAGE_SIZE (64ULL * 1024)

struct nvp2p_info {
	uint64_t bar_size;	/* out: bytes of device memory */
	uint64_t free_bytes;	/* out: bytes no allocation or pin holds */
	uint64_t window_base;	/* out: the window's address, 0 before the mmap */
	uint64_t window_size;	/* out: its length */
	uint64_t pins;		/* out: live pins of every context */
};

struct nvp2p_alloc {
	uint64_t addr;		/* in: 64 KiB aligned address inside the window */
	uint64_t size;		/* in: bytes, rounded up to 64 KiB */
};

struct nvp2p_free {
	uint64_t addr;		/* in: the address of an allocation */
};

#define NVP2P_IOC_MAGIC 'N'
#define NVP2P_IOC_INFO _IOR(NVP2P_IOC_MAGIC, 1, struct nvp2p_info)
#define NVP2P_IOC_ALLOC _IOW(NVP2P_IOC_MAGIC, 2, struct nvp2p_alloc)
#define NVP2P_IOC_FREE _IOW(NVP2P_IOC_MAGIC, 3, struct nvp2p_free)

#endif
