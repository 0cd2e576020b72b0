"""Whether a loader with no workers computed, waited for a core or waited off the CPU is read
from its thread's time between steps where ``collect(sched=True)`` measured it (``before_s``,
``before_thread_cpu_s``, ``before_thread_queued_s``), not from the sampled load, which over a
short loop blends a sample taken before it (the newcomer's GraphSAGE loop read "at most 0 % of a
core" while its thread computed through every gap); the sampled load is read where they are absent.

Planted: 40 steps of 10 ms (10 ms CPU) after 30 ms waits, no workers, 2 cores; each gap between
steps 30 ms, split by the plant into computed, queued and off-CPU time. The sampled
``cpu_util_pct`` is planted to say the opposite of the gaps (25 %: the steps' own 10 of 40 ms, the
loader 0 %; or 100 %: the loader 75 %), so the verdict shows which figure was read."""

from __future__ import annotations

import pytest

import gnnmon

WAIT, STEP, N = 0.030, 0.010, 40
"""A gap's wait (s), a step (s) and the steps, planted."""


def planted(cpu: float | None, queued: float | None, own_pct: float, idle_pct: float, others_pct: float,
            workers: int = 0) -> list[dict]:
    """N steps, the gap before each (but the first) WAIT s, its thread computing ``cpu`` s and
    queued ``queued`` s of it (None: not recorded); the sampled load planted per row."""
    out = []
    for i in range(N):
        t = int(i * (WAIT + STEP) * 1e9)
        row = {"label": "step", "index": i, "t_start_ns": t, "t_end_ns": t + int(STEP * 1e9), "wall_s": STEP,
               "cpu_s": STEP, "data_wait_s": WAIT, "data_workers": workers, "cpu_util_pct": own_pct,
               "idle_cpu_pct": idle_pct, "others_cpu_pct": others_pct}
        if i and cpu is not None:
            row |= {"before_s": WAIT, "before_thread_cpu_s": cpu}
            if queued is not None:
                row["before_thread_queued_s"] = queued
        out.append(row)
    return out


def found(rows: list[dict]) -> dict:
    manifest = {"devices": {"cpu_count": 2, "cpu_usable": 2}}
    (f,) = [f for f in gnnmon.Report(rows, manifest=manifest).diagnosis() if f["kind"] == "input-bound"]
    return f


def test_a_loader_that_computed_through_its_gaps_is_not_read_off_the_cpu_from_a_blended_sample():
    """The gaps all CPU (30 ms of 30), a core and a half idle; the sample says the loader took 0 %:
    it computed, so one worker on the idle core, not "waits off the CPU"."""
    f = found(planted(cpu=WAIT, queued=0.0, own_pct=25.0, idle_pct=150.0, others_pct=0.0))
    assert ("; between steps the training thread, which makes the batches, computed 30.0 ms, waited 0.0 ms for a "
            "core and 0.0 ms off the CPU (of 30.0 ms, mean of 39 gaps: before_thread_*, measured)") in f["words"], f
    assert f["next"].startswith("num_workers=1 in the DataLoader (1.5 core(s) stood idle beside the run)"), f["next"]
    assert {e["figure"]: e["value"] for e in f["evidence"]}["before_thread_cpu_s"] == pytest.approx(WAIT)


def test_a_loader_that_computed_and_queued_on_a_busy_machine_is_told_the_cores_were_full():
    """Half of each gap computed (15 ms), half queued for a core (15 ms); no core idle, others
    150 %: the cores were full of other work, not a wait off the CPU."""
    f = found(planted(cpu=0.015, queued=0.015, own_pct=30.0, idle_pct=0.0, others_pct=150.0))
    assert "computed 15.0 ms, waited 15.0 ms for a core and 0.0 ms off the CPU" in f["words"], f["words"]
    assert f["next"].startswith("the cores were full (0 % of a core stood idle), other processes taking 150 % of a "
                                "core on them"), f["next"]


def test_a_loader_off_the_cpu_in_its_gaps_is_told_workers_overlap_it_whatever_the_sample_says():
    """1 ms of each 30 ms gap computed, none queued, 29 ms off the CPU; the sample says the loader
    took 75 % of a core: measured, it waited. 30 ms a batch against 10 ms steps: 3 workers."""
    f = found(planted(cpu=0.001, queued=0.0, own_pct=100.0, idle_pct=150.0, others_pct=0.0))
    assert f["next"].startswith(
        "the loader waits off the CPU (I/O, a sleep, a lock), not for the cores: between steps the training thread, "
        "which makes the batches, was off the CPU 29.0 ms of 30.0 ms (measured), in next(); workers overlap it with "
        "the step even on full cores, a waiting one holding no core: num_workers=3 in the DataLoader"), f["next"]


def test_without_the_run_queue_the_gap_not_computed_is_off_the_cpu():
    """``before_thread_queued_s`` not recorded (no schedstat): queued counts 0, 29 ms off the CPU."""
    f = found(planted(cpu=0.001, queued=None, own_pct=100.0, idle_pct=150.0, others_pct=0.0))
    assert "computed 1.0 ms, waited 0.0 ms for a core and 29.0 ms off the CPU" in f["words"], f["words"]


@pytest.mark.parametrize("workers", [0, 2])
def test_the_sampled_load_is_read_where_the_gaps_are_not_measured_or_not_the_loaders(workers):
    """No ``before_*`` (workers 0), or workers that make the batches in other processes (their
    time is not the training thread's): the sample (25 %, the steps' own 10 of 40 ms) is read as before:
    the loader took at most 0 % while batches were being made, so it waited off the CPU."""
    f = found(planted(cpu=None if workers == 0 else WAIT, queued=0.0, own_pct=25.0, idle_pct=150.0,
                      others_pct=0.0, workers=workers))
    assert "between steps" not in f["words"], f["words"]
    assert f["next"].startswith("the loader waits off the CPU (I/O, a sleep, a lock), not for the cores: it used at "
                                "most 0 % of a core"), f["next"]


def test_gaps_mostly_other_work_than_the_wait_are_not_read_as_the_loaders():
    """Gaps of 100 ms (30 ms of it the wait: under half), all CPU: the gap's CPU is not the
    loader's to judge, and the sample is read, as where the gaps are not measured."""
    rows = planted(cpu=0.1, queued=0.0, own_pct=25.0, idle_pct=150.0, others_pct=0.0)
    for row in rows[1:]:
        row["before_s"] = 0.1
    f = found(rows)
    assert "between steps" not in f["words"], f["words"]
    assert f["next"].startswith("the loader waits off the CPU (I/O, a sleep, a lock), not for the cores: it used at "
                                "most 0 % of a core"), f["next"]
