"""The input-bound finding's "waited X per batch for its data against Y per step": Y is the step's
own time, its window less the waits for batches inside it (``data_wait_in_row_s``: a ``gnnmon run``
row of several batches waits for its later ones in its window).

Planted: 40 rows of 4 batches, each batch waiting 31.25 ms (one before the row, 3 inside it), a
step's own time 15.625 ms: each window 109.375 ms. Binary fractions, so the means are exact."""

from __future__ import annotations

import gnnmon
from gnnmon.report.loops import Loop

K, STEPS = 4, 40
"""Batches a step and steps, planted."""

WAIT, OWN = 2**-5, 2**-6
"""A batch's wait (31.25 ms) and a step's own time (15.625 ms), planted."""


def rows(in_row: bool = True) -> list[dict]:
    """The planted loop, back to back; ``in_row``: the 3 later batches' waits inside each row's
    window (else a row of one batch after one wait: the plain case)."""
    out, t = [], 0
    for i in range(STEPS):
        t += int(WAIT * 1e9)  # the first batch's wait, before the row
        k = K if in_row else 1
        wall = OWN + (k - 1) * WAIT
        row = {"label": "step", "index": i, "wall_s": wall, "data_wait_s": k * WAIT, "batches": k,
               "step_rule": "update", "data_workers": 0, "t_start_ns": t, "t_end_ns": t + int(wall * 1e9)}
        if in_row:
            row["data_wait_in_row_s"] = (k - 1) * WAIT
        out.append(row)
        t += int(wall * 1e9)
    return out


def words(planted: list[dict]) -> str:
    (found,) = [f for f in gnnmon.Report(planted).diagnosis() if f["kind"] == "input-bound"]
    return found["words"]


def test_a_step_of_several_batches_is_its_own_time_not_its_window():
    report = gnnmon.Report(rows())
    assert Loop("step", report.table.parts["step"]).own.tolist() == [OWN] * STEPS
    assert words(rows()).startswith(
        "step waited 31.2 ms per batch for its data against 15.6 ms per step of 4 batches (89 % of its loop)")


def test_a_row_of_one_batch_is_its_window():
    """No waits inside the rows: the step is its window, 15.625 ms, the wait 2/3 of the loop."""
    assert words(rows(in_row=False)).startswith(
        "step waited 31.2 ms per batch for its data against 15.6 ms per step (67 % of its loop)")
