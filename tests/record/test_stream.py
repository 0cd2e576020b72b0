"""The record as a stream: rows leave through sinks on the writer thread, a bounded window stays in
memory without driving full collections, and a long run does the same work per call at its end as
at its start (counted, in profile events and in what the run holds: a busy machine stretches time,
not counts)."""

from __future__ import annotations

import collections
import gc
import math
import sys
import threading
import time
import warnings

import numpy
import psutil
import pytest
import torch

import gnnmon
from gnnmon import cuda_timed, gc_controlled, monitor_memory_device, phase
from gnnmon.record import run as run_module
from gnnmon.record.options import WINDOW
from gnnmon.record.sinks import Batch, sink
from gnnmon.report.analysis import step_analysis
from tests import rawjsonl
from tests.data.test_table import reachable


class RecordingSink:
    """Keeps every call it gets: which thread, and what."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.calls: list[tuple[str, str]] = []  # (method, thread name)
        self.rows: list[dict] = []
        self.kinds: list[str] = []
        self.end: dict | None = None
        self.delay_s = delay_s
        self.inbox_seen = 0

    def open(self, manifest):
        self.calls.append(("open", threading.current_thread().name))
        self.manifest = manifest

    def write(self, batch: Batch):
        self.calls.append(("write", threading.current_thread().name))
        self.rows.extend(batch.rows)
        self.kinds.extend(k for k, _ in batch.others)
        run = gnnmon.active_run()
        self.inbox_seen = max(self.inbox_seen, len(run._inbox))
        if self.delay_s:
            time.sleep(self.delay_s)

    def close(self, end):
        self.calls.append(("close", threading.current_thread().name))
        self.end = end


@cuda_timed(label="step")
def step(i):
    return i


def test_a_sink_gets_every_row_final_in_order_on_the_writer_thread(tmp_path):
    seen = RecordingSink()
    with gnnmon.collect(tmp_path / "run.jsonl", sinks=[seen], flush_interval=0.005) as run:
        run.mark("epoch", 0)
        for i in range(500):
            step(i)
        gnnmon.collect_garbage()
    assert [r["index"] for r in seen.rows] == list(range(500))
    assert all(r["wall_s"] is not None and r["epoch"] == 0 for r in seen.rows)
    assert seen.calls[0] == ("open", threading.main_thread().name)
    assert {name for method, name in seen.calls[1:]} == {"gnnmon-writer"}
    assert seen.calls[-1][0] == "close" and seen.end["rows"] == 500
    assert "marker" in seen.kinds and "gc" in seen.kinds
    assert seen.manifest["format"] == "gnnmon.jsonl"
    # the file sink wrote the same rows
    assert [r["index"] for r in gnnmon.load(tmp_path / "run.jsonl").records] == list(range(500))


def test_a_plain_function_is_a_sink_and_runs_without_a_file():
    got: list[tuple[str, list[int]]] = []

    def keep(rows):
        got.append((threading.current_thread().name, [r["index"] for r in rows]))

    with gnnmon.collect(sinks=[keep], flush_interval=0.005) as run:
        for i in range(300):
            step(i)
    assert [i for _, batch in got for i in batch] == list(range(300))
    assert {name for name, _ in got} == {"gnnmon-writer"}
    assert len(run.records) == 300  # a window of 10,000 rows by default: all of these


def test_a_sink_that_raises_is_disabled_once_and_the_run_goes_on(tmp_path):
    class Broken:
        ended = None

        def open(self, manifest):
            pass

        def write(self, batch):
            raise RuntimeError("tracker down")

        def close(self, end):
            Broken.ended = end["ended"]

    kept = RecordingSink()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gnnmon.collect(tmp_path / "r.jsonl", sinks=[Broken(), kept], flush_interval=0.002) as run:
            for i in range(200):
                step(i)
                if i % 50 == 0:
                    time.sleep(0.005)
    mine = [w for w in caught if "disabled the sink" in str(w.message)]
    assert len(mine) == 1 and "tracker down" in str(mine[0].message)
    assert len(kept.rows) == 200 and len(gnnmon.load(tmp_path / "r.jsonl").records) == 200
    assert run.sink_errors and "tracker down" in run.sink_errors[0]
    assert "tracker down" in gnnmon.load(tmp_path / "r.jsonl").end["sink_errors"][0]
    assert Broken.ended == "sink failed: RuntimeError"  # closed at once, so it lets go of what it holds


def test_a_slow_sink_holds_the_steps_back_not_the_memory(tmp_path):
    slow = RecordingSink(delay_s=0.02)
    n = 3 * run_module.BACKLOG
    with gnnmon.collect(sinks=[slow], flush_interval=0.001):
        for i in range(n):
            step(i)
    assert [r["index"] for r in slow.rows] == list(range(n))  # nothing lost
    # the inbox never held much more than the backlog: the steps waited for the writer instead
    assert slow.inbox_seen <= run_module.BACKLOG + run_module.DRAIN_EVERY


def test_sinks_by_name_and_added_to_a_running_run(tmp_path):
    copy = sink("jsonl", path=tmp_path / "copy.jsonl")
    with pytest.raises(ValueError, match="no sink named 'nope'; the sinks: jsonl"):
        sink("nope")
    with pytest.raises(TypeError, match="a sink is an object with open"):
        gnnmon.collect(sinks=[42])
    with gnnmon.collect(tmp_path / "main.jsonl") as run:
        step(0)
        run.add_sink(copy)  # from the next batch on
        step(1)
        late = run.add_sink(RecordingSink())
        step(2)
        run.remove_sink(late)
        step(3)
    assert [r["index"] for r in gnnmon.load(tmp_path / "copy.jsonl").records] == [1, 2, 3]
    assert [r["index"] for r in late.rows] == [2] and late.end is not None
    assert gnnmon.load(tmp_path / "copy.jsonl").complete


def test_the_window_is_bounded_when_rows_leave_and_whole_when_they_do_not(tmp_path):
    with gnnmon.collect(tmp_path / "a.jsonl", max_records=50) as run:
        for i in range(120):
            step(i)
    assert [r["index"] for r in run.records] == list(range(70, 120))
    assert len(gnnmon.load(tmp_path / "a.jsonl").records) == 120
    with gnnmon.collect(tmp_path / "b.jsonl", max_records=None) as run:
        for i in range(120):
            step(i)
    assert len(run.records) == 120
    assert gnnmon.collect(tmp_path / "c.jsonl").max_records == WINDOW
    assert gnnmon.collect().max_records is None  # no file, no sink: the rows are only here
    with pytest.raises(ValueError, match="max_records must be a positive int, None"):
        gnnmon.collect(max_records=0)
    with pytest.raises(TypeError, match="unknown option.*'samples'.*the options: carbon_intensity"):
        gnnmon.collect(samples=0.5)


def test_a_row_in_flight_is_not_tracked_by_the_garbage_collector():
    """A closed CPU row is a dict of plain values (notes a shared tuple): while it waits for the
    writer it never reaches the collector's generations, so it cannot drive a full collection."""
    with gnnmon.memory_scope(label="x", device="cpu"):  # the note's tuple is made once, then shared ...
        gnnmon.current_row().note("a planted note")
    gc.collect(0)  # ... and untracked by the collector's first pass over it
    with gnnmon.collect() as run:
        with gnnmon.memory_scope(label="x", device="cpu") as fields:
            gnnmon.current_row().note("a planted note")
        assert fields["notes"] == ("a planted note",)  # a shared tuple
        assert not gc.is_tracked(fields._fields)  # the row's dict, under your view of it
        with gnnmon.timed(label="y") as fields:
            pass
        assert not gc.is_tracked(fields._fields)
    assert all(isinstance(r["notes"], list) for r in run.records)  # read back as lists


def test_a_rows_fields_as_you_see_them_leave_no_cycle_behind():
    """Scopes whose ``as fields`` you write and rows you ask for (``current_row()``), with the
    collector off: once each row has closed and left, no row is left for the collector to find
    (a view that held its row, held by the row, left every such row to a collection)."""
    from gnnmon.record.row import Row

    def rows_alive() -> int:
        return sum(type(o) is Row for o in gc.get_objects())

    with gnnmon.collect() as run:
        gc.collect()
        alive = rows_alive()
        gc.disable()
        try:
            for i in range(100):
                with gnnmon.memory_scope(label="x", device="cpu") as fields:
                    fields["mine"] = i
                    assert gnnmon.current_row().fields is fields
            run.flush()
            assert rows_alive() == alive
        finally:
            gc.enable()
    assert [r["mine"] for r in run.records] == list(range(100))


@monitor_memory_device(label="long")
@cuda_timed
@gc_controlled
def long_step(x):
    with phase("forward"):
        pass
    return x


CONTAINERS = (list, tuple, dict, set, frozenset, collections.deque)


def _held(root: object) -> int:
    """Entries of every container reachable from ``root`` through gnnmon's own objects and the
    builtin containers (not functions, modules, classes or threads): what a run keeps, counted. A
    deque with a ``maxlen`` counts as its bound, and its items are not followed: it cannot grow."""
    def bounded(obj: object) -> bool:
        return isinstance(obj, collections.deque) and obj.maxlen is not None

    def bound(obj: object) -> int:
        return obj.maxlen  # type: ignore[attr-defined]

    def follow(obj: object) -> bool:
        return not bounded(obj) and (isinstance(obj, CONTAINERS) or type(obj).__module__.startswith("gnnmon"))

    return sum(bound(obj) if bounded(obj) else len(obj)
               for obj in reachable(root, follow) if isinstance(obj, CONTAINERS))


class _Events:
    """Counts profile events (Python and C calls and returns) per thread name and per part of a
    run: the work done, counted, which a busy machine cannot stretch as it stretches time."""

    def __init__(self) -> None:
        self.part: object = None
        self.counts: collections.Counter = collections.Counter()

    def __call__(self, frame, event, arg) -> None:
        part = self.part
        if part is not None:
            self.counts[threading.current_thread().name, part] += 1


@pytest.mark.slow
def test_120k_calls_flat_memory_flat_work_no_full_collection(tmp_path):
    n, quarter = 120_000, 30_000
    path = tmp_path / "long.jsonl"
    x = torch.ones(8)
    full = [0]

    def count(phase_name, info):
        if phase_name == "start" and info["generation"] == 2:
            full[0] += 1

    for _ in range(2000):  # warm up outside the run: the first calls build caches
        long_step(x)
    gc.collect()
    process = psutil.Process()
    rss0 = process.memory_info().rss
    # a cost that grows with the run shows as more work a call at its end than at its start: the
    # step's own events are counted over one block of 1,000 calls at the start and one at the end,
    # the writer thread's (it is started inside collect, so threading.setprofile reaches it, and
    # only it) over the first and the last quarter; what the run keeps is counted at both ends.
    # The writer drains when flushed, every 1,000 calls (its clock an hour away): a quarter's drains
    # are then the same 30 of 1,000 rows each however fast the machine runs the steps (on its 50 ms
    # clock a slower quarter made more drains, each with its fixed work: 419,743 events against
    # 381,181 on a lightly loaded machine; so drained, 424,440 in each quarter, quiet or beside two
    # CPU burners)
    events = _Events()
    blocks = {2_000: "first", n - 1_000: "last"}
    held = {}
    gc.callbacks.append(count)
    threading.setprofile(events)
    try:
        with gnnmon.collect(path, flush_interval=3600) as run:
            threading.setprofile(None)
            for i in range(n):
                if i % quarter == 0:
                    events.part = i // quarter
                if i % 1000 == 0:
                    run.mark("block", i // 1000)
                if i in blocks:
                    events.part = blocks[i]
                    sys.setprofile(events)
                long_step(x)
                if i + 1 - 1000 in blocks:
                    sys.setprofile(None)
                    events.part = i // quarter
                if (i + 1) % 1000 == 0:
                    run.flush()  # every row written
                if i + 1 in (quarter, n):
                    held[i + 1] = _held(run)  # what stays is the run's own
            events.part = None
            rss_peak = process.memory_info().rss
    finally:
        threading.setprofile(None)
        sys.setprofile(None)
        gc.callbacks.remove(count)
    growth = (max(rss_peak, process.memory_info().rss) - rss0) / 2**20
    assert growth <= 64, f"RSS grew {growth:.1f} MiB over {n} calls"
    assert full[0] <= 1, f"{full[0]} full collections during {n} calls"
    step = threading.current_thread().name
    first, last = events.counts[step, "first"], events.counts[step, "last"]
    assert first > 10_000, "the step's profile events were not counted"  # about 300 a call
    assert last <= 1.01 * first, f"the step's last 1,000 calls made {last} profile events, its first {first}"
    writer = {part: c for (name, part), c in events.counts.items() if name == "gnnmon-writer"}
    assert writer.get(0, 0) > quarter, f"the writer thread's events were not counted: {writer}"
    assert writer[3] <= 1.01 * writer[0], f"the writer's events by quarter: {writer}"
    # the run keeps its markers (a list entry and a marker's fields each), nothing a row
    per_mark = 1 + len(run.markers[-1])
    marks = (n - quarter) // 1000
    assert held[n] - held[quarter] <= marks * per_mark, \
        f"the run held {held[n]} entries at its end, {held[quarter]} after a quarter and {marks} marks"
    assert len(run.records) == WINDOW
    rows = 0
    for i, row in enumerate(gnnmon.iter_rows(path)):
        assert row["index"] == i and row["phase_forward_s"] is not None
        rows += 1
    assert rows == n


def test_the_report_of_a_file_equals_the_report_of_every_row_in_memory(tmp_path):
    path = tmp_path / "same.jsonl"
    x = torch.ones(8)
    with gnnmon.collect(path, max_records=None) as run:
        for epoch in range(3):
            run.mark("epoch", epoch)
            for _ in range(400):
                long_step(x)
            gnnmon.collect_garbage()
    loaded = gnnmon.Report.load(path)
    live = run.report()
    # both against the file read by json alone (tests/rawjsonl.py), with the statistics computed without gnnmon
    rows = rawjsonl.rows(path)
    assert len(rows) == 1200 and loaded.records == rows and live.records == rows
    expected = {}
    for label in dict.fromkeys(r["label"] for r in rows):
        mine = [r for r in rows if r["label"] == label]
        figures = {}
        for name in dict.fromkeys(k for r in mine for k in r):
            values = sorted(r[name] for r in mine if type(r.get(name)) in (int, float))
            if name in ("index", "t_start_ns", "t_end_ns", "epoch") or not values:
                continue
            figures[name] = {"count": len(values), "mean": math.fsum(values) / len(values),
                             **{f"p{q}": float(numpy.percentile(values, q)) for q in (50, 90, 99)},
                             "max": values[-1]}
        expected[label] = figures
    for report in (loaded, live):
        got = report.summary()
        assert got.keys() == expected.keys()
        for label, figures in expected.items():
            # the same figures (their order follows the first row that held each: a row whose collection set
            # gc_max_generation puts it before cpu_s, one without after)
            assert sorted(k for k, v in got[label].items() if v["count"]) == sorted(figures)
            for name, stats in figures.items():
                assert got[label][name] == pytest.approx(stats, rel=1e-12), (label, name)
    assert loaded.summary() == live.summary()
    assert loaded.spikes() == live.spikes() and step_analysis(loaded.table) == step_analysis(live.table)
    assert loaded.markdown() == live.markdown()
    assert loaded.summary(by="epoch") == live.summary(by="epoch")
