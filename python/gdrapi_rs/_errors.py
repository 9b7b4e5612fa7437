"""GdrError: what a call of the C libraries returned (a positive errno), with the call named and
what to do about it."""

from __future__ import annotations

import errno as _errno
import os

#: Appended to refusals whose detailed reason only the library's log has.
LOG_HINT = "GDRCOPY_ENABLE_LOGGING=1 in the environment makes the library log why"


class GdrError(OSError):
    """A call of libgdrapi.so.2 or libgdrapi_ext.so.0 failed, or an object was used after it
    was closed.

    An :class:`OSError`: ``errno`` is the value the C call returned (``errno.EINVAL`` for a
    refused argument, handle or range, ``errno.ENODEV`` for no backend or no such device,
    ...), ``strerror`` says which call failed, on what, and what to do. ``call`` is the C
    function's name (``None`` for a refusal made in Python, such as a use after close).
    """

    call: str | None

    def __init__(self, errno: int, message: str, call: str | None = None) -> None:
        super().__init__(errno, message)
        self.call = call


def _name(e: int) -> str:
    return "%s (%s)" % (os.strerror(e), _errno.errorcode.get(e, "errno %d" % e))


def failed(call: str, what: str, rc: int, hint: str = "") -> GdrError:
    """The error of a C call that returned ``rc``."""
    text = "%s(%s): %s" % (call, what, _name(rc))
    if hint:
        text += "; " + hint
    return GdrError(rc, text, call)


def closed(what: str, call: str | None = None) -> GdrError:
    """A use of an object that was closed (EINVAL, what the library answers for a stale
    handle)."""
    return GdrError(_errno.EINVAL, "%s is closed" % what, call)


def in_child(what: str) -> GdrError:
    """A use of an object made by the parent of a forked process (EACCES, as the library
    answers there)."""
    return GdrError(_errno.EACCES,
                    "%s was made in the parent process before a fork: its mappings are absent "
                    "here; open a new one in this process" % what)
