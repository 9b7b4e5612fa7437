//! The `bar1` check: each GPU's BAR1 aperture (through which GPUDirect mappings reach device
//! memory) from NVML: its size, how much is in use, whether little is left, and whether it is
//! smaller than the GPU's memory (no resizable BAR). Without NVML it is skipped.

use super::report::{Check, Status};
use gdrapi_support::nvml::{self, Gpu, Nvml};

/// Below this much free BAR1 (or a tenth of it, whichever is more), pins are likely to fail.
pub const LOW_FREE_BYTES: u64 = 64 << 20;

const MIB: u64 = 1 << 20;

/// One check per GPU NVML reports, or one skip saying why there are none.
pub fn bar1() -> Vec<Check> {
    let nvml = match Nvml::init() {
        Ok(n) => n,
        Err(e) => {
            return vec![Check::new(
                "bar1",
                Status::Skip,
                format!(
                    "BAR1 size unknown: NVML ({}) unavailable: {e}",
                    nvml::LIBNVML
                ),
            )]
        }
    };
    match nvml.gpus() {
        Ok(gpus) if !gpus.is_empty() => {
            let vulkan = super::vulkan::requested();
            gpus.iter().map(|g| diagnose(g, vulkan)).collect()
        }
        Ok(_) => vec![Check::new("bar1", Status::Skip, "NVML reports no GPU")],
        Err(e) => vec![Check::new(
            "bar1",
            Status::Skip,
            format!("BAR1 size unknown: {e}"),
        )],
    }
}

/// The finding for one GPU's figures; `vulkan`: the Vulkan import was asked for, whose pins
/// hold BAR1 for their whole allocation.
pub fn diagnose(g: &Gpu, vulkan: bool) -> Check {
    let free = g.bar1_total.saturating_sub(g.bar1_used);
    let pct = (g.bar1_used as f64 * 100.0 / g.bar1_total.max(1) as f64).round() as u64;
    let mut summary = format!(
        "GPU {}: BAR1 {} MiB, {} MiB used ({pct}%), {} MiB free",
        g.index,
        g.bar1_total / MIB,
        g.bar1_used / MIB,
        free / MIB
    );
    let small = g.memory_total.filter(|&m| g.bar1_total < m);
    if let Some(m) = small {
        summary.push_str(&format!(
            "; smaller than the GPU's {} MiB of memory (no resizable BAR): at most {} MiB can be pinned at once",
            m / MIB,
            g.bar1_total / MIB
        ));
    }
    let low = free < LOW_FREE_BYTES.max(g.bar1_total / 10);
    let mut k = Check::new(
        "bar1",
        if low { Status::Warn } else { Status::Pass },
        summary,
    );
    if low {
        let what = if vulkan {
            "pins in allocations of more than"
        } else {
            "pins of more than"
        };
        k = k.fix(format!(
            "little BAR1 is left: {what} {} MiB will fail (ENOMEM); unpin what is not in use (nvidia-smi -q -d MEMORY shows BAR1 per GPU)",
            free / MIB
        ));
    }
    if small.is_some() {
        k = k.fix("a larger BAR1 needs Resizable BAR (\"Above 4G decoding\" and \"Re-Size BAR support\" in the firmware setup) on a GPU that supports it");
    }
    k.detail("index", g.index as i64)
        .detail("name", g.name.clone())
        .detail("bar1_total_bytes", g.bar1_total)
        .detail("bar1_used_bytes", g.bar1_used)
        .detail(
            "memory_total_bytes",
            g.memory_total.map_or(serde_json::Value::Null, Into::into),
        )
        .detail("bar1_smaller_than_memory", small.is_some())
}

/// Round trips whose pin was refused with ENOMEM while a `bar1` check in `checks` warns that
/// little is left get that as the first fix.
pub fn explain_failed_pins(checks: &[Check], trips: &mut [Check]) {
    let low = checks
        .iter()
        .any(|c| c.id == "bar1" && c.status == Status::Warn && !c.fix.is_empty());
    if !low {
        return;
    }
    for t in trips.iter_mut().filter(|t| {
        t.status == Status::Fail
            && t.summary.contains("gdr_pin_buffer failed")
            && t.summary.contains("(errno 12)")
    }) {
        t.fix.insert(
            0,
            "BAR1 is nearly full (see the bar1 check): the pin did not fit in it".to_string(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(bar1_total: u64, bar1_used: u64, memory: u64) -> Gpu {
        Gpu {
            index: 0,
            name: "test".into(),
            bar1_total,
            bar1_used,
            memory_total: Some(memory),
        }
    }

    #[test]
    fn large_bar_with_room_passes() {
        let k = diagnose(&gpu(256 << 30, 1 << 30, 141 << 30), false);
        assert_eq!(k.status, Status::Pass);
        assert!(k.fix.is_empty());
        assert!(!k.summary.contains("smaller"), "{}", k.summary);
    }

    #[test]
    fn h200_figures_pass() {
        // NVML on an H200 (driver 580.159.04): BAR1 262144 MiB, 1 MiB used; 143771 MiB memory.
        let k = diagnose(&gpu(262144 << 20, 1 << 20, 143771 << 20), false);
        assert_eq!(k.status, Status::Pass);
        assert_eq!(
            k.summary,
            "GPU 0: BAR1 262144 MiB, 1 MiB used (0%), 262143 MiB free"
        );
    }

    #[test]
    fn small_bar_is_said_and_nearly_full_warns() {
        let k = diagnose(&gpu(256 << 20, 100 << 20, 24 << 30), false);
        assert_eq!(k.status, Status::Pass);
        assert!(
            k.summary.contains("smaller than the GPU's 24576 MiB"),
            "{}",
            k.summary
        );
        let k = diagnose(&gpu(256 << 20, 220 << 20, 24 << 30), false);
        assert_eq!(k.status, Status::Warn);
        assert!(
            k.fix[0].contains(": pins of more than 36 MiB will fail"),
            "{:?}",
            k.fix
        );
        let k = diagnose(&gpu(256 << 20, 220 << 20, 24 << 30), true);
        assert!(
            k.fix[0].contains("pins in allocations of more than 36 MiB will fail"),
            "{:?}",
            k.fix
        );
    }
}
