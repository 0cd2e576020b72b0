"""Automatic GC paused and resumed, reference counted across threads and nesting.

Automatic GC is process-wide in CPython: pausing it in one thread pauses it for every thread. GC
is turned off by the first pause and restored to exactly what it was (on, or off if you had
disabled it) when the last pause ends, even when the body raised. A row may hold a pause of its own
(``@gc_controlled``): its close, or its healing, ends it (:mod:`gnnmon.record.row`).
"""

from __future__ import annotations

import gc
import threading
from typing import Any

_LOCK = threading.RLock()
_depth = 0  # pauses counted by pause_gc()/resume_gc() pairs (gc_paused blocks)
_owners: set[Any] = set()  # pauses held by an owner (a decorated call's row), each ended once
_was_enabled = True


def pause_gc(owner: Any = None) -> None:
    """Turn automatic GC off (reference counted); pair every call with :func:`resume_gc` (with the
    same ``owner`` if one is given: an owner's pause ends once, however often it is resumed)."""
    global _depth, _was_enabled
    with _LOCK:
        if not _depth and not _owners:
            _was_enabled = gc.isenabled()
        # Counted before GC is turned off: a signal handler's pause/resume nested at any point in
        # between sees a pause already in force and leaves the saved state alone.
        if owner is None:
            _depth += 1
        else:
            _owners.add(owner)
        gc.disable()


def resume_gc(owner: Any = None) -> None:
    """End one :func:`pause_gc` (``owner``'s, if given: a no-op where it is not in force, ended
    already or never counted); the last one restores automatic GC to what it was before."""
    global _depth
    with _LOCK:
        enable = _was_enabled  # read before the count drops: a nested pause would overwrite it
        if owner is not None:
            if owner not in _owners:  # an interrupted pause that was never counted leaves GC as it is
                return
            if not _depth and len(_owners) == 1 and enable and not gc.isenabled():
                gc.enable()
            _owners.discard(owner)  # last: a resume interrupted before it runs again whole
            return
        if _depth == 0:
            raise RuntimeError("resume_gc() without a matching pause_gc()")
        _depth -= 1
        if not _depth and not _owners and enable and not gc.isenabled():
            gc.enable()


def pauses() -> int:
    """Pauses in force now (0: none, GC as you left it)."""
    return _depth + len(_owners)
