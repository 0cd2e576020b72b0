"""The input check where it found nothing (``looked_for``), from planted rows: its batches and mean
wait over the rows whose wait was timed only, a share of 0 where the measured time is none, and the
least wait it would have said read from the rows' scatter per batch where that is above 5 % of the run."""

from __future__ import annotations

import pytest

import gnnmon
from gnnmon.report.diagnosis.input_finding import _spare_cores, looked_for
from gnnmon.report.loops import NOISE_K, Loop, block_se

WAIT = 2**-10
"""A timed batch's wait, s (binary: exact means)."""


def loop_of(rows: list[dict]) -> Loop:
    return Loop("step", gnnmon.Report(rows).table.parts["step"])


def steps(n: int = 40, wall: float = 1.0, **fields) -> list[dict]:
    return [{"label": "step", "index": i, "wall_s": wall, **fields} for i in range(n)]


def test_only_the_rows_whose_wait_was_timed_count() -> None:
    """40 rows of one batch each, one of them timed (1/1024 s): 1 batch, its wait."""
    rows = steps()
    rows[0]["data_wait_s"] = WAIT
    loop = loop_of(rows)
    (said,) = looked_for(loop, loop.total)
    assert (said["batches"], said["wait_s"]) == (1, WAIT)
    assert said["share"] == WAIT / loop.total


def test_no_measured_time_is_no_share() -> None:
    rows = steps(data_wait_s=WAIT)
    (said,) = looked_for(loop_of(rows), 0.0)
    assert said["share"] == 0.0 and said["wait_s"] == WAIT


def test_a_scattered_wait_is_looked_for_per_batch_from_its_rows_scatter() -> None:
    """40 rows of 4 batches, 1 s steps; two rows waited 0.6 s, the others none (2.9 % of the
    loop: not said). The rows' standard error × 3 over 4 batches a row is above 5 % of the
    41.2 s loop over its 160 batches (12.9 ms): it is the least wait said, per batch."""
    rows = steps(batches=4, step_rule="update", data_workers=0)
    for row in rows:
        row["data_wait_s"] = 0.6 if row["index"] in (7, 23) else 0.0
    loop = loop_of(rows)
    assert loop.total == pytest.approx(41.2)
    (said,) = looked_for(loop, loop.total)
    noise = NOISE_K * block_se(loop.wait) / 4
    assert noise > 0.05 * loop.total / 160
    assert (said["batches"], said["wait_s"], said["unsaid_s"]) == (160, pytest.approx(1.2 / 160), noise)


def test_idle_cores_sampled_with_no_core_count_are_the_samples() -> None:
    """150 % of a core idle (median of the rows), no ``cores``: 1.5 cores; 2 known bound them at 2."""
    loop = loop_of(steps(idle_cpu_pct=150.0))
    assert (_spare_cores(loop, None), _spare_cores(loop, 1)) == (1.5, 1.0)
