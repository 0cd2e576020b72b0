"""Reading a run file: :func:`read_chunks` parses a chunk of lines in one call (line by line only
where that fails) and tolerates a cut-off last line; :func:`read_lines` gives the objects one at
a time. What a line holds is :mod:`gnnmon.data.format`; writing it is :mod:`gnnmon.data.write`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gnnmon.data.format import FORMAT, MANIFEST_START, ROW, parse
from gnnmon.errors import ReportFileError

SKIP_HINT = "load(path, strict=False) or gnnmon report --lenient"
"""How to read a file past its corrupt lines, from Python and from the shell."""


def read_chunks(path: str | os.PathLike[str], strict: bool = True,
                progress: Callable[[int], Any] | None = None) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """The objects of a gnnmon JSON Lines file, the manifest first, a chunk of lines at a time:
    ``(number of the chunk's first line, its objects, one per line)``. A chunk is parsed in one call (its lines
    as one JSON array) and, only where that fails, line by line: a file of any size, in bounded
    memory, at the parser's speed. ``progress(n)``: called with the bytes read since its previous
    call, every few MB.

    A cut-off last line (a killed writer) is skipped with a warning. A corrupt line before it raises
    :class:`ReportFileError` naming the line, unless ``strict=False`` (then it is skipped, warned).
    Rows are not checked here: see :func:`bad_row`.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no gnnmon report at {path}")
    with open(path, "rb", buffering=1 << 20) as f:
        first = f.readline()
        if not first.strip():
            raise ReportFileError(f"{path} is empty: no gnnmon manifest line")
        manifest = _one(path, 1, first, strict)
        if manifest is None:  # cut off: nothing more to read
            return
        if manifest.get("type") != "manifest" or manifest.get("format") != FORMAT:
            raise ReportFileError(f"{path} is not a gnnmon report: line 1 is not a {FORMAT} manifest")
        yield 1, [manifest]
        n, done = 2, len(first)
        while True:
            lines = f.readlines(CHUNK_BYTES)
            if not lines:
                break
            if progress is not None:
                done += sum(map(len, lines))
                if done >= PROGRESS_EVERY:
                    progress(done)
                    done = 0
            joined = b",".join(lines)
            objs = None
            # every line an object of its own: each boundary is a line's end and an object's start
            if joined.count(b"\n,{") == len(lines) - 1 and joined.startswith(b"{"):
                try:
                    objs = parse(b"[" + joined + b"]")
                except ValueError:
                    pass
            if objs is None or len(objs) != len(lines) or set(map(type, objs)) != {dict}:
                for i, raw in enumerate(lines):  # line by line: one is blank, corrupt or cut off
                    if not raw.strip():
                        continue
                    obj = _one(path, n + i, raw, strict)
                    if obj is not None:
                        yield n + i, [obj]
                    elif not raw.endswith(b"\n"):  # cut off: nothing follows it
                        if progress is not None and done:
                            progress(done)
                        return
            else:
                yield n, objs
            n += len(lines)
        if progress is not None and done:
            progress(done)


CHUNK_BYTES = 32 << 10
"""Bytes of lines parsed in one call."""


def _one(path: Path, n: int, raw: bytes, strict: bool) -> dict[str, Any] | None:
    """Line ``n`` as an object; None for a line skipped (corrupt with ``strict=False``, or the cut-off
    last line), each with a warning."""
    complete = raw.endswith(b"\n")  # only the last line of a cut file lacks it
    try:
        obj = parse(raw)
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        if n == 1 and not raw.lstrip().startswith(MANIFEST_START):
            raise ReportFileError(f"{path} is not a gnnmon report: line 1 is not a {FORMAT} manifest") from exc
        if not complete:
            warnings.warn(f"{path}: last line {n} is cut off (the writer was interrupted); "
                          f"read the {n - 1} complete line(s) before it", RuntimeWarning, stacklevel=4)
            return None
        if n == 1:
            raise ReportFileError(f"{path} is not a gnnmon report: line 1 is not JSON") from exc
        if strict:
            raise ReportFileError(f"{path}:{n}: corrupt line ({exc}); skip corrupt lines with {SKIP_HINT}") from exc
        warnings.warn(f"{path}:{n}: skipped a corrupt line ({exc})", RuntimeWarning, 4)
        return None
    return obj


def bad_row(path: str | os.PathLike[str], n: int, obj: dict[str, Any], strict: bool) -> bool:
    """Whether the row object of line ``n`` lacks its label (a string) or index (an int): then it
    is refused (:class:`ReportFileError`), or with ``strict=False`` skipped with a warning."""
    if isinstance(obj.get("label"), str) and isinstance(obj.get("index"), int):
        return False
    if strict:
        raise ReportFileError(f"{path}:{n}: a row without its label and index; skip it with {SKIP_HINT}")
    warnings.warn(f"{path}:{n}: skipped a row without its label and index", RuntimeWarning, 3)
    return True


def read_lines(path: str | os.PathLike[str], strict: bool = True,
               progress: Callable[[int], Any] | None = None) -> Iterator[dict[str, Any]]:
    """The objects of a gnnmon JSON Lines file one at a time, the manifest first (see
    :func:`read_chunks`); a row without its label and index is refused, or skipped (:func:`bad_row`)."""
    for n, objs in read_chunks(path, strict, progress):
        for i, obj in enumerate(objs):
            if obj.get("type") == ROW and bad_row(path, n + i, obj, strict):
                continue
            yield obj


PROGRESS_EVERY = 4 << 20
"""Bytes read between two calls of :func:`read_lines`'s ``progress``."""
