//! Finding libgdrapi: none at all, the one next to the tools, `LD_LIBRARY_PATH` first, and one
//! too old to use.

use super::{doctor, Setup};
use crate::common::TempFile;

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn no_library_fails_with_the_install_fix() {
    let d = doctor(Setup::NoLibrary, &[]);
    assert_eq!(d.code, 1, "{}", d.text);
    assert_eq!(d.status("library"), "fail");
    assert!(d.line("library").contains("libgdrapi.so.2"), "{}", d.text);
    assert!(d.fix("library").contains("LD_LIBRARY_PATH"));
    // The driver is still checked directly.
    assert_eq!(d.status("device_node"), "pass");
    assert_eq!(d.status("driver_version"), "pass");
    assert_eq!(d.status("roundtrip"), "skip");
}

/// The real path of `libgdrapi.so.2` in `dir`.
fn library_in(dir: &std::path::Path) -> String {
    std::fs::canonicalize(dir.join("libgdrapi.so.2"))
        .expect("libgdrapi.so.2 there")
        .display()
        .to_string()
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn the_library_next_to_the_tools_is_found_without_a_library_path() {
    // bin/gdrcopy has a RUNPATH of $ORIGIN/../lib: build/bin finds build/lib.
    let d = doctor(Setup::PreloadOnly, &[]);
    assert_eq!(d.status("library"), "pass", "{}", d.text);
    let bin = std::env::var("GDRCOPY_TEST_BIN_DIR").expect("GDRCOPY_TEST_BIN_DIR");
    let beside = library_in(&std::path::Path::new(&bin).join("../lib"));
    assert_eq!(d.detail("library", "path").as_str(), Some(beside.as_str()));
    assert!(d.line("library").contains(&beside), "{}", d.text);
    assert_eq!(d.status("roundtrip"), "pass", "{}", d.text);
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn ld_library_path_still_wins_over_the_library_next_to_the_tools() {
    let lib = std::env::var("GDRCOPY_TEST_LIB_DIR").expect("GDRCOPY_TEST_LIB_DIR");
    let marker = TempFile::new("marker", "");
    let dir = marker.path.parent().unwrap().to_path_buf();
    let copy = dir.join("libgdrapi.so.2");
    std::fs::copy(library_in(std::path::Path::new(&lib)), &copy).expect("copy the library");
    let expected = library_in(&dir);
    let path = dir.display().to_string();
    let d = doctor(Setup::PreloadOnly, &[("LD_LIBRARY_PATH", &path)]);
    let _ = std::fs::remove_file(&copy);
    assert_eq!(d.status("library"), "pass", "{}", d.text);
    assert_eq!(
        d.detail("library", "path").as_str(),
        Some(expected.as_str())
    );
}

#[test]
#[ignore = "runs on the emulator: make test-tools"]
fn an_old_library_is_named_with_its_path() {
    // A libgdrapi.so.2 from before 2.5: no gdr_map_v2, no gdr_get_attribute.
    let src = TempFile::new(
        "old.c",
        "void *gdr_open(void) { return 0; }\nvoid gdr_runtime_get_version(int *a, int *b) { *a = 2; *b = 3; }\n",
    );
    let dir = src.path.parent().unwrap().to_path_buf();
    let so = dir.join("libgdrapi.so.2");
    let st = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&src.path)
        .status()
        .expect("cc runs");
    assert!(st.success());
    let sim = std::env::var("GDRCOPY_TEST_SIM_DIR").unwrap();
    let path = format!("{}:{sim}", dir.display());
    let d = doctor(Setup::NoLibrary, &[("LD_LIBRARY_PATH", &path)]);
    let _ = std::fs::remove_file(&so);
    assert_eq!(d.code, 1, "{}", d.text);
    assert_eq!(d.status("library"), "fail");
    let p = d.detail("library", "path").as_str().unwrap();
    assert!(
        p.ends_with("/libgdrapi.so.2") && p.contains("gdrcopy-tools-test-"),
        "{p}"
    );
    assert!(
        d.line("library").contains("does not export gdr_"),
        "{}",
        d.text
    );
    assert!(d.fix("library").contains("ldconfig -p | grep libgdrapi"));
}
