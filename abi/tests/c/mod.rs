//! Compiling and running the C programs the header tests write.

// Each header test includes this module and uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The folder holding a header of NVIDIA's pip wheels, found as the Makefile finds `cuda.h`:
/// the folder in `$var`, else the first `nvidia/*/include` of the Python package `nvidia` that
/// has `header`. `None` when neither has it: the caller skips, except under `CI`, where this
/// panics with `hint` (the wheel to install).
pub fn wheel_include(var: &str, header: &str, hint: &str) -> Option<PathBuf> {
    let found = std::env::var_os(var)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            let lookup = format!(
                "import glob,os,nvidia; print(next(iter(sorted(os.path.dirname(f) for p in \
                 nvidia.__path__ for f in glob.glob(p+'/*/include/{header}'))),''))"
            );
            let out = Command::new("python3")
                .args(["-c", &lookup])
                .output()
                .ok()?;
            let dir = String::from_utf8(out.stdout).ok()?;
            let dir = dir.trim();
            (out.status.success() && !dir.is_empty()).then(|| dir.into())
        });
    if found.is_none() {
        let why = format!("{header} not found: set {var} ({hint})");
        assert!(std::env::var_os("CI").is_none(), "{why}");
        eprintln!("skipped: {why}");
    }
    found
}

/// A fresh scratch folder `name` for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a scratch folder");
    dir
}

/// Writes `src` as `<name>.c`, compiles it with `$CC` (default `cc`) and the folders
/// `includes`, and runs it; panics with the compiler's messages or the exit status.
pub fn compile_and_run(name: &str, src: &str, includes: &[&Path]) {
    let dir = scratch(name);
    let c = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(&c, src).expect("write the C program");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut cmd = Command::new(&cc);
    cmd.args(["-std=c11", "-Wall", "-Wextra", "-Werror"]);
    for i in includes {
        cmd.arg("-I").arg(i);
    }
    let out = cmd
        .arg(&c)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("run {cc}: {e}"));
    assert!(
        out.status.success(),
        "{cc} rejects {}:\n{}",
        c.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let status = Command::new(&exe).status().expect("run the C program");
    assert!(status.success(), "{} failed: {status}", exe.display());
}

/// A C struct as the Rust side lays it out: its name, size and `(member, offset)` pairs.
pub struct Layout {
    /// The C type (`struct x`, or a typedef name).
    pub name: &'static str,
    /// `size_of` the Rust type.
    pub size: usize,
    /// Each C member with the Rust field's offset.
    pub fields: Vec<(&'static str, usize)>,
}

/// The [`Layout`] of Rust type `$t` for C type `$c`: `field` is the C member of the same name,
/// `field => "member"` one of another name.
#[macro_export]
macro_rules! layout {
    ($c:expr, $t:ty, [$($f:ident $(=> $m:literal)?),* $(,)?]) => {
        $crate::c::Layout {
            name: $c,
            size: ::std::mem::size_of::<$t>(),
            fields: vec![$(($crate::layout!(@member $f $($m)?), ::std::mem::offset_of!($t, $f))),*],
        }
    };
    (@member $f:ident) => { stringify!($f) };
    (@member $f:ident $m:literal) => { $m };
}

impl Layout {
    /// `_Static_assert`s of the C type's size and each member's offset.
    pub fn asserts(&self) -> String {
        let Layout { name, size, .. } = self;
        let mut s =
            format!("_Static_assert(sizeof({name}) == {size}, \"{name} is {size} bytes\");\n");
        for (f, off) in &self.fields {
            s += &format!(
                "_Static_assert(offsetof({name}, {f}) == {off}, \"{name}.{f} at {off}\");\n"
            );
        }
        s
    }
}
