//! `gdrcopy doctor`: finds out why GPUDirect copies do or do not work on this machine and
//! says how to fix each problem. The verdict is a real round trip through libgdrapi.

pub mod bar1;
pub mod checks;
pub mod report;
pub mod system;
pub mod vulkan;

use report::{Check, Report, Status};

/// The backend a round trip reports.
fn backend_of(c: &Check) -> Option<&'static str> {
    match c.get("backend").and_then(|v| v.as_str()) {
        Some("gdrdrv") => Some("gdrdrv"),
        Some("dmabuf") => Some("dmabuf"),
        Some("vulkan") => Some("vulkan"),
        _ => None,
    }
}

/// Runs every check in order and returns the report. `ok` is true only when the round trip
/// worked on every GPU.
pub fn run(paths: &system::Paths) -> Report {
    let mut st = checks::State {
        container: system::container(paths),
        ..Default::default()
    };
    let mut out = vec![
        checks::library(&mut st),
        checks::device_node(&mut st, paths),
        checks::device_access(&mut st, paths),
        checks::driver_version(&mut st),
        checks::driver_params(&st, paths),
        checks::cuda_driver(&mut st),
    ];
    let gpus = st.gpus.clone();
    for &i in &gpus {
        out.push(checks::gpu(&st, i));
    }
    out.extend(bar1::bar1());
    out.push(checks::memlock());
    out.push(checks::container(&st, paths));
    // The driver fd must not stay open during the round trip: the library opens its own.
    st.node_fd = None;
    let mut trips = Vec::new();
    if gpus.is_empty() {
        trips.push(Check::new("roundtrip", Status::Skip, "no GPU to test"));
    }
    for &i in &gpus {
        trips.push(checks::roundtrip(&st, i));
    }
    bar1::explain_failed_pins(&out, &mut trips);
    let ok = !gpus.is_empty() && trips.iter().all(|c| c.status == Status::Pass);
    let backends: Vec<&'static str> = trips.iter().filter_map(backend_of).collect();
    // The Vulkan import is looked at when it was asked for, or when no backend would open.
    let open_failed = trips.iter().any(|c| {
        c.get("error")
            .and_then(|v| v.as_str())
            .is_some_and(|e| e.starts_with("gdr_open"))
    });
    let mut would_work = false;
    if !gpus.is_empty() && (vulkan::requested() || open_failed) {
        let k = vulkan::vulkan(&st, backends.first().copied());
        would_work = !ok && k.status == Status::Warn && !vulkan::requested();
        out.push(k);
    }
    // The backend every round trip went through, when none of them needed gdrdrv.
    let module_free = backends
        .first()
        .copied()
        .filter(|&b| ok && b != "gdrdrv" && backends.len() == trips.len())
        .filter(|&b| backends.iter().all(|&x| x == b));
    out.extend(trips);
    if let Some(b) = module_free {
        // gdrdrv problems do not stop copies when the library uses a backend without it.
        let name = if b == "dmabuf" { "DMA-BUF" } else { "Vulkan" };
        for c in out.iter_mut().filter(|c| {
            matches!(
                c.id,
                "device_node" | "device_access" | "driver_version" | "container"
            )
        }) {
            if c.status == Status::Fail {
                c.status = Status::Warn;
                c.summary
                    .push_str(&format!("; copies use the {name} backend instead"));
            }
        }
    }
    let verdict = if ok {
        format!("GPUDirect copies work on {} GPU(s).", gpus.len())
    } else {
        let failed: Vec<&str> = out
            .iter()
            .filter(|c| c.status == Status::Fail)
            .map(|c| c.id)
            .collect();
        let mut v = format!(
            "GPUDirect copies do NOT work. Failed: {}.",
            if failed.is_empty() {
                "roundtrip".into()
            } else {
                failed.join(", ")
            }
        );
        if would_work {
            v.push_str(&format!(
                " The Vulkan import would work: set {}=1 (see the vulkan check).",
                vulkan::ENV
            ));
        }
        v
    };
    Report {
        checks: out,
        ok,
        verdict,
    }
}
