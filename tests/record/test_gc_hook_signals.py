"""A signal handler's exception that lands in gnnmon's GC hook reaches the user's code.

Python calls a GC callback inside the collection and drops what it raises (reported as unraisable);
a handler runs between two bytecodes of whatever the main thread runs, and a signal that arrives
while a collection runs is handled as gnnmon's hook is entered, before its first line (a step
timeout during a long gen-2 collection). Each test plants the signal
at a known point: a Python GC callback placed just before gnnmon's trips it with a subscript, an
instruction after which Python checks for no signal, so that it is handled as gnnmon's hook is
entered; or a function the hook calls trips it, so that it is handled inside the hook. The
handler raises; the decorated call's caller gets that very exception, the row says it, and GC,
held sections and the current row are whole afterwards."""

from __future__ import annotations

import _thread
import gc
import signal
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import gnnmon
from gnnmon.record import gc_log, interrupts, state
from gnnmon.record.gc_log import GC_LOG
from gnnmon.record.interrupts import HELD, IN_GC

pytestmark = pytest.mark.skipif(sys.platform == "win32" or not hasattr(signal, "SIGALRM"), reason="POSIX signals")


class _Trip(dict):
    """``_Trip()[signum]`` marks ``signum`` as arrived (``_thread.interrupt_main``) from a
    subscript: the handler runs at the next place Python checks, not in the frame that trips it."""

    __getitem__ = staticmethod(_thread.interrupt_main)  # type: ignore[assignment]


class Planted:
    """A handler for ``signum`` that raises a new exception and keeps it (the truth the caller
    must get), and a GC callback placed just before gnnmon's that trips the signal at the next
    collection's ``phase`` when armed."""

    def __init__(self, signum: int, phase: str, handler: Any = None) -> None:
        self.signum, self.phase = signum, phase
        self.raised: list[BaseException] = []
        self.armed = False
        self.handler = handler if handler is not None else self._raise

    def _raise(self, signum: int, frame: Any) -> None:
        exc = TimeoutError(f"step timeout (signal {signum})")
        self.raised.append(exc)
        raise exc

    def planter(self, phase: str, info: dict) -> None:
        if self.armed and phase == self.phase:
            self.armed = False
            _Trip()[self.signum]  # the last thing this callback does: no check before gnnmon's hook

    def place(self) -> None:
        """Put the planter just before gnnmon's hook (installed by now: a run or a row is open)."""
        gc.callbacks.insert(gc.callbacks.index(GC_LOG._callback), self.planter)


@pytest.fixture
def whole() -> Iterator[None]:
    """GC on, and gnnmon's state as it was before the test, checked after it: no held section, no
    held exception, no collection marked, no current row, the GC hook's users as they were."""
    users, enabled, callbacks = GC_LOG._users, gc.isenabled(), list(gc.callbacks)
    alarm = signal.getsignal(signal.SIGALRM)
    sigint = signal.getsignal(signal.SIGINT)
    gc.enable()
    try:
        yield
        assert (HELD.depth, HELD.holder, HELD.pending, HELD.later) == (0, None, False, None)
        assert not IN_GC.__dict__
        assert state.CURRENT_ROW.get() is None and state.OPEN_PHASE.get() is None
        assert GC_LOG._users == users and gc.isenabled()
        assert gc.callbacks == callbacks
    finally:
        signal.signal(signal.SIGALRM, alarm)
        signal.signal(signal.SIGINT, sigint)
        gc.callbacks[:] = callbacks
        HELD.pending = False
        if enabled:
            gc.enable()
        else:
            gc.disable()


def _rows(run: Any, label: str) -> list[dict]:
    return [r for r in run.records if r["label"] == label]


@pytest.mark.parametrize("controlled", [False, True], ids=["timed", "gc_controlled"])
@pytest.mark.parametrize("phase", ["start", "stop"])
def test_a_handlers_exception_as_the_gc_hook_is_entered_reaches_the_caller(tmp_path, whole, phase, controlled):
    plant = Planted(signal.SIGALRM, phase)
    signal.signal(signal.SIGALRM, plant.handler)
    ran: list[str] = []
    decorate = (lambda f: gnnmon.gc_controlled(collect="after")(gnnmon.cuda_timed(device="cpu")(f))) if controlled \
        else gnnmon.cuda_timed(device="cpu")

    @decorate
    def step() -> None:
        plant.place()
        plant.armed = True
        gc.collect()  # the handler runs as gnnmon's hook is entered, inside this collection
        ran.append("after the collection")  # the user's code goes on until gnnmon's next end

    with gnnmon.collect(tmp_path / "run.jsonl") as run:
        with pytest.raises(TimeoutError) as got:
            step()
        gc.callbacks.remove(plant.planter)
    assert len(plant.raised) == 1 and got.value is plant.raised[0]
    assert ran == ["after the collection"]  # raised as the call returned: its close is gnnmon's next end
    (row,) = _rows(run, "step")
    assert row["error"] == "TimeoutError"
    assert any("signal handler raised TimeoutError during a garbage collection" in n for n in row["notes"])
    assert row["gc_collections"] >= 1  # the collection is still counted, its hook's work done
    events = [e for e in run.gc_events if e["row"] == "step#0"]
    assert len(events) == row["gc_collections"]


def test_a_handlers_exception_inside_the_gc_hook_reaches_the_caller(tmp_path, whole, monkeypatch):
    plant = Planted(signal.SIGALRM, "stop")
    signal.signal(signal.SIGALRM, plant.handler)
    reason = GC_LOG._reason
    armed = [False]

    def tripping() -> str:  # a function the hook calls: the signal is handled inside the hook
        if armed[0]:
            armed[0] = False
            signal.raise_signal(signal.SIGALRM)
        return reason()

    monkeypatch.setattr(GC_LOG, "_reason", tripping)

    @gnnmon.cuda_timed(device="cpu")
    def step() -> str:
        armed[0] = True
        gc.collect()
        return "returned"

    with gnnmon.collect(tmp_path / "run.jsonl") as run:
        with pytest.raises(TimeoutError) as got:
            step()
    assert len(plant.raised) == 1 and got.value is plant.raised[0]
    (row,) = _rows(run, "step")
    assert row["error"] == "TimeoutError"


def test_the_exception_is_raised_at_the_end_of_the_next_phase_not_at_its_start(tmp_path, whole):
    """A phase's set-up closes what it opened as a Ctrl-C would (its undo says KeyboardInterrupt):
    the held exception waits for the phase's end, and the code after the ``with`` never runs."""
    plant = Planted(signal.SIGALRM, "stop")
    signal.signal(signal.SIGALRM, plant.handler)
    ran: list[str] = []

    @gnnmon.cuda_timed(device="cpu")
    def step() -> None:
        plant.place()
        plant.armed = True
        gc.collect()
        with gnnmon.phase("forward"):
            ran.append("forward")
        ran.append("after forward")

    with gnnmon.collect(tmp_path / "run.jsonl") as run:
        with pytest.raises(TimeoutError) as got:
            step()
        gc.callbacks.remove(plant.planter)
    assert got.value is plant.raised[0]
    assert ran == ["forward"]
    (row,) = _rows(run, "step")
    assert row["error"] == "TimeoutError" and "phase_forward_s" in row


def test_a_collection_outside_any_row_raises_at_the_next_calls_end(tmp_path, whole):
    plant = Planted(signal.SIGALRM, "stop")
    signal.signal(signal.SIGALRM, plant.handler)
    ran: list[str] = []

    @gnnmon.cuda_timed(device="cpu")
    def step() -> None:
        ran.append("step")

    with gnnmon.collect(tmp_path / "run.jsonl") as run:
        plant.place()
        plant.armed = True
        gc.collect()  # between steps: the hook is the run's
        ran.append("between")
        with pytest.raises(TimeoutError) as got:
            step()
        gc.callbacks.remove(plant.planter)
        step()  # the next call is plain
    assert got.value is plant.raised[0]
    assert ran == ["between", "step", "step"]
    assert [r["error"] for r in _rows(run, "step")] == [None, None]  # no row was open at the collection


def test_a_collection_gnnmon_asks_for_raises_it_there(tmp_path, whole):
    plant = Planted(signal.SIGALRM, "stop")
    signal.signal(signal.SIGALRM, plant.handler)
    with gnnmon.collect(tmp_path / "run.jsonl") as run:
        plant.place()
        plant.armed = True
        with pytest.raises(TimeoutError) as got:
            gnnmon.collect_garbage()
        gc.callbacks.remove(plant.planter)
    assert got.value is plant.raised[0]
    assert [e["reason"] for e in run.gc_events][-1:] == ["collect_garbage"]  # logged all the same


@pytest.mark.parametrize("handler", ["python's default", "gnnmon's"])
def test_a_ctrl_c_as_the_gc_hook_is_entered_reaches_the_caller(tmp_path, whole, handler):
    """Python's default SIGINT handler is C (its ``KeyboardInterrupt`` passes through no handler's
    frame); gnnmon's raises it at once in the user's code, the GC hook's included."""
    signal.signal(signal.SIGINT, signal.default_int_handler if handler == "python's default"
                  else interrupts._on_sigint)
    plant = Planted(signal.SIGINT, "stop", handler=signal.getsignal(signal.SIGINT))
    ran: list[str] = []

    @gnnmon.cuda_timed(device="cpu")
    def step() -> None:
        plant.place()
        plant.armed = True
        gc.collect()
        ran.append("after the collection")

    with gnnmon.collect(tmp_path / "run.jsonl") as run:
        with pytest.raises(KeyboardInterrupt):
            step()
        gc.callbacks.remove(plant.planter)
    assert ran == ["after the collection"]
    (row,) = _rows(run, "step")
    assert row["error"] == "KeyboardInterrupt"


def test_gnnmons_own_failure_in_the_gc_hook_never_reaches_the_caller(tmp_path, whole, monkeypatch):
    """Not a handler's: reported as unraisable by the hook that was there, the call returns."""
    reported: list[Any] = []
    monkeypatch.setattr(gc_log, "_PREVIOUS", [reported.append])
    monkeypatch.setattr(sys, "unraisablehook", gc_log._on_unraisable)
    monkeypatch.setattr(GC_LOG, "_reason", lambda: 1 / 0)

    @gnnmon.cuda_timed(device="cpu")
    def step() -> str:
        gc.collect()
        return "returned"

    with gnnmon.collect(tmp_path / "run.jsonl"):
        assert step() == "returned"
    assert reported and all(u.object is GC_LOG.hook and type(u.exc_value) is ZeroDivisionError for u in reported)


def test_other_unraisable_exceptions_go_to_the_hook_that_was_there(monkeypatch):
    reported: list[Any] = []
    monkeypatch.setattr(gc_log, "_PREVIOUS", [reported.append])
    monkeypatch.setattr(sys, "unraisablehook", gc_log._on_unraisable)

    class Breaks:
        def __del__(self) -> None:
            raise KeyboardInterrupt  # even this one: it is not gnnmon's hook's

    Breaks()
    assert len(reported) == 1 and type(reported[0].exc_value) is KeyboardInterrupt
    assert HELD.pending is False

