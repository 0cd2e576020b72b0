"""A wait in every call (:func:`gnnmon.report.diagnosis.machine_findings.steady_wait`): a host step
that spends the same share of each call off the CPU has no excess over its level, so the findings
that read one cannot see it. Planted rows: 40 calls of 125 ms whose process computed 31.25 ms
each (binary-exact, so the words print exactly), 38 of them steady; each finding asserted whole
against the module's rule. Then a live run: a step on one thread that spins 2 ms of CPU and
sleeps 8 ms, every call."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
import torch

import gnnmon
from gnnmon.data.table import Table
from gnnmon.devices import sched
from gnnmon.report.diagnosis import machine_findings as mf
from gnnmon.report.diagnosis.findings_markdown import headline
from gnnmon.report.loops import Loop
from tests.devices.test_sched import _spin

LEVEL = 0.125
CPU = 0.03125
STEADY = 38
TOTAL = 40 * LEVEL
COST = STEADY * (LEVEL - CPU)  # 3.5625 s: each steady call's 93.75 ms off the CPU
HEAD = ("step spent 75 % of each call off the CPU: 93.8 ms of 125.0 ms (median of 38 steady calls, its {who} "
        "computing 31.2 ms), 3.56 s in all; a wait in every call, not an excess over the level")
GAVE_UP = "the step gave the CPU up, on I/O, a lock (the GIL: another thread of the process) or a sleep in the step"
UNKNOWN = ("waiting for a core (other processes' load) or on I/O, a lock or a sleep in the step; which, the rows "
           "cannot say ({why})")
OWN_WAIT_NEXT = ("the step's own wait, the job's cost: find the call it blocks in (py-spy dump --pid PID while it "
                 "waits, or torch.profiler's CPU trace); a wait for the next batch is watch_loader's data_wait_s")
WAITED_NEXT = ("collect(sample=0.5) samples the load beside the run and collect(sched=True) the thread's run-queue "
               "time: either tells a busy machine (free cores, a quiet run to compare) from the step's own wait (find "
               "the call it blocks in: py-spy dump --pid PID while it waits)")
ONE_THREAD_NEXT = ("a run with torch on one thread (torch.set_num_threads(1)) and collect(sched=True): its thread's "
                   "run-queue time then tells a busy machine (free cores, a quiet run to compare) from the step's own "
                   "wait (find the call it blocks in: py-spy dump --pid PID while it waits)")
BUSY_NEXT = ("not the job's cost: run where these cores are free (pin the job to cores nothing else uses: taskset -c, "
             "os.sched_setaffinity), and compare timings from a quiet run")


def rows(n: int = 40, cpu: float = CPU, **fields) -> list[dict]:
    return [{"label": "step", "index": i, "wall_s": LEVEL, "cpu_s": cpu, "backend": "cpu", **fields} for i in range(n)]


def loop_of(planted: list[dict]) -> Loop:
    return Loop("step", Table(planted).parts["step"])


def proof(who: str = "process", cpu_field: str = "cpu_s") -> list[dict]:
    return [{"figure": cpu_field, "value": CPU, "unit": "s", "where": f"the {who}'s CPU time, median of 38 steady "
             "call(s)"},
            {"figure": "wall_s/device_s", "value": LEVEL, "unit": "s", "where": "median of those 38 call(s)"},
            {"figure": "off the CPU", "value": LEVEL - CPU, "unit": "s", "where": f"the row's window less its {who}'s "
             "CPU time (at most the call's time and the level), median of those calls"}]


def expected(kind: str, words: str, evidence: list[dict], next_step: str, cost: float = COST) -> dict:
    return {"kind": kind, "label": "step", "share": cost / TOTAL, "of": "time", "at_stake": cost, "unit": "s",
            "words": words, "evidence": evidence, "next": next_step, "every_call": True}


def test_a_wait_in_every_call_with_nothing_else_recorded_is_an_off_cpu_wait_of_unknown_cause():
    why = "neither the machine's load nor the thread's run queue was recorded"
    want = expected("off-CPU wait", HEAD.format(who="process") + ": " + UNKNOWN.format(why=why), proof(), WAITED_NEXT)
    assert mf.steady_wait(loop_of(rows()), TOTAL) == want
    assert headline(want) == "off-CPU wait in every call — 71 % of the run's time"
    # read by the diagnosis, where the excess findings find nothing (no call is slower than the level)
    found = gnnmon.Report(rows()).diagnosis()
    assert found == [want]


def test_the_threads_run_queue_tells_a_busy_machine_from_the_steps_own_wait_at_half_the_wait():
    """Torch on one thread: the thread's CPU time is the step's work, its run-queue time a wait for a
    core. Each call waits 93.75 ms; queued 46.875 ms (half) is the machine's, 46.875 ms less 1/1024 s not."""
    half = (LEVEL - CPU) / 2
    thread = proof("thread", "thread_cpu_s")
    queued = rows(cpu=0.5, thread_cpu_s=CPU, thread_queued_s=half)  # the process's CPU (other threads) is not read
    core = STEADY * half
    assert mf.steady_wait(loop_of(queued), TOTAL, one_thread=True) == expected(
        "busy machine", HEAD.format(who="thread") + ": 1.78 s of it waiting for a core while the thread could run "
        "(other processes' load), the other 1.78 s given up by the step (I/O, a lock, a sleep)",
        [*thread, q_evidence(core)], BUSY_NEXT)
    less = half - 1 / 1024
    own = rows(cpu=0.5, thread_cpu_s=CPU, thread_queued_s=less)
    assert mf.steady_wait(loop_of(own), TOTAL, one_thread=True) == expected(
        "off-CPU wait", HEAD.format(who="thread") + f", of which waiting for a core holds only 1.74 s: {GAVE_UP}",
        [*thread, q_evidence(STEADY * less)], OWN_WAIT_NEXT)


def q_evidence(value: float) -> dict:
    return {"figure": "thread_queued_s", "value": value, "unit": "s", "where": "the thread's run-queue time, summed "
            "over those 38 call(s) (the scheduler's count: collect(sched=True))"}


def test_on_several_threads_the_one_run_queue_recorded_does_not_say_the_cause():
    """The process's CPU time bounds the time no thread of it ran; one thread's run queue is not its."""
    why = "torch runs on several threads, whose run queues are not the one recorded"
    assert mf.steady_wait(loop_of(rows(thread_cpu_s=0.0, thread_queued_s=0.0)), TOTAL) == expected(
        "off-CPU wait", HEAD.format(who="process") + ": " + UNKNOWN.format(why=why), proof(), ONE_THREAD_NEXT)


def idle_evidence(idle: float) -> dict:
    return {"figure": "idle_cpu_pct", "value": idle, "unit": "%", "where": "sampled (psutil, the cores this process "
            "may run on), median of those calls"}


def test_sampled_cores_with_a_quarter_core_idle_are_the_steps_own_wait_full_ones_unknown():
    spare = rows(others_cpu_pct=50.0, idle_cpu_pct=25.0)
    assert mf.steady_wait(loop_of(spare), TOTAL) == expected(
        "off-CPU wait", HEAD.format(who="process") + "; its cores had 25 % of a core idle (sampled), so the machine "
        f"did not hold it: {GAVE_UP}", [*proof(), idle_evidence(25.0)], OWN_WAIT_NEXT)
    full = rows(others_cpu_pct=150.0, idle_cpu_pct=24.0)
    why = "its cores were full while sampled, and the thread's run queue was not recorded"
    assert mf.steady_wait(loop_of(full), TOTAL) == expected(
        "off-CPU wait", HEAD.format(who="process") + ": " + UNKNOWN.format(why=why), [*proof(), idle_evidence(24.0)],
        ONE_THREAD_NEXT)
    unsampled = rows(others_cpu_pct=None, idle_cpu_pct=None)
    unsampled[0].update(others_cpu_pct=50.0, idle_cpu_pct=50.0)  # a warm-up call's sample only
    why = "the load was not sampled while these calls ran"
    assert mf.steady_wait(loop_of(unsampled), TOTAL) == expected(
        "off-CPU wait", HEAD.format(who="process") + ": " + UNKNOWN.format(why=why), proof(), ONE_THREAD_NEXT)


def test_the_time_off_the_cpu_is_the_rows_window_less_its_cpu_time_at_most_the_calls_time():
    """The window holds the CPU time gnnmon spent around the call (1/64 s here, read with the
    call's): it is not time off the CPU. A window the CPU time leaves wider than the call (a
    preempted close, 1/8 s) counts at most the call's time."""
    start = 2**40
    planted = [{**r, "t_start_ns": start + i * 10**9, "t_end_ns": start + i * 10**9 + int((LEVEL + 1 / 64) * 1e9),
                "cpu_s": CPU + 1 / 64} for i, r in enumerate(rows())]
    wait = mf.steady_wait(loop_of(planted), TOTAL)
    assert wait is not None and wait["at_stake"] == COST and wait["evidence"][2]["value"] == LEVEL - CPU, wait
    for r in planted:
        r["t_end_ns"] += 10**9 // 8
    assert mf.steady_wait(loop_of(planted), TOTAL)["at_stake"] == STEADY * LEVEL


def test_only_host_rows_are_read_an_accelerators_wait_is_its_sync():
    assert mf.steady_wait(loop_of(rows(backend="cuda")), TOTAL) is None
    no_backend = rows()
    for r in no_backend:
        del r["backend"]
    assert mf.steady_wait(loop_of(no_backend), TOTAL) is None
    assert mf.steady_wait(loop_of([{k: v for k, v in r.items() if k != "cpu_s"} for r in rows()]), TOTAL) is None


def test_a_wait_is_said_from_five_percent_of_the_run_and_five_steady_calls():
    """Off the CPU 7.8125 ms a call: 38 of them are 5.9 % of the 5 s run; 3.90625 ms, 3.0 %: not said."""
    said = mf.steady_wait(loop_of(rows(cpu=LEVEL - 1 / 128)), TOTAL)
    assert said is not None and said["at_stake"] == STEADY / 128
    assert mf.steady_wait(loop_of(rows(cpu=LEVEL - 1 / 256)), TOTAL) is None
    assert mf.steady_wait(loop_of(rows(n=7)), 7 * LEVEL) is not None  # 5 steady calls
    assert mf.steady_wait(loop_of(rows(n=6)), 6 * LEVEL) is None


def test_a_wait_in_one_stretch_of_calls_is_not_a_wait_in_every_call():
    """Three neighbouring calls off the CPU 93.75 ms (5.6 % of the run), the rest computing: their
    mean is within 3 batch-means errors of 0 (the stretch is one batch's)."""
    planted = rows(cpu=LEVEL)
    for i in (20, 21, 22):
        planted[i]["cpu_s"] = CPU
    assert 3 * (LEVEL - CPU) >= 0.05 * TOTAL
    assert mf.steady_wait(loop_of(planted), TOTAL) is None


def test_the_slowed_calls_are_the_excess_findings_and_each_call_counts_at_most_the_level():
    """10 calls waited 125 ms more (250 ms, computing 31.25 ms): the off-CPU wait's excess, 1.25 s;
    the 28 others' 93.75 ms a call is the wait in every call; a call that compiled is neither's.
    Together under the run's time."""
    planted = rows()
    for i in range(10, 20):
        planted[i]["wall_s"] = 2 * LEVEL
    planted[30].update(compile_frames=1)
    total = sum(r["wall_s"] for r in planted)
    manifest = {"devices": {"torch_threads": 1}}
    found = gnnmon.Report(planted, manifest=manifest).diagnosis()
    steady = [f for f in found if f.get("every_call")]
    excess = [f for f in found if f["kind"] == "off-CPU wait" and not f.get("every_call")]
    assert len(steady) == 1 and steady[0]["at_stake"] == 27 * (LEVEL - CPU), found
    assert len(excess) == 1 and excess[0]["at_stake"] == 10 * LEVEL, found
    assert sum(f["at_stake"] for f in found) <= total


@pytest.mark.skipif(not sched.QUEUED_AVAILABLE, reason="run-queue time is Linux's")
def test_a_live_sleep_in_every_call_is_the_steps_own_wait():
    """Each call spins 2 ms of its thread's CPU and sleeps 8 ms: at least 8 ms of it off the CPU
    (at most the call less its 2 ms of work), in every call. Where the host's load queued the
    thread for half of that or more, it was the machine's too: the test skips saying so."""
    work, sleep = 0.002, 0.008

    @gnnmon.cuda_timed(label="step")
    def step() -> None:
        _spin(work)
        time.sleep(sleep)

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with gnnmon.collect(sched=True) as run:
            for _ in range(30):
                step()
    finally:
        torch.set_num_threads(before)
    found = [f for f in run.report().diagnosis() if f.get("every_call")]
    assert len(found) == 1, run.report().diagnosis()
    wait = found[0]
    m = int(wait["evidence"][0]["where"].split("median of ")[1].split(" steady")[0])
    calls = [r for r in run.records if r["index"] >= 2]
    assert m >= 5 and wait["at_stake"] >= m * sleep
    assert wait["at_stake"] <= sum(r["wall_s"] - work for r in calls)
    # the run queue's part is what the thread could run and did not: the sleep is the rest, in every call,
    # but for what the level leaves counted of a call's wait (the same share of each part)
    level = float(np.median([r["wall_s"] for r in calls]))
    raw = [(r["t_end_ns"] - r["t_start_ns"]) / 1e9 - r["thread_cpu_s"] for r in calls]
    kept = min(min(w, r["wall_s"], level) / w for w, r in zip(raw, calls, strict=True))
    core = next(e["value"] for e in wait["evidence"] if e["figure"] == "thread_queued_s")
    assert wait["at_stake"] - core >= m * sleep * kept, (wait, kept)
    if wait["kind"] == "busy machine":
        queued = float(np.median([r["thread_queued_s"] for r in calls]))
        assert queued >= 0.5 * sleep, wait  # the machine's only where it queued the thread that long
        pytest.skip(f"the host's load (load average {os.getloadavg()[0]:.1f}) queued the thread {queued * 1e3:.1f} ms "
                    "a call (median): the machine's as much as the sleep's")
    assert wait["kind"] == "off-CPU wait" and GAVE_UP in wait["words"], wait
