"""Host-written GPU memory (``libgdrapi_ext.so.0``, ``gdrapi_ext.h``): an :class:`Allocator`
per device hands out :class:`HostWritten` allocations, device memory with a CPU mapping of the
same bytes; small ones are carved from one pinned chunk (a thousand 8-byte flags cost one pin).

An allocation is a device array for CUDA libraries (``__cuda_array_interface__``,
``__dlpack__``: ``torch.as_tensor(x, device="cuda")``, ``cupy.asarray(x)``,
``torch.from_dlpack(x)`` are views of the same bytes, no copy) and CPU memory for the process
(``write``/``read``/``write_u64``/``read_u64``, fenced; ``view()``, a memoryview).
"""

from __future__ import annotations

import ctypes
import errno
import sys
import threading
import weakref
from enum import IntEnum
from typing import Any, NamedTuple, Optional, Tuple, Union

from . import _lib
from ._device import DL_CUDA, dlpack_capsule
from ._errors import LOG_HINT, GdrError, closed, failed, in_child
from ._session import Backend, MappingType, _mapping_type
from ._views import Exported

Buffer = Any
_HELD_MAX = _lib.HELD_MAX
_ORDER = sys.byteorder
_U64x1 = ctypes.c_uint64 * 1  # an array: passed as a pointer to its element
_SIZE = ctypes.c_size_t
_N8 = ctypes.c_size_t(8)
_addressof = ctypes.addressof
_CHARS = [ctypes.c_char * n for n in range(65)]


class Memory(IntEnum):
    """How an allocator allocates device memory (``GDRX_MEMORY_*``)."""

    CUMEMALLOC = 0
    """``cuMemAlloc``."""
    CUMEMCREATE = 1
    """``cuMemCreate``, exportable as a POSIX file descriptor (what the Vulkan import maps)."""


class AllocatorInfo(NamedTuple):
    """What :meth:`Allocator.info` reports (``gdrx_info_t``)."""

    device: int
    """The CUDA device ordinal."""
    backend: Union[Backend, int]
    """The libgdrapi backend its session uses."""
    memory: Union[Memory, int]
    """How device memory is allocated."""
    mapping_type: Union[MappingType, int]
    """The mappings' type (NONE before the first allocation)."""
    chunk_size: int
    """Bytes of one shared chunk."""
    small_max: int
    """The largest allocation carved from a shared chunk."""
    allocations: int
    """Live allocations."""
    pins: int
    """Live pins: shared chunks plus large allocations."""
    bytes_pinned: int
    """Bytes those pins cover."""
    bytes_in_use: int
    """Bytes of live allocations, each rounded up to 64."""


_NAMES = {"bool": "b1", "int8": "i1", "uint8": "u1", "int16": "i2", "uint16": "u2",
          "int32": "i4", "uint32": "u4", "int64": "i8", "uint64": "u8", "float16": "f2",
          "float32": "f4", "float64": "f8", "complex64": "c8", "complex128": "c16"}


def _typestr(dtype: Any) -> str:
    """``dtype`` (a typestr such as ``"u1"`` or ``"<i8"``, a name such as ``"int64"`` or
    ``torch.int64``, a numpy dtype) as a ``__cuda_array_interface__`` typestr."""
    s = getattr(dtype, "str", None)
    if not isinstance(s, str):
        s = str(dtype)
    s = s.replace("torch.", "").replace("numpy.", "")
    s = _NAMES.get(s, s)
    if s[:1] in "<>|=":
        order, s = s[0], s[1:]
    else:
        order = ""
    if s[:1] not in ("i", "u", "f", "c", "b") or not s[1:].isdigit() or int(s[1:]) <= 0:
        raise TypeError("unknown dtype %r (use a typestr such as 'u1', 'i8', 'f4')" % (dtype,))
    size = int(s[1:])
    native = "<" if sys.byteorder == "little" else ">"
    if order in ("<", ">") and order != native and size > 1:
        raise TypeError("dtype %r is not in the host's byte order" % (dtype,))
    return ("|" if size == 1 else native) + s


class _AllocState:
    __slots__ = ("lib", "x", "open", "done", "lock", "idle", "allocations", "gen", "finalizer",
                 "device", "fast", "__weakref__")

    def __init__(self, lib: _lib.Gdrx, x: int, device: int) -> None:
        self.lib = lib
        self.x = x
        self.device = device
        self.open = True  # allocations are let in
        self.done = False  # the close is complete
        self.lock = threading.RLock()
        self.idle = threading.Condition(self.lock)
        self.allocations: "weakref.WeakSet[HostWritten]" = weakref.WeakSet()
        self.gen = _lib.GENERATION.value
        self.fast = _lib.GIL and _lib.gdr().thread_safe
        self.finalizer = weakref.finalize(self, _close_x, lib, x, self.gen)


def _close_x(lib: _lib.Gdrx, x: int, gen: int) -> None:
    if gen == _lib.GENERATION.value:
        lib.close(x)


def _free(lib: _lib.Gdrx, x: int, mem: _lib.gdrx_mem_t, gen: int) -> None:
    if gen == _lib.GENERATION.value:
        lib.free(x, ctypes.addressof(mem))


class Allocator:
    """An allocator of host-written GPU memory on CUDA device ``device`` (``gdrx_open``): it
    opens a libgdrapi session and allocates the memory its backend maps (``cuMemCreate``
    exportable as a file descriptor, which every backend maps and the Vulkan import requires,
    or ``cuMemAlloc``; ``cumemalloc=True`` asks for the latter, refused with ENOTSUP on the
    Vulkan import).

    ``close()``, its ``with`` block's end or garbage collection closes it; closing frees its
    live allocations (``BufferError``, with nothing freed, while views or DLPack exports of
    one are alive). Raises :class:`GdrError`: ENODEV without a CUDA driver, that device, or a
    backend that maps GPU memory (without gdrdrv set ``GDRAPI_USE_VULKAN=1``)."""

    __slots__ = ("_a", "__weakref__")

    def __init__(self, device: int = 0, *, cumemalloc: bool = False) -> None:
        lib = _lib.gdrx()
        x = ctypes.c_void_p()
        rc = lib.open(ctypes.byref(x), int(device), 1 if cumemalloc else 0)
        if rc:
            if rc == errno.ENODEV:
                hint = ("no CUDA driver, no device %d, or no backend that maps GPU memory (load "
                        "gdrdrv; on machines without it set GDRAPI_USE_VULKAN=1 before the "
                        "process starts; `gdrcopy doctor` says what is missing); %s"
                        % (device, LOG_HINT))
            elif rc == errno.ENOTSUP:
                hint = ("cumemalloc=True on a backend that maps only cuMemCreate memory (the "
                        "Vulkan import), or a device without the memory the backend needs; "
                        + LOG_HINT)
            else:
                hint = LOG_HINT
            raise failed("gdrx_open", "device %d" % device, rc, hint)
        self._a = _AllocState(lib, x.value or 0, int(device))

    def __repr__(self) -> str:
        a = self._a
        return "<gdrapi_rs.Allocator device %d%s>" % (a.device, "" if a.open else ", closed")

    @property
    def device(self) -> int:
        """The CUDA device ordinal."""
        return self._a.device

    @property
    def closed(self) -> bool:
        """Whether the allocator was closed."""
        return not self._a.open

    def _open(self, call: str) -> _AllocState:
        a = self._a
        if not a.open:
            raise closed("the allocator", call)
        if a.gen != _lib.GENERATION.value:
            raise in_child("the allocator")
        return a

    def alloc(self, size: int, align: int = 0, *, dtype: Any = "u1") -> "HostWritten":
        """``size`` bytes (> 0) of device memory with a CPU mapping, aligned to ``align`` (0:
        64 bytes, a cache line; else a power of two up to 64 KiB) (``gdrx_alloc``). Its
        contents are not initialised. ``dtype`` is the element type it presents to CUDA
        libraries (``'u1'``, ``'i8'``, ``'int64'``, ``torch.int64``, a numpy dtype); ``size``
        must be a multiple of its size."""
        typestr = _typestr(dtype)
        itemsize = int(typestr[2:])
        if size <= 0 or size % itemsize:
            raise GdrError(errno.EINVAL, "gdrx_alloc(%d bytes): the size must be a positive "
                           "multiple of the %s element's %d bytes" % (size, typestr, itemsize),
                           "gdrx_alloc")
        mem = _lib.gdrx_mem_t()
        with self._a.lock:
            a = self._open("gdrx_alloc")
            rc = a.lib.alloc(a.x, size, align, ctypes.byref(mem))
            if rc:
                raise failed("gdrx_alloc", "%d bytes, alignment %d" % (size, align), rc,
                             LOG_HINT)
            hw = HostWritten(a, mem, typestr)
            a.allocations.add(hw)
        return hw

    def info(self) -> AllocatorInfo:
        """What the allocator holds and how it allocates (``gdrx_info``)."""
        v = _lib.gdrx_info_t()
        with self._a.lock:
            a = self._open("gdrx_info")
            rc = a.lib.info(a.x, ctypes.byref(v))
        if rc:
            raise failed("gdrx_info", "", rc, LOG_HINT)

        def enum(cls, x):
            try:
                return cls(x)
            except ValueError:
                return x
        return AllocatorInfo(v.device, enum(Backend, v.backend), enum(Memory, v.memory),
                             _mapping_type(v.mapping_type), v.chunk_size, v.small_max,
                             v.allocations, v.pins, v.bytes_pinned, v.bytes_in_use)

    def lookup(self, addr: int) -> Tuple[int, int]:
        """The live allocation holding ``addr`` (a device address, or a CPU address of its
        bytes): ``(its dev_ptr, the offset of addr in it)``; GdrError ENOENT if none."""
        mem = _lib.gdrx_mem_t()
        off = ctypes.c_size_t()
        with self._a.lock:
            a = self._open("gdrx_lookup")
            rc = a.lib.lookup(a.x, addr, ctypes.byref(mem), ctypes.byref(off))
        if rc:
            raise failed("gdrx_lookup", "%#x" % addr, rc,
                         "no live allocation of this allocator holds it" if rc == errno.ENOENT
                         else LOG_HINT)
        return mem.dev_ptr, off.value

    def close(self) -> None:
        """Frees every live allocation and closes the allocator (``gdrx_close``).
        ``BufferError``, with nothing freed, while one of them has live views or DLPack
        exports. A second close does nothing."""
        a = self._a
        with a.lock:
            if not a.open:
                while not a.done:  # another thread is closing it: wait for the end
                    a.idle.wait()
                return
            live = [hw for hw in list(a.allocations) if hw._open]
            for hw in live:
                hw._check_unused()
            for hw in live:
                hw._open = hw._direct = False
                hw._finalizer.detach()
            a.open = False
            a.finalizer.detach()
            rc = 0
            try:
                for hw in list(a.allocations):  # copies in flight (GIL released) end first
                    while hw._inflight:
                        hw._idle.wait()
                if a.gen == _lib.GENERATION.value:
                    rc = a.lib.close(a.x)
            finally:
                for hw in list(a.allocations):
                    hw._freed = True
                    hw._idle.notify_all()
                a.done = True
                a.idle.notify_all()
        if rc:
            raise failed("gdrx_close", "", rc, LOG_HINT)

    def __enter__(self) -> "Allocator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class HostWritten:
    """Device memory the CPU writes and reads through a mapping of the same bytes
    (``gdrx_mem_t``), made by :meth:`Allocator.alloc`; freed by ``free()``/``close()``, its
    ``with`` block's end or garbage collection. It keeps its allocator open.

    For CUDA libraries it is a 1-D device array of its ``dtype`` (``__cuda_array_interface__``
    version 3, ``__dlpack__``): ``torch.as_tensor(x, device="cuda")``, ``cupy.asarray(x)`` and
    ``torch.from_dlpack(x)`` see the same bytes. Freeing it while such a tensor still uses it
    is as freeing device memory under a live tensor: its bytes may be given to another
    allocation.
    """

    __slots__ = ("_a", "_mem", "_memp", "_memc", "_typestr", "_open", "_direct", "_end8",
                 "_to_held", "_from_held", "_to_fast", "_from_fast", "_finalizer", "_exported",
                 "_dlpack", "_inflight", "_idle", "_freed",
                 "dev_ptr", "cpu_ptr", "size", "__weakref__")

    dev_ptr: int
    """The device address of the first byte (a ``CUdeviceptr``), for kernels and CUDA calls."""
    cpu_ptr: int
    """The CPU address of the first byte."""
    size: int
    """The bytes allocated."""

    def __init__(self, a: _AllocState, mem: _lib.gdrx_mem_t, typestr: str) -> None:
        self._a = a
        self._mem = mem
        self._memp = ctypes.addressof(mem)
        self._typestr = typestr
        self._open = True  # copies are let in
        self._freed = False  # the free is complete
        self._direct = a.fast
        self._to_held, self._from_held = a.lib.copy_to_held, a.lib.copy_from_held
        self._to_fast, self._from_fast = a.lib.copy_to_fast, a.lib.copy_from_fast
        self._memc = ctypes.c_void_p(self._memp)
        self._exported = Exported()
        self._dlpack = 0
        self._inflight = 0
        self._idle = threading.Condition(a.lock)
        self.dev_ptr = mem.dev_ptr
        self.cpu_ptr = mem.cpu_ptr or 0
        self.size = mem.size
        self._end8 = mem.size - 8
        self._finalizer = weakref.finalize(self, _free, a.lib, a.x, mem, a.gen)

    def __repr__(self) -> str:
        return "<gdrapi_rs.HostWritten %d bytes at device %#x (CPU %#x)%s>" % (
            self.size, self.dev_ptr, self.cpu_ptr, "" if self._open else ", freed")

    def __len__(self) -> int:
        return self.size

    @property
    def closed(self) -> bool:
        """Whether the allocation was freed."""
        return not self._open

    @property
    def device(self) -> int:
        """The CUDA device ordinal."""
        return self._a.device

    @property
    def dtype(self) -> str:
        """The element type CUDA libraries see, as a typestr (``'|u1'``, ``'<i8'``...)."""
        return self._typestr

    @property
    def shape(self) -> Tuple[int]:
        """``(size // itemsize,)``."""
        return (self.size // int(self._typestr[2:]),)

    # ---- the CPU side ----

    def _error(self, call: str, offset: int, n: int, rc: int = 0) -> GdrError:
        if not self._open:
            return closed("the allocation at %#x" % self.dev_ptr, call)
        if self._a.gen != _lib.GENERATION.value:
            return in_child("the allocation at %#x" % self.dev_ptr)
        if rc == 0:
            return GdrError(errno.EINVAL, "%s: %d bytes at offset %d lie outside the %d bytes of "
                            "the allocation at %#x" % (call, n, offset, self.size, self.dev_ptr),
                            call)
        return failed(call, "%d bytes at offset %d of the allocation at %#x"
                      % (n, offset, self.dev_ptr), rc, LOG_HINT)

    def _counted(self, fn, offset: int, host, n: int, call: str) -> int:
        with self._idle:
            if not self._open:
                raise closed("the allocation at %#x" % self.dev_ptr, call)
            self._inflight += 1
        try:
            return fn(self._memp, offset, host, n)
        finally:
            with self._idle:
                self._inflight -= 1
                if not self._inflight:
                    self._idle.notify_all()

    # As Mapping's copies: a straight path (`_direct`: open, a GIL, a thread-safe library; in
    # range), then _copy for everything else.

    def _copy(self, to: bool, offset: int, host, n: int, u64: bool) -> None:
        call = "gdrx_copy_to" if to else "gdrx_copy_from"
        if u64:
            if offset < 0 or offset > self.size - 8 or offset & 7 or not self._open:
                raise self._u64_error(call, offset)
        elif offset < 0 or n < 0 or n > self.size - offset or not self._open:
            raise self._error(call, offset, n)
        lib = self._a.lib
        if n <= _HELD_MAX and self._direct:
            rc = (lib.copy_to_held if to else lib.copy_from_held)(self._memp, offset, host, n)
        else:
            rc = self._counted(lib.copy_to if to else lib.copy_from, offset, host, n, call)
        if rc:
            raise self._error(call, offset, n, rc)

    def write(self, offset: int, data: Buffer) -> None:
        """Copies ``data`` (bytes-like) into the allocation at byte ``offset`` (``gdrx_copy_to``:
        stores, then a store fence)."""
        if type(data) is bytes:
            n = len(data)
            if self._direct and 0 <= offset and n <= self.size - offset and n <= _HELD_MAX:
                rc = self._to_fast(self._memc, _SIZE(offset), data, _SIZE(n))
                if rc:
                    raise self._error("gdrx_copy_to", offset, n, rc)
                return
        else:
            data, n, _ = _lib.address_of(data, False)
        self._copy(True, offset, data, n, False)

    def readinto(self, offset: int, buffer: Buffer) -> int:
        """Copies ``len(buffer)`` bytes from byte ``offset`` into the writable ``buffer``
        (``gdrx_copy_from``); returns the number of bytes."""
        addr, n, _keep = _lib.address_of(buffer, True)
        self._copy(False, offset, addr, n, False)
        return n

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes from byte ``offset`` (``gdrx_copy_from``)."""
        if self._direct and 0 <= offset and 0 <= size <= self.size - offset and size <= _HELD_MAX:
            buf = (_CHARS[size] if size <= 64 else ctypes.c_char * size)()
            rc = self._from_fast(self._memc, _SIZE(offset), buf, _SIZE(size))
            if rc:
                raise self._error("gdrx_copy_from", offset, size, rc)
            return buf.raw
        if offset < 0 or size < 0 or size > self.size - offset or not self._open:
            raise self._error("gdrx_copy_from", offset, size)
        buf = (ctypes.c_char * size)()
        self._copy(False, offset, buf, size, False)
        return buf.raw

    def _u64_error(self, call: str, offset: int) -> GdrError:
        if self._open and 0 <= offset <= self.size - 8:
            return GdrError(errno.EINVAL, "%s: offset %d is not 8-byte aligned: a 64-bit "
                            "access there would be split" % (call, offset), call)
        return self._error(call, offset, 8)

    def write_u64(self, offset: int, value: int) -> None:
        """Stores the 64-bit unsigned ``value`` (native byte order) at byte ``offset`` (a
        multiple of 8) in one 8-byte store, then a store fence: a flag or doorbell the GPU
        reads."""
        if self._direct and 0 <= offset <= self._end8 and not offset & 7:
            rc = self._to_fast(self._memc, _SIZE(offset), value.to_bytes(8, _ORDER), _N8)
            if rc:
                raise self._error("gdrx_copy_to", offset, 8, rc)
            return
        self._copy(True, offset, value.to_bytes(8, _ORDER), 8, True)

    def read_u64(self, offset: int) -> int:
        """The 64-bit unsigned value (native byte order) at byte ``offset`` (a multiple of 8),
        one 8-byte load through PCIe: what the GPU wrote there."""
        v = _U64x1()
        if self._direct and 0 <= offset <= self._end8 and not offset & 7:
            rc = self._from_fast(self._memc, _SIZE(offset), v, _N8)
            if rc:
                raise self._error("gdrx_copy_from", offset, 8, rc)
        else:
            self._copy(False, offset, _addressof(v), 8, True)
        return v[0]

    def fence(self) -> None:
        """Orders this thread's earlier stores through :meth:`view` before its later ones (a
        one-byte read through the mapping, followed by the library's store fence)."""
        self.read(0, 1)

    def view(self) -> memoryview:
        """A writable ``memoryview`` (format ``'B'``) of the allocation's CPU mapping: plain
        loads and stores, no fence (see :meth:`fence`); each load crosses PCIe. It keeps the
        allocation alive; freeing it while the view is alive raises ``BufferError``."""
        with self._a.lock:
            if not self._open:
                raise closed("the allocation at %#x" % self.dev_ptr)
            if self._a.gen != _lib.GENERATION.value:
                raise in_child("the allocation at %#x" % self.dev_ptr)
            return self._exported.view(self, self.cpu_ptr, self.size)

    def __buffer__(self, flags: int) -> memoryview:  # PEP 688 (Python 3.12+)
        return self.view()

    # ---- the device side ----

    @property
    def __cuda_array_interface__(self) -> dict:
        """Version 3 of the CUDA Array Interface: a 1-D C-contiguous array of :attr:`dtype` at
        :attr:`dev_ptr`; no stream to synchronize (the CPU's copies are complete when they
        return)."""
        if not self._open:
            raise AttributeError("the allocation at %#x is freed" % self.dev_ptr)
        return {"shape": self.shape, "typestr": self._typestr, "data": (self.dev_ptr, False),
                "version": 3, "strides": None, "stream": None}

    def __dlpack_device__(self) -> Tuple[int, int]:
        """``(kDLCUDA, device)``."""
        return (DL_CUDA, self._a.device)

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Optional[bool] = None) -> Any:
        """A DLPack capsule of the allocation as a 1-D array of :attr:`dtype` on its CUDA
        device: DLPack 1.0's 'dltensor_versioned' when ``max_version`` allows it, else the
        unversioned 'dltensor'. ``stream`` needs no synchronization (nothing is pending on the
        GPU for this memory); a copy cannot be made (``copy=True``: BufferError). The
        consumer's tensor keeps the allocation alive."""
        if copy:
            raise BufferError("a host-written allocation is exported in place; copy=True is "
                              "not supported")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError("the allocation is on %r, not %r" % (self.__dlpack_device__(),
                                                                    dl_device))
        with self._a.lock:
            if not self._open:
                raise closed("the allocation at %#x" % self.dev_ptr, "__dlpack__")
            self._dlpack += 1
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        return dlpack_capsule(self.dev_ptr, self.shape, self._typestr, self._a.device,
                              self._dlpack_released, versioned)

    def _dlpack_released(self) -> None:
        with self._a.lock:
            self._dlpack -= 1

    # ---- release ----

    def _check_unused(self) -> None:
        if self._exported.alive():
            raise BufferError("cannot free the allocation at %#x: memoryviews of it, or objects "
                              "made from them (numpy arrays...), are alive; release them first "
                              "(del, memoryview.release())" % self.dev_ptr)
        if self._dlpack:
            raise BufferError("cannot free the allocation at %#x: %d DLPack export(s) are in use "
                              "(a tensor made with from_dlpack); drop them first"
                              % (self.dev_ptr, self._dlpack))

    def free(self) -> None:
        """Frees the allocation (``gdrx_free``). ``BufferError``, with nothing freed, while
        views or DLPack exports of it are alive. A second free does nothing."""
        a = self._a
        with a.lock:
            if not self._open:
                while not self._freed:  # another thread's free waits for copies: wait with it
                    self._idle.wait()
                return
            self._check_unused()
            self._open = self._direct = False
            try:
                while self._inflight:
                    self._idle.wait()
                self._finalizer.detach()
                # The allocator may have been closed (freeing everything) while this waited.
                rc = a.lib.free(a.x, self._memp) \
                    if a.open and a.gen == _lib.GENERATION.value else 0
            finally:
                self._freed = True
                self._idle.notify_all()
        if rc:
            raise failed("gdrx_free", "the allocation at %#x" % self.dev_ptr, rc, LOG_HINT)

    close = free

    def __enter__(self) -> "HostWritten":
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()
