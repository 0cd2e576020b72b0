"""Run files on disk: :class:`JsonlWriter` appends whole lines (a manifest line first), and
:func:`read_lines` reads a file back a line at a time, tolerating a cut-off last line.

Every line is written whole and flushed as it is produced, so a crash or a kill leaves every
completed line readable. What a line holds is :mod:`gnnmon.data.format`.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gnnmon.data.format import FORMAT, MANIFEST_START, ROW, dumps, encode, parse
from gnnmon.errors import ReportFileError


class JsonlWriter:
    """Appends lines to a file with unbuffered writes (a kill leaves every line written before it
    on disk; a line cut by the kill is skipped by the reader); safe to call from several threads
    and, through a reentrant lock, from a signal handler that interrupts a write in this thread.

    ``header``: the first line (the manifest). It is written to a temporary file beside ``path``
    that then takes ``path``'s place (``mode="x"``: only if none exists), so a run that cannot
    start leaves a previous file at ``path`` untouched.
    """

    def __init__(self, path: str | os.PathLike[str], mode: str = "w", header: dict[str, Any] | None = None) -> None:
        if mode not in ("w", "x", "a"):
            raise ValueError(f"mode must be 'w', 'x' or 'a', got {mode!r}")
        self.path = Path(path)
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self.lines = 0
        if header is None or mode == "a":
            self._file = open(self.path, mode + "b", buffering=0)
            if header is not None:
                self.write(header)
            return
        first = (dumps(header) + "\n").encode("utf-8")  # a value JSON cannot hold fails here, before any file
        if mode == "x" and self.path.exists():
            raise FileExistsError(f"{self.path} exists (mode='x' refuses to overwrite it)")
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        self._file = open(temp, "xb", buffering=0)
        try:
            view = memoryview(first)
            while view:
                view = view[self._file.write(view):]
            if mode == "x":
                _link_new(temp, self.path)
            else:
                os.replace(temp, self.path)
        except BaseException:
            self._file.close()
            try:
                os.unlink(temp)
            except OSError:
                pass
            raise
        self.lines = 1

    def write(self, obj: dict[str, Any]) -> None:
        """One line, one write."""
        self.write_lines([encode(obj)])

    def write_lines(self, lines: list[bytes]) -> None:
        """Encoded lines (no newline) in one write (the writer thread's batches)."""
        if not lines:
            return
        data = b"\n".join(lines) + b"\n"
        with self._lock:  # reentrant: a signal handler's row in this thread must not wait on itself
            if self._file.closed:
                raise ValueError(f"report file {self.path} is already closed")
            view = memoryview(data)
            while view:
                view = view[self._file.write(view):]
            self.lines += len(lines)

    @property
    def closed(self) -> bool:
        return self._file.closed

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()

    def forget(self) -> None:
        """In a forked child: close this process's descriptor without the lock, which a thread of
        the parent (the writer, mid-write) may have held at the fork and no thread of the child
        will ever release; the parent's descriptor stays open."""
        self._lock = threading.RLock()
        self._file.close()


def _link_new(temp: Path, path: Path) -> None:
    """Give ``temp`` the name ``path`` only if no file has it (atomically where links exist)."""
    try:
        os.link(temp, path)  # fails if a file appeared meanwhile: nothing overwritten
    except FileExistsError:
        raise FileExistsError(f"{path} exists (mode='x' refuses to overwrite it)") from None
    except OSError:  # a filesystem without hard links
        if path.exists():
            raise FileExistsError(f"{path} exists (mode='x' refuses to overwrite it)") from None
        os.replace(temp, path)
        return
    os.unlink(temp)


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
