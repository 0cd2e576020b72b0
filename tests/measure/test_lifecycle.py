"""The row life cycle: a measurement's exit never assumes its entry finished.

An exception can land anywhere in gnnmon's code (a signal handler raises wherever the interpreter
is). Here one is planted at every line, one at a time, that a measurement's ``__enter__`` runs in
gnnmon's own code (the functions it calls included), with ``sys.settrace``: the call raises it, no
measurement reports itself failed, and nothing is left behind (GC on, no current row, no open
window, no held section).
"""

from __future__ import annotations

import gc
import linecache
import sys
import warnings
from pathlib import Path

import pytest
import torch

import gnnmon
from gnnmon.devices import backend_for
from gnnmon.devices.host import HOST
from gnnmon.measure.compile import CompileMeasurement
from gnnmon.measure.gc_control import GcControl
from gnnmon.measure.memory import MemoryMeasurement
from gnnmon.measure.timing import TimingMeasurement
from gnnmon.record import gc_pause, state
from gnnmon.record.interrupts import HELD

PACKAGE = str(Path(gnnmon.__file__).resolve().parent)


class Planted(Exception):
    """The exception planted at one line of an entry."""


class LineInterrupter:
    """Counts the lines gnnmon runs while ``cls.__enter__`` runs and raises :class:`Planted` at
    line ``at`` (0: never; count only)."""

    def __init__(self, cls: type, monkeypatch: pytest.MonkeyPatch) -> None:
        self.at = 0
        self.lines = 0
        self.active = False
        self.seen: set = set()
        enter = cls.__enter__

        def traced_enter(measure):
            self.seen = set()
            self.active = True
            sys.settrace(self._global)
            try:
                return enter(measure)
            finally:
                sys.settrace(None)
                self.active = False

        monkeypatch.setattr(cls, "__enter__", traced_enter)

    def _global(self, frame, event, arg):
        if self.active and frame.f_code.co_filename.startswith(PACKAGE):
            return self._local
        return None

    def _local(self, frame, event, arg):
        if event == "line" and self.active and not _leaving_with(frame, self.seen):
            self.lines += 1
            if self.lines == self.at:
                self.active = False
                raise Planted(self.at)
        return self._local


def _leaving_with(frame, seen: set) -> bool:
    """Whether this line event is a ``with`` statement's line reached again at the end of its
    block: the tracer reports it before ``__exit__`` is called, where no signal handler runs (the
    interpreter checks for signals after that call), so an exception planted there would leave a
    lock held that no real interruption can. ``seen``: the with-lines met in this entry."""
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).lstrip()
    if not line.startswith("with "):
        return False
    key = (id(frame), frame.f_code, frame.f_lineno)
    if key in seen:
        return True
    seen.add(key)
    return False


def _stale() -> dict:
    exact = HOST.exact_windows()
    return {"gc_enabled": gc.isenabled(), "row": state.CURRENT_ROW.get(), "held": HELD.depth,
            "windows": 0 if exact is None else exact.depth, "pauses": gc_pause.pauses(),
            "gc_lock_held": gc_pause._LOCK._is_owned()}  # an RLock this thread would re-enter unseen


CLEAN = {"gc_enabled": True, "row": None, "held": 0, "windows": 0, "pauses": 0, "gc_lock_held": False}

STACK = (TimingMeasurement, MemoryMeasurement, GcControl, CompileMeasurement)


CASES = [pytest.param(cls, where, id=f"{where}-{cls.__name__}") for where in ("cpu", "fake cuda") for cls in STACK]


@pytest.mark.parametrize(("cls", "where"), CASES)
def test_an_exception_at_any_line_of_an_entry_leaves_no_failed_measurement_and_nothing_stale(
        cls, where, monkeypatch, request):
    device = "cpu"
    if where == "fake cuda":
        request.getfixturevalue("fake_cuda")
        device = "cuda:0"

    @gnnmon.monitor_memory_device(device=device)
    @gnnmon.cuda_timed(device=device)
    @gnnmon.gc_controlled
    @gnnmon.track_compile
    def step(x):
        return x + 1

    probe = LineInterrupter(cls, monkeypatch)
    with gnnmon.collect() as run:
        assert step(1) == 2  # the first call makes what later ones reuse
        gc.collect()  # else a collection of earlier tests' garbage can land in the counted entry: the GC log's lines
        probe.lines = 0
        assert step(1) == 2
        lines = probe.lines  # the lines of one entry
        planted = 0
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for at in range(1, 1000):  # line 1, 2, ... until an entry runs whole
                probe.at, probe.lines = at, 0
                try:
                    assert step(1) == 2
                    break
                except Planted:
                    planted += 1
                finally:
                    assert _stale() == CLEAN, at
                    if where == "fake cuda":  # no device window left open by an interrupted entry
                        assert backend_for(torch.device(device)).peaks.depth == 0, at
        failed = [str(w.message) for w in seen if "measurement failed" in str(w.message)]
        assert failed == []
        assert 2 <= planted and abs(planted - lines) <= 2  # every line of an entry, each raised to the caller
    rows = run.records
    assert len(rows) == 3 + planted
    assert [r["error"] for r in rows[2:]] == ["Planted"] * planted + [None]
    assert not any("failed" in n for r in rows for n in r.get("notes") or ())
