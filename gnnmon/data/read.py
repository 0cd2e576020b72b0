"""Reading a run file: :func:`read_chunks` parses a chunk of lines at C speed (line by line in
Python only where that fails) and tolerates a cut-off last line; :func:`read_lines` gives the objects one at
a time; :func:`rows_of_lines` and :func:`table_of_lines` read a live run's row lines the same way. What a
line holds is :mod:`gnnmon.data.format`; writing it is :mod:`gnnmon.data.write`.
"""

from __future__ import annotations

import io
import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from operator import methodcaller
from pathlib import Path
from typing import Any

from gnnmon._version import __version__
from gnnmon.data.expand import Expander
from gnnmon.data.format import FORMAT, FORMAT_VERSION, ROW, SAME, SAME_FIELD, parse, parse_each
from gnnmon.data.gz import Decompressed, is_gzip
from gnnmon.data.table import Table
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
    Rows are not checked here: see :func:`bad_row`. A version 1 file's ``same`` lines are put back
    onto the rows that name them here (:mod:`gnnmon.data.expand`): every reader sees rows whole. A
    file of a newer format version than this gnnmon knows is refused, naming both.
    """
    expander = Expander()
    unknown: set[str] = set()  # the sets said to be missing (each once)
    for n, objs in _chunks(path, strict, progress):
        if SAME not in map(_TYPE, objs) and not any(map(_NAMES_SAME, objs)):  # every row whole: checked at C speed
            yield n, objs
            continue
        for i, obj in enumerate(objs):
            kind = obj.get("type")
            if kind == SAME:
                expander.declare(obj)
            elif kind == ROW and SAME_FIELD in obj:
                ident = obj.get(SAME_FIELD)
                whole = expander.expand(obj)
                if whole is not None:
                    objs[i] = whole
                elif repr(ident) not in unknown and len(unknown) < 100:
                    # the line that declared it is damaged (the reader names that line) or lost: the rows are kept
                    unknown.add(repr(ident))
                    warnings.warn(f"{path}:{n + i}: rows name a set of repeated fields ({ident!r}) no line before "
                                  "them declares: read without them", RuntimeWarning, 3)
        yield n, objs


_TYPE = methodcaller("get", "type")
_NAMES_SAME = methodcaller("__contains__", SAME_FIELD)


def _chunks(path: Path | str | os.PathLike[str], strict: bool,
            progress: Callable[[int], Any] | None) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """:func:`read_chunks` before the rows are made whole."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    with open(path, "rb", buffering=1 << 20) as raw:
        stream = Decompressed(raw) if is_gzip(raw.peek(2)[:2]) else None  # type: ignore[attr-defined]
        f = io.BufferedReader(stream, 1 << 20) if stream is not None else raw
        if stream is not None and progress is not None:  # the file's bytes, not the lines': a bar's total is the file's
            told, given = [0], progress

            def progress(_: int) -> None:
                given(stream.compressed - told[0])
                told[0] = stream.compressed
        yield from _lines_of(path, f, strict, progress)
        if stream is not None and stream.cut:
            warnings.warn(f"{path}: the compressed stream is cut off (its writer was killed, or the file damaged) "
                          f"after {stream.compressed:,} bytes: read to its last whole line", RuntimeWarning, 4)


def _lines_of(path: Path, f: Any, strict: bool,
              progress: Callable[[int], Any] | None) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """:func:`_chunks` over an open file of lines (a gzip stream's decompressed)."""
    first = f.readline()
    if not first.strip():
        raise ReportFileError(f"{path} is empty: no gnnmon manifest line")
    manifest = _one(path, 1, first, strict)
    if manifest is None and not first.endswith(b"\n"):  # cut off: nothing more to read
        return
    if manifest is not None:  # else gnnmon's, corrupt, and skipped (strict=False)
        for field, want in (("type", "manifest"), ("format", FORMAT)):
            if manifest.get(field) != want:
                held = "missing" if field not in manifest else f"{manifest[field]!r}"[:60]
                raise ReportFileError(f"{path}:1: not a gnnmon report: line 1 is not a {FORMAT} manifest (its "
                                      f"field {field!r} is {held}, not {want!r})")
        version = manifest.get("format_version")
        if type(version) is int and version > FORMAT_VERSION:
            said = (f"{path}:1: the manifest's field 'format_version' is {version}: written by a newer gnnmon "
                    f"({manifest.get('gnnmon')}) in {FORMAT} format version {version}; this gnnmon ({__version__}) "
                    f"reads versions 1 to {FORMAT_VERSION}")
            if strict:
                raise ReportFileError(f"{said}: upgrade gnnmon (pip install -U gnnmon) to read it, or read it "
                                      f"as version {FORMAT_VERSION} with {SKIP_HINT}")
            warnings.warn(f"{said}: read as version {FORMAT_VERSION}, lenient", RuntimeWarning, 4)
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
        objs = parse_lines(lines)
        if objs is None:
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

CHUNK_LINES = 256
"""Lines parsed in one call where they are already in memory (a live run's window)."""


def parse_lines(lines: Sequence[bytes], each_whole: bool = False) -> list[dict[str, Any]] | None:
    """Lines as their objects, one orjson call a line (:func:`~gnnmon.data.format.parse_each`), or
    (where a line holds an int beyond 64 bits) in one json call over the lines
    joined as an array; None where one of them is not a whole JSON object (blank, corrupt, cut off):
    read those one at a time. A file's lines end in a newline and each is checked to hold one
    object; ``each_whole``: lines known to be one encoded object each (a live run's window),
    newline or not."""
    try:
        each = parse_each(lines)
    except ValueError:
        return None
    if each is not None:
        return each if set(map(type, each)) == {dict} else None
    joined = b",".join(lines)
    # every line an object of its own: each boundary is a line's end and an object's start
    if not each_whole and (joined.count(b"\n,{") != len(lines) - 1 or not joined.startswith(b"{")):
        return None
    try:
        objs = parse(b"[" + joined + b"]")
    except ValueError:
        return None
    return objs if len(objs) == len(lines) and set(map(type, objs)) == {dict} else None


def rows_of_lines(lines: Iterable[bytes]) -> Iterator[list[dict[str, Any]]]:
    """Row lines (``{"type":"row",...}``, each one whole object: a live run's window) as rows,
    a chunk at a time, parsed as a file's are (:func:`parse_lines`), ``type`` taken off."""
    it = iter(lines)
    while chunk := list(islice(it, CHUNK_LINES)):
        objs = parse_lines(chunk, each_whole=True)
        if objs is None:
            objs = [parse(line) for line in chunk]
        for obj in objs:
            del obj["type"]
        yield objs


def table_of_lines(lines: Iterable[bytes]) -> Table:
    """Row lines as a :class:`Table`, each chunk's rows (:func:`rows_of_lines`) columnised at once."""
    table = Table()
    for rows in rows_of_lines(lines):
        table.extend(rows)
    return table


def _one(path: Path, n: int, raw: bytes, strict: bool) -> dict[str, Any] | None:
    """Line ``n`` as an object; None for a line skipped (corrupt with ``strict=False``, or the cut-off
    last line), each with a warning."""
    complete = raw.endswith(b"\n")  # only the last line of a cut file lacks it
    try:
        obj = parse(raw)
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        if n == 1 and not _MANIFEST_HEAD.match(raw):
            raise ReportFileError(f"{path}:1: not a gnnmon report: line 1 is not a {FORMAT} manifest"
                                  f"{_near(raw, exc)}") from exc
        if not complete:
            warnings.warn(f"{path}: last line {n} is cut off (the writer was interrupted); "
                          f"read the {n - 1} complete line(s) before it", RuntimeWarning, stacklevel=4)
            return None
        why = f"{exc}{_near(raw, exc)}".replace("\n", " ")
        if strict:
            raise ReportFileError(f"{path}:{n}: corrupt line ({why}); skip corrupt lines with {SKIP_HINT}") from exc
        warnings.warn(f"{path}:{n}: skipped a corrupt line ({why})", RuntimeWarning, 4)
        return None
    return obj


_MANIFEST_HEAD = re.compile(rb'\s*\{\s*"type"\s*:\s*"manifest"\s*,\s*"format"\s*:\s*"gnnmon\.jsonl"')
"""How a manifest line begins, whatever its spacing (:data:`~gnnmon.data.format.MANIFEST_START` as gnnmon writes it)."""

_KEY = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:')


def _near(raw: bytes, exc: ValueError) -> str:
    """``, in field 'name'``: the last field a corrupt line names before where its parser stopped."""
    pos = getattr(exc, "pos", None)
    if not isinstance(pos, int):
        return ""
    keys = _KEY.findall(raw.decode("utf-8", "replace")[: pos + 1])
    return f", in field {keys[-1]!r}" if keys else ""


def bad_row(path: str | os.PathLike[str], n: int, obj: dict[str, Any], strict: bool) -> bool:
    """Whether the row object of line ``n`` lacks its label (a string) or index (an int): then it
    is refused (:class:`ReportFileError`), or with ``strict=False`` skipped with a warning."""
    label, index = obj.get("label"), obj.get("index")
    if type(label) is str and type(index) is int:
        return False
    field, value, want = ("label", label, "a string") if type(label) is not str else ("index", index, "an integer")
    held = "missing" if field not in obj else f"{value!r}"[:60] + f", not {want}"
    if strict:
        raise ReportFileError(f"{path}:{n}: a row without its label and index (its field {field!r} is {held}); "
                              f"skip it with {SKIP_HINT}")
    warnings.warn(f"{path}:{n}: skipped a row without its label and index (its field {field!r} is {held})",
                  RuntimeWarning, 3)
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


def row_lines(path: str | os.PathLike[str], seqs: set[int]) -> dict[int, int]:
    """The line of each row at the positions ``seqs`` among the rows a read keeps (those with their
    label and index): read again, only when a damaged row is to be named."""
    out: dict[int, int] = {}
    seq = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n, objs in read_chunks(path, strict=False):
            for i, obj in enumerate(objs):
                if obj.get("type") == ROW and type(obj.get("label")) is str and type(obj.get("index")) is int:
                    if seq in seqs:
                        out[seq] = n + i
                        if len(out) == len(seqs):
                            return out
                    seq += 1
    return out


PROGRESS_EVERY = 4 << 20
"""Bytes read between two calls of :func:`read_lines`'s ``progress``."""
