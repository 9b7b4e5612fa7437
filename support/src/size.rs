//! Byte counts as the programs and the emulator's settings take them: digits with an optional
//! binary suffix.

/// `s` in bytes: digits with an optional `K`, `M`, `G` or `T` (binary, either case); `None`
/// for anything else (whitespace included) or a count that overflows a `u64`.
pub fn parse(s: &str) -> Option<u64> {
    let (digits, shift) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 10),
        b'm' | b'M' => (&s[..s.len() - 1], 20),
        b'g' | b'G' => (&s[..s.len() - 1], 30),
        b't' | b'T' => (&s[..s.len() - 1], 40),
        _ => (s, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    n.checked_shl(shift).filter(|b| b >> shift == n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes_and_refuse_the_rest() {
        assert_eq!(parse("17"), Some(17));
        assert_eq!(parse("4K"), Some(4096));
        assert_eq!(parse("4k"), Some(4096));
        assert_eq!(parse("16M"), Some(16 << 20));
        assert_eq!(parse("1g"), Some(1 << 30));
        assert_eq!(parse("2T"), Some(2 << 40));
        assert_eq!(parse("1000003"), Some(1_000_003));
        assert_eq!(parse("0M"), Some(0));
        for bad in ["", "M", "12Q", "+4K", "-1", " 4K", "4K ", "4 K", "4KK"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        assert_eq!(parse("99999999999999999999G"), None);
        assert_eq!(parse("99999999999T"), None);
        assert_eq!(parse("16777215T"), Some(16_777_215 << 40));
        assert_eq!(parse("16777216T"), None);
    }
}
