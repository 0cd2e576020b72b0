"""A ``gnnmon run`` row of several batches (gradient accumulation) is open while its later batches
are waited for: those waits are in its window (``wall_s``) and in its ``data_wait_s``, and
``data_wait_in_row_s`` says how much, so that the loop's time, the input share, the trace's wait
before the row and the live line's data share count each wait once.

* Planted rows: 40 steps of 4 batches, each batch waiting 31.25 ms, a step's own time 15.625 ms:
  each row's window is its own time and 3 waits, its ``data_wait_s`` 4 waits. The loop is
  40 × 140.625 ms and the wait 89 % of it (each wait counted twice it read 53 %).
* Planted sleeps: test_run_batch_waits' script run through ``gnnmon run``, whose dataset sleeps
  20 ms an item (a batch of one, no workers) and which steps once every 4 batches: each row's wait
  in its window is at least 3 × 20 ms, the one before it at least 20 ms, and no more than the row's
  window holds."""

from __future__ import annotations

from types import SimpleNamespace

import gnnmon
from gnnmon.cli.live import Tally
from gnnmon.report.loops import Loop
from gnnmon.report.renderers.trace import chrome_trace
from tests.cli.running import gnnmon_run, rows_of
from tests.cli.test_run_batch_waits import SCRIPT, SLEEP

K, STEPS = 4, 40
"""Batches a step and steps, planted (as test_run_batch_waits' script plants them)."""

WAIT, OWN = 2**-5, 2**-6
"""A batch's wait (31.25 ms) and a step's own time (15.625 ms), planted: binary fractions, so the
sums are exact."""


def rows() -> list[dict]:
    """The planted loop, back to back: each row opens after its first batch's wait and waits for
    its 3 later batches inside its window."""
    out, t = [], 0
    for i in range(STEPS):
        t += int(WAIT * 1e9)  # the first batch's wait, before the row
        wall = OWN + (K - 1) * WAIT
        out.append({"label": "step", "index": i, "wall_s": wall, "data_wait_s": K * WAIT,
                    "data_wait_in_row_s": (K - 1) * WAIT, "batches": K, "step_rule": "update",
                    "data_workers": 0, "t_start_ns": t, "t_end_ns": t + int(wall * 1e9)})
        t += int(wall * 1e9)
    return out


def test_the_loop_counts_a_wait_inside_a_row_once():
    report = gnnmon.Report(rows())
    loop = Loop("step", report.table.parts["step"])
    assert loop.total == STEPS * (OWN + K * WAIT)
    assert loop.wait.tolist() == [K * WAIT] * STEPS  # the input finding's: every batch's wait
    assert loop.before.tolist() == [WAIT] * STEPS
    (found,) = [f for f in report.diagnosis() if f["kind"] == "input-bound"]
    assert "(89 % of its loop)" in found["words"], found["words"]  # 0.125 / 0.140625


def test_the_trace_draws_the_wait_before_a_row_alone():
    report = gnnmon.Report(rows())
    waits = [e for e in chrome_trace(report)["traceEvents"] if e.get("name") == "data wait"]
    steps = [e for e in chrome_trace(report)["traceEvents"] if e.get("cat") == "row"]
    assert len(waits) == STEPS
    assert {e["dur"] for e in waits} == {WAIT * 1e6}
    assert [w["ts"] + w["dur"] for w in waits] == [s["ts"] for s in steps]


def test_the_live_line_counts_a_wait_inside_a_row_once():
    tally = Tally()
    tally.write(SimpleNamespace(rows=rows()))
    assert " · data 89 % " in tally.line("run.jsonl"), tally.line("run.jsonl")


def test_gnnmon_run_says_which_waits_fell_inside_a_row(tmp_path):
    done = gnnmon_run(tmp_path, "-o", "run.jsonl", "train.py", script=SCRIPT)
    assert done.returncode == 0, done.stderr[-3000:]
    recorded = rows_of(tmp_path / "run.jsonl")
    assert [(r["label"], r["batches"]) for r in recorded] == [("step", K)] * STEPS
    for r in recorded:
        inside = r["data_wait_in_row_s"]
        assert inside >= (K - 1) * SLEEP, r  # its 3 later batches' sleeps
        assert r["data_wait_s"] - inside >= SLEEP, r  # the first batch's, before the row opened
        assert inside <= r["wall_s"], r  # inside its window
