//! What the backends whose pins fix their mapping type when they pin, and whose maps start at
//! the pin's first byte, share: DMA-BUF and the Vulkan import. [`accept_map`] decides on a map
//! (each backend words its refusals' log lines), [`info`] is what such a pin reports.

use super::{Info, Mapping, MappingType, Pin};
use crate::error::Error;

/// The checks of a map of `size` bytes of `pin` as `request`: the type asked for is the
/// default or the one the pin fixed, the size is more than 0 and at most the pinned range, and
/// the pin starts a page (`page_offset` 0), since its mapping starts at the pin's address.
pub fn accept_map(pin: &Pin, size: usize, request: MappingType) -> Result<(), Refusal> {
    if request != MappingType::None && request != pin.fixed_type {
        return Err(Refusal::OtherType);
    }
    if size == 0 || size as u64 > pin.mapped_size {
        return Err(Refusal::Size);
    }
    if pin.page_offset != 0 {
        return Err(Refusal::Offset);
    }
    Ok(())
}

/// Why [`accept_map`] refused a map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Another type than the one the pin fixed was asked for.
    OtherType,
    /// The size is 0 or larger than the pinned range.
    Size,
    /// The pin does not start a page, so no mapping starts at its address.
    Offset,
}

impl Refusal {
    /// The error the map returns (EINVAL for each).
    pub fn error(self) -> Error {
        Error::InvalidArgument(match self {
            Refusal::OtherType => "mapping type not available for this pin",
            Refusal::Size => "map size is 0 or larger than the pinned range",
            Refusal::Offset => "the pinned address does not start a page",
        })
    }
}

/// What `gdr_get_info` reports of `pin`, whose pages are `page_size` bytes, mapped as
/// `current` (or not mapped): no timing figures, the mapping's type.
pub fn info(pin: &Pin, page_size: u32, current: Option<&Mapping>) -> Info {
    let kind = current.map_or(MappingType::None, |m| m.kind);
    Info {
        va: pin.va,
        mapped_size: pin.mapped_size,
        page_size,
        tm_cycles: 0,
        cycles_per_ms: 0,
        mapped: kind != MappingType::None,
        wc_mapping: kind == MappingType::WriteCombining,
        mapping_type: kind as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pin(page_offset: u64) -> Pin {
        Pin {
            handle: 3,
            va: 1 << 16,
            mapped_size: 8192,
            page_offset,
            fixed_type: MappingType::WriteCombining,
        }
    }

    #[test]
    fn a_map_takes_the_pins_type_a_size_within_it_and_a_pin_that_starts_a_page() {
        let p = pin(0);
        for request in [MappingType::None, MappingType::WriteCombining] {
            assert_eq!(accept_map(&p, 8192, request), Ok(()));
        }
        assert_eq!(accept_map(&p, 1, MappingType::None), Ok(()));
        for other in [MappingType::Caching, MappingType::Device] {
            assert_eq!(accept_map(&p, 8192, other), Err(Refusal::OtherType));
        }
        assert_eq!(accept_map(&p, 0, MappingType::None), Err(Refusal::Size));
        assert_eq!(accept_map(&p, 8193, MappingType::None), Err(Refusal::Size));
        assert_eq!(
            accept_map(&pin(100), 4096, MappingType::None),
            Err(Refusal::Offset)
        );
        // The type is decided before the size, and the size before the offset.
        assert_eq!(
            accept_map(&pin(100), 0, MappingType::Caching),
            Err(Refusal::OtherType)
        );
        assert_eq!(
            accept_map(&pin(100), 0, MappingType::None),
            Err(Refusal::Size)
        );
        for r in [Refusal::OtherType, Refusal::Size, Refusal::Offset] {
            assert_eq!(r.error().errno(), libc::EINVAL);
        }
    }

    #[test]
    fn info_reports_the_pin_and_its_mapping() {
        let p = pin(0);
        let i = info(&p, 4096, None);
        assert_eq!((i.va, i.mapped_size, i.page_size), (1 << 16, 8192, 4096));
        assert!(!i.mapped && !i.wc_mapping);
        assert_eq!(i.mapping_type, MappingType::None as u32);
        let m = Mapping {
            addr: 0x1000,
            len: 8192,
            kind: MappingType::Caching,
        };
        let i = info(&p, 4096, Some(&m));
        assert!(i.mapped && !i.wc_mapping);
        assert_eq!(i.mapping_type, MappingType::Caching as u32);
        assert_eq!((i.tm_cycles, i.cycles_per_ms), (0, 0));
    }
}
