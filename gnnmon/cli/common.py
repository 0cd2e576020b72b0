"""What every command shares: reading a run (a progress bar on a terminal), printing as a Unix tool
does (quiet when its reader goes away), a limit given as a percentage, and gnnmon's warnings in one line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from gnnmon.data.load import load
from gnnmon.errors import ReportFileError

SIGPIPE_EXIT = 141  # 128 + SIGPIPE: what a shell reports for a tool whose reader closed the pipe


def read(path: str, lenient: bool) -> Any:
    """A run read for a command; prints the error and returns None where it cannot be read."""
    bar = _progress_bar(path)
    try:
        return load(path, strict=not lenient, progress=bar.update)
    except (ReportFileError, OSError) as exc:
        print(f"gnnmon: {exc}", file=sys.stderr)
        return None
    finally:
        bar.close()


def write(text: str) -> int:
    """Print ``text`` (and flush); SIGPIPE_EXIT when the reader went away (``| head``): no
    traceback, and none at exit when Python flushes stdout."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        return reader_gone()
    return 0


def reader_gone() -> int:
    """stdout's reader left: what is left to flush goes nowhere; SIGPIPE_EXIT."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return SIGPIPE_EXIT


def share(text: str) -> float:
    """A limit as a share: ``5%`` or ``0.05`` (a bare number is a share, and must be under 1)."""
    percent = text.strip().endswith("%")
    try:
        value = float(text.strip()[:-1]) / 100 if percent else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage (e.g. 5%) or a share (0.05)") from None
    if not percent and value >= 1:
        raise argparse.ArgumentTypeError(f"{text!r} reads as {100 * value:g} %; write {text}% to mean {text} %")
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a limit is 0 or more")
    return value


WARNINGS_MODULES = frozenset(("warnings", "_py_warnings"))
"""The modules of Python's warnings machinery (``_py_warnings`` holds it from Python 3.14)."""


def one_line_warnings(python_format: Callable[..., str]) -> Callable[..., str]:
    """A ``warnings.formatwarning`` that prints gnnmon's own warnings (:func:`issued_by_gnnmon`) as the
    CLI's other messages say things, one line ``gnnmon: warning: ...`` (a corrupt line in a run file is
    news about the file, not a source line to read), and every other warning, a script's under
    ``gnnmon run`` and its libraries', with ``python_format`` as ``python script.py`` prints it
    (category, file:line, source line)."""

    def formatwarning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                      line: str | None = None) -> str:
        if issued_by_gnnmon():
            return f"gnnmon: warning: {message}\n"
        return python_format(message, category, filename, lineno, line)

    return formatwarning


def issued_by_gnnmon() -> bool:
    """Whether the warning being formatted was issued by gnnmon's code: the frame that called into
    Python's warnings machinery (below its ``_showwarnmsg``, whatever ``showwarning`` a script or
    logging put in between) is a function of the ``gnnmon`` package that calls ``warn``. Read from
    the stack, as gnnmon's ``stacklevel`` points the warning's file:line at its caller's line; the call
    to ``warn`` tells gnnmon's warning from one a C function called from gnnmon's frame raised."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_name == "_showwarnmsg" and _machinery(frame)):
        frame = frame.f_back
    while frame is not None and _machinery(frame):
        frame = frame.f_back
    if frame is None:
        return False
    name = str(frame.f_globals.get("__name__", ""))
    issuer = name == "gnnmon" or name.startswith("gnnmon.")
    return issuer and not {"warn", "warn_explicit"}.isdisjoint(frame.f_code.co_names)


def _machinery(frame: FrameType) -> bool:
    """Whether ``frame`` runs Python's warnings machinery."""
    return frame.f_globals.get("__name__") in WARNINGS_MODULES


def _progress_bar(path: str) -> Any:
    """A progress bar on stderr for reading ``path``, shown once reading has taken a second and
    only on a terminal (tqdm's ``delay``)."""
    from tqdm import tqdm  # a dependency, imported as a run is read

    total = os.path.getsize(path) if os.path.isfile(path) else None
    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="gnnmon: reading", delay=1.0,
                file=sys.stderr, leave=False, disable=None)
