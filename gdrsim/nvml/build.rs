//! Gives the library NVML's SONAME, so that programs linked with `-lnvidia-ml` against it
//! record `libnvidia-ml.so.1`, as they do with the real one.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnvidia-ml.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
