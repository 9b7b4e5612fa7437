//! Gives the emulator the SONAME of the CUDA driver library, so that programs linked with
//! `-lcuda` against it record `libcuda.so.1` in `DT_NEEDED`, as they do with the real driver.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
