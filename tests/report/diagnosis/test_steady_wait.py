"""A wait in every call (:func:`gnnmon.report.diagnosis.machine_findings.steady_wait`): a host step
that spends the same share of each call off the CPU has no excess over its level, so the findings
that read one cannot see it. Planted rows: 40 calls of 125 ms whose process computed 31.25 ms
each (binary-exact, so the words print exactly), 38 of them steady; each finding asserted whole
against the module's rule. Then a live run: a step on one thread that spins 2 ms of CPU and
sleeps 8 ms, every call: the sleep is the step's own wait, whatever the host's load adds."""

from __future__ import annotations

import time
import warnings

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
HEAD = ("step spent 75 % of each call off the CPU: 93.8 ms of 125.0 ms (median of 38 steady calls), no thread of "
        "the process running, 3.56 s in all; a wait in every call, not an excess over the level")
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
STEADY_BUSY_NEXT = ("free cores for the step: other processes' (run where these cores are free: taskset -c, "
                    "os.sched_setaffinity; compare timings from a quiet run) or this job's own (fewer threads and "
                    "workers than its usable cores)")


def rows(n: int = 40, cpu: float = CPU, **fields) -> list[dict]:
    return [{"label": "step", "index": i, "wall_s": LEVEL, "cpu_s": cpu, "backend": "cpu", **fields} for i in range(n)]


def loop_of(planted: list[dict]) -> Loop:
    return Loop("step", Table(planted).parts["step"])


def proof(cpu: float = CPU) -> list[dict]:
    return [{"figure": "cpu_s", "value": cpu, "unit": "s", "where": "the process's CPU time, median of 38 steady "
             "call(s)"},
            {"figure": "wall_s/device_s", "value": LEVEL, "unit": "s", "where": "median of those 38 call(s)"},
            {"figure": "off the CPU", "value": LEVEL - cpu, "unit": "s", "where": "the call's time less its "
             "process's CPU time and its excess over the level, median of those calls"}]


def expected(kind: str, words: str, evidence: list[dict], next_step: str, cost: float = COST,
             total: float = TOTAL) -> dict:
    return {"kind": kind, "label": "step", "share": cost / total, "of": "time", "at_stake": cost, "unit": "s",
            "words": words, "evidence": evidence, "next": next_step, "every_call": True}


def test_a_wait_in_every_call_with_nothing_else_recorded_is_an_off_cpu_wait_of_unknown_cause():
    why = "neither the machine's load nor the thread's run queue was recorded"
    want = expected("off-CPU wait", HEAD + ": " + UNKNOWN.format(why=why), proof(), WAITED_NEXT)
    assert mf.steady_wait(loop_of(rows()), TOTAL) == [want]
    assert headline(want) == "off-CPU wait in every call — 71 % of the measured time"
    # read by the diagnosis, where the excess findings find nothing (no call is slower than the level)
    assert gnnmon.Report(rows()).diagnosis() == [want]
    # torch on one thread with its CPU time recorded but not its run queue: nothing splits the wait
    assert mf.steady_wait(loop_of(rows(thread_cpu_s=CPU)), TOTAL, one_thread=True) == [want]


def q_evidence(value: float) -> dict:
    return {"figure": "thread_queued_s", "value": value, "unit": "s", "where": "the thread's run-queue time, summed "
            "over those 38 call(s) (the scheduler's count: collect(sched=True)); all of a call's time off the CPU "
            "where the thread never gave it up (thread_waits 0)"}


def core_words(each: str, cost: str, who: str = "other processes, or this process's other threads") -> str:
    return (f"step waited for a core in every call: {each} of 125.0 ms (median of 38 steady calls), its thread ready "
            f"to run while the cores ran other work ({who}), {cost} in all; not an excess over the level")


def own_words(each: str, cost: str, t: str = "125.0 ms") -> str:
    return (f"step gave the CPU up in every call: {each} of {t} (median of 38 steady calls), no thread of the "
            f"process running and its thread not waiting for a core, {cost} in all; not an excess over the level: "
            f"{GAVE_UP}")


def test_on_one_thread_the_run_queue_splits_the_wait_into_a_wait_for_a_core_and_the_steps_own():
    """Torch on one thread, its run queue recorded: each call's 93.75 ms off the CPU is the thread's
    too; queued 46.875 ms of it (half), the other half given up (a voluntary wait each call): two
    findings of 1.78 s each. Queued 3.90625 ms a call (148 ms in all, under 5 % of the run): the
    given-up part only. A thread that never gave the CPU up (thread_waits 0) waited for a core for
    all of it, whatever the run queue read."""
    half = (LEVEL - CPU) / 2
    split = rows(thread_cpu_s=CPU, thread_queued_s=half, thread_waits=1)
    assert mf.steady_wait(loop_of(split), TOTAL, one_thread=True) == [
        expected("busy machine", core_words("46.9 ms", "1.78 s"), [*proof(), q_evidence(STEADY * half)],
                 STEADY_BUSY_NEXT, cost=STEADY * half),
        expected("off-CPU wait", own_words("46.9 ms", "1.78 s"), proof(), OWN_WAIT_NEXT, cost=STEADY * half)]
    little = rows(thread_cpu_s=CPU, thread_queued_s=1 / 256, thread_waits=1)
    assert mf.steady_wait(loop_of(little), TOTAL, one_thread=True) == [
        expected("off-CPU wait", own_words("89.8 ms", "3.41 s"), proof(), OWN_WAIT_NEXT,
                 cost=STEADY * (LEVEL - CPU - 1 / 256))]
    never = rows(thread_cpu_s=CPU, thread_queued_s=1 / 256, thread_waits=0)
    assert mf.steady_wait(loop_of(never), TOTAL, one_thread=True) == [
        expected("busy machine", core_words("93.8 ms", "3.56 s"), [*proof(), q_evidence(STEADY / 256)],
                 STEADY_BUSY_NEXT)]
    # one call whose thread computed its whole window (and so its process): no time off the CPU to
    # split, its share of it 0 (not NaN, and no numpy warning); the 37 others' halves as above
    split[20].update(cpu_s=LEVEL, thread_cpu_s=LEVEL, thread_queued_s=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = mf.steady_wait(loop_of(split), TOTAL, one_thread=True)
    assert found == [
        expected("busy machine", core_words("46.9 ms", "1.73 s"), [*proof(), q_evidence(37 * half)],
                 STEADY_BUSY_NEXT, cost=37 * half),
        expected("off-CPU wait", own_words("46.9 ms", "1.73 s"), proof(), OWN_WAIT_NEXT, cost=37 * half)]


def test_a_preemption_around_the_call_is_not_a_wait_for_a_core_in_it():
    """Each call computes 31.25 ms and sleeps 93.75 ms, never queued in it; gnnmon's bookkeeping
    around it was preempted 100 ms (its window 225 ms, its run queue 100 ms): all of each call's
    wait is the step's own, none a core's (a reviewer's plant read 48.4 ms a call "waited for a
    core")."""
    start = 2**40
    planted = [{**r, "t_start_ns": start + i * 10**9, "t_end_ns": start + i * 10**9 + int(0.225 * 1e9)}
               for i, r in enumerate(rows(thread_cpu_s=CPU, thread_queued_s=0.1, thread_waits=1))]
    assert mf.steady_wait(loop_of(planted), TOTAL, one_thread=True) == [
        expected("off-CPU wait", own_words("93.8 ms", "3.56 s"), proof(), OWN_WAIT_NEXT)]


def test_a_step_waiting_on_another_thread_of_its_process_computing_is_not_off_the_cpu():
    """The step's thread computed 31.25 ms a call and waited on a pool thread that computed 62.5 ms
    (the process: 93.75 ms): only the 31.25 ms no thread of the process ran is off the CPU, not
    the 93.75 ms the step's thread was."""
    pooled = rows(cpu=CPU + 1 / 16, thread_cpu_s=CPU, thread_queued_s=0.0, thread_waits=1)
    assert mf.steady_wait(loop_of(pooled), TOTAL, one_thread=True) == [
        expected("off-CPU wait", own_words("31.2 ms", "1.19 s"), proof(CPU + 1 / 16), OWN_WAIT_NEXT,
                 cost=STEADY * (LEVEL - CPU - 1 / 16))]


def test_a_wait_for_a_core_names_the_loaders_workers_that_may_hold_the_cores():
    crowded = rows(thread_cpu_s=CPU, thread_queued_s=LEVEL - CPU, thread_waits=1, data_workers=2)
    who = "other processes, or this process's other threads, or its DataLoader's 2 worker(s) on its 2 usable core(s)"
    assert mf.steady_wait(loop_of(crowded), TOTAL, one_thread=True, cores=2) == [
        expected("busy machine", core_words("93.8 ms", "3.56 s", who), [*proof(), q_evidence(COST)],
                 "fewer DataLoader workers than usable cores (num_workers=2 on 2 core(s)) may free them; else "
                 + STEADY_BUSY_NEXT)]
    who = "other processes, or this process's other threads, or its DataLoader's 2 worker(s)"  # the cores not known
    assert mf.steady_wait(loop_of(crowded), TOTAL, one_thread=True) == [
        expected("busy machine", core_words("93.8 ms", "3.56 s", who), [*proof(), q_evidence(COST)],
                 "fewer DataLoader workers than usable cores (num_workers=2) may free them; else " + STEADY_BUSY_NEXT)]


def test_on_several_threads_the_one_run_queue_recorded_does_not_say_the_cause():
    """The process's CPU time bounds the time no thread of it ran; one thread's run queue is not its."""
    why = "torch runs on several threads, whose run queues are not the one recorded"
    assert mf.steady_wait(loop_of(rows(thread_cpu_s=0.0, thread_queued_s=0.0)), TOTAL) == [
        expected("off-CPU wait", HEAD + ": " + UNKNOWN.format(why=why), proof(), ONE_THREAD_NEXT)]
    # on one thread, the run queue without the thread's CPU time cannot split the wait either: said so
    why = "the thread's CPU time was not recorded beside its run queue"
    assert mf.steady_wait(loop_of(rows(thread_queued_s=0.0)), TOTAL, one_thread=True) == [
        expected("off-CPU wait", HEAD + ": " + UNKNOWN.format(why=why), proof(), mf.SCHED_NEXT)]


def idle_evidence(idle: float) -> dict:
    return {"figure": "idle_cpu_pct", "value": idle, "unit": "%", "where": "sampled (psutil, the cores this process "
            "may run on), median of those calls"}


def test_sampled_cores_with_a_quarter_core_idle_are_the_steps_own_wait_full_ones_unknown():
    spare = rows(others_cpu_pct=50.0, idle_cpu_pct=25.0)
    assert mf.steady_wait(loop_of(spare), TOTAL) == [expected(
        "off-CPU wait", HEAD + "; its cores had 25 % of a core idle (sampled), so the machine did not hold it: "
        f"{GAVE_UP}", [*proof(), idle_evidence(25.0)], OWN_WAIT_NEXT)]
    full = rows(others_cpu_pct=150.0, idle_cpu_pct=24.0)
    why = "its cores were full while sampled, and the thread's run queue was not recorded"
    assert mf.steady_wait(loop_of(full), TOTAL) == [expected(
        "off-CPU wait", HEAD + ": " + UNKNOWN.format(why=why), [*proof(), idle_evidence(24.0)], ONE_THREAD_NEXT)]
    unsampled = rows(others_cpu_pct=None, idle_cpu_pct=None)
    unsampled[0].update(others_cpu_pct=50.0, idle_cpu_pct=50.0)  # a warm-up call's sample only
    why = "the load was not sampled while these calls ran"
    assert mf.steady_wait(loop_of(unsampled), TOTAL) == [expected(
        "off-CPU wait", HEAD + ": " + UNKNOWN.format(why=why), proof(), ONE_THREAD_NEXT)]


def test_the_time_off_the_cpu_is_the_calls_time_less_the_cpu_time_of_its_rows_window():
    """The CPU time is read over the row's window, which holds gnnmon's bookkeeping around the call
    (1/64 s of CPU here, read with the call's): the call's time less it is the least the step
    waited, 78.125 ms a call. A window wider than the call by a preemption of that bookkeeping
    (1/8 s) is no wait of the step's and changes nothing (a newcomer's loaded machine once read 95 %
    of each call off the CPU for a step that computed all of its time, its rows' windows preempted
    around the calls)."""
    start = 2**40
    planted = [{**r, "t_start_ns": start + i * 10**9, "t_end_ns": start + i * 10**9 + int((LEVEL + 1 / 64) * 1e9),
                "cpu_s": CPU + 1 / 64} for i, r in enumerate(rows())]
    (wait,) = mf.steady_wait(loop_of(planted), TOTAL)
    least = LEVEL - CPU - 1 / 64
    assert wait["at_stake"] == STEADY * least and wait["evidence"][2]["value"] == least, wait
    for r in planted:
        r["t_end_ns"] += 10**9 // 8
    assert mf.steady_wait(loop_of(planted), TOTAL) == [wait]
    busy = rows(cpu=LEVEL)  # computing all of each call, its window preempted after it
    for i, r in enumerate(busy):
        r.update(t_start_ns=start + i * 10**9, t_end_ns=start + i * 10**9 + 10**9 // 4)
    assert mf.steady_wait(loop_of(busy), TOTAL) == []


def test_only_host_rows_are_read_an_accelerators_wait_is_its_sync():
    assert mf.steady_wait(loop_of(rows(backend="cuda")), TOTAL) == []
    no_backend = rows()
    for r in no_backend:
        del r["backend"]
    assert mf.steady_wait(loop_of(no_backend), TOTAL) == []
    assert mf.steady_wait(loop_of([{k: v for k, v in r.items() if k != "cpu_s"} for r in rows()]), TOTAL) == []


def test_a_wait_is_said_from_five_percent_of_the_run_and_five_steady_calls():
    """Off the CPU 7.8125 ms a call: 38 of them are 5.9 % of the 5 s run; 3.90625 ms, 3.0 %: not said."""
    (said,) = mf.steady_wait(loop_of(rows(cpu=LEVEL - 1 / 128)), TOTAL)
    assert said["at_stake"] == STEADY / 128
    assert mf.steady_wait(loop_of(rows(cpu=LEVEL - 1 / 256)), TOTAL) == []
    assert len(mf.steady_wait(loop_of(rows(n=7)), 7 * LEVEL)) == 1  # 5 steady calls
    assert mf.steady_wait(loop_of(rows(n=6)), 6 * LEVEL) == []


def test_a_wait_in_one_stretch_of_calls_is_not_a_wait_in_every_call():
    """Three neighbouring calls off the CPU 93.75 ms (5.6 % of the run), the rest computing: their
    mean is within 3 batch-means errors of 0 (the stretch is one batch's)."""
    planted = rows(cpu=LEVEL)
    for i in (20, 21, 22):
        planted[i]["cpu_s"] = CPU
    assert 3 * (LEVEL - CPU) >= 0.05 * TOTAL
    assert mf.steady_wait(loop_of(planted), TOTAL) == []


def test_slowed_calls_count_up_to_the_level_their_excess_is_the_excess_findings():
    """10 calls waited 125 ms more (250 ms, computing 31.25 ms: 218.75 ms off the CPU): the off-CPU
    wait's excess, 1.25 s; the wait in every call counts what the level holds of their wait, 93.75
    ms (at most the median call's), as of the 27 others; a call that compiled is neither's. So each
    slowed call's two parts are its time off the CPU, no second counted twice."""
    planted = rows()
    for i in range(10, 20):
        planted[i]["wall_s"] = 2 * LEVEL
    planted[30].update(compile_frames=1)
    total = sum(r["wall_s"] for r in planted)
    found = gnnmon.Report(planted, manifest={"devices": {"torch_threads": 1}}).diagnosis()
    steady = [f for f in found if f.get("every_call")]
    excess = [f for f in found if f["kind"] == "off-CPU wait" and not f.get("every_call")]
    assert len(steady) == 1 and steady[0]["at_stake"] == 37 * (LEVEL - CPU), found
    assert len(excess) == 1 and excess[0]["at_stake"] == 10 * LEVEL, found
    assert steady[0]["at_stake"] / 37 + excess[0]["at_stake"] / 10 == 2 * LEVEL - CPU  # a slowed call's off-CPU time
    assert sum(f["at_stake"] for f in found) <= total


def test_calls_on_crowded_cores_count_the_wait_their_level_holds():
    """The load sampled: 4 calls ran 125 ms longer on crowded cores, computing the usual 31.25 ms
    (their excess, all off the CPU, the busy machine's): the wait in every call still counts them,
    the 93.75 ms of their wait the level holds, as in each of the 34 others."""
    planted = rows(others_cpu_pct=0.0, idle_cpu_pct=50.0)
    for i in range(20, 24):
        planted[i].update(wall_s=2 * LEVEL, others_cpu_pct=200.0, idle_cpu_pct=0.0)
    (wait,) = mf.steady_wait(loop_of(planted), sum(r["wall_s"] for r in planted))
    assert wait["at_stake"] == 38 * (LEVEL - CPU)


def test_what_a_wait_in_every_call_counts_of_a_crowded_call_stops_at_the_level_its_excess_is_read_from():
    """The load sampled: 24 quiet steady calls of 109.375 and 140.625 ms (their median 125 ms) and
    14 of 375 ms on crowded cores: the steady median is 140.625 ms, the busy machine reads their
    excess from the quiet calls' 125 ms (250 ms each), so the wait in every call counts what 125 ms
    holds of their wait, 93.75 ms each (not 140.625 ms less their CPU time); that is the median of
    the 38 waits, which the 12 calls of 140.625 ms (109.375 ms off the CPU) count at most: every
    finding's seconds together stay within the run's."""
    planted = rows(others_cpu_pct=0.0, idle_cpu_pct=50.0)
    for i, r in enumerate(planted):
        r["wall_s"] = 0.109375 if i % 2 else 0.140625
    for i in range(12, 26):
        planted[i].update(wall_s=0.375, others_cpu_pct=200.0, idle_cpu_pct=0.0)
    total = sum(r["wall_s"] for r in planted)
    found = gnnmon.Report(planted).diagnosis()
    busy = [f for f in found if f["kind"] == "busy machine"]
    assert len(busy) == 1 and busy[0]["at_stake"] == 14 * 0.25, found
    (wait,) = [f for f in found if f.get("every_call")]
    short = [r for r in planted[2:] if r["wall_s"] == 0.109375]
    assert len(short) == 12 and wait["at_stake"] == 12 * (0.109375 - CPU) + 26 * (LEVEL - CPU)
    assert sum(f["at_stake"] for f in found) <= total, found


def uneven(**slow) -> list[dict]:
    """40 calls, the load sampled (50 % of a core idle): 24 steady ones of 109.375 and 140.625 ms
    (their median 125 ms) and 14 (12 to 25) of 375 ms, with ``slow``'s fields; each computing
    31.25 ms unless said: the steps' level (the steady median) is 140.625 ms."""
    planted = rows(others_cpu_pct=0.0, idle_cpu_pct=50.0)
    for i, r in enumerate(planted):
        r["wall_s"] = 0.109375 if i % 2 else 0.140625
    for i in range(12, 26):
        planted[i].update(wall_s=0.375, **slow)
    return planted


def uneven_wait(planted: list[dict], slow: float, cost: float, one_thread: bool = False) -> list[dict]:
    """The one finding a wait in every call makes of :func:`uneven`'s rows whose steady calls of
    375 ms count ``slow`` s each and the others their time less 31.25 ms, each at most the median
    of those 38 (the steady median of the time off the CPU, of 140.625 ms): ``cost`` in all."""
    steady = [r["wall_s"] for r in planted[2:]]
    mid = float(np.median([slow if t == 0.375 else t - CPU for t in steady]))
    total = sum(r["wall_s"] for r in planted)
    evidence = [{"figure": "cpu_s", "value": CPU, "unit": "s", "where": "the process's CPU time, median of 38 steady "
                 "call(s)"},
                {"figure": "wall_s/device_s", "value": 0.140625, "unit": "s", "where": "median of those 38 call(s)"},
                {"figure": "off the CPU", "value": mid, "unit": "s", "where": "the call's time less its "
                 "process's CPU time and its excess over the level, median of those calls"}]
    if one_thread:
        return [expected("off-CPU wait", own_words(f"{mid * 1e3:.1f} ms", f"{cost:.2f} s", "140.6 ms"), evidence,
                         OWN_WAIT_NEXT, cost=cost, total=total)]
    words = (f"step spent {100 * mid / 0.140625:.0f} % of each call off the CPU: {mid * 1e3:.1f} ms of 140.6 ms "
             f"(median of 38 steady calls), no thread of the process running, {cost:.2f} s in all; a wait in every "
             f"call, not an excess over the level; its cores had 50 % of a core idle (sampled), so the machine did "
             f"not hold it: {GAVE_UP}")
    return [expected("off-CPU wait", words, [*evidence, idle_evidence(50.0)], OWN_WAIT_NEXT, cost=cost, total=total)]


def test_crowded_calls_that_computed_half_their_time_count_to_the_level_their_excess_is_read_from():
    """The 14 slow calls on crowded cores computed 187.5 ms (half their time: not waits by the
    several-threads rule), 187.5 ms off the CPU each. On several threads they are the busy
    machine's, whose excess (250 ms, over the quiet calls' 125 ms) could be all of their wait: the
    level is not known to hold any of it, and they count none. Torch on one thread, whose thread
    computed them too and never queued: no finding reads their excess (234.375 ms, over the steps'
    140.625 ms), which again could be all of it. Either way the median wait is the short calls'
    78.125 ms, which the long calls' 109.375 ms count at most: 24 × 78.125 ms."""
    crowded = {"cpu_s": 0.1875, "others_cpu_pct": 200.0, "idle_cpu_pct": 0.0}
    planted = uneven(**crowded)
    assert mf.steady_wait(loop_of(planted), sum(r["wall_s"] for r in planted)) == uneven_wait(planted, 0.0, 1.875)
    one = uneven(**crowded, thread_cpu_s=0.1875)
    for r in one:
        r.update(thread_cpu_s=r.get("thread_cpu_s", CPU), thread_queued_s=0.0, thread_waits=1)
    assert mf.steady_wait(loop_of(one), sum(r["wall_s"] for r in one), one_thread=True) == uneven_wait(
        one, 0.0, 1.875, one_thread=True)


def test_on_one_thread_calls_whose_thread_did_not_compute_more_count_to_the_quiet_calls_level():
    """Torch on one thread, its run queue not recorded, the cores not crowded: the 14 slow calls'
    process computed 187.5 ms (half their time: not waits by the several-threads rule) but their
    thread only the usual 31.25 ms: they waited, an off-CPU wait's excess read over the quiet
    calls' 125 ms (those calls not among them): 250 ms, more than the 187.5 ms no thread of the
    process ran, so the level is not known to hold any of their wait (as with crowded cores)."""
    planted = uneven(cpu_s=0.1875)
    for r in planted:
        r["thread_cpu_s"] = CPU
    assert mf.steady_wait(loop_of(planted), sum(r["wall_s"] for r in planted), one_thread=True) == uneven_wait(
        planted, 0.0, 1.875)


def test_a_waiting_call_with_no_load_sample_of_its_own_is_among_the_quiet_calls():
    """Two quiet calls (30, 31) waited 375 ms with no load sample of their own: the busy machine's
    level keeps them among its quiet calls (not its to judge), so the quiet median is 140.625 ms,
    the steps' level, and the 109.375 ms of wait it holds is counted of each of the 14 crowded calls
    (and of the two, whose excess no finding reads: a spike's)."""
    planted = uneven(others_cpu_pct=200.0, idle_cpu_pct=0.0)
    for i in (30, 31):
        planted[i].update(wall_s=0.375, others_cpu_pct=None, idle_cpu_pct=None)
    assert mf.steady_wait(loop_of(planted), sum(r["wall_s"] for r in planted)) == uneven_wait(
        planted, 0.109375, 11 * (0.109375 - CPU) + 27 * 0.109375)


@pytest.mark.skipif(not sched.QUEUED_AVAILABLE, reason="run-queue time is Linux's")
def test_a_live_sleep_in_every_call_is_the_steps_own_wait():
    """Each call spins 2 ms of its thread's CPU and sleeps 8 ms. The part its thread gave up is at
    least the sleep, in the share of each call's wait that is counted (its time less its process's
    CPU time and its excess over the level, at most the median call's, of the thread's own time off
    the CPU); with what the host's load queued it, at most each call's window less its planted work."""
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
    found = {f["kind"]: f for f in run.report().diagnosis() if f.get("every_call")}
    own = found.get("off-CPU wait")
    assert own is not None and GAVE_UP in own["words"], run.report().diagnosis()
    m = int(own["words"].split("(median of ")[1].split(" steady")[0])
    calls = [r for r in run.records if r["index"] >= 2]
    level = float(np.median([r["wall_s"] for r in calls]))
    span = [(r["t_end_ns"] - r["t_start_ns"]) / 1e9 for r in calls]
    offs = [max(r["wall_s"] - r["cpu_s"] - max(r["wall_s"] - level, 0.0), 0.0) for r in calls]
    mid = float(np.median(offs))
    kept = min(min(o, mid) / (w - r["thread_cpu_s"]) for o, w, r in zip(offs, span, calls, strict=True))
    assert m >= 5 and own["at_stake"] >= m * sleep * kept, (own, kept)
    both = sum(f["at_stake"] for f in found.values())
    assert both <= sum(min(w - work, r["wall_s"]) for w, r in zip(span, calls, strict=True)), found
    print(f"live: {m} calls, the sleep's part {own['at_stake'] * 1e3:.1f} ms (at least {m * sleep * kept * 1e3:.1f}), "
          f"a core's {found['busy machine']['at_stake'] * 1e3:.1f} ms" if "busy machine" in found else "")


def test_a_few_calls_that_waited_are_no_wait_in_every_call():
    """A newcomer's run: a step that computes its whole level, 6 calls spread through the run
    waiting 125 ms more each (750 ms, 15 % of the run, all off the CPU: an excess, the spikes'):
    no wait in every call, its median 0 (it once said 0.0 ms "in every call", 20 % of the run)."""
    planted = rows(cpu=LEVEL)
    for i in (5, 11, 17, 23, 29, 35):
        planted[i]["wall_s"] = 2 * LEVEL
    assert mf.steady_wait(loop_of(planted), sum(r["wall_s"] for r in planted)) == []
    assert not [f for f in gnnmon.Report(planted).diagnosis() if f.get("every_call")]
