"""The exports, by name: each is a registered object with a ``name``, what it writes (``what``) and
``write(result, out) -> str`` (what it wrote, in words) over a run's plain result
(:class:`~gnnmon.data.result.RunResult`); one that can write to a stream also has
``write_stream(result, stream) -> str`` (``gnnmon export NAME RUN -o -`` writes to stdout).

Every door goes through :func:`export`: ``Report.export(name, out)``,
``gnnmon export`` and ``gnnmon report --format csv``. A module of its own with one
:func:`register_export` call adds an export (the built-in ones, in :mod:`gnnmon.report.renderers`,
register as ``gnnmon.report`` is imported; one of yours as you import its module)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Protocol, TextIO, runtime_checkable

from gnnmon.data.result import RunResult
from gnnmon.registry import Registry


@runtime_checkable
class Export(Protocol):
    """Writes a run for another tool or reader."""

    name: str
    """What ``Report.export`` and ``gnnmon export`` call it."""
    what: str
    """What it writes, in a sentence (the CLI's help)."""

    def write(self, result: RunResult, out: str | os.PathLike[str]) -> str:
        """Write ``result`` to ``out``; returns what was written, in words."""


class Written(str):
    """What an export wrote, in words (``"1,200 scalars"``), and how many things (``n``)."""

    n: int
    unit: str

    def __new__(cls, count: int, unit: str) -> Written:
        made = super().__new__(cls, f"{count:,} {unit}")
        made.n, made.unit = count, unit
        return made

    def __reduce__(self) -> tuple[type[Written], tuple[int, str]]:
        return (Written, (self.n, self.unit))  # copied and pickled whole (a worker's answer)


EXPORTS: Registry[Export] = Registry("export")
"""name -> export, in the order they were registered."""

STDOUT = "-"
"""The ``out`` that means the standard output (exports with ``write_stream``)."""


def register_export(export: Export) -> Export:
    """Add (or replace) an export under its ``name``."""
    if not isinstance(export, Export) or not isinstance(export.name, str) or not export.name:
        raise TypeError(f"an export has a name, what it writes and write(result, out); got {export!r}")
    return EXPORTS.register(export.name, export)


def find(name: str) -> Export:
    """The export ``name``."""
    found: Export = EXPORTS.find(name)
    return found


def export(name: str, result: RunResult, out: str | os.PathLike[str], stream: TextIO | None = None) -> str:
    """Write ``result`` with the export ``name`` to ``out`` (its folder is made if missing; ``"-"``:
    to ``stream``, the standard output by default, for an export that writes streams); returns what
    was written, in words."""
    found = find(name)
    if str(out) == STDOUT:
        write_stream = getattr(found, "write_stream", None)
        if write_stream is None:
            raise ValueError(f"the {name} export writes files only: give it a path, not {STDOUT!r}")
        words: str = write_stream(result, sys.stdout if stream is None else stream)
        return words
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    return found.write(result, out)
