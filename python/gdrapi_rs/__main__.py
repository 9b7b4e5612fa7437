"""Command line: where the wheel's library, header and pkg-config file are, and a self-test."""

import argparse
import ctypes
import os
import sys

import gdrapi_rs


def self_test(out):
    """Loads the library by each of its names, checks that all resolve to one set of entry points
    and that gdr_runtime_get_version answers 2.6, and opens and closes a gdr_t (which may fail
    without a GPU: that is reported, not an error). Returns the exit status."""
    failed = 0
    for name in gdrapi_rs.LIB_NAMES:
        path = os.path.join(gdrapi_rs.libdir(), name)
        try:
            lib = gdrapi_rs.load(name)
            version = gdrapi_rs.runtime_version(lib)
        except OSError as e:
            out.write("FAIL load %s: %s\n" % (path, e))
            failed += 1
            continue
        if version != (2, 6):
            out.write("FAIL %s: gdr_runtime_get_version() = %d.%d, want 2.6\n" % ((path,) + version))
            failed += 1
        else:
            out.write("ok   %s: gdr_runtime_get_version() = %d.%d\n" % ((path,) + version))
    try:
        ext = gdrapi_rs.load_ext()
        major, minor = ctypes.c_int(-1), ctypes.c_int(-1)
        ext.gdrx_runtime_get_version(ctypes.byref(major), ctypes.byref(minor))
        if (major.value, minor.value) == (0, 1):
            out.write("ok   %s: gdrx_runtime_get_version() = 0.1\n"
                      % os.path.join(gdrapi_rs.libdir(), gdrapi_rs.EXT_SONAME))
        else:
            out.write("FAIL %s: gdrx_runtime_get_version() = %d.%d, want 0.1\n"
                      % (gdrapi_rs.EXT_SONAME, major.value, minor.value))
            failed += 1
    except OSError as e:
        out.write("FAIL load %s: %s\n" % (gdrapi_rs.EXT_SONAME, e))
        failed += 1
    lib = gdrapi_rs.load()
    lib.gdr_open.restype = ctypes.c_void_p
    lib.gdr_close.argtypes = [ctypes.c_void_p]
    g = lib.gdr_open()
    if g:
        rc = lib.gdr_close(g)
        out.write("ok   gdr_open() gave a handle, gdr_close() = %d\n" % rc)
        failed += rc != 0
    else:
        out.write("note gdr_open() = NULL: no gdrdrv and no DMA-BUF capable CUDA driver here "
                  "(`gdrcopy doctor` says why)\n")
    out.write("self-test: %s\n" % ("passed" if failed == 0 else "%d failed" % failed))
    return 1 if failed else 0


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m gdrapi_rs",
        description="Where the wheel's libgdrapi.so.2 (gdrapi-rs) lies, and a self-test. "
        "Flags print one answer each, in the order given, on one line.",
    )
    p.add_argument("--libdir", action="append_const", const="libdir", dest="ask",
                   help="directory of libgdrapi.so.2.6, libgdrapi.so.2 and libgdrapi.so")
    p.add_argument("--includedir", action="append_const", const="includedir", dest="ask",
                   help="directory of gdrapi.h and gdrconfig.h")
    p.add_argument("--pkgconfigdir", action="append_const", const="pkgconfigdir", dest="ask",
                   help="directory of gdrapi.pc (for PKG_CONFIG_PATH)")
    p.add_argument("--bindir", action="append_const", const="bindir", dest="ask",
                   help="directory of the gdrcopy programs")
    p.add_argument("--cflags", action="append_const", const="cflags", dest="ask",
                   help="compiler flags for gdrapi.h")
    p.add_argument("--libs", action="append_const", const="libs", dest="ask",
                   help="linker flags for libgdrapi (with a run path to the wheel)")
    p.add_argument("--ext-libs", action="append_const", const="ext_libs", dest="ask",
                   help="linker flags for libgdrapi_ext (gdrapi_ext.h: host-written GPU memory)")
    p.add_argument("--version", action="append_const", const="version", dest="ask",
                   help="the library's version, from gdr_runtime_get_version()")
    p.add_argument("--self-test", action="store_true",
                   help="load the library by each name with ctypes and call it")
    args = p.parse_args(argv)
    if args.self_test:
        return self_test(sys.stdout)
    if not args.ask:
        p.print_help()
        return 2
    answers = []
    for what in args.ask:
        if what == "version":
            answers.append("%d.%d" % gdrapi_rs.runtime_version())
        else:
            answers.append(getattr(gdrapi_rs, what)())
    print(" ".join(answers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
