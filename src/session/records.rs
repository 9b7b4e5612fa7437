//! The records behind a `gdr_t` ([`SessionRecord`]) and a `gdr_mh_t` ([`HandleRecord`]):
//! upstream's layouts first, which gdrcopy's own tests read, then this library's fields.

use super::state;
use super::HANDLES;
use crate::backend::{BackendKind, Mapping, MappingType, Opened, Pin};
use crate::ffi::types::{INFO_MAPPED_BIT, INFO_WC_MAPPING_BIT};
use crate::registry::Record;
use parking_lot::RwLock;
use std::sync::atomic::{
    AtomicI32, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

/// What a `gdr_t` points at. The first 48 bytes follow upstream's `struct gdr`.
/// Aligned (and so sized) to a power of two, as [`HandleRecord`], so that validating an
/// address is a mask.
#[repr(C, align(256))]
pub struct SessionRecord {
    /// `fd` (int@0): the driver fd, -1 for DMA-BUF and once closed.
    pub fd: AtomicI32,
    /// `memhs` (list head@8): always NULL; a session's handles are the registry's records
    /// that name it as their owner.
    pub memhs: AtomicUsize,
    /// `page_size` (@16): host page size.
    pub page_size: AtomicUsize,
    /// `page_mask` (@24): `!(page_size - 1)`.
    pub page_mask: AtomicUsize,
    /// `page_shift` (u8@32).
    pub page_shift: AtomicU8,
    /// `gdrdrv_version` (u32@36): 0 for DMA-BUF.
    pub gdrdrv_version: AtomicU32,
    /// `cache_backend` (u32@40): 0 gdrdrv, 1 DMA-BUF, 2 Vulkan import.
    pub cache_backend: AtomicU32,
    /// The [`crate::process::token`] of the process that opened the session, 0 when the slot is
    /// free. Kept outside the lock so that a child process is refused before it touches a
    /// lock that a thread of its parent may have held at fork time (that thread does not
    /// exist in the child).
    pub(super) opener: AtomicU64,
    /// The open state; `None` when the slot is free. Every call holds it shared, `gdr_open`
    /// and `gdr_close` exclusive.
    pub(super) open: RwLock<Option<Open>>,
    /// The pid of the process that opened the session, for log lines.
    pub(super) opener_pid: AtomicI32,
}

/// A live session.
pub(super) struct Open {
    pub(super) backend: Opened,
    /// Unique per `gdr_open`; handle records name their owner by it.
    pub(super) serial: u64,
    pub(super) page_size: usize,
    /// Handles pinned and not yet released.
    pub(super) live: AtomicUsize,
}

/// What a `gdr_mh_t` points at. The first 104 bytes follow upstream's `gdr_memh_t`.
/// Aligned (and so sized) to a power of two so that validating an address is a mask, not a
/// division.
#[repr(C, align(256))]
pub struct HandleRecord {
    pub(super) le_next: AtomicUsize,
    pub(super) le_prev: AtomicUsize,
    /// `mapping_type` (@16): the current mapping type.
    pub mapping_type: AtomicU32,
    pub(super) _pad0: AtomicU32,
    /// `handle` (u32@24): gdrdrv handle (truncated) or, for DMA-BUF, the dma-buf fd.
    pub driver_handle: AtomicU32,
    pub(super) _pad1: AtomicU32,
    /// DMA-BUF arm (also filled for the Vulkan import, the other backend without gdrdrv):
    /// `va`@32, `page_offset`@40, `mapped_size`@48, `page_size`@56.
    pub(super) dmabuf_va: AtomicU64,
    pub(super) dmabuf_page_offset: AtomicU64,
    pub(super) dmabuf_mapped_size: AtomicU64,
    pub(super) dmabuf_page_size: AtomicU32,
    pub(super) _pad2: AtomicU32,
    /// `tm_cycles`@64, `cycles_per_ms`@72, bitfield unit (`mapped`, `wc_mapping`)@76.
    pub(super) dmabuf_tm_cycles: AtomicU64,
    pub(super) dmabuf_cycles_per_ms: AtomicU32,
    pub(super) dmabuf_bits: AtomicU32,
    /// Backend mapping type@80, `cpu_mapped_va`@88, `cpu_mapped_len`@96.
    pub(super) dmabuf_backend_type: AtomicU32,
    pub(super) _pad3: AtomicU32,
    pub(super) dmabuf_cpu_va: AtomicUsize,
    pub(super) dmabuf_cpu_len: AtomicUsize,
    // ---- end of upstream's 104 bytes ----
    /// Serial of the owning session.
    pub(super) owner: AtomicU64,
    /// One of [`state`].
    pub(super) state: AtomicU32,
    pub(super) pin_va: AtomicU64,
    pub(super) pin_size: AtomicU64,
    pub(super) pin_handle: AtomicU64,
    pub(super) map_addr: AtomicUsize,
    pub(super) map_len: AtomicUsize,
    /// Offset of the pinned address in its first page (below a page, so below 2^32).
    pub(super) pin_offset: AtomicU32,
    pub(super) map_kind: AtomicU16,
    pub(super) pin_fixed: AtomicU16,
    /// The allocation number of this pin ([`crate::registry::Registry::allocate`]): `gdr_close`
    /// releases a session's handles newest first.
    pub(super) seq: AtomicU64,
}

impl Record for SessionRecord {
    fn new_free() -> Self {
        SessionRecord {
            fd: AtomicI32::new(-1),
            memhs: AtomicUsize::new(0),
            page_size: AtomicUsize::new(0),
            page_mask: AtomicUsize::new(0),
            page_shift: AtomicU8::new(0),
            gdrdrv_version: AtomicU32::new(0),
            cache_backend: AtomicU32::new(0),
            opener: AtomicU64::new(0),
            opener_pid: AtomicI32::new(0),
            open: RwLock::new(None),
        }
    }
}

impl Record for HandleRecord {
    fn new_free() -> Self {
        HandleRecord {
            le_next: AtomicUsize::new(0),
            le_prev: AtomicUsize::new(0),
            mapping_type: AtomicU32::new(0),
            _pad0: AtomicU32::new(0),
            driver_handle: AtomicU32::new(0),
            _pad1: AtomicU32::new(0),
            dmabuf_va: AtomicU64::new(0),
            dmabuf_page_offset: AtomicU64::new(0),
            dmabuf_mapped_size: AtomicU64::new(0),
            dmabuf_page_size: AtomicU32::new(0),
            _pad2: AtomicU32::new(0),
            dmabuf_tm_cycles: AtomicU64::new(0),
            dmabuf_cycles_per_ms: AtomicU32::new(0),
            dmabuf_bits: AtomicU32::new(0),
            dmabuf_backend_type: AtomicU32::new(0),
            _pad3: AtomicU32::new(0),
            dmabuf_cpu_va: AtomicUsize::new(0),
            dmabuf_cpu_len: AtomicUsize::new(0),
            state: AtomicU32::new(state::FREE),
            owner: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            pin_handle: AtomicU64::new(0),
            pin_va: AtomicU64::new(0),
            pin_size: AtomicU64::new(0),
            pin_offset: AtomicU32::new(0),
            pin_fixed: AtomicU16::new(0),
            map_kind: AtomicU16::new(0),
            map_addr: AtomicUsize::new(0),
            map_len: AtomicUsize::new(0),
        }
    }
}

pub(super) fn kind_of(raw: u32) -> MappingType {
    MappingType::from_raw(raw).unwrap_or(MappingType::None)
}

impl HandleRecord {
    /// The address C sees as `gdr_mh_t.h`.
    pub fn address(&'static self) -> u64 {
        self as *const HandleRecord as usize as u64
    }

    pub(super) fn pin(&self) -> Pin {
        Pin {
            handle: self.pin_handle.load(Ordering::Acquire),
            va: self.pin_va.load(Ordering::Acquire),
            mapped_size: self.pin_size.load(Ordering::Acquire),
            page_offset: u64::from(self.pin_offset.load(Ordering::Acquire)),
            fixed_type: kind_of(self.pin_fixed.load(Ordering::Acquire).into()),
        }
    }

    pub(super) fn mapping(&self) -> Mapping {
        Mapping {
            addr: self.map_addr.load(Ordering::Acquire),
            len: self.map_len.load(Ordering::Acquire),
            kind: kind_of(self.map_kind.load(Ordering::Acquire).into()),
        }
    }

    pub(super) fn set_pin(&self, p: &Pin, owner: u64, kind: BackendKind, page_size: usize) {
        self.pin_handle.store(p.handle, Ordering::Release);
        self.pin_va.store(p.va, Ordering::Release);
        self.pin_size.store(p.mapped_size, Ordering::Release);
        // Both backends pin from the start of a page (a GPU page for gdrdrv, a host page for
        // DMA-BUF), so the offset is below a page.
        debug_assert!(p.page_offset < 1 << 32);
        self.pin_offset
            .store(p.page_offset as u32, Ordering::Release);
        self.pin_fixed.store(p.fixed_type as u16, Ordering::Release);
        self.owner.store(owner, Ordering::Release);
        self.mapping_type
            .store(MappingType::None as u32, Ordering::Release);
        // Upstream keeps the kernel handle as a uint32_t (DMA-BUF: the fd, an int).
        self.driver_handle.store(p.handle as u32, Ordering::Release);
        if kind != BackendKind::Gdrdrv {
            self.dmabuf_va.store(p.va, Ordering::Release);
            self.dmabuf_page_offset
                .store(p.page_offset, Ordering::Release);
            self.dmabuf_mapped_size
                .store(p.mapped_size, Ordering::Release);
            self.dmabuf_page_size
                .store(page_size as u32, Ordering::Release);
            self.dmabuf_backend_type
                .store(p.fixed_type as u32, Ordering::Release);
            // The mapping fields as the previous pin of this record left them (see `free`).
            self.set_mapping(None, kind);
        }
    }

    /// Records `m` as this handle's mapping and counts it for the copy path's fences.
    pub(super) fn record_mapping(&self, m: &Mapping, kind: BackendKind) {
        self.set_mapping(Some(m), kind);
        crate::copy::created(m.kind);
    }

    /// Undoes [`HandleRecord::record_mapping`] once the mapping, of type `t`, is gone.
    pub(super) fn forget_mapping(&self, t: MappingType, kind: BackendKind) {
        crate::copy::destroyed(t);
        self.set_mapping(None, kind);
    }

    pub(super) fn set_mapping(&self, m: Option<&Mapping>, kind: BackendKind) {
        let (addr, len, t) = m.map_or((0, 0, MappingType::None), |m| (m.addr, m.len, m.kind));
        self.map_addr.store(addr, Ordering::Release);
        self.map_len.store(len, Ordering::Release);
        self.map_kind.store(t as u16, Ordering::Release);
        self.mapping_type.store(t as u32, Ordering::Release);
        if kind != BackendKind::Gdrdrv {
            let mut bits = 0;
            if m.is_some() {
                bits |= INFO_MAPPED_BIT;
            }
            if t == MappingType::WriteCombining {
                bits |= INFO_WC_MAPPING_BIT;
            }
            self.dmabuf_bits.store(bits, Ordering::Release);
            self.dmabuf_cpu_va.store(addr, Ordering::Release);
            self.dmabuf_cpu_len.store(len, Ordering::Release);
        }
    }

    /// Returns the record to its free state and to the registry. Only the state and the owner
    /// change: the other fields are read only while the state says pinned or mapped, and the
    /// next pin sets them again. The owner goes to 0 so that a record that another session
    /// reserves next never names this one.
    pub(super) fn free(&'static self) {
        self.owner.store(0, Ordering::Relaxed);
        self.state.store(state::FREE, Ordering::Release);
        HANDLES.release(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn session_record_keeps_upstreams_struct_gdr_layout() {
        assert_eq!(offset_of!(SessionRecord, fd), 0);
        assert_eq!(offset_of!(SessionRecord, memhs), 8);
        assert_eq!(offset_of!(SessionRecord, page_size), 16);
        assert_eq!(offset_of!(SessionRecord, page_mask), 24);
        assert_eq!(offset_of!(SessionRecord, page_shift), 32);
        assert_eq!(offset_of!(SessionRecord, gdrdrv_version), 36);
        assert_eq!(
            offset_of!(SessionRecord, cache_backend),
            gdrapi_abi::gdr::CACHE_BACKEND_OFFSET
        );
        assert!(offset_of!(SessionRecord, open) >= 48);
    }

    #[test]
    fn a_free_handle_record_is_all_zero() {
        // The handle registry relies on it: its slabs are fresh (zero) wipe-on-fork pages,
        // used as free records without being written.
        let r = HandleRecord::new_free();
        let fields = [
            r.le_next.load(Ordering::Relaxed) as u64,
            r.le_prev.load(Ordering::Relaxed) as u64,
            u64::from(r.mapping_type.load(Ordering::Relaxed)),
            u64::from(r._pad0.load(Ordering::Relaxed)),
            u64::from(r.driver_handle.load(Ordering::Relaxed)),
            u64::from(r._pad1.load(Ordering::Relaxed)),
            r.dmabuf_va.load(Ordering::Relaxed),
            r.dmabuf_page_offset.load(Ordering::Relaxed),
            r.dmabuf_mapped_size.load(Ordering::Relaxed),
            u64::from(r.dmabuf_page_size.load(Ordering::Relaxed)),
            u64::from(r._pad2.load(Ordering::Relaxed)),
            r.dmabuf_tm_cycles.load(Ordering::Relaxed),
            u64::from(r.dmabuf_cycles_per_ms.load(Ordering::Relaxed)),
            u64::from(r.dmabuf_bits.load(Ordering::Relaxed)),
            u64::from(r.dmabuf_backend_type.load(Ordering::Relaxed)),
            u64::from(r._pad3.load(Ordering::Relaxed)),
            r.dmabuf_cpu_va.load(Ordering::Relaxed) as u64,
            r.dmabuf_cpu_len.load(Ordering::Relaxed) as u64,
            u64::from(r.state.load(Ordering::Relaxed)),
            r.owner.load(Ordering::Relaxed),
            r.seq.load(Ordering::Relaxed),
            r.pin_handle.load(Ordering::Relaxed),
            r.pin_va.load(Ordering::Relaxed),
            r.pin_size.load(Ordering::Relaxed),
            u64::from(r.pin_offset.load(Ordering::Relaxed)),
            u64::from(r.pin_fixed.load(Ordering::Relaxed)),
            u64::from(r.map_kind.load(Ordering::Relaxed)),
            r.map_addr.load(Ordering::Relaxed) as u64,
            r.map_len.load(Ordering::Relaxed) as u64,
        ];
        assert!(fields.iter().all(|&f| f == 0), "{fields:?}");
        assert_eq!(state::FREE, 0);
    }

    #[test]
    fn handle_record_keeps_upstreams_memh_layout() {
        assert_eq!(offset_of!(HandleRecord, le_next), 0);
        assert_eq!(offset_of!(HandleRecord, le_prev), 8);
        assert_eq!(offset_of!(HandleRecord, mapping_type), 16);
        assert_eq!(offset_of!(HandleRecord, driver_handle), 24);
        assert_eq!(offset_of!(HandleRecord, dmabuf_va), 32);
        assert_eq!(offset_of!(HandleRecord, dmabuf_page_offset), 40);
        assert_eq!(offset_of!(HandleRecord, dmabuf_mapped_size), 48);
        assert_eq!(offset_of!(HandleRecord, dmabuf_page_size), 56);
        assert_eq!(offset_of!(HandleRecord, dmabuf_tm_cycles), 64);
        assert_eq!(offset_of!(HandleRecord, dmabuf_cycles_per_ms), 72);
        assert_eq!(offset_of!(HandleRecord, dmabuf_bits), 76);
        assert_eq!(offset_of!(HandleRecord, dmabuf_backend_type), 80);
        assert_eq!(offset_of!(HandleRecord, dmabuf_cpu_va), 88);
        assert_eq!(offset_of!(HandleRecord, dmabuf_cpu_len), 96);
        assert!(offset_of!(HandleRecord, owner) >= 104);
        assert_eq!(std::mem::size_of::<HandleRecord>(), 256);
    }
}
