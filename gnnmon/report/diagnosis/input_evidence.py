"""What the rows say of the input-bound finding's loader beyond its wait: whether it computed or
waited off the CPU while it made batches (:func:`loader_cpu`); the part of the wait at each
epoch's first batch is :mod:`gnnmon.report.diagnosis.epoch_starts`'."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gnnmon.report.loops import Loop

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
    step's own time (s: the waits for batches inside a row of several aside)."""

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
    step = float((loop.t - (loop.wait - loop.before))[known].mean())  # its own time: the waits inside it aside
    period = step + float(loop.wait[known].mean())
    return LoaderCpu(cpu, wall_pct, runnable, workers * period if workers else in_next, step)
