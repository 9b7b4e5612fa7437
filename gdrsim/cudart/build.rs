//! Gives the runtime the SONAME of CUDA 12's runtime library and a `DT_NEEDED` entry for
//! `libcuda.so.1`, whose functions it calls (resolved when loaded, like NVIDIA's runtime,
//! which finds the driver at run time too).
use std::{env, fs, path::PathBuf, process::Command};

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcudart.so.12");
    // An empty library named like the driver, only to record DT_NEEDED libcuda.so.1.
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let src = out.join("empty.c");
    fs::write(&src, "").unwrap();
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let ok = Command::new(cc)
        .args(["-shared", "-Wl,-soname,libcuda.so.1", "-o"])
        .arg(out.join("libcuda.so"))
        .arg(&src)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "cannot build the libcuda.so.1 link stub");
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,--no-as-needed,-lcuda,--as-needed");
    println!("cargo:rerun-if-changed=build.rs");
}
