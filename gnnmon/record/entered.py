"""The measurements entered in a row, exited: innermost first, each taken off the row's list once
its exit has run, so that whatever interrupts the exits, the rest run later (when the row closes,
or when :meth:`~gnnmon.record.row.Row.heal` finishes a row an exception left unfinished).

A measurement's own failure becomes a note on its row (its ``failed``), never the caller's
problem; an exception a signal handler raised propagates."""

from __future__ import annotations

from typing import Any

from gnnmon.errors import raised_by_handler


def exit_all(entered: list[Any], start: int, exc: BaseException | None) -> None:
    """Exit the measurements ``entered[start:]`` (innermost first), each removed once its exit has
    run. An exception a signal handler raised propagates, leaving the rest to
    :meth:`~gnnmon.record.row.Row.heal`."""
    exc_type, tb = (None, None) if exc is None else (type(exc), exc.__traceback__)
    while len(entered) > start:
        measure = entered[-1]
        try:  # as _exit does, in this frame (one call less a measurement)
            measure.__exit__(exc_type, exc, tb)
        except Exception as err:  # a broken figure must not change the user's call
            if raised_by_handler(err):
                raise
            measure.failed(err)
        if entered and entered[-1] is measure:  # a phase's exit takes itself off
            del entered[-1]


def exit_these(entered: list[Any], these: list[Any], exc: BaseException | None) -> None:
    """Exit the measurements ``these`` (innermost first) that ``entered`` still lists, each removed
    from it once its exit has run, whatever was entered after them (a phase closed before one
    opened inside it); failures as in :func:`exit_all`."""
    exc_type, tb = (None, None) if exc is None else (type(exc), exc.__traceback__)
    for measure in reversed(these):
        if entered and entered[-1] is measure:  # closed in order, as nearly always
            _exit(measure, exc_type, exc, tb)
            if entered and entered[-1] is measure:  # a phase's exit takes itself off
                del entered[-1]
            continue
        for at in range(len(entered) - 2, -1, -1):
            if entered[at] is measure:
                _exit(measure, exc_type, exc, tb)
                if at < len(entered) and entered[at] is measure:
                    del entered[at]
                break


def _exit(measure: Any, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
    try:
        measure.__exit__(exc_type, exc, tb)
    except Exception as err:  # a broken figure must not change the user's call
        if raised_by_handler(err):
            raise
        measure.failed(err)
