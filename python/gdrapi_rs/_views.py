"""Memory views of mapped bytes that cannot outlive the mapping.

A view is a ``memoryview`` of a ctypes array placed on the mapped bytes. The array is of a
subclass that holds its owner (what releases the memory), so a memoryview, a
``numpy.frombuffer`` array or anything else made from it keeps the memory mapped. The owner
keeps only a weak reference to the array (no cycle: the memory is released as soon as the
owner and the last view are gone) and counts the array's references to tell whether views
exist: closing with views alive raises ``BufferError``, as ``mmap.close()`` does, instead of
leaving them pointing at unmapped memory.
"""

from __future__ import annotations

import ctypes
import functools
import sys
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

    def count(self) -> int:
        """How many views (or objects made from them) are alive."""
        a = self._ref() if self._ref is not None else None
        if a is None:
            return 0
        # What is not a view: `a` here and getrefcount's argument.
        return sys.getrefcount(a) - 2
