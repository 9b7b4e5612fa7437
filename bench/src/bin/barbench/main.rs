//! `barbench`: checks and times copies through real GPU memory mapped over the PCIe BAR with
//! Vulkan (`gdrapi_support::bar`). Needs a GPU whose Vulkan driver offers a device-local,
//! host-visible memory type; on lavapipe it runs too (CPU memory, numbers meaningless).
//!
//! Steps: device and memory type, `/proc/self/smaps` of the mapping, a second mapping through
//! the re-imported fd, the CUDA import round trip, a correctness sweep of every copy method
//! against the GPU's view, then best-of-N timings of each method, size and direction.
//!
//! `--host-wc` runs the same checks and timings on CUDA write-combined host memory instead
//! (`gdrapi_bench::hostwc`), without opening Vulkan, checked through its device pointer
//! (`cuMemHostGetDevicePointer`).

mod measure;
mod opts;
mod report;
mod run;

use opts::parse_args;
use report::{say, table, Row};
use run::{run, run_workers};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = match parse_args(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("barbench: {e}");
            return ExitCode::from(2);
        }
    };
    let mut rows = match run(&o) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("barbench: {e}");
            return ExitCode::FAILURE;
        }
    };
    if o.worker.is_some() {
        for r in &rows {
            say(&format!("row\t{}", r.tsv()));
        }
        return ExitCode::SUCCESS;
    }
    if o.check_only {
        say("barbench: checks passed");
        return ExitCode::SUCCESS;
    }
    match run_workers(&o, &args) {
        Ok(mut w) => {
            // Engine columns first: the default choice, then the forced ones.
            let (mut ours, others): (Vec<Row>, Vec<Row>) =
                rows.into_iter().partition(|r| r.method == "ours");
            ours.append(&mut w);
            ours.extend(others);
            rows = ours;
        }
        Err(e) => say(&format!("workers: {e}")),
    }
    if let Some(p) = &o.tsv {
        let text: String = std::iter::once("method\tdir\tsize\tns\tgbps".to_owned())
            .chain(rows.iter().map(Row::tsv))
            .map(|l| l + "\n")
            .collect();
        if let Err(e) = std::fs::write(p, text) {
            eprintln!("barbench: write {p}: {e}");
        }
    }
    table(&rows, &o);
    ExitCode::SUCCESS
}
