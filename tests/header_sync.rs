//! `include/gdrapi.h` declares what the library exports, with the types the Rust side has.
//!
//! The header is written by hand and is the source of truth: it must stay source-compatible
//! with gdrcopy 2.6's own, comments and all, so it is checked, never regenerated. The
//! exported functions are written with the library's `entry!` macro, which cbindgen does not
//! expand; this test applies the macro's one change to a signature itself (an `fn` inside
//! `entry! { }` becomes `#[no_mangle] pub unsafe extern "C" fn`), has cbindgen (pinned;
//! `cbindgen.toml`) write the C prototypes of that source, and leaves the comparison to the C
//! compiler. One C program includes the header, names every function (so the header must
//! declare each) and redeclares it with cbindgen's prototype (a different return or parameter
//! type is a "conflicting types" error). The functions checked are exactly the dynamic
//! symbols of the built library (`nm -D`). The types and constants those prototypes name are
//! `gdrapi_abi::gdr`'s, which `abi/tests/gdr_header.rs` checks against the same header.

use quote::ToTokens;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh folder `name` under the target's scratch folder, one per test: tests run in
/// parallel and each removes its folder first.
fn scratch(name: &str) -> PathBuf {
    let test = std::thread::current()
        .name()
        .unwrap_or("main")
        .replace("::", "-");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("header_sync")
        .join(test)
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a scratch folder");
    dir
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

/// The body of one `entry! { }` as the function the macro makes of it.
fn expand_entry(input: syn::parse::ParseStream) -> syn::Result<syn::ItemFn> {
    let attrs = input.call(syn::Attribute::parse_outer)?;
    if !input.peek(syn::Token![fn]) {
        let kw: syn::Ident = input.parse()?;
        if kw != "unguarded" {
            return Err(syn::Error::new(kw.span(), "unknown entry! form"));
        }
    }
    let mut f: syn::ItemFn = input.parse()?;
    f.attrs = attrs;
    f.attrs.push(syn::parse_quote!(#[no_mangle]));
    f.vis = syn::parse_quote!(pub);
    f.sig.unsafety = Some(Default::default());
    f.sig.abi = Some(syn::parse_quote!(extern "C"));
    Ok(f)
}

/// Every function `src/ffi/mod.rs` defines with `entry!`, expanded; and the names of those
/// functions. cbindgen writes only prototypes, which name the C types without their
/// definitions (`gdrapi_abi::gdr`, re-exported by `src/ffi/types.rs`).
fn expanded_ffi() -> (String, Vec<String>) {
    let file = syn::parse_file(&read("src/ffi/mod.rs")).expect("parse src/ffi/mod.rs");
    let mut text = String::new();
    let mut names = Vec::new();
    for item in file.items {
        let syn::Item::Macro(m) = item else { continue };
        if !m.mac.path.is_ident("entry") {
            continue;
        }
        let f = m
            .mac
            .parse_body_with(expand_entry)
            .expect("an entry! in src/ffi/mod.rs");
        names.push(f.sig.ident.to_string());
        writeln!(text, "\n{}", f.to_token_stream()).unwrap();
    }
    (text, names)
}

/// The C prototype of every exported function, by name, as cbindgen writes it.
fn prototypes() -> Vec<(String, String)> {
    let (source, names) = expanded_ffi();
    let dir = scratch("cbindgen");
    let src = dir.join("ffi_expanded.rs");
    std::fs::write(&src, source).expect("write the expanded source");
    let config =
        cbindgen::Config::from_file(root().join("cbindgen.toml")).expect("read cbindgen.toml");
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_config(config)
        .with_src(&src)
        .generate()
        .expect("cbindgen reads the expanded source")
        .write(&mut out);
    let text = String::from_utf8(out).expect("cbindgen writes UTF-8");
    let _ = std::fs::write(dir.join("prototypes.h"), &text);
    // cbindgen writes one prototype a line (`[fn] args = "horizontal"`).
    let protos: Vec<(String, String)> = text
        .lines()
        .filter(|l| l.ends_with(");"))
        .map(|l| {
            let head = &l[..l.find('(').expect("a prototype")];
            let name = head.rsplit([' ', '*']).next().unwrap_or_default();
            (name.to_string(), l.to_string())
        })
        .collect();
    let mut got: Vec<&String> = protos.iter().map(|(n, _)| n).collect();
    let mut want: Vec<&String> = names.iter().collect();
    got.sort();
    want.sort();
    assert_eq!(
        got, want,
        "cbindgen saw other functions than entry! defines"
    );
    protos
}

/// The functions the library built for this test exports (`nm -D`).
fn exported() -> Vec<String> {
    let exe = std::env::current_exe().expect("the test binary");
    let deps = exe.parent().expect("the deps folder");
    let lib = [deps.join("libgdrapi.so"), deps.join("../libgdrapi.so")]
        .into_iter()
        .find(|p| p.exists())
        .expect("cargo builds the cdylib next to the test binary");
    let nm = std::env::var("NM").unwrap_or_else(|_| "nm".into());
    let out = Command::new(&nm)
        .args(["-D", "--defined-only"])
        .arg(&lib)
        .output()
        .unwrap_or_else(|e| panic!("run {nm} (binutils): {e}"));
    assert!(out.status.success(), "{nm} -D {} failed", lib.display());
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
            [_, "T", name] => Some(name.to_string()),
            _ => None,
        })
        .collect();
    names.sort();
    names
}

/// The C program that compares the header's declarations with the Rust side's prototypes.
fn program(protos: &[(String, String)]) -> String {
    let mut c = String::from("#include <gdrapi.h>\n\n");
    c.push_str(
        "/* The legacy name is a macro for gdr_get_info_v2, as in gdrcopy 2.6. */\n\
         #define gdr_get_info_v2 1\n\
         #if !defined(gdr_get_info) || gdr_get_info != 1\n\
         #error \"the header must #define gdr_get_info gdr_get_info_v2\"\n\
         #endif\n#undef gdr_get_info_v2\n#undef gdr_get_info\n\n",
    );
    c.push_str(
        "/* The header declares every function. */\nvoid declared(void);\nvoid declared(void)\n{\n",
    );
    for (name, _) in protos.iter().filter(|(n, _)| n != "gdr_get_info") {
        writeln!(c, "    (void){name};").unwrap();
    }
    c.push_str("}\n\n/* With the Rust prototype: a different one conflicts. */\n");
    c.push_str("typedef struct gdr_info_v1 gdr_info_v1_t;\n");
    for (_, proto) in protos {
        writeln!(c, "{proto}").unwrap();
    }
    c.push_str("\nint main(void)\n{\n    return 0;\n}\n");
    c
}

/// Compiles and runs `program` against the header in `include_dir`; the compiler's or the
/// program's complaints on failure.
fn compile_and_run(program: &str, include_dir: &Path, dir: &Path) -> Result<(), String> {
    let src = dir.join("header_check.c");
    let exe = dir.join("header_check");
    std::fs::write(&src, program).expect("write the C program");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(include_dir)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("run the C compiler {cc}: {e}"));
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let run = Command::new(&exe).output().expect("run the C program");
    if !run.status.success() {
        return Err(String::from_utf8_lossy(&run.stderr).into_owned());
    }
    Ok(())
}

#[test]
fn header_declares_every_export_with_the_rust_types() {
    let protos = prototypes();
    let mut names: Vec<String> = protos.iter().map(|(n, _)| n.clone()).collect();
    names.sort();
    assert_eq!(
        names,
        exported(),
        "the entry! functions are not the library's dynamic symbols"
    );
    assert_eq!(names.len(), 19, "{names:?}");
    let dir = scratch("ok");
    if let Err(e) = compile_and_run(&program(&protos), &root().join("include"), &dir) {
        panic!(
            "include/gdrapi.h disagrees with src/ffi (program in {}):\n{e}",
            dir.display()
        );
    }
}

#[test]
fn version_macros_parse_as_build_scripts_expect() {
    // The build reads these with awk '/#define GDR_API_MAJOR_VERSION/ {print $3}'.
    let text = read("include/gdrapi.h");
    for (name, value) in [
        ("GDR_API_MAJOR_VERSION", "2"),
        ("GDR_API_MINOR_VERSION", "6"),
    ] {
        let line = text
            .lines()
            .find(|l| l.contains(&format!("#define {name}")))
            .unwrap_or_else(|| panic!("no #define {name}"));
        assert_eq!(line.split_whitespace().nth(2), Some(value), "{line}");
    }
}

/// The comparison notices drift: each edit of a declaration in the header must fail, naming
/// what changed. (`abi/tests/gdr_header.rs` does the same for the types and constants.)
#[test]
fn every_kind_of_drift_is_caught() {
    let good = read("include/gdrapi.h");
    let program = program(&prototypes());
    let edits = [
        (
            "size_t size, int flags)",
            "size_t size, unsigned flags)",
            "gdr_map_v2",
        ),
        (
            "int gdr_close(gdr_t g);",
            "void gdr_close(gdr_t g);",
            "gdr_close",
        ),
        (
            "const void *h_ptr, size_t size);",
            "void *h_ptr, size_t size);",
            "gdr_copy_to_mapping",
        ),
        ("#define gdr_get_info gdr_get_info_v2", "", "gdr_get_info"),
        (
            "int gdr_unpin_buffer(gdr_t g, gdr_mh_t handle);",
            "",
            "gdr_unpin_buffer",
        ),
    ];
    for (i, (from, to, what)) in edits.into_iter().enumerate() {
        assert!(
            good.contains(from),
            "edit target {from:?} not in the header"
        );
        let dir = scratch(&format!("edit-{i}"));
        std::fs::write(dir.join("gdrapi.h"), good.replacen(from, to, 1)).expect("write");
        match compile_and_run(&program, &dir, &dir) {
            Ok(()) => panic!("editing {from:?} -> {to:?} went unnoticed"),
            Err(e) => assert!(
                e.contains(what),
                "editing {from:?} -> {to:?} failed without naming {what}:\n{e}"
            ),
        }
    }
}
