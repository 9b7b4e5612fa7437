//! The doctor's findings and their two renderings: text for people (colour only on a
//! terminal, never with `NO_COLOR`) and JSON for scripts.

use serde_json::{json, Value};

/// Outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Works.
    Pass,
    /// Works, but something is worth fixing.
    Warn,
    /// Broken; `fix` says how to repair it.
    Fail,
    /// Not checked because an earlier check failed.
    Skip,
}

impl Status {
    /// The JSON spelling: `pass`, `warn`, `fail`, `skip`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Skip => "skip",
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
            Status::Skip => "SKIP",
        }
    }

    fn colour(self) -> &'static str {
        match self {
            Status::Pass => "\x1b[32m",
            Status::Warn => "\x1b[33m",
            Status::Fail => "\x1b[31m",
            Status::Skip => "\x1b[2m",
        }
    }
}

/// One finding: a stable id, its outcome, a one-line summary, the fix (commands to run) and
/// machine-readable details.
#[derive(Debug, Clone)]
pub struct Check {
    /// Stable identifier (`library`, `device_node`, ...).
    pub id: &'static str,
    /// Outcome.
    pub status: Status,
    /// One line saying what was found.
    pub summary: String,
    /// What to do about it, one command or instruction per line.
    pub fix: Vec<String>,
    /// Facts for `--json`.
    pub details: Vec<(String, Value)>,
}

impl Check {
    /// A finding with no fix and no details yet.
    pub fn new(id: &'static str, status: Status, summary: impl Into<String>) -> Check {
        Check {
            id,
            status,
            summary: summary.into(),
            fix: Vec::new(),
            details: Vec::new(),
        }
    }

    /// Adds a fix line.
    pub fn fix(mut self, line: impl Into<String>) -> Check {
        self.fix.push(line.into());
        self
    }

    /// Adds a detail.
    pub fn detail(mut self, key: &str, v: impl Into<Value>) -> Check {
        self.details.push((key.to_string(), v.into()));
        self
    }

    /// The detail `key`, if set.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.details.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// All findings plus the verdict.
#[derive(Debug, Clone)]
pub struct Report {
    /// Findings, in the order they were checked.
    pub checks: Vec<Check>,
    /// True only when the GPUDirect round trip worked on every GPU.
    pub ok: bool,
    /// One line verdict.
    pub verdict: String,
}

impl Report {
    /// The `--json` document.
    pub fn to_json(&self) -> Value {
        let checks: Vec<Value> = self
            .checks
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "status": c.status.as_str(),
                    "summary": c.summary,
                    "fix": if c.fix.is_empty() { Value::Null } else { c.fix.join("\n").into() },
                    "details": c.details.iter().cloned().collect::<serde_json::Map<_, _>>(),
                })
            })
            .collect();
        json!({
            "tool": "gdrcopy doctor",
            "version": env!("CARGO_PKG_VERSION"),
            "ok": self.ok,
            "verdict": self.verdict,
            "checks": checks,
        })
    }

    /// The human-readable text; ANSI colours only when `colour` is set.
    pub fn to_text(&self, colour: bool) -> String {
        let paint = |s: &str, code: &str| {
            if colour {
                format!("{code}{s}\x1b[0m")
            } else {
                s.to_string()
            }
        };
        let mut out = format!("gdrcopy doctor {}\n\n", env!("CARGO_PKG_VERSION"));
        for c in &self.checks {
            out.push_str(&format!(
                "[{}] {:<15} {}\n",
                paint(c.status.tag(), c.status.colour()),
                c.id,
                c.summary
            ));
            for (i, line) in c.fix.iter().enumerate() {
                let lead = if i == 0 { "fix:" } else { "    " };
                out.push_str(&format!(
                    "       {:<15} {} {}\n",
                    "",
                    paint(lead, "\x1b[1m"),
                    line
                ));
            }
        }
        let verdict_colour = if self.ok { "\x1b[1;32m" } else { "\x1b[1;31m" };
        out.push_str(&format!("\n{}\n", paint(&self.verdict, verdict_colour)));
        out
    }
}

/// Colour is used only on a terminal and only when `NO_COLOR` is unset or empty.
pub fn want_colour(is_tty: bool, no_color: Option<&str>) -> bool {
    is_tty && no_color.is_none_or(str::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ok: bool) -> Report {
        Report {
            checks: vec![
                Check::new("library", Status::Pass, "libgdrapi 2.6").detail("version", "2.6"),
                Check::new("device_node", Status::Fail, "missing").fix("sudo modprobe gdrdrv"),
            ],
            ok,
            verdict: if ok { "works".into() } else { "broken".into() },
        }
    }

    #[test]
    fn text_has_status_tags_fixes_and_no_escape_without_colour() {
        let t = sample(false).to_text(false);
        assert!(t.contains("[PASS] library"), "{t}");
        assert!(t.contains("[FAIL] device_node     missing"), "{t}");
        assert!(t.contains("fix: sudo modprobe gdrdrv"), "{t}");
        assert!(!t.contains('\x1b'));
        assert!(sample(true).to_text(true).contains("\x1b[32mPASS\x1b[0m"));
    }

    #[test]
    fn json_carries_every_field() {
        let v: Value = serde_json::from_str(&sample(false).to_json().to_string()).unwrap();
        assert_eq!(v.get("ok").and_then(Value::as_bool), Some(false));
        let checks = v.get("checks").and_then(Value::as_array).unwrap();
        assert_eq!(
            checks[1].get("status").and_then(Value::as_str),
            Some("fail")
        );
        assert_eq!(
            checks[1].get("fix").and_then(Value::as_str),
            Some("sudo modprobe gdrdrv")
        );
        assert_eq!(checks[0].get("fix"), Some(&Value::Null));
        assert_eq!(
            checks[0]
                .get("details")
                .and_then(|d| d.get("version"))
                .and_then(Value::as_str),
            Some("2.6")
        );
    }

    #[test]
    fn colour_rules() {
        assert!(want_colour(true, None));
        assert!(want_colour(true, Some("")));
        assert!(!want_colour(true, Some("1")));
        assert!(!want_colour(false, None));
    }
}
