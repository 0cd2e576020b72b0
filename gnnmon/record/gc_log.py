"""The garbage-collection log: every collection, its generation, pause and where it fell.

A ``gc.callbacks`` hook is installed while a run collects or a gnnmon row is open (reference
counted, removed when neither is true). Each collection is an event, with the row and phase of
the thread that triggered it, for the run's ``gc_events``; the same collection is added to that
row's GC figures and to those of every row enclosing it. So a row's figures are exactly the
events attributed to it or to its children, nothing else: a collection another thread triggered
(it stops every thread) is that thread's row's, and one that fires after the row closed (as when
``@gc_controlled`` switches automatic GC back on) is not the row's.
"""

from __future__ import annotations

import contextvars
import gc
import threading
import time
from typing import Any

from gnnmon.record import state
from gnnmon.record.interrupts import IN_GC, MARK_GC


class GcLog:
    """Process-wide counters and events of collections (one instance, :data:`GC_LOG`)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._users = 0
        self._t0 = 0
        self._wall0 = 0
        self.requested = 0  # >0 while gnnmon itself runs gc.collect
        self.requested_reason: str | None = None

    # -- install / remove ---------------------------------------------------------------------
    def acquire(self) -> None:
        """Install the hook (if nobody has yet)."""
        with self._lock:
            if self._users == 0:
                gc.callbacks.insert(0, MARK_GC)  # first: marks the collection before any Python runs
                gc.callbacks.append(self._callback)
            self._users += 1

    def release(self) -> None:
        """Remove the hook when the last user is done."""
        with self._lock:
            self._users -= 1
            if self._users == 0:
                for callback in (MARK_GC, self._callback):
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


def requested_collection(generation: int, reason: str) -> tuple[int, float]:
    """Run ``gc.collect(generation)`` marked as asked for; returns (objects collected, seconds)."""
    GC_LOG.requested += 1
    GC_LOG.requested_reason = reason
    t0 = time.perf_counter_ns()
    try:
        collected = gc.collect(generation)
    finally:
        GC_LOG.requested -= 1
    return collected, (time.perf_counter_ns() - t0) / 1e9
