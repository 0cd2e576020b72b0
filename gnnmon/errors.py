"""Exceptions gnnmon raises on bad input, and the one check of a number that several options share."""

from __future__ import annotations

import math
import signal
from typing import Any


def is_positive_number(value: Any) -> bool:
    """True for a finite int or float above 0 (not a bool, NaN or infinity): an interval in
    seconds, a power in watts."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


class GnnmonError(Exception):
    """Base class of gnnmon's own errors."""


class DeviceError(GnnmonError, ValueError):
    """A device string or object gnnmon cannot measure (unknown, unsupported or unavailable)."""


class ReportFileError(GnnmonError, ValueError):
    """A report file that is not a gnnmon JSON Lines file, or is corrupt before its last line."""


NEVER_STARTED = ("this gnnmon run was never started, so nothing was recorded into it (calls made meanwhile "
                 "went to the default run, and no file was written): use `with gnnmon.collect(...) as run:` "
                 "or `run = gnnmon.collect(...).start()`")
"""Said once when the rows of a run that was made but never started are read."""


def raised_by_handler(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by a Python signal handler (its traceback passes through one),
    not by gnnmon's own work: gnnmon turns its own failures into notes, never those (a step's
    timeout must reach the caller)."""
    handlers = set()
    for signum in signal.valid_signals():
        try:
            handler = signal.getsignal(signum)
        except ValueError:  # not OSError: a handler's TimeoutError landing here is one, and it is the caller's
            continue
        code = getattr(handler, "__code__", None)
        if code is not None:
            handlers.add(code)
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in handlers:
            return True
        tb = tb.tb_next
    return False
