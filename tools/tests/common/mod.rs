//! Running the built tools on the emulator: `make test-tools` passes the directories of the
//! tools (`GDRCOPY_TEST_BIN_DIR`), the emulator (`GDRCOPY_TEST_SIM_DIR`) and the library
//! (`GDRCOPY_TEST_LIB_DIR`). Every run starts from a clean environment (no inherited
//! `GDRSIM_*`/`GDRCOPY_*`/`NO_COLOR`) with the container markers pointed at nothing, so the
//! results do not depend on the machine the tests run on.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// Which pieces a run gets.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    /// Emulator preloaded, library on the path: the healthy machine.
    Full,
    /// Library on the path, no libcuda at all.
    NoCuda,
    /// Emulator preloaded, no libgdrapi: the program runs from a copy in a directory whose
    /// `../lib` is empty, so its RUNPATH finds nothing either.
    NoLibrary,
    /// Emulator preloaded and nothing on the library path: the program must find libgdrapi
    /// next to itself (`$ORIGIN/../lib`).
    PreloadOnly,
    /// As `Full`, with the emulator's Vulkan stand-in (`vulkan/libvulkan.so.1` of the emulator's
    /// directory, from `make sim`) first on the library path: a machine with NVIDIA's Vulkan
    /// driver, for the Vulkan import backend (`GDRSIM_VULKAN` picks its situation).
    Vulkan,
}

/// A copy of tool `bin` in a directory of its own (`.../isolated/bin/<bin>`, no
/// `.../isolated/lib`).
fn isolated_copy(bin: &std::path::Path) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("isolated")
        .join("bin");
    std::fs::create_dir_all(&dir).expect("create a temporary bin directory");
    let name = bin.file_name().expect("a program name");
    let to = dir.join(name);
    // Copied to a temporary name first: tests run in parallel and may copy the same tool.
    let tmp = dir.join(format!(
        ".{}.{:?}",
        name.to_string_lossy(),
        std::thread::current().id()
    ));
    std::fs::copy(bin, &tmp).expect("copy the tool");
    std::fs::rename(&tmp, &to).expect("move the copy in place");
    to
}

fn dir(var: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(v) => PathBuf::from(v),
        None => panic!("{var} is not set: run these tests with `make test-tools`"),
    }
}

/// The result of one run.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Lines of stdout starting with `prefix`.
    pub fn lines_with(&self, prefix: &str) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|l| l.starts_with(prefix))
            .collect()
    }
}

/// Runs tool `bin` with `args` and extra environment `env` under `setup`.
pub fn run(setup: Setup, bin: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    run_with(setup, bin, args, env, false)
}

/// Like [`run`], but on a pseudo-terminal (through util-linux `script`): stdout and stderr
/// are both the terminal and come back together in `stdout`.
pub fn run_on_tty(setup: Setup, bin: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    run_with(setup, bin, args, env, true)
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn run_with(setup: Setup, bin: &str, args: &[&str], env: &[(&str, &str)], tty: bool) -> Run {
    let bin_dir = dir("GDRCOPY_TEST_BIN_DIR");
    let sim = dir("GDRCOPY_TEST_SIM_DIR");
    let lib = dir("GDRCOPY_TEST_LIB_DIR");
    let exe = match setup {
        Setup::NoLibrary => isolated_copy(&bin_dir.join(bin)),
        _ => bin_dir.join(bin),
    };
    let mut cmd = if tty {
        let line: Vec<String> = std::iter::once(exe.display().to_string())
            .chain(args.iter().map(|a| a.to_string()))
            .map(|a| quote(&a))
            .collect();
        let mut c = Command::new("script");
        c.args(["-qec", &line.join(" "), "/dev/null"]);
        c
    } else {
        let mut c = Command::new(&exe);
        c.args(args);
        c
    };
    cmd.env_clear();
    for keep in ["PATH", "HOME", "TMPDIR"] {
        if let Some(v) = std::env::var_os(keep) {
            cmd.env(keep, v);
        }
    }
    cmd.env(
        "GDRCOPY_DOCTOR_DOCKERENV",
        "/nonexistent/gdrcopy-test/dockerenv",
    )
    .env(
        "GDRCOPY_DOCTOR_CONTAINERENV",
        "/nonexistent/gdrcopy-test/containerenv",
    )
    .env("GDRCOPY_DOCTOR_CGROUP", "/nonexistent/gdrcopy-test/cgroup");
    let path = |dirs: &[&PathBuf]| {
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(":")
    };
    match setup {
        Setup::Vulkan => {
            let standin = sim.join("vulkan");
            assert!(
                standin.join("libvulkan.so.1").exists(),
                "no Vulkan stand-in in {}: run these tests with `make test-tools`",
                standin.display()
            );
            cmd.env("LD_PRELOAD", sim.join("libcuda.so.1"))
                .env("LD_LIBRARY_PATH", path(&[&standin, &sim, &lib]));
        }
        Setup::Full => {
            cmd.env("LD_PRELOAD", sim.join("libcuda.so.1"))
                .env("LD_LIBRARY_PATH", path(&[&sim, &lib]));
        }
        Setup::NoCuda => {
            cmd.env("LD_LIBRARY_PATH", path(&[&lib]));
        }
        Setup::NoLibrary => {
            cmd.env("LD_PRELOAD", sim.join("libcuda.so.1"))
                .env("LD_LIBRARY_PATH", path(&[&sim]));
        }
        Setup::PreloadOnly => {
            cmd.env("LD_PRELOAD", sim.join("libcuda.so.1"));
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {bin}: {e}"));
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A file with `content` in a fresh temporary directory, removed on drop.
pub struct TempFile {
    pub path: PathBuf,
}

impl TempFile {
    pub fn new(name: &str, content: &str) -> TempFile {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("gdrcopy-tools-test-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join(name);
        std::fs::write(&path, content).expect("temp file");
        TempFile { path }
    }

    pub fn as_str(&self) -> &str {
        self.path.to_str().expect("utf-8 temp path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        if let Some(d) = self.path.parent() {
            let _ = std::fs::remove_dir(d);
        }
    }
}
