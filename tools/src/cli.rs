//! Command-line parsing with POSIX `getopt` rules (what upstream's tools use), through lexopt:
//! short options, grouped flags (`-lc`), arguments attached (`-s4096`) or separate
//! (`-s 4096`), `--` ends options; numbers parsed like `strtol(s, NULL, 0)` (decimal, `0x`
//! hex, leading-0 octal), hand-written because Rust's parsers take one radix at a time.

use std::fmt;

/// A command-line error; the tools print it, then their usage, and exit 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CliError {
    /// An option letter not in the spec.
    Unknown(char),
    /// An option that needs an argument came last.
    MissingArgument(char),
    /// An argument that is not a valid number for its option.
    BadNumber(char, String),
    /// An argument outside the accepted set.
    BadValue(char, String, &'static str),
    /// A stray non-option argument.
    Unexpected(String),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Unknown(c) => write!(f, "invalid option -- '{c}'"),
            CliError::MissingArgument(c) => write!(f, "option requires an argument -- '{c}'"),
            CliError::BadNumber(c, v) => write!(f, "invalid number '{v}' for -{c}"),
            CliError::BadValue(c, v, valid) => {
                write!(f, "invalid value '{v}' for -{c}; valid: {valid}")
            }
            CliError::Unexpected(a) => write!(f, "unexpected argument '{a}'"),
        }
    }
}

impl std::error::Error for CliError {}

/// One parsed option: its letter and its argument, if it takes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opt {
    /// The option letter.
    pub name: char,
    /// The argument (for letters followed by `:` in the spec).
    pub arg: Option<String>,
}

/// Parses `args` (without the program name) against a getopt spec such as `"s:d:lh"`.
pub fn getopt(args: &[String], spec: &str) -> Result<Vec<Opt>, CliError> {
    use lexopt::Arg;
    let takes_arg = |c: char| -> Option<bool> {
        let i = spec.find(c)?;
        if c == ':' {
            return None;
        }
        Some(spec[i + c.len_utf8()..].starts_with(':'))
    };
    let mut p = lexopt::Parser::from_args(args);
    // getopt keeps an `=` after a short option as part of its argument (`-s=4` is "=4").
    p.set_short_equals(false);
    let mut out = Vec::new();
    loop {
        let arg = match p.next() {
            Ok(Some(a)) => a,
            Ok(None) => return Ok(out),
            // Only `--name=value` for a flag gets here, and there are no long options.
            Err(_) => return Err(CliError::Unknown('-')),
        };
        let c = match arg {
            Arg::Short(c) => c,
            // No long options: getopt sees the second `-` as an unknown letter.
            Arg::Long(_) => return Err(CliError::Unknown('-')),
            Arg::Value(v) => return Err(CliError::Unexpected(v.to_string_lossy().into_owned())),
        };
        match takes_arg(c) {
            None => return Err(CliError::Unknown(c)),
            Some(false) => out.push(Opt { name: c, arg: None }),
            Some(true) => {
                let v = p.value().map_err(|_| CliError::MissingArgument(c))?;
                out.push(Opt {
                    name: c,
                    arg: Some(v.to_string_lossy().into_owned()),
                });
            }
        }
    }
}

/// Parses an integer like `strtol(s, NULL, 0)` but rejects trailing garbage and empty input.
pub fn parse_int(s: &str) -> Option<i64> {
    let t = s.trim_start();
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, digits) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (16, h)
    } else if t.len() > 1 && t.starts_with('0') {
        (8, &t[1..])
    } else {
        (10, t)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let v = i64::from_str_radix(digits, radix).ok()?;
    Some(if neg { -v } else { v })
}

/// Largest size accepted on the command line (1 TiB): far above any GPU, far below overflow.
pub const MAX_SIZE: i64 = 1 << 40;

/// The argument of `opt` as a size in `0..=MAX_SIZE`.
pub fn size_arg(opt: &Opt) -> Result<usize, CliError> {
    let s = opt.arg.clone().unwrap_or_default();
    match parse_int(&s) {
        Some(v) if (0..=MAX_SIZE).contains(&v) => Ok(v as usize),
        _ => Err(CliError::BadNumber(opt.name, s)),
    }
}

/// The argument of `opt` as a count in `1..=i32::MAX` (iterations).
pub fn count_arg(opt: &Opt) -> Result<usize, CliError> {
    let s = opt.arg.clone().unwrap_or_default();
    match parse_int(&s) {
        Some(v) if (1..=i32::MAX as i64).contains(&v) => Ok(v as usize),
        _ => Err(CliError::BadNumber(opt.name, s)),
    }
}

/// The argument of `opt` as a GPU ordinal.
pub fn device_arg(opt: &Opt) -> Result<i32, CliError> {
    let s = opt.arg.clone().unwrap_or_default();
    match parse_int(&s) {
        Some(v) if (0..=i32::MAX as i64).contains(&v) => Ok(v as i32),
        _ => Err(CliError::BadNumber(opt.name, s)),
    }
}

/// Parses upstream's `-M` values into a `gdr_map_flags_t`.
pub fn map_flag_arg(opt: &Opt) -> Result<crate::gdr::gdr_map_flags_t, CliError> {
    let s = opt.arg.clone().unwrap_or_default();
    match s.as_str() {
        "default" => Ok(crate::gdr::GDR_MAP_FLAG_DEFAULT),
        "wc" => Ok(crate::gdr::GDR_MAP_FLAG_REQ_WC_MAPPING),
        "cache" => Ok(crate::gdr::GDR_MAP_FLAG_REQ_CACHE_MAPPING),
        "device" => Ok(crate::gdr::GDR_MAP_FLAG_REQ_DEVICE_MAPPING),
        _ => Err(CliError::BadValue(
            opt.name,
            s,
            "default, wc, cache, device",
        )),
    }
}

/// Parses upstream's `-a` values.
pub fn alloc_fn_arg(opt: &Opt) -> Result<crate::gpumem::AllocFn, CliError> {
    let s = opt.arg.clone().unwrap_or_default();
    crate::gpumem::AllocFn::parse(&s).ok_or(CliError::BadValue(
        opt.name,
        s,
        crate::gpumem::ALLOC_CHOICES,
    ))
}

/// The options the three benchmarks share: `-s <size>`, `-d <gpu>`, `-a <fn>` and
/// `-M <mapping_type>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuOpts {
    /// Buffer size (`-s`), never 0 once [`GpuOpts::check`] passed.
    pub size: usize,
    /// GPU ordinal (`-d`).
    pub dev_id: i32,
    /// GPU allocation function (`-a`).
    pub alloc: crate::gpumem::AllocFn,
    /// `gdr_map_flags_t` for `gdr_map_v2` (`-M`).
    pub map_flag: crate::gdr::gdr_map_flags_t,
}

impl GpuOpts {
    /// The defaults: a buffer of `size` bytes on GPU 0 from `cuMemAlloc`, default mapping.
    pub fn new(size: usize) -> GpuOpts {
        GpuOpts {
            size,
            dev_id: 0,
            alloc: crate::gpumem::AllocFn::MemAlloc,
            map_flag: crate::gdr::GDR_MAP_FLAG_DEFAULT,
        }
    }

    /// Takes `opt` if it is one of the shared options: `Ok(true)` once applied, `Ok(false)`
    /// for any other letter, an error for a bad argument.
    pub fn take(&mut self, opt: &Opt) -> Result<bool, CliError> {
        match opt.name {
            's' => self.size = size_arg(opt)?,
            'd' => self.dev_id = device_arg(opt)?,
            'a' => self.alloc = alloc_fn_arg(opt)?,
            'M' => self.map_flag = map_flag_arg(opt)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Refuses a zero buffer size (`-s 0`).
    pub fn check(&self) -> Result<(), CliError> {
        if self.size == 0 {
            return Err(CliError::BadNumber('s', "0".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn getopt_handles_attached_separate_and_grouped() {
        let o = getopt(&args(&["-s4096", "-c", "0x100", "-lh"]), "s:c:lh").unwrap();
        assert_eq!(
            o,
            vec![
                Opt {
                    name: 's',
                    arg: Some("4096".into())
                },
                Opt {
                    name: 'c',
                    arg: Some("0x100".into())
                },
                Opt {
                    name: 'l',
                    arg: None
                },
                Opt {
                    name: 'h',
                    arg: None
                },
            ]
        );
        let o = getopt(&args(&["-ls", "8", "--"]), "s:l").unwrap();
        assert_eq!(
            o[1],
            Opt {
                name: 's',
                arg: Some("8".into())
            }
        );
    }

    #[test]
    fn getopt_rejects_bad_input() {
        assert_eq!(getopt(&args(&["-x"]), "s:"), Err(CliError::Unknown('x')));
        assert_eq!(
            getopt(&args(&["-s"]), "s:"),
            Err(CliError::MissingArgument('s'))
        );
        assert_eq!(
            getopt(&args(&["foo"]), "s:"),
            Err(CliError::Unexpected("foo".into()))
        );
        assert_eq!(getopt(&args(&["-:"]), "s:"), Err(CliError::Unknown(':')));
        assert_eq!(
            getopt(&args(&["--", "x"]), "s:"),
            Err(CliError::Unexpected("x".into()))
        );
    }

    #[test]
    fn getopt_keeps_posix_rules_where_parsers_differ() {
        let one = |v: &[&str]| getopt(&args(v), "s:l").map(|o| o[0].arg.clone());
        // An `=` after a short option belongs to the argument, as in getopt(3).
        assert_eq!(one(&["-s=4"]), Ok(Some("=4".into())));
        // The next word is the argument even when it starts with `-`.
        assert_eq!(one(&["-s", "-l"]), Ok(Some("-l".into())));
        assert_eq!(
            getopt(&args(&["--size=4"]), "s:l"),
            Err(CliError::Unknown('-'))
        );
        assert_eq!(getopt(&args(&["--l"]), "s:l"), Err(CliError::Unknown('-')));
        assert_eq!(
            getopt(&args(&["-"]), "s:l"),
            Err(CliError::Unexpected("-".into()))
        );
    }

    #[test]
    fn numbers_parse_like_strtol_base_0() {
        assert_eq!(parse_int("131072"), Some(131072));
        assert_eq!(parse_int("0x20000"), Some(0x20000));
        assert_eq!(parse_int("010"), Some(8));
        assert_eq!(parse_int("0"), Some(0));
        assert_eq!(parse_int("-3"), Some(-3));
        assert_eq!(parse_int("12abc"), None);
        assert_eq!(parse_int(""), None);
        assert_eq!(parse_int("0x"), None);
        assert_eq!(parse_int("99999999999999999999999"), None);
    }

    #[test]
    fn shared_gpu_options_take_their_letters_only() {
        let mut g = GpuOpts::new(4096);
        for o in getopt(
            &args(&["-s", "0x20000", "-d1", "-a", "cuMemCreate", "-Mwc"]),
            "s:d:a:M:",
        )
        .unwrap()
        {
            assert_eq!(g.take(&o), Ok(true));
        }
        assert_eq!(g.size, 0x20000);
        assert_eq!(g.dev_id, 1);
        assert_eq!(g.alloc, crate::gpumem::AllocFn::MemCreate);
        assert_eq!(g.map_flag, crate::gdr::GDR_MAP_FLAG_REQ_WC_MAPPING);
        assert_eq!(g.check(), Ok(()));
        let w = Opt {
            name: 'w',
            arg: Some("5".into()),
        };
        assert_eq!(g.take(&w), Ok(false));
        let bad = Opt {
            name: 'd',
            arg: Some("-1".into()),
        };
        assert_eq!(g.take(&bad), Err(CliError::BadNumber('d', "-1".into())));
        assert_eq!(
            GpuOpts::new(0).check(),
            Err(CliError::BadNumber('s', "0".into()))
        );
    }

    #[test]
    fn typed_arguments_validate() {
        let o = |v: &str| Opt {
            name: 'w',
            arg: Some(v.into()),
        };
        assert_eq!(count_arg(&o("100")), Ok(100));
        assert!(count_arg(&o("0")).is_err());
        assert!(count_arg(&o("-5")).is_err());
        assert!(size_arg(&o("-1")).is_err());
        assert!(size_arg(&o("0x10000000000")).is_ok());
        assert!(size_arg(&o("0x10000000001")).is_err());
        assert_eq!(map_flag_arg(&o("cache")), Ok(2));
        assert!(map_flag_arg(&o("uc")).is_err());
        assert!(alloc_fn_arg(&o("cuMemCreate")).is_ok());
        assert_eq!(
            alloc_fn_arg(&o("cuMemCreateFd")),
            Ok(crate::gpumem::AllocFn::MemCreateFd)
        );
        assert_eq!(
            alloc_fn_arg(&o("malloc")),
            Err(CliError::BadValue(
                'w',
                "malloc".into(),
                "cuMemAlloc, cuMemCreate, cuMemCreateFd"
            ))
        );
        assert_eq!(device_arg(&o("1")), Ok(1));
    }
}
