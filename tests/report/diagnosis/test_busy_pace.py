"""The usual call's pace (gnnmon/report/busy.py: pace), the wall seconds it loses to each CPU second
other processes take from it, is more than 1 only where the rows say it lost its time to sharing
its cores: its thread's run queue, where recorded, else cores full during the steady calls. A step
that computes a tenth of its time because it waits on the GPU, I/O or a sleep, on cores with idle
time, is not a busy machine for a rise in the others' load that could not explain its slow calls
at pace 1; a CPU-bound step on a core shared with three processes still is. Planted rows, each
call's own CPU, the others' rate and the idle time adding up to the cores the process may use."""

from __future__ import annotations

import numpy as np
import pytest

from gnnmon.data.table import Table
from gnnmon.report import busy
from gnnmon.report.analysis import spikes
from gnnmon.report.diagnosis import machine_findings as mf
from gnnmon.report.loops import Loop

N = 40


def row(i: int, wall: float, cpu: float, others: float, idle: float, queued: float | None = None) -> dict:
    """A call of one thread (``thread_cpu_s`` = ``cpu_s``) on one core: ``others`` and ``idle`` in %
    of it, adding up with the call's own share (``cpu / wall``) to 100."""
    assert others + idle + 100.0 * cpu / wall == pytest.approx(100.0, abs=1e-9)
    r = {"label": "step", "index": i, "wall_s": wall, "cpu_s": cpu, "thread_cpu_s": cpu, "others_cpu_pct": others,
         "idle_cpu_pct": idle}
    return r if queued is None else {**r, "thread_queued_s": queued}


def loop_of(rows: list[dict]) -> Loop:
    return Loop("step", Table(rows).parts["step"])


def gpu_bound_rows(slow_others: float) -> list[dict]:
    """A step of 100 ms that computes 10 ms of it (it waits on the GPU, I/O or a sleep) on a core
    the others take 60 % of, 30 % idle; every 4th call (10 of them) takes 200 ms, computing the same
    10 ms, while the others take ``slow_others`` %."""
    return [row(i, 0.2, 0.01, slow_others, 95.0 - slow_others) if i % 4 == 3 else row(i, 0.1, 0.01, 60.0, 30.0)
            for i in range(N)]


@pytest.mark.parametrize("one_thread", [False, True])
def test_a_gpu_bound_step_on_cores_with_idle_time_is_not_a_busy_machine_for_a_small_rise(one_thread):
    """The slow calls' others rise from 60 to 76 % (idle 19 %: under the full line during them):
    16 % of 200 ms is 32 ms of CPU, under half the 100 ms excess, and with 30 % of the core idle in
    the usual call its CPU share (a tenth) was its own waiting: pace 1, no busy machine (at the
    usual call's level over its CPU time, 10, the rise would hold 320 ms). The calls waited off the
    CPU: each spike says so. Where the others rise to 86 % (52 ms of CPU, over half the excess) the
    same calls are the machine's at pace 1."""
    rows = gpu_bound_rows(76.0)
    lp = loop_of(rows)
    load = busy.load(lp)
    assert load is not None and not busy.machine_calls(lp, load, one_thread).any()
    total = sum(r["wall_s"] for r in rows)
    assert mf.busy_machine(lp, total, one_thread) is None
    assert load[2:] == (60.0, 1.0)
    slow = spikes(rows, one_thread=one_thread)
    assert [(s["index"], s["cause"]) for s in slow] == [(i, busy.WAITED) for i in range(3, N, 4)], slow
    rows = gpu_bound_rows(86.0)
    crowd = busy.machine_calls(loop_of(rows), busy.load(loop_of(rows)), one_thread)
    assert np.flatnonzero(crowd).tolist() == list(range(3, N, 4))


def shared_core_busy(rows: list[dict], one_thread: bool) -> dict:
    """The shared core's calls (125 ms computing 31.25 ms at others 75 %; every 3rd, 13 of them,
    156.25 ms at 80 %): the others' usual 75 % and pace 4, no call crowded at pace 1, the 13 the
    machine's at pace 4, and the busy-machine finding holding their 31.25 ms each, returned."""
    lp = loop_of(rows)
    load = busy.load(lp)
    assert load is not None and load[2:] == (75.0, 4.0)
    assert not busy.crowded(load[0], load[1], lp.t, lp.level, 75.0).any()  # pace 1
    assert np.flatnonzero(busy.machine_calls(lp, load, one_thread)).tolist() == list(range(2, N, 3))
    said = mf.busy_machine(lp, sum(r["wall_s"] for r in rows), one_thread)
    assert said is not None and said["at_stake"] == 13 * 0.03125, said
    return said


@pytest.mark.parametrize("one_thread", [False, True])
def test_a_cpu_bound_step_on_a_core_shared_with_three_processes_is_still_a_busy_machine(one_thread):
    """A run pinned to one core of a 2-core machine beside three CPU-bound processes gets a quarter
    of it: 125 ms calls computing 31.25 ms, others 75 %, none idle; a fourth process in every 3rd
    call (13 of them) leaves it a fifth: 156.25 ms for the same CPU, others 80 %. The rise took
    5 % of 156.25 ms, 7.8 ms of CPU, under half the 31.25 ms excess, but at the usual call's pace on
    a full core (4 wall seconds a CPU second) it cost 31.25 ms, all of it: a busy machine. At pace 1
    the same calls are not crowded."""
    said = shared_core_busy([row(i, 0.15625, 0.03125, 80.0, 0.0) if i % 3 == 2 else
                             row(i, 0.125, 0.03125, 75.0, 0.0) for i in range(N)], one_thread)
    assert said["kind"] == busy.CAUSE, said
    assert said["words"].startswith("13 call(s) of step ran on full cores while other processes took 80 % of a core "
                                    "on them (usually 75 %)"), said


def test_a_gpu_bound_step_whose_thread_hardly_queued_is_not_a_busy_machine_on_full_cores():
    """``thread_queued_s`` recorded, torch on several threads (its run queue does not gate the
    call): 125 ms calls whose thread computes 15.625 ms and waits 3.9 ms for a core on a full core
    (others 87.5 %), the rest on the GPU: pace (15.625 + 3.906) / 15.625 = 1.25. Every 4th call
    waits 125 ms more on the GPU, queueing the same, while the others fill the core it left (93.75 %):
    their rise took 15.6 ms of CPU, 19.5 ms at that pace, under half the 125 ms excess. On full
    cores the level over the CPU time (8) would make the others' rise hold the whole excess of any
    call whose own CPU stayed: here the queue says the usual call lost little to sharing. The
    calls waited off the CPU."""
    rows = [row(i, 0.25, 0.015625, 93.75, 0.0, 0.00390625) if i % 4 == 3 else
            row(i, 0.125, 0.015625, 87.5, 0.0, 0.00390625) for i in range(N)]
    lp = loop_of(rows)
    load = busy.load(lp)
    assert load is not None and not busy.machine_calls(lp, load, False).any()
    assert mf.busy_machine(lp, sum(r["wall_s"] for r in rows)) is None
    assert load[2:] == (87.5, 1.25)
    slow = spikes(rows)
    assert [(s["index"], s["cause"]) for s in slow] == [(i, busy.WAITED) for i in range(3, N, 4)], slow


@pytest.mark.parametrize("one_thread", [False, True])
def test_a_cpu_bound_step_whose_thread_queued_for_its_shared_core_is_a_busy_machine(one_thread):
    """The core shared with three processes, the run queue recorded: 125 ms calls computing
    31.25 ms and queued 93.75 ms (pace 4); every 3rd call queues 125 ms beside a fourth process
    (156.25 ms, others 80 %): a busy machine on one thread (its queue grew by all the excess) or
    several; at pace 1 not crowded."""
    shared_core_busy([row(i, 0.15625, 0.03125, 80.0, 0.0, 0.125) if i % 3 == 2 else
                      row(i, 0.125, 0.03125, 75.0, 0.0, 0.09375) for i in range(N)], one_thread)


def test_the_pace_reads_the_run_queue_then_the_cores_fullness():
    """Binary-exact steady calls of 125 ms computing 15.625 ms (level over CPU: 8). The run queue
    recorded: each call's (cpu + queued) / cpu, median over the steady calls (3 calls at 4, 2 at 2:
    4; a call 46.875 ms queued and asleep 62.5 ms runs a quarter of its runnable time: 4, not 8),
    at least 1 (queued 0: 1), whatever the idle time; not recorded in any steady call: the idle
    time decides. No queue: median idle under 25 % (25 less 1/1024) is full, 8; at 25 % or more, 1;
    idle not given (a caller that judges each call's fullness itself), 8; no CPU time, 1."""
    cpu, steady = np.full(5, 0.015625), np.ones(5, dtype=bool)
    full, spare = np.zeros(5), np.full(5, 50.0)
    queued = np.array([0.046875, 0.046875, 0.046875, 0.015625, 0.015625])
    assert busy.pace(cpu, steady, 0.125, spare, queued) == 4.0
    assert busy.pace(cpu, steady, 0.125, full, np.zeros(5)) == 1.0
    assert busy.pace(cpu, steady, 0.125, full, np.full(5, np.nan)) == 8.0
    assert busy.pace(cpu, steady, 0.125, spare, np.full(5, np.nan)) == 1.0
    assert busy.pace(cpu, steady, 0.125, np.full(5, 25.0 - 2**-10)) == 8.0
    assert busy.pace(cpu, steady, 0.125, np.full(5, 25.0)) == 1.0
    assert busy.pace(cpu, steady, 0.125, np.full(5, np.nan)) == 1.0  # fullness not sampled: not full
    assert busy.pace(cpu, steady, 0.125) == 8.0
    assert busy.pace(None, steady, 0.125, full) == 1.0
    warm = np.array([False, False, True, True, True])  # the steady calls' median, not the warm-up's
    assert busy.pace(cpu, warm, 0.125, spare, queued[::-1]) == 4.0


def test_a_gpu_bound_calls_own_work_counts_at_pace_1_on_cores_with_idle_time():
    """``computed``, torch on one thread: 125 ms calls computing 15.625 ms on a core with 27.5 %
    idle (others 60 %); every 4th call takes 250 ms, its work 7.8 ms more (23.4 ms), while the
    others take 90 % (0.6 % idle). At pace 1 (the usual call waited by its own choice) the 7.8 ms
    hold under half the 125 ms excess: it did not compute it (at the level over the CPU time, 8,
    they would hold 62.5 ms, exactly half). The others' rise took 75 ms of CPU over it, over half
    the excess at pace 1: a busy machine."""
    def slow(i: int) -> dict:
        return row(i, 0.25, 0.0234375, 90.0, 100.0 - 90.0 - 9.375)

    rows = [slow(i) if i % 4 == 3 else row(i, 0.125, 0.015625, 60.0, 27.5) for i in range(N)]
    lp = loop_of(rows)
    load = busy.load(lp)
    assert load is not None and np.flatnonzero(busy.machine_calls(lp, load, True)).tolist() == list(range(3, N, 4))
    assert load[3] == 1.0
    idle = lp.column("idle_cpu_pct")
    assert not busy.computed(busy.work(lp, True), lp.steady, lp.t, lp.level, idle).any()
    assert busy.computed(busy.work(lp, True), lp.steady, lp.t, lp.level).tolist() == [i % 4 == 3 for i in range(N)]
    slowed = spikes(rows, one_thread=True)
    assert [(s["index"], s["cause"]) for s in slowed] == [(i, busy.CAUSE) for i in range(3, N, 4)], slowed


@pytest.mark.parametrize("one_thread", [False, True])
def test_slow_calls_that_raised_are_judged_at_the_same_pace(one_thread):
    """The GPU-bound step's slow calls of the first test, each raising (rows outside the loop,
    judged by the spikes alone): at pace 1 the others' rise to 76 % cannot explain them, so none
    is the machine's; at 86 % each is."""
    for others, cause in ((76.0, None), (86.0, busy.CAUSE)):
        rows = [{**r, "error": "ValueError"} if r["index"] % 4 == 3 else r for r in gpu_bound_rows(others)]
        slow = spikes(rows, one_thread=one_thread)
        assert [s["index"] for s in slow] == list(range(3, N, 4)), slow
        assert all((s["cause"] == busy.CAUSE) is (cause is not None) for s in slow), slow
