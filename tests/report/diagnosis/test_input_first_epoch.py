"""A wait that the first epoch holds (:func:`gnnmon.report.diagnosis.epoch_starts.first_epoch`): a
cold cache or a first read from disk makes each batch of the first epoch wait, the later epochs
finding the data ready. Judged per batch over the whole run, the shift is the run's own noise
(its batch-means error holds it: the newcomer's 81 ms a batch in the first of six epochs, 2-5 ms in
the others, was "no wait beyond its noise" at 42 % of the measured time); read as a level per
epoch, it is the finding. Planted rows on a fake clock, each wait its planted level ± at most
:data:`RES` (seeded), so each bound is the plant's ± that jitter."""

from __future__ import annotations

import random

import numpy as np
import pytest

import gnnmon
from gnnmon.report.diagnosis.epoch_starts import first_epoch
from gnnmon.report.diagnosis.input_finding import COLD
from gnnmon.report.loops import Loop
from gnnmon.report.stats import median
from tests.report.diagnosis.test_input_finding import epochs, planted

COLD_WAIT, WARM_WAIT, STEP = 0.081, 0.003, 0.022
"""The planted waits (s): each first-epoch batch's, each later one's; and each step's."""

RES = 0.001
"""The planted waits' jitter: each is its level ± at most 1 ms (uniform)."""

BATCHES, EPOCHS = 8, 6


def cold_run(seed: int = 0, warm: float = WARM_WAIT, cold_epochs: int = 1) -> list[dict]:
    """:data:`EPOCHS` epochs of :data:`BATCHES` steps, the first ``cold_epochs`` epochs' batches
    waiting :data:`COLD_WAIT`, the later ones' ``warm``, each ± :data:`RES`; no workers."""
    rng = random.Random(seed)
    rows = planted(EPOCHS * BATCHES, 0.0, STEP, data_workers=0)
    for i, row in enumerate(rows):
        row["epoch"] = i // BATCHES
        row["data_wait_s"] = (COLD_WAIT if i // BATCHES < cold_epochs else warm) + rng.uniform(-RES, RES)
    return rows


def found(rows: list[dict]) -> dict[str, dict]:
    report = gnnmon.Report(rows, manifest={"devices": {"cpu_count": 2, "cpu_usable": 2}})
    return {f["kind"]: f for f in report.diagnosis()} | {"looked for": {"checks": report.looked_for()}}


@pytest.mark.parametrize("seed", range(5))
def test_a_cold_first_epoch_is_found_with_its_share(seed: int) -> None:
    """The newcomer's cache: 81 ms a batch in the first epoch, 3 ms in the five later ones (22 ms
    steps, 1.82 s measured). Found: the first epoch's excess over the later batches' median, 8 ×
    78 ms ± 8 × 2 ms, said with its share; the later 3 ms a batch, steady on its own, is at stake
    too; the next step names the cold cache first; nothing is "looked for, not found"."""
    rows = cold_run(seed)
    waits = np.array([r["data_wait_s"] for r in rows])
    total = EPOCHS * BATCHES * STEP + float(waits.sum())
    said = found(rows)
    assert said["looked for"]["checks"] == []
    f = said["input-bound"]
    cold = first_epoch(Loop("step", gnnmon.Report(rows).table.parts["step"]),
                       np.ones(waits.size, dtype=bool), total)
    assert cold is not None and cold.waits.size == BATCHES
    assert abs(cold.excess - BATCHES * (COLD_WAIT - WARM_WAIT)) <= BATCHES * 2 * RES
    assert abs(cold.level - WARM_WAIT) <= RES
    first, later = median(waits[:BATCHES]), median(waits[BATCHES:][np.arange(waits.size - BATCHES) % BATCHES > 0])
    assert (f"; the first epoch's 8 batches waited {1e3 * first:,.1f} ms each (median), the later epochs' "
            f"{1e3 * later:,.1f} ms: {1e3 * cold.excess:,.1f} ms more in the first epoch "
            f"({100 * cold.excess / total:.0f} % of the measured time), as a cold cache or a first read from disk "
            f"waits") in f["words"]
    assert f["at_stake"] == pytest.approx(cold.excess + float(waits[BATCHES:].sum()), abs=1e-9)
    assert abs(f["at_stake"] - float(waits.sum()) + BATCHES * later) <= 1e-9
    assert f["next"].startswith(COLD + "; then ")
    n, m = BATCHES, (EPOCHS - 1) * BATCHES
    stake, measured = n * (COLD_WAIT - WARM_WAIT) + m * WARM_WAIT, EPOCHS * n * STEP + n * COLD_WAIT + m * WARM_WAIT
    least = (stake - 2 * n * RES - m * RES) / (measured + (n + m) * RES)
    most = (stake + 2 * n * RES + m * RES) / (measured - (n + m) * RES)
    assert least <= f["share"] <= most  # 0.367-0.450 of the planted 744 ms in 1.82 s


def test_a_cold_first_epoch_alone_is_at_stake_alone() -> None:
    """Later batches that wait 0.1 ms (± 0.05 ms), under 5 % of the run: only the first epoch's
    excess is at stake, its next step the cold cache's alone."""
    rng = random.Random(1)
    rows = cold_run(warm=0.0001)
    for row in rows[BATCHES:]:
        row["data_wait_s"] = 0.0001 + rng.uniform(-0.00005, 0.00005)
    f = found(rows)["input-bound"]
    later = median(np.array([r["data_wait_s"] for r in rows[BATCHES:] if r["index"] % BATCHES]))  # starts aside
    first = np.array([r["data_wait_s"] for r in rows[:BATCHES]])
    assert f["at_stake"] == pytest.approx(float(np.sum(first - later)), abs=1e-9)
    assert f["next"].startswith(COLD + " — at most")


def test_one_long_first_wait_is_an_epoch_start_not_a_cold_epoch() -> None:
    """A start-up paid once (200 ms at the first epoch's first batch, 0.4 / 0.6 ms at every other
    batch, 2 workers): the first epoch's median is the others', no cold epoch; the epoch-start
    finding holds it."""
    rows = epochs([0.200, 0.0005, 0.0005], data_workers=2)
    loop = Loop("step", gnnmon.Report(rows).table.parts["step"])
    assert first_epoch(loop, np.ones(len(rows), dtype=bool), 10.0) is None
    f = found(rows)["input-bound"]
    assert "first epoch's 21 batches" not in f["words"] and "epoch start(s)" in f["words"]


def test_a_first_epoch_like_the_others_or_unmarked_is_no_cold_epoch() -> None:
    """Every epoch waiting 3 ms ± 1 ms: none; the same rows without ``epoch``, or with one epoch: none."""
    rows = cold_run(cold_epochs=0)
    loop = Loop("step", gnnmon.Report(rows).table.parts["step"])
    every = np.ones(len(rows), dtype=bool)
    assert first_epoch(loop, every, 1.0) is None
    cold = cold_run()
    for row in cold:
        del row["epoch"]
    assert first_epoch(Loop("step", gnnmon.Report(cold).table.parts["step"]), every, 1.0) is None
    one = cold_run()
    for row in one:
        row["epoch"] = 0
    assert first_epoch(Loop("step", gnnmon.Report(one).table.parts["step"]), every, 1.0) is None


def test_a_jobs_later_epochs_are_every_ranks():
    """Two ranks of a job, each with a cold first epoch (81 ms a batch), rank 0's later epochs
    waiting 3 ms a batch and rank 1's 9 ms: the later level is read over both ranks' later batches
    (their median, between the two), not over the last rank's alone (9 ms)."""
    from gnnmon.data.result import RunResult

    ranks = []
    for r, warm in ((0, 0.003), (1, 0.009)):
        ranks.append(RunResult(cold_run(r, warm=warm), manifest={"distributed": {"rank": r, "world_size": 2}}))
    job = RunResult.merge(ranks)
    loop = Loop("step", job.table.parts["step"])
    cold = first_epoch(loop, np.ones(loop.t.size, dtype=bool), 10.0)
    assert cold is not None
    assert 0.003 + RES < cold.level < 0.009 - RES, cold.level
