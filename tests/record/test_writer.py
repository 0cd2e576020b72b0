"""The writer thread and the file on their own (gnnmon/record/writer.py, gnnmon/record/outlets.py,
gnnmon/record/sinks.py's JsonlSink, gnnmon/data/write.py), fed by a planted drain instead of a
run: every row handed over reaches the file and every sink, in order, on the writer thread; a
flush returns only once its rows are written; a sink that raises is disabled, its error kept and
it is closed, while the others get every row; a failed write of the file is counted and the next
batch tried again; stopping writes the last rows and the end line, closes every sink and joins
the thread (conftest.py checks that no gnnmon thread is left after each test)."""

from __future__ import annotations

import errno
import threading
import time
import warnings
from collections import deque

import pytest

from gnnmon.data.format import ROW, encode, typed_line
from gnnmon.data.write import JsonlWriter
from gnnmon.record.outlets import Outlets
from gnnmon.record.sinks import SINK_FAILED, Batch, JsonlSink
from gnnmon.record.writer import Writer
from tests import rawjsonl

MANIFEST = {"type": "manifest", "format": "gnnmon.jsonl", "run": "planted"}


class Recording:
    """A sink that keeps what it gets and on which thread."""

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.threads: set[str] = set()
        self.manifest: dict | None = None
        self.ends: list[dict] = []

    def open(self, manifest):
        self.manifest = manifest

    def write(self, batch):
        self.threads.add(threading.current_thread().name)
        self.rows.extend(batch.rows)

    def close(self, end):
        self.threads.add(threading.current_thread().name)
        self.ends.append(end)

    def __repr__(self):
        return "Recording()"


class Broken(Recording):
    """Raises on its ``fails_at``-th write (1-based), or on close."""

    def __init__(self, fails_at: int | None = None, close_fails: bool = False) -> None:
        super().__init__()
        self.fails_at, self.close_fails = fails_at, close_fails
        self.writes = 0

    def write(self, batch):
        self.writes += 1
        if self.writes == self.fails_at:
            raise RuntimeError("tracker down")
        super().write(batch)

    def close(self, end):
        super().close(end)
        if self.close_fails:
            raise OSError("socket closed")

    def __repr__(self):
        return "Broken()"


class Pipe:
    """What a run does between its inbox and its sinks, reduced to that: rows handed over wait in
    a deque; ``drain`` takes them all (after ``slow_s``: planted device waits) and hands one batch
    to the outlets; the end line counts the rows handed over."""

    def __init__(self, path, sinks=(), interval: float = 60.0, slow_s: float = 0.0) -> None:
        self.waiting: deque[dict] = deque()
        self.handed = 0
        self.slow_s = slow_s
        self.drains: list[tuple[str, bool]] = []
        self.timed = threading.Event()  # set by each drain the writer made on its own
        self.outlets = Outlets(list(sinks), JsonlSink(path) if path is not None else None, self.drain, interval,
                               self.end_line)

    def start(self) -> Pipe:
        self.outlets.open(MANIFEST)
        writer = self.outlets.start()
        assert writer is not None
        writer.start()
        return self

    def hand(self, n: int) -> None:
        for _ in range(n):
            self.waiting.append({"label": "step", "index": self.handed})
            self.handed += 1

    def drain(self, force: bool) -> None:
        self.drains.append((threading.current_thread().name, force))
        if not force:
            self.timed.set()
        if self.slow_s:
            time.sleep(self.slow_s)  # planted: the rows' device events, a slow disk
        rows = [self.waiting.popleft() for _ in range(len(self.waiting))]
        if rows:
            self.outlets.write(Batch(rows, [typed_line(ROW, encode(r)) for r in rows], []))

    def end_line(self) -> dict:
        return {"type": "end", "rows": self.handed}

    def flush(self) -> None:
        self.outlets.writer.flush()

    def stop(self) -> None:
        self.outlets.stop(self.drain)


def lines(path) -> list[dict]:
    """The file as json reads it, rows made whole (tests/rawjsonl.py)."""
    return rawjsonl.lines(path)


def row_indexes(path) -> list[int]:
    return [obj["index"] for obj in lines(path) if obj["type"] == ROW]


def writer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "gnnmon-writer"]


def test_every_row_handed_over_reaches_the_file_in_order_and_flush_waits_for_it(tmp_path):
    """600 rows handed over in rounds, each drain slowed by 20 ms (planted device waits): right
    after each flush the file holds every row handed over so far, in order, after the manifest;
    every drain ran on the writer thread, a flush's forced."""
    path = tmp_path / "run.jsonl"
    pipe = Pipe(path, slow_s=0.02).start()
    try:
        for n in (300, 1, 99, 200):
            pipe.hand(n)
            pipe.flush()
            assert row_indexes(path) == list(range(pipe.handed))  # no wait: flush returned after the write
        assert lines(path)[0] == MANIFEST
    finally:
        pipe.stop()
    assert {name for name, _ in pipe.drains} == {"gnnmon-writer"} and all(force for _, force in pipe.drains)
    assert lines(path)[-1] == {"type": "end", "rows": 600}


def test_rows_handed_over_while_the_writer_drains_on_its_own_all_arrive_in_order(tmp_path):
    """A 1 ms interval: the writer drains on its own while 5,000 rows are handed over (every 10
    rounds the hand waits until it has, and flushes now and then); the file and a second sink
    each get all 5,000, in order, once."""
    path = tmp_path / "run.jsonl"
    seen = Recording()
    pipe = Pipe(path, sinks=[seen], interval=0.001).start()
    try:
        for k in range(50):
            pipe.hand(100)
            if k % 10 == 0:
                pipe.timed.clear()
                assert pipe.timed.wait(10), "the writer never drained on its own"
            if k % 10 == 9:
                pipe.flush()
    finally:
        pipe.stop()
    assert row_indexes(path) == list(range(5000))
    assert [r["index"] for r in seen.rows] == list(range(5000))
    assert seen.threads == {"gnnmon-writer"} and seen.ends == [{"type": "end", "rows": 5000}]


def test_stop_writes_the_last_rows_and_the_end_line_and_joins_the_thread(tmp_path):
    """Rows handed over after the last flush, a slow last drain: when stop returns, they are in
    the file, the end line is its last line, the file is closed and the writer thread has
    ended."""
    path = tmp_path / "run.jsonl"
    seen = Recording()
    pipe = Pipe(path, sinks=[seen], slow_s=0.02).start()
    writer = pipe.outlets.writer
    pipe.hand(10)
    pipe.flush()
    pipe.hand(25)  # not flushed
    pipe.stop()
    assert not writer.running and not writer_threads() and pipe.outlets.writer is None
    assert row_indexes(path) == list(range(35)) and lines(path)[-1] == {"type": "end", "rows": 35}
    assert pipe.outlets.file.file.closed
    assert len(seen.rows) == 35 and seen.ends == [{"type": "end", "rows": 35}]
    assert pipe.drains[-1] == ("gnnmon-writer", True)


def test_a_sink_that_raises_is_disabled_and_closed_and_the_others_get_every_row(tmp_path):
    """The broken sink raises on its second batch: one warning naming it and the error; its error
    kept in the outlets' errors; it gets no batch after, and is closed at once with an end line
    whose ``ended`` says it failed (not closed again at the stop); the file and the other sink
    get all 300 rows in order and the end line."""
    path = tmp_path / "run.jsonl"
    broken, seen = Broken(fails_at=2), Recording()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pipe = Pipe(path, sinks=[broken, seen]).start()
        try:
            for _ in range(3):
                pipe.hand(100)
                pipe.flush()
        finally:
            pipe.stop()
    mine = [str(w.message) for w in caught if "disabled the sink" in str(w.message)]
    assert len(mine) == 1 and "Broken()" in mine[0] and "tracker down" in mine[0]
    assert pipe.outlets.errors == ["Broken(): RuntimeError: tracker down"]
    assert broken.writes == 2 and [r["index"] for r in broken.rows] == list(range(100))
    assert broken.ends == [{"type": "end", "rows": 200, "ended": f"{SINK_FAILED} RuntimeError"}]
    assert broken not in pipe.outlets.sinks
    assert [r["index"] for r in seen.rows] == list(range(300)) and seen.ends == [{"type": "end", "rows": 300}]
    assert row_indexes(path) == list(range(300)) and lines(path)[-1] == {"type": "end", "rows": 300}


def test_a_sink_that_raises_on_close_is_recorded_and_the_others_still_close(tmp_path):
    path = tmp_path / "run.jsonl"
    broken, seen = Broken(close_fails=True), Recording()
    pipe = Pipe(path, sinks=[broken, seen]).start()
    pipe.hand(5)
    with pytest.warns(RuntimeWarning, match="disabled the sink Broken"):
        pipe.stop()
    assert pipe.outlets.errors == ["Broken(): OSError: socket closed"]
    assert len(broken.ends) == 1  # closed once: not again with a 'sink failed' end line
    assert seen.ends == [{"type": "end", "rows": 5}] and lines(path)[-1] == {"type": "end", "rows": 5}


def test_a_removed_sink_gets_every_row_so_far_and_a_run_left_without_sinks_stops_its_thread():
    """Without a file: the sink removed after 40 rows got those 40 and its end line, on the
    writer thread; with no sink left, the thread is joined; rows handed later go nowhere."""
    seen = Recording()
    pipe = Pipe(None, sinks=[seen]).start()
    writer = pipe.outlets.writer
    pipe.hand(40)
    pipe.outlets.remove(seen, "active")
    assert [r["index"] for r in seen.rows] == list(range(40)) and seen.ends == [{"type": "end", "rows": 40}]
    assert seen.threads == {"gnnmon-writer"}
    assert pipe.outlets.writer is None and not writer.running and not writer_threads()
    pipe.hand(10)
    pipe.stop()
    assert len(seen.rows) == 40 and len(seen.ends) == 1


def test_a_sink_added_while_running_gets_only_the_rows_closed_after_it(tmp_path):
    path = tmp_path / "run.jsonl"
    pipe = Pipe(path).start()
    try:
        pipe.hand(30)
        late = Recording()
        pipe.outlets.add(late, "active", MANIFEST)
        pipe.hand(20)
    finally:
        pipe.stop()
    assert late.manifest == MANIFEST and [r["index"] for r in late.rows] == list(range(30, 50))
    assert row_indexes(path) == list(range(50))


def test_a_drain_that_raises_is_reported_once_and_the_writer_goes_on():
    """The planted drain raises on its first two calls (the same error): one entry in the
    writer's errors, one warning; the flush after it drains, and stop joins."""
    calls: list[bool] = []

    def drain(force: bool) -> None:
        calls.append(force)
        if len(calls) <= 2:
            raise OSError(errno.ENOSPC, "No space left on device")

    writer = Writer(drain, interval=60.0).start()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer.flush()
        writer.flush()
        writer.flush()
        writer.stop()
    assert writer.errors == ["OSError: [Errno 28] No space left on device"]
    assert len([w for w in caught if "could not write rows" in str(w.message)]) == 1
    assert calls == [True, True, True, True] and not writer.running and not writer_threads()


def test_flush_then_runs_after_the_drain_on_the_writer_thread_and_stop_runs_last_last():
    """``flush(then=...)`` runs ``then`` after its drain, on the writer thread, before flush
    returns; ``stop(last)`` runs one forced drain, then ``last``, there, then joins."""
    log: list[tuple[str, str]] = []
    writer = Writer(lambda force: log.append(("drain" if force else "timed", threading.current_thread().name)),
                    interval=60.0).start()
    writer.flush(then=lambda: log.append(("then", threading.current_thread().name)))
    assert log == [("drain", "gnnmon-writer"), ("then", "gnnmon-writer")]
    writer.stop(lambda: log.append(("last", threading.current_thread().name)))
    assert log[2:] == [("drain", "gnnmon-writer"), ("last", "gnnmon-writer")] and not writer_threads()
    writer.stop()  # twice: nothing more
    assert len(log) == 4


# -- the file ------------------------------------------------------------------------------------

def test_the_file_keeps_every_line_written_before_it_is_closed(tmp_path):
    """Unbuffered, whole lines: what a kill leaves is every line written so far (read while the
    writer still holds the file open)."""
    path = tmp_path / "run.jsonl"
    writer = JsonlWriter(path, header=MANIFEST)
    writer.write_lines([encode({"type": "row", "index": i}) for i in range(3)])
    writer.write({"type": "row", "index": 3})
    assert lines(path) == [MANIFEST] + [{"type": "row", "index": i} for i in range(4)] and writer.lines == 5
    writer.close()
    with pytest.raises(ValueError, match="already closed"):
        writer.write({"type": "row", "index": 4})
    assert [p.name for p in tmp_path.iterdir()] == ["run.jsonl"]  # the manifest's temporary file is gone


def test_mode_x_leaves_a_previous_file_untouched(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text('{"type":"manifest","run":"before"}\n')
    with pytest.raises(FileExistsError):
        JsonlWriter(path, "x", header=MANIFEST)
    assert path.read_text() == '{"type":"manifest","run":"before"}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["run.jsonl"]


def test_a_failed_write_of_the_file_counts_its_lines_warns_once_and_the_next_batch_is_tried_again(tmp_path):
    """A full disk for two batches (planted on the file object): their 3 + 4 lines counted in
    ``lines_lost``, one warning, both errors kept; the batch after lands whole."""
    path = tmp_path / "run.jsonl"
    sink = JsonlSink(path)
    sink.open(MANIFEST)
    real = sink.file._file

    class Full:
        closed = False

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    def batch(first, n):
        rows = [{"label": "step", "index": i} for i in range(first, first + n)]
        return Batch(rows, [typed_line(ROW, encode(r)) for r in rows], [])

    sink.write(batch(0, 2))
    sink.file._file = Full()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sink.write(batch(2, 3))
        sink.write(batch(5, 4))
    sink.file._file = real
    sink.write(batch(9, 1))
    sink.close({"type": "end", "rows": 10})
    assert sink.lines_lost == 7 and len(sink.errors) == 2 and "No space left" in sink.errors[0]
    assert len([w for w in caught if "could not write" in str(w.message)]) == 1
    assert row_indexes(path) == [0, 1, 9] and lines(path)[-1] == {  # the end line says what is missing
        "type": "end", "rows": 10, "lines_lost": 7, "write_errors": ["OSError: [Errno 28] No space left on device"] * 2}


class PlantedClock:
    """Time that moves only when the writer waits (by what it asks to wait, at once) or a drain
    costs some (planted): the writer's schedule read off without any real timing."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is not None:
            self.waits.append(timeout)
            self.now += timeout
        time.sleep(0.0005)  # real time only so that the test's thread runs
        return False


def test_the_drains_keep_to_a_schedule_from_the_runs_start_whatever_they_cost():
    """A run that took 30 ms to start (the writer starts at t0 + 0.030) and drains that cost 20 ms,
    then one of 130 ms (more than two intervals): the first drain falls at t0 + 50 ms, each
    scheduled one after it 50 ms on; the one the long drain overran runs as it ends, and the next
    falls on the schedule. With a wait of one interval after each drain the first drain fell at
    t0 + 80 ms and each next one 70 ms after it."""
    t0, interval = 1000.0, 0.050
    clock = PlantedClock(t0 + 0.030)
    drains: list[float] = []
    costs = iter([0.020, 0.020, 0.130] + [0.020] * 1000)

    def drain(force: bool) -> None:
        drains.append(clock.now)
        clock.now += next(costs)

    writer = Writer(drain, interval, clock=clock)
    writer._cond.wait = clock.wait  # type: ignore[method-assign]
    writer.start(at=t0)
    while len(drains) < 6:
        time.sleep(0.001)
    writer.stop()
    offsets = [round((t - t0) * 1000, 6) for t in drains[:6]]
    assert offsets == [50.0, 100.0, 150.0, 280.0, 300.0, 350.0]
    assert [round(w * 1000, 6) for w in clock.waits[:2]] == [20.0, 30.0]


def test_a_run_starts_its_writers_schedule_when_collect_starts(tmp_path, monkeypatch):
    """A start that takes a planted 30 ms (its manifest, before the writer's thread starts): the
    writer's first drain is due one interval after collect began, before that planted wait."""
    import gnnmon
    from gnnmon.record import run as run_module

    build = run_module.build_manifest
    waited: list[float] = []

    def slow_manifest(*args, **kwargs):
        waited.append(time.monotonic())
        time.sleep(0.030)
        return build(*args, **kwargs)

    monkeypatch.setattr(run_module, "build_manifest", slow_manifest)
    before = time.monotonic()
    with gnnmon.collect(tmp_path / "run.jsonl", flush_interval=600.0) as run:  # no scheduled drain meanwhile
        first = run.outlets.writer.next_drain
    assert before <= first - 600.0 <= waited[0]
