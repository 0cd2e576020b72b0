"""Which row is being filled (and which phase timed) in this thread or task, and the rows an
exception left unfinished inside gnnmon's own code, found on the way and healed
(:meth:`gnnmon.record.row.Row.heal`): a row still open whose decorated call (its ``owner`` frame)
has returned."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from gnnmon.record.interrupts import on_stack
from gnnmon.record.state import CURRENT_ROW, UNFINISHED


def current_row() -> Any:
    """The row being filled in this thread/task, if any: its ``fields`` (yours may be set; one of
    gnnmon's is refused: :mod:`gnnmon.record.names`), ``note(text)`` and ``key``."""
    row = filling_row()
    return None if row is None else row.view()


def filling_row() -> Any:
    """The row being filled in this thread/task, if any (gnnmon's own access to it)."""
    row: Any = CURRENT_ROW.get()
    if row is not None and (row.closed or row.owner is not None):
        row = open_ancestor(row)
    return row


def open_ancestor(row: Any) -> Any:
    """``row`` or its nearest ancestor that is still open; rows on the way that were left open by
    an interrupted decorated call (whose owner frame is no longer on the stack) are healed."""
    while row is not None:
        if row.closed:
            row = row.parent
        elif row.owner is not None and not _on_stack(row.owner):
            row.heal()
            row = row.parent
        else:
            return row
    return None


def heal_unfinished() -> None:
    """Finish every unfinished row whose decorated call has returned."""
    for row in list(UNFINISHED):
        owner = row.owner
        if owner is None or not _on_stack(owner):
            row.heal()


def _on_stack(frame: FrameType) -> bool:
    """Whether ``frame`` is running on this thread (it is, or calls, the caller)."""
    return on_stack(frame, sys._getframe(2))


def open_phase(opened: Any) -> Any:
    """The innermost phase from ``opened`` outwards that is still open in an open row."""
    while opened is not None and (opened.closed or opened.row_closed()):
        opened = opened.outer
    return opened
