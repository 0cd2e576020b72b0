"""The phase or nested timed row that holds a finding's time, named from planted rows
(:func:`gnnmon.report.diagnosis.machine_findings.part_holding`, ``wait_holding``), and the slow
steps' next step read from what their own detail says they did.

* Slow steps: a step whose phase ``forward`` takes 25 ms in every sixth call against 1.4 ms in the
  others (backward 2 ms and optimizer 0.5 ms flat): the spikes' excess is forward's (23.6 ms more);
  the same in a nested row ``metrics``. Their CPU time equal to their time: they computed, so the
  next step is to find the work, never the scheduler's counters; with 12 ms of CPU in 27.5 ms they
  waited, and the scheduler's counters stay the next step (the load sampled).
* A wait in every call: a step of 5 ms that computes 0.5 ms and runs phase ``io`` for 4 ms: at
  least 4 - 0.5 = 3.5 ms of its 4.5 ms off the CPU lay in io (a phase can compute no more than the
  whole call); a nested ``io`` row of 4 ms with 0.1 ms of its own CPU time holds 3.9 ms; on one
  thread with 1 ms a call queued for a core, the given-up 3.5 ms holds at least 4 - 0.5 - 1 = 2.5 ms
  in io. A step that computes 18 ms of its 30 ms cannot pin its wait on any phase: said so."""

from __future__ import annotations

import pytest

import gnnmon
from gnnmon.data.table import Table
from gnnmon.report.diagnosis import machine_findings as mf
from gnnmon.report.diagnosis import time_findings as tf
from gnnmon.report.loops import Loop

FORWARD, SPIKE_FORWARD, BACKWARD, OPTIMIZER = 0.0014, 0.025, 0.002, 0.0005


def step(i: int, wall: float, cpu: float | None, **fields) -> dict:
    extra = {} if cpu is None else {"cpu_s": cpu}
    return {"label": "step", "index": i, "parent": None, "wall_s": wall, "backend": "cpu", **extra, **fields}


def spiky(spike_cpu: float | None = None, sampled: bool = False, nested: bool = False) -> list[dict]:
    """60 calls, every sixth one's forward (or nested metrics row) 25 ms against 1.4 ms; CPU time
    0.1 ms under each call's time, or ``spike_cpu`` in the spikes."""
    rows = []
    load = {"others_cpu_pct": 0.0, "idle_cpu_pct": 100.0} if sampled else {}
    for i in range(60):
        spike = i % 6 == 5
        slow = SPIKE_FORWARD if spike else FORWARD
        wall = slow + BACKWARD + OPTIMIZER
        cpu = spike_cpu if spike and spike_cpu is not None else wall - 1e-4
        phases = {"phase_backward_s": BACKWARD, "phase_optimizer_s": OPTIMIZER}
        if nested:
            rows.append({"label": "metrics", "index": i, "parent": f"step#{i}", "wall_s": slow, "backend": "cpu"})
        else:
            phases["phase_forward_s"] = slow
        rows.append(step(i, wall, cpu, **phases, **load))
    return rows


def slow_steps_of(rows: list[dict]) -> dict:
    found = [f for f in gnnmon.Report(rows).diagnosis() if f["kind"] == "slow steps"]
    assert len(found) == 1, found
    return found[0]


def test_slow_steps_name_the_phase_that_holds_their_excess_and_computed_spikes_are_not_sent_to_the_scheduler():
    said = slow_steps_of(spiky())
    assert said["words"] == ("10 call(s) of step were slow with no recorded cause, 236.0 ms over its level; each "
                             "computed rather than waited (its process's CPU time 50 % of its time or more); phase "
                             "forward took 23.6 ms more of it (median 25.0 ms against 1.4 ms)")
    assert said["at_stake"] == pytest.approx(10 * (SPIKE_FORWARD - FORWARD), rel=1e-12)
    assert said["evidence"][-1] == {"figure": "phase_forward_s", "value": SPIKE_FORWARD, "unit": "s",
                                    "where": "median of those 10 call(s); 1.4 ms in the others"}
    assert said["next"] == ("find the work the slow calls did more in phase forward: torch.profiler over a slow call "
                            "(its CPU trace), the batch it got, a branch its data takes; " + tf.SAMPLE_NEXT)
    assert "sched" not in said["next"]


def test_computed_spikes_in_a_step_without_phases_are_sent_to_the_work_naming_no_part():
    rows = [step(i, wall, wall - 1e-4) for i in range(60)
            for wall in [(SPIKE_FORWARD if i % 6 == 5 else FORWARD) + BACKWARD + OPTIMIZER]]
    said = slow_steps_of(rows)
    assert said["next"] == ("find the work the slow calls did more: torch.profiler over a slow call (its CPU trace), "
                            "the batch it got, a branch its data takes; " + tf.SAMPLE_NEXT)


def test_computed_spikes_on_a_sampled_run_get_no_scheduler_advice_and_waiting_ones_keep_it():
    computed = slow_steps_of(spiky(sampled=True))
    assert computed["next"].startswith("find the work the slow calls did more in phase forward")
    assert "sched" not in computed["next"] and "sample" not in computed["next"]
    waited = slow_steps_of(spiky(spike_cpu=0.012, sampled=True))  # 12 ms of CPU in 27.5 ms: under half
    assert "in 10 of them the process waited rather than computed" in waited["words"]
    assert waited["next"] == tf.SCHED_NEXT


def test_slow_steps_name_the_nested_row_that_holds_their_excess():
    said = slow_steps_of(spiky(nested=True))
    assert said["words"].endswith("; metrics, timed inside each call, took 23.6 ms more of it (median 25.0 ms "
                                  "against 1.4 ms)"), said["words"]
    assert said["evidence"][-1]["figure"] == "metrics" and said["evidence"][-1]["value"] == SPIKE_FORWARD
    assert said["next"].startswith("find the work the slow calls did more in metrics:")


def waits(**fields) -> list[dict]:
    """40 calls of 5 ms that computed 0.5 ms (4.5 ms off the CPU), ``fields`` in each."""
    return [step(i, 0.005, 0.0005, **fields) for i in range(40)]


def wait_finding(rows: list[dict]) -> dict:
    found = gnnmon.Report(rows).diagnosis()
    assert [f["kind"] for f in found] == ["off-CPU wait"] and found[0].get("every_call"), found
    return found[0]


def test_a_wait_in_every_call_names_the_phase_that_holds_it():
    said = wait_finding(waits(phase_forward_s=0.001, phase_io_s=0.004))
    assert ("a wait in every call, not an excess over the level; at least 3.5 ms of it a call lay in phase io "
            "(median: its 4.0 ms less the call's whole CPU time): waiting for a core") in said["words"], said["words"]
    assert said["evidence"][-1] == {"figure": "phase_io_s", "value": 0.004, "unit": "s", "where": (
        "median of those 38 call(s); at least 3.5 ms of it off the CPU (its time less the call's whole CPU time), "
        "median")}


def test_a_wait_in_every_call_names_the_nested_row_that_holds_it():
    rows = [step(i, 0.005, 0.001) for i in range(40)]
    rows += [{"label": "io", "index": i, "parent": f"step#{i}", "wall_s": 0.004, "cpu_s": 0.0001, "backend": "cpu"}
             for i in range(40)]
    said = wait_finding(rows)
    assert ("; at least 3.9 ms of it a call lay in io, timed inside the step (median: its 4.0 ms less its own CPU "
            "time):") in said["words"], said["words"]
    table = Table(rows)
    times, own = mf.nested_rows(table, Loop("step", table.parts["step"]))["io"]
    assert times.tolist() == [0.004] * 40 and own.tolist() == [0.0001] * 40


def test_a_phase_beside_more_cpu_time_than_its_own_cannot_be_said_to_hold_the_wait():
    """30 ms calls computing 18 ms, phases forward 16 ms, backward 6 ms, io 4 ms: each phase's time
    is under the call's CPU time, so none is pinned; the words say why."""
    rows = [step(i, 0.030, 0.018, phase_forward_s=0.016, phase_backward_s=0.006, phase_io_s=0.004) for i in range(40)]
    said = wait_finding(rows)
    assert "lay in" not in said["words"]
    assert ("; its phases record no CPU time of their own, so which of them holds it the rows cannot say (a block "
            "timed inside the step with gnnmon.timed(label=...) records its own cpu_s)") in said["words"]


def test_on_one_thread_the_given_up_wait_names_its_phase_less_the_wait_for_a_core():
    rows = waits(phase_forward_s=0.001, phase_io_s=0.004, thread_cpu_s=0.0005, thread_queued_s=0.001, thread_waits=1)
    loop = Loop("step", Table(rows).parts["step"])
    core, own = mf.steady_wait(loop, loop.total, one_thread=True)
    assert (core["kind"], own["kind"]) == ("busy machine", "off-CPU wait")
    assert "lay in" not in core["words"]
    assert ("; at least 2.5 ms of it a call lay in phase io (median: its 4.0 ms less the call's whole CPU time and "
            "the call's wait for a core):") in own["words"], own["words"]


def test_a_jobs_nested_rows_are_matched_within_their_rank():
    """Two ranks number their calls alike: each rank's io row is its own call's (4 ms), not 8 ms."""
    rows = [dict(step(i, 0.005, 0.001), rank=r) for r in (0, 1) for i in range(40)]
    rows += [{"label": "io", "index": i, "parent": f"step#{i}", "wall_s": 0.004, "cpu_s": 0.0001, "backend": "cpu",
              "rank": r} for r in (0, 1) for i in range(40)]
    table = Table(rows)
    times, _ = mf.nested_rows(table, Loop("step", table.parts["step"]))["io"]
    assert times.tolist() == [0.004] * 80
