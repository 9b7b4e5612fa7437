// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * nvp2p.ko - a stand-in for the NVIDIA driver's peer-to-peer pinning API, so that the real
 * gdrdrv module runs without a GPU (in a QEMU VM, see vm/README.md).
 *
 * "GPU memory" is BAR2 of a QEMU ivshmem-plain device, cut into 64 KiB GPU pages. User space
 * gets it through /dev/nvp2p (nvp2p_uapi.h): one open file is one process's context, whose
 * window (an mmap of the file) holds its allocations at their device addresses. Kernel
 * clients pin ranges of those addresses with nvidia_p2p_get_pages (non-persistent: a free
 * callback is required and runs when the memory is freed) or
 * nvidia_p2p_get_pages_persistent (the pages stay pinned until put, even after the free).
 * Allocations get their pages from a fixed scattered order, so a pinned range is physically
 * contiguous in runs of two pages only: clients see both contiguous and broken runs.
 *
 * Locking: one mutex (nvp2p_lock) guards contexts, allocations, pins and the page counts.
 * Free callbacks run without it (they call back into nvidia_p2p_free_page_table). The window's
 * fault handler takes it under the mm's mmap lock, so nothing takes the mmap lock while
 * holding it.
 */
#include <linux/completion.h>
#include <linux/fs.h>
#include <linux/io.h>
#include <linux/kref.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/version.h>

#include "nv-p2p.h"
#include "nvp2p_uapi.h"

#define NVP2P_NAME "nvp2p"
#define GPU_PAGE NVP2P_PAGE_SIZE
#define IVSHMEM_VENDOR 0x1af4
#define IVSHMEM_DEVICE 0x1110
#define IVSHMEM_BAR 2

MODULE_AUTHOR("gdrapi-rs");
MODULE_DESCRIPTION("Fake NVIDIA P2P provider for testing gdrdrv: GPU memory on an ivshmem BAR");
MODULE_LICENSE("Dual MIT/GPL");
MODULE_VERSION("1.0");

/* The device: BAR2 and a reference count per GPU page (0: free). */
struct nvp2p_gpu {
	struct pci_dev *pdev;
	phys_addr_t bar_phys;
	u64 bar_size;
	void __iomem *bar;
	u32 npages;
	u32 free_pages;
	u32 *refs;
};

/* One process's context: its window and its allocations. */
struct nvp2p_ctx {
	struct list_head node;
	struct mm_struct *mm;		/* the window's mm while it is mapped */
	u64 base, size;			/* the window; size 0 when not mapped */
	struct list_head allocs;
};

struct nvp2p_mem {
	struct list_head node;
	u64 va, size;
	u32 *pages;			/* GPU page indices, size / GPU_PAGE of them */
	struct list_head pins;		/* its non-persistent pins */
};

enum pin_state { PIN_ACTIVE, PIN_REVOKING, PIN_FREED };

struct nvp2p_pin {
	struct list_head node;		/* all_pins */
	struct list_head mem_node;	/* nvp2p_mem.pins (non-persistent only) */
	struct list_head revoke_node;
	struct nvidia_p2p_page_table table;
	struct nvidia_p2p_page *page_data;
	struct nvidia_p2p_page **page_ptrs;
	u32 *pages;
	u64 va;
	bool persistent;
	enum pin_state state;
	void (*free_callback)(void *data);
	void *data;
	struct completion revoked;	/* the free callback has returned */
	struct kref ref;
};

static struct nvp2p_gpu *gpu;
static DEFINE_MUTEX(nvp2p_lock);
static LIST_HEAD(contexts);
static LIST_HEAD(all_pins);
static u64 pin_count;
static u8 gpu_uuid[16] = "gdrapi-rs-nvp2p";

/* ---- GPU pages ---- */

/* The i-th page of the allocation order: pairs 0-1, 4-5, 8-9, ... then 2-3, 6-7, ... */
static u32 page_in_order(u32 i, u32 n)
{
	u32 half = n / 2;

	if (i < half)
		return 4 * (i / 2) + (i % 2);
	i -= half;
	return 4 * (i / 2) + 2 + (i % 2);
}

/* Takes n free pages into out; false when there are not enough. Under nvp2p_lock. */
static bool pages_take(u32 *out, u32 n)
{
	u32 i, got = 0;

	if (n > gpu->free_pages)
		return false;
	for (i = 0; i < gpu->npages && got < n; i++) {
		u32 p = page_in_order(i, gpu->npages);

		if (gpu->refs[p] == 0) {
			gpu->refs[p] = 1;
			out[got++] = p;
		}
	}
	gpu->free_pages -= got;
	return true;
}

static void pages_get(const u32 *pages, u32 n)
{
	u32 i;

	for (i = 0; i < n; i++)
		gpu->refs[pages[i]]++;
}

static void pages_put(const u32 *pages, u32 n)
{
	u32 i;

	for (i = 0; i < n; i++) {
		if (WARN_ON(gpu->refs[pages[i]] == 0))
			continue;
		if (--gpu->refs[pages[i]] == 0)
			gpu->free_pages++;
	}
}

/* ---- pins ---- */

static void pin_release(struct kref *ref)
{
	struct nvp2p_pin *pin = container_of(ref, struct nvp2p_pin, ref);

	kvfree(pin->page_data);
	kvfree(pin->page_ptrs);
	kvfree(pin->pages);
	kfree(pin);
}

static struct nvp2p_pin *pin_of_table(struct nvidia_p2p_page_table *table)
{
	struct nvp2p_pin *pin;

	list_for_each_entry(pin, &all_pins, node)
		if (&pin->table == table)
			return pin;
	return NULL;
}

/* The context whose window holds va in the calling process. Under nvp2p_lock. */
static struct nvp2p_ctx *ctx_of_current(u64 va)
{
	struct nvp2p_ctx *ctx;

	if (!current->mm)
		return NULL;
	list_for_each_entry(ctx, &contexts, node)
		if (ctx->mm == current->mm && va >= ctx->base && va - ctx->base < ctx->size)
			return ctx;
	return NULL;
}

static struct nvp2p_mem *mem_containing(struct nvp2p_ctx *ctx, u64 va, u64 len)
{
	struct nvp2p_mem *m;

	list_for_each_entry(m, &ctx->allocs, node)
		if (va >= m->va && va - m->va < m->size && len <= m->size - (va - m->va))
			return m;
	return NULL;
}

static int pin_pages(u64 va, u64 len, struct nvidia_p2p_page_table **out, bool persistent,
		     void (*free_callback)(void *), void *data)
{
	struct nvp2p_pin *pin;
	struct nvp2p_ctx *ctx;
	struct nvp2p_mem *m;
	u32 i, n;
	int ret = 0;

	if (!gpu || !out || len == 0 || va % GPU_PAGE || len % GPU_PAGE)
		return -EINVAL;
	if (!persistent && !free_callback)
		return -EINVAL;
	if (len / GPU_PAGE > gpu->npages)
		return -EINVAL;
	n = len / GPU_PAGE;

	pin = kzalloc(sizeof(*pin), GFP_KERNEL);
	if (!pin)
		return -ENOMEM;
	pin->pages = kvmalloc_array(n, sizeof(*pin->pages), GFP_KERNEL);
	pin->page_data = kvcalloc(n, sizeof(*pin->page_data), GFP_KERNEL);
	pin->page_ptrs = kvmalloc_array(n, sizeof(*pin->page_ptrs), GFP_KERNEL);
	if (!pin->pages || !pin->page_data || !pin->page_ptrs) {
		ret = -ENOMEM;
		goto fail;
	}
	kref_init(&pin->ref);
	init_completion(&pin->revoked);
	pin->va = va;
	pin->persistent = persistent;
	pin->free_callback = free_callback;
	pin->data = data;
	pin->state = PIN_ACTIVE;

	mutex_lock(&nvp2p_lock);
	ctx = ctx_of_current(va);
	m = ctx ? mem_containing(ctx, va, len) : NULL;
	if (!m) {
		mutex_unlock(&nvp2p_lock);
		ret = -EINVAL;
		goto fail;
	}
	memcpy(pin->pages, m->pages + (va - m->va) / GPU_PAGE, n * sizeof(*pin->pages));
	pages_get(pin->pages, n);
	for (i = 0; i < n; i++) {
		pin->page_data[i].physical_address = gpu->bar_phys + (u64)pin->pages[i] * GPU_PAGE;
		pin->page_ptrs[i] = &pin->page_data[i];
	}
	pin->table.version = NVIDIA_P2P_PAGE_TABLE_VERSION;
	pin->table.page_size = NVIDIA_P2P_PAGE_SIZE_64KB;
	pin->table.pages = pin->page_ptrs;
	pin->table.entries = n;
	pin->table.gpu_uuid = gpu_uuid;
	pin->table.flags = 0;
	if (!persistent)
		list_add_tail(&pin->mem_node, &m->pins);
	list_add_tail(&pin->node, &all_pins);
	pin_count++;
	mutex_unlock(&nvp2p_lock);
	*out = &pin->table;
	return 0;

fail:
	kref_init(&pin->ref);
	kref_put(&pin->ref, pin_release);
	return ret;
}

/* Drops a pin that is off every list (under nvp2p_lock): its pages and the list's reference. */
static void pin_drop_locked(struct nvp2p_pin *pin)
{
	pages_put(pin->pages, pin->table.entries);
	pin_count--;
}

static int unpin_pages(u64 va, struct nvidia_p2p_page_table *table, bool persistent)
{
	struct nvp2p_pin *pin;

	mutex_lock(&nvp2p_lock);
	pin = table ? pin_of_table(table) : NULL;
	if (!pin || pin->persistent != persistent || pin->va != va) {
		mutex_unlock(&nvp2p_lock);
		return -EINVAL;
	}
	if (pin->state != PIN_ACTIVE) {
		/* The memory is being freed: wait for the client's callback to return. */
		kref_get(&pin->ref);
		mutex_unlock(&nvp2p_lock);
		wait_for_completion(&pin->revoked);
		kref_put(&pin->ref, pin_release);
		return -EINVAL;
	}
	list_del(&pin->node);
	if (!persistent)
		list_del(&pin->mem_node);
	pin_drop_locked(pin);
	mutex_unlock(&nvp2p_lock);
	kref_put(&pin->ref, pin_release);
	return 0;
}

/*
 * The memory of m (already off its context's list) goes: its non-persistent pins' free
 * callbacks run, each of which must free its table; then its own reference on its pages.
 */
static void mem_destroy(struct nvp2p_mem *m)
{
	struct nvp2p_pin *pin, *tmp;
	LIST_HEAD(revoke);

	mutex_lock(&nvp2p_lock);
	list_for_each_entry_safe(pin, tmp, &m->pins, mem_node) {
		list_del(&pin->mem_node);
		pin->state = PIN_REVOKING;
		kref_get(&pin->ref);
		list_add_tail(&pin->revoke_node, &revoke);
	}
	mutex_unlock(&nvp2p_lock);

	list_for_each_entry_safe(pin, tmp, &revoke, revoke_node) {
		pin->free_callback(pin->data);
		mutex_lock(&nvp2p_lock);
		list_del(&pin->node);
		if (pin->state != PIN_FREED) {
			pr_warn(NVP2P_NAME ": free callback of va 0x%llx did not free its page table\n",
				pin->va);
			pin_drop_locked(pin);
		}
		mutex_unlock(&nvp2p_lock);
		complete_all(&pin->revoked);
		kref_put(&pin->ref, pin_release);	/* the list's */
		kref_put(&pin->ref, pin_release);	/* ours */
	}

	mutex_lock(&nvp2p_lock);
	pages_put(m->pages, m->size / GPU_PAGE);
	mutex_unlock(&nvp2p_lock);
	kvfree(m->pages);
	kfree(m);
}

/* ---- the exported API ---- */

int nvidia_p2p_get_pages(uint64_t p2p_token, uint32_t va_space, uint64_t virtual_address,
			 uint64_t length, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	return pin_pages(virtual_address, length, page_table, false, free_callback, data);
}
EXPORT_SYMBOL(nvidia_p2p_get_pages);

int nvidia_p2p_put_pages(uint64_t p2p_token, uint32_t va_space, uint64_t virtual_address,
			 struct nvidia_p2p_page_table *page_table)
{
	return unpin_pages(virtual_address, page_table, false);
}
EXPORT_SYMBOL(nvidia_p2p_put_pages);

int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	struct nvp2p_pin *pin;
	int ret = -EINVAL;

	mutex_lock(&nvp2p_lock);
	pin = page_table ? pin_of_table(page_table) : NULL;
	if (pin && pin->state == PIN_REVOKING) {
		/* Stays listed (as freed) until the callback returns: see unpin_pages. */
		pin->state = PIN_FREED;
		pin_drop_locked(pin);
		ret = 0;
	}
	mutex_unlock(&nvp2p_lock);
	return ret;
}
EXPORT_SYMBOL(nvidia_p2p_free_page_table);

int nvidia_p2p_get_pages_persistent(uint64_t virtual_address, uint64_t length,
				    struct nvidia_p2p_page_table **page_table, uint32_t flags)
{
	if (flags & ~NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING)
		return -EINVAL;
	return pin_pages(virtual_address, length, page_table, true, NULL, NULL);
}
EXPORT_SYMBOL(nvidia_p2p_get_pages_persistent);

int nvidia_p2p_put_pages_persistent(uint64_t virtual_address,
				    struct nvidia_p2p_page_table *page_table, uint32_t flags)
{
	if (flags)
		return -EINVAL;
	return unpin_pages(virtual_address, page_table, true);
}
EXPORT_SYMBOL(nvidia_p2p_put_pages_persistent);

/* ---- /dev/nvp2p ---- */

static int nvp2p_open(struct inode *inode, struct file *filp)
{
	struct nvp2p_ctx *ctx;

	if (!gpu)
		return -ENODEV;
	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL);
	if (!ctx)
		return -ENOMEM;
	INIT_LIST_HEAD(&ctx->allocs);
	mutex_lock(&nvp2p_lock);
	list_add(&ctx->node, &contexts);
	mutex_unlock(&nvp2p_lock);
	filp->private_data = ctx;
	return 0;
}

static int nvp2p_release(struct inode *inode, struct file *filp)
{
	struct nvp2p_ctx *ctx = filp->private_data;
	struct nvp2p_mem *m, *tmp;
	LIST_HEAD(dead);

	mutex_lock(&nvp2p_lock);
	list_del(&ctx->node);
	list_splice_init(&ctx->allocs, &dead);
	mutex_unlock(&nvp2p_lock);
	list_for_each_entry_safe(m, tmp, &dead, node) {
		list_del(&m->node);
		mem_destroy(m);
	}
	kfree(ctx);
	return 0;
}

static vm_fault_t nvp2p_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct nvp2p_ctx *ctx = vma->vm_private_data;
	u64 addr = vmf->address & ~(GPU_PAGE - 1);
	vm_fault_t ret = VM_FAULT_SIGBUS;
	struct nvp2p_mem *m;

	mutex_lock(&nvp2p_lock);
	m = mem_containing(ctx, addr, GPU_PAGE);
	if (m) {
		unsigned long pfn = (gpu->bar_phys >> PAGE_SHIFT) +
			(unsigned long)m->pages[(addr - m->va) / GPU_PAGE] * (GPU_PAGE >> PAGE_SHIFT);
		u64 off;

		for (off = 0; off < GPU_PAGE; off += PAGE_SIZE) {
			ret = vmf_insert_pfn(vma, addr + off, pfn + (off >> PAGE_SHIFT));
			if (ret != VM_FAULT_NOPAGE)
				break;
		}
	}
	mutex_unlock(&nvp2p_lock);
	return ret;
}

static void nvp2p_vm_close(struct vm_area_struct *vma)
{
	struct nvp2p_ctx *ctx = vma->vm_private_data;

	mutex_lock(&nvp2p_lock);
	ctx->mm = NULL;
	ctx->base = 0;
	ctx->size = 0;
	mutex_unlock(&nvp2p_lock);
}

static int nvp2p_may_split(struct vm_area_struct *vma, unsigned long addr)
{
	return -EINVAL;
}

static const struct vm_operations_struct nvp2p_vm_ops = {
	.fault = nvp2p_fault,
	.close = nvp2p_vm_close,
	.may_split = nvp2p_may_split,
};

static int nvp2p_mmap(struct file *filp, struct vm_area_struct *vma)
{
	struct nvp2p_ctx *ctx = filp->private_data;
	u64 len = vma->vm_end - vma->vm_start;
	int ret = 0;

	if (vma->vm_pgoff != 0 || !(vma->vm_flags & VM_SHARED) || vma->vm_start % GPU_PAGE ||
	    len % GPU_PAGE)
		return -EINVAL;
	mutex_lock(&nvp2p_lock);
	if (ctx->size) {
		ret = -EBUSY;
	} else {
		ctx->mm = vma->vm_mm;
		ctx->base = vma->vm_start;
		ctx->size = len;
	}
	mutex_unlock(&nvp2p_lock);
	if (ret)
		return ret;
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
	vm_flags_set(vma, VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP | VM_DONTCOPY);
#else
	vma->vm_flags |= VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP | VM_DONTCOPY;
#endif
	vma->vm_page_prot = pgprot_writecombine(vma->vm_page_prot);
	vma->vm_private_data = ctx;
	vma->vm_ops = &nvp2p_vm_ops;
	return 0;
}

static long ioc_alloc(struct nvp2p_ctx *ctx, struct nvp2p_alloc __user *uarg)
{
	struct nvp2p_alloc a;
	struct nvp2p_mem *m, *o;
	u64 size;
	int ret = 0;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.size == 0 || a.size > gpu->bar_size || a.addr % GPU_PAGE)
		return -EINVAL;
	size = round_up(a.size, GPU_PAGE);
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		return -ENOMEM;
	m->pages = kvmalloc_array(size / GPU_PAGE, sizeof(*m->pages), GFP_KERNEL);
	if (!m->pages) {
		kfree(m);
		return -ENOMEM;
	}
	m->va = a.addr;
	m->size = size;
	INIT_LIST_HEAD(&m->pins);

	mutex_lock(&nvp2p_lock);
	if (!ctx->size || ctx->mm != current->mm || a.addr < ctx->base ||
	    a.addr - ctx->base > ctx->size || size > ctx->size - (a.addr - ctx->base)) {
		ret = -EINVAL;
		goto out;
	}
	list_for_each_entry(o, &ctx->allocs, node) {
		if (o->va < m->va + m->size && m->va < o->va + o->size) {
			ret = -EEXIST;
			goto out;
		}
	}
	if (!pages_take(m->pages, size / GPU_PAGE)) {
		ret = -ENOMEM;
		goto out;
	}
	list_add_tail(&m->node, &ctx->allocs);
out:
	mutex_unlock(&nvp2p_lock);
	if (ret) {
		kvfree(m->pages);
		kfree(m);
	}
	return ret;
}

static long ioc_free(struct nvp2p_ctx *ctx, struct nvp2p_free __user *uarg)
{
	struct nvp2p_free f;
	struct nvp2p_mem *m, *found = NULL;
	struct vm_area_struct *vma;

	if (copy_from_user(&f, uarg, sizeof(f)))
		return -EFAULT;
	mutex_lock(&nvp2p_lock);
	list_for_each_entry(m, &ctx->allocs, node) {
		if (m->va == f.addr) {
			found = m;
			list_del(&m->node);
			break;
		}
	}
	mutex_unlock(&nvp2p_lock);
	if (!found)
		return -EINVAL;
	/* The window stops showing the pages before anyone else can get them. */
	if (current->mm) {
		mmap_read_lock(current->mm);
		vma = find_vma(current->mm, found->va);
		if (vma && vma->vm_ops == &nvp2p_vm_ops && vma->vm_private_data == ctx)
			zap_vma_ptes(vma, found->va, found->size);
		mmap_read_unlock(current->mm);
	}
	mem_destroy(found);
	return 0;
}

static long ioc_info(struct nvp2p_ctx *ctx, struct nvp2p_info __user *uarg)
{
	struct nvp2p_info info = { 0 };

	mutex_lock(&nvp2p_lock);
	info.bar_size = gpu->bar_size;
	info.free_bytes = (u64)gpu->free_pages * GPU_PAGE;
	info.window_base = ctx->base;
	info.window_size = ctx->size;
	info.pins = pin_count;
	mutex_unlock(&nvp2p_lock);
	return copy_to_user(uarg, &info, sizeof(info)) ? -EFAULT : 0;
}

static long nvp2p_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct nvp2p_ctx *ctx = filp->private_data;

	switch (cmd) {
	case NVP2P_IOC_INFO:
		return ioc_info(ctx, (void __user *)arg);
	case NVP2P_IOC_ALLOC:
		return ioc_alloc(ctx, (void __user *)arg);
	case NVP2P_IOC_FREE:
		return ioc_free(ctx, (void __user *)arg);
	default:
		return -ENOTTY;
	}
}

/* pread/pwrite at a device address: copies through the BAR, one GPU page at a time. */
static ssize_t nvp2p_rw(struct file *filp, char __user *ubuf, size_t len, loff_t *ppos,
			bool write)
{
	struct nvp2p_ctx *ctx = filp->private_data;
	u64 va = *ppos;
	size_t done = 0;
	void *bounce;
	ssize_t ret = 0;

	bounce = kmalloc(GPU_PAGE, GFP_KERNEL);
	if (!bounce)
		return -ENOMEM;
	while (done < len) {
		struct nvp2p_mem *m;
		u64 at = va + done, in_page = at % GPU_PAGE;
		size_t n = min_t(u64, len - done, GPU_PAGE - in_page);
		void __iomem *src;

		if (write && copy_from_user(bounce, ubuf + done, n)) {
			ret = -EFAULT;
			break;
		}
		mutex_lock(&nvp2p_lock);
		m = mem_containing(ctx, at, n);
		if (!m) {
			mutex_unlock(&nvp2p_lock);
			ret = -EFAULT;
			break;
		}
		src = gpu->bar + (u64)m->pages[(at - m->va) / GPU_PAGE] * GPU_PAGE + in_page;
		if (write)
			memcpy_toio(src, bounce, n);
		else
			memcpy_fromio(bounce, src, n);
		mutex_unlock(&nvp2p_lock);
		if (!write && copy_to_user(ubuf + done, bounce, n)) {
			ret = -EFAULT;
			break;
		}
		done += n;
	}
	kfree(bounce);
	if (done) {
		*ppos += done;
		return done;
	}
	return ret;
}

static ssize_t nvp2p_read(struct file *filp, char __user *buf, size_t len, loff_t *ppos)
{
	return nvp2p_rw(filp, buf, len, ppos, false);
}

static ssize_t nvp2p_write(struct file *filp, const char __user *buf, size_t len, loff_t *ppos)
{
	return nvp2p_rw(filp, (char __user *)buf, len, ppos, true);
}

static const struct file_operations nvp2p_fops = {
	.owner = THIS_MODULE,
	.open = nvp2p_open,
	.release = nvp2p_release,
	.mmap = nvp2p_mmap,
	.unlocked_ioctl = nvp2p_ioctl,
	.read = nvp2p_read,
	.write = nvp2p_write,
	.llseek = default_llseek,
};

static struct miscdevice nvp2p_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = NVP2P_NAME,
	.fops = &nvp2p_fops,
	.mode = 0666,
};

/* /proc/driver/nvp2p: the counts a leak check reads. */
static int nvp2p_proc_show(struct seq_file *s, void *v)
{
	struct nvp2p_ctx *ctx;
	struct nvp2p_mem *m;
	u64 allocs = 0;

	mutex_lock(&nvp2p_lock);
	list_for_each_entry(ctx, &contexts, node)
		list_for_each_entry(m, &ctx->allocs, node)
			allocs++;
	seq_printf(s, "bar_bytes: %llu\n", gpu ? gpu->bar_size : 0);
	seq_printf(s, "free_bytes: %llu\n", gpu ? (u64)gpu->free_pages * GPU_PAGE : 0);
	seq_printf(s, "allocations: %llu\n", allocs);
	seq_printf(s, "pins: %llu\n", pin_count);
	mutex_unlock(&nvp2p_lock);
	return 0;
}

/* ---- the PCI device ---- */

static int nvp2p_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct nvp2p_gpu *g;
	int ret;

	if (gpu)
		return -EBUSY;
	ret = pci_enable_device_mem(pdev);
	if (ret)
		return ret;
	ret = pci_request_region(pdev, IVSHMEM_BAR, NVP2P_NAME);
	if (ret)
		goto disable;
	g = kzalloc(sizeof(*g), GFP_KERNEL);
	if (!g) {
		ret = -ENOMEM;
		goto release;
	}
	g->pdev = pdev;
	g->bar_phys = pci_resource_start(pdev, IVSHMEM_BAR);
	g->bar_size = pci_resource_len(pdev, IVSHMEM_BAR) & ~(4 * GPU_PAGE - 1);
	g->npages = g->bar_size / GPU_PAGE;
	g->free_pages = g->npages;
	ret = -ENODEV;
	if (g->npages == 0 || g->bar_phys % GPU_PAGE)
		goto free;
	ret = -ENOMEM;
	g->refs = kvcalloc(g->npages, sizeof(*g->refs), GFP_KERNEL);
	if (!g->refs)
		goto free;
	g->bar = ioremap_wc(g->bar_phys, g->bar_size);
	if (!g->bar)
		goto free;
	mutex_lock(&nvp2p_lock);
	gpu = g;
	mutex_unlock(&nvp2p_lock);
	pci_set_drvdata(pdev, g);
	dev_info(&pdev->dev, "%llu MiB of GPU memory at %pa (%u pages of 64 KiB)\n",
		 g->bar_size >> 20, &g->bar_phys, g->npages);
	return 0;
free:
	kvfree(g->refs);
	kfree(g);
release:
	pci_release_region(pdev, IVSHMEM_BAR);
disable:
	pci_disable_device(pdev);
	return ret;
}

static void nvp2p_remove(struct pci_dev *pdev)
{
	struct nvp2p_gpu *g = pci_get_drvdata(pdev);

	mutex_lock(&nvp2p_lock);
	gpu = NULL;
	mutex_unlock(&nvp2p_lock);
	iounmap(g->bar);
	kvfree(g->refs);
	kfree(g);
	pci_release_region(pdev, IVSHMEM_BAR);
	pci_disable_device(pdev);
}

static const struct pci_device_id nvp2p_ids[] = {
	{ PCI_DEVICE(IVSHMEM_VENDOR, IVSHMEM_DEVICE) },
	{ 0 }
};
MODULE_DEVICE_TABLE(pci, nvp2p_ids);

static struct pci_driver nvp2p_pci = {
	.name = NVP2P_NAME,
	.id_table = nvp2p_ids,
	.probe = nvp2p_probe,
	.remove = nvp2p_remove,
};

static int __init nvp2p_init(void)
{
	int ret = pci_register_driver(&nvp2p_pci);

	if (ret)
		return ret;
	if (!gpu) {
		pr_err(NVP2P_NAME ": no ivshmem-plain device (qemu -device ivshmem-plain,memdev=...)\n");
		pci_unregister_driver(&nvp2p_pci);
		return -ENODEV;
	}
	ret = misc_register(&nvp2p_misc);
	if (ret) {
		pci_unregister_driver(&nvp2p_pci);
		return ret;
	}
	proc_create_single("driver/" NVP2P_NAME, 0444, NULL, nvp2p_proc_show);
	return 0;
}

static void __exit nvp2p_exit(void)
{
	remove_proc_entry("driver/" NVP2P_NAME, NULL);
	misc_deregister(&nvp2p_misc);
	pci_unregister_driver(&nvp2p_pci);
}

module_init(nvp2p_init);
module_exit(nvp2p_exit);
