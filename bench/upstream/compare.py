#!/usr/bin/env python3
"""Run gdrcopy's copylat, copybw and apiperf against two libgdrapi.so.2 builds, alternating.

Every round runs each tool once per library, in an order that rotates from round to round,
each process pinned to one CPU (near the GPU where sysfs says which CPUs are). Per size and
direction it prints each library's median over the rounds and the min / median / max of the
per-round ratio, oriented so that a ratio above 1 means the first library ("ours") is faster.
With --control, a third arm runs the second library again: its ratio spread is what identical
code measures, the noise floor against which the other ratios are read, and each row gets a
verdict: "ahead" (median ratio at least 1.0), "within A/A" (below 1.0 but not below the lowest
A/A ratio of the run) or "BELOW A/A"; a tally and the rows below follow the tables. That rule
flags identical code too: the median of one arm's ratios falls below the lowest of the other's
in several rows of a run by chance (run with --ours naming a copy of the second library to see
how many). The rank test beside it is stricter: a row is behind "in every round" when each of
its ratios is below 1.0 and below each A/A ratio, which identical code does by chance in at
most 1 row of C(2n, n) (1 in 252 with 5 rounds).

The direction check sees what those per-row rules miss: a small deficit that is consistent
across neighbouring sizes but inside each row's noise. Per tool and direction (copylat's
gdr_copy_to_mapping and gdr_copy_from_mapping, copybw's write and read, each call of apiperf)
it counts the rows whose median ratio is below 1.0, k of n, and gives the chance of that many
for identical code, P(X >= k) with X ~ Binomial(n, 0.5): a sign test (why 0.5 rather than the
A/A arm's share of such rows: direction_check). A chance below 0.01 is a CONSISTENT DEFICIT.
--direction-max-size N adds the same check over the rows of size at most N (small copies have
costs of their own). With --control each line also gives the A/A arm's count, and a last line
how many of the A/A arm's own checks are flagged: what identical code gets in this run. The
binomial takes the rows as independent, which rows timed by one process are not, so identical
code is flagged more often than the chance says, the more so with fewer rounds (the output
says so below 5 rounds).

The test programs are run unmodified; which library they load is chosen with LD_LIBRARY_PATH
(programs that have their own RUNPATH still yield to it). On the emulator, --sim names the
folder of its libcuda.so.1, which is preloaded; its GDRSIM_* settings pass through.

An arm is a library folder and the way it is reached, so that one library can also be compared
with itself over two routes to the memory: --ours-env / --upstream-env VAR=VALUE set variables
for one arm's runs only (after all others), --ours-args / --upstream-args TOOL=ARGS replace
--args and the defaults for one arm's runs of a tool, --sim-arms ours|upstream preloads the
emulator for that arm only (default both), and --names FIRST,SECOND labels the arms in the
output (default ours,upstream). The A/A control arm is the second arm again, with all of its
settings. The header prints each arm's settings.

The tool "ucx" (--tools ucx, with --ucx naming a UCX installation built against libgdrapi)
runs UCX's ucx_perftest in loopback, once per case and size: UCP tag-matching latency with
GPU memory on both sides and from host to GPU memory, and tag bandwidth GPU to GPU, with
UCX_TLS=self,gdr_copy,cuda_copy (UCX's other settings at their defaults); it reports the
typical latency.
"""

import argparse
import dataclasses
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from typing import Optional

TOOLS = ("copylat", "copybw", "apiperf")
# Tools run only when asked for with --tools.
EXTRA_TOOLS = ("ucx",)
# (label, environment, memory types "send[,receive]", ucx_perftest arguments) of the "ucx"
# tool's cases. UCP tag matching over gdr_copy: a message received into GPU memory is written
# with gdr_copy_to_mapping, one sent from GPU memory is read with gdr_copy_from_mapping. (UCT
# put_lat over gdr_copy needs GPU memory on both sides and then reads the source through its
# CUDA device pointer with the CPU, which only the emulator's host backing allows.)
UCX_TLS = {"UCX_TLS": "self,gdr_copy,cuda_copy"}
UCX_CASES = (
    ("ucp tag_lat gpu-gpu", UCX_TLS, "cuda", ["-t", "tag_lat"]),
    ("ucp tag_lat host-gpu", UCX_TLS, "host,cuda", ["-t", "tag_lat"]),
    ("ucp tag_bw gpu-gpu", UCX_TLS, "cuda", ["-t", "tag_bw"]),
)
UCX_SIZES = (8, 256, 4096, 65536, 1 << 20)
UCX_QUICK_SIZES = (8, 4096)
# The values of --sim-arms: which of the two arms are run on the emulator.
SIM_ARMS = ("both", "ours", "upstream")


@dataclasses.dataclass
class Arm:
    """One arm of the comparison: how each tool is run for it.

    name: its label in the output; libdir: the folder whose libgdrapi.so.2 it loads; env: the
    environment variables set for its runs only (after everything else); overrides: its
    arguments per tool ({tool: argv}), in place of the defaults; sim: the emulator's folder
    when it runs on the emulator, else None."""
    name: str
    libdir: str
    env: dict = dataclasses.field(default_factory=dict)
    overrides: dict = dataclasses.field(default_factory=dict)
    sim: Optional[str] = None

    def again(self):
        """The A/A control arm: this arm run a second time, with all of its settings."""
        return dataclasses.replace(self, name=f"{self.name}-again")


def parse_env(specs, option):
    """{VAR: VALUE} from VAR=VALUE strings; ValueError naming the option for a malformed one."""
    env = {}
    for spec in specs:
        var, eq, value = spec.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
            raise ValueError(f"{option} {spec!r}: expected VAR=VALUE")
        env[var] = value
    return env


def parse_tool_args(specs, option):
    """{tool: argv} from TOOL=ARGS strings (ARGS split at white space); a later one for the same
    tool wins; ValueError naming the option for an unknown tool."""
    overrides = {}
    for spec in specs:
        tool, _, rest = spec.partition("=")
        if tool not in TOOLS + EXTRA_TOOLS:
            raise ValueError(f"{option} {spec!r}: unknown tool {tool!r}")
        overrides[tool] = rest.split()
    return overrides


def parse_names(text):
    """The two arms' labels from "FIRST,SECOND"."""
    names = text.split(",")
    if len(names) != 2 or not all(names) or names[0] == names[1]:
        raise ValueError(f"--names {text!r}: expected two different labels, FIRST,SECOND")
    if names[0] == f"{names[1]}-again":
        raise ValueError(f"--names {text!r}: {names[0]!r} is the name of the A/A control arm")
    return names


def make_arms(args):
    """[first arm, second arm, and with --control the second arm again] from the options."""
    if args.sim_arms != "both" and not args.sim:
        raise ValueError(f"--sim-arms {args.sim_arms} needs --sim")
    common = parse_tool_args(args.args, "--args")
    names = parse_names(args.names)
    arms = []
    for role, name in zip(("ours", "upstream"), names):
        arms.append(Arm(
            name=name, libdir=getattr(args, role),
            env=parse_env(getattr(args, f"{role}_env"), f"--{role}-env"),
            overrides={**common, **parse_tool_args(getattr(args, f"{role}_args"), f"--{role}-args")},
            sim=args.sim if args.sim_arms in ("both", role) else None))
    if args.control:
        arms.append(arms[1].again())
    return arms


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tests", help="folder of gdrcopy_copylat, _copybw, _apiperf")
    p.add_argument("--ours", required=True, help="folder holding our libgdrapi.so.2")
    p.add_argument("--upstream", required=True, help="folder holding the other libgdrapi.so.2")
    p.add_argument("--sim", help="folder of the emulator's libcuda.so.1 (preloaded)")
    p.add_argument("--sim-arms", default="both", choices=SIM_ARMS,
                   help="the arms that run on the emulator named by --sim (default both)")
    p.add_argument("--names", default="ours,upstream", metavar="FIRST,SECOND",
                   help="labels of the two arms in the output (default ours,upstream)")
    p.add_argument("--ucx", help="UCX installation prefix, for --tools ucx (bin/ucx_perftest)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--cpu", default="auto", help="CPU to pin to: a number, auto, or none")
    p.add_argument("--tools", default=",".join(TOOLS))
    p.add_argument("--quick", action="store_true", help="small sizes and few iterations")
    p.add_argument("--control", action="store_true",
                   help="also run the second library a second time (A/A noise floor)")
    p.add_argument("--json", help="write every sample and the summary to this file")
    p.add_argument("--direction-max-size", type=int, metavar="N",
                   help="also run the direction check on the rows of size at most N bytes")
    p.add_argument("--args", action="append", default=[], metavar="TOOL=ARGS",
                   help="the arguments for one tool instead of the defaults, e.g. "
                        "'apiperf=-s 65536 -n 300' (repeatable); for ucx, ucx_perftest "
                        "options added after the defaults, e.g. 'ucx=-n 100 -w 5'")
    for arm in ("ours", "upstream"):
        p.add_argument(f"--{arm}-env", action="append", default=[], metavar="VAR=VALUE",
                       help=f"an environment variable of the {arm} arm's runs only (repeatable)")
        p.add_argument(f"--{arm}-args", action="append", default=[], metavar="TOOL=ARGS",
                       help=f"the {arm} arm's arguments for one tool, in place of --args and "
                            "the defaults (repeatable)")
    p.add_argument("--timeout", type=int, default=600, help="seconds per tool run")
    p.add_argument("--verbose", action="store_true", help="print each tool's output")
    return p.parse_args(argv)


def gpu_local_cpus():
    """CPUs sysfs lists as local to the first NVIDIA display/3D controller, with its address."""
    base = "/sys/bus/pci/devices"
    try:
        devices = sorted(os.listdir(base))
    except OSError:
        return None, []
    for dev in devices:
        try:
            with open(f"{base}/{dev}/vendor") as f:
                vendor = f.read().strip()
            with open(f"{base}/{dev}/class") as f:
                cls = f.read().strip()
            if vendor != "0x10de" or not cls.startswith("0x03"):
                continue
            with open(f"{base}/{dev}/local_cpulist") as f:
                return dev, expand_cpulist(f.read().strip())
        except OSError:
            continue
    return None, []


def expand_cpulist(text):
    cpus = []
    for part in text.split(","):
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-")
            cpus.extend(range(int(lo), int(hi) + 1))
        else:
            cpus.append(int(part))
    return cpus


def choose_cpu(arg):
    """(cpu or None, sentence saying why)."""
    if arg == "none":
        return None, "not pinned (--cpu none)"
    allowed = sorted(os.sched_getaffinity(0))
    if arg != "auto":
        cpu = int(arg)
        if cpu not in allowed:
            sys.exit(f"compare: CPU {cpu} is not in this process's affinity set {allowed}")
        return cpu, f"pinned to CPU {cpu} (--cpu)"
    gpu, local = gpu_local_cpus()
    # CPU 0 takes most interrupts; prefer another CPU that is local to the GPU.
    candidates = [c for c in local if c in allowed]
    if candidates:
        cpu = next((c for c in candidates if c != 0), candidates[0])
        return cpu, f"pinned to CPU {cpu}, local to GPU {gpu} (local_cpulist {len(local)} CPUs)"
    cpu = next((c for c in reversed(allowed) if c != 0), allowed[0])
    where = f"GPU {gpu} lists no local CPU" if gpu else "no NVIDIA GPU in sysfs"
    return cpu, f"pinned to CPU {cpu} ({where}; the last CPU this process may use)"


def tool_argv(tool, quick, overrides):
    if tool in overrides:
        return overrides[tool]
    if tool == "copylat":
        return ["-s", str(64 << 10), "-w", "1000", "-r", "100"] if quick else ["-s", str(1 << 20)]
    if tool == "copybw":
        if quick:
            return ["-s", str(64 << 10), "-c", str(64 << 10), "-l", "-w", "1000", "-r", "20"]
        return ["-s", str(1 << 20), "-c", str(1 << 20), "-l"]
    if tool == "apiperf":
        return ["-s", str(256 << 10), "-n", "200"] if quick else ["-s", str(1 << 20), "-n", "1000"]
    raise ValueError(tool)


# Each parser returns {(metric, size): value} and whether larger values are better.
COPYLAT_ROW = re.compile(r"^(gdr_copy_(?:to|from)_mapping)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s*$")


def parse_copylat(text):
    out = {}
    for line in text.splitlines():
        m = COPYLAT_ROW.match(line.strip())
        if m:
            out[(m.group(1), int(m.group(2)))] = float(m.group(3))
    return out, False


def parse_copybw(text):
    out = {}
    size = None
    for line in text.splitlines():
        m = re.match(r"^(writing|reading) test, size=(\d+)", line.strip())
        if m:
            size = int(m.group(2))
            continue
        m = re.match(r"^(write|read) BW: ([\d.]+)\s*MB/s", line.strip())
        if m and size is not None:
            out[(f"copybw {m.group(1)} MB/s", size)] = float(m.group(2))
    return out, True


def parse_apiperf(text):
    out = {}
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if not line.startswith("Size(B)\tpin"):
            continue
        names = [h.split(".")[0] for h in line.split("\t")[1:]]
        cols = lines[i + 1].split("\t")
        size = int(cols[0])
        for name, value in zip(names, cols[1:]):
            out[(f"apiperf {name} us", size)] = float(value)
    return out, False


PERFTEST_ROW = re.compile(r"^(?:Final:)?\s*\d+\s+([\d.]+)\s")


def parse_perftest(text):
    """The typical latency (us) of ucx_perftest's final result line."""
    rows = [m.group(1) for m in map(PERFTEST_ROW.match, text.splitlines()) if m]
    return float(rows[-1]) if rows else None


PARSERS = {"copylat": parse_copylat, "copybw": parse_copybw, "apiperf": parse_apiperf}


def tool_env(args, arm, ucx=None):
    """The environment of one of the arm's runs: ours, the arm's library folder first in
    LD_LIBRARY_PATH (after the emulator's, which is preloaded, where the arm runs on it), and
    the arm's own variables last. ucx: the ucx tool's case variables, which replace any UCX_*
    variable of ours."""
    env = dict(os.environ)
    paths = [arm.libdir]
    if arm.sim:
        paths.insert(0, arm.sim)
        env["LD_PRELOAD"] = os.path.join(arm.sim, "libcuda.so.1")
    if args.ucx:
        paths.append(os.path.join(args.ucx, "lib"))
    env["LD_LIBRARY_PATH"] = ":".join(paths + [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p])
    if ucx is not None:
        env = {k: v for k, v in env.items() if not k.startswith("UCX_")}
        env.update(ucx)
    env.update(arm.env)
    return env


def run_ucx(args, arm, cpu):
    """One ucx_perftest run per case and size for the arm."""
    exe = os.path.join(args.ucx, "bin", "ucx_perftest")
    values = {}
    start = time.monotonic()
    for label, extra, mem, case in UCX_CASES:
        for size in UCX_QUICK_SIZES if args.quick else UCX_SIZES:
            n = 200 if size >= 65536 or args.quick else 2000
            argv = [exe, "-l", "-m", mem, "-s", str(size), "-n", str(n), "-w", "20", "-f"] + case
            argv += arm.overrides.get("ucx", [])  # perftest takes the last -n, -w given
            if cpu is not None:
                argv = ["taskset", "-c", str(cpu)] + argv
            proc = subprocess.run(argv, env=tool_env(args, arm, extra), capture_output=True,
                                  text=True, timeout=args.timeout)
            if args.verbose:
                print(proc.stdout + proc.stderr)
            lat = parse_perftest(proc.stdout) if proc.returncode == 0 else None
            if lat is None:
                sys.exit(f"compare: {' '.join(argv)} for {arm.name} ({arm.libdir}) exited "
                         f"{proc.returncode}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
            values[(f"{label} us", size)] = lat
    return values, False, time.monotonic() - start


def run_tool(tool, args, arm, cpu):
    if tool == "ucx":
        return run_ucx(args, arm, cpu)
    exe = os.path.join(args.tests, f"gdrcopy_{tool}")
    argv = [exe] + tool_argv(tool, args.quick, arm.overrides)
    if cpu is not None:
        argv = ["taskset", "-c", str(cpu)] + argv
    env = tool_env(args, arm)
    start = time.monotonic()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=args.timeout)
    elapsed = time.monotonic() - start
    if args.verbose:
        print(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        sys.exit(f"compare: {' '.join(argv)} for {arm.name} ({arm.libdir}) exited "
                 f"{proc.returncode}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    values, higher_better = PARSERS[tool](proc.stdout)
    if not values:
        sys.exit(f"compare: no result lines in the output of {' '.join(argv)}:\n{proc.stdout[-2000:]}")
    return values, higher_better, elapsed


def verdict(row):
    """The verdict on one row (see the module doc); None without an A/A arm."""
    if row["ratio_median"] >= 1.0:
        return "ahead"
    if "aa_min" not in row:
        return None
    return "within A/A" if row["ratio_median"] >= row["aa_min"] else "BELOW A/A"


def below_every_round(row):
    """Whether every per-round ratio of the row lies below 1.0 and below every A/A ratio (see
    the module doc): False without an A/A arm. A row ahead of the other library in some round
    is not behind in every round, however fast the A/A arm's second run of that library was."""
    return "aa_min" in row and row["ratio_max"] < min(1.0, row["aa_min"])


def chance_every_round(rounds):
    """The chance that identical code is behind in every round of one row: 1 / C(2n, n)."""
    return 1 / math.comb(2 * rounds, rounds)


# The direction check's threshold: a chance below it for identical code is a consistent deficit.
DIRECTION_ALPHA = 0.01
# Fewer rounds than this get a warning: on the emulator identical code had 1.2 % of its checks
# flagged with 5 rounds, 4.2 % with 3 (direction_check).
DIRECTION_ROUNDS = 5


def binomial_tail(k, n, p):
    """P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return min(1.0, sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k, n + 1)))


def direction_label(tool, metric):
    """A direction's name in the output: "copylat gdr_copy_to_mapping", "copybw write",
    "apiperf pin", "ucx ucp tag_lat gpu-gpu" (the metric without its tool and unit)."""
    if metric.startswith(f"{tool} "):
        metric = metric[len(tool) + 1:]
    for unit in (" us", " MB/s"):
        if metric.endswith(unit):
            metric = metric[:-len(unit)]
    return f"{tool} {metric}"


def direction_groups(rows, max_size=None):
    """{(tool, metric): [rows]}, the rows of each tool and direction (copylat's to and from
    mapping, copybw's write and read, each apiperf call...) in order of first appearance; with
    max_size, only rows whose size is at most that."""
    groups = {}
    for r in rows:
        if max_size is None or r["size"] <= max_size:
            groups.setdefault((r["tool"], r["metric"]), []).append(r)
    return groups


def direction_check(rows, max_size=None):
    """The direction check (see the module doc) of each group of direction_groups(rows,
    max_size): how many rows (k of n) have a median ratio below 1.0, and the chance P(X >= k),
    X ~ Binomial(n, 0.5), of that many for identical code: a sign test. With an A/A arm, the
    same count and chance for it (j of n rows with an A/A median ratio below 1.0), what
    identical code got in the same run.

    Why 0.5 and not p = the A/A arm's share of rows below 1.0: the A/A count is itself one
    noisy draw of what the count measures, so a test against it adds its noise to that of k.
    On the emulator with identical code on every arm (5 rounds, 320 checks of at least 5 rows),
    p = (j + 1) / (n + 2) flagged 6.2 % of the checks and 0.5 flagged 1.2 %, near the nominal
    1 % (with 3 rounds: 11 % and 4 %). Ties (equal printed times give a ratio of exactly 1.0)
    count as not below, which only makes 0.5 more cautious. The binomial takes the rows as
    independent; rows measured by one process share its luck, more so with fewer rounds, so
    identical code is flagged more often than the chance says: the A/A arm's own check, and
    runs with identical code on both arms (make bench-upstream-aa), show how often."""
    def judged(below, n):
        chance = binomial_tail(below, n, 0.5)
        return chance, "CONSISTENT DEFICIT" if chance < DIRECTION_ALPHA else "no consistent deficit"

    out = []
    for (tool, metric), group in direction_groups(rows, max_size).items():
        n = len(group)
        k = sum(1 for r in group if r["ratio_median"] < 1.0)
        chance, verdict = judged(k, n)
        c = {"tool": tool, "metric": metric, "label": direction_label(tool, metric),
             "max_size": max_size, "rows": n, "below": k, "chance": chance, "verdict": verdict,
             "aa_below": None, "aa_chance": None, "aa_verdict": None}
        if all("aa_median" in r for r in group):
            c["aa_below"] = sum(1 for r in group if r["aa_median"] < 1.0)
            c["aa_chance"], c["aa_verdict"] = judged(c["aa_below"], n)
        out.append(c)
    return out


def direction_checks(rows, max_size=None):
    """The direction check over all sizes, then with max_size over the sizes up to it, for the
    groups where that leaves some rows out but not all."""
    checks = direction_check(rows)
    if max_size is not None:
        whole = {(c["tool"], c["metric"]): c["rows"] for c in checks}
        checks += [c for c in direction_check(rows, max_size)
                   if c["rows"] < whole[(c["tool"], c["metric"])]]
    return checks


def direction_line(c):
    """The output line of one direction check."""
    where = f", sizes up to {c['max_size']}" if c["max_size"] is not None else ""
    aa = f" (A/A: {c['aa_below']} of {c['rows']})" if c["aa_below"] is not None else ""
    line = (f"direction: {c['label']}{where}: {c['below']} of {c['rows']} rows below 1.0{aa}; "
            f"chance for identical code {c['chance']:.2g}")
    return line + (": CONSISTENT DEFICIT" if c["verdict"] == "CONSISTENT DEFICIT" else "")


def tally(rows):
    """(rows ahead, rows within A/A, rows below A/A) of rows that have a verdict."""
    v = [verdict(r) for r in rows]
    return v.count("ahead"), v.count("within A/A"), v.count("BELOW A/A")


def arm_settings(arm, arms):
    """What the header says of one arm besides its library: whether it runs on the emulator
    (only where the arms differ in that) and its own environment variables; "" for neither."""
    parts = []
    if len({bool(a.sim) for a in arms}) > 1:
        parts.append("emulator" if arm.sim else "no emulator")
    if arm.env:
        parts.append(" ".join(f"{k}={v}" for k, v in arm.env.items()))
    return "".join(f"; {p}" for p in parts)


def header_tool_lines(tool, quick, arms):
    """The header's line for one tool: its command, one line per arm where the arms' differ."""
    if tool == "ucx":
        lines = [f"  ucx_perftest -l: {', '.join(c[0] for c in UCX_CASES)}; sizes "
                 f"{', '.join(map(str, UCX_QUICK_SIZES if quick else UCX_SIZES))}"]
        extra = {a.name: a.overrides.get("ucx", []) for a in arms[:2]}
        if len({tuple(v) for v in extra.values()}) > 1 or any(extra.values()):
            lines += [f"    {name}: then {' '.join(v) or '(nothing)'}" for name, v in extra.items()]
        return lines
    argv = {a.name: tool_argv(tool, quick, a.overrides) for a in arms[:2]}
    if len({tuple(v) for v in argv.values()}) == 1:
        return [f"  gdrcopy_{tool} {' '.join(next(iter(argv.values())))}"]
    return [f"  gdrcopy_{tool} {' '.join(v)} ({name})" for name, v in argv.items()]


def main():
    args = parse_args()
    tools = [t for t in args.tools.split(",") if t]
    try:
        arms = make_arms(args)
    except ValueError as e:
        sys.exit(f"compare: {e}")
    for t in tools:
        if t not in TOOLS + EXTRA_TOOLS:
            sys.exit(f"compare: unknown tool {t} (known: {', '.join(TOOLS + EXTRA_TOOLS)})")
        if (args.ucx if t == "ucx" else args.tests) is None:
            sys.exit(f"compare: tool {t} needs " + ("--ucx" if t == "ucx" else "--tests"))
        exe = (os.path.join(args.ucx, "bin", "ucx_perftest") if t == "ucx"
               else os.path.join(args.tests, f"gdrcopy_{t}"))
        if not os.access(exe, os.X_OK):
            sys.exit(f"compare: {exe} is missing or not executable")
    for arm in arms:
        if not os.path.exists(os.path.join(arm.libdir, "libgdrapi.so.2")):
            sys.exit(f"compare: {arm.libdir} ({arm.name}) holds no libgdrapi.so.2")
        if arm.sim and not os.path.exists(os.path.join(arm.sim, "libcuda.so.1")):
            sys.exit(f"compare: {arm.sim} ({arm.name}'s emulator) holds no libcuda.so.1")
    first, second = arms[0], arms[1]
    cpu, why = choose_cpu(args.cpu)
    print(f"bench-upstream: {args.rounds} rounds, tools {', '.join(tools)}; {why}")
    for t in tools:
        for line in header_tool_lines(t, args.quick, arms):
            print(line)
    width = max(9, *(len(a.name) + 1 for a in arms[:2]))
    for arm in arms[:2]:
        print(f"  {arm.name + ':':<{width}} "
              f"{os.path.realpath(os.path.join(arm.libdir, 'libgdrapi.so.2'))}{arm_settings(arm, arms)}")
    if args.control and (arm_settings(second, arms) or second.overrides != first.overrides):
        print(f"  {arms[2].name}: the {second.name} arm again, with its settings (A/A control)")
    if any(a.sim for a in arms):
        settings = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("GDRSIM_"))
        print(f"  emulator: {args.sim}/libcuda.so.1 {settings or '(default settings)'}")

    # samples[tool][arm][(metric, size)] -> list of values, one per round
    samples = {t: {a.name: {} for a in arms} for t in tools}
    higher = {}
    for r in range(args.rounds):
        shift = r % len(arms)
        order = arms[shift:] + arms[:shift]
        for tool in tools:
            for arm in order:
                values, higher_better, elapsed = run_tool(tool, args, arm, cpu)
                higher[tool] = higher_better
                for key, v in values.items():
                    samples[tool][arm.name].setdefault(key, []).append(v)
        print(f"  round {r + 1}/{args.rounds} done (order: {', '.join(a.name for a in order)})",
              flush=True)

    summary = []
    for tool in tools:
        print()
        w1, w2 = max(11, len(first.name)), max(11, len(second.name))
        hdr = (f"{'metric':<28} {'size':>9} {first.name:>{w1}} {second.name:>{w2}}  "
               f"{'ratio min/median/max':>22}")
        if args.control:
            hdr += f"  {'A/A min-max':>13}"
        print(f"{tool}: ratio = "
              + (f"{first.name} / {second.name}" if higher[tool] else f"{second.name} / {first.name}")
              + f" per round; above 1: {first.name} faster")
        print(hdr)
        keys = sorted(samples[tool][first.name], key=lambda k: (k[0], k[1]))
        for key in keys:
            ours = samples[tool][first.name].get(key, [])
            up = samples[tool][second.name].get(key, [])
            n = min(len(ours), len(up))
            if n == 0:
                continue
            ratios = [(ours[i] / up[i]) if higher[tool] else (up[i] / ours[i])
                      for i in range(n) if ours[i] > 0 and up[i] > 0]
            if not ratios:
                continue
            row = {"tool": tool, "metric": key[0], "size": key[1],
                   "ours_median": statistics.median(ours), "upstream_median": statistics.median(up),
                   "ratio_min": min(ratios), "ratio_median": statistics.median(ratios),
                   "ratio_max": max(ratios), "ours": ours, "upstream": up}
            line = (f"{key[0]:<28} {key[1]:>9} {row['ours_median']:>{w1}.4g} "
                    f"{row['upstream_median']:>{w2}.4g}  "
                    f"{row['ratio_min']:>6.2f} /{row['ratio_median']:>6.2f} /{row['ratio_max']:>6.2f}")
            if args.control:
                again = samples[tool][arms[2].name].get(key, [])
                aa = [(again[i] / up[i]) if higher[tool] else (up[i] / again[i])
                      for i in range(min(len(again), len(up))) if again[i] > 0 and up[i] > 0]
                if aa:
                    row["aa_min"], row["aa_max"] = min(aa), max(aa)
                    row["aa_median"] = statistics.median(aa)
                    line += f"  {min(aa):>5.2f}-{max(aa):<5.2f}"
                row["verdict"] = verdict(row)
                row["below_every_round"] = below_every_round(row)
                line += f"  {row['verdict'] or ''}"
                if row["below_every_round"]:
                    line += ", every round"
            summary.append(row)
            print(line)
    if args.control:
        ahead, within, below = tally(summary)
        print(f"\nverdict: {len(summary)} rows: {ahead} ahead (ratio at least 1.0), {within} "
              f"below 1.0 within the A/A spread, {below} below it")
        for r in summary:
            if r.get("verdict") == "BELOW A/A":
                print(f"  below A/A: {r['tool']} {r['metric']} {r['size']}: "
                      f"{r['ratio_median']:.3f} against {r['aa_min']:.3f}-{r['aa_max']:.3f}"
                      + (" (every round)" if r["below_every_round"] else ""))
        every = sum(1 for r in summary if r.get("below_every_round"))
        p = chance_every_round(args.rounds)
        print(f"rank test: {every} rows behind in every round; identical code is, by chance, "
              f"in 1 row of {round(1 / p)} ({len(summary) * p:.2f} of {len(summary)} expected)")
    else:
        print()
    directions = direction_checks(summary, args.direction_max_size)
    print("direction check: rows whose median ratio is below 1.0, k of n per tool and direction; "
          "the chance of as many for identical code is P(X >= k), X ~ Binomial(n, 0.5) (a sign "
          f"test); below {DIRECTION_ALPHA}: CONSISTENT DEFICIT")
    if args.rounds < DIRECTION_ROUNDS:
        print(f"  (with {args.rounds} round{'s' if args.rounds > 1 else ''} the rows of a direction "
              "share few processes' luck: identical code is flagged more often than the chance "
              f"says; use at least {DIRECTION_ROUNDS} rounds)")
    for c in directions:
        print(direction_line(c))
    if args.control:
        aa = [c for c in directions if c["aa_verdict"] is not None]
        flagged = [c["label"] + (f" up to {c['max_size']}" if c["max_size"] is not None else "")
                   for c in aa if c["aa_verdict"] == "CONSISTENT DEFICIT"]
        print(f"direction check of the A/A arm (identical code, this run): {len(flagged)} of "
              f"{len(aa)} checks CONSISTENT DEFICIT" + (f" ({', '.join(flagged)})" if flagged else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu, "placement": why, "rounds": args.rounds,
                       "arms": [dataclasses.asdict(a) for a in arms], "rows": summary,
                       "direction_alpha": DIRECTION_ALPHA, "direction": directions}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
