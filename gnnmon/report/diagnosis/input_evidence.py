"""What the rows say of the input-bound finding's loader beyond its wait: whether it computed or
waited off the CPU while it made batches (:func:`loader_cpu`): measured where the loader runs in
the training process and ``collect(sched=True)`` timed its thread between steps
(:func:`between_steps`), else from the sampled load. The garbage collections inside the waits are
:mod:`gnnmon.report.diagnosis.gc_waits`', the part of the wait at each epoch's first batch
:mod:`gnnmon.report.diagnosis.epoch_starts`'."""

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
class Between:
    """The training thread between its steps, means over ``gaps`` gaps (s): ``gap`` from a step's
    end to the next one's start (``before_s``), ``cpu`` its CPU time in it (``before_thread_cpu_s``,
    at most the gap), ``queued`` its wait for a core (``before_thread_queued_s``, 0 where the kernel
    keeps none; at most the gap less ``cpu``), ``off`` the rest: off the CPU (a sleep, I/O, a lock)."""

    gap: float
    cpu: float
    queued: float
    gaps: int

    @property
    def off(self) -> float:
        return max(self.gap - self.cpu - self.queued, 0.0)


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
    step's own time (s: the waits for batches inside a row of several aside). ``between``: where
    measured (:func:`between_steps`), the training thread between steps, from which the three
    shares are then read: ``cpu_pct`` its CPU, ``wall_pct`` the gaps, ``runnable`` the gaps' share
    it did not wait for a core."""

    cpu_pct: float
    wall_pct: float
    runnable: float
    per_batch: float
    step: float
    between: Between | None = None

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
    Measured where the loader has no workers and its thread was timed between steps
    (:func:`between_steps`); else sampled: None where the process's sampled CPU
    (``cpu_util_pct``) or the steps' ``cpu_s`` is missing."""
    step = float(loop.own[known].mean())
    between = between_steps(loop, known) if workers == 0 else None
    if between is not None and loop.total > 0:
        n = between.gaps
        return LoaderCpu(100.0 * between.cpu * n / loop.total, 100.0 * between.gap * n / loop.total,
                         1.0 - between.queued / between.gap, in_next, step, between)
    own, cpu_s, wall = loop.column("cpu_util_pct"), loop.column("cpu_s"), loop.column("wall_s")
    timed = ~np.isnan(cpu_s) & ~np.isnan(wall)
    if np.isnan(own).all() or not timed.any() or loop.total <= 0 or workers is None:
        return None
    trainer = 100.0 * float(np.nansum(cpu_s)) / loop.total
    cpu = max(float(np.nanmean(own)) - trainer, 0.0)
    n = int(known.sum())
    wall_pct = 100.0 * max(made, in_next) * n / loop.total
    runnable = 1.0 if room is not None and room >= 1 else min(1.0, float(cpu_s[timed].sum() / wall[timed].sum()))
    period = step + float(loop.wait[known].mean())
    return LoaderCpu(cpu, wall_pct, runnable, workers * period if workers else in_next, step)


def between_steps(loop: Loop, known: np.ndarray) -> Between | None:
    """The training thread between its steps over the calls ``known`` that have ``before_s`` and
    ``before_thread_cpu_s`` (``collect(sched=True)``: measured, not sampled), where the loop's wait
    before its calls (``loop.before``) is at least half of those gaps: the gaps are then mostly the
    loader's making of batches in the training thread (with no workers), and what its thread did
    in them is what the loader did. None where not recorded or where the gaps hold mostly other work."""
    gap, cpu = loop.column("before_s"), loop.column("before_thread_cpu_s")
    timed = known & ~np.isnan(gap) & ~np.isnan(cpu) & (gap > 0)
    if not timed.any():
        return None
    gaps = float(gap[timed].sum())
    if float(loop.before[timed].sum()) < OFF_CPU * gaps:
        return None
    ran = min(float(cpu[timed].sum()), gaps)  # two clocks read apart: the CPU time may pass the gap by their skew
    queued = min(float(np.nan_to_num(loop.column("before_thread_queued_s")[timed], nan=0.0).sum()), gaps - ran)
    n = int(timed.sum())
    return Between(gaps / n, ran / n, queued / n, n)
