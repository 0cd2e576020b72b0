"""The parts of the input-bound finding's wait that the epochs hold: at each epoch's first batch,
where a loader's workers start (:func:`epoch_starts`), judged against what the other batches' waits
reach; and in the whole first epoch, a cold cache's (:func:`first_epoch`), against the later
epochs' waits."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gnnmon.report.loops import NOISE_K, Loop, beyond_noise
from gnnmon.report.stats import median, spread


@dataclass(frozen=True)
class EpochStarts:
    """The wait at each epoch's first batch against the others': ``waits`` (s, per epoch, in
    order, each less the garbage collection in it), ``level`` what the other batches' waits reach
    (s: see :func:`epoch_starts`), ``excess`` the starts' wait beyond it (s, in all); ``turn``: the
    workers that take turns where ``level`` is the median of the longest-waiting turn (every
    ``turn``-th batch of an epoch), 1 where it is all the other batches' median."""

    waits: np.ndarray
    level: float
    excess: float
    turn: int = 1
    collected: float = 0.0
    """s of garbage collection in the starts' waits, taken out of ``waits`` (the GC finding's)."""

    @property
    def paid_once(self) -> bool:
        """The first epoch's start waited more than twice each later one's beyond the level: a
        start-up paid once (workers kept across epochs), the later ones each epoch's first batch."""
        later = self.waits[1:] - self.level
        return later.size > 0 and bool(np.all(2 * later < self.waits[0] - self.level))


def epoch_starts(loop: Loop, known: np.ndarray, total: float, workers: int | None = None,
                 gc: np.ndarray | None = None) -> tuple[EpochStarts | None, np.ndarray]:
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
    peak: a two-peaked wait then reads as a cost at each epoch's start.

    ``gc`` (s per call: :func:`~gnnmon.report.diagnosis.gc_waits.gc_in_waits`) is taken out
    of each wait first: a collection that fell in an epoch's first wait is the collector's pause,
    not the loader's set-up."""
    collected = np.zeros(int(known.sum())) if gc is None else gc[known]
    waits = loop.wait[known] - collected
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
    return EpochStarts(waits[first], level, excess, turn, float(collected[first].sum())), rest


@dataclass(frozen=True)
class FirstEpoch:
    """The first epoch's waits against the later epochs': ``rows`` the first epoch's calls (a mask
    over the loop's calls), ``waits`` their waits (s, each less the garbage collection in it),
    ``level`` and ``noise`` the later batches' median and robust spread (s), ``excess`` the first
    epoch's wait beyond ``level`` (s, in all)."""

    rows: np.ndarray
    waits: np.ndarray
    level: float
    noise: float
    excess: float


def first_epoch(loop: Loop, known: np.ndarray, total: float, gc: np.ndarray | None = None) -> FirstEpoch | None:
    """The first epoch marked, where its batches (among ``known``) waited more than the later
    epochs' as a level, not in a few of them: the median of its waits above the later batches'
    median by more than :data:`~gnnmon.report.loops.NOISE_K` of their robust spreads, and its
    excess over that median at least 5 % of ``total`` and beyond 3 spreads × √its batches
    (:func:`beyond_noise`). A cold cache or a first read from disk waits so: what the later
    epochs find ready. Judged per batch over the whole run, such a wait fails (its batch-means
    error holds the shift: 81 ms a batch in the first of six epochs, 2-5 ms in the others, was
    "no wait beyond its noise" at 42 % of the measured time). None where the epochs are not
    marked, the first has under 2 timed batches or the later ones under 2; ``gc`` as in
    :func:`epoch_starts`, whose each epoch's first batch (a start-up) is not judged here."""
    epoch = loop.column("epoch")
    marked = known & ~np.isnan(epoch)
    if not marked.any():
        return None
    opens = marked & np.concatenate(([True], epoch[1:] != epoch[:-1]))  # each epoch's first batch: epoch_starts'
    rows = marked & (epoch == epoch[marked][0])
    judged = rows & ~opens  # the first epoch's batches but its start-up
    later = marked & (epoch != epoch[marked][0]) & ~opens  # by their mark, not their place (a job's ranks follow)
    if judged.sum() < 2 or later.sum() < 2:
        return None
    waits = loop.wait - (np.zeros(loop.wait.size) if gc is None else gc)
    level, noise = median(waits[later]), spread(waits[later])
    beyond = float(np.sum(waits[judged] - level))
    if median(waits[judged]) - level <= NOISE_K * noise or not beyond_noise(beyond, int(judged.sum()), noise, total):
        return None
    excess = float(np.sum(waits[rows] - level))
    return FirstEpoch(rows, waits[rows], level, noise, excess)
