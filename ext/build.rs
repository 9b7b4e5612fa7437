//! Links `libgdrapi_ext.so.0`: its SONAME, upstream's link flags (`-z defs`: every symbol
//! resolved at link time, from libc and libgdrapi.so.2), a RUNPATH of `$ORIGIN` (a copy of the
//! library loaded by path, as from the wheel, finds the `libgdrapi.so.2` beside it;
//! `LD_LIBRARY_PATH` and an already loaded `libgdrapi.so.2` still come first), and a link
//! dependency (`DT_NEEDED`) on `libgdrapi.so.2`.
//!
//! That dependency is made against a stub built here: a shared object whose SONAME is
//! `libgdrapi.so.2` and which defines the functions the library calls, compiled with the
//! target's C compiler driver (the linker cargo uses for the target). The library is thus
//! built without a built `libgdrapi.so.2`, for any target, and loads the real one at run time.
//! Only the cdylib links it: the crate's unit tests use stand-ins (`src/gdr.rs`) and need no
//! library at run time.

use std::path::PathBuf;
use std::process::Command;

/// The functions of libgdrapi.so.2 the library calls (a subset of gdrcopy 2.6's API).
const CALLED: &[&str] = &[
    "gdr_open",
    "gdr_close",
    "gdr_pin_buffer",
    "gdr_unpin_buffer",
    "gdr_map",
    "gdr_unmap",
    "gdr_get_info_v2",
    "gdr_copy_to_mapping",
    "gdr_copy_from_mapping",
];

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libgdrapi_ext.so.0");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,defs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,relro,-z,now");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-rpath,$ORIGIN");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--enable-new-dtags");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    println!("cargo:rerun-if-env-changed=CC");

    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("stub");
    std::fs::create_dir_all(&out).expect("create the stub directory");
    let source = out.join("gdrapi_stub.c");
    let mut text = String::from(
        "/* Link stub of libgdrapi.so.2 for libgdrapi_ext.so.0 (ext/build.rs): never loaded. */\n",
    );
    for f in CALLED {
        text.push_str(&format!("void {f}(void) {{}}\n"));
    }
    std::fs::write(&source, text).expect("write the stub source");
    // The target's C compiler driver: the linker cargo resolved for it (a cross or zig
    // toolchain's for other targets), else $CC, else cc.
    let cc = std::env::var("RUSTC_LINKER")
        .or_else(|_| std::env::var("CC"))
        .unwrap_or_else(|_| "cc".to_string());
    let lib = out.join("libgdrapi.so");
    let status = Command::new(&cc)
        .args([
            "-shared",
            "-fPIC",
            "-nostdlib",
            "-Wl,-soname,libgdrapi.so.2",
            "-o",
        ])
        .arg(&lib)
        .arg(&source)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler driver {cc}: {e}"));
    assert!(
        status.success(),
        "{cc} could not build the libgdrapi.so.2 link stub"
    );
    println!("cargo:rustc-cdylib-link-arg=-L{}", out.display());
    println!("cargo:rustc-cdylib-link-arg=-lgdrapi");
}
