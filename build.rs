//! Sets the SONAME of the cdylib so that `libgdrapi.so.2.6` answers to `libgdrapi.so.2`,
//! exactly as upstream's link line does.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libgdrapi.so.2");
    // Upstream links with -z defs: every symbol must resolve at link time (libc only).
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,defs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,relro,-z,now");
    println!("cargo:rerun-if-changed=build.rs");
}
