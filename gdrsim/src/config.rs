//! Run-time settings, read once from `GDRSIM_*` environment variables (see the README).

use std::sync::OnceLock;

/// Which kind of machine the emulator pretends to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// x86 with the GPU behind PCIe: mappings are write-combining, caching is refused.
    X86,
    /// A cache-coherent platform (Grace-Hopper-like): mappings default to caching.
    Coherent,
}

/// What backs the emulated GPU's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// A sparse memfd in host memory (device pointers are host addresses).
    Host,
    /// Real VRAM seen through the PCIe BAR: one Vulkan allocation, shared with the real CUDA
    /// driver (see `crate::vulkan`).
    Vulkan,
    /// BAR memory of the test provider module (`/dev/nvp2p`), pinned by the real gdrdrv
    /// module, which is not emulated (see `crate::kernel`).
    Kernel,
}

/// What `/dev/gdrdrv` is (`GDRSIM_DEVICE_NODE`), for the diagnoses a broken install produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// A character device with the driver's major: the working node.
    Char,
    /// A regular (empty) file where the node should be: it opens, but answers no ioctl.
    File,
    /// A character device left over from an earlier load of the module: its major is not
    /// the driver's (`GDRSIM_DEVICE_MAJOR` + 1), so no driver answers it (open: ENXIO).
    Stale,
    /// A character device with the driver's major, but the module is not loaded: no driver
    /// answers it (open: ENXIO).
    NoDriver,
}

/// What the Vulkan stand-in (`build/sim/vulkan/libvulkan.so.1`) shows (`GDRSIM_VULKAN`): the
/// situations a machine without gdrdrv can be in for the Vulkan import backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VkSituation {
    /// One NVIDIA-like device with external memory and a host-visible device-local type.
    Ok,
    /// No physical device (no NVIDIA ICD, e.g. a container without the graphics capability).
    NoDevice,
    /// The device lacks `VK_KHR_external_memory_fd`.
    NoExt,
    /// The device's UUID matches no CUDA device.
    OtherUuid,
    /// No memory type is both device-local and host-visible (a small BAR1).
    NoHostVisible,
    /// `vkCreateInstance` fails with VK_ERROR_INCOMPATIBLE_DRIVER (no driver at all).
    NoInstance,
}

/// All settings of one process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// `GDRSIM_PERSISTENT`: the driver's `use_persistent_mapping` module parameter.
    pub persistent_param: bool,
    /// `GDRSIM_PROFILE`.
    pub profile: Profile,
    /// `GDRSIM_DRIVER_VERSION`: the minor number of driver 2.x (0..=6).
    pub driver_minor: u32,
    /// `GDRSIM_NO_DEVICE`: `/dev/gdrdrv` does not exist.
    pub no_device: bool,
    /// `GDRSIM_DEVICE_MODE`: permission bits of the device node (owner root).
    pub device_mode: u32,
    /// `GDRSIM_DEVICE_MAJOR`: the character major the emulated module registered.
    pub device_major: u32,
    /// `GDRSIM_DEVICE_NODE`: what the node is.
    pub device_node: NodeKind,
    /// `GDRSIM_AS_USER`: treat the caller as an unprivileged user even when it is root.
    pub as_user: bool,
    /// `GDRSIM_CUDA_VERSION`: what `cuDriverGetVersion` reports.
    pub cuda_version: i32,
    /// `GDRSIM_DMABUF`: device attribute 124 (DMA-BUF supported).
    pub dmabuf: bool,
    /// `GDRSIM_VRAM_SIZE`: bytes of fake device memory per process.
    pub vram_size: u64,
    /// `GDRSIM_BAR1_SIZE`: bytes of the BAR1 aperture pins use ([`Config::bar1_size`]).
    pub bar1: Option<u64>,
    /// `GDRSIM_BAR1_RESERVED`: bytes of BAR1 in use by others (other processes, the driver).
    pub bar1_reserved: u64,
    /// `GDRSIM_BACKING`: where device memory lives.
    pub backing: Backing,
    /// `GDRSIM_DBG_ENABLED`: the driver's `dbg_enabled` module parameter, which adds
    /// `/proc/driver/gdrdrv/nv_get_pages_refcount`.
    pub dbg_enabled: bool,
    /// `GDRSIM_REAL_LIBCUDA`: path of the real CUDA driver for the Vulkan backing (`none`:
    /// no CUDA, device pointers are the arena's CPU addresses); unset: searched for.
    pub real_libcuda: Option<String>,
    /// `GDRSIM_VULKAN`: the Vulkan stand-in's situation.
    pub vulkan: VkSituation,
    /// `GDRSIM_VK_IMPORT_LIMIT`: what the process's live Vulkan imports, plus each allocation
    /// they import once, may come to (see `crate::vkstandin`).
    pub vk_import_limit: u64,
    /// `GDRSIM_VK_IMPORT_NS_PER_MIB`: nanoseconds that a Vulkan import, and the free of one,
    /// take per MiB of the allocation (0: none).
    pub vk_import_ns_per_mib: u64,
}

/// The default `GDRSIM_VK_IMPORT_LIMIT`: 891.5 GiB, between what NVIDIA's driver accepted
/// and refused on an H200 and an H100 (see the README's fidelity section).
pub const VK_IMPORT_LIMIT: u64 = 1783 << 29;
/// The default `GDRSIM_VK_IMPORT_NS_PER_MIB`: 11 us per MiB, what an import of a 1 or 4 GiB
/// allocation took on an H200.
pub const VK_IMPORT_NS_PER_MIB: u64 = 11_000;
/// The largest `GDRSIM_VK_IMPORT_NS_PER_MIB`: one second per MiB.
const MAX_NS_PER_MIB: u64 = 1_000_000_000;

impl Default for Config {
    fn default() -> Self {
        Config {
            persistent_param: true,
            profile: Profile::X86,
            driver_minor: 6,
            no_device: false,
            device_mode: 0o666,
            device_major: 237,
            device_node: NodeKind::Char,
            as_user: false,
            cuda_version: 13050,
            dmabuf: true,
            vram_size: 1 << 30,
            bar1: None,
            bar1_reserved: 0,
            backing: Backing::Host,
            dbg_enabled: false,
            real_libcuda: None,
            vulkan: VkSituation::Ok,
            vk_import_limit: VK_IMPORT_LIMIT,
            vk_import_ns_per_mib: VK_IMPORT_NS_PER_MIB,
        }
    }
}

impl Config {
    /// Whether pins are persistent: the parameter is on and the emulated driver has the feature
    /// (drivers before 2.5 only knew non-persistent pins).
    pub fn persistent(&self) -> bool {
        self.persistent_param && self.driver_minor >= 5
    }

    /// The BAR1 aperture: `GDRSIM_BAR1_SIZE`, else the VRAM size (a GPU with a resizable BAR).
    pub fn bar1_size(&self) -> u64 {
        self.bar1.unwrap_or(self.vram_size)
    }

    /// The version word GET_VERSION reports (`major << 16 | minor`).
    pub fn version_word(&self) -> u32 {
        (2 << 16) | self.driver_minor
    }

    /// Builds a configuration from a lookup function, reporting each rejected value to `warn`.
    pub fn from_lookup(
        get: impl Fn(&str) -> Option<String>,
        mut warn: impl FnMut(String),
    ) -> Config {
        let mut c = Config::default();
        let mut bad =
            |name: &str, v: &str, why: &str| warn(format!("gdrsim: ignoring {name}={v:?}: {why}"));
        if let Some(v) = get("GDRSIM_PERSISTENT") {
            match parse_bool(&v) {
                Some(b) => c.persistent_param = b,
                None => bad("GDRSIM_PERSISTENT", &v, "expected 0 or 1"),
            }
        }
        if let Some(v) = get("GDRSIM_PROFILE") {
            match v.trim() {
                "x86" => c.profile = Profile::X86,
                "coherent" => c.profile = Profile::Coherent,
                _ => bad("GDRSIM_PROFILE", &v, "expected x86 or coherent"),
            }
        }
        if let Some(v) = get("GDRSIM_DRIVER_VERSION") {
            match parse_driver_version(&v) {
                Some(m) => c.driver_minor = m,
                None => bad("GDRSIM_DRIVER_VERSION", &v, "expected 2.0 .. 2.6"),
            }
        }
        if let Some(v) = get("GDRSIM_NO_DEVICE") {
            match parse_bool(&v) {
                Some(b) => c.no_device = b,
                None => bad("GDRSIM_NO_DEVICE", &v, "expected 0 or 1"),
            }
        }
        if let Some(v) = get("GDRSIM_DEVICE_MODE") {
            match u32::from_str_radix(v.trim(), 8) {
                Ok(m) if m <= 0o7777 => c.device_mode = m,
                _ => bad(
                    "GDRSIM_DEVICE_MODE",
                    &v,
                    "expected an octal mode such as 0600",
                ),
            }
        }
        if let Some(v) = get("GDRSIM_DEVICE_MAJOR") {
            match v.trim().parse::<u32>() {
                Ok(m) if (1..=MAX_MAJOR).contains(&m) => c.device_major = m,
                _ => bad(
                    "GDRSIM_DEVICE_MAJOR",
                    &v,
                    "expected a major number from 1 to 4095",
                ),
            }
        }
        if let Some(v) = get("GDRSIM_DEVICE_NODE") {
            match v.trim() {
                "char" => c.device_node = NodeKind::Char,
                "file" => c.device_node = NodeKind::File,
                "stale" => c.device_node = NodeKind::Stale,
                "nodriver" => c.device_node = NodeKind::NoDriver,
                _ => bad(
                    "GDRSIM_DEVICE_NODE",
                    &v,
                    "expected char, file, stale or nodriver",
                ),
            }
        }
        if let Some(v) = get("GDRSIM_AS_USER") {
            match parse_bool(&v) {
                Some(b) => c.as_user = b,
                None => bad("GDRSIM_AS_USER", &v, "expected 0 or 1"),
            }
        }
        if let Some(v) = get("GDRSIM_CUDA_VERSION") {
            match v.trim().parse::<i32>() {
                Ok(n) if n > 0 => c.cuda_version = n,
                _ => bad("GDRSIM_CUDA_VERSION", &v, "expected a number such as 13050"),
            }
        }
        if let Some(v) = get("GDRSIM_DMABUF") {
            match parse_bool(&v) {
                Some(b) => c.dmabuf = b,
                None => bad("GDRSIM_DMABUF", &v, "expected 0 or 1"),
            }
        }
        if let Some(v) = get("GDRSIM_VRAM_SIZE") {
            match parse_size(&v) {
                Some(n) if (64 << 20..=1 << 46).contains(&n) => c.vram_size = n,
                _ => bad(
                    "GDRSIM_VRAM_SIZE",
                    &v,
                    "expected a size from 64M to 64T (suffix K, M, G or T)",
                ),
            }
        }
        if let Some(v) = get("GDRSIM_BAR1_SIZE") {
            match parse_size(&v) {
                Some(n) if (2 << 20..=1 << 46).contains(&n) => c.bar1 = Some(n),
                _ => bad(
                    "GDRSIM_BAR1_SIZE",
                    &v,
                    "expected a size from 2M to 64T (suffix K, M, G or T)",
                ),
            }
        }
        if let Some(v) = get("GDRSIM_BAR1_RESERVED") {
            match v.trim() {
                "0" => c.bar1_reserved = 0,
                _ => match parse_size(&v) {
                    Some(n) if n <= 1 << 46 => c.bar1_reserved = n,
                    _ => bad(
                        "GDRSIM_BAR1_RESERVED",
                        &v,
                        "expected 0 or a size up to 64T (suffix K, M, G or T)",
                    ),
                },
            }
        }
        if let Some(v) = get("GDRSIM_BACKING") {
            match v.trim() {
                "host" => c.backing = Backing::Host,
                "vulkan" => c.backing = Backing::Vulkan,
                "kernel" => c.backing = Backing::Kernel,
                _ => bad("GDRSIM_BACKING", &v, "expected host, vulkan or kernel"),
            }
        }
        if let Some(v) = get("GDRSIM_DBG_ENABLED") {
            match parse_bool(&v) {
                Some(b) => c.dbg_enabled = b,
                None => bad("GDRSIM_DBG_ENABLED", &v, "expected 0 or 1"),
            }
        }
        if let Some(v) = get("GDRSIM_REAL_LIBCUDA") {
            match v.trim() {
                "" => bad("GDRSIM_REAL_LIBCUDA", &v, "expected a path or none"),
                p => c.real_libcuda = Some(p.to_string()),
            }
        }
        if let Some(v) = get("GDRSIM_VULKAN") {
            match v.trim() {
                "ok" => c.vulkan = VkSituation::Ok,
                "nodevice" => c.vulkan = VkSituation::NoDevice,
                "noext" => c.vulkan = VkSituation::NoExt,
                "otheruuid" => c.vulkan = VkSituation::OtherUuid,
                "nohostvisible" => c.vulkan = VkSituation::NoHostVisible,
                "noinstance" => c.vulkan = VkSituation::NoInstance,
                _ => bad(
                    "GDRSIM_VULKAN",
                    &v,
                    "expected ok, nodevice, noext, otheruuid, nohostvisible or noinstance",
                ),
            }
        }
        if let Some(v) = get("GDRSIM_VK_IMPORT_LIMIT") {
            match parse_size(&v) {
                Some(n) if (2 << 20..=1 << 46).contains(&n) => c.vk_import_limit = n,
                _ => bad(
                    "GDRSIM_VK_IMPORT_LIMIT",
                    &v,
                    "expected a size from 2M to 64T (suffix K, M, G or T)",
                ),
            }
        }
        if let Some(v) = get("GDRSIM_VK_IMPORT_NS_PER_MIB") {
            match v.trim().parse::<u64>() {
                Ok(n) if n <= MAX_NS_PER_MIB => c.vk_import_ns_per_mib = n,
                _ => bad(
                    "GDRSIM_VK_IMPORT_NS_PER_MIB",
                    &v,
                    "expected nanoseconds per MiB from 0 to 1000000000",
                ),
            }
        }
        if c.backing != Backing::Host {
            // Device memory is not a file the emulator can hand out as a dma-buf.
            c.dmabuf = false;
        }
        c
    }
}

/// The largest major number Linux gives a character device (12 bits).
pub const MAX_MAJOR: u32 = 4095;

impl Config {
    /// The major `stat` reports for the node: the driver's, or for a stale node another one.
    pub fn node_major(&self) -> u32 {
        match self.device_node {
            NodeKind::Stale if self.device_major == MAX_MAJOR => MAX_MAJOR - 1,
            NodeKind::Stale => self.device_major + 1,
            _ => self.device_major,
        }
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.trim() {
        "1" => Some(true),
        "0" => Some(false),
        _ => None,
    }
}

fn parse_driver_version(v: &str) -> Option<u32> {
    let (major, minor) = v.trim().split_once('.')?;
    let minor: u32 = minor.parse().ok()?;
    (major == "2" && minor <= 6).then_some(minor)
}

/// Parses `1073741824`, `1024M`, `1G`, ... (surrounding whitespace allowed) into bytes,
/// rounded down to 2 MiB.
fn parse_size(v: &str) -> Option<u64> {
    gdrapi_support::size::parse(v.trim()).map(|bytes| bytes & !((2 << 20) - 1))
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// The process's settings, read from the environment on first use.
pub fn get() -> &'static Config {
    CONFIG.get_or_init(|| Config::from_lookup(|k| std::env::var(k).ok(), |msg| eprintln!("{msg}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> (Config, Vec<String>) {
        let mut warnings = Vec::new();
        let c = Config::from_lookup(
            |k| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            },
            |w| warnings.push(w),
        );
        (c, warnings)
    }

    #[test]
    fn defaults() {
        let (c, w) = cfg(&[]);
        assert!(w.is_empty());
        assert!(c.persistent());
        assert_eq!(c.version_word(), 0x20006);
        assert_eq!(c.profile, Profile::X86);
        assert_eq!(c.device_mode, 0o666);
        assert_eq!(c.cuda_version, 13050);
    }

    #[test]
    fn old_drivers_are_never_persistent() {
        let (c, _) = cfg(&[("GDRSIM_DRIVER_VERSION", "2.4")]);
        assert_eq!(c.version_word(), 0x20004);
        assert!(!c.persistent());
        let (c, _) = cfg(&[("GDRSIM_DRIVER_VERSION", "2.5"), ("GDRSIM_PERSISTENT", "0")]);
        assert!(!c.persistent());
    }

    #[test]
    fn bad_values_warn_and_keep_defaults() {
        let (c, w) = cfg(&[
            ("GDRSIM_DRIVER_VERSION", "3.0"),
            ("GDRSIM_PROFILE", "arm"),
            ("GDRSIM_DEVICE_MODE", "9"),
            ("GDRSIM_VRAM_SIZE", "12"),
            ("GDRSIM_DEVICE_MAJOR", "4096"),
            ("GDRSIM_DEVICE_NODE", "block"),
        ]);
        assert_eq!(w.len(), 6);
        assert_eq!(c, Config::default());
    }

    #[test]
    fn vulkan_backing_turns_dmabuf_off() {
        let (c, w) = cfg(&[]);
        assert!(w.is_empty());
        assert_eq!(
            (c.backing, c.real_libcuda.as_deref()),
            (Backing::Host, None)
        );
        let (c, w) = cfg(&[
            ("GDRSIM_BACKING", "vulkan"),
            ("GDRSIM_REAL_LIBCUDA", "none"),
            ("GDRSIM_DMABUF", "1"),
        ]);
        assert!(w.is_empty());
        assert_eq!(c.backing, Backing::Vulkan);
        assert_eq!(c.real_libcuda.as_deref(), Some("none"));
        assert!(!c.dmabuf);
        let (c, w) = cfg(&[("GDRSIM_BACKING", "vram"), ("GDRSIM_REAL_LIBCUDA", " ")]);
        assert_eq!(w.len(), 2);
        assert_eq!(c, Config::default());
    }

    #[test]
    fn sizes_and_modes() {
        let (c, w) = cfg(&[("GDRSIM_VRAM_SIZE", "256M"), ("GDRSIM_DEVICE_MODE", "0600")]);
        assert!(w.is_empty());
        assert_eq!(c.vram_size, 256 << 20);
        assert_eq!(c.bar1_size(), 256 << 20, "BAR1 defaults to the VRAM size");
        assert_eq!(c.device_mode, 0o600);
        let (c, w) = cfg(&[("GDRSIM_BAR1_SIZE", "16M")]);
        assert!(w.is_empty());
        assert_eq!(c.bar1_size(), 16 << 20);
        let (c, w) = cfg(&[("GDRSIM_BAR1_SIZE", "1M")]);
        assert_eq!((w.len(), c.bar1), (1, None));
        let (c, w) = cfg(&[("GDRSIM_BAR1_RESERVED", "250M")]);
        assert!(w.is_empty());
        assert_eq!(c.bar1_reserved, 250 << 20);
        assert_eq!(parse_size("99999999999T"), None);
    }

    #[test]
    fn vulkan_situations() {
        let (c, w) = cfg(&[]);
        assert!(w.is_empty());
        assert_eq!(c.vulkan, VkSituation::Ok);
        for (v, want) in [
            ("ok", VkSituation::Ok),
            ("nodevice", VkSituation::NoDevice),
            (" noext", VkSituation::NoExt),
            ("otheruuid", VkSituation::OtherUuid),
            ("nohostvisible", VkSituation::NoHostVisible),
            ("noinstance", VkSituation::NoInstance),
        ] {
            let (c, w) = cfg(&[("GDRSIM_VULKAN", v)]);
            assert!(w.is_empty(), "{v}");
            assert_eq!(c.vulkan, want, "{v}");
        }
        let (c, w) = cfg(&[("GDRSIM_VULKAN", "none")]);
        assert_eq!((w.len(), c.vulkan), (1, VkSituation::Ok));
    }

    #[test]
    fn vulkan_import_limit() {
        let (c, w) = cfg(&[]);
        assert!(w.is_empty());
        assert_eq!(c.vk_import_limit, 1783 << 29);
        for (v, want) in [("6M", 6 << 20), ("7M", 6 << 20), ("2T", 2 << 40)] {
            let (c, w) = cfg(&[("GDRSIM_VK_IMPORT_LIMIT", v)]);
            assert!(w.is_empty(), "{v}");
            assert_eq!(c.vk_import_limit, want, "{v}");
        }
        for v in ["1M", "0", "100T", "-1"] {
            let (c, w) = cfg(&[("GDRSIM_VK_IMPORT_LIMIT", v)]);
            assert_eq!(w.len(), 1, "{v}");
            assert_eq!(c, Config::default());
        }
    }

    #[test]
    fn vulkan_import_cost() {
        let (c, w) = cfg(&[]);
        assert!(w.is_empty());
        assert_eq!(c.vk_import_ns_per_mib, 11_000);
        for (v, want) in [
            (" 0", 0),
            ("10000000", 10_000_000),
            ("1000000000", 1_000_000_000),
        ] {
            let (c, w) = cfg(&[("GDRSIM_VK_IMPORT_NS_PER_MIB", v)]);
            assert!(w.is_empty(), "{v}");
            assert_eq!(c.vk_import_ns_per_mib, want, "{v}");
        }
        for v in ["-1", "1000000001", "11us", "1e4", ""] {
            let (c, w) = cfg(&[("GDRSIM_VK_IMPORT_NS_PER_MIB", v)]);
            assert_eq!(w.len(), 1, "{v}");
            assert_eq!(c, Config::default());
        }
    }

    #[test]
    fn node_kinds_and_majors() {
        let (c, w) = cfg(&[]);
        assert!(w.is_empty());
        assert_eq!((c.device_node, c.node_major()), (NodeKind::Char, 237));
        let (c, w) = cfg(&[
            ("GDRSIM_DEVICE_NODE", "stale"),
            ("GDRSIM_DEVICE_MAJOR", "300"),
        ]);
        assert!(w.is_empty());
        assert_eq!((c.device_major, c.node_major()), (300, 301));
        let (c, _) = cfg(&[
            ("GDRSIM_DEVICE_NODE", "stale"),
            ("GDRSIM_DEVICE_MAJOR", "4095"),
        ]);
        assert_eq!(c.node_major(), 4094);
        let (c, _) = cfg(&[
            ("GDRSIM_DEVICE_NODE", "nodriver"),
            ("GDRSIM_DEVICE_MAJOR", "0"),
        ]);
        assert_eq!((c.device_node, c.node_major()), (NodeKind::NoDriver, 237));
        let (c, _) = cfg(&[("GDRSIM_DEVICE_NODE", " file ")]);
        assert_eq!(c.device_node, NodeKind::File);
    }
}
