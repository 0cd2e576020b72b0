"""The garbage-collection log: every collection, its generation, pause and where it fell.

A ``gc.callbacks`` hook is installed while a run collects or a gnnmon row is open (reference
counted, removed when neither is true). Each collection is an event, with the row and phase of
the thread that triggered it, for the run's ``gc_events``; the same collection is added to that
row's GC figures and to those of every row enclosing it. So a row's figures are exactly the
events attributed to it or to its children, nothing else: a collection another thread triggered
(it stops every thread) is that thread's row's, and one that fires after the row closed (as when
``@gc_controlled`` switches automatic GC back on) is not the row's.

A signal handler of yours runs between two bytecodes of whatever the main thread runs, this
hook's included, and an exception a GC callback raises is one Python drops (it reports it as
unraisable). A signal that arrives while a collection runs (its C part, a gen-2 one over a big heap
lasting 100 ms or more) is handled as the hook is entered, before its first line. So the hook's
exceptions are taken where Python hands them on, at ``sys.unraisablehook`` (:func:`_on_unraisable`,
gnnmon's from the first install on, passing every other exception to the hook that was there): one
a handler raised (``KeyboardInterrupt`` included: Python's own SIGINT handler is C) is held like a
Ctrl-C in :data:`~gnnmon.record.interrupts.HELD` and raised when gnnmon's state is whole
(:func:`~gnnmon.record.interrupts.release`); the collection is still logged and counted, and the
row it fell in says ``error`` and why. The hook itself runs the same instructions as without it.
"""

from __future__ import annotations

import contextvars
import gc
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from gnnmon.errors import raised_by_handler
from gnnmon.record import state
from gnnmon.record.interrupts import HELD, IN_GC, MAIN_THREAD, MARK_GC, settle

HANDLERS_NOTE = ("a signal handler raised {name} during a garbage collection in this row, inside gnnmon's GC "
                 "hook, where Python would drop it: gnnmon raised it once its own state was whole (at the end of "
                 "its next phase, call or scope)")
"""Said on the row a collection fell in when a handler's exception was taken from the GC hook."""


class GcLog:
    """Process-wide counters and events of collections (one instance, :data:`GC_LOG`)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._users = 0
        self._t0 = 0
        self._wall0 = 0
        self.requested = 0  # >0 while gnnmon itself runs gc.collect
        self.requested_reason: str | None = None
        self.hook = self._callback  # the one object in gc.callbacks: what sys.unraisablehook is handed

    # -- install / remove ---------------------------------------------------------------------
    def acquire(self) -> None:
        """Install the hook (if nobody has yet)."""
        with self._lock:
            if self._users == 0:
                if not _PREVIOUS:
                    _take_unraisable()
                gc.callbacks.insert(0, MARK_GC)  # first: marks the collection before any Python runs
                gc.callbacks.append(self.hook)
            self._users += 1

    def release(self) -> None:
        """Remove the hook when the last user is done."""
        with self._lock:
            self._users -= 1
            if self._users == 0:
                for callback in (MARK_GC, self.hook):
                    try:
                        gc.callbacks.remove(callback)
                    except ValueError:  # the user cleared gc.callbacks themselves
                        pass
            elif self._users < 0:
                self._users = 0
                raise RuntimeError("gnnmon GC log released more often than acquired")

    @property
    def installed(self) -> bool:
        return self._users > 0

    # -- the hook -------------------------------------------------------------------------------
    def _reason(self) -> str:
        """Why this collection ran: gnnmon asked (its reason), automatic, or an explicit
        ``gc.collect()`` made while automatic GC was off. With automatic GC on, CPython does not
        tell an explicit ``gc.collect()`` from an automatic one: both read ``automatic``."""
        if self.requested > 0:
            return self.requested_reason or "requested"
        return "automatic" if gc.isenabled() else "explicit"

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            # MARK_GC has marked the collection (IN_GC): a signal handler that runs from here to the
            # end of the collection (this callback, finalizers) interrupts whatever allocation
            # started it, and calls decorated functions unmeasured (record/interrupts.py).
            self._wall0 = time.time_ns()
            self._t0 = time.perf_counter_ns()
            return
        try:
            self._stopped(info)
        finally:
            IN_GC.__dict__.clear()

    def handlers(self, exc: BaseException) -> None:
        """A signal handler raised ``exc`` in this hook (Python dropped it, :func:`_on_unraisable`
        took it): the collection's figures are whole first (a hook whose first line never ran is
        run now), then the row the collection fell in says so and ``exc`` is held, to be raised
        when gnnmon's state is whole. Main thread only: the one that runs signal handlers."""
        marked = IN_GC.__dict__
        try:
            if "stop" in marked:  # the handler ran as the hook was entered at the collection's end
                self._stopped(marked["stop"])
            elif "start" in marked:  # ... at its start: the pause is timed from now
                self._wall0 = time.time_ns()
                self._t0 = time.perf_counter_ns()
        except BaseException as again:  # another handler's, meanwhile: the later one is raised
            if not (isinstance(again, KeyboardInterrupt) or raised_by_handler(again)):
                raise
            again.__context__ = exc
            exc = again
        finally:
            if "stop" in marked:
                marked.clear()
        row = contextvars.copy_context().get(state.CURRENT_ROW)  # as _stopped reads it
        if row is not None and not row.closed:
            fields = row.fields
            if fields.get("error") is None:
                fields["error"] = type(exc).__name__
            row.note(HANDLERS_NOTE.format(name=type(exc).__name__))
        held = HELD.pending
        if held is True:  # a Ctrl-C held meanwhile is raised instead
            return
        if held and exc.__context__ is None:
            exc.__context__ = held
        HELD.pending = exc

    def _stopped(self, info: dict[str, Any]) -> None:
        pause = time.perf_counter_ns() - self._t0
        gen = info.get("generation", 2)
        # Read the row and phase through a copy of the context, never ContextVar.get(): this
        # callback can run inside ContextVar.reset() (a collection triggered by the HAMT node it
        # allocates), and get() would then cache a borrowed reference to the value being removed,
        # which later get() calls return after it is freed (CPython's contextvar_del clears its
        # cache before the change, not after; tests/measure/test_gc.py plants it).
        context = contextvars.copy_context()
        row = context.get(state.CURRENT_ROW)
        opened = context.get(state.OPEN_PHASE)
        event = {
            "generation": gen,
            "t_start_ns": self._wall0,
            "duration_s": pause / 1e9,
            "collected": info.get("collected"),
            "uncollectable": info.get("uncollectable"),
            "requested": self.requested > 0,
            "reason": self._reason(),
            "row": row.key if row is not None else None,
            "phase": None if opened is None else opened.name,
            "thread": threading.current_thread().name,
        }
        enclosing = row
        while enclosing is not None:  # the row's figures and its parents': plain int updates
            enclosing.gc_n += 1
            enclosing.gc_ns += pause
            if gen > enclosing.gc_gen:
                enclosing.gc_gen = gen
            enclosing = enclosing.parent
        run = row.run if row is not None else state.open_run()
        if run is not None:  # the hook is held by a run or a row, so one exists
            run.add_gc_event(event)


GC_LOG = GcLog()

_PREVIOUS: list[Callable[[Any], Any]] = []
"""The ``sys.unraisablehook`` that was there when gnnmon's was put in its place (one item from then on)."""


def _take_unraisable() -> None:
    """Put :func:`_on_unraisable` in ``sys.unraisablehook``'s place, once: a hook set after it
    replaces it (then a handler's exception in the GC hook is dropped, as Python drops it), and
    one that wraps it calls it."""
    _PREVIOUS.append(sys.unraisablehook)
    sys.unraisablehook = _on_unraisable


def _on_unraisable(unraisable: Any) -> None:
    """``sys.unraisablehook``: an exception a signal handler raised in gnnmon's GC hook, on the main
    thread, is held for the user's code (:meth:`GcLog.handlers`); every other one goes to the hook
    that was there (gnnmon's own failure in its GC hook is reported as before)."""
    exc = unraisable.exc_value
    if (unraisable.object is GC_LOG.hook and exc is not None and threading.get_ident() == MAIN_THREAD
            and (isinstance(exc, KeyboardInterrupt) or raised_by_handler(exc))):
        GC_LOG.handlers(exc)
        return
    (_PREVIOUS[0] if _PREVIOUS else sys.__unraisablehook__)(unraisable)


def requested_collection(generation: int, reason: str) -> tuple[int, float]:
    """Run ``gc.collect(generation)`` marked as asked for; returns (objects collected, seconds). A
    handler's exception the GC hook held meanwhile is raised here where no held section is open
    (``collect_garbage()``, the end of ``gc_paused``), else at that section's end."""
    GC_LOG.requested += 1
    GC_LOG.requested_reason = reason
    t0 = time.perf_counter_ns()
    try:
        collected = gc.collect(generation)
    finally:
        GC_LOG.requested -= 1
    seconds = (time.perf_counter_ns() - t0) / 1e9
    if HELD.pending or HELD.later is not None:
        settle()
    return collected, seconds
