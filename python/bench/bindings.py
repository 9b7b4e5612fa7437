#!/usr/bin/env python3
"""Per-call cost of an 8-byte write and read through each way Python can call libgdrapi.so.2.

    make bench-python-bindings        (on the emulator; on a GPU machine, PREBUILT=1 GPU=1)

Pins and maps device memory (host-written memory from libgdrapi_ext's allocator, so the same
script runs on the emulator and on a GPU with any backend), then times, in alternating rounds
(each arm once per round, the order rotated), batches of calls of:

- ``C loop``: gdr_copy_to_mapping / gdr_copy_from_mapping called from a C loop (the floor: the
  library's own cost, no Python);
- ``ctypes CDLL``: the function through ctypes with argtypes, the GIL released per call;
- ``ctypes PyDLL``: the same, the GIL kept (what the package uses for small copies);
- ``ctypes PyDLL, no argtypes``: the same without argtypes, each argument made a ctypes object
  of its C type by the caller (the straight path of the package's small copies);
- ``cffi ABI``: cffi's ``dlopen`` mode (if cffi is importable), which releases the GIL;
- ``C extension``: a CPython extension module compiled here (METH_FASTCALL, GIL kept), if a
  C compiler and Python.h are present: what a compiled binding would cost;
- ``API``: the package's ``Mapping.write`` / ``write_u64`` / ``read`` / ``read_u64`` (ctypes
  with its checks), and ``HostWritten.write_u64`` / ``read_u64``.

Prints the median per-call time of each arm (ns of the thread's CPU time, so that other
processes on the machine do not count), its spread over rounds (min-max of the batch means)
and its ratio to the C loop. Nothing here is part of the package.
"""

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import gdrapi_rs  # noqa: E402
from gdrapi_rs import _lib  # noqa: E402

LOOP_C = r"""
#include <stddef.h>
#include <stdint.h>
#include <time.h>
typedef int (*copy_fn)(unsigned long, void *, const void *, size_t);
static double now(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
/* ns per call of n calls of fn(h, dst, src, len) */
double loop(void *fn, unsigned long h, void *dst, void *src, size_t len, long n) {
    copy_fn f = (copy_fn)fn;
    double t0 = now();
    for (long i = 0; i < n; i++) if (f(h, dst, src, len)) return -1;
    return (now() - t0) / n;
}
"""

EXT_C = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
typedef int (*copy_fn)(unsigned long, void *, const void *, size_t);
static copy_fn to, from;
/* write(handle, address, bytes) */
static PyObject *w(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    unsigned long h = PyLong_AsUnsignedLong(args[0]);
    void *dst = PyLong_AsVoidPtr(args[1]);
    char *src; Py_ssize_t len;
    if (PyBytes_AsStringAndSize(args[2], &src, &len)) return NULL;
    int rc = to(h, dst, src, (size_t)len);
    if (rc) return PyErr_Format(PyExc_OSError, "gdr_copy_to_mapping: %d", rc);
    Py_RETURN_NONE;
}
/* read_u64(handle, address) */
static PyObject *r(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    unsigned long h = PyLong_AsUnsignedLong(args[0]);
    void *src = PyLong_AsVoidPtr(args[1]);
    unsigned long long v;
    int rc = from(h, &v, src, 8);
    if (rc) return PyErr_Format(PyExc_OSError, "gdr_copy_from_mapping: %d", rc);
    return PyLong_FromUnsignedLongLong(v);
}
static PyMethodDef m[] = {{"write", (PyCFunction)(void (*)(void))w, METH_FASTCALL, ""},
                          {"read_u64", (PyCFunction)(void (*)(void))r, METH_FASTCALL, ""}, {0}};
static struct PyModuleDef d = {PyModuleDef_HEAD_INIT, "gdrbench_ext", 0, -1, m};
PyMODINIT_FUNC PyInit_gdrbench_ext(void) {
    void *lib = dlopen("libgdrapi.so.2", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) { PyErr_SetString(PyExc_ImportError, "libgdrapi.so.2 is not loaded"); return NULL; }
    to = (copy_fn)dlsym(lib, "gdr_copy_to_mapping");
    from = (copy_fn)dlsym(lib, "gdr_copy_from_mapping");
    return PyModule_Create(&d);
}
"""


def build(tmp, name, src, extra):
    c = os.path.join(tmp, name + ".c")
    with open(c, "w") as f:
        f.write(src)
    so = os.path.join(tmp, name + (sysconfig.get_config_var("EXT_SUFFIX") if extra else ".so"))
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-O2", "-shared", "-fPIC", "-o", so, c] + extra + ["-ldl"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "cc failed"
    return so, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--batch", type=int, default=2000)
    a = ap.parse_args()

    alloc = gdrapi_rs.Allocator(0)
    # A 64 KiB allocation: a pin of its own page, mapped by the session below.
    hw = alloc.alloc(65536, 65536)
    pin = gdrapi_rs.pin(hw)
    m = pin.mapping
    lib = _lib.gdr()
    h, dst = m._s.h, m.address
    src8 = b"\x01" * 8
    buf8 = ctypes.create_string_buffer(8)
    info = gdrapi_rs.Session().backend
    arms = {}
    notes = []

    tmp = tempfile.mkdtemp(prefix="gdrbench-")
    so, err = build(tmp, "loop", LOOP_C, [])
    if so:
        loop = ctypes.CDLL(so).loop
        loop.restype = ctypes.c_double
        loop.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_void_p,
                         ctypes.c_size_t, ctypes.c_long]
        to_p = ctypes.cast(lib.lib.gdr_copy_to_mapping, ctypes.c_void_p).value
        from_p = ctypes.cast(lib.lib.gdr_copy_from_mapping, ctypes.c_void_p).value
        arms["write 8 B", "C loop"] = ("ns", lambda n: loop(to_p, h, dst, src8, 8, n))
        arms["read 8 B", "C loop"] = ("ns", lambda n: loop(from_p, h, buf8, dst, 8, n))
    else:
        notes.append("C loop: not built (%s)" % err)

    def timed(fn):
        def run(n):
            t0 = time.thread_time_ns()
            for _ in range(n):
                fn()
            return (time.thread_time_ns() - t0) / n
        return ("py", run)

    cdll_to, cdll_from = lib.copy_to, lib.copy_from
    py_to, py_from = lib.copy_to_held, lib.copy_from_held
    arms["write 8 B", "ctypes CDLL"] = timed(lambda: cdll_to(h, dst, src8, 8))
    arms["write 8 B", "ctypes PyDLL"] = timed(lambda: py_to(h, dst, src8, 8))
    arms["read 8 B", "ctypes CDLL"] = timed(lambda: cdll_from(h, buf8, dst, 8))
    arms["read 8 B", "ctypes PyDLL"] = timed(lambda: py_from(h, buf8, dst, 8))
    # No argtypes: every argument already a ctypes object of its C type (what the package's
    # small copies do; the address varies per call, so it is made per call).
    u_to, u_from = lib.copy_to_fast, lib.copy_from_fast
    hc, n8, vp = ctypes.c_ulong(h), ctypes.c_size_t(8), ctypes.c_void_p
    u64x1 = ctypes.c_uint64 * 1
    arms["write 8 B", "ctypes PyDLL, no argtypes"] = timed(lambda: u_to(hc, vp(dst), src8, n8))
    arms["read 8 B", "ctypes PyDLL, no argtypes"] = timed(
        lambda: u_from(hc, u64x1(), vp(dst), n8))

    try:
        import cffi
        ffi = cffi.FFI()
        ffi.cdef("int gdr_copy_to_mapping(unsigned long h, void *d, const char *s, size_t n);"
                 "int gdr_copy_from_mapping(unsigned long h, void *d, const void *s, size_t n);")
        cl = ffi.dlopen(lib.path)
        cdst = ffi.cast("void *", dst)
        cbuf = ffi.new("unsigned long long *")
        cf_to, cf_from = cl.gdr_copy_to_mapping, cl.gdr_copy_from_mapping
        arms["write 8 B", "cffi ABI"] = timed(lambda: cf_to(h, cdst, src8, 8))
        arms["read 8 B", "cffi ABI"] = timed(lambda: cf_from(h, cbuf, cdst, 8))
        notes.append("cffi %s (ABI mode, dlopen)" % cffi.__version__)
    except ImportError:
        notes.append("cffi ABI: cffi is not installed")

    inc = sysconfig.get_paths().get("include")
    if inc and os.path.exists(os.path.join(inc, "Python.h")):
        so, err = build(tmp, "gdrbench_ext", EXT_C, ["-I" + inc])
        if so:
            sys.path.insert(0, tmp)
            import gdrbench_ext
            ew, er = gdrbench_ext.write, gdrbench_ext.read_u64
            arms["write 8 B", "C extension"] = timed(lambda: ew(h, dst, src8))
            arms["read 8 B", "C extension"] = timed(lambda: er(h, dst))
        else:
            notes.append("C extension: not built (%s)" % err)
    else:
        notes.append("C extension: no Python.h here")

    arms["write 8 B", "API Mapping.write"] = timed(lambda: m.write(0, src8))
    arms["write 8 B", "API Mapping.write_u64"] = timed(lambda: m.write_u64(0, 1))
    arms["write 8 B", "API HostWritten.write_u64"] = timed(lambda: hw.write_u64(0, 1))
    arms["read 8 B", "API Mapping.read"] = timed(lambda: m.read(0, 8))
    arms["read 8 B", "API Mapping.read_u64"] = timed(lambda: m.read_u64(0))
    arms["read 8 B", "API HostWritten.read_u64"] = timed(lambda: hw.read_u64(0))

    keys = list(arms)
    samples = {k: [] for k in keys}
    for k in keys:  # warm up
        arms[k][1](a.batch // 10 or 1)
    for r in range(a.rounds):
        order = keys[r % len(keys):] + keys[:r % len(keys)]
        for k in order:
            samples[k].append(arms[k][1](a.batch))

    print("bench-python-bindings: %s backend, Python %s, %d rounds x %d calls; per call, ns "
          "of CPU time"
          % (getattr(info, "name", info), sys.version.split()[0], a.rounds, a.batch))
    for n in notes:
        print("  note: " + n)
    print("%-10s %-28s %9s %17s %9s" % ("op", "arm", "median", "min-max", "x C loop"))
    for op in ("write 8 B", "read 8 B"):
        floor = statistics.median(samples[op, "C loop"]) if (op, "C loop") in samples else None
        for (o, arm) in keys:
            if o != op:
                continue
            s = samples[o, arm]
            med = statistics.median(s)
            print("%-10s %-28s %9.1f %8.1f-%-8.1f %9s" % (
                op, arm, med, min(s), max(s), "%.1f" % (med / floor) if floor else "-"))
    pin.close()
    hw.free()
    alloc.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
