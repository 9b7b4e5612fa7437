//! Sets the SONAME of the cdylib so that `libgdrapi.so.2.6` answers to `libgdrapi.so.2`,
//! exactly as upstream's link line does, and tells the code which compiler features it may
//! use beyond the workspace's `rust-version`.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libgdrapi.so.2");
    // Upstream links with -z defs: every symbol must resolve at link time (libc only).
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,defs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,relro,-z,now");
    // Any reference of the library to a name it exports binds to its own definition, never to
    // a symbol of that name that a program or a preloaded library defines.
    // `-Bsymbolic` rather than `-Bsymbolic-functions`, which zig's linker (the wheels') lacks:
    // the library exports functions only, so the two bind the same references.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
    println!("cargo:rerun-if-changed=build.rs");
    // `std::hint::cold_path` (Rust 1.95): see `src/hint.rs`.
    println!("cargo::rustc-check-cfg=cfg(has_cold_path)");
    if rustc_minor().is_some_and(|minor| minor >= 95) {
        println!("cargo:rustc-cfg=has_cold_path");
    }
}

/// The minor version of the compiler cargo builds with (`rustc 1.95.0 (...)` gives 95).
fn rustc_minor() -> Option<u32> {
    let rustc = std::env::var_os("RUSTC")?;
    let out = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let version = text.split_whitespace().nth(1)?;
    let mut parts = version.split('.');
    (parts.next()? == "1").then_some(())?;
    parts.next()?.parse().ok()
}
