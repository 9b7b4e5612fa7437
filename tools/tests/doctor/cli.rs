//! `gdrcopy`'s command line and the doctor's colour.

use super::{run, Setup, Value};
use crate::common::run_on_tty;

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn command_line_of_gdrcopy() {
    let r = run(Setup::Full, "gdrcopy", &["--version"], &[]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "gdrcopy 2.6.0\n"));
    let r = run(Setup::Full, "gdrcopy", &["--help"], &[]);
    assert_eq!(r.code, 0);
    assert!(
        r.stdout.contains("doctor [--json]") && r.stdout.contains("GDRCOPY_DOCTOR_PROC_DEVICES")
    );
    for args in [&[][..], &["frobnicate"][..], &["doctor", "--yaml"][..]] {
        let r = run(Setup::Full, "gdrcopy", args, &[]);
        assert_eq!(r.code, 2, "{args:?}");
        assert!(
            r.stderr.contains("Usage: gdrcopy"),
            "{args:?}: {}",
            r.stderr
        );
    }
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    let r = run_on_tty(Setup::Full, "gdrcopy", &["doctor"], &[]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(r.stdout.contains("\x1b[32mPASS\x1b[0m"), "{:?}", r.stdout);
    let r = run_on_tty(Setup::Full, "gdrcopy", &["doctor"], &[("NO_COLOR", "1")]);
    assert!(
        r.stdout.contains("[PASS] library") && !r.stdout.contains('\x1b'),
        "{:?}",
        r.stdout
    );
    let r = run_on_tty(Setup::Full, "gdrcopy", &["doctor", "--no-color"], &[]);
    assert!(
        r.stdout.contains("[PASS] library") && !r.stdout.contains('\x1b'),
        "{:?}",
        r.stdout
    );
    // JSON is never coloured.
    let r = run_on_tty(Setup::Full, "gdrcopy", &["doctor", "--json"], &[]);
    assert!(!r.stdout.contains('\x1b'));
    serde_json::from_str::<Value>(r.stdout.trim()).expect("JSON on a terminal");
}
