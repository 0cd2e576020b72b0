"""A run's outlets: its sinks (the file among them) and the writer thread that feeds them.
:class:`~gnnmon.record.run.Run` is made of these; :mod:`gnnmon.record.sinks` has the contract."""

from __future__ import annotations

import warnings
from typing import Any

from gnnmon.record.sinks import SINK_FAILED, JsonlSink, Sink, as_sink
from gnnmon.record.writer import Writer


class Outlets:
    """Adding, removing and disabling a run's sinks, and what its file sink says of its writes."""

    _sinks: list[Sink]
    _file_sink: JsonlSink | None
    _writer: Writer | None
    _state: str
    manifest: dict[str, Any] | None
    flush_interval: float
    sink_errors: list[str]

    def _drain(self, force: bool) -> None:
        raise NotImplementedError

    def _end_line(self) -> dict[str, Any]:
        raise NotImplementedError

    def _new_writer(self) -> Writer:
        """The thread that feeds the sinks (its failures go to ``sink_errors``)."""
        return Writer(self._drain, self.flush_interval, errors=self.sink_errors)

    # -- sinks ------------------------------------------------------------------------------
    def add_sink(self, sink: Any) -> Sink:
        """Send this run's data to ``sink`` too (a :class:`~gnnmon.record.sinks.Sink` or a function
        ``fn(rows)``), from the next batch on; returns the sink. On a run that has started the
        sink is opened here with the manifest and a writer thread is started if none runs."""
        made = as_sink(sink)
        if self._state in ("stopping", "stopped"):
            raise RuntimeError("this run has stopped; add sinks before or while it runs")
        if self._state == "active":
            if self._writer is not None:
                self._writer.flush()  # rows closed before now are not the new sink's
            else:
                self._drain(True)
            made.open(dict(self.manifest or {}))
            self._sinks.append(made)
            if self._writer is None:
                self._writer = self._new_writer().start()
        else:
            self._sinks.append(made)
        return made

    def remove_sink(self, sink: Sink) -> None:
        """Send ``sink`` every row closed so far, close it (on the writer thread) and stop sending
        it anything. A run left with no sink stops its writer thread."""
        if sink not in self._sinks:
            return

        def close() -> None:
            if sink in self._sinks:
                self._sinks.remove(sink)
                try:
                    sink.close(self._end_line())
                except Exception as exc:  # noqa: BLE001 - removing it is what was asked
                    self._disable(sink, exc, closing=True)

        writer = self._writer
        if writer is None:
            close()
            return
        writer.flush(then=close)
        if not self._sinks and self._state == "active":
            self._writer = None
            writer.stop()

    def _disable(self, sink: Sink, exc: BaseException, closing: bool = False) -> None:
        """Stop sending ``sink`` anything (one warning); unless it failed while closing, close it
        with an end line whose ``ended`` says it failed, so it lets go of what it holds (a
        server thread, a tracker's run)."""
        if sink in self._sinks:
            self._sinks.remove(sink)
        self.sink_errors.append(f"{sink!r}: {type(exc).__name__}: {exc}")
        warnings.warn(f"gnnmon disabled the sink {sink!r}, which raised {exc!r}; the run goes on without it",
                      RuntimeWarning, 2)
        if not closing:
            try:
                sink.close({**self._end_line(), "ended": f"{SINK_FAILED} {type(exc).__name__}"})
            except Exception:  # noqa: BLE001 - it failed already; its error is the one kept
                pass

    @property
    def lines_lost(self) -> int:
        """Lines (rows, samples, events) a failed write kept out of the file."""
        return self._file_sink.lines_lost if self._file_sink is not None else 0

    @property
    def write_errors(self) -> list[str]:
        """Why writing the file failed (the first ten)."""
        return self._file_sink.errors if self._file_sink is not None else []

    @property
    def _file(self) -> Any:
        return self._file_sink.file if self._file_sink is not None else None

