"""gdrcopy's API on memory a program already has: a :class:`Session` (``gdr_t``) pins device
memory (:class:`Pin`, ``gdr_mh_t``) and maps it into the process (:class:`Mapping`), through
which the CPU copies with the library's fenced copies or reads and writes a ``memoryview``.

Lifetimes. Each object is released by ``close()``, by leaving its ``with`` block, or when it
is garbage collected; what it was made from stays alive until then (a pin keeps its session
and the pinned object, a mapping its pin, a memoryview its mapping). Closing a session closes
its pins, and closing a pin its mapping. Closing a mapping whose memoryviews (or numpy arrays
made from them) are alive raises ``BufferError`` and changes nothing, as ``mmap.close()`` does.

Threads. Every method may be called from any thread. Copies take no lock: up to
``_lib.HELD_MAX`` bytes they keep the GIL, and the calls that unmap (unmap, unpin, close)
keep it too, so a copy and an unmap of one mapping never overlap; larger copies release the
GIL and count themselves in the mapping, whose unmap waits for them.
"""

from __future__ import annotations

import ctypes
import errno
import sys
import threading
import weakref
from enum import IntEnum
from typing import Any, NamedTuple, Optional, Union

from . import _lib
from ._device import describe
from ._errors import LOG_HINT, GdrError, closed, failed, in_child
from ._views import Exported

GPU_PAGE = 1 << 16
_PAGE_MASK = GPU_PAGE - 1
_HELD_MAX = _lib.HELD_MAX
_ORDER = sys.byteorder
_U64x1 = ctypes.c_uint64 * 1  # an array: passed as a pointer to its element
_VOIDP = ctypes.c_void_p
_SIZE = ctypes.c_size_t
_N8 = ctypes.c_size_t(8)
_addressof = ctypes.addressof
# The buffer types of small reads, made once.
_CHARS = [ctypes.c_char * n for n in range(65)]

Buffer = Any  # a bytes-like object (the buffer protocol)


class MappingType(IntEnum):
    """How a mapping reaches device memory (``gdr_mapping_type_t``)."""

    NONE = 0
    WC = 1
    """Write-combining, through the PCIe BAR (x86): stores are buffered, loads uncached."""
    CACHING = 2
    """Cached (coherent platforms such as Grace Hopper)."""
    DEVICE = 3
    """Device (uncached) memory."""


class Backend(IntEnum):
    """Which backend of libgdrapi.so.2 a session uses (``struct gdr``'s ``cache_backend``)."""

    GDRDRV = 0
    """The gdrdrv kernel module (``/dev/gdrdrv``)."""
    DMABUF = 1
    """The CUDA driver's DMA-BUF export, mapped by the CPU (CUDA 13.3+)."""
    VULKAN = 2
    """gdrapi-rs's Vulkan import (``GDRAPI_USE_VULKAN=1``, no kernel module)."""


class PinInfo(NamedTuple):
    """What ``gdr_get_info_v2`` says of a pin."""

    va: int
    """Start of the pinned GPU pages (device address)."""
    mapped_size: int
    """Bytes pinned from ``va``."""
    page_size: int
    """The GPU page size (64 KiB)."""
    mapped: bool
    """Whether the pin is mapped."""
    wc_mapping: bool
    """Whether that mapping is write-combining."""
    mapping_type: Union[MappingType, int]
    """The mapping's type (an int for a value this package does not know)."""


def _mapping_type(v: int) -> Union[MappingType, int]:
    try:
        return MappingType(v)
    except ValueError:
        return v


# ---- the states the public objects share; finalizers hold no reference to them ----

class _SessionState:
    __slots__ = ("lib", "g", "open", "done", "lock", "idle", "pins", "gen", "finalizer",
                 "backend", "__weakref__")

    def __init__(self, lib: _lib.Gdr, g: int) -> None:
        self.lib = lib
        self.g = g
        self.open = True  # pins, maps and views are let in
        self.done = False  # the close is complete
        self.lock = threading.RLock()
        self.idle = threading.Condition(self.lock)
        self.pins: "weakref.WeakSet[_PinState]" = weakref.WeakSet()
        self.gen = _lib.GENERATION.value
        self.backend: Optional[int] = None
        self.finalizer = weakref.finalize(self, _close_g, lib, g, self.gen)

    def call(self, fn, *args):
        """A call other than a copy; serialized where the library is not thread-safe."""
        if self.lib.thread_safe:
            return fn(*args)
        with self.lib.serial:
            return fn(*args)


def _finally(lib: _lib.Gdr, gen: int, fn, *args) -> None:
    """A release at garbage collection (or exit): nothing in a forked child, whose objects are
    the parent's; serialized where the library is not thread-safe."""
    if gen != _lib.GENERATION.value:
        return
    if lib.thread_safe:
        fn(*args)
    else:
        with lib.serial:
            fn(*args)


def _close_g(lib: _lib.Gdr, g: int, gen: int) -> None:
    _finally(lib, gen, lib.close, g)


class _PinState:
    __slots__ = ("session", "h", "addr", "size", "base", "span", "keep", "open", "mapping",
                 "finalizer", "what", "__weakref__")

    def __init__(self, session: _SessionState, h: int, addr: int, size: int, base: int,
                 span: int, keep: Any, what: str) -> None:
        self.session = session
        self.h = h
        self.addr = addr
        self.size = size
        self.base = base
        self.span = span
        self.keep = keep
        self.what = what
        self.open = True
        self.mapping: Optional["weakref.ref[_MapState]"] = None
        self.finalizer = weakref.finalize(self, _unpin, session.lib, session.g, h, session.gen)

    def live_mapping(self) -> Optional["_MapState"]:
        """The mapping, until it is unmapped (while another thread closes it too)."""
        m = self.mapping() if self.mapping is not None else None
        return m if m is not None and not m.unmapped else None

    def close(self) -> None:
        """Unmaps (BufferError if views are alive) and unpins; under the session's lock."""
        if not self.open:
            return
        m = self.live_mapping()
        if m is not None:
            m.close()  # may wait for copies, letting the lock go: check again after it
            if not self.open:
                return
        self.open = False
        self.finalizer.detach()
        s = self.session
        rc = s.call(s.lib.unpin_buffer, s.g, self.h)
        self.keep = None
        if rc and s.gen == _lib.GENERATION.value:
            raise failed("gdr_unpin_buffer", self.what, rc, LOG_HINT)


def _unpin(lib: _lib.Gdr, g: int, h: int, gen: int) -> None:
    _finally(lib, gen, lib.unpin_buffer, g, h)


class _MapState:
    __slots__ = ("pin", "h", "va", "span", "start", "length", "end8", "open", "direct",
                 "unmapped", "inflight", "idle", "exported", "finalizer", "kind", "to_held",
                 "from_held", "to", "from_", "to_fast", "from_fast", "hc", "__weakref__")

    def __init__(self, pin: _PinState, va: int, kind: Union[MappingType, int]) -> None:
        s = pin.session
        self.pin = pin
        self.h = pin.h
        self.va = va
        self.span = pin.span
        self.start = va + (pin.addr - pin.base)
        self.length = pin.size
        self.end8 = pin.size - 8
        self.kind = kind
        self.open = True  # copies are let in
        self.unmapped = False  # the close is complete
        # Copies may rely on the GIL (see the module's documentation) only with a GIL and a
        # thread-safe library; `direct` also turns false at the close.
        self.direct = _lib.GIL and s.lib.thread_safe
        self.to_held, self.from_held = s.lib.copy_to_held, s.lib.copy_from_held
        self.to, self.from_ = s.lib.copy_to, s.lib.copy_from
        self.to_fast, self.from_fast = s.lib.copy_to_fast, s.lib.copy_from_fast
        self.hc = _lib.HANDLE(self.h)
        self.inflight = 0
        self.idle = threading.Condition(s.lock)
        self.exported = Exported()
        self.finalizer = weakref.finalize(self, _unmap, s.lib, s.g, self.h, va, self.span, s.gen)

    def close(self) -> None:
        """Unmaps, once no view is alive and no copy is in flight; under the session's lock.
        Returns once the mapping is gone, also when another thread is closing it."""
        if not self.open:
            while not self.unmapped:  # another thread's close waits for copies: wait with it
                self.idle.wait()
            return
        if self.exported.alive():
            raise BufferError("cannot close the mapping of %s: memoryviews of it, or objects "
                              "made from them (numpy arrays...), are alive; release them first "
                              "(del, memoryview.release())" % self.pin.what)
        self.open = self.direct = False
        try:
            while self.inflight:
                self.idle.wait()
            self.finalizer.detach()
            s = self.pin.session
            rc = s.call(s.lib.unmap, s.g, self.h, self.va, self.span)
        finally:
            self.unmapped = True
            self.idle.notify_all()
        if rc and s.gen == _lib.GENERATION.value:
            raise failed("gdr_unmap", self.pin.what, rc, LOG_HINT)

    def copy_counted(self, fn, call: str, addr: int, host, n: int) -> int:
        """A copy that releases the GIL (or runs without one): counted, so that an unmap waits
        for it."""
        with self.idle:
            if not self.open:
                raise closed("the mapping of %s" % self.pin.what, call)
            self.inflight += 1
        try:
            return fn(self.h, addr, host, n) if call == "gdr_copy_to_mapping" else \
                fn(self.h, host, addr, n)
        finally:
            with self.idle:
                self.inflight -= 1
                if not self.inflight:
                    self.idle.notify_all()


def _unmap(lib: _lib.Gdr, g: int, h: int, va: int, span: int, gen: int) -> None:
    _finally(lib, gen, lib.unmap, g, h, va, span)


def _copy_error(m: _MapState, call: str, offset: int, n: int, rc: int) -> GdrError:
    if m.pin.session.gen != _lib.GENERATION.value:
        return in_child("the mapping of %s" % m.pin.what)
    if not m.open:
        return closed("the mapping of %s" % m.pin.what, call)
    return failed(call, "%d bytes at offset %d of %s" % (n, offset, m.pin.what), rc, LOG_HINT)


def _range_error(m: _MapState, call: str, offset: int, n: int) -> GdrError:
    if not m.open:
        return closed("the mapping of %s" % m.pin.what, call)
    return GdrError(errno.EINVAL, "%s: %d bytes at offset %d lie outside the %d mapped bytes of %s"
                    % (call, n, offset, m.length, m.pin.what), call)


# ---- the public objects ----

class Mapping:
    """A CPU mapping of a :class:`Pin` (``gdr_map``): the pinned bytes, from offset 0 at the
    pinned address. Made by :meth:`Pin.map` (and by :func:`gdrapi_rs.pin`).

    ``write``/``read``/``readinto`` are the library's copies (``gdr_copy_to_mapping``: stores,
    then a store fence; ``gdr_copy_from_mapping``); ``view()`` is a ``memoryview`` of the same
    bytes for code that loads and stores itself (``numpy.frombuffer(m.view(), ...)``; on Python
    3.12+ ``memoryview(m)`` too). Stores through a view are not fenced: call :meth:`fence`
    before telling the GPU that they are there.
    """

    __slots__ = ("_s", "__weakref__")

    def __init__(self, state: _MapState) -> None:
        self._s = state

    def __repr__(self) -> str:
        s = self._s
        return "<gdrapi_rs.Mapping of %s: %d bytes at %#x, %s%s>" % (
            s.pin.what, s.length, s.start, getattr(s.kind, "name", s.kind),
            "" if s.open else ", closed")

    def __len__(self) -> int:
        return self._s.length

    @property
    def address(self) -> int:
        """The CPU address of the first byte (the pinned address's)."""
        return self._s.start

    @property
    def mapping_type(self) -> Union[MappingType, int]:
        """The mapping's type (write-combining on x86)."""
        return self._s.kind

    @property
    def closed(self) -> bool:
        """Whether the mapping was closed (unmapped)."""
        return not self._s.open

    # Each copy tries its straight path first: a mapping in `direct` state (open, with a GIL
    # and a thread-safe library), an offset in range, one call through PyDLL. Everything else
    # (refusals, large copies, the counted paths) is in the _copy_* functions below.

    def write(self, offset: int, data: Buffer) -> None:
        """Copies ``data`` (bytes-like) to the device memory at byte ``offset``
        (``gdr_copy_to_mapping``: when it returns, the bytes are on their way, ordered before
        any later store of this thread)."""
        m = self._s
        if type(data) is bytes:
            n = len(data)
            if m.direct and 0 <= offset and n <= m.length - offset and n <= _HELD_MAX:
                rc = m.to_fast(m.hc, _VOIDP(m.start + offset), data, _SIZE(n))
                if rc:
                    raise _copy_error(m, "gdr_copy_to_mapping", offset, n, rc)
                return
        else:
            data, n, _ = _lib.address_of(data, False)
        _copy_to(m, offset, data, n, False)

    def readinto(self, offset: int, buffer: Buffer) -> int:
        """Copies ``len(buffer)`` bytes from byte ``offset`` into ``buffer`` (a writable
        bytes-like object: ``bytearray``, ``memoryview``, numpy array) with
        ``gdr_copy_from_mapping``; returns the number of bytes."""
        addr, n, _keep = _lib.address_of(buffer, True)
        _copy_from(self._s, offset, addr, n, False)
        return n

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes from byte ``offset`` (``gdr_copy_from_mapping``)."""
        m = self._s
        if m.direct and 0 <= offset and 0 <= size <= m.length - offset and size <= _HELD_MAX:
            buf = (_CHARS[size] if size <= 64 else ctypes.c_char * size)()
            rc = m.from_fast(m.hc, buf, _VOIDP(m.start + offset), _SIZE(size))
            if rc:
                raise _copy_error(m, "gdr_copy_from_mapping", offset, size, rc)
            return buf.raw
        _check_range(m, "gdr_copy_from_mapping", offset, size, False)
        buf = (ctypes.c_char * size)()
        _copy_from(m, offset, buf, size, False)
        return buf.raw

    def write_u64(self, offset: int, value: int) -> None:
        """Stores the 64-bit unsigned ``value`` (native byte order) at byte ``offset`` in one
        8-byte store, then a store fence: a flag or doorbell the GPU reads. The address must be
        8-byte aligned."""
        m = self._s
        a = m.start + offset
        if m.direct and 0 <= offset <= m.end8 and not a & 7:
            rc = m.to_fast(m.hc, _VOIDP(a), value.to_bytes(8, _ORDER), _N8)
            if rc:
                raise _copy_error(m, "gdr_copy_to_mapping", offset, 8, rc)
            return
        _copy_to(m, offset, value.to_bytes(8, _ORDER), 8, True)

    def read_u64(self, offset: int) -> int:
        """The 64-bit unsigned value (native byte order) at byte ``offset``, loaded in one
        8-byte load through PCIe: what the GPU wrote there. The address must be 8-byte
        aligned."""
        m = self._s
        a = m.start + offset
        v = _U64x1()
        if m.direct and 0 <= offset <= m.end8 and not a & 7:
            rc = m.from_fast(m.hc, v, _VOIDP(a), _N8)
            if rc:
                raise _copy_error(m, "gdr_copy_from_mapping", offset, 8, rc)
        else:
            _copy_from(m, offset, _addressof(v), 8, True)
        return v[0]

    def fence(self) -> None:
        """Orders this thread's earlier stores through :meth:`view` before its later ones: a
        one-byte read through the mapping, after which the library issues its store fence
        (about a microsecond over PCIe). Call it between writing data through a view and
        writing the flag that tells the GPU."""
        self.read(0, 1)

    def view(self) -> memoryview:
        """A writable ``memoryview`` (format ``'B'``) of the mapped bytes: plain loads and
        stores, no fence (see :meth:`fence`). It keeps the mapping alive; closing the mapping
        while it is alive raises ``BufferError``."""
        m = self._s
        s = m.pin.session
        with s.lock:
            if not m.open or not s.open:
                raise closed("the mapping of %s" % m.pin.what)
            if s.gen != _lib.GENERATION.value:
                raise in_child("the mapping of %s" % m.pin.what)
            return m.exported.view(m, m.start, m.length)

    def __buffer__(self, flags: int) -> memoryview:  # PEP 688 (Python 3.12+): memoryview(m)
        return self.view()

    def close(self) -> None:
        """Unmaps (``gdr_unmap``). BufferError while views are alive; a second close does
        nothing."""
        m = self._s
        with m.pin.session.lock:
            m.close()

    unmap = close

    def __enter__(self) -> "Mapping":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _copy_to(m: _MapState, offset: int, data, n: int, u64: bool) -> None:
    """A copy to the mapping off its straight path: refusals, large copies (GIL released,
    counted), the serialized library, no GIL."""
    call = "gdr_copy_to_mapping"
    _check_range(m, call, offset, n, u64)
    if n <= _HELD_MAX and m.direct:
        rc = m.to_held(m.h, m.start + offset, data, n)
    else:
        rc = m.copy_counted(m.to, call, m.start + offset, data, n)
    if rc:
        raise _copy_error(m, call, offset, n, rc)


def _copy_from(m: _MapState, offset: int, host, n: int, u64: bool) -> None:
    """A copy from the mapping off its straight path."""
    call = "gdr_copy_from_mapping"
    _check_range(m, call, offset, n, u64)
    if n <= _HELD_MAX and m.direct:
        rc = m.from_held(m.h, host, m.start + offset, n)
    else:
        rc = m.copy_counted(m.from_, call, m.start + offset, host, n)
    if rc:
        raise _copy_error(m, call, offset, n, rc)


def _check_range(m: _MapState, call: str, offset: int, n: int, u64: bool) -> None:
    if u64:
        if offset < 0 or offset > m.length - 8 or (m.start + offset) & 7 or not m.open:
            raise _u64_error(m, call, offset)
    elif offset < 0 or n < 0 or n > m.length - offset or not m.open:
        raise _range_error(m, call, offset, n)


def _u64_error(m: _MapState, call: str, offset: int) -> GdrError:
    if not m.open:
        return closed("the mapping of %s" % m.pin.what, call)
    if 0 <= offset <= m.length - 8:
        return GdrError(errno.EINVAL, "%s: offset %d is not 8-byte aligned (address %#x): a "
                        "64-bit access there would be split" % (call, offset, m.start + offset),
                        call)
    return _range_error(m, call, offset, 8)


class Pin:
    """Pinned device memory (``gdr_mh_t``), made by :meth:`Session.pin` or
    :func:`gdrapi_rs.pin`; unpinned by ``close()``, at the end of its ``with`` block or when
    garbage collected. It keeps the pinned object (a tensor, an array) alive until then.

    The pinned range is the object's bytes widened to whole GPU pages (64 KiB), the pages the
    driver pins anyway, so that any address can be mapped. ``write``, ``read``, ``readinto``,
    ``write_u64``, ``read_u64``, ``fence`` and ``view`` are those of its :attr:`mapping`.
    """

    __slots__ = ("_p", "_mapping", "__weakref__")

    def __init__(self, state: _PinState) -> None:
        self._p = state
        self._mapping: Optional[Mapping] = None

    def __repr__(self) -> str:
        p = self._p
        return "<gdrapi_rs.Pin of %s%s%s>" % (p.what, ", mapped" if p.live_mapping() else "",
                                              "" if p.open else ", closed")

    @property
    def addr(self) -> int:
        """The device address of the object's first byte."""
        return self._p.addr

    @property
    def size(self) -> int:
        """The object's bytes (what the mapping shows)."""
        return self._p.size

    def __len__(self) -> int:
        return self._p.size

    @property
    def closed(self) -> bool:
        """Whether the pin was closed (unpinned)."""
        return not self._p.open

    @property
    def obj(self) -> Any:
        """The pinned object (None for an address, or once closed)."""
        k = self._p.keep
        return None if k is None else k[0]

    def _state(self, call: str) -> _PinState:
        p = self._p
        if not p.open or not p.session.open:
            raise closed("the pin of %s" % p.what, call)
        return p

    def info(self) -> PinInfo:
        """What the library reports of the pin (``gdr_get_info_v2``)."""
        p = self._p
        s = p.session
        i = _lib.gdr_info_v2_t()
        with s.lock:
            self._state("gdr_get_info_v2")
            rc = s.call(s.lib.get_info_v2, s.g, p.h, ctypes.byref(i))
        if rc:
            raise failed("gdr_get_info_v2", p.what, rc, LOG_HINT)
        return PinInfo(i.va, i.mapped_size, i.page_size, bool(i.mapped), bool(i.wc_mapping),
                       _mapping_type(i.mapping_type))

    @property
    def invalidated(self) -> bool:
        """Whether the driver invalidated the pin because its memory was freed
        (``gdr_get_callback_flag``; gdrdrv's non-persistent mode only)."""
        p = self._p
        s = p.session
        flag = ctypes.c_int(0)
        with s.lock:
            self._state("gdr_get_callback_flag")
            rc = s.call(s.lib.get_callback_flag, s.g, p.h, ctypes.byref(flag))
        if rc:
            raise failed("gdr_get_callback_flag", p.what, rc, LOG_HINT)
        return bool(flag.value)

    def map(self) -> Mapping:
        """Maps the pinned pages into the process (``gdr_map``). One mapping per pin at a time:
        a second gives EAGAIN, as the library does."""
        p = self._p
        s = p.session
        with s.lock:
            self._state("gdr_map")
            if p.live_mapping() is not None:
                raise GdrError(errno.EAGAIN, "gdr_map(%s): already mapped: one mapping per pin "
                               "(use Pin.mapping)" % p.what, "gdr_map")
            va = ctypes.c_void_p()
            rc = s.call(s.lib.map, s.g, p.h, ctypes.byref(va), p.span)
            if rc:
                raise failed("gdr_map", "%s, %d bytes" % (p.what, p.span), rc,
                             _map_hint(s, rc))
            i = _lib.gdr_info_v2_t()
            kind: Union[MappingType, int] = MappingType.NONE
            if s.call(s.lib.get_info_v2, s.g, p.h, ctypes.byref(i)) == 0:
                kind = _mapping_type(i.mapping_type)
            m = _MapState(p, va.value or 0, kind)
            p.mapping = weakref.ref(m)
            self._mapping = Mapping(m)
            return self._mapping

    @property
    def mapping(self) -> Optional[Mapping]:
        """The pin's live mapping, or None."""
        m = self._mapping
        return m if m is not None and not m.closed else None

    def _mapped(self) -> Mapping:
        m = self._mapping
        if m is None or m.closed:
            p = self._p
            if not p.open:
                raise closed("the pin of %s" % p.what)
            raise GdrError(errno.EINVAL, "%s is pinned but not mapped: call map() first" % p.what)
        return m

    def write(self, offset: int, data: Buffer) -> None:
        """:meth:`Mapping.write` of the pin's mapping."""
        (self._mapping or self._mapped()).write(offset, data)

    def read(self, offset: int, size: int) -> bytes:
        """:meth:`Mapping.read` of the pin's mapping."""
        return (self._mapping or self._mapped()).read(offset, size)

    def readinto(self, offset: int, buffer: Buffer) -> int:
        """:meth:`Mapping.readinto` of the pin's mapping."""
        return (self._mapping or self._mapped()).readinto(offset, buffer)

    def write_u64(self, offset: int, value: int) -> None:
        """:meth:`Mapping.write_u64` of the pin's mapping."""
        (self._mapping or self._mapped()).write_u64(offset, value)

    def read_u64(self, offset: int) -> int:
        """:meth:`Mapping.read_u64` of the pin's mapping."""
        return (self._mapping or self._mapped()).read_u64(offset)

    def fence(self) -> None:
        """:meth:`Mapping.fence` of the pin's mapping."""
        self._mapped().fence()

    def view(self) -> memoryview:
        """:meth:`Mapping.view` of the pin's mapping."""
        return self._mapped().view()

    def __buffer__(self, flags: int) -> memoryview:
        return self._mapped().view()

    def close(self) -> None:
        """Unmaps (BufferError while views of the mapping are alive: nothing changes) and
        unpins (``gdr_unpin_buffer``); lets the pinned object go. A second close does
        nothing."""
        p = self._p
        with p.session.lock:
            p.close()

    unpin = close

    def __enter__(self) -> "Pin":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _map_hint(s: _SessionState, rc: int) -> str:
    if rc == errno.EINVAL:
        return ("the backend cannot map these pages (with gdrdrv and DMA-BUF, device memory is "
                "mapped from a 64 KiB aligned pin, which Session.pin makes); " + LOG_HINT)
    return LOG_HINT


def _pin_hint(s: _SessionState, rc: int) -> str:
    if rc != errno.EINVAL:
        return LOG_HINT
    if s.backend == Backend.VULKAN:
        return ("the Vulkan import (GDRAPI_USE_VULKAN=1, no gdrdrv module) maps only memory from "
                "cuMemCreate exportable as a POSIX file descriptor: with PyTorch set "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True before CUDA starts (the "
                "default allocator's cudaMalloc memory cannot be exported), or allocate with "
                "gdrapi_rs.Allocator; a pin must also lie in one allocation; " + LOG_HINT)
    return ("not device memory of this process, freed, or spanning allocations; " + LOG_HINT)


class Session:
    """A session of gdrcopy's library (``gdr_open``): the backend (gdrdrv, DMA-BUF, or the
    Vulkan import of ``GDRAPI_USE_VULKAN=1``) that pins and maps device memory.

    ``close()``, the end of its ``with`` block or garbage collection closes it; closing it
    closes its pins and their mappings first (``BufferError``, and nothing closed, while
    memoryviews of one of them are alive). Raises :class:`GdrError` (ENODEV) when no backend
    can map GPU memory here."""

    __slots__ = ("_s", "__weakref__")

    def __init__(self) -> None:
        lib = _lib.gdr()
        with lib.serial:
            g = lib.open()
        if not g:
            raise GdrError(errno.ENODEV,
                           "gdr_open() failed: no backend can map GPU memory here (load the "
                           "gdrdrv module; on machines without it, set GDRAPI_USE_VULKAN=1 "
                           "before the process starts; `gdrcopy doctor` says what is missing; "
                           + LOG_HINT + ")", "gdr_open")
        self._s = _SessionState(lib, g)
        try:
            self._s.backend = ctypes.c_int.from_address(g + 40).value
        except (ValueError, OSError):
            self._s.backend = None

    def __repr__(self) -> str:
        s = self._s
        return "<gdrapi_rs.Session %s%s>" % (self.backend.name if self.backend is not None
                                             else "?", "" if s.open else ", closed")

    @property
    def closed(self) -> bool:
        """Whether the session was closed."""
        return not self._s.open

    @property
    def backend(self) -> Optional[Backend]:
        """The backend ``gdr_open`` chose (``struct gdr``'s ``cache_backend``, the field
        gdrcopy's own tests read)."""
        b = self._s.backend
        try:
            return Backend(b) if b is not None else None
        except ValueError:
            return None

    def _open(self, call: str) -> _SessionState:
        s = self._s
        if not s.open:
            raise closed("the session", call)
        if s.gen != _lib.GENERATION.value:
            raise in_child("the session")
        return s

    def driver_version(self) -> tuple:
        """The gdrdrv interface version the backend provides (``gdr_driver_get_version``)."""
        major, minor = ctypes.c_int(), ctypes.c_int()
        with self._s.lock:
            s = self._open("gdr_driver_get_version")
            rc = s.call(s.lib.driver_get_version, s.g, ctypes.byref(major), ctypes.byref(minor))
        if rc:
            raise failed("gdr_driver_get_version", "", rc, LOG_HINT)
        return major.value, minor.value

    def uses_dma_buf(self) -> bool:
        """Whether the session maps through the CUDA driver's DMA-BUF export
        (``GDR_ATTR_USING_DMA_BUF_MMAP``)."""
        v = ctypes.c_int()
        with self._s.lock:
            s = self._open("gdr_get_attribute")
            rc = s.call(s.lib.get_attribute, s.g, 3, ctypes.byref(v))
        if rc:
            raise failed("gdr_get_attribute", "GDR_ATTR_USING_DMA_BUF_MMAP", rc, LOG_HINT)
        return bool(v.value)

    def pin(self, obj: Any, size: Optional[int] = None, *, map: bool = True) -> Pin:
        """Pins device memory: ``obj`` is an object with ``__cuda_array_interface__`` (a
        PyTorch or CuPy tensor, a Numba array, a :class:`HostWritten`) or ``__dlpack__``
        (PyTorch, JAX, CuPy), which must be C-contiguous, or a device address (an int) with
        ``size``. ``size`` limits an object to its first bytes. With ``map`` (the default) the
        pin is mapped too (:attr:`Pin.mapping`).

        The pin keeps ``obj`` alive until it is closed. Memory freed behind a pin of a bare
        address stays what the backend makes of it: gdrdrv (persistent mode, the default) and
        the Vulkan import keep the pages until the unpin, and copies through the mapping reach
        them; the DMA-BUF backend holds its export open until then; in gdrdrv's
        non-persistent mode the pin is invalidated (:attr:`Pin.invalidated`) and its mapping
        must not be touched again (SIGBUS).
        """
        d = describe(obj, size)
        base = d.ptr & ~_PAGE_MASK
        end = (d.ptr + d.nbytes + _PAGE_MASK) & ~_PAGE_MASK
        what = "%s at %#x+%d" % ("address" if d.kind == "pointer" else type(obj).__name__,
                                 d.ptr, d.nbytes)
        h = _lib.HANDLE(0)
        with self._s.lock:
            s = self._open("gdr_pin_buffer")
            rc = s.call(s.lib.pin_buffer, s.g, base, end - base, 0, 0, ctypes.byref(h))
            if rc:
                raise failed("gdr_pin_buffer", "%s, pinned as the GPU pages %#x+%d"
                             % (what, base, end - base), rc, _pin_hint(s, rc))
            keep = (None if d.kind == "pointer" else obj, d.keep)
            state = _PinState(s, h.value, d.ptr, d.nbytes, base, end - base, keep, what)
            s.pins.add(state)
        p = Pin(state)
        if map:
            try:
                p.map()
            except BaseException:
                p.close()
                raise
        return p

    def close(self) -> None:
        """Closes every pin of the session (and its mapping), then the session (``gdr_close``).
        ``BufferError``, with nothing closed, while memoryviews of one of its mappings are
        alive. A second close does nothing."""
        s = self._s
        first: Optional[BaseException] = None
        with s.lock:
            if not s.open:
                while not s.done:  # another thread is closing it: wait for the end
                    s.idle.wait()
                return
            pins = [p for p in list(s.pins) if p.open]
            for p in pins:
                m = p.live_mapping()
                if m is not None and m.exported.alive():
                    m.close()  # raises BufferError, before anything was closed
            s.open = False  # no new pin, map or view from here on
            rc = 0
            try:
                for p in pins:
                    try:
                        p.close()
                    except GdrError as e:
                        first = first or e
                s.finalizer.detach()
                if s.gen == _lib.GENERATION.value:
                    with s.lib.serial:
                        rc = s.lib.close(s.g)
            finally:
                s.done = True
                s.idle.notify_all()
        if first is not None:
            raise first
        if rc:
            raise failed("gdr_close", "", rc, LOG_HINT)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_default: Optional[Session] = None
_default_lock = threading.Lock()


def default_session() -> Session:
    """The process's shared session, opened at the first call; :func:`gdrapi_rs.pin` uses it.
    It stays open (a pin made with it keeps it in any case)."""
    global _default
    with _default_lock:
        if _default is None or _default.closed or _default._s.gen != _lib.GENERATION.value:
            _default = Session()
        return _default


def pin(obj: Any, size: Optional[int] = None, *, session: Optional[Session] = None) -> Pin:
    """Pins and maps device memory in one call: a PyTorch or CuPy tensor (anything with
    ``__cuda_array_interface__`` or ``__dlpack__``), or a device address with ``size``.
    Returns a :class:`Pin` whose ``write``/``read``/``readinto``/``write_u64``/``read_u64``
    copy through its mapping and whose ``view()`` is a ``memoryview`` of it.

    ``session`` defaults to :func:`default_session`. See :meth:`Session.pin`."""
    return (session or default_session()).pin(obj, size)
