"""Device memory that other libraries describe: ``__cuda_array_interface__`` (PyTorch, CuPy,
Numba) and ``__dlpack__`` (PyTorch, JAX, CuPy) read, and ``__dlpack__`` produced for
host-written allocations. Standard library only: nothing here imports numpy, torch or CuPy."""

from __future__ import annotations

import ctypes
import errno
import threading
from ctypes import CFUNCTYPE, POINTER, Structure, c_char_p, c_int32, c_int64, c_uint8, c_uint16
from ctypes import c_uint64, c_void_p
from typing import Any, NamedTuple, Optional, Tuple

from ._errors import GdrError

# DLPack's device types (dlpack.h, DLDeviceType) this module names.
DL_CPU = 1
DL_CUDA = 2
DL_CUDA_HOST = 3
DL_CUDA_MANAGED = 13
_DL_DEVICES = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 4: "kDLOpenCL", 7: "kDLVulkan",
               8: "kDLMetal", 10: "kDLROCM", 11: "kDLROCMHost", 13: "kDLCUDAManaged",
               14: "kDLOneAPI"}


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


DELETER = CFUNCTYPE(None, c_void_p)


class DLManagedTensor(Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", DELETER)]


class DLPackVersion(Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(Structure):
    """DLPack 1.0's managed tensor (capsule 'dltensor_versioned')."""

    _fields_ = [("version", DLPackVersion), ("manager_ctx", c_void_p), ("deleter", DELETER),
                ("flags", c_uint64), ("dl_tensor", DLTensor)]


_api = ctypes.pythonapi
_api.PyCapsule_GetPointer.restype = c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, c_char_p]
_CAPSULE_DESTRUCTOR = CFUNCTYPE(None, c_void_p)
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [c_void_p, c_char_p, _CAPSULE_DESTRUCTOR]
# The destructor gets the capsule while it is being destroyed: it must not become a Python
# object again, so these two take its address.
_is_valid_raw = ctypes.PYFUNCTYPE(ctypes.c_int, c_void_p, c_char_p)(("PyCapsule_IsValid", _api))
_get_pointer_raw = ctypes.PYFUNCTYPE(c_void_p, c_void_p, c_char_p)(("PyCapsule_GetPointer", _api))

# A capsule's name must live as long as the capsule: module constants do.
_DLTENSOR = b"dltensor"
_DLTENSOR_VERSIONED = b"dltensor_versioned"


class Described(NamedTuple):
    """Device memory an object describes."""

    ptr: int
    """Device address of the first byte."""
    nbytes: int
    """Its length in bytes."""
    device: Optional[int]
    """The CUDA device ordinal when the object says (DLPack), else None."""
    keep: Any
    """What keeps the memory alive: the object, or the DLPack capsule that holds it."""
    kind: str
    """How it was described: '__cuda_array_interface__', '__dlpack__' or 'pointer'."""


def _itemsize_of_typestr(typestr: str) -> int:
    try:
        return int(typestr[2:])
    except (ValueError, TypeError):
        raise TypeError("unknown __cuda_array_interface__ typestr %r" % (typestr,)) from None


def _c_contiguous(shape, strides, itemsize) -> bool:
    if strides is None:
        return True
    expect = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def _from_cai(obj: Any, cai: dict) -> Described:
    shape = tuple(cai["shape"])
    itemsize = _itemsize_of_typestr(cai["typestr"])
    if not _c_contiguous(shape, cai.get("strides"), itemsize):
        raise GdrError(errno.EINVAL, "pin: the %s is not C-contiguous (strides %r): pin a "
                       "contiguous copy, or its whole storage"
                       % (type(obj).__name__, cai["strides"]))
    n = itemsize
    for d in shape:
        n *= d
    ptr = cai["data"][0] or 0
    if cai.get("mask") is not None:
        raise GdrError(errno.EINVAL, "pin: masked arrays are not supported")
    return Described(int(ptr), n, None, obj, "__cuda_array_interface__")


def _from_dlpack(obj: Any) -> Described:
    device = None
    if hasattr(obj, "__dlpack_device__"):
        dtype, device = obj.__dlpack_device__()
        _check_dl_device(obj, int(dtype))
    capsule = obj.__dlpack__()
    if not _api.PyCapsule_IsValid(capsule, _DLTENSOR):
        raise GdrError(errno.EINVAL, "pin: %s.__dlpack__() gave no 'dltensor' capsule"
                       % type(obj).__name__)
    managed = DLManagedTensor.from_address(_api.PyCapsule_GetPointer(capsule, _DLTENSOR))
    t = managed.dl_tensor
    _check_dl_device(obj, t.device.device_type)
    itemsize_bits = t.dtype.bits * t.dtype.lanes
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    if itemsize_bits % 8:
        raise GdrError(errno.EINVAL, "pin: sub-byte DLPack element types are not supported")
    itemsize = itemsize_bits // 8
    if strides is not None and not _c_contiguous(shape, tuple(s * itemsize for s in strides),
                                                 itemsize):
        raise GdrError(errno.EINVAL, "pin: the %s is not C-contiguous (DLPack strides %r)"
                       % (type(obj).__name__, strides))
    n = itemsize
    for d in shape:
        n *= d
    # The capsule, unconsumed, keeps the producer's memory alive; when the pin lets it go,
    # its destructor calls the producer's deleter.
    return Described((t.data or 0) + t.byte_offset, n, t.device.device_id, capsule, "__dlpack__")


def _check_dl_device(obj: Any, device_type: int) -> None:
    if device_type not in (DL_CUDA, DL_CUDA_MANAGED):
        raise GdrError(errno.EINVAL,
                       "pin: the %s is not CUDA device memory (DLPack device %s): gdrcopy pins "
                       "GPU memory only" % (type(obj).__name__,
                                            _DL_DEVICES.get(device_type, str(device_type))))


def describe(obj: Any, size: Optional[int] = None) -> Described:
    """The device memory ``obj`` stands for: an object with ``__cuda_array_interface__`` or
    ``__dlpack__``, or a device address (an ``int``) with ``size``."""
    if not isinstance(obj, bool) and not hasattr(obj, "__cuda_array_interface__") \
            and not hasattr(obj, "__dlpack__") and hasattr(obj, "__index__"):
        obj = obj.__index__()  # an int, or an integer type of numpy's
    if isinstance(obj, int) and not isinstance(obj, bool):
        if size is None:
            raise TypeError("pin(address, size): a device address needs a size in bytes")
        if obj <= 0 or size <= 0:
            raise GdrError(errno.EINVAL, "pin: address %#x and size %d: both must be positive"
                           % (obj, size))
        return Described(obj, int(size), None, None, "pointer")
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:
        cai = None
    if cai is not None:
        d = _from_cai(obj, cai)
    elif hasattr(obj, "__dlpack__"):
        d = _from_dlpack(obj)
    else:
        raise TypeError("pin: %s has neither __cuda_array_interface__ nor __dlpack__, and is "
                        "not a device address" % type(obj).__name__)
    if size is not None:
        if not 0 < size <= d.nbytes:
            raise GdrError(errno.EINVAL, "pin: size %d is outside the object's %d bytes"
                           % (size, d.nbytes))
        d = d._replace(nbytes=int(size))
    if d.nbytes <= 0 or d.ptr == 0:
        raise GdrError(errno.EINVAL, "pin: the %s holds no device memory (%d bytes at %#x)"
                       % (type(obj).__name__, d.nbytes, d.ptr))
    return d


# ---- producing DLPack capsules (host-written allocations) ----

_exports_lock = threading.Lock()
# Address of each DLManagedTensor handed out -> (the struct, its shape, the owner's release).
_exports: dict = {}


def _release(addr: int) -> None:
    with _exports_lock:
        entry = _exports.pop(addr, None)
    if entry is not None:
        entry[2]()


@DELETER
def _deleter(addr):  # called by the consumer when it is done (any thread; ctypes takes the GIL)
    if addr:
        _release(addr)


@_CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule):  # the capsule went away; a consumer renames it when it takes it
    for name in (_DLTENSOR, _DLTENSOR_VERSIONED):
        if _is_valid_raw(capsule, name):
            _release(_get_pointer_raw(capsule, name) or 0)


_DL_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}


def dlpack_capsule(ptr: int, shape: Tuple[int, ...], typestr: str, device: int,
                   release, versioned: bool = False) -> Any:
    """A DLPack capsule for ``shape`` elements of ``typestr`` at device address ``ptr`` on
    CUDA device ``device``: DLPack 1.0's 'dltensor_versioned' with ``versioned``, else the
    unversioned 'dltensor'. ``release()`` is called once, when the consumer is done (or the
    capsule is dropped unconsumed)."""
    m = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    if versioned:
        m.version = DLPackVersion(1, 0)
        m.flags = 0  # writable, not a copy
    dims = (c_int64 * max(1, len(shape)))(*shape)
    t = m.dl_tensor
    t.data = ptr
    t.device = DLDevice(DL_CUDA, device)
    t.ndim = len(shape)
    t.dtype = DLDataType(_DL_CODES[typestr[1]], 8 * int(typestr[2:]), 1)
    t.shape = ctypes.cast(dims, POINTER(c_int64))
    t.strides = None
    t.byte_offset = 0
    m.manager_ctx = None
    m.deleter = _deleter
    addr = ctypes.addressof(m)
    with _exports_lock:
        _exports[addr] = (m, dims, release)
    return _api.PyCapsule_New(addr, _DLTENSOR_VERSIONED if versioned else _DLTENSOR,
                              _capsule_destructor)


def live_exports() -> int:
    """DLPack capsules handed out and not yet released (tests)."""
    with _exports_lock:
        return len(_exports)
