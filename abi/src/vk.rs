//! Vulkan: the declarations are `ash`'s (`ash::vk`, built without its loader, so nothing is
//! linked or loaded and the library still needs only libc), re-exported whole; this module
//! adds what the workspace decides on them: the application every instance names
//! ([`application_info`]) and the memory type that maps VRAM through the BAR
//! ([`choose_memory_type`]).

pub use ash::vk::*;
use core::ffi::CStr;

/// An application and engine both named `name`, version 1, asking for API version 1.1: what
/// every instance of the workspace is created for.
pub fn application_info(name: &CStr) -> ApplicationInfo<'_> {
    ApplicationInfo::default()
        .application_name(name)
        .application_version(1)
        .engine_name(name)
        .engine_version(1)
        .api_version(API_VERSION_1_1)
}

/// One memory type of a device, with the size of its heap: what [`choose_memory_type`]
/// decides on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryTypeInfo {
    /// Index in the device's memory type list.
    pub index: u32,
    /// Its `VkMemoryPropertyFlags`.
    pub flags: MemoryPropertyFlags,
    /// Index of its heap.
    pub heap_index: u32,
    /// Size of its heap in bytes.
    pub heap_size: u64,
}

impl MemoryTypeInfo {
    /// Every memory type that `properties` lists, with its heap.
    pub fn all(properties: &PhysicalDeviceMemoryProperties) -> impl Iterator<Item = Self> + '_ {
        let count = (properties.memory_type_count as usize).min(MAX_MEMORY_TYPES);
        properties.memory_types[..count]
            .iter()
            .zip(0u32..)
            .map(|(t, index)| MemoryTypeInfo {
                index,
                flags: t.property_flags,
                heap_index: t.heap_index,
                heap_size: properties
                    .memory_heaps
                    .get(t.heap_index as usize)
                    .map_or(0, |h| h.size),
            })
    }
}

/// Picks the memory type that maps VRAM through the BAR: DEVICE_LOCAL and HOST_VISIBLE are
/// required; HOST_COHERENT is preferred, HOST_CACHED avoided, then the largest heap wins and
/// then the lowest index. `None` when no type qualifies.
pub fn choose_memory_type(types: &[MemoryTypeInfo]) -> Option<MemoryTypeInfo> {
    let need = MemoryPropertyFlags::DEVICE_LOCAL | MemoryPropertyFlags::HOST_VISIBLE;
    types
        .iter()
        .filter(|t| t.flags.contains(need))
        .max_by_key(|t| {
            let coherent = t.flags.contains(MemoryPropertyFlags::HOST_COHERENT);
            let uncached = !t.flags.contains(MemoryPropertyFlags::HOST_CACHED);
            (coherent, uncached, t.heap_size, core::cmp::Reverse(t.index))
        })
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(index: u32, flags: u32, heap_size: u64) -> MemoryTypeInfo {
        MemoryTypeInfo {
            index,
            flags: MemoryPropertyFlags::from_raw(flags),
            heap_index: 0,
            heap_size,
        }
    }

    #[test]
    fn memory_types_are_listed_with_their_heaps() {
        let mut p = PhysicalDeviceMemoryProperties {
            memory_type_count: 2,
            memory_heap_count: 2,
            ..Default::default()
        };
        p.memory_types[0].heap_index = 1;
        p.memory_types[1].property_flags = MemoryPropertyFlags::DEVICE_LOCAL;
        p.memory_types[1].heap_index = 7; // no such heap: size 0
        p.memory_heaps[1].size = 1 << 30;
        let mut all = MemoryTypeInfo::all(&p);
        assert_eq!(
            all.next(),
            Some(MemoryTypeInfo {
                heap_index: 1,
                ..t(0, 0, 1 << 30)
            })
        );
        assert_eq!(
            all.next(),
            Some(MemoryTypeInfo {
                heap_index: 7,
                ..t(1, 1, 0)
            })
        );
        assert_eq!(all.next(), None);
    }

    #[test]
    fn memory_type_needs_device_local_and_host_visible() {
        assert_eq!(
            choose_memory_type(&[t(0, 0x1, 1 << 30), t(1, 0x6, 1 << 30), t(2, 0xE, 1 << 30)]),
            None
        );
        assert_eq!(choose_memory_type(&[]), None);
    }

    #[test]
    fn memory_type_prefers_coherent_uncached_then_largest_heap() {
        // An NVIDIA-like list: VRAM only (0x1), system memory (0x6, 0xE), BAR (0x7) twice.
        let types = [
            t(0, 0x1, 140 << 30),
            t(1, 0x6, 64 << 30),
            t(2, 0x3, 140 << 30),
            t(3, 0x7, 256 << 20),
            t(4, 0x7, 140 << 30),
            t(5, 0xF, 140 << 30),
        ];
        assert_eq!(choose_memory_type(&types).map(|m| m.index), Some(4));
        // Without any coherent one, the non-coherent BAR type qualifies.
        assert_eq!(choose_memory_type(&types[..3]).map(|m| m.index), Some(2));
        // A cached one is taken when it is all there is (lavapipe: 0xF).
        assert_eq!(
            choose_memory_type(&[t(0, 0xF, 1 << 30)]).map(|m| m.index),
            Some(0)
        );
        // Equal candidates: the lowest index.
        assert_eq!(
            choose_memory_type(&[t(0, 0x1, 9), t(1, 0x7, 9), t(2, 0x7, 9)]).map(|m| m.index),
            Some(1)
        );
    }
}
