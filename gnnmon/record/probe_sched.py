"""The scheduler probe: a top-level row's thread CPU time, preemptions, waits and run-queue time
(``thread_*``), and the same since that thread's previous top-level row ended (``before_*``);
on with the run's ``sched`` (Linux: :mod:`gnnmon.devices.sched`)."""

from __future__ import annotations

import threading
from typing import Any

from gnnmon.devices.sched import Times, sched_state, thread_times


class Sched:
    """The row's thread's counters at its opening (which :func:`row_start` gives a DDP bucket
    watch of the row) and at its closing, on the same thread (another thread's are not its)."""

    top_level = True

    def open(self, row: Any) -> tuple[int, Times]:
        now = thread_times()
        sched_state().row_open = (row, now)
        _before(row.fields, now)
        return threading.get_ident(), now

    def close(self, row: Any, opened: Any, fields: dict[str, Any], error: BaseException | None) -> None:
        if threading.get_ident() == opened[0]:
            state = sched_state()
            if getattr(state, "row_open", None) is not None and state.row_open[0] is row:
                state.row_open = None
            now = thread_times()
            put_sched(fields, "thread_", opened[1], now)
            state.last_end = (fields, now)  # read before the row's end is (inside its window): its end read later


def row_start(row: Any) -> Times | None:
    """``row``'s thread counters at its opening, read on its thread while it is open (a top-level
    row of a run with ``sched``); else None."""
    opened = getattr(sched_state(), "row_open", None)
    return opened[1] if opened is not None and opened[0] is row else None


def _before(fields: dict[str, Any], now: Times) -> None:
    """The thread's scheduler counters since its previous top-level row ended (``before_*``)."""
    last = getattr(sched_state(), "last_end", None)  # (that row's fields, its Times)
    if last is not None and last[0]["t_end_ns"] is not None:
        fields["before_s"] = (fields["t_start_ns"] - last[0]["t_end_ns"]) / 1e9
        put_sched(fields, "before_thread_", last[1], now)


_KEYS: dict[str, tuple[str, str, str, str]] = {}
"""A prefix's four field names, made once (not four f-strings on every row)."""


def put_sched(fields: dict[str, Any], prefix: str, start: Times, end: Times) -> None:
    """``<prefix>cpu_s``, ``<prefix>preempted``, ``<prefix>waits`` and, where the kernel keeps it,
    ``<prefix>queued_s``: a thread's scheduler counters
    (:func:`~gnnmon.devices.sched.thread_times`) from ``start`` to ``end``."""
    keys = _KEYS.get(prefix)
    if keys is None:
        keys = _KEYS[prefix] = (f"{prefix}cpu_s", f"{prefix}preempted", f"{prefix}waits", f"{prefix}queued_s")
    fields[keys[0]] = end[0] - start[0]
    fields[keys[1]] = end[1] - start[1]
    fields[keys[2]] = end[2] - start[2]
    if start[3] is not None and end[3] is not None:
        fields[keys[3]] = end[3] - start[3]


def choose(run: Any) -> Sched | None:
    """With the run's ``sched`` option."""
    return Sched() if run.sched else None
