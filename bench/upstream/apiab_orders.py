"""Run apiab several times, the two libraries' load order alternating, and summarise.

apiab (apiab.c) times apiperf's cycle for several libgdrapi.so.2 builds in one process. Where a
library is loaded moves its calls by a few per cent, so one order is not enough: run 1 loads
this library first (this library, the other, the other's copy, this library's copy), run 2 the
other first, and so on. Each run gives, per call, the median of the per-cycle ratio of the
first two libraries' times (apiab's `B/A`), which this script turns into the other library's
time / ours (above 1: this library faster), and the A/A ratio of the run (`B/B'`: two copies of
the same library). It prints every run's output, then one line per call: the median and the
range over runs, the A/A range, how many runs had this library faster, and an interval that
holds the median of the ratio with 95 % confidence whatever its distribution (two order
statistics of the runs, from the binomial law of a run's ratio falling above the median; six
runs at least), with its verdict: ahead (the interval lies above 1.0), behind (below it) or
level (it holds 1.0). A difference inside the run-to-run spread is level, however the median
falls.

Usage: apiab_orders.py RUNS ITERS OURS OURS_COPY OTHER OTHER_COPY -- APIAB [PREFIX...]
  (the command after `--` is apiab, with any prefix such as `taskset -c 1`, as its argv; the
  environment, LD_PRELOAD included, passes through).
"""

import statistics
import subprocess
import sys
from typing import NamedTuple, Optional, Tuple

from compare import binomial_tail

CALLS = ("pin", "map", "get_info", "unmap", "unpin")


def parse(text):
    """apiab's ratio rows: {call: (B/A, B/B')}, for the calls it printed with both ratios."""
    rows = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 7 and f[0] in CALLS:
            try:
                rows[f[0]] = (float(f[5]), float(f[6]))
            except ValueError:
                continue
    return rows


def ratio(ba, ours_first):
    """The other library's time / ours from a run's B/A: A is ours when ours came first."""
    return ba if ours_first else 1.0 / ba


def median_interval(values, confidence=0.95):
    """(low, high): order statistics of `values` that hold their distribution's median with at
    least `confidence`, the narrowest such pair; None when there are too few values for it."""
    n = len(values)
    tail = (1.0 - confidence) / 2
    # The k-th smallest value lies above the median when n - k + 1 or more of the n fall above
    # it, each with chance 1/2; the k-th largest below it likewise. Take the largest k for
    # which that chance is within the tail.
    k = 0
    while binomial_tail(n - k, n, 0.5) <= tail:
        k += 1
    if k == 0:
        return None
    ordered = sorted(values)
    return ordered[k - 1], ordered[n - k]


def verdict(interval):
    """ahead, behind or level for a median interval of ratios (above 1: this library faster)."""
    if interval is None:
        return "too few runs"
    low, high = interval
    if low > 1.0:
        return "ahead"
    if high < 1.0:
        return "behind"
    return "level"


class Summary(NamedTuple):
    """One call over the runs, as the other library's time / ours."""

    median: float
    low: float
    high: float
    aa_low: float
    aa_high: float
    # Runs in which this library was faster, and runs in all.
    faster: int
    runs: int
    # Holds the median with 95 % confidence (`median_interval`); None below six runs.
    interval: Optional[Tuple[float, float]]


def summarise(runs):
    """runs: [(ours_first, {call: (B/A, B/B')})]; a `Summary` per call that the runs timed."""
    out = {}
    for call in CALLS:
        got = [(ratio(r[call][0], first), r[call][1]) for first, r in runs if call in r]
        if not got:
            continue
        ratios = [g[0] for g in got]
        aa = [g[1] for g in got]
        out[call] = Summary(
            statistics.median(ratios),
            min(ratios),
            max(ratios),
            min(aa),
            max(aa),
            sum(r > 1.0 for r in ratios),
            len(ratios),
            median_interval(ratios),
        )
    return out


def main(argv):
    if "--" not in argv or argv.index("--") != 7 or len(argv) < 9:
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 2
    runs, iters = int(argv[1]), argv[2]
    ours, ours_copy, other, other_copy = argv[3:7]
    command = argv[8:]
    results = []
    for i in range(runs):
        ours_first = i % 2 == 0
        libs = [ours, other, other_copy, ours_copy] if ours_first else [other, ours, ours_copy, other_copy]
        p = subprocess.run(command + [iters] + libs, capture_output=True, text=True)
        print(f"== run {i + 1} of {runs}: {'this library' if ours_first else 'the other library'} first")
        print(p.stdout, end="")
        if p.returncode != 0:
            print(p.stderr, end="", file=sys.stderr)
            print(f"apiab_orders: apiab exited with {p.returncode}", file=sys.stderr)
            return 1
        results.append((ours_first, parse(p.stdout)))
    print(f"apiab over {runs} runs, the load order alternating: the other library's time / ours "
          "(above 1: this library faster), from each run's B/A; A/A: each run's B/B'")
    print(f"{'call':<9} {'median':>8} {'min-max':>13} {'A/A min-max':>13} {'faster':>8} "
          f"{'median, 95 %':>13}  verdict")
    for call, c in summarise(results).items():
        within = "-" if c.interval is None else f"{c.interval[0]:.3f}-{c.interval[1]:.3f}"
        print(f"{call:<9} {c.median:8.3f} {c.low:6.3f}-{c.high:.3f} {c.aa_low:6.3f}-{c.aa_high:.3f} "
              f"{c.faster:>3} of {c.runs:<2} {within:>13}  {verdict(c.interval)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
