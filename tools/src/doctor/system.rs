//! What the doctor reads from the system, always through the C library's `open`, `read`,
//! `stat` and `ioctl` (so an interposing emulator answers exactly as it does for libgdrapi),
//! plus the parsers for `/proc/devices`, `/proc/driver/gdrdrv/params` and cgroup files.

use gdrapi_abi::gdrdrv;
use std::ffi::{c_int, CString};

/// Paths the doctor inspects; the `/proc` and container-marker ones can be redirected by
/// environment variables, which exist for tests only (see `gdrcopy --help`).
#[derive(Debug, Clone)]
pub struct Paths {
    /// The device node (`/dev/gdrdrv`).
    pub device: String,
    /// `/proc/devices` (`GDRCOPY_DOCTOR_PROC_DEVICES`).
    pub proc_devices: String,
    /// `/proc/driver/gdrdrv/params` (`GDRCOPY_DOCTOR_PROC_PARAMS`).
    pub params: String,
    /// `/.dockerenv` (`GDRCOPY_DOCTOR_DOCKERENV`).
    pub dockerenv: String,
    /// `/run/.containerenv` (`GDRCOPY_DOCTOR_CONTAINERENV`).
    pub containerenv: String,
    /// `/proc/1/cgroup` (`GDRCOPY_DOCTOR_CGROUP`).
    pub cgroup: String,
}

impl Paths {
    /// The real paths, each replaced by its environment variable when that is set.
    pub fn from_env() -> Paths {
        let get =
            |var: &str, default: &str| std::env::var(var).unwrap_or_else(|_| default.to_string());
        Paths {
            device: "/dev/gdrdrv".into(),
            proc_devices: get("GDRCOPY_DOCTOR_PROC_DEVICES", "/proc/devices"),
            params: get("GDRCOPY_DOCTOR_PROC_PARAMS", "/proc/driver/gdrdrv/params"),
            dockerenv: get("GDRCOPY_DOCTOR_DOCKERENV", "/.dockerenv"),
            containerenv: get("GDRCOPY_DOCTOR_CONTAINERENV", "/run/.containerenv"),
            cgroup: get("GDRCOPY_DOCTOR_CGROUP", "/proc/1/cgroup"),
        }
    }
}

/// The current thread's errno.
fn errno() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// What `stat` says about a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileInfo {
    /// `st_mode` (type and permission bits).
    pub mode: u32,
    /// Major number of `st_rdev`.
    pub rdev_major: u32,
    /// Minor number of `st_rdev`.
    pub rdev_minor: u32,
    /// Owner uid.
    pub uid: u32,
    /// Owner gid.
    pub gid: u32,
}

impl FileInfo {
    /// True for a character device.
    pub fn is_char_device(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFCHR
    }
    /// Permission bits, e.g. `0o666`.
    pub fn perms(&self) -> u32 {
        self.mode & 0o7777
    }
}

/// `stat(path)` through the C library; `Err(errno)` on failure.
pub fn stat(path: &str) -> Result<FileInfo, c_int> {
    let c = CString::new(path).map_err(|_| libc::EINVAL)?;
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: c is NUL-terminated; st is writable storage of the right type.
    if unsafe { libc::stat(c.as_ptr(), st.as_mut_ptr()) } != 0 {
        return Err(errno());
    }
    // SAFETY: stat succeeded and filled the struct.
    let st = unsafe { st.assume_init() };
    Ok(FileInfo {
        mode: st.st_mode,
        rdev_major: libc::major(st.st_rdev),
        rdev_minor: libc::minor(st.st_rdev),
        uid: st.st_uid,
        gid: st.st_gid,
    })
}

/// An open file descriptor, closed on drop.
#[derive(Debug)]
pub struct Fd(c_int);

impl Fd {
    /// `open(path, flags | O_CLOEXEC)` through the C library; `Err(errno)` on failure.
    pub fn open(path: &str, flags: c_int) -> Result<Fd, c_int> {
        let c = CString::new(path).map_err(|_| libc::EINVAL)?;
        // SAFETY: c is NUL-terminated; open has no memory preconditions.
        let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) };
        if fd < 0 {
            Err(errno())
        } else {
            Ok(Fd(fd))
        }
    }

    /// Reads to the end (at most 1 MiB).
    pub fn read_to_string(&self) -> Result<String, c_int> {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while out.len() < (1 << 20) {
            // SAFETY: buf is writable for its length; the fd is open.
            let n = unsafe { libc::read(self.0, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
            if n < 0 {
                let e = errno();
                if e == libc::EINTR {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n as usize]);
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// `ioctl(fd, request, arg)` on a struct of type `T`; `Err(errno)` on failure.
    ///
    /// # Safety
    /// `request` must be an ioctl whose argument is a pointer to a `T` that the driver may
    /// read and write in full.
    pub unsafe fn ioctl<T>(&self, request: libc::c_ulong, arg: &mut T) -> Result<(), c_int> {
        // SAFETY: the caller's contract: `request` takes a pointer to a whole, writable `T`.
        if unsafe { libc::ioctl(self.0, request as _, arg as *mut T) } != 0 {
            Err(errno())
        } else {
            Ok(())
        }
    }
}

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: the fd is owned by self and closed once.
        unsafe { libc::close(self.0) };
    }
}

/// Reads a whole (small) file through the C library.
pub fn read_file(path: &str) -> Result<String, c_int> {
    Fd::open(path, libc::O_RDONLY)?.read_to_string()
}

/// The driver's answer to GET_VERSION: (driver version, minimum library version), each
/// `major << 16 | minor`.
pub fn driver_version(fd: &Fd) -> Result<(u32, u32), c_int> {
    let mut v = gdrdrv::VersionParams::default();
    // SAFETY: GET_VERSION reads and writes a whole `VersionParams`, exactly `v`.
    unsafe { fd.ioctl(gdrdrv::ioc::GET_VERSION, &mut v)? };
    Ok((v.gdrdrv_version, v.minimum_gdr_api_version))
}

/// The driver's answer to GET_ATTR for `attr` (driver 2.5 and later).
pub fn driver_attr(fd: &Fd, attr: u32) -> Result<u32, c_int> {
    let mut v = gdrdrv::AttrParams { attr, val: 0 };
    // SAFETY: GET_ATTR reads and writes a whole `AttrParams`, exactly `v`.
    unsafe { fd.ioctl(gdrdrv::ioc::GET_ATTR, &mut v)? };
    Ok(v.val)
}

/// "2.6" for `0x00020006`.
pub fn version_word(v: u32) -> String {
    format!("{}.{}", v >> 16, v & 0xffff)
}

/// The major number `/proc/devices` gives `name` under "Character devices:".
pub fn char_major(proc_devices: &str, name: &str) -> Option<u32> {
    let mut in_char = false;
    for line in proc_devices.lines() {
        let t = line.trim();
        if t.ends_with(':') {
            in_char = t == "Character devices:";
            continue;
        }
        if !in_char {
            continue;
        }
        let mut parts = t.split_whitespace();
        if let (Some(major), Some(n), None) = (parts.next(), parts.next(), parts.next()) {
            if n == name {
                return major.parse().ok();
            }
        }
    }
    None
}

/// `Use persistent mapping: yes|no` from the params file, if present.
pub fn params_persistent(params: &str) -> Option<bool> {
    params.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        if k.trim() == "Use persistent mapping" {
            match v.trim() {
                "yes" => Some(true),
                "no" => Some(false),
                _ => None,
            }
        } else {
            None
        }
    })
}

/// `Version: X.Y` from the params file, if present.
pub fn params_version(params: &str) -> Option<String> {
    params.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "Version").then(|| v.trim().to_string())
    })
}

/// Names the container runtime a cgroup file points at, if any.
pub fn cgroup_container(cgroup: &str) -> Option<&'static str> {
    const MARKERS: [(&str, &str); 5] = [
        ("kubepods", "kubernetes"),
        ("docker", "docker"),
        ("libpod", "podman"),
        ("containerd", "containerd"),
        ("lxc", "lxc"),
    ];
    MARKERS
        .iter()
        .find(|(m, _)| cgroup.contains(m))
        .map(|(_, n)| *n)
}

/// Detects a container: `/.dockerenv`, `/run/.containerenv`, or a runtime in PID 1's cgroup.
/// Returns the evidence, or `None`.
pub fn container(paths: &Paths) -> Option<String> {
    if stat(&paths.dockerenv).is_ok() {
        return Some(format!("docker, {} exists", paths.dockerenv));
    }
    if stat(&paths.containerenv).is_ok() {
        return Some(format!("podman, {} exists", paths.containerenv));
    }
    let cg = read_file(&paths.cgroup).ok()?;
    cgroup_container(&cg).map(|rt| format!("{rt}, from {}", paths.cgroup))
}

/// `RLIMIT_MEMLOCK` soft limit in bytes; `None` means unlimited.
pub fn memlock_limit() -> Result<Option<u64>, c_int> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: r is a valid out pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } != 0 {
        return Err(errno());
    }
    Ok(if r.rlim_cur == libc::RLIM_INFINITY {
        None
    } else {
        Some(r.rlim_cur)
    })
}

/// The effective uid.
pub fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// "No such file or directory (errno 2)".
pub fn errno_text(e: c_int) -> String {
    crate::gdr::errno_text(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEVICES: &str = "Character devices:\n  1 mem\n  4 /dev/vc/0\n237 gdrdrv\n510 nvidia-uvm\n\nBlock devices:\n  8 sd\n 99 gdrdrv\n";

    #[test]
    fn proc_devices_major_is_taken_from_character_section() {
        assert_eq!(char_major(DEVICES, "gdrdrv"), Some(237));
        assert_eq!(char_major(DEVICES, "nvidia-uvm"), Some(510));
        assert_eq!(char_major(DEVICES, "sd"), None);
        assert_eq!(char_major("Character devices:\n  1 mem\n", "gdrdrv"), None);
    }

    #[test]
    fn params_file_is_parsed() {
        let p = "Version: 2.6\nBuilt for NVIDIA driver flavor: opensource\nUse persistent mapping: no\ndbg_enabled: 0\ninfo_enabled: 0\n";
        assert_eq!(params_persistent(p), Some(false));
        assert_eq!(params_version(p).as_deref(), Some("2.6"));
        assert_eq!(params_persistent("Use persistent mapping: yes"), Some(true));
        assert_eq!(params_persistent("garbage"), None);
    }

    #[test]
    fn cgroup_markers_and_versions() {
        assert_eq!(
            cgroup_container("0::/kubepods/besteffort/pod1/abc"),
            Some("kubernetes")
        );
        assert_eq!(cgroup_container("12:cpu:/docker/0123abcd"), Some("docker"));
        assert_eq!(cgroup_container("0::/init.scope"), None);
        assert_eq!(version_word(0x0002_0006), "2.6");
    }

    #[test]
    fn libc_helpers_report_errno() {
        assert_eq!(
            stat("/nonexistent/gdrcopy-doctor").unwrap_err(),
            libc::ENOENT
        );
        let st = stat("/dev/null").unwrap();
        assert!(st.is_char_device());
        assert_eq!((st.rdev_major, st.rdev_minor), (1, 3));
        assert!(read_file("/proc/self/status").unwrap().contains("Pid:"));
        assert_eq!(read_file("/nonexistent/x").unwrap_err(), libc::ENOENT);
        // /dev/null does not answer gdrdrv ioctls.
        let fd = Fd::open("/dev/null", libc::O_RDWR).unwrap();
        assert!(driver_version(&fd).is_err());
    }
}
