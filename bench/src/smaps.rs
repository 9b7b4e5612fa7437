//! `/proc/self/smaps`: the kernel's view of a mapping (backing file, `VmFlags`), used to show
//! that a Vulkan mapping is a device BAR (`io` and `pf` flags on `/dev/nvidia*`).
//! Hand-written rather than the `procfs` crate: one VMA looked up by address and its flags, in
//! a tested parser smaller than that crate's dependency tree.

use crate::error::{Error, Result};

/// One mapping of `/proc/<pid>/smaps`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: usize,
    /// One past the last address.
    pub end: usize,
    /// Permissions, as `rw-s`.
    pub perms: String,
    /// Offset into the backing file.
    pub offset: u64,
    /// Backing path (empty for anonymous memory).
    pub path: String,
    /// The `VmFlags` two-letter codes, in the kernel's order.
    pub vm_flags: Vec<String>,
    /// `Rss` in kB, when present.
    pub rss_kb: Option<u64>,
}

impl Mapping {
    /// Whether `VmFlags` holds `flag` (for example `"io"`).
    pub fn has_flag(&self, flag: &str) -> bool {
        self.vm_flags.iter().any(|f| f == flag)
    }

    /// Whether this looks like a device BAR mapping: `io` (VM_IO) and `pf` (VM_PFNMAP).
    pub fn is_io_pfnmap(&self) -> bool {
        self.has_flag("io") && self.has_flag("pf")
    }
}

fn header(line: &str) -> Option<Mapping> {
    let mut it = line.split_whitespace();
    let range = it.next()?;
    let (a, b) = range.split_once('-')?;
    let start = usize::from_str_radix(a, 16).ok()?;
    let end = usize::from_str_radix(b, 16).ok()?;
    let perms = it.next()?.to_owned();
    if perms.len() != 4 {
        return None;
    }
    let offset = u64::from_str_radix(it.next()?, 16).ok()?;
    let _dev = it.next()?;
    let _inode = it.next()?;
    let path = it.collect::<Vec<_>>().join(" ");
    Some(Mapping {
        start,
        end,
        perms,
        offset,
        path,
        ..Default::default()
    })
}

/// Parses smaps text into its mappings; lines that fit no known shape are skipped.
pub fn parse(text: &str) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("VmFlags:") {
            if let Some(m) = out.last_mut() {
                m.vm_flags = rest.split_whitespace().map(str::to_owned).collect();
            }
        } else if let Some(rest) = line.strip_prefix("Rss:") {
            if let Some(m) = out.last_mut() {
                m.rss_kb = rest.split_whitespace().next().and_then(|v| v.parse().ok());
            }
        } else if let Some(m) = header(line) {
            out.push(m);
        }
    }
    out
}

/// The mapping of this process that contains `addr`.
pub fn find(addr: usize) -> Result<Mapping> {
    let text = std::fs::read_to_string("/proc/self/smaps").map_err(|e| Error::Io {
        what: "read /proc/self/smaps".into(),
        source: e,
    })?;
    parse(&text)
        .into_iter()
        .find(|m| m.start <= addr && addr < m.end)
        .ok_or_else(|| Error::Invalid(format!("address {addr:#x} is in no mapping")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
7f0000000000-7f0004000000 rw-s 1f4000000 00:06 1049                       /dev/nvidia0
Size:              65536 kB
Rss:                   0 kB
VmFlags: rd wr sh mr mw me ms io pf dc de dd
7f0004000000-7f0004021000 rw-p 00000000 00:00 0 
Size:                132 kB
Rss:                  12 kB
VmFlags: rd wr mr mw me ac
";

    #[test]
    fn parses_headers_rss_and_flags() {
        let maps = parse(SAMPLE);
        assert_eq!(maps.len(), 2);
        assert_eq!(maps[0].start, 0x7f00_0000_0000);
        assert_eq!(maps[0].end, 0x7f00_0400_0000);
        assert_eq!(maps[0].perms, "rw-s");
        assert_eq!(maps[0].offset, 0x1_f400_0000);
        assert_eq!(maps[0].path, "/dev/nvidia0");
        assert!(maps[0].is_io_pfnmap());
        assert_eq!(maps[0].rss_kb, Some(0));
        assert_eq!(maps[1].path, "");
        assert_eq!(maps[1].rss_kb, Some(12));
        assert!(!maps[1].is_io_pfnmap());
        assert!(maps[1].has_flag("ac"));
    }

    #[test]
    fn garbage_lines_are_skipped() {
        assert!(parse("nonsense\nzz-yy rw-p 0 0 0\nVmFlags: io pf\n").is_empty());
    }

    #[test]
    fn finds_an_anonymous_mapping_of_this_process() {
        let len = 3 * 4096;
        let p = gdrapi::sys::anonymous_pages(len).expect("anonymous pages");
        let m = find(p as usize + 4096).expect("mapping listed");
        assert!(m.start <= p as usize && p as usize + len <= m.end);
        assert!(m.perms.starts_with("rw"));
        assert!(m.has_flag("rd") && m.has_flag("wr"));
        assert!(!m.is_io_pfnmap());
        // SAFETY: unmaps exactly the mapping made above.
        unsafe { libc::munmap(p.cast(), len) };
    }
}
