"""A row's bracket: the one path every measured row takes between the user's code and the record.

A decorated call, a scope, a phase and a Lightning batch each make a :class:`Bracket` around the
user's code: its row (opened, or joined), the measurements it entered into that row, and whether
the row is its own to close. What each form does differently is only how it finds its row (a
wrapper's invitation to join, a scope stacked on another, the current row for a phase, a batch);
what every form must do the same is written here once:

* :func:`unmeasured` — the entry that runs the user's code alone: traced by ``torch.compile``
  (nothing of gnnmon goes into the graph) or called by a signal handler while gnnmon's code is
  interrupted (:mod:`gnnmon.record.interrupts`);
* ``Bracket(row, own, measures)`` — the measurements entered, outermost first; an entry that
  fails or is interrupted closes what it opened (:meth:`Bracket.fail`), and an own row says it
  ``did not start``;
* :meth:`Bracket.not_started` — the ``undo`` of a held section's release: a Ctrl-C that came while
  the bracket opened is raised before the user's code runs, with the row closed and saying so;
* :meth:`Bracket.close` — the measurements exited innermost first, an own row closed.

The caller holds the section (:func:`~gnnmon.record.interrupts.hold`) around opening the bracket
and :meth:`~Bracket.close`: a held section belongs to the frame that opens it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gnnmon.errors import raised_by_handler
from gnnmon.measure.lifecycle import Measurement, open_row
from gnnmon.measure.row_device import close_row
from gnnmon.record.entered import exit_all, exit_these
from gnnmon.record.interrupts import HELD, IN_GC, held_section, hold, reentered, release, releasing, settle
from gnnmon.record.row import Row

__all__ = ["HELD", "IN_GC", "Bracket", "close_call", "held_section", "hold", "is_compiling", "open_call", "reentered",
           "release", "releasing", "settle", "unmeasured"]
# The held section's parts (gnnmon.record.interrupts) reach the forms through this module alone: a
# decorated call, a scope, a phase, a GC pause and the Lightning callback hold and release here.

is_compiling: Callable[[], bool] = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)
"""True while ``torch.compile`` traces the code that calls it (Dynamo folds it to a constant): a
gnnmon decorator or phase inside a compiled function then adds nothing to the graph (no graph
break, no row); measure around the compiled call instead (docs/timing-and-gc.md)."""


def unmeasured() -> bool:
    """Whether the decorated call, scope or phase whose entry calls this runs the user's code
    alone: traced by ``torch.compile``, or entered by a signal handler while gnnmon's own code is
    interrupted (:func:`~gnnmon.record.interrupts.reentered`)."""
    return is_compiling() or reentered(1)


class Bracket:
    """One row's bracket: ``row``, where this bracket's measurements start in ``row.entered``, and
    whether the row is this bracket's ``own`` (else another's, which closes it). A bracket on a
    row of its own ends everything entered in the row since it opened; one that joined another's
    row ends only its own measurements (``mine``): phases of one row may close in any order."""

    mine: list[Any] | None = None  # a joined bracket's measurements (an own one's are all since ``start``)

    def __init__(self, row: Row, own: bool, measures: list[tuple[type[Measurement], Any]]) -> None:
        """Open the bracket on ``row`` with ``measures`` entered (outermost first), each listed in
        ``row.entered`` before it is entered (whatever interrupts it, its exit runs). One that fails
        for want of a resource (out of file descriptors: ``OSError``) is left out with a note; the
        call goes on. If an entry fails otherwise or is interrupted, what was entered is exited, an
        own row is closed saying it did not start (:meth:`fail`), and the exception propagates."""
        entered = row.entered
        self.row = row
        self.own = own
        self.start = start = len(entered)
        try:
            _enter(row, measures)
        except BaseException as exc:
            self.fail(exc)
            raise
        if not own:
            self.mine = entered[start:]

    def fail(self, exc: BaseException) -> None:
        """The user's code never ran: an own row says why, and everything closes with ``exc``."""
        if self.own:
            _did_not_start(self.row, exc, self.start)
        else:
            exit_all(self.row.entered, self.start, exc)

    def not_started(self) -> None:
        """A Ctrl-C came while the bracket opened: it closes before the user's code runs."""
        self.fail(KeyboardInterrupt())

    def close(self, exc: BaseException | None = None) -> None:
        """Exit this bracket's measurements (innermost first) and close the row if it is its own."""
        mine = self.mine
        row = self.row
        if mine is None:
            exit_all(row.entered, self.start, exc)  # innermost first, each off the list once exited
            if self.own:
                close_row(row, exc)
        else:
            exit_these(row.entered, mine, exc)


def _enter(row: Row, measures: list[tuple[type[Measurement], Any]]) -> None:
    """Enter ``measures`` into ``row`` (outermost first), each listed in ``row.entered`` before it
    is entered (whatever interrupts it, its exit runs); one that fails for want of a resource (out
    of file descriptors: ``OSError``) is left out with a note, and the call goes on."""
    entered = row.entered
    for measure_cls, opts in measures:
        measure = measure_cls(row, opts)
        entered.append(measure)
        try:
            measure.__enter__()
        except OSError as err:
            if raised_by_handler(err):  # a handler's TimeoutError is an OSError too: the caller's
                raise
            entered.remove(measure)
            measure.failed(err)


def _did_not_start(row: Row, exc: BaseException, start: int = 0) -> None:
    """A row of its own whose user's code never ran: it says why, and what was entered since
    ``start`` closes with ``exc``, the row too."""
    row.note(f"did not start: {type(exc).__name__}: {exc}")
    exit_all(row.entered, start, exc)
    close_row(row, exc)


@releasing
def open_call(label: str, args: tuple[Any, ...], kwargs: dict[str, Any], owner: Any,
              measures: list[tuple[type[Measurement], Any]]) -> Row:
    """A decorated call's own row, opened with ``measures`` entered, in a held section of this
    frame; ``owner``: the decorated call's frame (kept on the main thread only, for
    :meth:`~gnnmon.record.row.Row.heal`). If an entry fails or a Ctrl-C came meanwhile, the row
    closes saying it did not start and the exception propagates (the user's code never runs)."""
    held = hold()
    row: Row | None = None
    try:
        if not held:
            owner = None
        row = (open_row(label, args, kwargs, owner) if args or kwargs else Row(label, owner=owner)).open()
        _enter(row, measures)
    except BaseException as exc:
        try:
            if row is not None:
                _did_not_start(row, exc)
        finally:
            release(held)
        raise
    return release(held, undo=lambda: _did_not_start(row, KeyboardInterrupt()), value=row)


@releasing
def close_call(row: Row, exc: BaseException | None, result: Any = None) -> Any:
    """Close a decorated call's own row (its measurements exited innermost first) with the call's
    ``exc`` (None: it returned ``result``), in a held section; returns ``result`` (a Ctrl-C that
    came meanwhile is raised here, the row whole)."""
    held = hold()
    try:
        exit_all(row.entered, 0, exc)
        close_row(row, exc)
    finally:
        release(held)
    return result
