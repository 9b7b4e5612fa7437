"""Console scripts: each starts the gdrcopy program of the same name from the wheel, with the
wheel's library first on LD_LIBRARY_PATH (the programs dlopen libgdrapi.so.2 by name)."""

import os
import sys

import gdrapi_rs


def _exec(name):
    exe = os.path.join(gdrapi_rs.bindir(), name)
    env = dict(os.environ)
    path = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = gdrapi_rs.libdir() + (":" + path if path else "")
    try:
        os.execve(exe, [name] + sys.argv[1:], env)
    except OSError as e:
        sys.stderr.write("%s: cannot run %s: %s\n" % (name, exe, e))
        return 127


def gdrcopy():
    return _exec("gdrcopy")


def gdrcopy_copybw():
    return _exec("gdrcopy_copybw")


def gdrcopy_copylat():
    return _exec("gdrcopy_copylat")


def gdrcopy_apiperf():
    return _exec("gdrcopy_apiperf")
