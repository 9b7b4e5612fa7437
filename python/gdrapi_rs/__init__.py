"""gdrapi-rs (a drop-in replacement for the library of NVIDIA gdrcopy 2.6) for Python: GPUDirect
copies between the CPU and GPU memory, and host-written GPU memory.

Pin what you already have, in one line, and copy through its CPU mapping::

    import torch, gdrapi_rs
    t = torch.zeros(1024, dtype=torch.int64, device="cuda")
    with gdrapi_rs.pin(t) as p:        # a tensor, a CuPy array, anything with
        p.write_u64(0, 42)             # __cuda_array_interface__ or __dlpack__
        assert p.read_u64(0) == 42     # (fenced 8-byte store and load through the BAR)

Allocate memory the CPU writes and CUDA kernels read (and the reverse)::

    with gdrapi_rs.Allocator(0) as alloc:
        flag = alloc.alloc(8, dtype="int64")
        f = torch.as_tensor(flag, device="cuda")   # the same 8 bytes, no copy
        flag.write_u64(0, 1)                       # a kernel reading f sees 1

:func:`pin`, :class:`Session`, :class:`Pin`, :class:`Mapping` wrap ``libgdrapi.so.2``
(gdrcopy's API, NVIDIA's library too); :class:`Allocator`, :class:`HostWritten` wrap
``libgdrapi_ext.so.0``. Failures raise :class:`GdrError`, an ``OSError`` with the errno the
library returned. Without the gdrdrv kernel module (cloud GPUs, containers) set
``GDRAPI_USE_VULKAN=1`` before the process starts; PyTorch tensors then need
``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` (python/README.md).

The wheel also holds the library, its C header and pkg-config file, the gdrcopy tools, and
libgdrapi_ext.so.0 (gdrapi_ext.h, gdrapi_ext.pc); the functions below say where they are, so
that programs that link ``-lgdrapi`` or ``dlopen("libgdrapi.so")`` can be pointed at them::

    python -m gdrapi_rs --libdir      # e.g. LD_LIBRARY_PATH=$(python -m gdrapi_rs --libdir)
    python -m gdrapi_rs --cflags --libs
    python -m gdrapi_rs --self-test
"""

import ctypes
import os

from ._alloc import Allocator, AllocatorInfo, HostWritten, Memory
from ._errors import GdrError
from ._session import Backend, Mapping, MappingType, Pin, PinInfo, Session, default_session, pin

__all__ = [
    "pin",
    "Session",
    "Pin",
    "Mapping",
    "PinInfo",
    "MappingType",
    "Backend",
    "default_session",
    "Allocator",
    "HostWritten",
    "AllocatorInfo",
    "Memory",
    "GdrError",
    "library_is_thread_safe",
    "ext_runtime_version",
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
    """``gdr_runtime_get_version()`` of the library, as (major, minor): of ``lib`` (a
    ``ctypes.CDLL``), else of the library the API uses."""
    if lib is None:
        from . import _lib
        lib = _lib.gdr().lib
    major, minor = ctypes.c_int(-1), ctypes.c_int(-1)
    fn = lib.gdr_runtime_get_version
    fn.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
    fn.restype = ctypes.c_int
    rc = fn(ctypes.byref(major), ctypes.byref(minor))
    if rc != 0:
        raise OSError(rc, "gdr_runtime_get_version failed")
    return major.value, minor.value


def ext_runtime_version():
    """``gdrx_runtime_get_version()`` of the libgdrapi_ext.so.0 the API uses, as (major,
    minor)."""
    from . import _lib
    major, minor = ctypes.c_int(-1), ctypes.c_int(-1)
    _lib.gdrx().runtime_get_version(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def library_is_thread_safe():
    """Whether the libgdrapi.so.2 the API uses is gdrapi-rs's, whose every function may be
    called concurrently. With NVIDIA's (not thread-safe; ``GDRAPI_RS_LIBGDRAPI`` selects it),
    the API serializes every call on it and counts copies against unmaps under a lock."""
    from . import _lib
    return _lib.gdr().thread_safe
