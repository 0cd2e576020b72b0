"""A busy machine is other processes' rate on the run's cores rising during the slowed calls, not
their CPU seconds, which at a steady load grow with any long call: a call that computed more of its
own work is never the machine's (gnnmon/report/busy.py: crowded, computed). Planted rows (a fake
clock) and a saved run whose every 10th step did 150 ms more of its own CPU work."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import gnnmon
from gnnmon.data.table import Table
from gnnmon.report import Report, busy
from gnnmon.report.analysis import spikes
from gnnmon.report.diagnosis import machine_findings as mf
from gnnmon.report.loops import Loop

LEVEL = 0.125
"""A usual call's seconds; it computes :data:`CPU` of them on its one thread."""
CPU = 0.0625
LOAD = 125.0
"""Other processes' steady rate on the run's cores, % of one core (none idle)."""


def row(i: int, wall: float, cpu: float, others: float) -> dict:
    return {"label": "step", "index": i, "wall_s": wall, "thread_cpu_s": cpu, "cpu_s": cpu, "others_cpu_pct": others,
            "idle_cpu_pct": 0.0}


def loop_of(rows: list[dict]) -> Loop:
    return Loop("step", Table(rows).parts["step"])


def computing_rows() -> list[dict]:
    """40 calls at LEVEL computing CPU at a steady LOAD; every 10th (4 calls) computes 0.25 s more of
    its own (0.3125 s) and takes 0.5 s at the usual pace (2 wall seconds a CPU second), the load
    beside it the same: under the old rule the others' seconds in such a call, 1.25 × 0.5 s =
    0.625 s, were 0.469 s over their usual 0.156 s, more than half its 0.375 s excess."""
    return [row(i, 0.5, 0.3125, LOAD) if i % 10 == 9 else row(i, LEVEL, CPU, LOAD) for i in range(40)]


def test_calls_that_computed_more_at_a_steady_load_are_not_a_busy_machine():
    rows = computing_rows()
    total = sum(r["wall_s"] for r in rows)
    assert mf.busy_machine(loop_of(rows), total, one_thread=True) is None
    assert mf.busy_machine(loop_of(rows), total, one_thread=False) is None  # the rate alone: it did not rise
    slow = spikes(rows, one_thread=True)
    assert [s["index"] for s in slow] == [9, 19, 29, 39]
    assert {s["cause"] for s in slow} == {"unexplained"} and all(s["computed"] for s in slow), slow
    assert not busy.machine_calls(loop_of(rows), busy.load(loop_of(rows)), True).any()


def test_a_call_that_computed_is_not_the_machines_even_where_the_load_rose():
    """The same 4 calls, the others' rate rising during them to 250 % (125 % more: 0.625 s of CPU
    over 0.5 s, above half the excess): their own work at the usual pace (0.25 s more × 2 = 0.5 s)
    accounts for more than half the 0.375 s excess, so they computed; read on several threads
    (no work known), the rate alone names them."""
    rows = [dict(r, others_cpu_pct=250.0) if r["wall_s"] > LEVEL else r for r in computing_rows()]
    total = sum(r["wall_s"] for r in rows)
    assert mf.busy_machine(loop_of(rows), total, one_thread=True) is None
    assert {s["cause"] for s in spikes(rows, one_thread=True)} == {"unexplained"}
    said = mf.busy_machine(loop_of(rows), total, one_thread=False)
    assert said is not None and said["words"].startswith("4 call(s) of step ran on full cores"), said


def test_a_rise_in_the_others_rate_during_calls_whose_own_work_stays_is_a_busy_machine():
    """36 calls at LEVEL computing CPU at a steady LOAD; 4 calls (every 10th) compute CPU too but
    take 0.5 s while others take 225 % (100 % more of a core: 0.5 s of CPU more over the call,
    above half its 0.375 s excess): a busy machine of 4 calls, 1.5 s over the level, said with the
    rate, its usual, the extra CPU and the calls' median and longest time; the spikes name the same
    4 calls. The last slowed call takes 0.75 s (others at 225 %: 0.75 s more, above half of 0.625 s)."""
    rows = [row(i, 0.5, CPU, 225.0) if i % 10 == 9 else row(i, LEVEL, CPU, LOAD) for i in range(40)]
    rows[39] = row(39, 0.75, CPU, 225.0)
    total = sum(r["wall_s"] for r in rows)
    said = mf.busy_machine(loop_of(rows), total, one_thread=True)
    assert said is not None and said["kind"] == busy.CAUSE and said["at_stake"] == 3 * 0.375 + 0.625, said
    assert said["words"] == (
        "4 call(s) of step ran on full cores while other processes took 225 % of a core on them (usually 125 %), "
        "562.5 ms of CPU more per call: 500.0 ms (median, longest 750.0 ms) against 125.0 ms otherwise, 1.75 s over "
        "it in all"), said
    assert said["evidence"][0]["value"] == 225.0 and said["evidence"][1]["value"] == (3 * 0.5 + 0.75) / 4
    slow = spikes(rows, one_thread=True)
    assert [(s["index"], s["cause"]) for s in slow] == [(i, busy.CAUSE) for i in (9, 19, 29, 39)], slow


def test_crowded_and_computed_hold_at_their_bounds():
    """Binary-exact plants (level 125 ms, usual rate 20 %): a 250 ms call on full cores whose others
    took 45 % (25 % more: 62.5 ms over its 250 ms, exactly half its 125 ms excess) is crowded; a
    rise a 1/1024 % short is not; 25 % idle is not full; the same rise at pace 2 (the process
    computes half its time) holds twice the CPU, so a rise of 12.5 % is enough; a rate at its usual
    is not, whatever the pace; nor a call whose 125 ms excess is within the steps' noise (``least``
    125 ms). ``computed``: usual work 62.5 ms at a 125 ms level (pace 2): a call 62.5 ms over whose
    work grew 15.625 ms (31.25 ms at the pace: exactly half) computed; 15.625 ms less 1/1024 ms did
    not; no work known, none did."""
    t = np.array([0.25, 0.25, 0.25, 0.25])
    others = np.array([45.0, 45.0 - 2**-10, 45.0, 45.0])
    idle = np.array([10.0, 10.0, 25.0, 10.0])
    assert busy.crowded(others, idle, t, 0.125, 20.0).tolist() == [True, False, False, True]
    assert busy.crowded(others - 12.5, idle, t, 0.125, 20.0, 2.0).tolist() == [True, False, False, True]
    assert not busy.crowded(np.full(4, 20.0), idle, t, 0.125, 20.0, 1e9).any()
    assert not busy.crowded(others, idle, t, 0.125, 20.0, 1.0, 0.125).any()
    done = np.array([0.0625] * 20 + [0.078125, 0.078125 - 2**-20])
    wall = np.array([0.125] * 20 + [0.1875, 0.1875])
    steady = np.ones(22, dtype=bool)
    assert busy.computed(done, steady, wall, 0.125).tolist() == [False] * 20 + [True, False]
    assert not busy.computed(None, steady, wall, 0.125).any()


def test_a_crowded_calls_words_say_its_rate_and_the_cpu_its_rise_took():
    assert busy.crowded_words(180.0, 10.0, 1.125, 0.125, 100.0) == (
        "other processes took 180 % of a core on this process's cores during it (usually 100 %): 900.0 ms of CPU "
        "more over its 1125.0 ms, against 1000.0 ms over the level; 10 % idle left")


def test_the_saved_run_whose_every_10th_step_computed_150_ms_more_is_not_a_busy_machine():
    """files/spiky_sample.jsonl: 100 GCN steps, torch on one thread, collect(sample=0.5) on a 2-core
    VM with others at 130-134 % of a core throughout; every 10th step did 150 ms more of its own CPU
    work (thread_time-bounded): 208-238 ms wall with 153-155 ms of CPU against a usual 2.75 ms and
    2.45 ms. None of the 10 is a busy machine: each is unexplained and computed, and no finding
    says busy machine."""
    report = Report(gnnmon.load(Path(__file__).parent / "files" / "spiky_sample.jsonl"))
    slow = [s for s in report.spikes() if s["label"] == "train_step" and (s["index"] + 1) % 10 == 0]
    assert len(slow) == 10 and all(s["cause"] == "unexplained" and s["computed"] for s in slow), slow
    kinds = [f["kind"] for f in report.diagnosis()]
    assert busy.CAUSE not in kinds, kinds
    assert kinds[0] == "slow steps", kinds


def test_a_process_that_gets_a_fifth_of_its_core_loses_five_wall_seconds_to_each_cpu_second_taken():
    """36 calls of 125 ms computing 25 ms (cpu_s: a fifth of the core) beside others at 60 %; 4 calls
    computing the same take 625 ms while others take 80 %: the rise took 0.2 × 625 = 125 ms of CPU,
    under half the 500 ms excess, but at the usual pace (5 wall seconds a CPU second) it cost
    625 ms, all of it: a busy machine (on a loaded 2-core VM with 16 busy processes pinned beside a
    run on one core, the others' share rose from about 62 to 96 % while calls of 220 ms took
    3.3 s). Held at pace 1, the same calls are not crowded."""
    rows = [row(i, 0.625, 0.025, 80.0) if i % 10 == 9 else row(i, LEVEL, 0.025, 60.0) for i in range(40)]
    for r in rows:
        del r["thread_cpu_s"]
    lp = loop_of(rows)
    load = busy.load(lp)
    assert load is not None and load[2:] == (60.0, 5.0)
    assert not busy.crowded(load[0], load[1], lp.t, LEVEL, 60.0).any()
    total = sum(r["wall_s"] for r in rows)
    said = mf.busy_machine(lp, total)
    assert said is not None and said["words"] == (
        "4 call(s) of step ran on full cores while other processes took 80 % of a core on them (usually 60 %), "
        "125.0 ms of CPU more per call: 625.0 ms (median, longest 625.0 ms) against 125.0 ms otherwise, 2.00 s over "
        "it in all"), said
    assert [(s["index"], s["cause"]) for s in spikes(rows)] == [(i, busy.CAUSE) for i in (9, 19, 29, 39)]


def test_calls_at_the_level_whose_sampled_rate_jittered_up_were_not_slowed():
    """41 calls computing 25 ms whose times cycle 117.19, 125, 132.81, 128.91 ms (level, their
    median, 128.91 ms) while the others' rate is 60 % but 62 % in the 132.81 ms calls (usual 60 %):
    such a call holds its 3.9 ms excess by the rate at the usual pace (2 % of 132.8 ms, times 5.2:
    13.7 ms), yet the excess is within 3 spreads of the times of the calls the rise did not touch
    (35 ms): no call is the machine's, though without that gate some are crowded (the old rule
    named them too: others' seconds grow with the call)."""
    times = (0.1171875, 0.125, 0.1328125, 0.12890625)
    rows = [row(i, times[i % 4], 0.025, 62.0 if i % 4 == 2 else 60.0) for i in range(41)]
    for r in rows:
        del r["thread_cpu_s"]
    lp = loop_of(rows)
    load = busy.load(lp)
    assert not busy.machine_calls(lp, load, False).any()
    assert load is not None and lp.level == 0.12890625 and load[2] == 60.0
    assert busy.crowded(load[0], load[1], lp.t, lp.level, 60.0, load[3]).any()  # without the gate
