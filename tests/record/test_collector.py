"""The collector: rows stream to JSON Lines, come back with gnnmon.load, survive a SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
import zlib
from pathlib import Path

import pytest
import torch

import gnnmon
from gnnmon import ReportFileError, memory_scope, monitor_memory_device
from gnnmon.devices import sched
from tests import rawjsonl

ROOT = Path(__file__).resolve().parents[2]


@monitor_memory_device(label="step")
def step(n):
    return torch.ones(n).sum()


def test_jsonl_round_trip(tmp_path):
    path = tmp_path / "run.jsonl"
    with gnnmon.collect(path, config={"lr": 0.01, "model": "gcn"}) as run:
        run.mark("epoch", 0)
        step(10)
        run.mark("epoch", 1)
        step(20)
        with memory_scope(label="eval"):
            pass
    loaded = gnnmon.load(path)
    assert loaded.records == json.loads(json.dumps(run.records))
    assert [r["epoch"] for r in loaded.records] == [0, 1, 1]
    assert loaded.config == {"lr": 0.01, "model": "gcn"}
    m = loaded.manifest
    assert m["torch"] == torch.__version__ and m["gnnmon"] == gnnmon.__version__
    assert m["torch_geometric"] and m["host"] and m["start_time"] and m["devices"]["cpu_count"]
    assert loaded.complete is True
    assert [mk["value"] for mk in loaded.markers] == [0, 1]
    assert gnnmon.Report(loaded).summary().keys() == run.report().summary().keys()


def test_rows_reach_the_disk_within_the_flush_interval(tmp_path):
    # the step itself writes nothing: with a drain an hour away, its row is not on disk
    path = tmp_path / "later.jsonl"
    with gnnmon.collect(path, flush_interval=3600.0) as run:
        step(5)
        assert [json.loads(line)["type"] for line in path.read_text().splitlines()] == ["manifest"]
        assert run.rows_written == 0
    # ... and the writer puts it there within the interval (a deadline far past it: a busy
    # machine delays the writer's wake-up, not the schedule)
    path = tmp_path / "run.jsonl"
    with gnnmon.collect(path, flush_interval=0.02) as run:
        step(5)
        deadline = time.monotonic() + 2.0
        while run.rows_written == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert [line["type"] for line in rawjsonl.lines(path)] == ["manifest", "row"]
        assert [t.name for t in threading.enumerate() if t.name == "gnnmon-writer"] == ["gnnmon-writer"]
    assert not [t for t in threading.enumerate() if t.name == "gnnmon-writer"]


def test_truncated_last_line_is_read_with_a_warning(tmp_path):
    path = tmp_path / "run.jsonl"
    with gnnmon.collect(path):
        for _ in range(3):
            step(5)
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    third = [i for i, line in enumerate(lines) if '"type":"row"' in line][2]  # GC lines may come between
    cut = "".join(lines[:third]) + lines[third][: len(lines[third]) // 2]  # manifest, 2 rows, half a row
    path.write_text(cut)
    with pytest.warns(RuntimeWarning, match="cut off"):
        run = gnnmon.load(path)
    assert len(run.records) == 2 and run.complete is False


def test_corrupt_files_have_clear_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("hello\n")
    with pytest.raises(ReportFileError, match="not a gnnmon report"):
        gnnmon.load(bad)
    bad.write_text('{"type": "row"}\n')
    with pytest.raises(ReportFileError, match="not a gnnmon.jsonl manifest"):
        gnnmon.load(bad)
    bad.write_text("")
    with pytest.raises(ReportFileError, match="empty"):
        gnnmon.load(bad)
    with pytest.raises(FileNotFoundError):
        gnnmon.load(tmp_path / "missing.jsonl")

    good = tmp_path / "good.jsonl"
    with gnnmon.collect(good):
        step(1)
        step(2)
    lines = good.read_text().splitlines(keepends=True)
    first_row = next(i for i, line in enumerate(lines) if line.startswith('{"type":"row"'))
    lines[first_row] = "{broken\n"
    good.write_text("".join(lines))
    with pytest.raises(ReportFileError, match=rf"good.jsonl:{first_row + 1}: corrupt line"):
        gnnmon.load(good)
    with pytest.warns(RuntimeWarning, match="skipped a corrupt line"):
        run = gnnmon.load(good, strict=False)
    assert len(run.records) == 1  # the other row is not lost


def test_bad_collect_arguments():
    with pytest.raises(TypeError, match="path must be"):
        gnnmon.collect(3)
    with pytest.raises(TypeError, match="config must be a mapping"):
        gnnmon.collect(config=[1])
    with pytest.raises(ValueError, match="mode"):
        gnnmon.collect(mode="a")
    with pytest.raises(ValueError, match="max_records"):
        gnnmon.collect(max_records=0)


def test_mode_x_refuses_to_overwrite(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text("precious\n")
    with pytest.raises(FileExistsError):
        gnnmon.collect(path, mode="x").start()
    assert path.read_text() == "precious\n"
    assert gnnmon.active_run() is gnnmon.default_run()


def test_marker_names_are_checked():
    with gnnmon.collect() as run:
        with pytest.raises(ValueError, match="shadow"):
            run.mark("label", 1)
        with pytest.raises(ValueError, match="identifier"):
            run.mark("my epoch", 1)


def test_max_records_bounds_memory_but_not_the_file(tmp_path):
    path = tmp_path / "run.jsonl"
    with gnnmon.collect(path, max_records=5) as run:
        for _ in range(20):
            step(1)
    assert len(run.records) == 5 and [r["index"] for r in run.records] == list(range(15, 20))
    assert len(gnnmon.load(path).records) == 20


def test_thread_safe_appends(tmp_path):
    path = tmp_path / "run.jsonl"

    @monitor_memory_device(label="t")
    def tiny():
        return 1

    def worker():
        for _ in range(200):
            tiny()

    with gnnmon.collect(path) as run:
        threads = [threading.Thread(target=worker) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    loaded = gnnmon.load(path)
    assert len(loaded.records) == 1200 == len(run.records)
    assert sorted(r["index"] for r in loaded.records) == list(range(1200))


def test_nested_collect_sends_rows_to_the_innermost():
    with gnnmon.collect() as outer:
        step(1)
        with gnnmon.collect() as inner:
            step(1)
        step(1)
    assert len(outer.records) == 2 and len(inner.records) == 1


CHILD = r"""
import sys, time, torch, gnnmon
from gnnmon import monitor_memory_device

@monitor_memory_device(label="step")
def step(i):
    return torch.ones(1000).sum()

with gnnmon.collect(sys.argv[1], flush_interval=float(sys.argv[2])):
    i = 0
    while True:
        step(i)
        print(i, time.time_ns(), flush=True)  # completed, and when
        i += 1
        time.sleep(0.001)
"""


def rows_on_disk(path: Path) -> int:
    """The whole row lines in ``path`` as it stands (a gzip stream read as far as it goes)."""
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = zlib.decompressobj(wbits=31).decompress(data)
    return sum(line.startswith(b'{"type":"row"') for line in data.split(b"\n")[:-1])


@pytest.mark.parametrize("name", ["killed.jsonl", "killed.jsonl.gz"])
def test_sigkill_loses_only_rows_younger_than_the_flush_interval(tmp_path, name):
    """Rows completed well before a SIGKILL are on disk, in order, none missing; the rows lost
    are the youngest, all closed after the writer's last drain but one began. The same for a
    compressed file: each batch is flushed to a byte boundary as it is written."""
    path = tmp_path / name
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    flush = 0.05
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(flush)], stdout=subprocess.PIPE,
                            env=env, text=True)
    done: dict[int, int] = {}

    def read_done() -> None:  # what completed, and when (the host's clock), as the child prints it
        for line in proc.stdout:
            parts = line.split()
            if len(parts) == 2:  # the kill may cut the last line
                done[int(parts[0])] = int(parts[1])

    reader = threading.Thread(target=read_done, daemon=True)
    reader.start()
    # The file is polled, each poll's start noted, until it holds 200 rows and has grown twice.
    # A growth is one of the writer's drains (each batch is one write): the write seen grow at a
    # poll came after the previous poll began, and the next drain began after that write. So the
    # last drain seen began after the poll before the second-to-last growth began (``cutoff``):
    # every row completed before then was taken by that drain or an earlier one, written, and is
    # on disk however late a busy machine ran the writer.
    growths: list[int] = []  # per growth: when the poll before it began (ns, the host's clock)
    size, polled_ns, held = -1, time.time_ns(), 0
    deadline = time.monotonic() + 120
    try:
        while held < 200 or len(growths) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, (held, growths, proc.returncode)
            began_ns = time.time_ns()
            now = path.stat().st_size if path.exists() else -1
            if now != size:
                if size > 0:
                    growths.append(polled_ns)
                size, held = now, rows_on_disk(path) if now > 0 else 0
            polled_ns = began_ns
            time.sleep(0.002)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        reader.join(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    cutoff = growths[-2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the kill may have cut the last line
        run = gnnmon.load(path)
    indices = [r["index"] for r in run.records]
    assert len(indices) >= held >= 200  # every row on disk before the kill is there after it
    assert indices == list(range(len(indices)))  # in order, none missing
    lost = {i: t for i, t in done.items() if i >= len(indices)}
    assert all(t >= cutoff for t in lost.values()), (cutoff, lost)  # the youngest only
    assert run.complete is False and run.manifest["format"] == "gnnmon.jsonl"


def test_a_failing_write_warns_and_keeps_the_row_and_the_result(tmp_path):
    path = tmp_path / "run.jsonl"
    run = gnnmon.collect(path, flush_interval=60.0)  # the writer thread stays asleep
    with run:
        os.close(run.outlets.file.file._file.fileno())  # stands for a disk that went away
        assert step(3).item() == 3.0  # the step never writes
        with pytest.warns(RuntimeWarning, match="could not write"):
            assert len(run.records) == 1  # kept in memory
        assert run.write_errors
        lost = run.lines_lost
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # one warning per run: the end line's failure is only counted
            run.stop()
        assert run.lines_lost > lost
    assert len(run.records) == 1


def test_markers_that_are_only_recorded():
    with gnnmon.collect() as run:
        run.mark("settings", {"hidden": 64, "fanouts": [10, 5]}, carry=False)
        with pytest.raises(TypeError, match="carry=False"):
            run.mark("settings", {"a": 1})
        step(1)
    assert "settings" not in run.records[0]
    assert run.markers[0]["value"] == {"hidden": 64, "fanouts": [10, 5]}


def test_iter_rows_streams_a_file(tmp_path):
    path = tmp_path / "run.jsonl"
    with gnnmon.collect(path):
        for n in range(5):
            step(n)
    rows = list(gnnmon.iter_rows(path))
    assert [r["index"] for r in rows] == list(range(5)) and "type" not in rows[0]


def test_non_finite_figures_are_written_as_null(tmp_path):
    path = tmp_path / "nan.jsonl"
    with gnnmon.collect(path):
        with memory_scope(label="x") as fields:
            fields["ratio"] = float("nan")
            fields["nested"] = [1.0, float("inf")]
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    row = gnnmon.load(path).records[0]
    assert row["ratio"] is None and row["nested"] == [1.0, None]


def test_rows_made_faster_than_they_are_written_do_not_pile_up(tmp_path):
    """A loop of microsecond steps makes rows faster than the writer thread encodes them: past
    BACKLOG waiting rows the closing thread writes too, so memory stays bounded."""
    from gnnmon.record.run import BACKLOG

    @gnnmon.cuda_timed(label="tiny")
    def tiny():
        return None

    most = 0
    with gnnmon.collect(tmp_path / "fast.jsonl", max_records=100) as run:
        for i in range(3 * BACKLOG):
            tiny()
            if i % 64 == 0:
                most = max(most, len(run._inbox))
    assert most <= BACKLOG
    assert sum(1 for _ in gnnmon.iter_rows(tmp_path / "fast.jsonl")) == 3 * BACKLOG


@pytest.mark.parametrize("name", ["forked.jsonl", "forked.jsonl.gz"])
def test_a_forked_child_never_writes_into_the_parents_file(tmp_path, name):
    """A DataLoader worker is a fork: it inherits the active run but not its writer thread, and
    a lock the writer held at the fork would stay held in the child. The child keeps its rows in
    memory (newest 1,000), the parent's file gets only the parent's rows, nothing hangs (and a
    compressed file's stream stays the parent's alone)."""
    from gnnmon.record.run import CHILD_MAX_RECORDS

    @gnnmon.cuda_timed(label="in_child")
    def in_child():  # no torch in a forked child: its thread pool may hang
        return 1

    path = tmp_path / name
    with gnnmon.collect(path):
        for n in range(3):
            step(n)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: many decorated calls (more than the writer's backlog)
            try:
                os.close(r)
                for _ in range(5000):
                    in_child()
                kept = len(gnnmon.active_run().records)
                os.write(w, str(kept).encode())
            finally:
                os._exit(0)
        os.close(w)
        with os.fdopen(r) as f:
            kept = int(f.read() or -1)
        os.waitpid(pid, 0)
        step(9)
    assert 0 < kept <= CHILD_MAX_RECORDS
    labels = [row["label"] for row in gnnmon.load(path).records]
    assert labels == ["step"] * 4


def test_a_run_made_but_never_started_says_so_when_read(tmp_path):
    """``run = gnnmon.collect(path)`` without ``with`` or ``start()``: the calls go to the default
    run and no file is written; reading the run warns, naming both ways to start it."""
    path = tmp_path / "job.jsonl"
    run = gnnmon.collect(path)
    step = gnnmon.cuda_timed(label="never_started_step")(lambda: None)
    step()
    with pytest.warns(UserWarning, match=r"never started.*with gnnmon\.collect\(\.\.\.\) as run:.*\.start\(\)"):
        report = run.report()
    assert len(report.records) == 0 and not path.exists()
    assert any(r["label"] == "never_started_step" for r in gnnmon.default_run().records)
    with gnnmon.collect(tmp_path / "started.jsonl") as started:
        step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a started run reads without a warning
        assert len(started.records) == 1


def test_a_mark_on_a_stopped_run_says_no_row_will_carry_it(tmp_path):
    import warnings as _warnings

    path = tmp_path / "r.jsonl"
    with gnnmon.collect(path) as run:
        run.mark("epoch", 0)
    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        run.mark("epoch", 1)
    (said,) = [w for w in caught if "stopped run" in str(w.message)]
    assert "no row will carry it" in str(said.message) and str(path) in str(said.message)
    assert [m["value"] for m in run.markers] == [0, 1]  # kept in memory, as the warning says
    assert sum('"type":"marker"' in line.replace(" ", "") for line in path.read_text().splitlines()) == 1


def test_a_rows_cpu_seconds_are_the_work_its_call_did_not_its_wait():
    """``cpu_s``, a row's own figure: a call that spins until its thread has used a planted 50 ms
    of CPU has at least that (the process's CPU includes the thread's); a call that sleeps 50 ms
    computed nothing, and with no file and no sampler no other thread of the run computes, so its
    row holds well under half of it (the bound leaves the interpreter's wake-up its microseconds)."""
    planted = 0.05

    @gnnmon.gc_controlled(label="spin")
    def spin() -> None:
        end = time.thread_time() + planted
        while time.thread_time() < end:
            pass

    @gnnmon.gc_controlled(label="sleep")
    def sleep() -> None:
        time.sleep(planted)

    with gnnmon.collect(sample=None) as run:
        spin()
        sleep()
    spun, slept = run.records
    assert spun["cpu_s"] >= planted
    assert 0 <= slept["cpu_s"] < planted / 2 and slept["t_end_ns"] - slept["t_start_ns"] >= planted * 1e9


CPU_WINDOW_SCRIPT = """
import sys, time, gnnmon
field, clock = sys.argv[1], sys.argv[2]
res = time.get_clock_info(clock).resolution + time.get_clock_info("time").resolution
@gnnmon.gc_controlled(label="tiny")
def tiny():
    return sum(range(50))
with gnnmon.collect(sample=None, max_records=None, sched=field == "thread_cpu_s") as run:
    for _ in range(20000):
        tiny()
over = [r for r in run.records if r[field] > (r["t_end_ns"] - r["t_start_ns"]) / 1e9 + res]
print(len(run.records), len(over))
"""


def test_a_rows_cpu_seconds_lie_inside_its_wall_window():
    """On one thread, the process's CPU seconds in a row are read inside its wall window (the CPU
    clock after the wall clock as the row opens, before it as it closes), so none exceeds the
    window by more than the two clocks' resolutions: 20,000 tiny rows, in a process of their own
    (no thread beside the step's: pytest-xdist's would add CPU time of its own). Read the other
    way round, 61 to 103 of 20,000 such rows were over, by up to 42 µs."""
    done = subprocess.run([sys.executable, "-c", CPU_WINDOW_SCRIPT, "cpu_s", "process_time"], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["20000", "0"], done.stdout


@pytest.mark.skipif(not sched.AVAILABLE, reason="per-thread scheduler counters are Linux's")
def test_a_rows_thread_cpu_seconds_lie_inside_its_wall_window():
    """The scheduler probe's thread CPU time (``collect(sched=True)``) is read inside the row's
    window too (the probes close before its CPU and wall clocks are read), so the time a row spent
    off the CPU (its window less its thread's CPU time) is never under what it slept: 20,000 tiny
    rows, none over by more than the clocks' resolutions (read after the wall clock, 260 were, this VM)."""
    done = subprocess.run([sys.executable, "-c", CPU_WINDOW_SCRIPT, "thread_cpu_s", "thread_time"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["20000", "0"], done.stdout
