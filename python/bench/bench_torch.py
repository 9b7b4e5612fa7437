#!/usr/bin/env python3
"""The Python API against PyTorch's own ways of moving a few bytes to and from a CUDA tensor.

    make bench-python [PREBUILT=1] [BENCH_PYTHON_ARGS='--rounds 31 --json FILE']

Per call, in alternating rounds (each arm once per round, the order rotated; a round times a
batch of calls and divides):

- write 8 B into an int64 tensor: ``Pin.write_u64`` (gdr_copy_to_mapping through the tensor's
  pin) against ``t.copy_(pinned_cpu, non_blocking=True)`` then ``torch.cuda.synchronize()``,
  ``t.copy_(pinned_cpu)`` (blocking) then synchronize, and ``t.fill_(v)`` then synchronize;
  ``HostWritten.write_u64`` beside them;
- write 4 KiB: ``Pin.write`` against the same three;
- read 8 B: ``Pin.read_u64`` against ``t.item()``; ``HostWritten.read_u64`` beside them.

Prints the median per-call time of each arm (us), its spread over rounds, each PyTorch arm's
ratio to the API (the median of the per-round ratios, with their min and max) and the
verdicts of issue #49: an 8-byte write costs at most a fifth of PyTorch's fastest
host-to-device path for it, an 8-byte read at most a third of ``t.item()``.

Without PyTorch (or without a GPU), ``--api-only`` times the API arms alone (the emulator's
smoke run in make test-python); otherwise it says why and exits 0.
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import gdrapi_rs  # noqa: E402


def per_call(fn, n):
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - t0) / n / 1000.0


def arms_api(alloc, pin8, pin4k):
    """The API's arms: (op, name) -> callable."""
    flag = alloc.alloc(8)
    data4k = bytes(range(256)) * 16
    w8 = pin8.mapping.write_u64
    r8 = pin8.mapping.read_u64
    w4k = pin4k.mapping.write
    fw, fr = flag.write_u64, flag.read_u64
    return flag, {
        ("write 8 B", "API Pin.write_u64"): lambda: w8(0, 5),
        ("write 8 B", "API HostWritten.write_u64"): lambda: fw(0, 5),
        ("write 4 KiB", "API Pin.write"): lambda: w4k(0, data4k),
        ("read 8 B", "API Pin.read_u64"): lambda: r8(0),
        ("read 8 B", "API HostWritten.read_u64"): lambda: fr(0),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--calls", type=int, default=300, help="calls per arm and round")
    ap.add_argument("--api-only", action="store_true", help="time the API arms alone")
    ap.add_argument("--json", help="write every sample to this file")
    a = ap.parse_args()

    torch = None
    if not a.api_only:
        try:
            import torch as _torch
            if _torch.cuda.is_available():
                torch = _torch
        except ImportError:
            pass
        if torch is None:
            print("bench-python: skipped: needs PyTorch with a CUDA device (here: %s)"
                  % ("no PyTorch" if "_torch" not in dir() else "no CUDA device"))
            return 0

    arms = {}
    if torch is not None:
        t8 = torch.zeros(1, dtype=torch.int64, device="cuda")
        t4k = torch.zeros(1024, dtype=torch.int32, device="cuda")
        torch.cuda.synchronize()
        pin8, pin4k = gdrapi_rs.pin(t8), gdrapi_rs.pin(t4k)
        cpu8 = torch.full((1,), 5, dtype=torch.int64).pin_memory()
        cpu4k = torch.arange(1024, dtype=torch.int32).pin_memory()
        sync = torch.cuda.synchronize
        arms.update({
            ("write 8 B", "torch copy_ non_blocking+sync"):
                lambda: (t8.copy_(cpu8, non_blocking=True), sync()),
            ("write 8 B", "torch copy_+sync"): lambda: (t8.copy_(cpu8), sync()),
            ("write 8 B", "torch fill_+sync"): lambda: (t8.fill_(5), sync()),
            ("write 4 KiB", "torch copy_ non_blocking+sync"):
                lambda: (t4k.copy_(cpu4k, non_blocking=True), sync()),
            ("write 4 KiB", "torch copy_+sync"): lambda: (t4k.copy_(cpu4k), sync()),
            ("write 4 KiB", "torch fill_+sync"): lambda: (t4k.fill_(5), sync()),
            ("read 8 B", "torch item()"): lambda: t8.item(),
        })
        # Correctness first: what the API writes, PyTorch reads, and the reverse.
        pin8.write_u64(0, 0x1234)
        assert t8.item() == 0x1234, "PyTorch does not see the API's write"
        t8.fill_(77)
        sync()
        assert pin8.read_u64(0) == 77, "the API does not see PyTorch's write"
        device = torch.cuda.get_device_name(0)
        who = "PyTorch %s, %s" % (torch.__version__, device)
    alloc = gdrapi_rs.Allocator(0)
    if torch is None:
        # The API arms alone, on host-written memory standing in for the tensors.
        pin8, pin4k = gdrapi_rs.pin(alloc.alloc(8)), gdrapi_rs.pin(alloc.alloc(4096))
        who = "no PyTorch: the API's arms alone"
    flag, api = arms_api(alloc, pin8, pin4k)
    arms.update(api)

    keys = sorted(arms, key=lambda k: (k[0], not k[1].startswith("API"), k[1]))
    for k in keys:
        per_call(arms[k], max(1, a.calls // 5))  # warm up
    samples = {k: [] for k in keys}
    for r in range(a.rounds):
        order = keys[r % len(keys):] + keys[:r % len(keys)]
        for k in order:
            samples[k].append(per_call(arms[k], a.calls))

    with gdrapi_rs.Session() as s:
        backend = s.backend.name.lower()
    print("bench-python: %s; %s backend, mapping %s; Python %s; %d rounds x %d calls"
          % (who, backend, getattr(pin8.mapping.mapping_type, "name", pin8.mapping.mapping_type),
             sys.version.split()[0], a.rounds,
             a.calls))
    print("%-12s %-32s %10s %21s %22s" % ("op", "arm", "median us", "min-max us",
                                         "x API (min-max)"))
    verdicts = []
    for op in ("write 8 B", "write 4 KiB", "read 8 B"):
        api_key = [k for k in keys if k[0] == op and k[1].startswith("API Pin")][0]
        api_s = samples[api_key]
        fastest = None
        for k in keys:
            if k[0] != op:
                continue
            s = samples[k]
            med = statistics.median(s)
            ratio = ""
            if not k[1].startswith("API"):
                rs = [x / y for x, y in zip(s, api_s)]
                ratio = "%.1f (%.1f-%.1f)" % (statistics.median(rs), min(rs), max(rs))
                if fastest is None or med < fastest[1]:
                    fastest = (k[1], med, statistics.median(rs), min(rs))
            print("%-12s %-32s %10.2f %10.2f-%-10.2f %22s" % (op, k[1], med, min(s), max(s),
                                                              ratio))
        if fastest is not None and op != "write 4 KiB":
            need = 5 if op == "write 8 B" else 3
            verdicts.append("%s: API %.2f us, PyTorch's fastest (%s) %.2f us: %.1fx (worst "
                            "round %.1fx), need >= %dx: %s" % (
                                op, statistics.median(api_s), fastest[0], fastest[1],
                                fastest[2], fastest[3], need,
                                "PASS" if fastest[2] >= need else "FAIL"))
    for v in verdicts:
        print("verdict " + v)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"%s | %s" % k: v for k, v in samples.items()}, f, indent=1)
    pin8.close()
    pin4k.close()
    flag.free()
    alloc.close()  # the stand-ins of --api-only too
    return 1 if any(v.endswith("FAIL") for v in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
