"""Ctrl-C held while gnnmon changes its own state, and raised in the user's code instead.

A ``KeyboardInterrupt`` raised between two steps of gnnmon's bookkeeping (automatic GC turned off
but the pause not yet counted, a row made current but its measurements not yet entered) would
leave that half-done state behind for the rest of the process: GC off, a peak window open, a
stale current row that becomes the ``parent`` of every later row. So gnnmon's SIGINT handler
never raises inside gnnmon's own step-path code:

* inside a held section (:func:`hold` ... :func:`release`: the set-up and the close of a row, a
  scope, a phase, a GC pause, a run), the interrupt is noted, and sent again when the section ends;
* in gnnmon's step-path code outside one (the few bytecodes between a section and the return to
  the caller), it is sent again;

each time a millisecond later (:data:`AGAIN_AFTER_S`), from a short-lived thread, so that it is
raised once the main thread runs code that is not gnnmon's step path: the user's function, the
loop that called it (a ``time.sleep`` there is interrupted as usual). The user's code is never held; gnnmon's reports and loading
are not held either (a long report stays interruptible).

The handler is installed at the first held section on the main thread (not at import), and only
over Python's default handler: a SIGINT handler of your own stays in place and is called as usual
(then nothing is held). Signals reach Python code on the main thread only.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import Any

_MAIN = threading.main_thread().ident
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_NOT_HELD = tuple(os.path.join(_PACKAGE, p) for p in (
    "report" + os.sep, os.path.join("record", "load.py"), os.path.join("record", "job.py"), "cli.py"))
"""gnnmon code a Ctrl-C may interrupt at once: reading and reporting, never on a step's path."""


AGAIN_AFTER_S = 0.001


class _Held:
    __slots__ = ("depth", "pending", "installed")

    def __init__(self) -> None:
        self.depth = 0  # held sections open on the main thread
        self.pending = False  # an interrupt arrived during one
        self.installed = False


HELD = _Held()


def _in_step_code(frame: FrameType | None) -> bool:
    """Whether the main thread is in gnnmon's step-path code (a tracer's frame, as under a
    debugger or coverage, stands for the frame it traces)."""
    if frame is None:
        return False
    back = frame.f_back
    if back is not None and back.f_trace is not None and frame.f_code is getattr(back.f_trace, "__code__", None):
        frame = back
    name = frame.f_code.co_filename
    return name.startswith(_PACKAGE) and not name.startswith(_NOT_HELD)


def _again_soon() -> None:
    """Send SIGINT to the main thread again in a millisecond, from a short-lived thread: by then it
    is back in the caller's code (signalling it from here would run this handler again at once,
    still in gnnmon's code). Called held: a Ctrl-C that comes meanwhile is this one."""
    try:
        timer = threading.Timer(AGAIN_AFTER_S, signal.pthread_kill, (_MAIN, signal.SIGINT))
        timer.name, timer.daemon = "gnnmon-interrupt", True
        timer.start()
    finally:
        HELD.pending = False


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    if HELD.depth:
        HELD.pending = True
        return
    if _in_step_code(frame):
        HELD.depth += 1
        try:
            _again_soon()
        finally:
            HELD.depth -= 1
        return
    signal.default_int_handler(signum, frame)


def _install() -> None:
    HELD.installed = True  # tried once: a handler of the user's stays theirs
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _on_sigint)
    except (ValueError, OSError):  # not the main interpreter, or no signals here
        pass


def hold() -> bool:
    """Start a held section; returns whether it holds (on the main thread only)."""
    if threading.get_ident() != _MAIN:
        return False
    if not HELD.installed:
        _install()
    HELD.depth += 1
    return True


def release(held: bool) -> None:
    """End a held section; the outermost one signals a held interrupt again (it is raised once
    the main thread is back in code that is not gnnmon's step path)."""
    if not held:
        return
    while True:
        if HELD.depth == 1 and HELD.pending:
            _again_soon()  # still held while it starts its thread
        HELD.depth -= 1
        if HELD.depth or not HELD.pending:
            return
        HELD.depth += 1  # one came between the check and the count: send it too, held


class held_section:
    """``with held_section():`` — :func:`hold` and :func:`release` around a block."""

    __slots__ = ("_held",)

    def __enter__(self) -> None:
        self._held = hold()

    def __exit__(self, *exc: Any) -> None:
        release(self._held)
