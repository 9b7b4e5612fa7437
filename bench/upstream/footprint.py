#!/usr/bin/env python3
"""The memory each API call touches, for one or more libgdrapi.so.2 builds, side by side.

Runs footprint (footprint.c) under valgrind's lackey with each library in turn, on the
emulator, cuts the trace into calls at the marker stores, and prints per call:

  fn     functions of libgdrapi.so.2 that ran (by its symbol table)
  lib    4 KiB pages / 64-byte lines of libgdrapi.so.2's code that ran
  code   pages / lines of code that ran outside the emulator (the library, libc, the program)
  data   pages / lines of data read or written (everything: the emulator's accesses are the
         same for every library)
  instr  instructions executed outside the emulator

Each figure is the median over the iterations after the first two (lazy binding), which
follow --cycles unmeasured pin/unpin pairs (the steady state of a library that cycles
through its records). With --check FILE, fails when this library's fn or lib pages exceed FILE's ceilings.
"""

import argparse
import bisect
import os
import re
import statistics
import subprocess
import sys
import tempfile

CALLS = ["pin", "map", "get_info", "unmap", "unpin"]
EMULATOR = "libcuda.so.1"
LIB = "libgdrapi.so.2"
ACCESS = re.compile(rb"^\s*([ILSM])\s+([0-9a-f]+),")


def run(exe, lib_dir, sim, iters, cycles, scratch):
    env = dict(os.environ)
    env["LD_PRELOAD"] = os.path.join(sim, "libcuda.so.1")
    env["LD_LIBRARY_PATH"] = f"{sim}:{lib_dir}"
    trace = os.path.join(scratch, "trace")
    p = subprocess.run(
        ["valgrind", "--tool=lackey", "--trace-mem=yes", f"--log-file={trace}", exe, str(iters),
         str(cycles)],
        env=env, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        sys.exit(f"footprint with {lib_dir}: exit {p.returncode}\n{p.stdout}{p.stderr}")
    segments, marks = [], None
    for line in p.stderr.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            segments.append((os.path.basename(f[1]), f[1], int(f[2], 16), int(f[3], 16),
                             int(f[4], 16), f[5] == "x"))
        elif f and f[0] == "MARK":
            marks = (int(f[1], 16), int(f[2], 16))
    if marks is None:
        sys.exit(f"footprint with {lib_dir}: no MARK line\n{p.stderr}")
    return trace, segments, marks


def symbols(path, bias):
    """Sorted (address, name) of the functions in the ELF file at `path`, relocated."""
    out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    syms = sorted((int(f[0], 16) + bias, f[2]) for f in (l.split() for l in out.splitlines())
                  if len(f) == 3 and f[1] in "tTwW")
    return [a for a, _ in syms], [n for _, n in syms]


def spans(trace, marks):
    """Each call's accesses, as (kind, address) lists, in program order."""
    begin, end = marks
    cur, out = None, []
    with open(trace, "rb") as f:
        for line in f:
            m = ACCESS.match(line)
            if not m:
                continue
            kind, addr = m.group(1), int(m.group(2), 16)
            if kind in b"SM" and addr == begin:
                cur = []
            elif kind in b"SM" and addr == end:
                if cur is not None:
                    out.append(cur)
                cur = None
            elif cur is not None:
                cur.append((kind, addr))
    return out


def measure(exe, lib_dir, sim, iters, cycles):
    with tempfile.TemporaryDirectory() as scratch:
        trace, segments, marks = run(exe, lib_dir, sim, iters, cycles, scratch)
        calls = spans(trace, marks)
    ranges = [(s, e, name) for name, _, s, e, _, _ in segments]

    def owner(a):
        for s, e, name in ranges:
            if s <= a < e:
                return name
        return None

    lib = [s for s in segments if s[0] == LIB]
    if not lib:
        sys.exit(f"footprint with {lib_dir}: {LIB} is not loaded")
    addrs, names = symbols(lib[0][1], lib[0][4])
    lib_lo = min(s[2] for s in lib)
    lib_hi = max(s[3] for s in lib)
    per_call = {c: [] for c in CALLS}
    for i, accesses in enumerate(calls):
        if i // len(CALLS) < 2:
            continue
        fns, lib_code, code, data, instr = set(), set(), set(), set(), 0
        for kind, a in accesses:
            if kind == b"I":
                if owner(a) == EMULATOR:
                    continue
                instr += 1
                code.add(a >> 6)
                if lib_lo <= a < lib_hi:
                    lib_code.add(a >> 6)
                    j = bisect.bisect_right(addrs, a) - 1
                    if j >= 0:
                        fns.add(names[j])
            else:
                data.add(a >> 6)
        per_call[CALLS[i % len(CALLS)]].append({
            "fn": len(fns),
            "lib_pages": len({l >> 6 for l in lib_code}),
            "lib_lines": len(lib_code),
            "code_pages": len({l >> 6 for l in code}),
            "code_lines": len(code),
            "data_pages": len({l >> 6 for l in data}),
            "data_lines": len(data),
            "instr": instr,
        })
    result = {}
    for c, rows in per_call.items():
        if not rows:
            sys.exit(f"footprint with {lib_dir}: no complete {c} call in the trace")
        result[c] = {k: int(statistics.median(r[k] for r in rows)) for k in rows[0]}
    return result


def read_ceilings(path):
    ceilings = {}
    for line in open(path):
        f = line.split()
        if not f or f[0].startswith("#") or f[0] == "call":
            continue
        ceilings[f[0]] = {"fn": int(f[1]), "lib_pages": int(f[2])}
    return ceilings


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exe", required=True, help="the footprint program")
    ap.add_argument("--sim", required=True, help="the emulator's folder (libcuda.so.1)")
    ap.add_argument("--iters", type=int, default=6)
    ap.add_argument("--cycles", type=int, default=1100,
                    help="unmeasured pin/unpin pairs first (steady state)")
    ap.add_argument("--check", help="ceilings for the first library (footprint.expected)")
    ap.add_argument("lib_dirs", nargs="+", help="folders holding libgdrapi.so.2")
    a = ap.parse_args()
    results = [measure(a.exe, d, a.sim, a.iters, a.cycles) for d in a.lib_dirs]
    cols = ["fn", "lib", "code", "data", "instr"]
    head = "".join(f"{c:>8}" for c in cols)
    labels = [os.path.join(*os.path.normpath(d).split(os.sep)[-2:]) for d in a.lib_dirs]
    print(f"{'':10}" + "  |".join(f" {l[-40:]:<40}" for l in labels))
    print(f"{'call':10}" + "  |".join(f" {head}" for _ in a.lib_dirs))
    for c in CALLS:
        cells = []
        for r in results:
            m = r[c]
            cells.append(f" {m['fn']:>8}{m['lib_pages']:>4}/{m['lib_lines']:<3}"
                         f"{m['code_pages']:>4}/{m['code_lines']:<3}"
                         f"{m['data_pages']:>4}/{m['data_lines']:<3}{m['instr']:>8}")
        print(f"{c:10}" + "  |".join(cells))
    print("(fn: functions of libgdrapi.so.2 that ran; lib, code, data: 4 KiB pages/64 B lines;"
          " medians over iterations 3 onwards)")
    if a.check:
        bad = []
        for c, ceil in read_ceilings(a.check).items():
            m = results[0][c]
            for k in ("fn", "lib_pages"):
                if m[k] > ceil[k]:
                    bad.append(f"{c}: {k} {m[k]} > {ceil[k]}")
        if bad:
            print(f"footprint: above the ceilings in {a.check}: " + "; ".join(bad))
            return 1
        print(f"footprint: every call within the ceilings of {a.check}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
