"""A label with too few calls to judge (:func:`gnnmon.report.diagnosis.findings.few_calls`) is
never silent when it holds a share of the measured time worth a finding: planted rows of a step of
80 calls of 2 ms beside an evaluation of 4 calls of 30 ms (the 4 epochs of a short run), whose
share (120 ms of 280 ms, 43 %) the diagnosis says under "Not looked for", with what it could not
judge; 12 evaluations (10 steady) are judged as before, and nothing is said of one under 5 % of
the measured time."""

from __future__ import annotations

import pytest

import gnnmon
from gnnmon.report.diagnosis.findings import unjudged
from gnnmon.report.diagnosis.findings_markdown import diagnosis_html, diagnosis_said
from gnnmon.report.diagnosis.machine_findings import MIN_CALLS
from gnnmon.report.loops import WARMUP

STEP_S = 0.002
EVAL_S = 0.030


def calls(label: str, n: int, wall: float, cpu: float | None = None) -> list[dict]:
    """``n`` top-level host calls of ``label`` of ``wall`` seconds each (``cpu`` of CPU time, if given)."""
    extra = {} if cpu is None else {"cpu_s": cpu}
    return [{"label": label, "index": i, "parent": None, "wall_s": wall, "backend": "cpu", **extra} for i in range(n)]


def test_four_evaluations_holding_43_percent_are_said_with_their_share():
    """4 x 30 ms = 120 ms of the 280 ms measured: 43 %, 2 steady calls of the 5 the time findings
    read; the step's 80 calls are judged (no note for it)."""
    report = gnnmon.Report(calls("step", 80, STEP_S) + calls("evaluate", 4, EVAL_S))
    total = 80 * STEP_S + 4 * EVAL_S
    assert unjudged(report) == [{"check": "calls", "label": "evaluate", "calls": 4, "steady": 2,
                                 "time_s": pytest.approx(4 * EVAL_S, rel=1e-12), "call_s": EVAL_S,
                                 "share": pytest.approx(4 * EVAL_S / total, rel=1e-12)}]
    line = ("Not looked for: evaluate: 4 call(s), 43 % of the measured time (120.0 ms, 30.0 ms a call, median): too "
            "few to judge whether they waited off the CPU, on a busy machine or were slow (those are read from 5 "
            "calls after the first 2; it has 2).")
    assert (MIN_CALLS, WARMUP) == (5, 2)
    assert line in report.markdown()
    assert f"<p>{line}</p>" in diagnosis_html(**diagnosis_said(report))


def test_the_newcomers_run_names_both_few_call_labels():
    """The trial's shape: 80 steps of 2 ms, 4 evaluations of 30 ms and 4 validations of 20 ms (360
    ms measured): evaluate 33 %, validate 22 %, each said with its own share."""
    rows = calls("step", 80, STEP_S) + calls("evaluate", 4, EVAL_S) + calls("validate", 4, 0.020)
    said = unjudged(gnnmon.Report(rows))
    assert [(u["label"], round(100 * u["share"])) for u in said] == [("evaluate", 33), ("validate", 22)]


@pytest.mark.parametrize(("n", "said"), [(6, True), (7, False)])
def test_a_label_is_judged_from_five_steady_calls(n, said):
    """6 calls leave 4 steady (after the first 2): said; 7 leave 5: judged, not said."""
    report = gnnmon.Report(calls("step", 80, STEP_S) + calls("evaluate", n, EVAL_S))
    assert [u["label"] for u in unjudged(report)] == (["evaluate"] if said else [])


@pytest.mark.parametrize(("wall", "said"), [(0.0025, True), (0.002, False)])
def test_a_few_call_label_under_five_percent_of_the_measured_time_is_not_said(wall, said):
    """4 calls of 2.5 ms beside 160 ms: 10 of 170 ms, 5.9 % (said); of 2 ms: 8 of 168 ms, 4.8 % (not)."""
    report = gnnmon.Report(calls("step", 80, STEP_S) + calls("evaluate", 4, wall))
    assert [u["label"] for u in unjudged(report)] == (["evaluate"] if said else [])


def test_twelve_evaluations_are_judged_as_before_and_not_said_as_few():
    """12 evaluations of 30 ms that computed 0.3 ms each (10 steady): the wait in every call is
    said as the finding it was (29.7 ms of 30.0 ms, 297 ms over the 10 steady calls); no note."""
    rows = calls("step", 240, STEP_S, cpu=0.00025) + calls("evaluate", 12, EVAL_S, cpu=0.0003)
    report = gnnmon.Report(rows)
    assert not [u for u in unjudged(report) if u.get("check") == "calls"]
    evaluate = [f for f in report.diagnosis() if f["label"] == "evaluate"]
    assert [f["words"] for f in evaluate] == [
        "evaluate spent 99 % of each call off the CPU: 29.7 ms of 30.0 ms (median of 10 steady calls), no thread of "
        "the process running, 297.0 ms in all; a wait in every call, not an excess over the level: waiting for a "
        "core (other processes' load) or on I/O, a lock or a sleep in the step; which, the rows cannot say (neither "
        "the machine's load nor the thread's run queue was recorded)"]
    assert evaluate[0]["at_stake"] == pytest.approx(10 * (EVAL_S - 0.0003), rel=1e-12)
