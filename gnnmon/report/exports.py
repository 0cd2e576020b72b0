"""The exports, by name: each is a registered object with a ``name``, what it writes (``what``) and
``write(result, out) -> str`` (what it wrote, in words) over a run's plain result
(:class:`~gnnmon.data.result.RunResult`). ``Report.export(name, out)``, ``Report.to_*`` and
``gnnmon export NAME RUN -o OUT`` read :data:`EXPORTS`; a module of its own with one
:func:`register_export` call adds an export (the built-in ones register as ``gnnmon.report`` is
imported: ``trace``, ``tensorboard``, ``html``, ``csv``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol, runtime_checkable

from gnnmon.data.result import RunResult


@runtime_checkable
class Export(Protocol):
    """Writes a run for another tool or reader."""

    name: str
    """What ``Report.export`` and ``gnnmon export`` call it."""
    what: str
    """What it writes, in a sentence (the CLI's help)."""

    def write(self, result: RunResult, out: str | os.PathLike[str]) -> str:
        """Write ``result`` to ``out``; returns what was written, in words."""


EXPORTS: dict[str, Export] = {}
"""name -> export, in the order they were registered."""


def register_export(export: Export) -> Export:
    """Add (or replace) an export under its ``name``."""
    if not isinstance(export, Export) or not isinstance(export.name, str) or not export.name:
        raise TypeError(f"an export has a name, what it writes and write(result, out); got {export!r}")
    EXPORTS[export.name] = export
    return export


def export(name: str, result: RunResult, out: str | os.PathLike[str]) -> str:
    """Write ``result`` with the export ``name`` to ``out`` (its folder is made if missing);
    returns what was written, in words."""
    found = EXPORTS.get(name)
    if found is None:
        raise ValueError(f"no export named {name!r}; the exports: {', '.join(EXPORTS)}")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    return found.write(result, out)
