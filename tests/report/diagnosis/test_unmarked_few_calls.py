"""Calls with memory that mark no epochs are said to be unjudged ("Not looked for") from
``creep.MIN_EPOCHS`` steady calls on: the run's warm-up calls are not counted, and fewer steady calls
say nothing. Planted: the run's first ``WARMUP`` calls, then 4 or 3 steady calls of 500 MiB on a GPU,
no epoch marked."""

from __future__ import annotations

from gnnmon.report.diagnosis import creep
from gnnmon.report.loops import WARMUP
from tests.report.diagnosis.test_creep_levels import MiB, loop_of, plant


def unmarked(steady: int) -> list[dict]:
    """``WARMUP`` warm-up calls (indexes 0 on) then ``steady`` calls, none with an epoch."""
    rows = plant([500 * MiB], calls=WARMUP + steady, device="cuda:0")
    return [{k: (v - WARMUP if k == "index" else v) for k, v in r.items() if k != "epoch"} for r in rows]


def test_min_epochs_steady_calls_are_said_unjudged_and_fewer_are_not():
    assert creep.MIN_EPOCHS == 4
    assert creep.unmarked(loop_of(unmarked(4))) == {"label": "step", "figures": ["mem_end_bytes"], "calls": 4}
    assert creep.unmarked(loop_of(unmarked(3))) is None  # 5 calls, but 3 steady: too few
