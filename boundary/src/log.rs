//! Logging with upstream's exact semantics: off unless `GDRCOPY_ENABLE_LOGGING` is set (to
//! anything); threshold from `GDRCOPY_LOG_LEVEL` parsed like `atoi` (default 4 = errors only);
//! lines on stderr with the prefixes `"DBG:  "`, `"INFO: "`, `"WARN: "`, `"ERR:  "`.
//! The environment is read once, at the first message, and cached for the process.

use std::io::Write;
use std::sync::OnceLock;

/// Message severity, numerically equal to upstream's `gdrcopy_msg_level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(i32)]
pub enum Level {
    Debug = 1,
    Info = 2,
    Warn = 3,
    Error = 4,
}

impl Level {
    fn prefix(self) -> &'static str {
        match self {
            Level::Debug => "DBG:  ",
            Level::Info => "INFO: ",
            Level::Warn => "WARN: ",
            Level::Error => "ERR:  ",
        }
    }
}

/// The cached logging configuration: `None` when logging is off, else the threshold.
static CONFIG: Config = Config(OnceLock::new());

/// [`CONFIG`]'s cell, aligned so that it never straddles two cache lines: every API call that
/// can log reads it.
#[repr(align(16))]
struct Config(OnceLock<Option<i32>>);

/// C `atoi`: optional whitespace and sign, then leading digits; 0 when there are none.
pub(crate) fn atoi(s: &str) -> i32 {
    let s = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut v: i64 = 0;
    for b in digits.bytes().take_while(u8::is_ascii_digit) {
        v = (v * 10 + i64::from(b - b'0')).min(i64::from(i32::MAX) + 1);
    }
    let v = if neg { -v } else { v };
    v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

fn threshold_from(enable: Option<&str>, level: Option<&str>) -> Option<i32> {
    enable?;
    Some(level.map_or(Level::Error as i32, atoi))
}

#[inline]
fn config() -> Option<i32> {
    *CONFIG.0.get_or_init(|| {
        let enable = std::env::var_os("GDRCOPY_ENABLE_LOGGING");
        let level = std::env::var("GDRCOPY_LOG_LEVEL").ok();
        threshold_from(enable.as_ref().map(|_| ""), level.as_deref())
    })
}

/// True when a message of `level` would be printed; lets callers skip formatting work.
#[inline(always)]
pub fn enabled(level: Level) -> bool {
    config().is_some_and(|threshold| level as i32 >= threshold)
}

/// Writes one log line (prefix, message, newline) to stderr when `level` is enabled.
/// Never panics, even when stderr is closed. Cold and out of line, so that the checks that
/// lead to a log line stay off the API calls' straight path.
#[cold]
#[inline(never)]
pub fn write(level: Level, args: std::fmt::Arguments<'_>) {
    if !enabled(level) {
        return;
    }
    let line = format!("{}{}\n", level.prefix(), args);
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Logs at debug level (`DBG:  `).
#[macro_export]
#[doc(hidden)]
macro_rules! gdr_dbg {
    ($($t:tt)*) => {
        if $crate::log::enabled($crate::log::Level::Debug) {
            $crate::log::write($crate::log::Level::Debug, format_args!($($t)*))
        }
    };
}
/// Logs at info level (`INFO: `).
#[macro_export]
#[doc(hidden)]
macro_rules! gdr_info {
    ($($t:tt)*) => {
        if $crate::log::enabled($crate::log::Level::Info) {
            $crate::log::write($crate::log::Level::Info, format_args!($($t)*))
        }
    };
}
/// Logs at warning level (`WARN: `).
#[macro_export]
#[doc(hidden)]
macro_rules! gdr_warn {
    ($($t:tt)*) => {
        if $crate::log::enabled($crate::log::Level::Warn) {
            $crate::log::write($crate::log::Level::Warn, format_args!($($t)*))
        }
    };
}
/// Logs at error level (`ERR:  `).
#[macro_export]
#[doc(hidden)]
macro_rules! gdr_err {
    ($($t:tt)*) => {
        if $crate::log::enabled($crate::log::Level::Error) {
            $crate::log::write($crate::log::Level::Error, format_args!($($t)*))
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoi_matches_c() {
        assert_eq!(atoi("1"), 1);
        assert_eq!(atoi("  3xyz"), 3);
        assert_eq!(atoi("abc"), 0);
        assert_eq!(atoi("-2"), -2);
        assert_eq!(atoi(""), 0);
    }

    #[test]
    fn threshold_rules() {
        assert_eq!(threshold_from(None, Some("1")), None);
        assert_eq!(threshold_from(Some(""), None), Some(4));
        assert_eq!(threshold_from(Some(""), Some("0")), Some(0));
        assert_eq!(threshold_from(Some(""), Some("junk")), Some(0));
        assert_eq!(threshold_from(Some(""), Some("5")), Some(5));
    }
}
