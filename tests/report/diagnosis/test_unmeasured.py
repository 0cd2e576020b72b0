"""The time between the measured calls (:func:`gnnmon.report.diagnosis.findings.unmeasured`): the
findings' shares are of the measured time (the calls and their waits for data), so a loop that
spends most of its time between them says so beside the findings (a newcomer's loop slept 20 ms
after each 2 ms step, outside it, and read "47 % of the measured time" with the sleep nowhere)."""

from __future__ import annotations

import time

import pytest

import gnnmon
from gnnmon.report.diagnosis.findings import unmeasured
from gnnmon.report.diagnosis.findings_markdown import unmeasured_text
from tests.devices.test_sched import _spin

CALL, EVERY, N = 0.125, 0.5, 40
"""Each planted call's seconds, the seconds from one call's start to the next's, the calls."""


def rows(every: float = EVERY, n: int = N, call: float = CALL) -> list[dict]:
    start = 2**40
    return [{"label": "step", "index": i, "parent": None, "wall_s": call, "t_start_ns": start + round(i * every * 1e9),
             "t_end_ns": start + round((i * every + call) * 1e9)} for i in range(n)]


def test_the_time_between_calls_is_said_with_the_span_it_is_of():
    """40 calls of 125 ms, one every 500 ms: 5 s covered of a 19.625 s span, 14.625 s between."""
    between = unmeasured(gnnmon.Report(rows()))
    assert between == {"covered_s": N * CALL, "span_s": (N - 1) * EVERY + CALL,
                       "between_s": (N - 1) * EVERY + CALL - N * CALL}
    text = unmeasured_text(between)
    assert text.startswith("The shares are of the measured time: the calls, their waits for data and the collections "
                           "between them, which cover 25 % of the 19.62 s from the first call's start (its wait for "
                           "data included) to the last one's end. The other 14.62 s ran between the calls, "
                           "unmeasured"), text
    assert text in gnnmon.Report(rows()).markdown()


def test_an_accelerators_calls_are_read_by_their_windows_not_their_device_time():
    """Calls back to back whose device time (3 ms) is under their host window (10 ms): nothing ran
    between them (a reviewer's plant read 70 % of the span "between the calls")."""
    planted = [{**r, "device_s": 0.003, "backend": "cuda", "device": "cuda:0"} for r in rows(every=CALL)]
    assert unmeasured(gnnmon.Report(planted)) is None


def test_calls_that_overlap_are_covered_once_and_a_first_wait_for_data_is_in_the_span():
    """Two threads' calls of 125 ms, the second's 62.5 ms after the first's, every 500 ms: 187.5 ms
    of each 500 ms covered, not 250 ms. A first call that waited 2 s for its batch (workers
    starting) starts the span 2 s earlier, and that wait is covered."""
    two = rows() + [{**r, "label": "other", "t_start_ns": r["t_start_ns"] + 62_500_000,
                     "t_end_ns": r["t_end_ns"] + 62_500_000} for r in rows()]
    between = unmeasured(gnnmon.Report(two))
    span = (N - 1) * EVERY + CALL + 0.0625
    assert between == {"covered_s": N * 0.1875, "span_s": span, "between_s": span - N * 0.1875}
    waited = rows()
    waited[0]["data_wait_s"] = 2.0
    between = unmeasured(gnnmon.Report(waited))
    assert between == {"covered_s": 2.0 + N * CALL, "span_s": 2.0 + (N - 1) * EVERY + CALL,
                       "between_s": (N - 1) * EVERY + CALL - N * CALL}


def test_calls_back_to_back_or_nearly_leave_nothing_to_say():
    """Back to back: nothing between. 125 ms calls 131.25 ms apart (each 6.25 ms, under 5 % of the
    span, apart) and 132 ms apart (over 5 %): said only then."""
    assert unmeasured(gnnmon.Report(rows(every=CALL))) is None
    assert unmeasured(gnnmon.Report(rows(every=0.13125))) is None
    said = unmeasured(gnnmon.Report(rows(every=0.1325)))
    assert said is not None and said["between_s"] >= 0.05 * said["span_s"]
    assert "The shares are of the measured time" not in gnnmon.Report(rows(every=CALL)).markdown()


def test_calls_without_their_windows_say_nothing_of_the_time_between():
    planted = [{k: v for k, v in r.items() if k not in ("t_start_ns", "t_end_ns")} for r in rows()]
    assert unmeasured(gnnmon.Report(planted)) is None


def test_a_live_sleep_between_calls_is_the_time_between():
    """A step that spins 2 ms, and a sleep of 20 ms after each call, outside it: the time between
    is at least the sleeps after all but the last call, and at most the span less the calls' spins."""
    work, sleep, n = 0.002, 0.020, 30

    @gnnmon.cuda_timed(label="step")
    def step() -> None:
        _spin(work)

    with gnnmon.collect() as run:
        for _ in range(n):
            step()
            time.sleep(sleep)
    between = unmeasured(run.report())
    assert between is not None, run.records
    assert (n - 1) * sleep <= between["between_s"] <= between["span_s"] - n * work, between
    assert between["covered_s"] + between["between_s"] == pytest.approx(between["span_s"], rel=1e-12)
