//! The benchmarks' shared code: copy methods to compare ([`copiers`], [`upstream`]), checks of
//! a copy against a second view of the memory ([`verify`], [`pattern`]), the smaps line of a
//! mapping ([`smaps`]), and the write-combined host memory both programs time ([`hostwc`]).
//!
//! The Vulkan and CUDA loaders come from `gdrapi-support` (re-exported here as [`bar`],
//! [`cuda`], [`vk`]); everything is loaded at run time, so the crate builds anywhere and, on a
//! machine without a GPU, Mesa's lavapipe (a CPU Vulkan device) exercises the same code.

pub mod copiers;
pub mod hostwc;
pub mod pattern;
pub mod smaps;
pub mod upstream;
pub mod verify;

pub use gdrapi_support::{bar, cuda, error, vk, Error, Result};

/// A byte count as the programs take it: digits with an optional `K`, `M` or `G` (binary,
/// either case); `None` for anything else or an overflow.
pub fn parse_size(s: &str) -> Option<usize> {
    let (num, mul) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1usize << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>().ok()?.checked_mul(mul)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes_and_refuse_the_rest() {
        assert_eq!(parse_size("17"), Some(17));
        assert_eq!(parse_size("4K"), Some(4096));
        assert_eq!(parse_size("4k"), Some(4096));
        assert_eq!(parse_size("16M"), Some(16 << 20));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("1000003"), Some(1_000_003));
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("M"), None);
        assert_eq!(parse_size("12Q"), None);
        assert_eq!(parse_size("99999999999999999999G"), None);
    }
}
