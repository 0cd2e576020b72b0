"""The active run: where a row goes when it closes (:func:`active_run`), the run that takes rows
when no ``collect`` is active (:func:`default_run`), and :func:`collect`, which makes a run."""

from __future__ import annotations

import os
from collections.abc import Sequence
from threading import get_ident
from typing import Any

from gnnmon.record import sigterm, state
from gnnmon.record.run import Run

_ = sigterm  # imported for what it does: SIGTERM ends the active runs cleanly (its module doc)

DEFAULT_MAX_RECORDS = 10_000
"""Rows the default run keeps (in memory only)."""


def default_run() -> Run:
    """The run that takes rows when no ``collect`` is active (in memory, newest 10,000 rows)."""
    if not state.DEFAULT:
        with state.LOCK:
            if not state.DEFAULT:
                run = Run(max_records=DEFAULT_MAX_RECORDS)
                run._state, run.active = "active", True
                state.DEFAULT.append(run)
    made: Run = state.DEFAULT[0]
    return made


def active_run() -> Run:
    """Where a row of this thread goes: the innermost active ``collect`` run started in this
    thread, else the innermost active one (a thread with no run of its own, such as a data
    loader's, records into the newest run), else the default run. Two threads each inside their
    own ``collect()`` at once each get their own rows."""
    runs = state.RUNS
    if runs:
        innermost: Run = runs[-1]
        me = get_ident()
        if innermost.thread == me or len(runs) == 1:
            return innermost
        for run in reversed(runs):
            if run.thread == me:
                return run
        return innermost
    return default_run()


def collect(path: str | os.PathLike[str] | None = None, *, sinks: Sequence[Any] = (), **options: Any) -> Run:
    """A new :class:`Run`; use it as ``with gnnmon.collect(path) as run:``.

    ``path``: the JSON Lines file the rows stream to (None: no file). In a distributed job (an
    initialised process group of more than one rank, or torchrun's ``RANK`` / ``WORLD_SIZE``)
    each rank writes its own file: ``{rank}`` in ``path`` is replaced by the rank, otherwise
    ``.rank<N>`` goes before the suffix (``job.jsonl`` -> ``job.rank0.jsonl``, ``job.rank1.jsonl``);
    the manifest's ``distributed`` says which rank wrote it and, inside a process group, its
    clock's offset to rank 0 (measured at start by all-gathers: every rank must enter ``collect``,
    as with any collective; ``distributed=False`` records this rank alone, with no collective),
    and ``gnnmon.load(path)`` reads the job back as one result whose rows carry ``rank``.
    ``sinks``: where else the rows go (objects with ``open``/``write``/``close``, or functions
    ``fn(rows)``; :mod:`gnnmon.record.sinks` has the contract). The options (``config``,
    ``max_records``, ``mode``, ``sample``, ``energy``, ``country``, ``region``,
    ``carbon_intensity``, ``cpu_power_w``, ``ram_power_w``, ``flush_interval``, ``sampler``,
    ``distributed``, ``memory_history``, ``sched``, ``compress``) are those of
    :class:`~gnnmon.record.options.Options`, with their defaults and meaning.
    """
    return Run(path, sinks=sinks, **options)

