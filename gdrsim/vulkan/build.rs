//! Gives the library the Vulkan loader's SONAME, so that programs linked with `-lvulkan`
//! against it record `libvulkan.so.1`, as they do with the real loader.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libvulkan.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
