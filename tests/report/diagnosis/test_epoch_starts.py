"""The wait at epoch starts where the loader's workers take turns
(:func:`gnnmon.report.diagnosis.input_evidence.epoch_starts`): with ``num_workers`` workers the
k-th batch of an epoch comes from the (k mod workers)-th in line, so the waits come in turns (two
workers at 40 ms a batch against 1 ms steps: ~40 ms at every 2nd batch, ~1 ms at the others). An
epoch's first batch, made from scratch, waits as the longest-waiting turn's batches do; only what
it waits beyond them is the epoch start's cost. Planted rows (the input finding's helpers), each
wait its turn's level plus a planted jitter of at most :data:`RES` either way, so every bound below
is the planted truth ± the jitter; then one live loader with a planted worker start-up."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest
import torch

import gnnmon
from gnnmon.data.table import Table
from gnnmon.report.diagnosis.epoch_starts import EpochStarts, epoch_starts
from gnnmon.report.diagnosis.gc_waits import gc_in_waits
from gnnmon.report.loops import Loop
from gnnmon.report.stats import median, spread
from tests.report.diagnosis.test_input_finding import PLAIN, epochs, input_bound, planted

LONG, SHORT, STEP = 0.040, 0.001, 0.001
"""The planted turns: the long turn's batches wait 40 ms, the others 1 ms; each step takes 1 ms."""

RES = 0.0005
"""The planted waits' resolution: each wait is its planted value ± at most 0.5 ms (uniform)."""

BATCHES, EPOCHS = 20, 3
"""Batches an epoch, epochs a run."""

START_UP = 0.030
"""The planted extra wait at each epoch's first batch (the workers' start-up), s."""


def turns(workers: int, extra: float, seed: int = 0, batches: int = BATCHES, late: int = 0,
          **fields) -> list[dict]:
    """:data:`EPOCHS` epochs of ``batches`` steps of :data:`STEP` s (``epoch`` marked), the loader's
    ``workers`` taking turns: the k-th batch of an epoch waits :data:`LONG` where k ≡ ``late`` mod
    workers (0: the first batch's turn; 1: the next worker started over half a batch later, so the
    loop waits for it each round), else :data:`SHORT`, each ± up to :data:`RES` (seeded); each
    epoch's first batch, made from scratch, waits :data:`LONG` and ``extra`` s more."""
    rng = random.Random(seed)
    rows = planted(EPOCHS * batches, 0.0, STEP, data_workers=workers, **fields)
    for i, row in enumerate(rows):
        k = i % batches
        row["epoch"] = i // batches
        long = k == 0 or k % workers == late
        row["data_wait_s"] = (LONG if long else SHORT) + (extra if k == 0 else 0.0) + rng.uniform(-RES, RES)
    return rows


def starts_of(rows: list[dict], gc_events: list[dict] | None = None) -> tuple[EpochStarts | None, float]:
    """What :func:`epoch_starts` finds in ``rows`` (num_workers as recorded), the collections
    between calls (``gc_events``) taken out of the waits as the report takes them, and the
    measured time (s): the loop's, and those collections once."""
    loop = Loop("step", Table(rows).parts["step"])
    known = ~np.isnan(loop.column("data_wait_s"))
    gc = gc_in_waits(loop, gc_events or [])
    between = sum(e["duration_s"] for e in gc_events or [] if not e.get("row"))
    total = float(np.sum(loop.t) + np.sum(loop.wait)) + between - float(gc.sum())
    workers = int(rows[0]["data_workers"]) if "data_workers" in rows[0] else None
    return epoch_starts(loop, known, total, workers, gc)[0], total


def others_median_excess(rows: list[dict]) -> float:
    """The first batches' wait beyond the median of the other batches' (one peak assumed), s in all."""
    first = [r["data_wait_s"] for r in rows if r["index"] % BATCHES == 0]
    rest = [r["data_wait_s"] for r in rows if r["index"] % BATCHES]
    return float(sum(first) - len(first) * median(np.array(rest)))


def own_turn_excess(rows: list[dict], workers: int) -> float:
    """The first batches' wait beyond the median of the other batches of their turn (k ≡ 0 mod
    workers), s in all."""
    first = [r["data_wait_s"] for r in rows if r["index"] % BATCHES == 0]
    mine = [r["data_wait_s"] for r in rows if r["index"] % BATCHES and r["index"] % BATCHES % workers == 0]
    return float(sum(first) - len(first) * median(np.array(mine)))


@pytest.mark.parametrize("workers", [2, 3, 4])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("late", [0, 1])
def test_turns_with_no_cost_at_the_epoch_start_are_no_epoch_start_finding(workers, seed, late):
    """The first batch waits as the longest-waiting turn's batches do (40 ± 0.5 ms), nothing more:
    no epoch-start cost, though its excess over the others' median (~1 ms: the 1 ms turns outnumber
    the 40 ms one) is over 5 % of the run, as the newcomer's two workers were misread; and, the long
    turn the next worker's (``late``), though its own turn's batches waited ~1 ms. The steady wait
    is still the finding; its words and next step say nothing of epoch starts."""
    rows = turns(workers, 0.0, seed, late=late, data_persistent=0)
    starts, total = starts_of(rows)
    # the plant is one that a level of one peak (late 0) or of the first batch's own turn (late 1) misreads
    assert (others_median_excess(rows) if late == 0 else own_turn_excess(rows, workers)) > 0.05 * total
    assert starts is None
    found = input_bound(rows, cores=2)
    assert "epoch start" not in found["words"] and "persistent_workers=True in the DataLoader" not in found["next"]


@pytest.mark.parametrize("workers", [2, 3, 4])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("late", [0, 1])
def test_a_planted_start_up_beyond_the_turns_is_found_at_its_size(workers, seed, late):
    """30 ms more at each epoch's first batch (a worker's start-up): found, each epoch's excess
    within 30 ms ± 2 × 0.5 ms (its wait and the long turn's median each off by at most the
    jitter), read against the longest-waiting turn (the first batch's or the next one's), and the
    next step is the workers' start."""
    rows = turns(workers, START_UP, seed, late=late, data_persistent=0)
    starts, _ = starts_of(rows)
    assert starts is not None and starts.turn == workers
    assert EPOCHS * (START_UP - 2 * RES) <= starts.excess <= EPOCHS * (START_UP + 2 * RES)
    assert LONG - RES <= starts.level <= LONG + RES
    mine = [r["data_wait_s"] for r in rows if r["index"] % BATCHES and r["index"] % BATCHES % workers == late]
    assert starts.level == median(np.array(mine))
    found = input_bound(rows, cores=2)
    nth = {2: "2nd", 3: "3rd", 4: "4th"}[workers]
    each = ", ".join(f"{1e3 * r['data_wait_s']:,.0f}" for r in rows if r["index"] % BATCHES == 0)
    assert found["words"].endswith(
        f"; {PLAIN}; num_workers={workers} on 2 core(s); {1e3 * starts.excess:,.1f} ms of it at {EPOCHS} epoch "
        f"start(s) beyond the {1e3 * starts.level:,.1f} ms that every {nth} batch waited (the longest-waiting turn of "
        f"the {workers} workers) (each epoch's first batch: {each} ms)"), found["words"]
    assert found["next"].startswith("the loader's workers start with each epoch (their start-up and first batches "
                                    "wait at its first batch): persistent_workers=True in the DataLoader keeps them "
                                    "across epochs; then "), found["next"]


def test_turns_as_many_long_as_short_are_judged_within_the_turn():
    """21 batches an epoch, two workers: 10 batches of each turn after the first, so the others'
    median falls between the peaks (~20 ms) and their robust spread spans the gap (~29 ms: 3 × 29 ×
    √3 = 150 ms would hide the 90 ms planted). Within the first batch's turn the spread is the
    jitter's: the planted 30 ms a start is found, within 30 ± 2 × 0.5 ms each."""
    for seed in range(3):
        starts, _ = starts_of(turns(2, START_UP, seed, batches=21))
        assert starts is not None and starts.turn == 2
        assert EPOCHS * (START_UP - 2 * RES) <= starts.excess <= EPOCHS * (START_UP + 2 * RES)
        assert starts_of(turns(2, 0.0, seed, batches=21))[0] is None


def test_one_worker_none_or_an_unrecorded_number_read_the_others_median():
    """The input finding's plant (200 ms at each epoch's first batch, 0.4 / 0.6 ms in turn at the
    others): with one worker, none, or num_workers not recorded, the level is the others' median,
    0.5 ms: 3 × 199.5 = 598.5 ms. With two recorded, the 0.6 ms batches are the longest-waiting
    turn: 3 × 199.4 = 598.2 ms."""
    for fields in ({"data_workers": 1}, {"data_workers": 0}, {}):
        rows = epochs([0.200, 0.200, 0.200], **fields)
        starts, _ = starts_of(rows)
        assert starts is not None and starts.turn == 1, fields
        assert starts.level == pytest.approx(0.0005) and starts.excess == pytest.approx(3 * 0.1995), fields
        assert "598.5 ms of it at 3 epoch start(s) beyond the other batches' 0.5 ms" in input_bound(rows)["words"]
    starts, _ = starts_of(epochs([0.200, 0.200, 0.200], data_workers=2))
    assert starts is not None and starts.turn == 2
    assert starts.level == pytest.approx(0.0006) and starts.excess == pytest.approx(3 * 0.1994)


BATCH = 0.020
"""The live loader's planted cost of a batch to a worker: 2 items of 10 ms sleep (s)."""

LIVE_START_UP = 0.100
"""The live loader's planted start-up: each worker sleeps 100 ms before its first item (s)."""


class Sleepy(torch.utils.data.Dataset):
    """16 items of 10 ms sleep each: 8 batches of 2, :data:`BATCH` to a worker."""

    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(BATCH / 2)
        return torch.zeros(1)


def _start_up(worker: int) -> None:
    time.sleep(LIVE_START_UP)


class TimedIter:
    """A DataLoader whose ``iter()`` is timed (``iter_s``, s, one per pass): its workers start
    there, their start-up running before watch_loader's timer of next() starts."""

    def __init__(self, loader: torch.utils.data.DataLoader) -> None:
        self.loader, self.iter_s = loader, []
        self.num_workers, self.persistent_workers = loader.num_workers, loader.persistent_workers

    def __iter__(self):
        t0 = time.perf_counter()
        it = iter(self.loader)
        self.iter_s.append(time.perf_counter() - t0)
        return it

    def __len__(self) -> int:
        return len(self.loader)


def test_live_two_workers_in_turns_with_a_planted_start_up(tmp_path):
    """2 workers (a batch 20 ms of sleep to each, steps ~0.1 ms), each sleeping 100 ms at its start,
    2 epochs, workers started anew: an epoch's first batch waits at least 100 + 20 ms (a sleep
    never ends early) less the time iter(loader) took (the workers start there, before next() is
    timed); the others wait in turns, the odd ones where the second worker started over 10 ms
    after the first (seen on a 2-core VM: 256 and 149 ms first batches, the turns ~13 and ~7 ms).
    The level is the longest-waiting turn's median, and what is said is at least the planted
    start-up less the part of it iter() held, less what that median overran the planted 20 ms (a
    busy host's lateness), each epoch, and less any collection in the starts' waits (the waits are
    read without the collections between calls in them, as the report reads them)."""
    loader = TimedIter(torch.utils.data.DataLoader(Sleepy(), batch_size=2, num_workers=2, worker_init_fn=_start_up))

    @gnnmon.cuda_timed
    def step(batch: torch.Tensor) -> None:
        batch.sum()

    with gnnmon.collect(tmp_path / "run.jsonl") as run:
        for epoch in range(2):
            run.mark("epoch", epoch)
            for batch in gnnmon.watch_loader(loader):
                step(batch)
    rows = [r for r in gnnmon.iter_rows(tmp_path / "run.jsonl") if r.get("label") == "step"]
    waits = np.array([r["data_wait_s"] for r in rows])
    k = np.arange(waits.size) % 8
    in_iter = np.array(loader.iter_s)
    assert waits.size == 16 and np.all(waits[k == 0] + in_iter >= LIVE_START_UP + BATCH), (waits, in_iter)
    report = run.report()
    collected = gc_in_waits(Loop("step", Table(rows).parts["step"]), report.gc_events)
    waits = waits - collected  # as the report reads them
    turns = [waits[k > 0], *(waits[(k > 0) & (k % 2 == turn)] for turn in (0, 1))]
    longest = max(turns, key=median)
    level = median(longest)
    starts, total = starts_of(rows, report.gc_events)
    least = (float(np.sum(LIVE_START_UP - in_iter)) - 2 * max(level - BATCH, 0.0)  # the start-up next() holds
             - float(collected[k == 0].sum()))  # less any collection that ran beside it
    if starts is None:  # said only at 5 % of the run and beyond 3 of the turn's spreads × √epochs
        assert least < 0.05 * total or least <= 3 * spread(longest) * np.sqrt(2), (waits, in_iter)
        pytest.skip(f"iter(loader) held the start-up ({in_iter} s): {least:.3f} s left to next(), under the bar")
    assert starts.level == level and starts.excess >= least, (starts, waits, in_iter)
    (found,) = [f for f in report.diagnosis() if f["kind"] == "input-bound"]
    assert f"{1e3 * starts.excess:,.1f} ms of it at 2 epoch start(s) beyond the {1e3 * level:,.1f} ms" in found["words"]
