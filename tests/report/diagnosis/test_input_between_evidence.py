"""The input-bound finding's evidence for a loader with no workers whose thread's time between
steps ``collect(sched=True)`` measured: the gap (``before_s``), the thread's CPU time in it
(``before_thread_cpu_s``) and its wait for a core (``before_thread_queued_s``), each a mean over the
gaps in seconds, named, united and said where measured, as planted.

Planted (``test_input_between_steps.planted``): 40 steps, 39 gaps of 30 ms, each 15 ms computed and
10 ms queued for a core (5 ms off the CPU); the sampled load a core and a half idle."""

from __future__ import annotations

import pytest

from tests.report.diagnosis.test_input_between_steps import WAIT, found, planted

CPU, QUEUED = 0.015, 0.010
"""Seconds each planted gap's thread computed and queued for a core."""

N = "mean of 39 (collect(sched=True), measured)"
"""The 39 gaps between 40 steps, as the evidence says them."""

BETWEEN = "the training thread between steps, where it makes the batches (num_workers=0)"


def test_the_gaps_measured_are_the_findings_evidence_named_and_united() -> None:
    f = found(planted(cpu=CPU, queued=QUEUED, own_pct=25.0, idle_pct=150.0, others_pct=0.0))
    said = [e for e in f["evidence"] if e["figure"].startswith("before_")]
    assert said == [
        {"figure": "before_s", "value": pytest.approx(WAIT), "unit": "s",
         "where": f"a step's end to the next one's start, {N}"},
        {"figure": "before_thread_cpu_s", "value": pytest.approx(CPU), "unit": "s",
         "where": f"{BETWEEN}: its CPU time in that gap, {N}"},
        {"figure": "before_thread_queued_s", "value": pytest.approx(QUEUED), "unit": "s",
         "where": f"its wait for a core in that gap, {N}"}], said
    assert ("computed 15.0 ms, waited 10.0 ms for a core and 5.0 ms off the CPU (of 30.0 ms, mean of 39 gaps: "
            "before_thread_*, measured)") in f["words"], f["words"]
    assert not any(e["figure"] in ("loader CPU", "loader time per batch") for e in f["evidence"]), f["evidence"]
