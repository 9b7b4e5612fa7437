//! The stand-in's objects: instances, their physical device, devices and memory objects, kept
//! in the emulator's state (one lock for them, the export fds and the GPU).
//!
//! Dispatchable handles (`VkInstance`, `VkPhysicalDevice`, `VkDevice`) are addresses of small
//! heap blocks of the stand-in, as a driver's are; memory objects are numbers. A handle is
//! only ever looked up in these tables, never dereferenced, so a stale or made-up value is
//! simply unknown. Every object records the process that made it: a forked child inherits
//! the tables but may not use its parent's objects.

use crate::counters::Counters;
use libc::pid_t;
use std::collections::BTreeMap;

/// First word of a dispatchable object's block ("gdrsimVK").
const MAGIC: u64 = 0x4b56_6d69_7372_6467;
/// Memory object handles count up from here, far from small integers a caller might pass.
const MEMORY_BASE: u64 = 0x766b_6d00_0000_0000;

/// A `VkInstance` and the one physical device it enumerates.
#[derive(Debug)]
pub struct Instance {
    /// The creating process.
    pub pid: pid_t,
    /// The instance's `VkPhysicalDevice`.
    pub physical: usize,
}

/// A `VkDevice`.
#[derive(Debug)]
pub struct Device {
    /// The creating process.
    pub pid: pid_t,
    /// The physical device it was created on.
    pub physical: usize,
    /// Whether `VK_KHR_external_memory_fd` was enabled.
    pub external_fd: bool,
}

/// A CPU mapping made by `vkMapMemory` (it holds no BAR1: the import does).
#[derive(Clone, Copy, Debug)]
pub struct Mapping {
    /// Start of the page-aligned mapping.
    pub base: u64,
    /// Its length in bytes.
    pub len: u64,
}

/// A `VkDeviceMemory`: an import of a VMM export fd, holding its physical allocation.
#[derive(Debug)]
pub struct Memory {
    /// The creating process.
    pub pid: pid_t,
    /// The device it was allocated on.
    pub device: usize,
    /// GPU generation of the physical allocation.
    pub gen: u64,
    /// The `cuMemCreate` handle of the physical allocation.
    pub handle: u64,
    /// `allocationSize` (the physical allocation's size).
    pub size: u64,
    /// Whether its memory type is HOST_VISIBLE.
    pub host_visible: bool,
    /// The live `vkMapMemory` mapping, if any.
    pub map: Option<Mapping>,
}

/// Every object of the stand-in.
#[derive(Debug, Default)]
pub struct Objects {
    instances: BTreeMap<usize, Instance>,
    /// Physical device handle -> its instance.
    physicals: BTreeMap<usize, usize>,
    devices: BTreeMap<usize, Device>,
    memories: BTreeMap<u64, Memory>,
    next_memory: u64,
    /// Imports made so far by the process named (a forked child starts again from 0).
    made: (pid_t, u64),
}

/// A fresh dispatchable handle: the address of a small block of our own.
fn new_handle() -> usize {
    Box::into_raw(Box::new([MAGIC, 0u64])) as usize
}

/// Frees a block [`new_handle`] made.
fn free_handle(h: usize) {
    // SAFETY: `h` came from Box::into_raw in new_handle and was removed from the tables just
    // before, so this is its only release.
    drop(unsafe { Box::from_raw(h as *mut [u64; 2]) });
}

impl Objects {
    /// No objects.
    pub const fn new() -> Self {
        Objects {
            instances: BTreeMap::new(),
            physicals: BTreeMap::new(),
            devices: BTreeMap::new(),
            memories: BTreeMap::new(),
            next_memory: 0,
            made: (0, 0),
        }
    }

    /// Makes an instance for process `pid`; returns its handle.
    pub fn create_instance(&mut self, pid: pid_t) -> usize {
        let (h, physical) = (new_handle(), new_handle());
        self.instances.insert(h, Instance { pid, physical });
        self.physicals.insert(physical, h);
        h
    }

    /// The instance `h` if process `pid` made it.
    pub fn instance(&self, h: usize, pid: pid_t) -> Option<&Instance> {
        self.instances.get(&h).filter(|i| i.pid == pid)
    }

    /// Whether `h` is a physical device of an instance of process `pid`.
    pub fn physical(&self, h: usize, pid: pid_t) -> bool {
        self.physicals
            .get(&h)
            .is_some_and(|i| self.instance(*i, pid).is_some())
    }

    /// Destroys instance `h` of process `pid` with every device made from it (and their memory
    /// objects); returns the mappings to unmap and the physical allocations to let go of.
    pub fn destroy_instance(&mut self, h: usize, pid: pid_t) -> Vec<Memory> {
        if self.instance(h, pid).is_none() {
            return Vec::new();
        }
        let Some(inst) = self.instances.remove(&h) else {
            return Vec::new();
        };
        let devices: Vec<usize> = self
            .devices
            .iter()
            .filter(|(_, d)| d.physical == inst.physical)
            .map(|(&d, _)| d)
            .collect();
        let mut freed = Vec::new();
        for d in devices {
            freed.extend(self.destroy_device(d, pid));
        }
        self.physicals.remove(&inst.physical);
        free_handle(inst.physical);
        free_handle(h);
        freed
    }

    /// Makes a device on physical device `physical` for process `pid`.
    pub fn create_device(&mut self, physical: usize, pid: pid_t, external_fd: bool) -> usize {
        let h = new_handle();
        self.devices.insert(
            h,
            Device {
                pid,
                physical,
                external_fd,
            },
        );
        h
    }

    /// The device `h` if process `pid` made it.
    pub fn device(&self, h: usize, pid: pid_t) -> Option<&Device> {
        self.devices.get(&h).filter(|d| d.pid == pid)
    }

    /// Destroys device `h` of process `pid` and the memory objects still allocated on it;
    /// returns those memory objects (their mappings to unmap, their holds to drop).
    pub fn destroy_device(&mut self, h: usize, pid: pid_t) -> Vec<Memory> {
        if self.device(h, pid).is_none() {
            return Vec::new();
        }
        self.devices.remove(&h);
        free_handle(h);
        let mems: Vec<u64> = self
            .memories
            .iter()
            .filter(|(_, m)| m.device == h)
            .map(|(&k, _)| k)
            .collect();
        mems.into_iter()
            .filter_map(|k| self.memories.remove(&k))
            .collect()
    }

    /// Records a memory object (an import, counted in `vk_imports_made`); returns its handle.
    pub fn add_memory(&mut self, m: Memory) -> u64 {
        if self.made.0 != m.pid {
            self.made = (m.pid, 0);
        }
        self.made.1 += 1;
        self.next_memory += 1;
        let h = MEMORY_BASE + self.next_memory;
        self.memories.insert(h, m);
        h
    }

    /// The memory object `h` of device `device` of process `pid`.
    pub fn memory_mut(&mut self, device: usize, h: u64, pid: pid_t) -> Option<&mut Memory> {
        self.memories
            .get_mut(&h)
            .filter(|m| m.device == device && m.pid == pid)
    }

    /// Removes the memory object `h` of device `device` of process `pid`.
    pub fn remove_memory(&mut self, device: usize, h: u64, pid: pid_t) -> Option<Memory> {
        self.memory_mut(device, h, pid)?;
        self.memories.remove(&h)
    }

    /// The live imports of the physical allocation `handle` of GPU generation `gen`, on every
    /// device of the process (a generation belongs to one process).
    fn imports_of(&self, gen: u64, handle: u64) -> impl Iterator<Item = &Memory> {
        self.memories
            .values()
            .filter(move |m| m.gen == gen && m.handle == handle)
    }

    /// Whether the physical allocation `handle` of GPU generation `gen` holds BAR1: it does
    /// while it has a live import.
    pub fn holds_bar1(&self, gen: u64, handle: u64) -> bool {
        self.imports_of(gen, handle).next().is_some()
    }

    /// BAR1 bytes the imports of GPU generation `gen` hold: each physical allocation with a
    /// live import, once, at its size, however many imports of it are live (as NVIDIA's
    /// driver does; mappings hold none).
    pub fn bar1_used(&self, gen: u64) -> u64 {
        let mut held = BTreeMap::new();
        for m in self.memories.values().filter(|m| m.gen == gen) {
            held.insert(m.handle, m.size);
        }
        held.values().sum()
    }

    /// Whether one more import of `size` bytes of the physical allocation `handle` of GPU
    /// generation `gen` (one process's GPU) stays within `limit` (`GDRSIM_VK_IMPORT_LIMIT`):
    /// the process's live imports, each at its allocation's size, plus each allocation they
    /// import once more, may not pass `limit`. That one sum fits every refusal measured on
    /// NVIDIA's driver (README, "Fidelity limits of the Vulkan stand-in"); this is the one
    /// place the limit is decided.
    pub fn import_allowed(&self, gen: u64, handle: u64, size: u64, limit: u64) -> bool {
        let mut allocations = BTreeMap::new();
        let mut imports = 0u64;
        for m in self.memories.values().filter(|m| m.gen == gen) {
            allocations.insert(m.handle, m.size);
            imports = imports.saturating_add(m.size);
        }
        allocations.insert(handle, size);
        let total = allocations
            .values()
            .fold(imports.saturating_add(size), |t, &a| t.saturating_add(a));
        total <= limit
    }

    /// The stand-in's counters for process `me` (the other fields zero).
    pub fn counters(&self, me: pid_t) -> Counters {
        let mems = self.memories.values().filter(|m| m.pid == me);
        Counters {
            live_vk_imports: mems.clone().count() as u64,
            live_vk_mappings: mems.clone().filter(|m| m.map.is_some()).count() as u64,
            live_vk_devices: self.devices.values().filter(|d| d.pid == me).count() as u64,
            live_vk_instances: self.instances.values().filter(|i| i.pid == me).count() as u64,
            vk_imports_made: if self.made.0 == me { self.made.1 } else { 0 },
            live_vk_import_bytes: mems.map(|m| m.size).sum(),
            ..Counters::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(pid: pid_t, device: usize, mapped: bool) -> Memory {
        Memory {
            pid,
            device,
            gen: 7,
            handle: 1,
            size: 2 << 20,
            host_visible: true,
            map: mapped.then_some(Mapping {
                base: 0x1000,
                len: 4096,
            }),
        }
    }

    #[test]
    fn objects_belong_to_their_process_and_go_with_their_parents() {
        let mut o = Objects::new();
        let i = o.create_instance(10);
        let pd = o.instance(i, 10).unwrap().physical;
        assert!(o.physical(pd, 10));
        assert!(
            !o.physical(pd, 11),
            "a forked child may not use its parent's objects"
        );
        assert!(o.instance(i, 11).is_none());
        assert!(!o.physical(i, 10), "an instance is not a physical device");
        let d = o.create_device(pd, 10, true);
        assert!(o.device(d, 10).is_some_and(|d| d.external_fd));
        assert!(o.device(d, 11).is_none());
        let m1 = o.add_memory(memory(10, d, true));
        let m2 = o.add_memory(memory(10, d, false));
        assert_ne!(m1, m2);
        assert!(
            o.memory_mut(d + 1, m1, 10).is_none(),
            "another device's memory"
        );
        assert!(o.memory_mut(d, m1, 11).is_none());
        let c = o.counters(10);
        assert_eq!(
            (
                c.live_vk_instances,
                c.live_vk_devices,
                c.live_vk_imports,
                c.live_vk_mappings
            ),
            (1, 1, 2, 1)
        );
        assert_eq!(
            (c.vk_imports_made, c.live_vk_import_bytes),
            (2, 4 << 20),
            "each import counts at its allocation's size"
        );
        assert_eq!(o.counters(11), Counters::default());
        assert_eq!(
            o.bar1_used(7),
            2 << 20,
            "two imports of one allocation: once"
        );
        assert_eq!(o.bar1_used(8), 0);
        assert!(o.remove_memory(d, m2, 11).is_none());
        assert!(o.remove_memory(d, m2, 10).is_some());
        assert!(
            o.destroy_instance(i, 11).is_empty(),
            "not the child's to destroy"
        );
        let freed = o.destroy_instance(i, 10);
        assert_eq!(
            freed.len(),
            1,
            "the device's last memory object goes with it"
        );
        assert_eq!(
            o.counters(10),
            Counters {
                vk_imports_made: 2,
                ..Counters::default()
            },
            "a running total"
        );
        assert!(o.device(d, 10).is_none());
        assert!(!o.physical(pd, 10));
    }

    #[test]
    fn bar1_per_allocation_and_the_import_limit_per_process() {
        const MIB: u64 = 1 << 20;
        let mut o = Objects::new();
        let i = o.create_instance(10);
        let pd = o.instance(i, 10).unwrap().physical;
        let (d1, d2) = (o.create_device(pd, 10, true), o.create_device(pd, 10, true));
        let import = |device, handle, size| Memory {
            handle,
            size,
            ..memory(10, device, false)
        };
        let limit = 10 * MIB;
        assert!(!o.holds_bar1(7, 1));
        assert!(
            o.import_allowed(7, 1, 2 * MIB, limit),
            "2 + its allocation 2"
        );
        assert!(
            !o.import_allowed(7, 3, 6 * MIB, limit),
            "6 + its allocation 6 is past 10"
        );
        let a1 = o.add_memory(import(d1, 1, 2 * MIB));
        assert!(o.holds_bar1(7, 1));
        assert!(!o.holds_bar1(8, 1), "another GPU generation's allocation");
        o.add_memory(import(d1, 1, 2 * MIB));
        o.add_memory(import(d2, 1, 2 * MIB));
        assert!(
            o.import_allowed(7, 1, 2 * MIB, limit),
            "four imports and the allocation: 10, at the limit"
        );
        assert!(
            !o.import_allowed(7, 2, 2 * MIB, limit),
            "a new allocation counts its import and itself: 12"
        );
        assert!(
            o.import_allowed(8, 2, 2 * MIB, limit),
            "another process's GPU"
        );
        assert!(o.remove_memory(d1, a1, 10).is_some());
        assert!(o.import_allowed(7, 2, 2 * MIB, limit), "a free makes room");
        o.add_memory(import(d2, 2, 4 * MIB));
        assert_eq!(o.bar1_used(7), 6 * MIB, "each allocation once, at its size");
        o.destroy_device(d2, 10);
        assert_eq!(o.bar1_used(7), 2 * MIB);
        o.destroy_device(d1, 10);
        assert_eq!(o.bar1_used(7), 0, "released with the last import");
        assert!(!o.holds_bar1(7, 1));
        let c = o.counters(10);
        assert_eq!((c.vk_imports_made, c.live_vk_import_bytes), (4, 0));
        // A forked child (its copy of the tables) counts from 0, then its own imports.
        assert_eq!(o.counters(11).vk_imports_made, 0);
        o.add_memory(memory(11, d1, false));
        assert_eq!(o.counters(11).vk_imports_made, 1);
        o.destroy_instance(i, 10);
    }
}
