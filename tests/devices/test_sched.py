"""The step thread's scheduler counters (``collect(sched=)``): CPU time, preemptions and waits in
each row and before it, against planted truths (a spin of known CPU time, a sleep, a spinning
process pinned to the thread's core), and what the cross-rank report makes of them."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

import gnnmon
from gnnmon import cuda_timed
from gnnmon.devices import sched

needs_thread_usage = pytest.mark.skipif(not sched.AVAILABLE or not hasattr(os, "sched_setaffinity"),
                                        reason="per-thread usage and CPU affinity are Linux's")


def _spin(seconds: float) -> None:
    """Run on the CPU until this thread has used ``seconds`` of it."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


_SPINNER = "import sys\nsys.stdout.write('ready\\n')\nsys.stdout.flush()\nwhile True:\n    pass\n"
"""A process that says it is ready, then keeps its core busy until killed: a bare interpreter
(no torch to import), so that it starts in milliseconds however busy the machine is."""


@contextlib.contextmanager
def _sharing_a_core() -> Iterator[None]:
    """This thread pinned, for the block, to one core with a process that spins on it."""
    core, before = sorted(os.sched_getaffinity(0))[0], os.sched_getaffinity(0)
    child = subprocess.Popen([sys.executable, "-c", _SPINNER], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        os.sched_setaffinity(child.pid, {core})
        os.sched_setaffinity(0, {core})  # this thread (Linux: the calling thread)
        yield
    finally:
        os.sched_setaffinity(0, before)
        child.kill()
        child.wait()


@needs_thread_usage
def test_cpu_time_waits_and_the_time_before_a_row_are_the_planted_ones():
    @cuda_timed
    def step(kind: str) -> None:
        if kind == "spin":
            _spin(0.030)
        else:
            time.sleep(0.030)

    with gnnmon.collect(sched=True) as run:
        step("spin")
        time.sleep(0.020)
        step("sleep")
    spun, slept = run.records
    assert 0.030 <= spun["thread_cpu_s"] <= (spun["t_end_ns"] - spun["t_start_ns"]) / 1e9 + 0.001
    assert slept["wall_s"] - slept["thread_cpu_s"] >= 0.029 and slept["thread_waits"] >= 1  # off the CPU, asleep
    assert slept["thread_cpu_s"] < 0.010
    assert "before_s" not in spun or spun["before_s"] >= 0  # its thread's earlier rows came from another test
    assert slept["before_s"] >= 0.020 and slept["before_thread_waits"] >= 1
    assert slept["before_thread_cpu_s"] < slept["before_s"] - 0.019
    assert run.manifest["options"]["sched"] is True


@needs_thread_usage
def test_a_process_spinning_on_the_threads_core_shows_as_preemptions():
    """Pinned to one core with a spinning process: the thread gets about half of it, taken from it
    while it could run (involuntary context switches), not given up."""
    @cuda_timed
    def step() -> None:
        _spin(0.050)

    with _sharing_a_core(), gnnmon.collect(sched=True) as run:
        step()
    (row,) = run.records
    assert row["thread_cpu_s"] >= 0.050
    assert row["thread_preempted"] >= 1
    assert row["wall_s"] - row["thread_cpu_s"] >= 0.010  # waiting for the core the spinner held


def test_sched_is_on_by_default_only_in_a_distributed_job(monkeypatch):
    with gnnmon.collect() as run:
        cuda_timed(lambda: None)()
    assert not any(k.startswith("thread_") for k in run.records[0])
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert gnnmon.Run().sched is sched.AVAILABLE
    assert gnnmon.Run(sched=False).sched is False


def test_a_bad_sched_option_is_named():
    with pytest.raises(TypeError, match="sched must be True, False or 'auto'.*'yes'"):
        gnnmon.collect(sched="yes")


def _job(plant: dict[int, dict[str, float]], steps: int = 30, queued: bool = False) -> list[dict]:
    """Two ranks whose rows end together (DDP), each with its thread's counters: 20 ms of backward
    CPU to the last bucket ready, one wait in the all-reduce, 1 ms to the next row. ``plant[i]``
    changes rank 1 at step i: ``arrive`` s later (``arrive_cpu``, ``arrive_preempted``,
    ``arrive_waits``, ``arrive_queued`` in the time before the row), its buckets ``late`` s later
    (``late_cpu``, ``late_preempted``, ``late_waits``, ``late_queued`` up to them), its row ending
    ``tail`` s after the others' (``tail_preempted``, ``tail_waits``, ``tail_queued`` after its
    buckets; it then starts its next row that much later); ``others_late_waits``: rank 0's waits up
    to its buckets. With ``queued``, rows carry the run-queue times: 0.5 ms in each window but
    those planted."""
    rows, t = [], {0: 0, 1: 0}
    for i in range(steps):
        p = plant.get(i, {})
        starts = {0: t[0], 1: t[1] + int(p.get("arrive", 0.0) * 1e9)}
        ready = {0: 0.020, 1: 0.020 + p.get("late", 0.0)}
        end = max(starts[k] + int(ready[k] * 1e9) for k in (0, 1)) + 2_000_000
        ends = {0: end, 1: end + int(p.get("tail", 0.0) * 1e9)}
        for k in (0, 1):
            mine = k == 1
            cpu = 0.020 + (p.get("late_cpu", 0.0) if mine else 0.0)
            rows.append({
                "label": "step", "index": i, "rank": k, "parent": None, "backend": "cpu",
                "t_start_ns": starts[k], "t_end_ns": ends[k], "wall_s": (ends[k] - starts[k]) / 1e9,
                "ddp_ready_s": ready[k], "ddp_buckets": 1, "gc_pause_s": 0.0,
                "ddp_ready_thread_cpu_s": cpu,
                "ddp_ready_thread_preempted": int(p.get("late_preempted", 0)) if mine else 0,
                "ddp_ready_thread_waits": int(p.get("late_waits", 0) if mine else p.get("others_late_waits", 0)),
                "thread_cpu_s": cpu + 0.001,
                "thread_preempted": int(p.get("late_preempted", 0) + p.get("tail_preempted", 0)) if mine else 0,
                "thread_waits": 1 + int(p.get("late_waits", 0) + p.get("tail_waits", 0) if mine
                                        else p.get("others_late_waits", 0)),
                "before_s": 0.001 + (p.get("arrive", 0.0) if mine else 0.0),
                "before_thread_cpu_s": 0.001 + (p.get("arrive_cpu", 0.0) if mine else 0.0),
                "before_thread_preempted": int(p.get("arrive_preempted", 0)) if mine else 0,
                "before_thread_waits": int(p.get("arrive_waits", 0)) if mine else 0,
            })
            if queued:
                late_q, tail_q = (p.get("late_queued", 0.0005), p.get("tail_queued", 0.0005)) if mine else (0.0005,) * 2
                rows[-1].update(ddp_ready_thread_queued_s=late_q, thread_queued_s=late_q + tail_q,
                                before_thread_queued_s=p.get("arrive_queued", 0.0005) if mine else 0.0005)
        t = {k: ends[k] + 1_000_000 for k in (0, 1)}
    return rows


def test_the_cross_rank_report_tells_preemption_a_sleep_and_compute_apart():
    from gnnmon.report.compare.cross_rank import cross_rank

    job = cross_rank(_job({
        5: {"arrive": 0.008, "arrive_preempted": 2},  # descheduled between steps
        11: {"late": 0.080, "late_waits": 1},  # a sleep in backward
        17: {"late": 0.030, "late_cpu": 0.030},  # a longer backward, computed
        23: {"late": 0.012, "late_preempted": 3},  # descheduled in backward
        26: {"arrive": 0.015, "arrive_cpu": 0.015, "arrive_preempted": 1},  # computed between steps
    }))
    spikes = {s["index"]: (s["slowest_rank"], s["via"], s["cause"]) for s in job["spikes"]}
    assert spikes == {11: (1, "buckets", "waiting (rank 1)"), 17: (1, "buckets", "compute (rank 1)"),
                      26: (1, "arrival", "unexplained (rank 1)")}
    preempted = {s["index"]: (s["slowest_rank"], s["via"], s["cause"]) for s in job["preempted"]}
    assert preempted == {5: (1, "arrival", "preempted (rank 1)"), 23: (1, "buckets", "preempted (rank 1)")}
    assert abs(job["preempted"][0]["delay_s"] - 0.008) < 1e-6
    assert job["stragglers"] == []
    text = gnnmon.Report(gnnmon.RunResult(records=_job({5: {"arrive": 0.008, "arrive_preempted": 2}}))).markdown()
    assert ("Steps held up by a rank the OS descheduled" in text
            and "1, the longest 8.0 ms (step 5 of step, rank 1)" in text)
    assert "No step was held up by one rank." in text


def test_a_row_that_ends_late_is_one_delay_not_also_the_next_steps_arrival():
    """Rank 1's row ends after the others' (its part after the buckets): the OS took its thread
    off the CPU while it waited no more than usual (step 8), it slept there (step 14), or its one
    usual wait, the all-reduce's, ran long (step 20). Each is one verdict at that step; the next
    step, which it starts that much later, is not late."""
    from gnnmon.report.compare.cross_rank import cross_rank

    plant = {8: {"tail": 0.008, "tail_preempted": 1}, 14: {"tail": 0.010, "tail_waits": 1}, 20: {"tail": 0.007}}
    job = cross_rank(_job(plant))
    assert [(s["index"], s["slowest_rank"], s["via"], s["cause"]) for s in job["spikes"]] == [
        (14, 1, "row", "waiting (rank 1)")]
    assert abs(job["spikes"][0]["delay_s"] - 0.010) < 1e-6
    assert [(s["index"], s["via"], s["cause"]) for s in job["preempted"]] == [(8, "row", "preempted (rank 1)")]
    assert abs(job["preempted"][0]["delay_s"] - 0.008) < 1e-6
    assert [(s["index"], s["via"], s["cause"]) for s in job["collective"]] == [(20, "row", "collective (rank 1)")]
    assert abs(job["collective"][0]["delay_s"] - 0.007) < 1e-6
    text = gnnmon.Report(gnnmon.RunResult(records=_job(plant))).markdown()
    assert ("Steps whose collective (the all-reduce, a broadcast) ended late on one rank" in text
            and ": 1, the longest 7.0 ms (step 20 of step, rank 1)" in text)
    # the late start alone, with nothing before it to explain it, is still a late arrival
    late = cross_rank(_job({8: {"arrive": 0.008, "arrive_waits": 1}}))
    assert [(s["index"], s["via"], s["cause"]) for s in late["spikes"]] == [(8, "arrival", "waiting (rank 1)")]


def test_a_wait_every_rank_made_is_a_collective_and_a_wait_of_one_rank_is_its_own():
    """Before their buckets, both ranks gave the CPU up at step 1 (DDP's bucket rebuild, a
    broadcast), rank 1 for 8 ms longer: its collective ended late, not a spike. At step 9 rank 1
    alone waited (a sleep in its backward): waiting, a spike, although rank 0 waited at step 1."""
    from gnnmon.report.compare.cross_rank import cross_rank

    job = cross_rank(_job({1: {"late": 0.008, "late_waits": 1, "others_late_waits": 2},
                           9: {"late": 0.030, "late_waits": 1}}))
    assert [(s["index"], s["via"], s["cause"]) for s in job["spikes"]] == [(9, "buckets", "waiting (rank 1)")]
    assert [(s["index"], s["via"], s["cause"]) for s in job["collective"]] == [(1, "buckets", "collective (rank 1)")]
    assert abs(job["collective"][0]["delay_s"] - 0.008) < 1e-6
    # rank 1 waited more often than rank 0 did: that wait was its own
    own = cross_rank(_job({1: {"late": 0.008, "late_waits": 2, "others_late_waits": 1}}))
    assert [(s["index"], s["cause"]) for s in own["spikes"]] == [(1, "waiting (rank 1)")] and own["collective"] == []


def test_without_counters_the_causes_are_what_they_were():
    from gnnmon.report.compare.cross_rank import cross_rank

    rows = [{k: v for k, v in r.items() if "thread" not in k and k != "before_s"}
            for r in _job({11: {"late": 0.080, "late_waits": 1}, 23: {"late": 0.012, "late_preempted": 3}})]
    job = cross_rank(rows)
    assert {s["index"]: s["cause"] for s in job["spikes"]} == {11: "compute (rank 1)", 23: "compute (rank 1)"}
    assert job["preempted"] == []



@needs_thread_usage
def test_the_counters_are_read_twice_per_top_level_row_and_never_otherwise(monkeypatch):
    """What the step's path pays, counted: two reads for a top-level row (its start and end), none
    for a row nested in it, none with ``sched=False``."""
    import gnnmon.record.probe_sched as row_module  # the sched probe reads them

    reads = []
    monkeypatch.setattr(row_module, "thread_times", lambda: reads.append(1) or (0.0, 0, 0, None))

    @cuda_timed
    def inner() -> None:
        pass

    @cuda_timed
    def outer() -> None:
        inner()

    with gnnmon.collect(sched=True) as run:
        outer()
        outer()
    assert len(reads) == 4 and len(run.records) == 4
    assert all("thread_cpu_s" in r for r in run.records if r["parent"] is None)
    assert not any("thread_cpu_s" in r for r in run.records if r["parent"] is not None)
    with gnnmon.collect(sched=False):
        outer()
    assert len(reads) == 4


def _forward_sleep_rows(sched_fields) -> list[dict]:
    """Two ranks, 20 steps with phases: rank 1 sleeps 50 ms in step 5's forward, rank 0 waits for
    it in its backward (the all-reduce). ``sched_fields(slow, rank)``: each row's ``thread_*``
    counters (the time before each row: 1 ms of CPU, no switch)."""
    rows, t = [], 0
    for i in range(20):
        slow = i == 5
        for rank in (0, 1):
            forward = 0.010 + (0.050 if slow and rank == 1 else 0.0)
            backward = 0.010 + (0.050 if slow and rank == 0 else 0.0)
            wall = forward + backward
            rows.append({"label": "step", "index": i, "rank": rank, "parent": None, "backend": "cpu",
                         "t_start_ns": t, "t_end_ns": t + int(wall * 1e9), "wall_s": wall,
                         "phase_forward_s": forward, "phase_backward_s": backward, "gc_pause_s": 0.0,
                         "before_s": 0.001, "before_thread_cpu_s": 0.001, "before_thread_preempted": 0,
                         "before_thread_waits": 0, **sched_fields(slow, rank)})
        t += int(0.120 * 1e9)
    return rows


def test_a_sleep_in_one_ranks_forward_is_its_wait_not_a_collective_though_the_others_waited_for_it():
    """Rank 1 sleeps 50 ms in step 5's forward (one wait more than usual, off the CPU); rank 0
    waits for it in the all-reduce of its backward, giving the CPU up three times more than usual.
    The delay is seen in a phase, whose window is the whole row: the others' extra waits there are
    their wait for rank 1, not a collective every rank made."""
    from gnnmon.report.compare.cross_rank import cross_rank

    job = cross_rank(_forward_sleep_rows(lambda slow, rank: {
        "thread_cpu_s": 0.019, "thread_preempted": 0,
        "thread_waits": 1 + (3 if slow and rank == 0 else 1 if slow else 0)}))
    step = next(s for s in job["spikes"] if s["index"] == 5)
    assert (step["slowest_rank"], step["via"], step["cause"]) == (1, "forward", "waiting (rank 1)")
    assert job["collective"] == []


def _forward_sleep_job(queued: bool) -> list[dict]:
    """Rank 1 sleeps 50 ms in step 5's forward. Being the slowest, it skips its usual wait in the
    all-reduce, so its row counts one wait, as usual, and on a busy machine three preemptions
    against a usual one. With ``queued``, its run-queue time is 3 ms there against a usual 1 ms."""
    def fields(slow: bool, rank: int) -> dict:
        mine = slow and rank == 1
        out = {"thread_cpu_s": 0.017, "thread_preempted": 3 if mine else 1, "thread_waits": 1}
        if queued:
            out.update(thread_queued_s=0.003 if mine else 0.001, before_thread_queued_s=0.0)
        return out

    return _forward_sleep_rows(fields)


def test_with_run_queue_time_a_sleep_that_took_the_usual_waits_place_is_waiting_not_preempted():
    """Counting switches, the sleep looks like preemption (no more waits than usual, more
    preemptions); weighing time, 48 of its 50 extra ms off the CPU were given up."""
    from gnnmon.report.compare.cross_rank import cross_rank

    def cause(rows: list[dict]) -> tuple:
        job = cross_rank(rows)
        step = next(s for s in job["spikes"] + job["preempted"] if s["index"] == 5)
        return step["slowest_rank"], step["via"], step["cause"]

    assert cause(_forward_sleep_job(queued=True)) == (1, "forward", "waiting (rank 1)")
    assert cause(_forward_sleep_job(queued=False)) == (1, "forward", "preempted (rank 1)")  # counts only


def test_with_run_queue_time_the_larger_share_of_the_time_off_the_cpu_names_the_cause():
    """Step 5: 8 ms late to arrive, 7.5 ms of it on a run queue, though the thread also gave the
    CPU up twice (a short read): preempted. Step 23: buckets 12 ms late, 11 ms queued, two waits:
    preempted. Step 11: buckets 80 ms late, given up (a sleep), four preemptions: waiting. Step
    17: computed. Counting switches instead, steps 5 and 23 would be waits."""
    from gnnmon.report.compare.cross_rank import cross_rank

    plant = {5: {"arrive": 0.008, "arrive_waits": 2, "arrive_queued": 0.0075},
             11: {"late": 0.080, "late_waits": 1, "late_preempted": 4, "late_queued": 0.002},
             17: {"late": 0.030, "late_cpu": 0.030},
             23: {"late": 0.012, "late_waits": 2, "late_preempted": 2, "late_queued": 0.011}}
    job = cross_rank(_job(plant, queued=True))
    assert {s["index"]: s["cause"] for s in job["spikes"]} == {11: "waiting (rank 1)", 17: "compute (rank 1)"}
    assert {s["index"]: (s["via"], s["cause"]) for s in job["preempted"]} == {
        5: ("arrival", "preempted (rank 1)"), 23: ("buckets", "preempted (rank 1)")}
    counted = cross_rank(_job(plant))
    assert {s["index"]: s["cause"] for s in counted["spikes"]} == {
        5: "waiting (rank 1)", 11: "waiting (rank 1)", 17: "compute (rank 1)", 23: "waiting (rank 1)"}


needs_run_queue = pytest.mark.skipif(not sched.QUEUED_AVAILABLE, reason="this kernel keeps no schedstat run delay")


def _read_around(work) -> tuple[float, float, float]:
    """``(wall s, CPU s, run-queue s)`` of the calling thread over ``work()``: the clock read outside
    the counters' reads, so the wall holds their window (the run-queue time in it is no more than
    the wall minus the CPU time)."""
    t0 = time.perf_counter()
    s0 = sched.thread_times()
    work()
    s1 = sched.thread_times()
    wall = time.perf_counter() - t0
    return wall, s1[0] - s0[0], s1[3] - s0[3]  # type: ignore[operator]


@needs_run_queue
def test_run_queue_time_is_none_of_a_sleep_and_most_of_a_shared_cores_wait():
    """Planted: a 30 ms sleep (off the CPU, given up: the run-queue time is at most the wake-up's
    wait, so the time off the CPU less it covers the sleep) and a spin on a core a spinning process
    shares (off the CPU waiting for that core: on the run queue, as the thread never gives it up)."""
    wall, cpu, queued = _read_around(lambda: time.sleep(0.030))
    assert 0 <= queued and wall - cpu - queued >= 0.0295  # the sleep, given up

    @cuda_timed
    def step() -> None:
        _spin(0.050)

    with _sharing_a_core():
        wall, cpu, queued = _read_around(lambda: _spin(0.050))
        with gnnmon.collect(sched=True) as run:
            step()
    assert wall - cpu >= 0.010  # the spinner held the core
    assert 0.5 * (wall - cpu) <= queued <= wall - cpu
    # the row's counters: read around its wall (its decorators' work between), so the run-queue
    # time can only be more of the time off the CPU than over the spin alone
    (row,) = run.records
    off = row["wall_s"] - row["thread_cpu_s"]
    assert off >= 0.010 and row["thread_queued_s"] >= 0.5 * off


@needs_run_queue
def test_each_thread_and_each_forked_child_reads_its_own_run_queue_time():
    """The file kept open is the reading thread's own (``/proc/<pid>/task/<tid>/schedstat``): in
    another thread, and in a forked child of a thread that had opened its own."""
    import threading

    def own_file() -> str:
        assert sched.thread_queued_s() is not None
        return os.readlink(f"/proc/self/fd/{sched.sched_state().fd}")

    here = own_file()
    assert here == f"/proc/{os.getpid()}/task/{threading.get_native_id()}/schedstat"
    seen = []
    worker = threading.Thread(target=lambda: seen.append((own_file(), threading.get_native_id())))
    worker.start()
    worker.join()
    assert seen[0][0] == f"/proc/{os.getpid()}/task/{seen[0][1]}/schedstat"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its file and exit without running the parent's cleanup
        try:
            os.write(write, f"{own_file()}|{os.getpid()}|{threading.get_native_id()}".encode())
        finally:
            os._exit(0)
    os.close(write)
    got = os.read(read, 4096).decode().split("|")
    os.close(read)
    os.waitpid(pid, 0)
    assert got[0] == f"/proc/{got[1]}/task/{got[2]}/schedstat" and got[1] != str(os.getpid())


def test_without_the_kernels_run_queue_time_rows_carry_the_counts_alone(monkeypatch):
    monkeypatch.setattr(sched, "QUEUED_AVAILABLE", False)
    assert sched.thread_queued_s() is None
    if not sched.AVAILABLE:
        return
    assert sched.thread_times()[3] is None
    with gnnmon.collect(sched=True) as run:
        cuda_timed(lambda: None)()
    assert "thread_cpu_s" in run.records[0] and not any(k.endswith("queued_s") for k in run.records[0])


@needs_run_queue
def test_a_schedstat_file_closed_under_gnnmon_is_opened_anew_and_no_other_file_is_closed():
    """User code that closes every descriptor (a daemonising library) closes the thread's schedstat
    file: that read gives None, the next opens its own file again; the number, which may belong to
    another file by then, is never closed by gnnmon."""
    import threading

    def in_thread() -> list:
        seen = [sched.thread_queued_s()]
        fd = sched.sched_state().fd
        os.close(fd)
        other = os.open(os.devnull, os.O_RDONLY)  # takes the number back, most likely
        try:
            seen.append(sched.thread_queued_s())  # reads /dev/null or EBADF: no figure
            seen.append(sched.thread_queued_s())  # its own file again
            seen.append(os.readlink(f"/proc/self/fd/{sched.sched_state().fd}"))
            seen.append(os.fstat(other).st_ino == os.stat(os.devnull).st_ino)  # still open, still /dev/null
        finally:
            os.close(other)
        return seen

    out: list = []
    worker = threading.Thread(target=lambda: out.extend(in_thread()))
    worker.start()
    worker.join()
    first, broken, again, path, other_open = out
    assert isinstance(first, float) and broken is None and isinstance(again, float) and again >= first
    assert path.endswith("/schedstat") and other_open


@needs_thread_usage
def test_a_forked_childs_first_row_has_no_time_before_it_from_its_parent():
    """A forked child's thread counts CPU time, switches and run-queue time from zero: its first row
    is not measured from its parent's last one (which would give negative counts)."""
    import json

    @cuda_timed
    def step() -> None:
        _spin(0.005)

    with gnnmon.collect(sched=True) as run:
        step()
    assert "thread_cpu_s" in run.records[0]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            with gnnmon.collect(sched=True) as child:
                step()
                step()
            os.write(write, json.dumps([{k: v for k, v in r.items() if "thread" in k or k == "before_s"}
                                        for r in child.records]).encode())
        finally:
            os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    first, second = json.loads(b"".join(chunks))
    assert "before_s" not in first and not any(k.startswith("before_") for k in first)
    assert second["before_s"] >= 0 and all(second[k] >= 0 for k in second if k.startswith("before_thread_"))
    assert first["thread_cpu_s"] >= 0.005 and first["thread_waits"] >= 0


def test_late_buckets_whose_thread_computed_no_more_than_usual_are_not_called_compute():
    """At step 18 rank 0 reached its buckets 10 ms sooner than usual and rank 1 12 ms later, 6 ms
    more CPU and 6 ms more off it (half queued): a 22 ms spike of which neither the CPU nor the time
    off it is half. Its cause is "unexplained", not "compute"; 30 ms more CPU is "compute"."""
    from gnnmon.report.compare.cross_rank import cross_rank

    def plant(late_cpu: float) -> list[dict]:
        rows = _job({18: {"late": 0.012 if late_cpu < 0.012 else late_cpu, "late_cpu": late_cpu,
                          "late_queued": 0.0035}}, queued=True)
        (early,) = [r for r in rows if r["index"] == 18 and r["rank"] == 0]
        early.update(ddp_ready_s=0.010, ddp_ready_thread_cpu_s=0.010)
        return rows

    (spike,) = cross_rank(plant(0.006))["spikes"]
    assert (spike["index"], spike["slowest_rank"], spike["via"]) == (18, 1, "buckets")
    assert abs(spike["delay_s"] - 0.022) < 1e-6
    assert spike["cause"] == "unexplained (rank 1)"
    (computed,) = cross_rank(plant(0.030))["spikes"]
    assert (computed["index"], computed["cause"]) == (18, "compute (rank 1)")
