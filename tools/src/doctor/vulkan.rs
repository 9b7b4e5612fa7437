//! The `vulkan` check: whether libgdrapi's module-free backend, the Vulkan import
//! (`GDRAPI_USE_VULKAN=1`), can map this machine's GPUs. It retraces the backend's steps:
//! CUDA 11.4 or later with GPUDirect RDMA on VMM memory, the Vulkan loader, an instance, and for
//! each CUDA GPU the Vulkan device with its UUID, offering `VK_KHR_external_memory_fd` and a
//! memory type that is device-local and host-visible (VRAM through BAR1). Nothing is allocated.

use super::checks::State;
use super::report::{Check, Status};
use crate::cuda::{self, Cuda, VULKAN_IMPORT_MIN_VERSION};
use gdrapi_support::bar::{self, DeviceInfo};
use gdrapi_support::cuda::attr;
use gdrapi_support::vk::choose_memory_type;
use gdrapi_support::Error;
use serde_json::{json, Value};

/// The variable that turns the backend on.
pub const ENV: &str = "GDRAPI_USE_VULKAN";

/// Whether the library was asked for the Vulkan import: `GDRAPI_USE_VULKAN` is exactly "1".
pub fn requested() -> bool {
    std::env::var_os(ENV).is_some_and(|v| v == "1")
}

/// What the memory must be, for the fix lines.
pub const MEMORY_RULE: &str = "only memory from cuMemCreate with requestedHandleTypes = \
    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR maps (NCCL's cuMem allocator allocates it); \
    cuMemAlloc and cudaMalloc memory is refused (EINVAL)";

/// What an import costs in BAR1, for the fix lines.
pub const BAR1_RULE: &str = "a pin holds BAR1 for its whole allocation while any pin in that \
    allocation lives (a 64 KiB pin in a 1 GiB allocation holds 1 GiB, as nvidia-smi -q -d MEMORY \
    shows): pin ranges of a few large allocations rather than one pin each of many";

/// What UCX users must do, for the fix lines.
pub const UCX_RULE: &str = "UCX programs: UCX's gdr_copy transport registers every CUDA buffer, \
    and cudaMalloc buffers cannot be pinned here, so their registration fails; run them with \
    UCX_TLS=^gdr_copy (cuda_copy carries those buffers), or leave GDRAPI_USE_VULKAN unset for \
    them; buffers from cuMemCreate with the POSIX-fd handle type do go through gdr_copy";

const INSTALL_LOADER: &str = "install the Vulkan loader: sudo apt install libvulkan1 \
    (Fedora/RHEL: sudo dnf install vulkan-loader)";
const INSTALL_ICD: &str = "install NVIDIA's Vulkan driver, the ICD that comes with the NVIDIA \
    driver (Debian/Ubuntu: libnvidia-gl-<driver branch>); nvidia_icd.json must be in \
    /usr/share/vulkan/icd.d or /etc/vulkan/icd.d";
const CONTAINER_GRAPHICS: &str = "in a container, NVIDIA_DRIVER_CAPABILITIES must include \
    graphics (e.g. docker run --gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility,graphics)";
const RESIZABLE_BAR: &str = "a larger BAR1 needs Resizable BAR (\"Above 4G decoding\" and \
    \"Re-Size BAR support\" in the firmware setup) on a GPU that supports it";
const UPGRADE_DRIVER: &str = "upgrade the NVIDIA driver (its Vulkan driver offers \
    VK_KHR_external_memory_fd)";

/// What CUDA says of one GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaGpu {
    /// CUDA ordinal.
    pub ordinal: i32,
    /// `cuDeviceGetUuid`, or why it failed.
    pub uuid: Result<[u8; 16], String>,
    /// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED`, when the driver answers.
    pub vmm_rdma: Option<bool>,
}

/// Where finding the Vulkan devices stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VkFailure {
    /// `libvulkan.so.1` could not be loaded.
    Loader(String),
    /// `vkCreateInstance` failed: no Vulkan driver answered.
    Instance(String),
    /// Another step (an entry point, the enumeration).
    Other(String),
}

impl From<Error> for VkFailure {
    fn from(e: Error) -> VkFailure {
        match e {
            Error::Dl(_) => VkFailure::Loader(e.to_string()),
            Error::Vulkan {
                call: "vkCreateInstance",
                ..
            } => VkFailure::Instance(e.to_string()),
            e => VkFailure::Other(e.to_string()),
        }
    }
}

/// Everything the finding is made from.
#[derive(Debug, Clone)]
pub struct Facts {
    /// `GDRAPI_USE_VULKAN=1` is set.
    pub requested: bool,
    /// The backend the round trips used, when they opened a session.
    pub used: Option<&'static str>,
    /// `cuDriverGetVersion`.
    pub cuda_version: Option<i32>,
    /// The CUDA GPUs.
    pub gpus: Vec<CudaGpu>,
    /// The Vulkan devices ([`bar::survey`]).
    pub vulkan: Result<Vec<DeviceInfo>, VkFailure>,
    /// The container we run in, if any.
    pub container: Option<String>,
    /// `UCX_TLS` leaves UCX's gdr_copy transport out.
    pub ucx_avoids_gdr_copy: bool,
}

/// Whether a `UCX_TLS` value leaves gdr_copy out: a `^` list that names it, or a list that
/// does not.
pub fn ucx_tls_avoids_gdr_copy(tls: Option<&str>) -> bool {
    let Some(tls) = tls.filter(|t| !t.is_empty()) else {
        return false;
    };
    let (negated, list) = match tls.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, tls),
    };
    let named = list
        .split(',')
        .any(|t| matches!(t.trim(), "gdr_copy" | "cuda" | "all"));
    if negated {
        list.split(',').any(|t| t.trim() == "gdr_copy")
    } else {
        !named
    }
}

/// Gathers the facts (a Vulkan instance is made and destroyed) and diagnoses them.
pub fn vulkan(st: &State, used: Option<&'static str>) -> Check {
    let Some(c) = &st.cuda else {
        return Check::new("vulkan", Status::Skip, "no CUDA driver");
    };
    let facts = Facts {
        requested: requested(),
        used,
        cuda_version: st.cuda_version,
        gpus: st.gpus.iter().map(|&i| cuda_gpu(c, i)).collect(),
        vulkan: bar::survey().map_err(VkFailure::from),
        container: st.container.clone(),
        ucx_avoids_gdr_copy: ucx_tls_avoids_gdr_copy(std::env::var("UCX_TLS").ok().as_deref()),
    };
    diagnose(&facts)
}

fn cuda_gpu(c: &Cuda, ordinal: i32) -> CudaGpu {
    let dev = c.device(ordinal);
    CudaGpu {
        ordinal,
        uuid: dev
            .clone()
            .and_then(|d| c.uuid(d))
            .map_err(|e| e.to_string()),
        vmm_rdma: dev
            .ok()
            .and_then(|d| {
                c.attribute(attr::GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, d)
                    .ok()
            })
            .map(|v| v != 0),
    }
}

/// `uuid` as `nvidia-smi -L` prints it, without the `GPU-` prefix.
pub fn uuid_text(uuid: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in uuid.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// How one GPU fares.
struct Gpu {
    text: String,
    usable: bool,
    fixes: Vec<String>,
    details: Value,
}

fn gpu(g: &CudaGpu, devices: &[DeviceInfo], container: bool) -> Gpu {
    let n = g.ordinal;
    let mut details = json!({
        "index": n,
        "uuid": g.uuid.as_ref().ok().map(uuid_text),
        "gpudirect_rdma_with_vmm": g.vmm_rdma,
        "vulkan_device": null,
        "external_memory_fd": null,
        "memory_type": null,
        "usable": false,
    });
    let fail = |text: String, fixes: Vec<&str>, details: Value| Gpu {
        text,
        usable: false,
        fixes: fixes.into_iter().map(str::to_owned).collect(),
        details,
    };
    if g.vmm_rdma == Some(false) {
        return fail(
            format!("GPU {n} cannot do GPUDirect RDMA on CUDA VMM memory"),
            vec!["this GPU cannot map VMM memory for GPUDirect (GeForce and some older boards cannot); use a data-center or workstation GPU"],
            details,
        );
    }
    let uuid = match &g.uuid {
        Ok(u) => u,
        Err(e) => return fail(format!("GPU {n}: {e}"), Vec::new(), details),
    };
    let Some(d) = devices.iter().find(|d| &d.uuid == uuid) else {
        let mut fixes = vec![INSTALL_ICD];
        if container {
            fixes.push(CONTAINER_GRAPHICS);
        }
        return fail(
            format!(
                "GPU {n} ({}): no Vulkan device has its UUID",
                uuid_text(uuid)
            ),
            fixes,
            details,
        );
    };
    details["vulkan_device"] = d.name.clone().into();
    details["external_memory_fd"] = d.external_fd.into();
    if !d.external_fd {
        return fail(
            format!(
                "GPU {n} = Vulkan device '{}', which does not offer VK_KHR_external_memory_fd",
                d.name
            ),
            vec![UPGRADE_DRIVER],
            details,
        );
    }
    let Some(t) = choose_memory_type(&d.memory_types) else {
        return fail(
            format!(
                "GPU {n} = Vulkan device '{}', which has no device-local, host-visible memory \
                 type: BAR1 is too small to map VRAM",
                d.name
            ),
            vec![RESIZABLE_BAR],
            details,
        );
    };
    details["memory_type"] = t.index.into();
    details["usable"] = true.into();
    Gpu {
        text: format!(
            "GPU {n} = Vulkan device '{}', memory type {} ({} MiB heap)",
            d.name,
            t.index,
            t.heap_size >> 20
        ),
        usable: true,
        fixes: Vec::new(),
        details,
    }
}

/// The finding from the facts.
pub fn diagnose(f: &Facts) -> Check {
    if f.gpus.is_empty() {
        return Check::new("vulkan", Status::Skip, "no GPU to check");
    }
    let base = |c: Check| {
        c.detail("requested", f.requested)
            .detail("cuda_version", f.cuda_version.map(cuda::version_string))
    };
    let version = f.cuda_version.unwrap_or(0);
    if version < VULKAN_IMPORT_MIN_VERSION {
        return base(
            Check::new(
                "vulkan",
                Status::Fail,
                format!(
                    "the Vulkan import needs CUDA 11.4 or later, the driver has {}",
                    cuda::version_string(version)
                ),
            )
            .fix("upgrade the NVIDIA driver to one with CUDA 11.4 or later"),
        )
        .detail("usable", false);
    }
    let devices = match &f.vulkan {
        Ok(d) => d,
        Err(e) => {
            let (summary, fixes): (String, Vec<&str>) = match e {
                VkFailure::Loader(e) => (
                    format!("the Vulkan loader cannot be loaded: {e}"),
                    vec![INSTALL_LOADER, INSTALL_ICD],
                ),
                VkFailure::Instance(e) => {
                    (format!("no Vulkan driver answers: {e}"), vec![INSTALL_ICD])
                }
                VkFailure::Other(e) => (format!("Vulkan: {e}"), vec![INSTALL_ICD]),
            };
            let mut k = Check::new("vulkan", Status::Fail, summary);
            for x in fixes {
                k = k.fix(x);
            }
            if f.container.is_some() {
                k = k.fix(CONTAINER_GRAPHICS);
            }
            return base(k)
                .detail("loader", !matches!(e, VkFailure::Loader(_)))
                .detail("usable", false);
        }
    };
    let gpus: Vec<Gpu> = f
        .gpus
        .iter()
        .map(|g| gpu(g, devices, f.container.is_some()))
        .collect();
    let usable = gpus.iter().filter(|g| g.usable).count();
    let all = !gpus.is_empty() && usable == gpus.len();
    let texts: Vec<&str> = gpus.iter().map(|g| g.text.as_str()).collect();
    let mut summary = match (usable, f.requested) {
        (0, false) => format!("the Vulkan import cannot map any GPU: {}", texts.join("; ")),
        (0, true) => format!(
            "{ENV}=1, but the Vulkan import cannot map any GPU: {}",
            texts.join("; ")
        ),
        (_, true) => format!("{ENV}=1: {}", texts.join("; ")),
        (_, false) if all => format!("the Vulkan import would work: {}", texts.join("; ")),
        (_, false) => format!(
            "the Vulkan import would work on some GPUs: {}",
            texts.join("; ")
        ),
    };
    let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
    if gpus
        .iter()
        .any(|g| g.details["vulkan_device"].is_null() && g.details["uuid"].is_string())
    {
        summary.push_str(&format!(
            " (Vulkan devices: {})",
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        ));
    }
    if let (true, Some(b)) = (f.requested, f.used.filter(|&b| b != "vulkan")) {
        summary.push_str(&format!(
            "; unused: the library uses the {b} backend, which comes first"
        ));
    }
    let status = match (usable, f.requested) {
        (0, _) => Status::Fail,
        (_, true) if all => Status::Pass,
        _ => Status::Warn,
    };
    let mut k = Check::new("vulkan", status, summary);
    if usable > 0 && !f.requested {
        k = k.fix(format!(
            "export {ENV}=1: libgdrapi then maps GPU memory through the Vulkan driver, with no gdrdrv"
        ));
        k = k.fix(MEMORY_RULE);
    }
    if usable > 0 {
        k = k.fix(BAR1_RULE);
        if !f.ucx_avoids_gdr_copy {
            k = k.fix(UCX_RULE);
        }
    }
    let mut seen: Vec<&str> = Vec::new();
    for x in gpus.iter().flat_map(|g| g.fixes.iter()) {
        if !seen.contains(&x.as_str()) {
            seen.push(x);
            k = k.fix(x.clone());
        }
    }
    base(k)
        .detail("loader", true)
        .detail("vulkan_devices", names)
        .detail(
            "gpus",
            Value::Array(gpus.into_iter().map(|g| g.details).collect()),
        )
        .detail("usable", all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gdrapi_support::vk::{MemoryPropertyFlags as F, MemoryTypeInfo, PhysicalDeviceType};

    const UUID: [u8; 16] = [
        0x2f, 0x1c, 0x96, 0x9a, 0x4e, 0x38, 0x7b, 0x51, 0x80, 0x0c, 0x0b, 0x59, 0x3a, 0x9d, 0x55,
        0x01,
    ];

    fn device(uuid: [u8; 16], external_fd: bool, bar: bool) -> DeviceInfo {
        let local = MemoryTypeInfo {
            index: 0,
            flags: F::DEVICE_LOCAL,
            heap_index: 0,
            heap_size: 16 << 30,
        };
        let visible = MemoryTypeInfo {
            index: 1,
            flags: F::DEVICE_LOCAL | F::HOST_VISIBLE | F::HOST_COHERENT,
            heap_index: 1,
            heap_size: 256 << 20,
        };
        DeviceInfo {
            name: "NVIDIA H100".into(),
            device_type: PhysicalDeviceType::DISCRETE_GPU,
            vendor_id: 0x10de,
            api_version: 0,
            driver_version: 0,
            uuid,
            memory_types: if bar {
                vec![local, visible]
            } else {
                vec![local]
            },
            external_fd,
        }
    }

    fn facts(vulkan: Result<Vec<DeviceInfo>, VkFailure>) -> Facts {
        Facts {
            requested: false,
            used: None,
            cuda_version: Some(13000),
            gpus: vec![CudaGpu {
                ordinal: 0,
                uuid: Ok(UUID),
                vmm_rdma: Some(true),
            }],
            vulkan,
            container: None,
            ucx_avoids_gdr_copy: false,
        }
    }

    #[test]
    fn a_matching_device_says_what_to_set() {
        let k = diagnose(&facts(Ok(vec![device(UUID, true, true)])));
        assert_eq!(k.status, Status::Warn);
        assert_eq!(
            k.summary,
            "the Vulkan import would work: GPU 0 = Vulkan device 'NVIDIA H100', memory type 1 (256 MiB heap)"
        );
        assert!(
            k.fix[0].starts_with("export GDRAPI_USE_VULKAN=1"),
            "{:?}",
            k.fix
        );
        assert!(k.fix[1].contains("CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR"));
        assert_eq!(k.get("usable"), Some(&Value::Bool(true)));
        let g = &k.get("gpus").unwrap()[0];
        assert_eq!(g["uuid"], "2f1c969a-4e38-7b51-800c-0b593a9d5501");
        assert_eq!(g["memory_type"], 1);

        let mut f = facts(Ok(vec![device(UUID, true, true)]));
        f.requested = true;
        f.used = Some("vulkan");
        let k = diagnose(&f);
        assert_eq!(k.status, Status::Pass);
        assert!(
            k.summary.starts_with("GDRAPI_USE_VULKAN=1: GPU 0 = "),
            "{}",
            k.summary
        );
        assert_eq!(k.fix, [BAR1_RULE, UCX_RULE]);
        f.ucx_avoids_gdr_copy = true;
        assert_eq!(diagnose(&f).fix, [BAR1_RULE], "UCX_TLS keeps gdr_copy out");
        f.used = Some("gdrdrv");
        let k = diagnose(&f);
        assert!(
            k.summary
                .ends_with("unused: the library uses the gdrdrv backend, which comes first"),
            "{}",
            k.summary
        );
    }

    #[test]
    fn ucx_tls_values_that_leave_gdr_copy_out() {
        for (tls, out) in [
            (None, false),
            (Some(""), false),
            (Some("^gdr_copy"), true),
            (Some("^cuda_ipc,gdr_copy"), true),
            (Some("^cuda_ipc"), false),
            (Some("rc,cuda_copy"), true),
            (Some("rc,cuda"), false),
            (Some("all"), false),
            (Some("self,gdr_copy,cuda_copy"), false),
        ] {
            assert_eq!(ucx_tls_avoids_gdr_copy(tls), out, "{tls:?}");
        }
    }

    #[test]
    fn each_missing_step_is_named_with_its_fix() {
        let k = diagnose(&facts(Err(VkFailure::Loader("no libvulkan.so.1".into()))));
        assert_eq!(k.status, Status::Fail);
        assert!(k.summary.starts_with("the Vulkan loader cannot be loaded"));
        assert!(k.fix[0].contains("libvulkan1"), "{:?}", k.fix);

        let mut f = facts(Err(VkFailure::Instance("vkCreateInstance failed".into())));
        f.container = Some("docker".into());
        let k = diagnose(&f);
        assert!(k.summary.starts_with("no Vulkan driver answers"));
        assert!(k
            .fix
            .iter()
            .any(|x| x.contains("NVIDIA_DRIVER_CAPABILITIES")));

        let k = diagnose(&facts(Ok(vec![device([7; 16], true, true)])));
        assert_eq!(k.status, Status::Fail);
        assert!(
            k.summary.ends_with(
                "GPU 0 (2f1c969a-4e38-7b51-800c-0b593a9d5501): no Vulkan device has its UUID \
                 (Vulkan devices: NVIDIA H100)"
            ),
            "{}",
            k.summary
        );
        let k = diagnose(&facts(Ok(Vec::new())));
        assert!(
            k.summary.ends_with("(Vulkan devices: none)"),
            "{}",
            k.summary
        );
        assert!(k.fix[0].contains("NVIDIA's Vulkan driver"));

        let k = diagnose(&facts(Ok(vec![device(UUID, false, true)])));
        assert_eq!(k.status, Status::Fail);
        assert!(
            k.summary.contains("VK_KHR_external_memory_fd"),
            "{}",
            k.summary
        );

        let k = diagnose(&facts(Ok(vec![device(UUID, true, false)])));
        assert_eq!(k.status, Status::Fail);
        assert!(k.summary.contains("BAR1 is too small"), "{}", k.summary);
        assert!(k.fix[0].contains("Resizable BAR"));

        let mut f = facts(Ok(vec![device(UUID, true, true)]));
        f.gpus[0].vmm_rdma = Some(false);
        let k = diagnose(&f);
        assert_eq!(k.status, Status::Fail);
        assert!(k.summary.contains("VMM"), "{}", k.summary);
        f.requested = true;
        let k = diagnose(&f);
        assert!(
            k.summary
                .starts_with("GDRAPI_USE_VULKAN=1, but the Vulkan import cannot map any GPU: "),
            "{}",
            k.summary
        );

        let mut f = facts(Ok(vec![device(UUID, true, true)]));
        f.cuda_version = Some(11030);
        let k = diagnose(&f);
        assert_eq!(k.status, Status::Fail);
        assert!(k
            .summary
            .contains("CUDA 11.4 or later, the driver has 11.3"));
    }

    #[test]
    fn some_gpus_usable_is_a_warning_with_both_stories() {
        let mut f = facts(Ok(vec![device(UUID, true, true)]));
        f.gpus.push(CudaGpu {
            ordinal: 1,
            uuid: Ok([9; 16]),
            vmm_rdma: Some(true),
        });
        let k = diagnose(&f);
        assert_eq!(k.status, Status::Warn);
        assert!(
            k.summary.contains("would work on some GPUs"),
            "{}",
            k.summary
        );
        assert!(k.summary.contains("GPU 1 ("), "{}", k.summary);
        assert_eq!(k.get("usable"), Some(&Value::Bool(false)));
    }

    #[test]
    fn loader_errors_are_told_apart() {
        let e = Error::Dl(gdrapi_support::dl::Library::open("libvulkan-missing.so.1").unwrap_err());
        assert!(matches!(VkFailure::from(e), VkFailure::Loader(_)));
        let e = Error::Vulkan {
            call: "vkCreateInstance",
            result: -9,
        };
        assert!(matches!(VkFailure::from(e), VkFailure::Instance(_)));
        assert!(matches!(
            VkFailure::from(Error::NoDevice),
            VkFailure::Other(_)
        ));
    }
}
