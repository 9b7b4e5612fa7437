//! Links the tool programs with a RUNPATH of `$ORIGIN/../lib`, so that `build/bin/gdrcopy`
//! finds `build/lib/libgdrapi.so.2` and an installed `bin/gdrcopy` its prefix's `lib/`, while
//! `LD_LIBRARY_PATH` (searched before RUNPATH) and `LD_PRELOAD` still win. RUNPATH applies to
//! the programs' own `dlopen` calls, which come from code linked into them.
fn main() {
    println!("cargo:rustc-link-arg-bins=-Wl,-rpath,$ORIGIN/../lib");
    println!("cargo:rustc-link-arg-bins=-Wl,--enable-new-dtags");
    println!("cargo:rerun-if-changed=build.rs");
}
