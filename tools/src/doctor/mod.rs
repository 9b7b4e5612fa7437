//! `gdrcopy doctor`: finds out why GPUDirect copies do or do not work on this machine and
//! says how to fix each problem. The verdict is a real round trip through libgdrapi.

pub mod bar1;
pub mod checks;
pub mod report;
pub mod system;

use report::{Check, Report, Status};

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
    let dmabuf_only = ok
        && trips
            .iter()
            .all(|c| c.get("backend").and_then(|v| v.as_str()) == Some("dmabuf"));
    out.extend(trips);
    if dmabuf_only {
        // gdrdrv problems do not stop copies when the library fell back to DMA-BUF mmap.
        for c in out.iter_mut().filter(|c| {
            matches!(
                c.id,
                "device_node" | "device_access" | "driver_version" | "container"
            )
        }) {
            if c.status == Status::Fail {
                c.status = Status::Warn;
                c.summary
                    .push_str("; copies use the DMA-BUF backend instead");
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
        format!(
            "GPUDirect copies do NOT work. Failed: {}.",
            if failed.is_empty() {
                "roundtrip".into()
            } else {
                failed.join(", ")
            }
        )
    };
    Report {
        checks: out,
        ok,
        verdict,
    }
}
