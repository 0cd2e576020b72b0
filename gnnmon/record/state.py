"""What is open right now: the active runs, the row being filled and the phase being timed.

The one place this shared state lives, so that the row, the run, the GC log and the measurements
all read it without importing one another. Plain holders only: no gnnmon import at run time.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only
    from gnnmon.record.row import Row
    from gnnmon.record.run import Run

CURRENT_ROW: ContextVar[Row | None] = ContextVar("gnnmon_current_row", default=None)
"""The row being filled in this thread / task (a decorated call inside it gets a child row)."""

CURRENT_PHASE: ContextVar[str | None] = ContextVar("gnnmon_phase", default=None)

OPEN_PHASE: ContextVar[Any] = ContextVar("gnnmon_open_phase", default=None)
"""The innermost open ``phase`` object (it names the phase it was entered in), so that phases
closed out of order hand the current phase back to one still open."""
"""The phase (``with phase("forward"):``) open in this thread / task, named by GC events."""

RUNS: list[Run] = []
"""Active ``collect`` runs, innermost last (changed under :data:`LOCK` only)."""

DEFAULT: list[Run] = []
"""The default run once made (at most one item): where rows go when no ``collect`` is active."""

LOCK = threading.RLock()


def current_row() -> Row | None:
    """The row being filled in this thread/task, if any."""
    return CURRENT_ROW.get()


def open_run() -> Run | None:
    """The innermost active ``collect`` run, else the default run if one was made, else None."""
    runs = RUNS
    if runs:
        return runs[-1]
    return DEFAULT[0] if DEFAULT else None
