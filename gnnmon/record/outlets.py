"""A run's outlets: its sinks (the file among them), the writer thread that feeds them, the lines
other than rows waiting for the next batch, and what failed. A :class:`~gnnmon.record.run.Run` owns
one :class:`Outlets`; :mod:`gnnmon.record.sinks` has the contract every sink can rely on."""

from __future__ import annotations

import os
import warnings
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gnnmon.record.sinks import SINK_FAILED, Batch, JsonlSink, Sink, as_sink, close_quietly
from gnnmon.record.writer import Writer


class Outlets:
    """The sinks of one run, the file sink first (if the run has a file), and the writer thread
    that calls ``drain(force)`` every ``interval`` seconds once started.

    ``end_line()`` gives the run's end line as it is now (what a closing sink gets)."""

    def __init__(self, sinks: list[Sink], file: JsonlSink | None, drain: Callable[[bool], None],
                 interval: float, end_line: Callable[[], dict[str, Any]]) -> None:
        self.sinks: list[Sink] = ([file] if file is not None else []) + sinks
        self.file = file
        self.errors: list[str] = []  # sinks disabled after they raised (the writer's failures too)
        self.writer: Writer | None = None
        self._others: deque[tuple[str, dict[str, Any]]] = deque()  # GC events, samples, ... for the next batch
        self._drain = drain
        self._interval = interval
        self._end_line = end_line

    # -- the run's start and stop -------------------------------------------------------------
    def open(self, manifest: dict[str, Any]) -> None:
        """Open every sink with the manifest, the file last (a run whose other sinks cannot start
        leaves a previous file untouched); on a failure close those opened and raise. A file that
        could not open for want of descriptors or disk leaves the run with its rows in memory."""
        opened: list[Sink] = []
        try:
            for sink in sorted(self.sinks, key=lambda s: s is self.file):
                sink.open(dict(manifest))
                opened.append(sink)
        except BaseException:
            for sink in opened:
                close_quietly(sink)
            raise
        if self.file is not None and self.file.file is None:
            self.sinks.remove(self.file)  # out of descriptors or disk: rows in memory only

    def start(self) -> Writer | None:
        """The writer thread, made if there is a sink to feed (started by the caller)."""
        self.writer = self._new_writer() if self.sinks else None
        return self.writer

    def stop(self, drain: Callable[[bool], None]) -> None:
        """The last batch and the end line to every sink, on the writer thread if there is one
        (joined before this returns), else here; every sink is closed."""
        writer, self.writer = self.writer, None
        if writer is not None:
            writer.stop(self._close_all)
        else:
            drain(True)
            self._close_all()

    def _close_all(self) -> None:
        end = self._end_line()
        for sink in list(self.sinks):
            try:
                sink.close(dict(end))
            except Exception as exc:  # noqa: BLE001 - the other sinks still close
                self.disable(sink, exc, closing=True)

    def forget(self) -> None:
        """In a forked child: the sinks and the writer thread are the parent's."""
        if self.file is not None:
            self.file.forget()
        self.sinks = []
        self.writer = None
        self._others.clear()

    def _new_writer(self) -> Writer:
        """The thread that feeds the sinks (its failures go to ``errors``)."""
        return Writer(self._drain, self._interval, errors=self.errors)

    # -- batches ----------------------------------------------------------------------------
    def pass_on(self, kind: str, item: dict[str, Any]) -> None:
        """Send ``item``, a line of ``kind`` other than a row (a GC event, sample, counter's point or
        marker), to the sinks with the next batch; nothing while no writer thread feeds them.
        Takes no lock and does no I/O: a gc callback and the sampler's reader thread call it."""
        if self.writer is not None:
            self._others.append((kind, item))

    def keeper(self, kind: str, kept: deque[dict[str, Any]]) -> Callable[[dict[str, Any]], None]:
        """A function that keeps an item in ``kept`` and passes it on as a ``kind`` line
        (:meth:`pass_on`): the run's intake of GC events, called inside a gc callback."""
        others = self._others

        def keep(item: dict[str, Any]) -> None:
            kept.append(item)
            if self.writer is not None:
                others.append((kind, item))

        return keep

    def passed_on(self) -> list[tuple[str, dict[str, Any]]]:
        """The lines passed on since the last batch, oldest first, taken for the next one (under the
        run's lock: only appends happen meanwhile)."""
        others = self._others
        return [others.popleft() for _ in range(len(others))]

    def write(self, batch: Batch) -> None:
        """Hand ``batch`` to every sink (on the writer thread); one that raises is disabled."""
        for sink in list(self.sinks):
            try:
                sink.write(batch)
            except Exception as exc:  # noqa: BLE001 - one broken sink must not stop the run
                self.disable(sink, exc)

    # -- sinks added and removed while the run goes on ------------------------------------------
    def add(self, sink: Any, state: str, manifest: dict[str, Any] | None) -> Sink:
        """Send the run's data to ``sink`` too (see :meth:`gnnmon.record.run.Run.add_sink`)."""
        made = as_sink(sink)
        if state in ("stopping", "stopped"):
            raise RuntimeError("this run has stopped; add sinks before or while it runs")
        if state == "active":
            if self.writer is not None:
                self.writer.flush()  # rows closed before now are not the new sink's
            else:
                self._drain(True)
            made.open(dict(manifest or {}))
            self.sinks.append(made)
            if self.writer is None:
                self.writer = self._new_writer().start()
        else:
            self.sinks.append(made)
        return made

    def remove(self, sink: Sink, state: str) -> None:
        """Send ``sink`` every row closed so far, close it (on the writer thread) and stop sending
        it anything. A run left with no sink stops its writer thread."""
        if sink not in self.sinks:
            return

        def close() -> None:
            if sink in self.sinks:
                self.sinks.remove(sink)
                try:
                    sink.close(self._end_line())
                except Exception as exc:  # noqa: BLE001 - removing it is what was asked
                    self.disable(sink, exc, closing=True)

        writer = self.writer
        if writer is None:
            close()
            return
        writer.flush(then=close)
        if not self.sinks and state == "active":
            self.writer = None
            writer.stop()

    def disable(self, sink: Sink, exc: BaseException, closing: bool = False) -> None:
        """Stop sending ``sink`` anything (one warning); unless it failed while closing, close it
        with an end line whose ``ended`` says it failed, so it lets go of what it holds (a
        server thread, a tracker's run)."""
        if sink in self.sinks:
            self.sinks.remove(sink)
        self.errors.append(f"{sink!r}: {type(exc).__name__}: {exc}")
        warnings.warn(f"gnnmon disabled the sink {sink!r}, which raised {exc!r}; the run goes on without it",
                      RuntimeWarning, 3)
        if not closing:
            try:
                sink.close({**self._end_line(), "ended": f"{SINK_FAILED} {type(exc).__name__}"})
            except Exception:  # noqa: BLE001 - it failed already; its error is the one kept
                pass

    # -- what the file says of its writes ---------------------------------------------------------
    @property
    def lines_lost(self) -> int:
        """Lines (rows, samples, events) a failed write kept out of the file."""
        return self.file.lines_lost if self.file is not None else 0

    @property
    def write_errors(self) -> list[str]:
        """Why writing the file failed (the first ten)."""
        return self.file.errors if self.file is not None else []


def refuse_shared_file(path: Path, runs: Iterable[Any]) -> None:
    """Raise if one of the active ``runs`` writes ``path`` already (two runs appending to one file
    would interleave their lines)."""
    mine = os.path.realpath(path)
    for other in runs:
        if other.path is not None and os.path.realpath(other.path) == mine:
            raise ValueError(f"{path} is already being written by an active gnnmon.collect(); give the "
                             "nested run a path of its own (or none, to keep its rows in memory)")
