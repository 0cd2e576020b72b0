"""Where a run's data goes: sinks. The JSON Lines file is one; a plain callable ``fn(rows)`` is
one; so is anything with the :class:`Sink` methods (the Lightning callback's logging, a metrics
endpoint, a tracker).

The contract, which every sink can rely on:

* **Thread.** After :meth:`Sink.open` (called by ``run.start()`` on the thread that starts the
  run, so a bad path fails there), every call is made on the run's writer thread
  (``gnnmon-writer``), one at a time, never on the step's path.
* **What and in what order.** Each :meth:`Sink.write` gets a :class:`Batch`: the rows finished
  since the last batch, in the order they were closed, each final (device events read, the
  timeline joined: the same figures the file keeps), with the GC events, samples, counter points
  and markers that arrived meanwhile, in arrival order. Treat it as read-only: every sink gets the
  same objects.
* **When.** Batches leave every ``flush_interval`` seconds (0.05 by default) and on
  ``run.flush()``; ``run.stop()`` sends the last batch, then :meth:`Sink.close` with the end line.
* **Backpressure.** A slow sink holds the writer thread; rows wait in the run's inbox meanwhile,
  and past :data:`gnnmon.record.run.BACKLOG` waiting rows the step waits for the writer: memory
  stays bounded and nothing is dropped.
* **Failure.** A sink that raises is disabled with one warning (its error is kept in
  ``run.sink_errors``) and closed at once, with an end line whose ``ended`` starts with
  :data:`SINK_FAILED` (so it can let go of a server thread or a tracker's run without sending
  more); the run and the other sinks go on. The file sink instead counts the lines a
  failed write lost (``run.lines_lost``) and tries again with the next batch (a disk that was
  full may have room again).
"""

from __future__ import annotations

import errno
import os
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from gnnmon.data.format import END, GC, MARKER, POINT, SAMPLE, encode, typed_line
from gnnmon.data.write import JsonlWriter
from gnnmon.registry import Registry

SINK_FAILED = "sink failed:"
"""How ``ended`` starts in the end line a sink gets when it is closed for having raised."""


class Batch:
    """What a sink receives: finished rows and what else arrived since the previous batch."""

    __slots__ = ("rows", "others", "_encoded")

    def __init__(self, rows: list[dict[str, Any]], encoded: list[bytes],
                 others: list[tuple[str, dict[str, Any]]]) -> None:
        self.rows = rows
        self.others = others  # (kind, object): "gc", "sample", "point", "marker", in arrival order
        self._encoded = encoded  # each row as its file line, made once for every sink

    def _of(self, kind: str) -> list[dict[str, Any]]:
        return [obj for k, obj in self.others if k == kind]

    @property
    def gc_events(self) -> list[dict[str, Any]]:
        return self._of(GC)

    @property
    def samples(self) -> list[dict[str, Any]]:
        return self._of(SAMPLE)

    @property
    def points(self) -> list[dict[str, Any]]:
        return self._of(POINT)

    @property
    def markers(self) -> list[dict[str, Any]]:
        return self._of(MARKER)

    def lines(self) -> list[bytes]:
        """The batch as the file's lines: what arrived besides rows, then the rows (each whole,
        encoded once for the run's window and every sink)."""
        out = [typed_line(kind, encode(obj)) for kind, obj in self.others]
        out.extend(self._encoded)
        return out

    def __len__(self) -> int:
        return len(self.rows) + len(self.others)


@runtime_checkable
class Sink(Protocol):
    """Receives a run's data (see the module doc for the contract)."""

    def open(self, manifest: dict[str, Any]) -> None:
        """The run starts; ``manifest`` is its first line (versions, devices, options, config)."""

    def write(self, batch: Batch) -> None:
        """Finished rows and what else arrived since the previous batch."""

    def close(self, end: dict[str, Any]) -> None:
        """The run ended; ``end`` is its last line (rows, sampler cost, notes)."""


class CallableSink:
    """A plain function as a sink: ``fn(rows)`` with each batch's rows (batches without rows are
    not passed on)."""

    def __init__(self, fn: Callable[[list[dict[str, Any]]], Any]) -> None:
        self.fn = fn

    def open(self, manifest: dict[str, Any]) -> None:
        """Nothing to open."""

    def write(self, batch: Batch) -> None:
        if batch.rows:
            self.fn(batch.rows)

    def close(self, end: dict[str, Any]) -> None:
        """Nothing to close."""

    def __repr__(self) -> str:
        return f"CallableSink({getattr(self.fn, '__qualname__', self.fn)!r})"


MAX_WRITE_ERRORS = 10

RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOSPC, errno.EDQUOT, errno.ENOMEM})
"""What a machine runs out of (descriptors, disk, quota, memory): it costs the run its file, never
the user's code."""


class JsonlSink:
    """The run's JSON Lines file: the manifest first (the file is put in place whole when the run
    starts: a run that cannot start leaves a previous file untouched), then every batch in one
    unbuffered write, then the end line; every line whole (a row is the row as recorded). A failed
    write keeps the whole lines that fit, warns once and counts the others in :attr:`lines_lost`;
    the next batch tries again. ``compress``: a gzip stream (:mod:`gnnmon.data.gz`), each batch
    flushed; a failed write then loses its whole batch."""

    def __init__(self, path: str | os.PathLike[str], mode: str = "w", compress: bool = False) -> None:
        self.path = Path(path)
        self.mode = mode
        self.compress = compress
        self.file: JsonlWriter | None = None
        self.lines_lost = 0
        self.errors: list[str] = []  # why writing failed (the first MAX_WRITE_ERRORS)
        self._warned = False

    def open(self, manifest: dict[str, Any]) -> None:
        """Put the file in place with its manifest. Out of file descriptors or disk space, the run
        goes on without its file (one warning; ``errors`` says why); any other failure (a bad
        path, a folder, permissions) raises: the user's to fix."""
        try:
            self.file = JsonlWriter(self.path, self.mode, header=manifest, compress=self.compress)
        except OSError as exc:
            if exc.errno not in RESOURCE_ERRNOS:
                raise
            self.errors.append(f"{type(exc).__name__}: {exc}")
            warnings.warn(f"gnnmon could not open {self.path} ({exc}); this run keeps its rows in memory only "
                          "(run.records)", RuntimeWarning, 5)

    def write(self, batch: Batch) -> None:
        self._write(batch.lines())

    def close(self, end: dict[str, Any]) -> None:
        file = self.file
        if file is None:
            return
        if self.lines_lost:  # the file says what it is missing
            end = {**end, "lines_lost": self.lines_lost, "write_errors": list(self.errors)}
        self._write([encode(end)])
        try:
            file.close()
        except OSError as exc:
            self._failed(exc, 0)

    def _write(self, lines: list[bytes]) -> None:
        file = self.file
        if file is None or file.closed or not lines:
            return
        try:
            file.write_lines(lines)
        except Exception as exc:  # noqa: BLE001 - the user's run comes first; the rows stay in memory
            lost = lines[getattr(exc, "lines_written", 0):]  # those that fit are in the file
            self._failed(exc, len(lost))  # what a reader misses

    def _failed(self, exc: BaseException, lost: int) -> None:
        self.lines_lost += lost
        if len(self.errors) < MAX_WRITE_ERRORS:
            self.errors.append(f"{type(exc).__name__}: {exc}")
        if not self._warned:  # one warning for the whole run
            self._warned = True
            warnings.warn(f"gnnmon could not write to {self.path}: {exc!r}; this run's newest rows stay in "
                          "run.records; later failures are counted in run.lines_lost, not warned again",
                          RuntimeWarning, 2)

    def forget(self) -> None:
        """In a forked child: the file is the parent's; never write to it (its descriptor is closed
        here only, which leaves the parent's open; see :meth:`JsonlWriter.forget`)."""
        file, self.file = self.file, None
        if file is not None:
            try:
                file.forget()
            except OSError:
                pass

    def __repr__(self) -> str:
        return f"JsonlSink({str(self.path)!r})"


SINKS: Registry[Callable[..., Sink]] = Registry("sink", group="gnnmon.sinks")
"""Sinks by name: the class (or factory) :func:`sink` makes. A module adds its sink with
:func:`register_sink` when it is imported; a module not imported yet is found through its
package's entry point in the group ``gnnmon.sinks`` (gnnmon's integrations declare theirs in
``pyproject.toml``, so ``sink("prometheus")`` works before anything imported them)."""


def register_sink(name: str, factory: Callable[..., Sink]) -> Callable[..., Sink]:
    """Make ``sink(name, **options)`` call ``factory(**options)``; returns ``factory``."""
    if not isinstance(name, str) or not name or not callable(factory):
        raise TypeError(f"register_sink(name, factory): a non-empty name and a callable; got {name!r}, {factory!r}")
    return SINKS.register(name, factory)


def sink(name: str, /, **options: Any) -> Sink:
    """A registered sink by name, e.g. ``sink("jsonl", path="runs/copy.jsonl")``."""
    made: Sink = SINKS.find(name)(**options)
    return made


register_sink("jsonl", JsonlSink)


def as_sink(obj: Any) -> Sink:
    """A sink from what a user passed: a :class:`Sink`, or a callable taking a list of rows."""
    if isinstance(obj, Sink):
        return obj
    if callable(obj):
        return CallableSink(obj)
    raise TypeError(f"a sink is an object with open(manifest), write(batch) and close(end), or a function "
                    f"fn(rows); got {type(obj).__name__}")


def as_sinks(objs: Iterable[Any]) -> list[Sink]:
    if isinstance(objs, (str, bytes)) or not isinstance(objs, Iterable):
        raise TypeError(f"sinks must be a list or tuple of sinks, got {type(objs).__name__}")
    return [as_sink(o) for o in objs]


def close_quietly(sink: Sink) -> None:
    """Close a sink of a run that did not start (what the caller hears about is why it did not)."""
    try:
        sink.close({"type": END, "rows": 0, "notes": ["the run did not start"]})
    except Exception:  # noqa: BLE001 - the failed start is what matters
        pass
