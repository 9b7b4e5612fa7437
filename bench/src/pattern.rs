//! Deterministic, non-zero test data: a seeded xorshift byte stream, so that a wrong offset,
//! a stale byte or an unwritten range never compares equal by accident.

/// Fills `buf` with the byte stream of `seed` (the same seed always gives the same bytes).
pub fn fill(buf: &mut [u8], seed: u64) {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

/// A new vector of `len` bytes of the stream of `seed`.
pub fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; len];
    fill(&mut v, seed);
    v
}

/// The first index where `a` and `b` differ (`None` if equal; lengths must match).
pub fn first_diff(a: &[u8], b: &[u8]) -> Option<usize> {
    debug_assert_eq!(a.len(), b.len());
    a.iter().zip(b).position(|(x, y)| x != y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_distinct_and_not_constant() {
        assert_eq!(bytes(100, 1), bytes(100, 1));
        assert_ne!(bytes(100, 1), bytes(100, 2));
        let v = bytes(4096, 3);
        assert!(v.iter().filter(|&&b| b == 0).count() < 64);
        assert!(v.windows(2).any(|w| w[0] != w[1]));
        // A shorter request is a prefix of a longer one.
        assert_eq!(&bytes(4096, 3)[..13], &bytes(13, 3)[..]);
    }

    #[test]
    fn first_diff_finds_the_first_mismatch() {
        assert_eq!(first_diff(b"abc", b"abc"), None);
        assert_eq!(first_diff(b"abc", b"abd"), Some(2));
        assert_eq!(first_diff(b"", b""), None);
    }
}
