"""The part of the input-bound finding's wait at each epoch's first batch, where a loader's workers
start (:func:`epoch_starts`), judged against what the other batches' waits reach."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gnnmon.report.loops import Loop, beyond_noise
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

    ``gc`` (s per call: :func:`~gnnmon.report.diagnosis.input_evidence.gc_in_waits`) is taken out
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
