"""Signals on the step's path: a Ctrl-C raised once gnnmon's state is whole, and signal handlers
that call decorated functions while gnnmon's own code is interrupted.

Signal handlers run on the main thread, between two bytecodes of whatever it runs — gnnmon's
bookkeeping included. Two rules follow:

* **Ctrl-C waits for a consistent state.** gnnmon's SIGINT handler raises ``KeyboardInterrupt``
  at once, except inside a *held section* (:func:`hold` ... :func:`release`: the set-up and the
  close of a row, a scope, a phase, a GC pause, a run) or a function marked :func:`releasing`
  (one that always ends in a release: a wrapper, a scope's ``__exit__``), where it only notes it;
  :func:`release` raises it as the outermost section ends, when the state is whole again. A
  decorated call's set-up ends just before the user's function is called and its close just
  before it returns, so a Ctrl-C is raised at the latest when the decorated call returns to its
  caller, however small the calls (a section lasts microseconds). The user's code is never held;
  gnnmon's reports and loading are not held either.
* **A handler that interrupts gnnmon runs its decorated calls unmeasured.** A decorated call
  made while a held section is open on the main thread, or while a collection that gnnmon's code
  started runs (a collection can start inside any allocation, even inside CPython's
  ``ContextVar.set``, which before Python 3.12 a second ``set`` made meanwhile corrupts:
  CPython gh-148891), could only measure by changing the state the interrupted code is changing:
  it runs as a plain call, counted in :data:`HELD` (``unmeasured``), with no row. The collection
  is marked by :data:`MARK_GC`, a GC callback of C alone: no handler can run before it.

A held section left open by an exception (another handler's ``TimeoutError`` raised between two
of gnnmon's bytecodes) is found and closed by the next decorated call, scope, phase or GC pause,
or by the next Ctrl-C: the frame that opened it (``HELD.holder``) is no longer on the stack.
Until then that frame, and the arguments of the call it belongs to, stay alive.

gnnmon's SIGINT handler is installed at the first held section on the main thread (not at
import), and only over Python's default one: a SIGINT handler of your own stays in place.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any, TypeVar

from gnnmon.errors import raised_by_handler

__all__ = ["HELD", "IN_GC", "MAIN_THREAD", "MARK_GC", "held_section", "hold", "raised_by_handler", "reentered",
           "release", "releasing", "settle"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

_get_ident = threading.get_ident
_getframe = sys._getframe
MAIN_THREAD = threading.main_thread().ident
"""The main thread's ident: the only thread Python runs signal handlers on."""
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


IN_GC = threading.local()
"""Non-empty ``__dict__`` while a collection runs on the reading thread: :data:`MARK_GC` fills it
as the collection starts, gnnmon's own GC callback (:mod:`gnnmon.record.gc_log`) empties it as it
stops."""
MARK_GC = functools.partial(setattr, IN_GC)
"""The first of gnnmon's ``gc.callbacks``, called ``(phase, info)``: ``IN_GC.<phase> = info``, in C
(``functools.partial``, ``setattr``, the thread-local's own setter), so that no bytecode runs, and
no signal handler with it, before the collection is marked."""


class _Held:
    __slots__ = ("depth", "holder", "pending", "installed", "unmeasured", "later")

    def __init__(self) -> None:
        self.depth = 0  # held sections open on the main thread
        self.holder: FrameType | None = None  # the frame that opened the outermost one
        self.pending = False  # an interrupt arrived during one
        self.installed = False
        self.unmeasured = 0  # decorated calls a signal handler made while gnnmon was interrupted
        self.later: Callable[[], Any] | None = None  # a handler's work that waits for the state to be whole


HELD = _Held()


def holding_or_releasing(frame: FrameType | None) -> bool:
    """Whether a signal handler called at ``frame`` interrupted gnnmon's own bookkeeping (a held
    section, or a function that ends in a release): its work must wait for :func:`release`."""
    return _releases_soon(frame) or bool(HELD.depth) and _holding(frame)


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    if holding_or_releasing(frame):
        HELD.pending = True
        return
    HELD.depth, HELD.holder = 0, None  # a section an exception left open holds nothing
    signal.default_int_handler(signum, frame)


_RELEASING: set[CodeType] = set()
"""Code of the functions that always end in :func:`release` (see :func:`releasing`)."""


def releasing(func: F) -> F:
    """Mark ``func`` as one that holds and always releases before it returns (a wrapper, a scope's
    ``__enter__``/``__exit__``): a Ctrl-C that lands in it outside its held section, at its entry
    say, is held too, and raised by its release, so that the exit of a scope is never skipped."""
    _RELEASING.add(func.__code__)
    return func


def _releases_soon(frame: FrameType | None) -> bool:
    """Whether the main thread runs a function marked :func:`releasing` (or :func:`release` past
    its count). Under a Python tracer (a debugger) a handler can run at any line: the tracer's
    frame stands for the frame it traces."""
    if frame is None:
        return False
    back = frame.f_back
    if back is not None and back.f_trace is not None and frame.f_code is getattr(back.f_trace, "__code__", None):
        frame = back
    return frame.f_code in _RELEASING


def _install() -> None:
    HELD.installed = True  # tried once: a handler of the user's stays theirs
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _on_sigint)
    except (ValueError, OSError) as exc:  # not the main interpreter, or no signals here
        if raised_by_handler(exc):  # a handler's TimeoutError is an OSError: the caller's
            raise


def hold(up: int = 1) -> bool:
    """Start a held section in the frame ``up`` levels above this one (which ends it before it
    returns); returns whether it holds (on the main thread only)."""
    if _get_ident() != MAIN_THREAD:
        return False
    held = HELD
    if held.depth:
        held.depth += 1
        return True
    if not held.installed:
        _install()
    held.holder = _getframe(up)
    held.depth = 1
    return True


def release(held: bool, undo: Callable[[], Any] | None = None, value: T = None) -> T:  # type: ignore[assignment]
    """End a held section and return ``value`` (``return release(held, value=x)``: nothing of
    gnnmon's runs after it). The outermost section raises a Ctrl-C that came during it, after
    ``undo()`` (for a section that opened something the caller will not close once this raises: a
    scope's ``__enter__``)."""
    if held:
        state = HELD
        depth = state.depth = state.depth - 1
        if not depth:
            state.holder = None
            if state.later is not None or state.pending:
                _outermost_released(undo)
    return value


def _outermost_released(undo: Callable[[], Any] | None) -> None:
    """The outermost held section has ended: a SIGTERM that came during it is acted on, then a
    Ctrl-C that came during it is raised, after ``undo()``."""
    later = HELD.later
    if later is not None:  # a SIGTERM that came during the section (gnnmon.record.sigterm)
        HELD.later = None
        later()
    if HELD.pending and not HELD.depth:
        if undo is not None:
            undo()
        HELD.pending = False
        raise KeyboardInterrupt


def settle(undo: Callable[[], Any] | None = None) -> None:
    """The end of a function marked :func:`releasing` that held no section (its bookkeeping all in
    its own frame, where a Ctrl-C or a SIGTERM that lands waits): what a handler left for the
    state to be whole runs now, as :func:`release` runs it at the end of the outermost section —
    none while a section is held (its release does it), and only on the main thread. Call it
    only where ``HELD.pending or HELD.later`` (one attribute read on the step's path)."""
    if HELD.depth or threading.get_ident() != MAIN_THREAD:
        return
    later = HELD.later
    if later is not None:  # a SIGTERM that came meanwhile (gnnmon.record.sigterm)
        HELD.later = None
        later()
    if HELD.pending:
        HELD.pending = False  # first: the undo may end in this check again
        if undo is not None:
            undo()
        raise KeyboardInterrupt


def on_stack(target: FrameType | None, frame: FrameType | None) -> bool:
    """Whether ``target`` is ``frame`` or one below it: still running on this thread."""
    while frame is not None:
        if frame is target:
            return True
        frame = frame.f_back
    return False


def _holding(frame: FrameType | None) -> bool:
    """Whether the frame that holds the open sections runs at or below ``frame`` (one that has
    returned left them open by an exception)."""
    return on_stack(HELD.holder, frame)


def _in_package(frame: FrameType | None) -> bool:
    """Whether ``frame`` or one below it runs gnnmon's code."""
    while frame is not None:
        if frame.f_code.co_filename.startswith(_PACKAGE):
            return True
        frame = frame.f_back
    return False


def _heal() -> None:
    HELD.depth = 0
    HELD.holder = None
    IN_GC.__dict__.clear()


def interrupted(skip: int = 2) -> bool:
    """Whether this call comes from a signal handler that interrupted gnnmon's own code (a held
    section, or gnnmon's GC callback) on the main thread: its decorated calls, scopes and phases
    run unmeasured. A held section that an exception left open (the frame that held it has
    returned) is closed here. ``skip``: gnnmon's frames from this one to the user's caller."""
    if threading.get_ident() != MAIN_THREAD:
        return False
    frame = sys._getframe(skip)
    if HELD.depth and _holding(frame) or IN_GC.__dict__ and _in_package(frame):
        HELD.unmeasured += 1
        return True
    _heal()  # left open by an exception: the frame that held has returned
    return False


def reentered(up: int = 0) -> bool:
    """:func:`interrupted` for the entry of a row's bracket or a GC pause, checked only while a
    held section or the GC callback is open (the common case costs one attribute read); one that
    gnnmon's own code enters in its held section (the Lightning callback's phases) is not.
    ``up``: gnnmon's frames between the entry and this call."""
    if not (HELD.depth or IN_GC.__dict__) or sys._getframe(2 + up).f_code.co_filename.startswith(_PACKAGE):
        return False
    return interrupted(3 + up)


_RELEASING.update((hold.__code__, release.__code__, _outermost_released.__code__, settle.__code__))


class held_section:
    """``with held_section():`` — :func:`hold` and :func:`release` around a block."""

    __slots__ = ("_held",)

    @releasing
    def __enter__(self) -> None:
        self._held = hold(2)  # held in the frame of the with statement

    @releasing
    def __exit__(self, *exc: Any) -> None:
        release(self._held)
