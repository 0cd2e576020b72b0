"""A run's inbox: rows closed on the step's path, waiting to be finished off it (device events
read, the timeline joined), in the order they closed."""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

from gnnmon.fields import add_note
from gnnmon.timeline.join import RowJoin


class Deferred(Protocol):
    """Figures read later: ``ready()`` must not block; ``resolve(fields)`` may (it adds fields).
    Either may raise (a CUDA event's query does after an asynchronous device error): a ``ready()``
    that raises counts as ready, and the row keeps what ``resolve`` says of the failure."""

    def ready(self) -> bool: ...

    def resolve(self, fields: dict[str, Any]) -> None: ...


MAX_PENDING = 1024
"""Rows waiting for their device events before the oldest is forced out (its events waited for)."""

Pending = dict[str, Any] | tuple[dict[str, Any], list[Deferred]]
"""A closed row: its fields, with the figures still to read where it has some."""


class Inbox(deque[Pending]):
    """Closed rows in order; appended on the step's path (``deque.append`` is atomic: no lock),
    taken off it by :meth:`take_ready`."""

    def take_ready(self, join: RowJoin | None, force: bool) -> list[dict[str, Any]]:
        """The rows that are ready, finished, in order. A row is ready when its deferred figures
        are (checked without blocking) and ``join``'s timeline covers it. ``force`` (flush,
        stop): every row, waiting for the device where needed, after asking the sampler for a
        sample now so the timeline covers them. Without ``force`` only rows waiting for their
        device events are forced out, the oldest first, when more than :data:`MAX_PENDING` wait."""
        out: list[dict[str, Any]] = []
        overflow = len(self) - MAX_PENDING
        refreshed = False
        while self:
            item = self[0]
            fields: dict[str, Any]
            deferred: list[Deferred] | None
            if isinstance(item, dict):
                fields, deferred = item, None
            else:
                fields, deferred = item
            if not force and overflow <= 0 and deferred and not _ready(deferred):
                break
            if join is not None and not _covers(join, fields):
                if not force:
                    break
                if not refreshed:
                    refreshed = True
                    try:
                        join.refresh()  # a sample now: it covers every row closed before it
                    except Exception as exc:  # noqa: BLE001 - the rows go on without the sample
                        add_note(fields, f"timeline refresh failed: {exc}")
            self.popleft()
            overflow -= 1
            if deferred:
                for d in deferred:
                    try:
                        d.resolve(fields)
                    except Exception as exc:  # noqa: BLE001 - keep the row, say what failed
                        add_note(fields, f"deferred figure failed: {exc}")
            if join is not None:
                try:
                    join.join(fields)
                except Exception as exc:  # noqa: BLE001 - keep the row (and those taken before it)
                    add_note(fields, f"timeline join failed: {exc}")
            out.append(fields)
        return out

    def oldest_start(self) -> int | None:
        """``t_start_ns`` of the oldest row waiting, or None."""
        if not self:
            return None
        first = self[0]
        start: int = (first if isinstance(first, dict) else first[0])["t_start_ns"]
        return start


def _ready(deferred: list[Deferred]) -> bool:
    """Whether every figure of a row can be read without waiting; one whose question raises is
    read now, so that its row leaves with a note rather than the error leaving take_ready (which
    lost the rows taken before it and held back every row after it)."""
    try:
        return all(d.ready() for d in deferred)
    except Exception:  # noqa: BLE001 - resolve() meets the same failure and notes it on the row
        return True


def _covers(join: RowJoin, fields: dict[str, Any]) -> bool:
    """Whether ``join``'s timeline covers the row; a question that raises counts as covered (the
    row leaves, its join notes what failed), never as an error that loses the rows taken."""
    try:
        return join.covers(fields)
    except Exception:  # noqa: BLE001 - see the docstring
        return True
