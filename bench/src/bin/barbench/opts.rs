//! Usage, options, their parsing and the arguments of the worker processes.

use gdrapi_bench::error::{Error, Result};

const USAGE: &str = "\
usage: barbench [options]
  --alloc BYTES      size of the BAR (or --host-wc) allocation (default 64M)
  --max BYTES        largest copy timed (default 16M)
  --reps N           timed samples per point, the best is kept (default 5)
  --sample-ms MS     shortest sample (default 2)
  --upstream PATH    upstream libgdrapi.so.2.6, for its copy and kernels
  --impls LIST       comma-separated GDRAPI_COPY_IMPL values, one process each, besides
                     the engine's own choice; `auto`: every family this CPU runs
  --no-cuda          skip the CUDA import (checks then use a second CPU mapping)
  --host-wc          no Vulkan: check and time CUDA write-combined host memory
                     (cuMemHostAlloc, WRITECOMBINED | DEVICEMAP) instead of the BAR,
                     checked through its device pointer (needs libcuda.so.1 and a GPU)
  --check-only       stop after the checks
  --workers-only     time only the --impls processes (skip this process's methods)
  --quick            small sweep and sizes (for tests)
  --tsv PATH         write every measurement as tab-separated values
Sizes take K, M, G suffixes (powers of 1024).";

#[derive(Clone, Debug)]
pub(crate) struct Opts {
    pub(crate) alloc: usize,
    pub(crate) max: usize,
    pub(crate) reps: usize,
    pub(crate) sample_ms: f64,
    pub(crate) upstream: Option<String>,
    pub(crate) impls: Vec<String>,
    pub(crate) no_cuda: bool,
    pub(crate) host_wc: bool,
    pub(crate) check_only: bool,
    pub(crate) workers_only: bool,
    pub(crate) quick: bool,
    pub(crate) tsv: Option<String>,
    pub(crate) worker: Option<String>,
}

fn parse_size(s: &str) -> Result<usize> {
    gdrapi_bench::parse_size(s).ok_or_else(|| Error::Invalid(format!("size {s:?}")))
}

/// `auto` becomes every copy-engine family this CPU runs (`gdrapi::copy::Impl::supported`,
/// spelled as `GDRAPI_COPY_IMPL` takes them); anything else is a comma-separated list.
fn expand_impls(list: &str) -> Vec<String> {
    if list == "auto" {
        return gdrapi::copy::Impl::supported()
            .into_iter()
            .map(|i| i.name().to_owned())
            .collect();
    }
    list.split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

pub(crate) fn parse_args(args: &[String]) -> Result<Opts> {
    let mut o = Opts {
        alloc: 64 << 20,
        max: 16 << 20,
        reps: 5,
        sample_ms: 2.0,
        upstream: None,
        impls: Vec::new(),
        no_cuda: false,
        host_wc: false,
        check_only: false,
        workers_only: false,
        quick: false,
        tsv: None,
        worker: None,
    };
    use lexopt::prelude::*;
    let bad = |e: lexopt::Error| Error::Invalid(format!("{e}\n{USAGE}"));
    let mut p = lexopt::Parser::from_args(args);
    let val = |p: &mut lexopt::Parser| -> Result<String> {
        let v = p.value().map_err(bad)?;
        v.into_string()
            .map_err(|v| Error::Invalid(format!("{v:?} is not UTF-8")))
    };
    while let Some(arg) = p.next().map_err(bad)? {
        match arg {
            Long("alloc") => o.alloc = parse_size(&val(&mut p)?)?,
            Long("max") => o.max = parse_size(&val(&mut p)?)?,
            Long("reps") => {
                o.reps = val(&mut p)?
                    .parse()
                    .map_err(|_| Error::Invalid("--reps".into()))?
            }
            Long("sample-ms") => {
                o.sample_ms = val(&mut p)?
                    .parse()
                    .map_err(|_| Error::Invalid("--sample-ms".into()))?
            }
            Long("upstream") => o.upstream = Some(val(&mut p)?),
            Long("impls") => o.impls = expand_impls(&val(&mut p)?),
            Long("no-cuda") => o.no_cuda = true,
            Long("host-wc") => o.host_wc = true,
            Long("check-only") => o.check_only = true,
            Long("workers-only") => o.workers_only = true,
            Long("quick") => o.quick = true,
            Long("tsv") => o.tsv = Some(val(&mut p)?),
            Long("worker") => o.worker = Some(val(&mut p)?),
            Short('h') | Long("help") => return Err(Error::Invalid(USAGE.into())),
            other => return Err(bad(other.unexpected())),
        }
    }
    if o.reps == 0 || o.max == 0 || o.max.checked_mul(2).is_none_or(|m| m > o.alloc) {
        return Err(Error::Invalid(
            "need --reps >= 1 and 0 < 2 * --max <= --alloc".into(),
        ));
    }
    if o.host_wc && o.no_cuda {
        return Err(Error::Invalid(
            "--host-wc allocates and checks through CUDA: it cannot go with --no-cuda".into(),
        ));
    }
    Ok(o)
}

/// The arguments of the worker process for family `imp`: this process's own (so the memory,
/// sizes and `--host-wc` are the same), less what only the parent does, plus `--worker imp`.
pub(crate) fn worker_args(args: &[String], imp: &str) -> Vec<String> {
    let mut child_args: Vec<String> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--impls" | "--upstream" | "--tsv" => {
                it.next();
            }
            "--workers-only" => {}
            _ => child_args.push(a.clone()),
        }
    }
    child_args.push("--worker".into());
    child_args.push(imp.to_owned());
    child_args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_are_validated() {
        let o = parse_args(&args(&[
            "--max",
            "1M",
            "--alloc",
            "4M",
            "--impls",
            "avx2,sse41",
            "--reps",
            "3",
        ]))
        .unwrap();
        assert_eq!((o.max, o.alloc, o.reps), (1 << 20, 4 << 20, 3));
        assert_eq!(o.impls, vec!["avx2", "sse41"]);
        assert!(parse_args(&args(&["--reps", "0"])).is_err());
        assert!(parse_args(&args(&["--max", "40M"])).is_err()); // 2 * max > default alloc
        assert!(parse_args(&args(&["--upstream"])).is_err());
        assert!(parse_args(&args(&["--bogus"])).is_err());
    }

    #[test]
    fn host_wc_is_an_option_and_needs_cuda() {
        let o = parse_args(&args(&["--alloc", "4M", "--max", "1M"])).unwrap();
        assert!(!o.host_wc);
        let o = parse_args(&args(&["--host-wc", "--alloc", "4M", "--max", "1M"])).unwrap();
        assert!(o.host_wc);
        assert!(!o.no_cuda);
        let e = parse_args(&args(&["--host-wc", "--no-cuda"])).unwrap_err();
        assert!(e.to_string().contains("--no-cuda"), "{e}");
    }

    #[test]
    fn workers_get_host_wc_and_the_sizes_but_not_the_parent_only_options() {
        let parent = args(&[
            "--host-wc",
            "--impls",
            "avx2,sse41",
            "--alloc",
            "8M",
            "--max",
            "1M",
            "--upstream",
            "/x/libgdrapi.so.2.6",
            "--workers-only",
            "--tsv",
            "out.tsv",
            "--quick",
        ]);
        let child = worker_args(&parent, "avx2");
        assert_eq!(
            child,
            args(&[
                "--host-wc",
                "--alloc",
                "8M",
                "--max",
                "1M",
                "--quick",
                "--worker",
                "avx2"
            ])
        );
        // What the worker gets parses to the same memory and mode.
        let o = parse_args(&child).unwrap();
        assert!(o.host_wc);
        assert_eq!((o.alloc, o.worker.as_deref()), (8 << 20, Some("avx2")));
        assert!(o.impls.is_empty() && o.upstream.is_none() && o.tsv.is_none());
    }
}
