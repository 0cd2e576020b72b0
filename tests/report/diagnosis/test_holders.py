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


def test_an_off_cpu_wait_names_the_nested_row_that_holds_its_excess():
    """The spikes computed no more than the other calls (3.8 ms of CPU, as theirs): their excess
    (23.6 ms of the nested metrics row, 25.0 ms against 1.4 ms) waited off the CPU, and the off-CPU
    wait names that row, its evidence the row's median in those calls with the others' beside it."""
    found = gnnmon.Report(spiky(spike_cpu=FORWARD + BACKWARD + OPTIMIZER - 1e-4, nested=True)).diagnosis()
    (said,) = [f for f in found if f["kind"] == "off-CPU wait"]
    assert "; metrics, timed inside each call, took 23.6 ms more of it (median 25.0 ms against 1.4 ms):" in \
        said["words"], said["words"]
    assert said["evidence"][-1] == {"figure": "metrics", "value": pytest.approx(SPIKE_FORWARD, rel=1e-12), "unit": "s",
                                    "where": "the time of its rows inside each call (parent step#index), summed per "
                                             "call: median of those 10 call(s); 1.4 ms in the others"}


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


def test_on_one_thread_the_given_up_wait_names_its_nested_row_less_the_wait_for_a_core():
    """As the phase above, in a nested io row of 4 ms with 0.1 ms of its own CPU time: of the 3.5 ms
    the thread gave up, at least 4 - 0.1 - 1 = 2.9 ms lay in io."""
    rows = waits(thread_cpu_s=0.0005, thread_queued_s=0.001, thread_waits=1)
    rows += [{"label": "io", "index": i, "parent": f"step#{i}", "wall_s": 0.004, "cpu_s": 0.0001, "backend": "cpu"}
             for i in range(40)]
    table = Table(rows)
    loop = Loop("step", table.parts["step"])
    core, own = mf.steady_wait(loop, loop.total, one_thread=True, nested=mf.nested_rows(table, loop))
    assert (core["kind"], own["kind"]) == ("busy machine", "off-CPU wait")
    assert ("; at least 2.9 ms of it a call lay in io, timed inside the step (median: its 4.0 ms less its own CPU "
            "time and the call's wait for a core):") in own["words"], own["words"]


def test_a_nested_row_without_its_own_cpu_time_is_held_to_the_calls():
    """io rows of 4 ms that record no CPU time of their own in 5 ms calls computing 1 ms: the most
    they could have computed is the call's 1 ms, so at least 3 ms of each lay off the CPU, as
    wait_holding answers ("row", its name, its time and that least part per call)."""
    rows = [step(i, 0.005, 0.001) for i in range(40)]
    rows += [{"label": "io", "index": i, "parent": f"step#{i}", "wall_s": 0.004, "backend": "cpu"} for i in range(40)]
    table = Table(rows)
    loop = Loop("step", table.parts["step"])
    nested = mf.nested_rows(table, loop)
    calls = loop.steady
    kind, name, times, least = mf.wait_holding(loop, calls, loop.t - 0.001, loop.total, nested)
    assert (kind, name) == ("row", "io")
    assert times.tolist() == [0.004] * 40 and least == pytest.approx([0.003] * 40, abs=1e-15)
    said = wait_finding(rows)
    assert ("; at least 3.0 ms of it a call lay in io, timed inside the step (median: its 4.0 ms less its own CPU "
            "time):") in said["words"], said["words"]


def test_a_phase_that_did_not_run_in_a_call_holds_none_of_its_wait_never_less():
    """Phase io of 4 ms runs in every other 5 ms call (0.5 ms of CPU each): where it ran at least
    3.5 ms lay in it, where it did not, none (0, not its 0 s less the call's CPU time)."""
    rows = waits(phase_forward_s=0.001)
    for r in rows[::2]:
        r["phase_io_s"] = 0.004
    loop = Loop("step", Table(rows).parts["step"])
    wait = loop.t - 0.0005
    kind, name, _, least = mf.wait_holding(loop, loop.steady, wait, loop.total)
    assert (kind, name) == ("phase", "io")
    assert least == pytest.approx([0.0035, 0.0] * 20, abs=1e-15)


def test_a_wait_in_every_call_names_the_innermost_phase_that_holds_it():
    """Phase read (4 ms) runs inside phase load (4.5 ms) in 5 ms calls computing 0.5 ms: load holds
    at least 4 ms of the wait, read, inside it, 3.5 ms; read, the more precise, is named. Not
    nested, load (the larger) is."""
    rows = waits(phase_load_s=0.0045, phase_read_s=0.004, phase_read_in="load")
    said = wait_finding(rows)
    assert ("; at least 3.5 ms of it a call lay in phase read (median: its 4.0 ms less the call's whole CPU "
            "time)") in said["words"], said["words"]
    for r in rows:
        del r["phase_read_in"]
    assert ("; at least 4.0 ms of it a call lay in phase load (median: its 4.5 ms less the call's whole CPU "
            "time)") in wait_finding(rows)["words"]


def test_nested_rows_are_matched_to_their_own_calls_only():
    """An eval loop's metrics rows come first; then io rows of the step: three in call 5 (1, 2 and
    3 ms: 6 ms), one without a time in call 7 (none counted), none in the others. The step's
    nested rows are io's alone, each call's its own; eval's are metrics' alone (io's parents name
    no eval call); a loop whose calls carry no index holds none."""
    rows = [{"label": "eval", "index": i, "parent": None, "wall_s": 0.01, "backend": "cpu"} for i in range(8)]
    rows += [{"label": "metrics", "index": i, "parent": f"eval#{i}", "wall_s": 0.002, "cpu_s": 0.002,
              "backend": "cpu"} for i in range(8)]
    rows += [step(i, 0.01, 0.005) for i in range(10)]
    rows += [{"label": "io", "index": k, "parent": "step#5", "wall_s": w, "cpu_s": w / 2, "backend": "cpu"}
             for k, w in enumerate((0.001, 0.002, 0.003))]
    rows += [{"label": "io", "index": 3, "parent": "step#7", "backend": "cpu"}]
    table = Table(rows)
    held = mf.nested_rows(table, Loop("step", table.parts["step"]))
    assert list(held) == ["io"]
    times, own = held["io"]
    assert times.tolist() == pytest.approx([0.0] * 5 + [0.006] + [0.0] * 4, abs=1e-15)
    assert own.tolist() == pytest.approx([0.0] * 5 + [0.003] + [0.0] * 4, abs=1e-15)
    held = mf.nested_rows(table, Loop("eval", table.parts["eval"]))
    assert list(held) == ["metrics"] and held["metrics"][0].tolist() == [0.002] * 8
    unnumbered = Table([{k: v for k, v in r.items() if not (r["label"] == "step" and k == "index")} for r in rows])
    assert mf.nested_rows(unnumbered, Loop("step", unnumbered.parts["step"])) == {}


def test_a_nested_rows_wait_is_said_with_the_rows_evidence():
    rows = [step(i, 0.005, 0.001) for i in range(40)]
    rows += [{"label": "io", "index": i, "parent": f"step#{i}", "wall_s": 0.004, "backend": "cpu"} for i in range(40)]
    assert wait_finding(rows)["evidence"][-1] == {"figure": "io", "value": 0.004, "unit": "s", "where": (
        "the time of its rows inside each call (parent step#index), summed per call: median of those 38 call(s); at "
        "least 3.0 ms of it off the CPU (its time less its own CPU time), median")}


def test_the_phase_holding_a_wait_in_every_call_is_judged_over_the_steady_calls():
    """8 ms calls computing 0.5 ms: in the 38 steady ones phase io takes 4 ms (3.5 ms off the CPU at
    least) and phase net 3.9 ms (3.4 ms); in the two warm-up calls io did not run and net took
    4.1 ms. Over the steady calls io holds more (133 ms against 129.2 ms): io is named, though
    net would be over every call (136.8 ms)."""
    rows = [step(i, 0.008, 0.0005, phase_io_s=0.004 if i >= 2 else 0.0, phase_net_s=0.0039 if i >= 2 else 0.0041)
            for i in range(40)]
    assert ("; at least 3.5 ms of it a call lay in phase io (median: its 4.0 ms less the call's whole CPU "
            "time)") in wait_finding(rows)["words"]


def thread_rows(queued: float, window: float) -> list[dict]:
    """40 calls of 5 ms whose one thread computed 0.5 ms and never gave the CPU up of its own (one
    wait), ``queued`` s on the run queue over the row's window of ``window`` s."""
    return [step(i, 0.005, 0.0005, thread_cpu_s=0.0005, thread_queued_s=queued, thread_waits=1,
                 t_start_ns=i * 10_000_000, t_end_ns=i * 10_000_000 + round(window * 1e9)) for i in range(40)]


def test_a_run_queue_read_over_a_longer_window_counts_at_most_the_threads_time_off_the_cpu():
    """4.8 ms queued over the call's own 5 ms window, of which the thread was off the CPU 4.5 ms:
    all 4.5 ms are a wait for a core (no more), none given up."""
    loop = Loop("step", Table(thread_rows(0.0048, 0.005)).parts["step"])
    (core,) = mf.steady_wait(loop, loop.total, one_thread=True)
    assert core["kind"] == "busy machine"
    assert core["words"].startswith("step waited for a core in every call: 4.5 ms of 5.0 ms"), core["words"]


def test_a_run_queue_within_the_windows_excess_is_no_wait_for_a_core():
    """0.5 ms queued over a 6 ms window around a 5 ms call: the window's 1 ms beyond the call may
    hold all of it, so none counts; the thread gave up its whole 4.5 ms (no more)."""
    loop = Loop("step", Table(thread_rows(0.0005, 0.006)).parts["step"])
    (own,) = mf.steady_wait(loop, loop.total, one_thread=True)
    assert own["kind"] == "off-CPU wait"
    assert own["words"].startswith("step gave the CPU up in every call: 4.5 ms of 5.0 ms"), own["words"]


def test_a_busy_machine_found_by_the_run_queue_names_the_nested_row_that_holds_its_excess():
    """The load not sampled: the spikes computed no more (3.8 ms) and their one thread queued for
    23.6 ms each, their whole excess, the metrics row's (25.0 ms against 1.4 ms): a busy machine,
    which names that row."""
    rows = spiky(spike_cpu=FORWARD + BACKWARD + OPTIMIZER - 1e-4, nested=True)
    for r in rows:
        if r["label"] == "step":
            r.update(thread_cpu_s=r["cpu_s"], thread_queued_s=0.0236 if r["wall_s"] > 0.01 else 0.0, thread_waits=1)
    table = Table(rows)
    loop = Loop("step", table.parts["step"])
    said = mf.busy_machine(loop, loop.total, True, mf.nested_rows(table, loop))
    assert said is not None and said["kind"] == "busy machine"
    assert ("; metrics, timed inside each call, took 23.6 ms more of it (median 25.0 ms against 1.4 ms), 236.0 ms of "
            "it waiting for a core") in said["words"], said["words"]


def test_a_busy_machine_on_sampled_crowded_cores_names_the_nested_row_that_holds_its_excess():
    """The spikes ran while other processes took a whole core and none stood idle (the others:
    none taken, all idle): a busy machine, whose 23.6 ms excess a call the metrics row holds."""
    rows = spiky(nested=True)
    for r in rows:
        if r["label"] == "step":
            spike = r["wall_s"] > 0.01
            r.update(others_cpu_pct=100.0 if spike else 0.0, idle_cpu_pct=0.0 if spike else 100.0)
    (said,) = [f for f in gnnmon.Report(rows).diagnosis() if f["kind"] == "busy machine"]
    assert said["words"].endswith("; metrics, timed inside each call, took 23.6 ms more of it (median 25.0 ms "
                                  "against 1.4 ms)"), said["words"]
