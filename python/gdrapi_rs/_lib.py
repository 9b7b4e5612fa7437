"""The two C libraries through ctypes, each loaded once per process at its first use.

``libgdrapi.so.2`` (gdrcopy's API, ``gdrapi.h``) and ``libgdrapi_ext.so.0`` (host-written
memory, ``gdrapi_ext.h``). Which file: the environment variable ``GDRAPI_RS_LIBGDRAPI`` (a path
or a name, e.g. NVIDIA's library) if set, else the wheel's copy beside this package, else the
soname through the dynamic loader's search (``LD_LIBRARY_PATH``, a system install).
``libgdrapi_ext.so.0`` likewise (``GDRAPI_RS_LIBGDRAPI_EXT``); it is loaded after
``libgdrapi.so.2``, whose soname it needs, so both use the same instance.

Each function is bound twice where it matters (python/README.md, "Why ctypes"): through
``ctypes.CDLL``, which releases the GIL for the call, for everything that may wait on a
driver (open, pin, map, close, large copies); and through ``ctypes.PyDLL``, which keeps it,
for the small copies, where giving the GIL back and taking it again costs more than the copy,
and for the calls that tear a CPU mapping down (unmap, unpin, free, close): while such a call
runs, no other Python thread can be in the middle of a copy through that mapping (see
``_session.py``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
import threading
from ctypes import (POINTER, Structure, c_int, c_uint, c_ulong, c_ulonglong,
                    c_uint64, c_size_t, c_void_p)

SONAME = "libgdrapi.so.2"
EXT_SONAME = "libgdrapi_ext.so.0"
_HERE = os.path.dirname(os.path.abspath(__file__))

# gdrapi.h's gdr_mh_t is a struct of one unsigned long, passed by value. On x86-64 (SysV) and
# aarch64 (AAPCS64), the two architectures the wheel is built for, such a struct is passed in
# one general-purpose register exactly as an unsigned long is, so the handle is declared as
# c_ulong: ctypes converts a Python int to it several times faster than to a Structure.
HANDLE = c_ulong


class gdr_info_v2_t(Structure):
    """gdrapi.h's gdr_info_v2_t (48 bytes on LP64)."""

    _fields_ = [
        ("va", c_uint64),
        ("mapped_size", c_uint64),
        ("page_size", ctypes.c_uint32),
        ("tm_cycles", c_uint64),
        ("cycles_per_ms", ctypes.c_uint32),
        ("mapped", c_uint, 1),
        ("wc_mapping", c_uint, 1),
        ("mapping_type", c_int),
    ]


class gdrx_mem_t(Structure):
    """gdrapi_ext.h's gdrx_mem_t."""

    _fields_ = [
        ("dev_ptr", c_ulonglong),
        ("cpu_ptr", c_void_p),
        ("size", c_size_t),
        ("handle", c_uint64),
    ]


class gdrx_info_t(Structure):
    """gdrapi_ext.h's gdrx_info_t."""

    _fields_ = [
        ("device", c_int),
        ("backend", c_int),
        ("memory", c_int),
        ("mapping_type", c_int),
        ("chunk_size", c_size_t),
        ("small_max", c_size_t),
        ("allocations", c_size_t),
        ("pins", c_size_t),
        ("bytes_pinned", c_size_t),
        ("bytes_in_use", c_size_t),
        ("reserved", c_uint64 * 4),
    ]


def _path(soname: str, variable: str) -> str:
    explicit = os.environ.get(variable)
    if explicit:
        return explicit
    wheel = os.path.join(_HERE, "lib", soname)
    return wheel if os.path.exists(wheel) else soname


def _load(path: str, variable: str, dll=ctypes.CDLL):
    try:
        return dll(path)
    except OSError as e:
        from ._errors import GdrError
        raise GdrError(errno.ENOENT, "cannot load %s (%s): install gdrapi-rs (its wheel or "
                       "packages) or put its lib directory on LD_LIBRARY_PATH; %s names another "
                       "file" % (path, e, variable)) from None


def _bind(lib, name, restype, argtypes):
    fn = lib[name]  # a function object of its own (getattr would share one per name)
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


def _unchecked(lib, name):
    """``name`` without argtypes: ctypes then converts nothing, which halves the cost of a
    call (python/README.md, "Why ctypes"); the caller passes ctypes objects of exactly the
    C parameter types (c_ulong, c_void_p, c_size_t; a ctypes array or bytes for a pointer)."""
    fn = lib[name]
    fn.restype = c_int
    return fn


class Gdr:
    """The functions of libgdrapi.so.2 the package calls, bound once."""

    def __init__(self) -> None:
        self.path = _path(SONAME, "GDRAPI_RS_LIBGDRAPI")
        # libgdrapi_ext.so.0, loaded later, needs libgdrapi.so.2: the dynamic loader finds this
        # instance by its soname, whatever path it was loaded from.
        lib = _load(self.path, "GDRAPI_RS_LIBGDRAPI")
        held = ctypes.PyDLL(self.path)  # the same library (one dlopen handle), GIL kept
        self.lib = lib
        P = POINTER
        self.open = _bind(lib, "gdr_open", c_void_p, [])
        self.close = _bind(lib, "gdr_close", c_int, [c_void_p])
        self.pin_buffer = _bind(lib, "gdr_pin_buffer", c_int,
                                [c_void_p, c_ulong, c_size_t, c_uint64, ctypes.c_uint32, P(HANDLE)])
        self.unpin_buffer = _bind(held, "gdr_unpin_buffer", c_int, [c_void_p, HANDLE])
        self.get_callback_flag = _bind(lib, "gdr_get_callback_flag", c_int,
                                       [c_void_p, HANDLE, P(c_int)])
        self.get_info_v2 = _bind(lib, "gdr_get_info_v2", c_int,
                                 [c_void_p, HANDLE, P(gdr_info_v2_t)])
        self.map = _bind(lib, "gdr_map", c_int, [c_void_p, HANDLE, P(c_void_p), c_size_t])
        self.unmap = _bind(held, "gdr_unmap", c_int, [c_void_p, HANDLE, c_void_p, c_size_t])
        copy = [HANDLE, c_void_p, c_void_p, c_size_t]
        self.copy_to = _bind(lib, "gdr_copy_to_mapping", c_int, copy)
        self.copy_from = _bind(lib, "gdr_copy_from_mapping", c_int, copy)
        self.copy_to_held = _bind(held, "gdr_copy_to_mapping", c_int, copy)
        self.copy_from_held = _bind(held, "gdr_copy_from_mapping", c_int, copy)
        # The straight paths of small copies: no argtypes, every argument a ctypes object of
        # the parameter's exact C type (see _unchecked), GIL kept.
        self.copy_to_fast = _unchecked(held, "gdr_copy_to_mapping")
        self.copy_from_fast = _unchecked(held, "gdr_copy_from_mapping")
        self.runtime_get_version = _bind(lib, "gdr_runtime_get_version", None, [P(c_int), P(c_int)])
        self.driver_get_version = _bind(lib, "gdr_driver_get_version", c_int,
                                        [c_void_p, P(c_int), P(c_int)])
        self.get_attribute = _bind(lib, "gdr_get_attribute", c_int, [c_void_p, c_int, P(c_int)])
        # gdrapi-rs's library exports the gdr_copy_to_mapped alias and is thread-safe; NVIDIA's
        # does not and is not ("GDRCopy is not thread-safe"): with it, every call but the
        # copies is serialized, and copies are checked under the same lock as an unmap.
        self.thread_safe = hasattr(lib, "gdr_copy_to_mapped")
        self.serial = threading.RLock()


class Gdrx:
    """The functions of libgdrapi_ext.so.0."""

    def __init__(self) -> None:
        gdr()  # libgdrapi.so.2 first, so that this library uses the instance chosen above
        self.path = _path(EXT_SONAME, "GDRAPI_RS_LIBGDRAPI_EXT")
        lib = _load(self.path, "GDRAPI_RS_LIBGDRAPI_EXT")
        held = ctypes.PyDLL(self.path)
        self.lib = lib
        P = POINTER
        self.runtime_get_version = _bind(lib, "gdrx_runtime_get_version", None,
                                         [P(c_int), P(c_int)])
        self.open = _bind(lib, "gdrx_open", c_int, [P(c_void_p), c_int, c_uint])
        self.close = _bind(held, "gdrx_close", c_int, [c_void_p])
        self.alloc = _bind(lib, "gdrx_alloc", c_int, [c_void_p, c_size_t, c_size_t, P(gdrx_mem_t)])
        self.free = _bind(held, "gdrx_free", c_int, [c_void_p, c_void_p])
        copy = [c_void_p, c_size_t, c_void_p, c_size_t]
        self.copy_to = _bind(lib, "gdrx_copy_to", c_int, copy)
        self.copy_from = _bind(lib, "gdrx_copy_from", c_int, copy)
        self.copy_to_held = _bind(held, "gdrx_copy_to", c_int, copy)
        self.copy_from_held = _bind(held, "gdrx_copy_from", c_int, copy)
        self.copy_to_fast = _unchecked(held, "gdrx_copy_to")
        self.copy_from_fast = _unchecked(held, "gdrx_copy_from")
        self.lookup = _bind(lib, "gdrx_lookup", c_int,
                            [c_void_p, c_ulonglong, P(gdrx_mem_t), P(c_size_t)])
        self.info = _bind(lib, "gdrx_info", c_int, [c_void_p, P(gdrx_info_t)])


_lock = threading.Lock()
_gdr: Gdr | None = None
_gdrx: Gdrx | None = None


def gdr() -> Gdr:
    """libgdrapi.so.2, loaded at the first call (OSError if it cannot be)."""
    global _gdr
    if _gdr is None:
        with _lock:
            if _gdr is None:
                _gdr = Gdr()
    return _gdr


def gdrx() -> Gdrx:
    """libgdrapi_ext.so.0, loaded at the first call (OSError if it cannot be)."""
    global _gdrx
    if _gdrx is None:
        gdr()
        with _lock:
            if _gdrx is None:
                _gdrx = Gdrx()
    return _gdrx


# Copies up to this many bytes keep the GIL (PyDLL): below it, releasing and taking the GIL
# back costs more than the copy itself (python/README.md has the measurement). Larger copies
# release it, so that other threads run meanwhile, and count themselves in the mapping's
# in-flight copies instead, which an unmap waits for.
HELD_MAX = 65536

# Without a GIL (a free-threaded build), nothing keeps a copy and an unmap apart but a lock:
# every copy then takes the in-flight path.
GIL = getattr(sys, "_is_gil_enabled", lambda: True)()


# Objects made before a fork belong to the parent: their mappings are absent in a child (the
# library marks them MADV_DONTFORK or the driver VM_DONTCOPY) and the library refuses their
# handles there. Each object keeps the generation it was made in; the child's is new.
class _Generation:
    value = 0


GENERATION = _Generation()


def _after_fork_in_child() -> None:
    GENERATION.value += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def address_of(data, writable: bool):
    """(address, byte length, object to keep alive during the call) of a C-contiguous buffer;
    ``bytes`` are passed as they are (read-only use). TypeError for anything else."""
    if type(data) is bytes and not writable:
        return data, len(data), data
    mv = memoryview(data)
    if not mv.c_contiguous:
        raise TypeError("the buffer must be C-contiguous")
    n = mv.nbytes
    if mv.readonly:
        if writable:
            raise TypeError("readinto needs a writable buffer, not %s" % type(data).__name__)
        b = mv.tobytes()
        return b, n, b
    if n == 0:
        return None, 0, mv
    c = (ctypes.c_char * n).from_buffer(mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv)
    return ctypes.addressof(c), n, c

