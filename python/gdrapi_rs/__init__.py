"""libgdrapi.so.2 (gdrapi-rs, a drop-in replacement for the library of NVIDIA gdrcopy 2.6) in a wheel.

The wheel holds the library, its C header and pkg-config file, the gdrcopy tools, and
libgdrapi_ext.so.0 (host-written GPU memory, gdrapi_ext.h, gdrapi_ext.pc). This module
says where they are, so that programs that link ``-lgdrapi`` or ``dlopen("libgdrapi.so")`` can be
pointed at them, and loads the library with ctypes::

    python -m gdrapi_rs --libdir      # e.g. LD_LIBRARY_PATH=$(python -m gdrapi_rs --libdir)
    python -m gdrapi_rs --cflags --libs
    python -m gdrapi_rs --self-test
"""

import ctypes
import os

__all__ = [
    "LIB_NAMES",
    "SONAME",
    "EXT_NAMES",
    "EXT_SONAME",
    "libdir",
    "includedir",
    "pkgconfigdir",
    "bindir",
    "cflags",
    "libs",
    "ext_libs",
    "load",
    "load_ext",
    "runtime_version",
]

#: The name the dynamic loader resolves (DT_NEEDED of programs linked with -lgdrapi).
SONAME = "libgdrapi.so.2"
#: The three names the library answers to in :func:`libdir`, as in a system install.
LIB_NAMES = ("libgdrapi.so.2.6", SONAME, "libgdrapi.so")
#: The soname of libgdrapi_ext (host-written GPU memory), which needs libgdrapi.so.2 beside it.
EXT_SONAME = "libgdrapi_ext.so.0"
#: Its three names in :func:`libdir`.
EXT_NAMES = ("libgdrapi_ext.so.0.1", EXT_SONAME, "libgdrapi_ext.so")

_HERE = os.path.dirname(os.path.abspath(__file__))


def libdir():
    """The directory holding libgdrapi.so.2.6, libgdrapi.so.2 and libgdrapi.so."""
    return os.path.join(_HERE, "lib")


def includedir():
    """The directory holding gdrapi.h and gdrconfig.h."""
    return os.path.join(_HERE, "include")


def pkgconfigdir():
    """The directory holding gdrapi.pc (for PKG_CONFIG_PATH)."""
    return os.path.join(libdir(), "pkgconfig")


def bindir():
    """The directory holding the gdrcopy programs the console scripts start."""
    return os.path.join(_HERE, "bin")


def cflags():
    """Compiler flags for a program that includes gdrapi.h."""
    return "-I" + includedir()


def libs():
    """Linker flags for a program that links libgdrapi; the run path lets it load without
    LD_LIBRARY_PATH."""
    return "-L{0} -Wl,-rpath,{0} -lgdrapi".format(libdir())


def ext_libs():
    """Linker flags for a program that links libgdrapi_ext (gdrapi_ext.h)."""
    return "-L{0} -Wl,-rpath,{0} -lgdrapi_ext".format(libdir())


def load_ext(name=EXT_SONAME):
    """Loads the wheel's libgdrapi_ext under ``name`` (one of :data:`EXT_NAMES`); it brings the
    wheel's libgdrapi.so.2 with it. Raises OSError if it cannot be loaded."""
    if name not in EXT_NAMES:
        raise ValueError("not one of libgdrapi_ext's names: %r" % (name,))
    return ctypes.CDLL(os.path.join(libdir(), name))


def load(name=SONAME):
    """Loads the wheel's library under ``name`` (one of :data:`LIB_NAMES`) and returns the
    ``ctypes.CDLL``. Raises OSError if it cannot be loaded."""
    if name not in LIB_NAMES:
        raise ValueError("not one of the library's names: %r" % (name,))
    return ctypes.CDLL(os.path.join(libdir(), name))


def runtime_version(lib=None):
    """``gdr_runtime_get_version()`` of the library, as (major, minor)."""
    lib = lib if lib is not None else load()
    major, minor = ctypes.c_int(-1), ctypes.c_int(-1)
    fn = lib.gdr_runtime_get_version
    fn.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
    fn.restype = ctypes.c_int
    rc = fn(ctypes.byref(major), ctypes.byref(minor))
    if rc != 0:
        raise OSError(rc, "gdr_runtime_get_version failed")
    return major.value, minor.value
