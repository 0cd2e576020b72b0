"""GC control and the GC log against planted garbage and planted collections."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import weakref

import pytest

import gnnmon
from gnnmon import collect_garbage, gc_controlled, gc_paused, phase
from gnnmon.measure import gc_control


class Node:
    """A tracked object for cycles (weakref-able, so we can see when it is collected)."""

    def __init__(self):
        self.other = None


def make_cycles(n):
    """n two-object cycles, dropped at once; returns weakrefs that die only when GC runs."""
    refs = []
    for _ in range(n):
        a, b = Node(), Node()
        a.other, b.other = b, a
        refs.append(weakref.ref(a))
    return refs


def churn():
    """Enough container allocations to trigger every automatic generation if GC were on."""
    junk = [[i] for i in range(50_000)]
    del junk


def alive(refs):
    return sum(r() is not None for r in refs)


def test_cyclic_garbage_survives_the_call_and_is_collected_after():
    @gc_controlled(collect="after")
    def step():
        refs = make_cycles(1000)
        churn()
        assert alive(refs) == 1000, "automatic GC ran inside a gc_controlled call"
        return refs

    gc.collect()
    refs = step()
    assert alive(refs) == 0  # collected right after the call
    assert gc.isenabled()


def test_collect_never_leaves_it_for_collect_garbage():
    @gc_controlled
    def step():
        return make_cycles(500)

    gc.collect()
    with gc_paused():  # keep automatic GC off between the call and the explicit collection
        refs = step()
        assert alive(refs) == 500
        result = collect_garbage()
        assert alive(refs) == 0
    assert result["generation"] == 2 and result["collected"] >= 1000 and result["pause_s"] > 0


def test_collect_every_n_calls():
    @gc_controlled(collect=3, generation=0)
    def step():
        return 1

    with gnnmon.collect() as run:
        for _ in range(7):
            step()
    asked = [e for e in run.gc_events if e["reason"] == "gc_controlled"]
    assert len(asked) == 2 and all(e["generation"] == 0 and e["requested"] for e in asked)
    assert all(e["row"] is None for e in asked)  # after the row, outside its window


def test_gc_state_restored_after_an_exception_and_after_nesting():
    @gc_controlled
    def inner():
        assert not gc.isenabled()
        raise KeyError("planted")

    @gc_controlled
    def outer():
        with pytest.raises(KeyError):
            inner()
        assert not gc.isenabled()  # still inside the outer call

    assert gc.isenabled()
    outer()
    assert gc.isenabled()
    gc.disable()
    try:
        outer()
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_a_pause_never_counted_leaves_gc_as_the_user_set_it():
    """A row whose pause was marked but never counted (an exception landed between the mark and the
    count) ends it at its close: GC stays as it is, off where you turned it off, though an earlier
    pause saved it on; and a resume interrupted before its end runs again whole."""
    from gnnmon.record import gc_pause
    from gnnmon.record.row import Row

    @gc_controlled
    def step():
        return 1

    assert gc.isenabled()
    step()  # an earlier pause, which saved GC as on
    gc.disable()
    try:
        with gnnmon.collect():
            row = Row("interrupted").open()
            row.gc_paused = True  # marked: the count that follows never ran
            row.close()
        assert not gc.isenabled() and gc_pause.pauses() == 0 and not row.gc_paused
    finally:
        gc.enable()
    owner = object()
    gc_pause.pause_gc(owner)
    gc_pause.resume_gc(object())  # another owner's, never counted: the pause stays in force
    assert not gc.isenabled() and gc_pause.pauses() == 1
    gc_pause.resume_gc(owner)
    gc_pause.resume_gc(owner)  # again, as a healed row's close runs it: nothing more
    assert gc.isenabled() and gc_pause.pauses() == 0


def test_gc_paused_is_also_a_decorator_bare_or_with_options_on_functions_and_methods(monkeypatch):
    collected = []
    monkeypatch.setattr(gc_control, "requested_collection", lambda gen, why: collected.append((gen, why)))

    @gc_paused
    def step(x):
        return gc.isenabled(), x

    class Trainer:
        @gc_paused(collect_on_exit=True, generation=1)
        def evaluate(self, y):
            return gc.isenabled(), y

    assert step(3) == (False, 3) and gc.isenabled() and step.__name__ == "step"
    assert Trainer().evaluate(4) == (False, 4) and gc.isenabled() and collected == [(1, "gc_paused")]
    with pytest.raises(TypeError, match="collect_on_exit must be True or False"):
        gc_paused(collect_on_exit="yes")


def test_gc_paused_three_deep():
    with gc_paused():
        with gc_paused():
            with gc_paused(collect_on_exit=True):
                refs = make_cycles(100)
                assert not gc.isenabled()
            assert alive(refs) == 0 and not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with gc_paused():
            raise RuntimeError
    assert gc.isenabled()


def test_pauses_in_two_threads_are_counted_together():
    entered, release = threading.Event(), threading.Event()

    def worker():
        with gc_paused():
            entered.set()
            release.wait(5)

    t = threading.Thread(target=worker)
    with gc_paused():
        t.start()
        entered.wait(5)
    assert not gc.isenabled()  # the other thread still pauses GC
    release.set()
    t.join()
    assert gc.isenabled()


def test_freeze_after_setup():
    @gc_controlled(freeze=True)
    def step():
        return 1

    try:
        with gnnmon.collect() as run:
            step()
            step()
        assert gc.get_freeze_count() > 1000
        assert sum(e["reason"] == "freeze" for e in run.gc_events) == 1  # once, not per call
        assert any("objects frozen" in n for n in run.records[0]["notes"])
    finally:
        gc.unfreeze()


def test_gc_log_attributes_a_planted_collection_to_its_row_and_phase(tmp_path):
    @gnnmon.cuda_timed(label="step")
    def step(k):
        with phase("forward"):
            if k == 2:
                gc.collect()

    path = tmp_path / "gc.jsonl"
    with gnnmon.collect(path) as run:
        for k in range(4):
            step(k)
    rows = run.records
    assert [r["gc_collections"] for r in rows] == [0, 0, 1, 0]
    assert rows[2]["gc_max_generation"] == 2 and rows[2]["gc_pause_s"] > 0
    (event,) = [e for e in run.gc_events if e["row"] is not None]
    assert event["row"] == "step#2" and event["phase"] == "forward" and event["generation"] == 2
    assert event["reason"] == "automatic"  # a user's gc.collect() with GC on reads as automatic
    assert event["duration_s"] == pytest.approx(rows[2]["gc_pause_s"], rel=1e-6)
    assert gnnmon.load(path).gc_events == [dict(e) for e in run.gc_events]


def test_explicit_collection_while_paused_is_labelled_explicit():
    with gnnmon.collect() as run:
        with gc_paused():
            gc.collect(0)
    assert [e["reason"] for e in run.gc_events] == ["explicit"]


def test_hook_is_removed_when_nothing_collects():
    from gnnmon.record.gc_log import GC_LOG
    from gnnmon.record.interrupts import MARK_GC

    with gnnmon.collect():
        assert GC_LOG._callback in gc.callbacks and gc.callbacks[0] is MARK_GC
    assert GC_LOG._callback not in gc.callbacks and MARK_GC not in gc.callbacks


def test_python_run_in_a_collection_gnnmon_started_is_marked_before_any_of_it_runs():
    """A collection can start inside CPython's ``ContextVar.set`` (its HAMT allocates), where a second
    ``set`` made meanwhile corrupts memory before Python 3.12 (CPython gh-148891): Python that runs in
    the collection (a signal handler, a finalizer, a GC callback of yours) must find it marked from
    its first bytecode. Planted: a GC callback of yours, installed before gnnmon's, calls a decorated
    function during a collection started inside a decorated call; it runs unmeasured (no row, counted
    in ``HELD.unmeasured``), and the mark is gone once the collection is."""
    from gnnmon.record.interrupts import HELD, IN_GC

    @gnnmon.cuda_timed(label="inner", device="cpu")
    def inner():
        return 7

    seen = []

    def yours(phase, info):
        if phase == "start":
            seen.append((bool(IN_GC.__dict__), inner()))

    @gnnmon.cuda_timed(label="step", device="cpu")
    def step():
        gc.collect()

    gc.callbacks.append(yours)  # before gnnmon's hook (installed by collect())
    try:
        before = HELD.unmeasured
        with gnnmon.collect() as run:
            step()
    finally:
        gc.callbacks.remove(yours)
    assert seen and all(marked and value == 7 for marked, value in seen), seen
    assert HELD.unmeasured - before == len(seen)
    assert [r["label"] for r in run.records] == ["step"]
    assert not IN_GC.__dict__


def test_bad_gc_arguments():
    with pytest.raises(ValueError, match="collect must be"):
        gc_controlled(collect="sometimes")
    with pytest.raises(ValueError, match="collect must be"):
        gc_controlled(collect=0)
    with pytest.raises(ValueError, match="generation"):
        gc_controlled(generation=3)
    with pytest.raises(ValueError, match="generation"):
        collect_garbage(5)
    with pytest.raises(TypeError, match="collect_on_exit"):
        gc_paused(collect_on_exit="yes")


CONTEXT_RESET_UNDER_GC = r"""
import contextvars, gc, sys, torch, gnnmon
from gnnmon.record import state
others = [contextvars.ContextVar(f"other{i}") for i in range(3)]
for v in others:
    v.set(1)  # a context holding more than gnnmon's variables: removing one allocates a node
gc.set_threshold(1, 1, 1)  # so a collection runs inside ContextVar.reset() itself
f = gnnmon.gc_controlled(lambda x: x)
with gnnmon.collect():
    for i in range(3000):
        f(i)
        if state.CURRENT_ROW.get() is not None:
            print("stale current row after call", i)
            sys.exit(3)
print("ok")
"""


def test_a_collection_inside_the_rows_context_reset_leaves_no_stale_row():
    """Planted: a GC collection inside ContextVar.reset(). The GC log's callback then runs there;
    had it called ContextVar.get(), CPython would cache a borrowed reference to the row being
    removed and return it, freed, to every later get() (a use-after-free: a stale current row,
    or a crash). Run in a fresh process with the debug allocator, which makes a freed object
    unusable."""
    env = dict(os.environ, PYTHONMALLOC="debug")
    out = subprocess.run([sys.executable, "-c", CONTEXT_RESET_UNDER_GC], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", (out.returncode, out.stdout, out.stderr[-800:])


def _attributed(run, row):
    """Events naming ``row`` or a row nested in it (``parent`` chains by key)."""
    rows = {f"{r['label']}#{r['index']}": r for r in run.records}

    def inside(key):
        while key is not None:
            if key == f"{row['label']}#{row['index']}":
                return True
            key = rows[key]["parent"] if key in rows else None
        return False

    return [e for e in run.gc_events if inside(e["row"])]


def test_the_collection_that_fires_when_gc_comes_back_on_is_not_the_calls():
    """A gc_controlled call leaves 100,000 cycles behind; the collection that automatic GC runs
    once it is switched back on falls after the row (the GC log names no row for it), and the
    row's GC figures say 0, exactly what the log attributes to it."""
    @gc_controlled(collect="never")
    def step():
        keep = make_cycles(50_000)  # 100,000 objects in cycles, dropped at return
        return len(keep)

    gc.collect()
    with gnnmon.collect() as run:
        step()
        churn()  # the first allocations after the call: the pending automatic collection fires
    (row,) = run.records
    assert row["gc_collections"] == 0 and row["gc_pause_s"] == 0.0
    assert _attributed(run, row) == []
    after = [e for e in run.gc_events if e["row"] is None]
    assert after and all(e["t_start_ns"] >= row["t_end_ns"] for e in after)
    assert gc.isenabled()


def test_a_rows_gc_figures_are_exactly_the_events_attributed_to_it_or_its_children():
    """Planted collections in an outer row, in a row nested in it, and in another thread while
    the outer row is open: each row counts what the log attributes to it or its children; the
    other thread's collection names no row and is in neither."""
    ready, done = threading.Event(), threading.Event()

    def other():
        ready.wait()
        gc.collect(0)
        done.set()

    @gnnmon.cuda_timed(label="inner")
    def inner():
        gc.collect(1)

    @gnnmon.cuda_timed(label="outer")
    def outer():
        gc.collect(0)
        inner()
        ready.set()
        done.wait(5)

    thread = threading.Thread(target=other)
    thread.start()
    with gnnmon.collect() as run:
        outer()
    thread.join()
    rows = {r["label"]: r for r in run.records}
    for label, expected in (("inner", 1), ("outer", 2)):
        events = _attributed(run, rows[label])
        assert rows[label]["gc_collections"] == len(events) == expected
        assert rows[label]["gc_pause_s"] == pytest.approx(sum(e["duration_s"] for e in events), rel=1e-9)
        assert rows[label]["gc_max_generation"] == max(e["generation"] for e in events)
    stray = [e for e in run.gc_events if e["row"] is None]
    assert len(stray) == 1 and stray[0]["thread"] == thread.name
