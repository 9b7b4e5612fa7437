//! `gdrcopy`: the gdrcopy command; `gdrcopy doctor` diagnoses GPUDirect copy problems.

use gdrcopy_tools::doctor::{self, report, system::Paths};
use gdrcopy_tools::output::{default_sigpipe, is_tty};
use std::process::ExitCode;

const USAGE: &str = "\
Usage: gdrcopy <command> [options]

Commands:
  doctor [--json] [--no-color]
                 Check libgdrapi, /dev/gdrdrv, the gdrdrv driver, the CUDA driver and
                 each GPU, then pin, map, copy and verify a buffer on every GPU.
                 Prints a pass or a failure with its fix for each check.
                 Exit status: 0 when GPUDirect copies work, 1 when they do not,
                 2 for a usage error.
    --json       Print the findings as JSON (fields: ok, verdict, checks[].id, .status
                 (pass|warn|fail|skip), .summary, .fix, .details).
    --no-color   No colours (also when NO_COLOR is set, or stdout is not a terminal).

Options:
  -h, --help     Print this help
  -V, --version  Print the version

Environment (for tests only; they redirect what the doctor reads):
  GDRCOPY_DOCTOR_PROC_DEVICES   instead of /proc/devices
  GDRCOPY_DOCTOR_PROC_PARAMS    instead of /proc/driver/gdrdrv/params
  GDRCOPY_DOCTOR_DOCKERENV      instead of /.dockerenv
  GDRCOPY_DOCTOR_CONTAINERENV   instead of /run/.containerenv
  GDRCOPY_DOCTOR_CGROUP         instead of /proc/1/cgroup
";

fn usage_error(msg: &str) -> ExitCode {
    eprintln!("gdrcopy: {msg}");
    eprint!("{USAGE}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    default_sigpipe();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        None => usage_error("missing command"),
        Some("-h" | "--help" | "help") => {
            print!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some("-V" | "--version") => {
            println!("gdrcopy {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some("doctor") => {
            let mut json = false;
            let mut colour =
                report::want_colour(is_tty(1), std::env::var("NO_COLOR").ok().as_deref());
            for a in &args[1..] {
                match a.as_str() {
                    "--json" => json = true,
                    "--no-color" | "--no-colour" => colour = false,
                    "-h" | "--help" => {
                        print!("{USAGE}");
                        return ExitCode::SUCCESS;
                    }
                    other => return usage_error(&format!("unknown option for doctor: {other}")),
                }
            }
            let rep = doctor::run(&Paths::from_env());
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&rep.to_json()).unwrap_or_default()
                );
            } else {
                print!("{}", rep.to_text(colour));
            }
            if rep.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Some(other) => usage_error(&format!("unknown command: {other}")),
    }
}
