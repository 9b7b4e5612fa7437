//! The doctor's checks, in the order they run: library, device node, access, driver version,
//! driver parameters, CUDA driver, each GPU, each GPU's BAR1 ([`super::bar1`]), memlock limit,
//! container, the Vulkan import ([`super::vulkan`], when copies need it), and finally a real
//! pin/map/copy/verify round trip per GPU through libgdrapi.

use super::report::{Check, Status};
use super::system::{self, Fd, Paths};
use crate::cuda::{self, Cuda};
use crate::gdr::{self, Gdr};
use crate::gpumem::{AllocFn, DeviceBuffer, HostBuffer};
use gdrapi_abi::gdrdrv;
use gdrapi_support::cuda::attr;
use serde_json::Value;
use std::time::Instant;

/// The udev rule that gives everyone read/write access to the node.
pub const UDEV_RULE: &str =
    "echo 'KERNEL==\"gdrdrv\", MODE=\"0666\"' | sudo tee /etc/udev/rules.d/99-gdrdrv.rules && sudo udevadm control --reload";

/// What the earlier checks learned, for the later ones.
#[derive(Default)]
pub struct State {
    /// The loaded library.
    pub gdr: Option<Gdr>,
    /// Library version (major, minor).
    pub lib_version: Option<(i32, i32)>,
    /// The node exists (by stat or because open did not say ENOENT).
    pub node_present: bool,
    /// The node opened read/write.
    pub node_fd: Option<Fd>,
    /// Driver version word.
    pub driver_version: Option<u32>,
    /// Detected container, with evidence.
    pub container: Option<String>,
    /// The loaded CUDA driver.
    pub cuda: Option<Cuda>,
    /// CUDA driver version.
    pub cuda_version: Option<i32>,
    /// Ordinals of GPUs found.
    pub gpus: Vec<i32>,
}

/// libgdrapi: which file is loaded and its version.
pub fn library(st: &mut State) -> Check {
    match Gdr::load() {
        Ok(g) => {
            let (major, minor) = g.runtime_version();
            let path = g.path().unwrap_or_else(|| "(unknown path)".into());
            st.lib_version = Some((major, minor));
            st.gdr = Some(g);
            Check::new(
                "library",
                Status::Pass,
                format!("libgdrapi {major}.{minor} loaded from {path}"),
            )
            .detail("soname", gdr::LIBGDRAPI)
            .detail("path", path)
            .detail("version", format!("{major}.{minor}"))
        }
        Err(e @ gdrapi_support::dl::DlError::Symbol { .. }) => {
            // Loaded, but too old (or not libgdrapi): say which file it was.
            let lib = gdrapi_support::dl::Library::open_global(gdr::LIBGDRAPI).ok();
            let path = lib.as_ref().and_then(|l| l.path_of("gdr_open"));
            Check::new(
                "library",
                Status::Fail,
                format!(
                    "{} is not a usable libgdrapi 2.5+: {e}",
                    path.clone().unwrap_or_else(|| gdr::LIBGDRAPI.into())
                ),
            )
            .fix("install libgdrapi 2.6 and make sure it comes first: ldconfig -p | grep libgdrapi")
            .detail("soname", gdr::LIBGDRAPI)
            .detail("path", path)
            .detail("error", e.to_string())
        }
        Err(e) => Check::new("library", Status::Fail, format!("libgdrapi cannot be used: {e}"))
            .fix("install libgdrapi (package libgdrapi / gdrcopy), then run `sudo ldconfig`")
            .fix("or point the loader at it: export LD_LIBRARY_PATH=<dir containing libgdrapi.so.2>:$LD_LIBRARY_PATH")
            .detail("soname", gdr::LIBGDRAPI)
            .detail("error", e.to_string()),
    }
}

/// `/dev/gdrdrv`: present; if not, whether the module is loaded (node missing) or not.
pub fn device_node(st: &mut State, paths: &Paths) -> Check {
    let dev = &paths.device;
    let stat = system::stat(dev);
    let proc_devices = system::read_file(&paths.proc_devices).ok();
    let major = proc_devices
        .as_deref()
        .and_then(|t| system::char_major(t, "gdrdrv"));
    let open = Fd::open(dev, libc::O_RDWR);
    let facts = NodeFacts {
        dev,
        proc_devices: &paths.proc_devices,
        stat: stat.ok(),
        open_error: open.as_ref().err().copied(),
        module_major: major,
        container: st.container.as_deref(),
    };
    let c = diagnose_node(&facts);
    st.node_present = c.get("present").and_then(Value::as_bool) == Some(true);
    // Access problems (EACCES, ...) are reported by the next check.
    st.node_fd = open.ok();
    c
}

/// What the system said about the device node, for [`diagnose_node`].
pub struct NodeFacts<'a> {
    /// The node's path.
    pub dev: &'a str,
    /// Where the module list was read from.
    pub proc_devices: &'a str,
    /// `stat` of the node, when it succeeded.
    pub stat: Option<system::FileInfo>,
    /// errno of `open(O_RDWR)`, when it failed.
    pub open_error: Option<i32>,
    /// gdrdrv's major in `/proc/devices` (the module is loaded).
    pub module_major: Option<u32>,
    /// The container we run in, if any.
    pub container: Option<&'a str>,
}

/// The device-node finding from the facts. Some systems (and emulators) answer `open` but
/// not `stat`: the node counts as present unless both say it is absent.
pub fn diagnose_node(f: &NodeFacts) -> Check {
    let dev = f.dev;
    let major = f.module_major;
    let no_driver = matches!(f.open_error, Some(libc::ENXIO) | Some(libc::ENODEV));
    let present = f.stat.is_some() || !(no_driver || f.open_error == Some(libc::ENOENT));
    let base = |c: Check| {
        c.detail("path", dev)
            .detail("present", present)
            .detail(
                "module_loaded",
                major.is_some() || (present && f.open_error.is_none()),
            )
            .detail("module_major", major.map(|m| m as i64))
    };
    if present {
        let mut c = Check::new("device_node", Status::Pass, format!("{dev} is present"));
        if let Some(fi) = f.stat {
            c.summary = format!(
                "{dev} is present (char {}:{}, mode {:04o})",
                fi.rdev_major,
                fi.rdev_minor,
                fi.perms()
            );
            c = c
                .detail("mode", format!("{:04o}", fi.perms()))
                .detail("device_major", fi.rdev_major as i64)
                .detail("device_minor", fi.rdev_minor as i64);
            if !fi.is_char_device() {
                c.status = Status::Fail;
                c.summary = format!("{dev} exists but is not a character device");
                c = c.fix(format!("sudo rm {dev}")).fix(mknod_fix(major));
            } else if no_driver && major.is_none() {
                c.status = Status::Fail;
                c.summary = format!(
                    "{dev} exists (major {}) but no driver answers it: the gdrdrv module is not loaded",
                    fi.rdev_major
                );
                c = c
                    .fix("sudo modprobe gdrdrv   (packaged installs: sudo systemctl start gdrcopy)")
                    .fix(format!(
                        "then recreate the node: sudo rm {dev} && {}",
                        mknod_fix(None)
                    ));
            } else if let Some(m) = major.filter(|&m| m != fi.rdev_major) {
                c.status = Status::Fail;
                c.summary = format!(
                    "{dev} has major {} but the loaded gdrdrv module uses major {m} (stale node)",
                    fi.rdev_major
                );
                c = c.fix(format!("sudo rm {dev}")).fix(mknod_fix(Some(m)));
            }
        }
        return base(c);
    }
    let mut c = match major {
        Some(m) => Check::new(
            "device_node",
            Status::Fail,
            format!(
                "{dev} is missing, but the gdrdrv module is loaded (major {m}): \
                 only the device node was not created"
            ),
        )
        .fix(mknod_fix(Some(m))),
        None => Check::new(
            "device_node",
            Status::Fail,
            format!(
                "{dev} is missing and the gdrdrv kernel module is not loaded ({} has no gdrdrv)",
                f.proc_devices
            ),
        )
        .fix(
            "sudo modprobe gdrdrv   (packaged installs: sudo systemctl start gdrcopy, \
             or sudo /etc/init.d/gdrcopy start)",
        )
        .fix(
            "if modprobe cannot find it, install the gdrdrv-dkms package \
             (or build gdrdrv and load it with insmod.sh)",
        )
        .fix(format!(
            "then create the node if it is still missing: {}",
            mknod_fix(None)
        )),
    };
    if let Some(rt) = f.container {
        c = c.fix(format!(
            "inside a container ({rt}): load the module on the host and pass the node in: \
             docker run --device /dev/gdrdrv ... (or NVIDIA_GDRCOPY=enabled)"
        ));
    }
    base(c)
}

fn mknod_fix(major: Option<u32>) -> String {
    let m = major.map_or("<major from /proc/devices>".to_string(), |m| m.to_string());
    format!("sudo mknod /dev/gdrdrv c {m} 0 && sudo chmod 0666 /dev/gdrdrv")
}

/// Permissions: can this user open the node read/write, and can everyone?
pub fn device_access(st: &mut State, paths: &Paths) -> Check {
    let dev = &paths.device;
    if !st.node_present {
        return Check::new("device_access", Status::Skip, format!("{dev} is missing"));
    }
    let mode = system::stat(dev).ok().map(|f| f.perms());
    let mode_s = mode.map(|m| format!("{m:04o}"));
    let euid = system::euid();
    let c = if st.node_fd.is_some() {
        match mode {
            Some(m) if m & 0o006 != 0o006 => Check::new(
                "device_access",
                Status::Warn,
                format!("{dev} opens read/write for this user, but its mode {m:04o} keeps other users out"),
            )
            .fix(format!("sudo chmod 0666 {dev}"))
            .fix(format!("make it permanent: {UDEV_RULE}")),
            _ => Check::new("device_access", Status::Pass, format!("{dev} opens read/write")),
        }
    } else {
        match Fd::open(dev, libc::O_RDWR) {
            Err(e) if e == libc::EACCES || e == libc::EPERM => Check::new(
                "device_access",
                Status::Fail,
                format!(
                    "permission denied opening {dev} read/write as uid {euid}{}",
                    mode_s.as_ref().map(|m| format!(" (mode {m})")).unwrap_or_default()
                ),
            )
            .fix(format!("sudo chmod 0666 {dev}"))
            .fix(format!("make it permanent: {UDEV_RULE}")),
            Err(e) if e == libc::ENXIO || e == libc::ENODEV => Check::new(
                "device_access",
                Status::Skip,
                format!("no driver answers {dev} (see device_node)"),
            ),
            Err(e) => Check::new("device_access", Status::Fail, format!("cannot open {dev}: {}", system::errno_text(e)))
                .fix("check `dmesg | grep gdrdrv` for errors from the module; reload it: sudo rmmod gdrdrv && sudo modprobe gdrdrv"),
            Ok(fd) => {
                st.node_fd = Some(fd);
                Check::new("device_access", Status::Pass, format!("{dev} opens read/write"))
            }
        }
    };
    c.detail("mode", mode_s)
        .detail("euid", euid as i64)
        .detail("opened", st.node_fd.is_some())
}

/// Driver version (GET_VERSION) against the library's.
pub fn driver_version(st: &mut State) -> Check {
    let Some(fd) = &st.node_fd else {
        return Check::new(
            "driver_version",
            Status::Skip,
            "the device node cannot be opened",
        );
    };
    let lib = st
        .lib_version
        .map(|(a, b)| ((a as u32) << 16) | b as u32)
        .unwrap_or(gdrdrv::DRIVER_VERSION);
    let lib_s = system::version_word(lib);
    let (drv, min_lib) = match system::driver_version(fd) {
        Ok(v) => v,
        Err(e) => {
            return Check::new(
                "driver_version",
                Status::Fail,
                format!("the driver does not answer the version request ({}): gdrdrv is too old (before 2.0) or something else owns the device number", system::errno_text(e)),
            )
            .fix("install gdrdrv 2.6 (package gdrdrv-dkms) and reload it: sudo rmmod gdrdrv && sudo modprobe gdrdrv")
            .detail("library_version", lib_s);
        }
    };
    st.driver_version = Some(drv);
    let drv_s = system::version_word(drv);
    let min_s = system::version_word(min_lib);
    let base = |c: Check| {
        c.detail("driver_version", drv_s.clone())
            .detail("minimum_library_version", min_s.clone())
            .detail("library_version", lib_s.clone())
    };
    let upgrade_drv =
        "upgrade the driver to 2.6: install gdrdrv-dkms 2.6, then sudo rmmod gdrdrv && sudo modprobe gdrdrv";
    if drv < gdrdrv::version(2, 0) {
        return base(Check::new(
            "driver_version",
            Status::Fail,
            format!("gdrdrv {drv_s} is too old: libgdrapi {lib_s} needs 2.0 or later"),
        ))
        .fix(upgrade_drv);
    }
    if min_lib > lib {
        return base(Check::new(
            "driver_version",
            Status::Fail,
            format!(
                "gdrdrv {drv_s} is too new for this library: it requires libgdrapi {min_s} or later, loaded is {lib_s}"
            ),
        ))
        .fix(format!("upgrade libgdrapi to {min_s} or later"));
    }
    if drv < lib {
        let mut missing = Vec::new();
        if drv < gdrdrv::VERSION_WITH_GET_INFO_V2 {
            missing.push("mapping-type reporting (2.4)");
        }
        if drv < gdrdrv::VERSION_WITH_V2_API {
            missing.push("pin flags, mapping-type requests and attributes (2.5)");
        }
        if drv < gdrdrv::version(2, 6) {
            missing.push("2.6 fixes");
        }
        return base(Check::new(
            "driver_version",
            Status::Warn,
            format!(
                "gdrdrv {drv_s} is older than libgdrapi {lib_s}; copies work, but without: {}",
                missing.join(", ")
            ),
        ))
        .fix(upgrade_drv);
    }
    if drv > lib {
        return base(Check::new(
            "driver_version",
            Status::Warn,
            format!(
                "gdrdrv {drv_s} is newer than libgdrapi {lib_s}; newer driver features are unused"
            ),
        ))
        .fix(format!("upgrade libgdrapi to {drv_s}"));
    }
    base(Check::new(
        "driver_version",
        Status::Pass,
        format!("gdrdrv {drv_s} matches libgdrapi {lib_s}"),
    ))
}

/// `/proc/driver/gdrdrv/params` and GET_ATTR: persistent mapping.
pub fn driver_params(st: &State, paths: &Paths) -> Check {
    let params = system::read_file(&paths.params).ok();
    let from_file = params.as_deref().and_then(system::params_persistent);
    let from_attr = match (&st.node_fd, st.driver_version) {
        (Some(fd), Some(v)) if v >= gdrdrv::VERSION_WITH_V2_API => {
            system::driver_attr(fd, gdrdrv::ATTR_USE_PERSISTENT_MAPPING)
                .ok()
                .map(|v| v != 0)
        }
        _ => None,
    };
    if from_file.is_none() && from_attr.is_none() {
        return Check::new(
            "driver_params",
            Status::Skip,
            format!(
                "{} is not readable and the driver cannot be asked",
                paths.params
            ),
        )
        .detail("params_file", paths.params.as_str());
    }
    let persistent = from_attr.or(from_file).unwrap_or(false);
    let summary = if persistent {
        "persistent mapping: yes (pins survive cudaFree until unpinned)".to_string()
    } else {
        "persistent mapping: no (pins are invalidated when their GPU memory is freed)".to_string()
    };
    Check::new("driver_params", Status::Pass, summary)
        .detail("persistent_mapping", persistent)
        .detail("params_file", paths.params.as_str())
        .detail("params_file_readable", params.is_some())
        .detail(
            "params_version",
            params.as_deref().and_then(system::params_version),
        )
}

/// CUDA driver: loadable, initialises, version and GPU count.
pub fn cuda_driver(st: &mut State) -> Check {
    let c = match Cuda::load() {
        Err(e) => {
            return Check::new("cuda_driver", Status::Fail, format!("no CUDA driver: {e}"))
                .fix("install the NVIDIA driver (it provides libcuda.so.1); check with nvidia-smi")
                .fix("in a container: run it with the NVIDIA Container Toolkit (docker run --gpus all ...)")
                .detail("loaded", false)
                .detail("error", e.to_string())
        }
        Ok(c) => c,
    };
    let path = c.path();
    let version = c.driver_version().ok();
    st.cuda_version = version;
    let base = |k: Check| {
        k.detail("path", path.clone())
            .detail("version", version.map(cuda::version_string))
    };
    if let Err(e) = c.init() {
        st.cuda = Some(c);
        return base(Check::new(
            "cuda_driver",
            Status::Fail,
            format!("the CUDA driver does not initialise: {e}"),
        ))
        .fix("check nvidia-smi and `dmesg | grep -i nvrm`; the kernel driver and libcuda versions must match")
        .detail("loaded", true);
    }
    let count = c.device_count().unwrap_or(0);
    st.gpus = (0..count).collect();
    st.cuda = Some(c);
    let v = version.map_or("unknown".into(), cuda::version_string);
    if count == 0 {
        return base(Check::new(
            "cuda_driver",
            Status::Fail,
            format!("CUDA {v} loaded, but it sees no GPU"),
        ))
        .fix("check nvidia-smi and CUDA_VISIBLE_DEVICES; in a container pass the GPUs in (--gpus all)")
        .detail("loaded", true)
        .detail("device_count", 0);
    }
    base(Check::new(
        "cuda_driver",
        Status::Pass,
        format!(
            "CUDA driver {v} from {}, {count} GPU(s)",
            path.clone().unwrap_or_else(|| cuda::LIBCUDA.into())
        ),
    ))
    .detail("loaded", true)
    .detail("device_count", count)
}

/// One GPU: name, GPUDirect RDMA (attr 116), DMA-BUF (attr 124), DMA-BUF mmap usability.
pub fn gpu(st: &State, ordinal: i32) -> Check {
    let Some(c) = &st.cuda else {
        return Check::new("gpu", Status::Skip, "no CUDA driver");
    };
    let info = (|| -> Result<_, cuda::CudaError> {
        let dev = c.device(ordinal)?;
        let name = c.device_name(dev)?;
        let bus = format!(
            "{:04x}:{:02x}:{:02x}",
            c.attribute(attr::PCI_DOMAIN_ID, dev)?,
            c.attribute(attr::PCI_BUS_ID, dev)?,
            c.attribute(attr::PCI_DEVICE_ID, dev)?
        );
        let rdma = c.attribute(attr::GPU_DIRECT_RDMA_SUPPORTED, dev).ok();
        let dmabuf = c.attribute(attr::DMA_BUF_SUPPORTED, dev).ok();
        Ok((name, bus, rdma, dmabuf))
    })();
    let (name, bus, rdma, dmabuf) = match info {
        Ok(v) => v,
        Err(e) => {
            return Check::new("gpu", Status::Fail, format!("GPU {ordinal}: {e}"))
                .detail("index", ordinal)
        }
    };
    let version = st.cuda_version.unwrap_or(0);
    let dmabuf_ok = dmabuf == Some(1);
    let mmap_ok = dmabuf_ok && version >= cuda::DMABUF_MMAP_MIN_VERSION;
    let yn = |b: bool| if b { "yes" } else { "no" };
    let mmap_text = if mmap_ok {
        "yes".to_string()
    } else if !dmabuf_ok {
        "no (no DMA-BUF support)".to_string()
    } else {
        format!(
            "no (needs CUDA 13.3, driver has {})",
            cuda::version_string(version)
        )
    };
    let rdma_text = match rdma {
        Some(v) => yn(v != 0).to_string(),
        None => "unknown".to_string(),
    };
    let summary = format!(
        "GPU {ordinal}: {name} [{bus}]: GPUDirect RDMA: {rdma_text}, DMA-BUF: {}, DMA-BUF mmap: {mmap_text}",
        yn(dmabuf_ok)
    );
    let mut k = Check::new("gpu", Status::Pass, summary);
    if rdma == Some(0) {
        k.status = Status::Fail;
        k = k.fix("this GPU cannot do GPUDirect RDMA (GeForce and some older boards cannot); use a data-center or workstation GPU, or cudaMemcpy");
    } else if rdma.is_none() && version < cuda::RDMA_ATTR_MIN_VERSION {
        k.status = Status::Warn;
        k = k.fix("CUDA older than 11.3 cannot report GPUDirect RDMA support; the round trip below tests it");
    }
    k.detail("index", ordinal)
        .detail("name", name)
        .detail("bus_id", bus)
        .detail("gpudirect_rdma", rdma.map(|v| v != 0))
        .detail("dma_buf", dmabuf.map(|v| v != 0))
        .detail("dma_buf_mmap", mmap_ok)
}

/// `RLIMIT_MEMLOCK`.
pub fn memlock() -> Check {
    // Docker's old default (64 KiB) breaks RDMA registration; 8 MiB is the usual distribution default.
    const WANT: u64 = 8 << 20;
    match system::memlock_limit() {
        Ok(None) => Check::new("memlock", Status::Pass, "locked-memory limit: unlimited").detail("limit_bytes", Value::Null),
        Ok(Some(n)) if n >= WANT => {
            Check::new("memlock", Status::Pass, format!("locked-memory limit: {} KiB", n / 1024)).detail("limit_bytes", n)
        }
        Ok(Some(n)) => Check::new(
            "memlock",
            Status::Warn,
            format!("locked-memory limit is {} KiB: RDMA stacks (UCX, NCCL, libfabric) that register host memory may fail", n / 1024),
        )
        .fix("ulimit -l unlimited  (permanently: `* - memlock unlimited` in /etc/security/limits.conf; docker: --ulimit memlock=-1)")
        .detail("limit_bytes", n),
        Err(e) => Check::new("memlock", Status::Warn, format!("getrlimit failed: {}", system::errno_text(e))),
    }
}

/// Container detection; in a container without the node, say how to pass it in.
pub fn container(st: &State, paths: &Paths) -> Check {
    match &st.container {
        None => Check::new("container", Status::Pass, "not running in a container").detail("container", Value::Null),
        Some(rt) if st.node_present => Check::new(
            "container",
            Status::Pass,
            format!("running in a container ({rt}) with {} passed in", paths.device),
        )
        .detail("container", rt.as_str()),
        Some(rt) => Check::new(
            "container",
            Status::Fail,
            format!("running in a container ({rt}) without {}", paths.device),
        )
        .fix("start the container with the device: docker run --device /dev/gdrdrv ... (podman: --device /dev/gdrdrv)")
        .fix("with the NVIDIA Container Toolkit: set NVIDIA_GDRCOPY=enabled; Kubernetes: use the GPU Operator's gdrcopy support")
        .detail("container", rt.as_str()),
    }
}

/// Bytes used by the round trip.
pub const ROUNDTRIP_BYTES: usize = 1 << 20;

/// Pin, map, copy, verify (through the mapping and through CUDA) on one GPU, with bandwidth.
/// The memory is what the backend `gdr_open` chose can map: `cuMemAlloc` memory, or for the
/// Vulkan import VMM memory exportable as a file descriptor.
pub fn roundtrip(st: &State, ordinal: i32) -> Check {
    let (Some(c), Some(g)) = (&st.cuda, &st.gdr) else {
        return Check::new(
            "roundtrip",
            Status::Skip,
            format!("GPU {ordinal}: needs both libgdrapi and CUDA"),
        )
        .detail("index", ordinal);
    };
    let mut backend = None;
    match roundtrip_inner(c, g, ordinal, &mut backend) {
        Ok(k) => k,
        Err(e) => {
            let mut k = Check::new(
                "roundtrip",
                Status::Fail,
                format!("GPU {ordinal}: GPUDirect copy failed: {e}"),
            )
            .detail("index", ordinal)
            .detail("backend", backend.map(gdr::Backend::name))
            .detail("error", e.clone());
            k = if e.starts_with("gdr_open") {
                k.fix("gdr_open needs a working /dev/gdrdrv, CUDA >= 13.3 with DMA-BUF mmap, or the Vulkan import (GDRAPI_USE_VULKAN=1, see the vulkan check): fix the failures above")
            } else {
                k.fix("run with GDRCOPY_ENABLE_LOGGING=1 GDRCOPY_LOG_LEVEL=1 for the library's own messages, and check `dmesg | grep gdrdrv`")
            };
            k
        }
    }
}

/// The allocation the round trip makes for a session on `backend`.
pub fn alloc_for(backend: gdr::Backend) -> AllocFn {
    match backend {
        gdr::Backend::Vulkan => AllocFn::MemCreateFd,
        gdr::Backend::Gdrdrv | gdr::Backend::DmaBuf => AllocFn::MemAlloc,
    }
}

fn roundtrip_inner(
    c: &Cuda,
    g: &Gdr,
    ordinal: i32,
    backend_used: &mut Option<gdr::Backend>,
) -> Result<Check, String> {
    let s = |e: &dyn std::fmt::Display| e.to_string();
    let n = ROUNDTRIP_BYTES;
    let dev = c.device(ordinal).map_err(|e| s(&e))?;
    let _ctx = c.primary_context(dev).map_err(|e| s(&e))?;
    // The session first: its backend decides which memory it can map.
    let session = g.open().map_err(|e| s(&e))?;
    let backend = session.backend();
    *backend_used = Some(backend);
    let how = alloc_for(backend);
    let dbuf = DeviceBuffer::alloc(c, how, n, dev).map_err(|e| s(&e))?;
    let mut src = HostBuffer::alloc(c, n).map_err(|e| s(&e))?;
    let mut back = HostBuffer::alloc(c, n).map_err(|e| s(&e))?;
    for (i, b) in src.as_mut_slice().iter_mut().enumerate() {
        *b = (i as u32)
            .wrapping_mul(2_654_435_761)
            .rotate_right(ordinal as u32 + 7) as u8;
    }
    let bar1_before = bar1_in_use();
    let pin = session.pin(dbuf.ptr(), n).map_err(|e| s(&e))?;
    let map = pin.map(gdr::GDR_MAP_FLAG_DEFAULT).map_err(|e| s(&e))?;
    let bar1_held = bar1_in_use()
        .zip(bar1_before)
        .map(|(now, before)| now.saturating_sub(before));
    let info = pin.info().map_err(|e| s(&e))?;
    let off = dbuf.ptr().wrapping_sub(info.va) as usize;
    map.copy_to(off, src.as_slice()).map_err(|e| s(&e))?;
    map.copy_from(off, back.as_mut_slice()).map_err(|e| s(&e))?;
    if let Some(i) = first_diff(src.as_slice(), back.as_slice()) {
        return Err(format!(
            "data read back through the mapping differs at byte {i}"
        ));
    }
    // The GPU must see what the CPU wrote through the mapping.
    back.as_mut_slice().fill(0);
    // SAFETY: both buffers hold n bytes.
    unsafe { c.memcpy(back.addr(), dbuf.ptr(), n) }.map_err(|e| s(&e))?;
    if let Some(i) = first_diff(src.as_slice(), back.as_slice()) {
        return Err(format!(
            "GPU memory read with cuMemcpy differs from what was written through the mapping at byte {i}"
        ));
    }
    let write = bandwidth(|| map.copy_to(off, src.as_slice()).map(|_| n)).map_err(|e| s(&e))?;
    let read =
        bandwidth(|| map.copy_from(off, back.as_mut_slice()).map(|_| n)).map_err(|e| s(&e))?;
    let kind = match info.mapping_type {
        1 => "write-combining",
        2 => "caching",
        3 => "device",
        _ => "none",
    };
    map.unmap().map_err(|e| s(&e))?;
    pin.unpin().map_err(|e| s(&e))?;
    session.close().map_err(|e| s(&e))?;
    let name = backend.name();
    let allocation = dbuf.allocation_size() as u64;
    // The Vulkan import holds BAR1 for the pinned allocation's whole size.
    let held = match (backend, bar1_held) {
        (gdr::Backend::Vulkan, Some(b)) => format!(
            "; the pin held {} MiB of BAR1 (its whole {} MiB allocation: see the vulkan check)",
            b >> 20,
            allocation >> 20
        ),
        _ => String::new(),
    };
    Ok(Check::new(
        "roundtrip",
        Status::Pass,
        format!(
            "GPU {ordinal}: pin, map ({kind}, {name} backend), copy and verify of {} KiB of {} memory: write {:.0} MiB/s, read {:.0} MiB/s{held}",
            n / 1024,
            how.name(),
            write,
            read
        ),
    )
    .detail("allocation_bytes", allocation)
    .detail(
        "bar1_held_bytes",
        bar1_held.map_or(serde_json::Value::Null, Into::into),
    )
    .detail("index", ordinal)
    .detail("backend", name)
    .detail("alloc_fn", how.name())
    .detail("mapping_type", kind)
    .detail("bytes", n as u64)
    .detail("verified", true)
    .detail("write_mib_s", write)
    .detail("read_mib_s", read))
}

/// BAR1 bytes in use on all GPUs together, as NVML reports them (`None` without NVML).
fn bar1_in_use() -> Option<u64> {
    let gpus = gdrapi_support::nvml::Nvml::init().ok()?.gpus().ok()?;
    Some(gpus.iter().map(|g| g.bar1_used).sum())
}

fn first_diff(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y)
}

/// Repeats `op` (which returns bytes moved) for about 20 ms; returns MiB/s.
fn bandwidth<E>(mut op: impl FnMut() -> Result<usize, E>) -> Result<f64, E> {
    let t = Instant::now();
    let mut bytes = 0usize;
    let mut runs = 0;
    while runs < 2 || (t.elapsed().as_millis() < 20 && runs < 10_000) {
        bytes += op()?;
        runs += 1;
    }
    let secs = t.elapsed().as_secs_f64().max(1e-9);
    Ok(bytes as f64 / secs / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(
        stat: Option<(u32, u32, u32)>,
        open_error: Option<i32>,
        module_major: Option<u32>,
    ) -> Check {
        let stat = stat.map(|(kind, major, perms)| system::FileInfo {
            mode: kind | perms,
            rdev_major: major,
            rdev_minor: 0,
            uid: 0,
            gid: 0,
        });
        diagnose_node(&NodeFacts {
            dev: "/dev/gdrdrv",
            proc_devices: "/proc/devices",
            stat,
            open_error,
            module_major,
            container: None,
        })
    }

    #[test]
    fn healthy_node_reports_its_numbers_and_mode() {
        let c = node(Some((libc::S_IFCHR, 237, 0o666)), None, Some(237));
        assert_eq!(c.status, Status::Pass);
        assert_eq!(c.summary, "/dev/gdrdrv is present (char 237:0, mode 0666)");
        assert_eq!(c.get("mode").and_then(Value::as_str), Some("0666"));
        // Emulators may answer open but not stat.
        let c = node(None, None, None);
        assert_eq!(c.status, Status::Pass);
        assert_eq!(c.get("present").and_then(Value::as_bool), Some(true));
        let c = node(None, Some(libc::EACCES), None);
        assert_eq!(
            c.status,
            Status::Pass,
            "access is the next check's business"
        );
    }

    #[test]
    fn stale_or_wrong_nodes_fail_with_the_recreate_fix() {
        let c = node(Some((libc::S_IFCHR, 235, 0o666)), None, Some(237));
        assert_eq!(c.status, Status::Fail);
        assert!(
            c.summary.contains("major 235") && c.summary.contains("uses major 237"),
            "{}",
            c.summary
        );
        assert_eq!(
            c.fix,
            vec![
                "sudo rm /dev/gdrdrv",
                "sudo mknod /dev/gdrdrv c 237 0 && sudo chmod 0666 /dev/gdrdrv"
            ]
        );

        let c = node(Some((libc::S_IFCHR, 235, 0o666)), Some(libc::ENXIO), None);
        assert_eq!(c.status, Status::Fail);
        assert!(c.summary.contains("no driver answers it"), "{}", c.summary);
        assert!(c.fix[0].starts_with("sudo modprobe gdrdrv"));
        assert_eq!(c.get("module_loaded").and_then(Value::as_bool), Some(false));

        let c = node(
            Some((libc::S_IFREG, 0, 0o644)),
            Some(libc::ENOTTY),
            Some(237),
        );
        assert_eq!(c.status, Status::Fail);
        assert!(c.summary.contains("not a character device"));
    }

    #[test]
    fn missing_node_distinguishes_loaded_module_from_none() {
        let c = node(None, Some(libc::ENOENT), Some(511));
        assert_eq!(c.status, Status::Fail);
        assert_eq!(
            c.fix,
            vec!["sudo mknod /dev/gdrdrv c 511 0 && sudo chmod 0666 /dev/gdrdrv"]
        );
        assert_eq!(c.get("module_loaded").and_then(Value::as_bool), Some(true));
        let c = node(None, Some(libc::ENOENT), None);
        assert!(c.summary.contains("module is not loaded"));
        assert!(c.fix[0].starts_with("sudo modprobe gdrdrv"));
        assert_eq!(c.get("present").and_then(Value::as_bool), Some(false));
    }
}
