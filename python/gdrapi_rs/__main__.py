"""Command line: where the wheel's library, header and pkg-config file are, and a self-test."""

import argparse
import ctypes
import os
import sys

import gdrapi_rs


def _load_checks(out):
    """The wheel's library under each of its names; from a source tree, the one the API loads.
    Returns the number of failures."""
    failed = 0
    if not os.path.isdir(gdrapi_rs.libdir()):
        from gdrapi_rs import _lib
        try:
            version = gdrapi_rs.runtime_version()
            out.write("note not an installed wheel: the API uses %s, gdr_runtime_get_version() = "
                      "%d.%d\n" % ((_lib.gdr().path,) + version))
            return 0 if version == (2, 6) else 1
        except OSError as e:
            out.write("FAIL load libgdrapi.so.2: %s\n" % e)
            return 1
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
            out.write("FAIL %s: gdr_runtime_get_version() = %d.%d, want 2.6\n"
                      % ((path,) + version))
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
    return failed


def _api_round_trip(out):
    """Host-written memory and a pin of it, through the Python API: written and read back both
    ways. Returns the number of failures."""
    with gdrapi_rs.Allocator(0) as alloc, gdrapi_rs.Session() as session:
        flag = alloc.alloc(8, dtype="int64")
        flag.write_u64(0, 0x5E1F7E57)
        buf = alloc.alloc(1 << 20)
        with session.pin(buf) as p:
            p.write(4096, b"gdrapi_rs self-test")
            p.write_u64(0, flag.read_u64(0))
            ok = buf.read(4096, 19) == b"gdrapi_rs self-test" and buf.read_u64(0) == 0x5E1F7E57
            info = alloc.info()
        if not ok:
            out.write("FAIL the API's round trip: bytes written were not read back\n")
            return 1
        out.write("ok   the API: host-written memory (%s backend, %s) and a pin of it, written "
                  "and read back both ways\n" % (info.backend.name.lower(), info.memory.name))
    return 0


def torch_example(out=None):
    """The README's Python example with PyTorch (the GPU reads what the CPU stored, and the
    reverse; a tensor pinned and written). Raises on a wrong value."""
    import torch

    with gdrapi_rs.Allocator(0) as alloc:
        flag = alloc.alloc(8, dtype="int64")        # 8 bytes of GPU memory the CPU stores to
        f = torch.as_tensor(flag, device="cuda")    # the same bytes as a tensor, no copy
        flag.write_u64(0, 42)                       # a store through the BAR, then a fence
        assert f.add(0).item() == 42                # a CUDA kernel reads what the CPU stored
        f.fill_(7)
        torch.cuda.synchronize()                    # the GPU writes...
        assert flag.read_u64(0) == 7                # ...and the CPU reads it through PCIe
        del f
    t = torch.zeros(1 << 16, dtype=torch.int64, device="cuda")  # a tensor you already have
    with gdrapi_rs.pin(t) as p:                     # pinned and mapped, in one call
        p.write_u64(8, 1234)
        assert t[1].item() == 1234
    if out is not None:
        out.write("ok   PyTorch %s: a kernel read the flag the CPU stored, the CPU read the "
                  "GPU's, a tensor pinned and written\n" % torch.__version__)


def _torch_checks(out):
    try:
        import torch
    except ImportError:
        return 0
    if not torch.cuda.is_available():
        out.write("note PyTorch %s has no CUDA device here\n" % torch.__version__)
        return 0
    with gdrapi_rs.Session() as s:
        vulkan = s.backend == gdrapi_rs.Backend.VULKAN
    if vulkan and "expandable_segments:True" not in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""):
        out.write("note the Vulkan import pins PyTorch tensors only with "
                  "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: PyTorch skipped\n")
        return 0
    try:
        torch_example(out)
    except (AssertionError, gdrapi_rs.GdrError) as e:
        out.write("FAIL the PyTorch example: %r\n" % (e,))
        return 1
    return 0


def self_test(out):
    """Loads the library (by each of its names, from the wheel), checks gdr_runtime_get_version
    and gdrx_runtime_get_version, opens and closes a gdr_t, then uses the Python API: host-written
    memory and a pin of it, and with PyTorch on a GPU the README's example. Without a backend
    (no GPU, no gdrdrv) the API part is reported, not an error. Returns the exit status."""
    failed = _load_checks(out)
    try:
        lib = gdrapi_rs.load() if os.path.isdir(gdrapi_rs.libdir()) else _lib_of_api()
    except OSError as e:
        out.write("FAIL %s\nself-test: %d failed\n" % (e, max(failed, 1)))
        return 1
    lib.gdr_open.restype = ctypes.c_void_p
    lib.gdr_close.argtypes = [ctypes.c_void_p]
    g = lib.gdr_open()
    if g:
        rc = lib.gdr_close(g)
        out.write("ok   gdr_open() gave a handle, gdr_close() = %d\n" % rc)
        failed += rc != 0
        try:
            failed += _api_round_trip(out)
            failed += _torch_checks(out)
        except gdrapi_rs.GdrError as e:
            out.write("FAIL the API: %s\n" % e)
            failed += 1
    else:
        out.write("note gdr_open() = NULL: no gdrdrv and no DMA-BUF capable CUDA driver here "
                  "(`gdrcopy doctor` says why); the API was not tried\n")
    out.write("self-test: %s\n" % ("passed" if failed == 0 else "%d failed" % failed))
    return 1 if failed else 0


def _lib_of_api():
    from gdrapi_rs import _lib
    return ctypes.CDLL(_lib.gdr().path)


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
                   help="load the library by each name, then use the Python API (and PyTorch, "
                   "where it has a GPU)")
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
