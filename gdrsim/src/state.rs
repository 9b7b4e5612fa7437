//! The emulator's process-wide state behind one lock: the fake GPU, the emulated driver's
//! files, and the dma-buf exports.

use crate::config;
use crate::counters::Counters;
use crate::cuda::CUresult;
use crate::driver::Driver;
use crate::forklock::{self, Mutex};
use crate::gpu::{self, Gpu, Seg};
use crate::real;
use libc::{c_int, c_void, pid_t};
use std::collections::BTreeMap;

/// A dma-buf fd handed out by `cuMemGetHandleForAddressRange`.
#[derive(Debug)]
pub struct Dmabuf {
    /// The exported VRAM pieces, in address order.
    pub segs: Vec<Seg>,
    /// Exported length in bytes.
    pub size: u64,
    /// The VRAM memfd the pieces refer to.
    pub memfd: c_int,
    /// Which GPU generation the pieces belong to.
    pub gen: u64,
    /// The process that exported it.
    pub pid: pid_t,
    /// Inode of the fd's file (the VRAM memfd), to notice an fd closed behind our back.
    pub ino: u64,
}

/// A POSIX fd handed out by `cuMemExportToShareableHandle` (an empty memfd of its own, so
/// that the emulator recognises it by number and inode), not yet closed or imported. It holds
/// the physical allocation.
#[derive(Debug)]
pub struct VmmExport {
    /// The exported `cuMemCreate` handle.
    pub handle: u64,
    /// The physical allocation's size.
    pub size: u64,
    /// Which GPU generation the handle belongs to.
    pub gen: u64,
    /// The process that exported it.
    pub pid: pid_t,
    /// Inode of the fd's file, to notice an fd closed behind our back.
    pub ino: u64,
}

/// Everything the emulator knows about this process.
#[derive(Debug, Default)]
pub struct State {
    /// The fake GPU, once `cuInit` has run (in this or a parent process).
    pub gpu: Option<Gpu>,
    gens: u64,
    /// The emulated `/dev/gdrdrv`.
    pub drv: Driver,
    /// Live dma-buf fds.
    pub dmabufs: BTreeMap<c_int, Dmabuf>,
    /// Host allocations of `cuMemAllocHost`/`cuMemHostAlloc`: address -> length.
    pub host: BTreeMap<u64, u64>,
    empty_fd: Option<c_int>,
    /// Live export fds of `cuMemExportToShareableHandle`.
    pub vmm_exports: BTreeMap<c_int, VmmExport>,
    /// The Vulkan stand-in's objects.
    pub vk: crate::vkstandin::Objects,
}

/// The one lock.
pub static STATE: Mutex<State> = Mutex::new(State {
    gpu: None,
    gens: 0,
    drv: Driver::new(),
    dmabufs: BTreeMap::new(),
    host: BTreeMap::new(),
    empty_fd: None,
    vmm_exports: BTreeMap::new(),
    vk: crate::vkstandin::Objects::new(),
});

/// The calling process's id.
pub fn pid() -> pid_t {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() }
}

impl State {
    /// The GPU of the calling process, if it ran `cuInit`.
    pub fn gpu(&self) -> Option<&Gpu> {
        self.gpu.as_ref().filter(|g| g.pid == pid())
    }

    /// Mutable access to the calling process's GPU.
    pub fn gpu_mut(&mut self) -> Option<&mut Gpu> {
        let me = pid();
        self.gpu.as_mut().filter(|g| g.pid == me)
    }

    /// `cuInit`: makes this process's GPU unless it has one.
    pub fn init_gpu(&mut self) -> Result<(), CUresult> {
        if self.gpu().is_some() {
            return Ok(());
        }
        self.gens += 1;
        let size = config::get().vram_size;
        let backed = crate::vulkan::create_gpu(pid(), self.gens, size)
            .or_else(|| crate::kernel::create_gpu(pid(), self.gens));
        self.gpu = Some(match backed {
            Some(g) => g?,
            None => Gpu::create(pid(), self.gens, size)?,
        });
        Ok(())
    }

    /// BAR1 bytes that GPU generation `gen` uses: its live gdrdrv pins (as pinned), its
    /// live dma-buf exports, which a CPU or a peer maps through BAR1 too, and the physical
    /// allocations the Vulkan stand-in's live imports hold (each once, at its size).
    pub fn bar1_used(&self, gen: u64) -> u64 {
        let exports: u64 = self
            .dmabufs
            .values()
            .filter(|d| d.gen == gen)
            .map(|d| d.size)
            .sum();
        self.drv
            .bar1_used(gen)
            .saturating_add(exports)
            .saturating_add(self.vk.bar1_used(gen))
    }

    /// Forgets the export fd `fd` (closed, or consumed by an import that takes over its hold
    /// when `keep_hold`); the physical allocation loses that holder otherwise.
    pub fn drop_export(&mut self, fd: c_int, keep_hold: bool) -> Option<VmmExport> {
        let e = self.vmm_exports.remove(&fd)?;
        if !keep_hold {
            if let Some(g) = self.gpu_mut().filter(|g| g.gen == e.gen) {
                g.vmm_unhold(e.handle);
            }
            self.reclaim();
        }
        Some(e)
    }

    /// The live export fd `fd` of this process: `None` (and the entry dropped) when the fd
    /// now refers to another file (closed behind the emulator's back and reused).
    pub fn export_of(&mut self, fd: c_int) -> Option<&VmmExport> {
        let ino = self.vmm_exports.get(&fd)?.ino;
        if crate::driver::inode_of(fd) != Some(ino) {
            self.drop_export(fd, false);
            return None;
        }
        self.vmm_exports.get(&fd)
    }

    /// VRAM offsets still held by live pins and dma-bufs of GPU generation `gen`.
    fn held(&self, gen: u64) -> Vec<(u64, u64)> {
        let mut v = self.drv.held(gen);
        v.extend(
            self.dmabufs
                .values()
                .filter(|d| d.gen == gen)
                .flat_map(|d| d.segs.iter().map(|s| (s.phys, s.len))),
        );
        v
    }

    /// Returns freed VRAM that nothing holds any more to the allocators.
    pub fn reclaim(&mut self) {
        let Some(gen) = self.gpu().map(|g| g.gen) else {
            return;
        };
        let held = self.held(gen);
        if let Some(g) = self.gpu_mut() {
            g.reclaim(&held);
        }
    }

    /// Replaces `[va, va + len)` in place with pages of an empty file, so that the next access
    /// raises SIGBUS while the range stays mapped (what the driver's zap does).
    pub fn zap(&mut self, va: u64, len: u64) {
        let fd = match self.empty_fd {
            Some(fd) => fd,
            None => {
                // SAFETY: the name is a NUL-terminated literal.
                let fd =
                    unsafe { libc::memfd_create(c"gdrsim-zapped".as_ptr(), libc::MFD_CLOEXEC) };
                if fd < 0 {
                    return;
                }
                self.empty_fd = Some(fd);
                fd
            }
        };
        // A mapping the Vulkan backing made is handed back to the GPU driver first (which
        // unmaps it), then the empty file takes the freed range, never anything else's.
        let fixed = if crate::vulkan::arena::surrender(va) {
            libc::MAP_FIXED_NOREPLACE
        } else {
            libc::MAP_FIXED
        };
        // SAFETY: [va, va+len) is a mapping of the emulated device that this process made and
        // still has (replacing it in place changes only what backs it), or the range it left
        // just above, which MAP_FIXED_NOREPLACE takes only if nothing else did meanwhile.
        unsafe {
            real::mmap(
                va as *mut c_void,
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | fixed,
                fd,
                0,
            )
        };
        gpu::dontfork(va, len);
    }

    /// Non-persistent mode: fires the invalidation callback of every pin of this process whose
    /// rounded range overlaps the freed bytes `[va, va + len)`.
    pub fn invalidate(&mut self, va: u64, len: u64) {
        if config::get().persistent() {
            return;
        }
        let Some(gen) = self.gpu().map(|g| g.gen) else {
            return;
        };
        for (addr, maplen) in self.drv.invalidate(gen, va, len) {
            self.zap(addr, maplen);
        }
    }

    /// The test interface's counters, as seen by the calling process.
    pub fn counters(&self) -> Counters {
        let me = pid();
        let (open_files, live_pins, live_mappings) = self.drv.counts(me);
        Counters {
            live_pins,
            live_mappings,
            live_allocations: self.gpu().map_or(0, |g| g.live_allocations()),
            open_files,
            ioctls: crate::counters::ioctls(),
            live_dmabufs: self.dmabufs.values().filter(|d| d.pid == me).count() as u64,
            live_vmm_exports: self.vmm_exports.values().filter(|e| e.pid == me).count() as u64,
            injected_faults: crate::fail::injected(),
            ..self.vk.counters(me)
        }
    }
}

/// Takes the lock before a fork so that the child gets a consistent copy.
pub fn lock_for_fork() {
    std::mem::forget(STATE.lock());
}

/// Undoes [`lock_for_fork`] in the parent.
pub fn unlock_after_fork() {
    // SAFETY: only called by the parent's fork handler after lock_for_fork took the lock on
    // this very thread, so the lock is held by us.
    unsafe { STATE.force_unlock() };
}

/// The child's side of [`lock_for_fork`]: the lock is made new (unlocked, no waiters), since
/// the parent's threads that may have been waiting for it do not exist here.
pub fn reset_after_fork() {
    // SAFETY: called only by the child's fork handler, in a process of one thread, after
    // lock_for_fork held the lock across the fork, so the state is consistent.
    unsafe { forklock::reset_in_child(&STATE) };
}
