"""What the rows say of the input-bound finding's loader beyond its wait: whether it computed or
waited off the CPU while it made batches (:func:`loader_cpu`), and the part of the wait at each
epoch's first batch (:func:`epoch_starts`), where a loader's workers start."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gnnmon.report.loops import Loop, beyond_noise
from gnnmon.report.stats import median, spread

OFF_CPU = 0.5
"""The loader waited off the CPU where its CPU time was under this share of what a thread that could
run got over the time it made batches (a sampled figure resolves 10 ms CPU ticks: 2 % of a core over
a 0.5 s window, well under half)."""


@dataclass(frozen=True)
class LoaderCpu:
    """The loader's CPU against its time making batches, both in % of one core over the loop's
    time. ``cpu_pct``: at most, the sampled ``cpu_util_pct`` of the process and its workers less
    the training process's ``cpu_s`` in its calls (the workers', and the training process's in
    next()); ``wall_pct``: at least, the time batches were being made (the loader's parts where
    split, else the wait in next(): a batch awaited is being made); ``runnable``: the share of its
    wall time a thread that could run got (1 where a core stood idle, else the steps' ``cpu_s`` /
    ``wall_s``); ``per_batch``: seconds of a worker's time a batch took (workers × the loop's time
    per batch: each worker busy while the loop waits; with none, next()'s wait); ``step``: the mean
    step (s)."""

    cpu_pct: float
    wall_pct: float
    runnable: float
    per_batch: float
    step: float

    @property
    def waited(self) -> bool:
        """Off the CPU: its CPU (at most) under :data:`OFF_CPU` of what a runnable thread got over
        its time making batches (at least): a sleep, I/O or a lock, not the cores."""
        return self.cpu_pct < OFF_CPU * self.runnable * self.wall_pct

    def workers_for_a_batch_a_step(self, workers: int) -> int:
        """Workers that make a batch a step at this pace (each one a batch in ``per_batch``)."""
        return max(workers + 1, math.ceil(self.per_batch / max(self.step, 1e-9)))


def loader_cpu(loop: Loop, known: np.ndarray, made: float, in_next: float, workers: int | None,
               room: float | None) -> LoaderCpu | None:
    """The loader's CPU against its wall time (see :class:`LoaderCpu`) over the batches ``known``
    (those with ``data_wait_s``), ``made`` seconds of them timed in the loader's parts and
    ``in_next`` waited in next() (the copy aside); ``room``: the cores that stood idle, sampled.
    None where the process's sampled CPU (``cpu_util_pct``) or the steps' ``cpu_s`` is missing."""
    own, cpu_s, wall = loop.column("cpu_util_pct"), loop.column("cpu_s"), loop.column("wall_s")
    timed = ~np.isnan(cpu_s) & ~np.isnan(wall)
    if np.isnan(own).all() or not timed.any() or loop.total <= 0 or workers is None:
        return None
    trainer = 100.0 * float(np.nansum(cpu_s)) / loop.total
    cpu = max(float(np.nanmean(own)) - trainer, 0.0)
    n = int(known.sum())
    wall_pct = 100.0 * max(made, in_next) * n / loop.total
    runnable = 1.0 if room is not None and room >= 1 else min(1.0, float(cpu_s[timed].sum() / wall[timed].sum()))
    step = float(loop.t[known].mean())
    period = step + float(loop.wait[known].mean())
    return LoaderCpu(cpu, wall_pct, runnable, workers * period if workers else in_next, step)


@dataclass(frozen=True)
class EpochStarts:
    """The wait at each epoch's first batch against the others': ``waits`` (s, per epoch, in
    order), ``level`` what the other batches' waits reach (s: see :func:`epoch_starts`), ``excess``
    the starts' wait beyond it (s, in all); ``turn``: the workers that take turns where ``level`` is
    the median of the longest-waiting turn (every ``turn``-th batch of an epoch), 1 where it is
    all the other batches' median."""

    waits: np.ndarray
    level: float
    excess: float
    turn: int = 1

    @property
    def paid_once(self) -> bool:
        """The first epoch's start waited more than twice each later one's beyond the level: a
        start-up paid once (workers kept across epochs), the later ones each epoch's first batch."""
        later = self.waits[1:] - self.level
        return later.size > 0 and bool(np.all(2 * later < self.waits[0] - self.level))


def epoch_starts(loop: Loop, known: np.ndarray, total: float,
                 workers: int | None = None) -> tuple[EpochStarts | None, np.ndarray]:
    """The wait at each epoch's first batch (the ``epoch`` marker changes) among the batches
    ``known``, where its excess over what the other batches' waits reach is a finding: at least 5 %
    of ``total`` and beyond 3 robust spreads of those batches × √epochs (:func:`beyond_noise`: an
    excess over a level, as warm-up's); and the other batches' waits (all of them where there is
    none).

    ``workers`` (the loader's num_workers, where recorded) take turns: the k-th batch of an epoch
    comes from the (k mod workers)-th in line, so the waits come in turns (two workers at 40 ms a
    batch against 1 ms steps: ~40 ms at every 2nd batch, ~1 ms at the others) and the others'
    median falls anywhere between the peaks, by how many of each there are. An epoch's first batch
    is made from scratch, as the longest-waiting turn's are (the one worker the loop waits for each
    round); which turn that is, the workers' start decides (one started later than half a batch
    after the other shifts it to the odd batches), so the level is the highest median of the
    turns (k mod workers alike, each epoch's first batch aside), the noise that turn's robust
    spread (within it: not the gap between the peaks). Where the turns wait alike, the highest of
    their medians is a little above the median of all (conservative: a start's excess is said no
    larger). Without ``workers`` (or with one or none), the others' median and spread, as of one
    peak: a two-peaked wait then reads as a cost at each epoch's start."""
    waits = loop.wait[known]
    epoch = loop.column("epoch")[known]
    first = ~np.isnan(epoch) & np.concatenate(([True], epoch[1:] != epoch[:-1]))
    rest = waits[~first]
    if not first.any() or rest.size < 2:
        return None, waits
    level, noise, turn = median(rest), spread(rest), 1
    if workers is not None and workers > 1:
        at = np.arange(waits.size)
        place = (at - np.maximum.accumulate(np.where(first, at, 0))) % workers  # k mod workers in its epoch
        for k in range(workers):
            mine = waits[~first & (place == k)]
            if mine.size >= 2 and median(mine) > level:
                level, noise, turn = median(mine), spread(mine), workers
    excess = float(np.sum(waits[first] - level))
    if not beyond_noise(excess, int(first.sum()), noise, total):
        return None, waits
    return EpochStarts(waits[first], level, excess, turn), rest
