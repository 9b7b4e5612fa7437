//! `gdrcopy doctor` on the emulator: each diagnosis produced by the emulator setting (or the
//! missing piece) that causes it, checked in the text, in `--json` and in the exit status.

mod cli;
#[path = "../common/mod.rs"]
mod common;
mod container;
mod cuda;
mod driver;
mod library;
mod node;
mod vulkan;

use common::{run, Setup};
use serde_json::Value;

struct Doc {
    code: i32,
    text: String,
    json: Value,
}

impl Doc {
    fn check(&self, id: &str) -> &Value {
        self.checks(id)
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("no check {id} in\n{}", self.text))
    }
    fn checks(&self, id: &str) -> Vec<&Value> {
        self.json
            .get("checks")
            .and_then(Value::as_array)
            .expect("checks array")
            .iter()
            .filter(|c| c.get("id").and_then(Value::as_str) == Some(id))
            .collect()
    }
    fn status(&self, id: &str) -> &str {
        self.check(id)
            .get("status")
            .and_then(Value::as_str)
            .expect("status")
    }
    fn detail(&self, id: &str, key: &str) -> &Value {
        self.check(id)
            .get("details")
            .and_then(|d| d.get(key))
            .unwrap_or_else(|| panic!("no {id}.{key}"))
    }
    fn fix(&self, id: &str) -> &str {
        self.check(id)
            .get("fix")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
    /// The text line of check `id` (the line starting with its status tag).
    fn line(&self, id: &str) -> &str {
        self.text
            .lines()
            .find(|l| l.starts_with('[') && l[7..].trim_start().starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("no text line for {id} in\n{}", self.text))
    }
}

/// Runs the doctor twice (text and --json) with the same setup; both must agree on the exit status.
fn doctor(setup: Setup, env: &[(&str, &str)]) -> Doc {
    let t = run(setup, "gdrcopy", &["doctor"], env);
    let j = run(setup, "gdrcopy", &["doctor", "--json"], env);
    assert_eq!(
        t.code, j.code,
        "text and json disagree:\n{}\n{}",
        t.stdout, j.stdout
    );
    assert!(
        !t.stdout.contains('\x1b'),
        "colour on a pipe:\n{}",
        t.stdout
    );
    let json = serde_json::from_str::<Value>(&j.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}):\n{}", j.stdout));
    let ok = json.get("ok").and_then(Value::as_bool).expect("ok");
    assert_eq!(ok, t.code == 0, "ok={ok} but exit {}", t.code);
    assert!(t.code == 0 || t.code == 1);
    Doc {
        code: t.code,
        text: t.stdout,
        json,
    }
}

const NO_FALLBACK: (&str, &str) = ("GDRSIM_DMABUF", "0");

fn unsafe_geteuid_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn healthy_machine_passes_with_a_verified_round_trip() {
    let d = doctor(Setup::Full, &[]);
    assert_eq!(d.code, 0, "{}", d.text);
    for id in [
        "library",
        "device_node",
        "device_access",
        "driver_version",
        "driver_params",
        "cuda_driver",
        "gpu",
        "bar1",
        "container",
        "roundtrip",
    ] {
        assert_eq!(d.status(id), "pass", "{id}:\n{}", d.text);
        assert!(d.line(id).starts_with("[PASS]"), "{}", d.line(id));
    }
    let path = d.detail("library", "path").as_str().unwrap();
    assert!(path.ends_with("/libgdrapi.so.2.6"), "{path}");
    assert!(
        path.starts_with(&std::env::var("GDRCOPY_TEST_LIB_DIR").unwrap()),
        "{path}"
    );
    assert_eq!(d.detail("library", "version").as_str(), Some("2.6"));
    assert!(d.line("library").contains(path));
    assert_eq!(
        d.detail("driver_version", "driver_version").as_str(),
        Some("2.6")
    );
    assert_eq!(
        d.detail("driver_params", "persistent_mapping").as_bool(),
        Some(true)
    );
    assert_eq!(d.detail("gpu", "gpudirect_rdma").as_bool(), Some(true));
    assert_eq!(d.detail("roundtrip", "backend").as_str(), Some("gdrdrv"));
    assert_eq!(
        d.detail("roundtrip", "mapping_type").as_str(),
        Some("write-combining")
    );
    assert_eq!(d.detail("roundtrip", "verified").as_bool(), Some(true));
    assert!(d.detail("roundtrip", "write_mib_s").as_f64().unwrap() > 0.0);
    assert!(d.detail("roundtrip", "read_mib_s").as_f64().unwrap() > 0.0);
    assert!(d.line("roundtrip").contains("MiB/s"));
    assert!(
        d.text.contains("GPUDirect copies work on 1 GPU(s)."),
        "{}",
        d.text
    );
    // Order of the checks is the documented one.
    let ids: Vec<&str> = d
        .json
        .get("checks")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .map(|c| c.get("id").and_then(Value::as_str).unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "library",
            "device_node",
            "device_access",
            "driver_version",
            "driver_params",
            "cuda_driver",
            "gpu",
            "bar1",
            "memlock",
            "container",
            "roundtrip"
        ]
    );
}
