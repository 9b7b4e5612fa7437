"""Memory views of mapped bytes that cannot outlive the mapping.

A view is a ``memoryview`` of a ctypes array placed on the mapped bytes. The array is of a
subclass that holds its owner (what releases the memory), so a memoryview, a
``numpy.frombuffer`` array or anything else made from it keeps the memory mapped. The array
is never handed out: only memoryviews hold it (through their managed buffer), and the owner
keeps a weak reference to it. So the array is alive exactly while a view is: closing then
raises ``BufferError``, as ``mmap.close()`` does, instead of leaving views pointing at
unmapped memory. No reference counting is read (its values differ between Python versions),
and no cycle delays a release: the memory goes as soon as the owner and the last view do.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import weakref
from typing import Any, Optional


@functools.lru_cache(maxsize=256)
def _array_type(n: int) -> Any:
    return type("MappedBytes", (ctypes.c_ubyte * n,), {})


class Exported:
    """The ctypes array behind the views of an owner's bytes."""

    __slots__ = ("_ref",)

    def __init__(self) -> None:
        self._ref: Optional["weakref.ref[Any]"] = None

    def view(self, owner: object, addr: int, n: int) -> memoryview:
        """A memoryview of the ``n`` bytes at ``addr``, keeping ``owner`` alive."""
        a = self._ref() if self._ref is not None else None
        if a is None:
            a = _array_type(n).from_address(addr)
            a.owner = owner
            self._ref = weakref.ref(a)
        return memoryview(a).cast("B")

    def alive(self) -> bool:
        """Whether a view (or an object made from one) is alive. A view dropped into a
        reference cycle counts until the collector runs: one collection is tried first."""
        if self._ref is None or self._ref() is None:
            return False
        gc.collect()
        return self._ref() is not None
