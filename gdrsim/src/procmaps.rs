//! `/proc/self/maps` as a process with the real driver sees it, and the one reader of a memory
//! map's lines ([`pathname`]) that the emulator has.
//!
//! The driver's device memory appears in the memory map as mappings of `/dev/nvidia*` files,
//! and UCX finds allocations made before its memory-type cache existed by that name (with
//! the fake GPU they would look like host memory, a `/memfd:` mapping). An `open` of this
//! process's memory map gets a copy in which the fake VRAM's mappings are named
//! `/dev/nvidia-uvm`; everything else is unchanged.

use crate::real;
use libc::{c_char, c_int};
use std::ffi::CStr;

/// The name the fake VRAM's memfd mappings carry in the memory map.
const VRAM: &[u8] = b"/memfd:gdrsim-vram (deleted)";
/// The name they get in the copy.
const DEVICE: &[u8] = b"/dev/nvidia-uvm";

/// Whether `path` names this process's memory map (`/proc/self/maps` or `/proc/<pid>/maps`).
pub fn is_self_maps(path: *const c_char) -> bool {
    if path.is_null() {
        return false;
    }
    // SAFETY: open's path argument is a NUL-terminated string.
    let p = unsafe { CStr::from_ptr(path) }.to_bytes();
    let Some(mid) = p
        .strip_prefix(b"/proc/")
        .and_then(|r| r.strip_suffix(b"/maps"))
    else {
        return false;
    };
    mid == b"self" || mid == crate::state::pid().to_string().as_bytes()
}

/// The pathname field of one line of a memory map (`/proc/<pid>/maps`, newline or not): what
/// follows the address range, permissions, offset, device and inode, to the end of the line
/// (spaces inside it kept, as in `/memfd:name (deleted)`); `None` for an anonymous mapping or a
/// line of another shape.
pub fn pathname(line: &[u8]) -> Option<&[u8]> {
    let mut rest = line.strip_suffix(b"\n").unwrap_or(line);
    for _ in 0..5 {
        rest = rest.trim_ascii_start();
        let end = rest.iter().position(u8::is_ascii_whitespace)?;
        rest = &rest[end..];
    }
    let name = rest.trim_ascii_start();
    (!name.is_empty()).then_some(name)
}

/// Renames the fake VRAM's mappings in the text of a memory map.
fn rename(maps: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(maps.len());
    for line in maps.split_inclusive(|&b| b == b'\n') {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        match pathname(body).filter(|name| *name == VRAM) {
            Some(name) => {
                out.extend_from_slice(&body[..body.len() - name.len()]);
                out.extend_from_slice(DEVICE);
                if body.len() != line.len() {
                    out.push(b'\n');
                }
            }
            None => out.extend_from_slice(line),
        }
    }
    out
}

/// Opens `path` (this process's memory map) read-only as a copy with the fake VRAM renamed;
/// any other access mode opens the file itself.
pub fn open(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: the caller's path and flags, as open got them.
    let fd = unsafe { real::open(path, flags, 0) };
    if fd < 0 || flags & libc::O_ACCMODE != libc::O_RDONLY {
        return fd;
    }
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: reading into a local buffer of its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        text.extend_from_slice(&buf[..n as usize]);
    }
    let text = rename(&text);
    let mflags = if flags & libc::O_CLOEXEC != 0 {
        libc::MFD_CLOEXEC
    } else {
        0
    };
    // SAFETY: the name is a NUL-terminated literal.
    let copy = unsafe { libc::memfd_create(c"maps".as_ptr(), mflags) };
    if copy < 0 {
        // SAFETY: rewinding our own fd.
        unsafe { libc::lseek(fd, 0, libc::SEEK_SET) };
        return fd;
    }
    // SAFETY: fd is ours and no longer needed.
    unsafe { real::close(fd) };
    let mut at = 0;
    while at < text.len() {
        // SAFETY: writing from a live buffer of the given length to our own memfd.
        let n = unsafe { libc::write(copy, text[at..].as_ptr().cast(), text.len() - at) };
        if n <= 0 {
            break;
        }
        at += n as usize;
    }
    // SAFETY: rewinding our own memfd.
    unsafe { libc::lseek(copy, 0, libc::SEEK_SET) };
    copy
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_only_the_fake_vram() {
        let maps = b"7f00-7f10 rw-s 00000000 00:01 5 /memfd:gdrsim-vram (deleted)\n\
                     7f10-7f20 r--p 00000000 08:01 9 /usr/lib/libc.so.6\n\
                     7f20-7f30 rw-s 00200000 00:01 5 /memfd:gdrsim-vram (deleted)";
        let out = rename(maps);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "7f00-7f10 rw-s 00000000 00:01 5 /dev/nvidia-uvm");
        assert_eq!(
            lines[1],
            "7f10-7f20 r--p 00000000 08:01 9 /usr/lib/libc.so.6"
        );
        assert_eq!(lines[2], "7f20-7f30 rw-s 00200000 00:01 5 /dev/nvidia-uvm");
        assert!(!text.ends_with('\n'));
        let named = b"7f10-7f20 r--p 00000000 08:01 9    /usr/lib/libc.so.6\n";
        assert_eq!(pathname(named), Some(&b"/usr/lib/libc.so.6"[..]));
        assert_eq!(pathname(b"7f00-7f10 rw-p 00000000 00:00 0 \n"), None);
        assert_eq!(pathname(b"7f00-7f10 rw-p"), None);
        let elsewhere = b"7f00-7f10 rw-s 0 00:01 5 /x/memfd:gdrsim-vram (deleted)\n";
        assert_eq!(
            rename(elsewhere),
            elsewhere,
            "only the fake VRAM's own name"
        );
        assert!(is_self_maps(c"/proc/self/maps".as_ptr()));
        assert!(!is_self_maps(c"/proc/self/smaps".as_ptr()));
        assert!(!is_self_maps(c"/proc/1/mapsx".as_ptr()));
    }
}
