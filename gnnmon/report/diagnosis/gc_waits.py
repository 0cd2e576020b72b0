"""The garbage collections inside the loop's waits for batches (:func:`gc_in_waits`): a pause of the
collector's that the garbage-collection finding says, taken out of the input findings' waits so
that each second is said once."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from gnnmon.report.loops import Loop


def gc_in_waits(loop: Loop, gc_events: Iterable[Mapping[str, Any]]) -> np.ndarray:
    """Per call, the seconds of garbage collection between calls (the gc log's events with no
    ``row``: each one's window from ``t_start_ns`` for ``duration_s``) inside the loop's wait before
    it (``loop.before``), at most that wait; a job's rows meet their own rank's collections alone
    (each rank is a process with a collector of its own). The wait is placed at the end of the gap
    before the call, ``[t_start - before, t_start]``: ``watch_loader`` yields the batch and the loop
    calls its step, so the error is the loop body's own time before the call (microseconds), by which
    a collection there may be counted in the wait. A collection in a wait is a pause of the
    collector's (the garbage-collection finding says it), not the loader's time: the input findings
    read the wait without it, so that each second is said once. 0 where the call's start is not
    recorded."""
    out = np.zeros(loop.t.size)
    events = [e for e in gc_events if not e.get("row") and e.get("t_start_ns") is not None]
    if not events or not loop.has("t_start_ns"):
        return out
    rank = loop.column("rank") if loop.has("rank") else np.full(loop.t.size, np.nan)
    for r in {None if math.isnan(x) else int(x) for x in rank.tolist()}:
        calls = np.isnan(rank) if r is None else rank == r
        mine = [e for e in events if (e.get("rank") is None if r is None else e.get("rank") == r)]
        if mine:
            out[calls] = _collected_in(mine, loop.column("t_start_ns")[calls], loop.before[calls])
    return out


def _collected_in(events: list[Mapping[str, Any]], end: np.ndarray, wait: np.ndarray) -> np.ndarray:
    """Per wait (``wait`` s, ending at ``end``, ns), the seconds of one process's collections
    (``events``) inside it, at most the wait; 0 where its end is not known."""
    spans = sorted((int(e["t_start_ns"]), float(e.get("duration_s") or 0.0)) for e in events)
    start = np.array([s for s, _ in spans], dtype=float)
    length = np.array([d for _, d in spans]) * 1e9
    length[:-1] = np.minimum(length[:-1], np.diff(start))  # one collector: a window ends where the next starts
    before = np.concatenate(([0.0], np.cumsum(length)))  # the collections' time before each one's start

    def collected(at: np.ndarray) -> np.ndarray:
        """ns of collection from the first event up to each time ``at``."""
        j = np.searchsorted(start, at, side="right") - 1
        inside = np.clip(at - start[np.maximum(j, 0)], 0.0, length[np.maximum(j, 0)])
        return np.where(j < 0, 0.0, before[np.maximum(j, 0)] + inside)

    out = np.zeros(end.size)
    timed = ~np.isnan(end) & (wait > 0)
    end, wait = end[timed], wait[timed]
    out[timed] = np.minimum((collected(end) - collected(end - wait * 1e9)) / 1e9, wait)
    return out
