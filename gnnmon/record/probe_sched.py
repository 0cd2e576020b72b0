"""The scheduler probe: a top-level row's thread CPU time, preemptions, waits and run-queue time
(``thread_*``), and the same since that thread's previous top-level row ended (``before_*``);
on with the run's ``sched`` (Linux: :mod:`gnnmon.devices.sched`)."""

from __future__ import annotations

import threading
from typing import Any

from gnnmon.devices.sched import Times, sched_state, thread_times


class Sched:
    """The row's thread's counters at its opening (kept on the row as ``sched0``: a DDP bucket
    watch reads them) and at its closing, on the same thread (another thread's are not its)."""

    top_level = True

    def open(self, row: Any) -> int:
        now = row.sched0 = thread_times()
        _before(row.fields, now)
        return threading.get_ident()

    def close(self, row: Any, opened: Any, fields: dict[str, Any], error: BaseException | None) -> None:
        if row.sched0 is not None and threading.get_ident() == opened:
            now = thread_times()
            put_sched(fields, "thread_", row.sched0, now)
            sched_state().last_end = (fields["t_end_ns"], now)


def _before(fields: dict[str, Any], now: Times) -> None:
    """The thread's scheduler counters since its previous top-level row ended (``before_*``)."""
    last = getattr(sched_state(), "last_end", None)  # (t_end_ns, its Times)
    if last is not None:
        fields["before_s"] = (fields["t_start_ns"] - last[0]) / 1e9
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
