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
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a scratch folder");
    dir
}

/// Writes `src` as `<name>.c`, compiles it with `$CC` (default `cc`) and the folders
/// `includes`, and runs it; panics with the compiler's messages or the exit status.
pub fn compile_and_run(name: &str, src: &str, includes: &[&Path]) {
    if let Err(e) = try_compile_and_run(name, src, includes) {
        panic!("{e}");
    }
}

/// [`compile_and_run`], with the compiler's messages or the program's (its standard error)
/// as the error: for tests that expect a program to fail.
pub fn try_compile_and_run(name: &str, src: &str, includes: &[&Path]) -> Result<(), String> {
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
    if !out.status.success() {
        return Err(format!(
            "{cc} rejects {}:\n{}",
            c.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let run = Command::new(&exe).output().expect("run the C program");
    if !run.status.success() {
        return Err(format!(
            "{} failed: {}\n{}",
            exe.display(),
            run.status,
            String::from_utf8_lossy(&run.stderr)
        ));
    }
    Ok(())
}

/// A C struct as the Rust side lays it out: its name, size and members.
pub struct Layout {
    /// The C type (`struct x`, or a typedef name).
    pub name: &'static str,
    /// `size_of` the Rust type.
    pub size: usize,
    /// Each C member with the Rust field's offset and size.
    pub fields: Vec<(&'static str, usize, usize)>,
}

/// The size of the field that `_f` picks out of a `T`.
pub fn field_size<T, F>(_f: impl Fn(&T) -> &F) -> usize {
    std::mem::size_of::<F>()
}

/// The [`Layout`] of Rust type `$t` for C type `$c`: `field` is the C member of the same name,
/// `field => "member"` one of another name.
#[macro_export]
macro_rules! layout {
    ($c:expr, $t:ty, [$($f:ident $(=> $m:literal)?),* $(,)?]) => {
        $crate::c::Layout {
            name: $c,
            size: ::std::mem::size_of::<$t>(),
            fields: vec![$((
                $crate::layout!(@member $f $($m)?),
                ::std::mem::offset_of!($t, $f),
                $crate::c::field_size(|s: &$t| &s.$f),
            )),*],
        }
    };
    (@member $f:ident) => { stringify!($f) };
    (@member $f:ident $m:literal) => { $m };
}

impl Layout {
    /// `_Static_assert`s of the C type's size and each member's offset and size.
    pub fn asserts(&self) -> String {
        let Layout { name, size, .. } = self;
        let mut s =
            format!("_Static_assert(sizeof({name}) == {size}, \"{name} is {size} bytes\");\n");
        for (f, off, len) in &self.fields {
            s += &format!(
                "_Static_assert(offsetof({name}, {f}) == {off} && sizeof((({name} *)0)->{f}) == {len}, \
                 \"{name}.{f}: {len} bytes at {off}\");\n"
            );
        }
        s
    }
}
