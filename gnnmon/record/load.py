"""Reading a run back: :func:`load` (the whole run) and :func:`iter_rows` (rows one at a time).

Reads every file gnnmon has written (format ``gnnmon.jsonl`` version 1, whatever the layout of the
package that wrote it); a cut-off last line is skipped with a warning.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from gnnmon.record.run import Run
from gnnmon.record.storage import read_lines


def load(path: str | os.PathLike[str], *, strict: bool = True) -> Run:
    """Read a run back from its JSON Lines file (a cut-off last line is skipped with a warning)."""
    manifest: dict[str, Any] | None = None
    rows: list[dict[str, Any]] = []
    parts: dict[str, list[dict[str, Any]]] = {"gc": [], "sample": [], "marker": [], "point": []}
    complete = False
    end: dict[str, Any] | None = None
    for obj in read_lines(path, strict=strict):
        kind = obj.pop("type", None)
        if kind == "row":
            rows.append(obj)
        elif kind == "manifest":
            if manifest is None:
                manifest = obj
        elif kind in parts:
            parts[kind].append(obj)
        elif kind == "end":
            complete, end = True, obj
    return Run.from_file(path, manifest=manifest, rows=rows, gc_events=parts["gc"],
                         samples=parts["sample"], markers=parts["marker"], complete=complete,
                         points=parts["point"], end=end)


def iter_rows(path: str | os.PathLike[str], *, strict: bool = True) -> Iterator[dict[str, Any]]:
    """The rows of a run file, one at a time, without keeping them (for files too big for
    :func:`load`). Same tolerance as :func:`load`: a cut-off last line is skipped with a warning."""
    for obj in read_lines(path, strict=strict):
        if obj.get("type") == "row":
            obj.pop("type")
            yield obj
