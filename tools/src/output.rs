//! Number formatting identical to upstream's C++ output, and terminal progress on stderr.

use std::io::Write;
use std::time::Instant;

/// Formats like C++ `ostream << double` with default flags (printf `%g`, 6 significant digits):
/// `9634.52`, `0.5`, `1.23457e+06`, `inf`.
pub fn fmt_g(v: f64) -> String {
    fmt_g_prec(v, 6)
}

/// `%.{prec}g`.
pub fn fmt_g_prec(v: f64, prec: usize) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() {
            "-nan".into()
        } else {
            "nan".into()
        };
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf".into() } else { "inf".into() };
    }
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let p = prec.max(1);
    // Scientific rendering after rounding to p significant digits gives the decimal exponent.
    let sci = format!("{:.*e}", p - 1, v);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        let mant = trim_zeros(mant);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        trim_zeros(&format!("{:.*}", decimals, v)).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Formats an address like C++ `ostream << (void*)p`: `0x7f12...`, or `0` for NULL.
pub fn fmt_ptr(p: u64) -> String {
    if p == 0 {
        "0".into()
    } else {
        format!("{p:#x}")
    }
}

/// Restores the default SIGPIPE action, so `tool | head` ends the tool quietly (as a C
/// program would) instead of failing on a write error.
pub fn default_sigpipe() {
    // SAFETY: installing SIG_DFL for SIGPIPE has no memory-safety preconditions; called at the
    // start of main, before any thread is spawned.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// True when file descriptor `fd` is a terminal.
pub fn is_tty(fd: i32) -> bool {
    // SAFETY: isatty only inspects the descriptor number.
    unsafe { libc::isatty(fd) == 1 }
}

/// A one-line progress indicator on stderr, shown only when stderr is a terminal and at most
/// ten times a second; [`Progress::clear`] erases it before results are printed.
pub struct Progress {
    enabled: bool,
    shown: bool,
    last: Option<Instant>,
    label: String,
}

impl Progress {
    /// A progress line prefixed by `label` (the tool's name); off unless stderr is a tty.
    pub fn new(label: &str) -> Progress {
        Progress {
            enabled: is_tty(2),
            shown: false,
            last: None,
            label: label.to_string(),
        }
    }

    /// Shows "`label`: `what` [done/total]".
    pub fn update(&mut self, what: &str, done: usize, total: usize) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        if let Some(t) = self.last {
            if done != 0 && done < total && now.duration_since(t).as_millis() < 100 {
                return;
            }
        }
        self.last = Some(now);
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{}: {what} [{done}/{total}]\x1b[K", self.label);
        let _ = err.flush();
        self.shown = true;
    }

    /// Erases the line if one is shown.
    pub fn clear(&mut self) {
        if self.shown {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
            self.shown = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fmt_g_matches_printf() {
        assert_eq!(fmt_g(9634.5234), "9634.52");
        assert_eq!(fmt_g(0.5), "0.5");
        assert_eq!(fmt_g(100.0), "100");
        assert_eq!(fmt_g(123456.4), "123456");
        assert_eq!(fmt_g(999999.5), "1e+06");
        assert_eq!(fmt_g(1234567.0), "1.23457e+06");
        assert_eq!(fmt_g(0.0001234), "0.0001234");
        assert_eq!(fmt_g(0.00001234), "1.234e-05");
        assert_eq!(fmt_g(0.0), "0");
        assert_eq!(fmt_g(f64::INFINITY), "inf");
        assert_eq!(fmt_g(-2.5), "-2.5");
        assert_eq!(fmt_g(12.0000001), "12");
    }

    #[test]
    fn pointers_print_like_iostream() {
        assert_eq!(fmt_ptr(0), "0");
        assert_eq!(fmt_ptr(0x7f00_1000), "0x7f001000");
    }
}
