"""What :func:`gnnmon.watch_layers` keeps for one watched row: each layer's figures, the backward
spans still open, and the peak windows, written into the row's fields when the run finishes it
(off the step's path; device events are read then). See :mod:`gnnmon.measure.layer_watch`."""

from __future__ import annotations

import threading
import time
from typing import Any

from gnnmon.devices import Backend
from gnnmon.devices.host import HOST
from gnnmon.fields import add_note
from gnnmon.figures import LAYER_FIGURES
from gnnmon.measure.memory import DEFAULT_SAMPLE_INTERVAL
from gnnmon.measure.row_device import model_backend
from gnnmon.measure.timing import EventSpan
from gnnmon.record.row import Row


class LayerMemory:
    """Peak windows for one row's device: the allocator's on an accelerator, exact RSS on the CPU
    (None where RSS can only be sampled: too coarse for a layer)."""

    __slots__ = ("backend", "host")

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.host = HOST.exact_windows() if backend.memory_is_host else None

    @property
    def available(self) -> bool:
        return not self.backend.memory_is_host or self.host is not None

    def open(self) -> Any:
        if self.backend.memory_is_host:
            window = [0, 0]
            self.host.open(window)  # type: ignore[union-attr]
            return window
        return self.backend.open_window(DEFAULT_SAMPLE_INTERVAL)

    def close(self, token: Any) -> tuple[int, int]:
        """(start, peak) bytes of a window, now ended."""
        if type(token) is list:
            self.host.close(token)  # type: ignore[union-attr]
            return token[0], token[1]
        window = self.backend.close_window(token)
        return window.start, window.peak


class LayerStats:
    """One layer's figures in one row (seconds and bytes; None: not measured), its fields named
    ``prefix + figure``."""

    __slots__ = ("prefix", "calls", "forward_s", "backward_s", "peak_delta_bytes", "backward_peak_delta_bytes",
                 "saved_bytes", "message_bytes", "output_bytes", "spans")

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.calls = 0
        self.forward_s: float | None = None
        self.backward_s: float | None = None
        self.peak_delta_bytes: int | None = None
        self.backward_peak_delta_bytes: int | None = None
        self.saved_bytes: int | None = None
        self.message_bytes: int | None = None
        self.output_bytes: int | None = None
        self.spans: list[EventSpan] = []  # device times to read later, added to their figure

    def add(self, figure: str, value: float) -> None:
        old = getattr(self, figure)
        setattr(self, figure, value if old is None else old + value)

    def peak(self, figure: str, value: int) -> None:
        old = getattr(self, figure)
        if old is None or value > old:
            setattr(self, figure, value)


class BackwardSpan:
    """One layer call's backward: from the output's gradient arriving to the last of the
    gradients leaving (inputs' nodes, parameters' accumulation)."""

    __slots__ = ("stats", "step", "start_ns", "start_ev", "end_ns", "end_ev", "window", "start_bytes", "peak",
                 "pending", "done")

    def __init__(self, stats: LayerStats, step: StepRecord, pending: int) -> None:
        self.stats, self.step, self.pending = stats, step, pending
        self.start_ns: int | None = None
        self.start_ev = self.end_ev = self.window = None
        self.end_ns = self.peak = 0
        self.start_bytes: int | None = None
        self.done = False  # its figures are in the layer's (finish ran)

    def begin(self) -> None:
        step = self.step
        if self.start_ns is not None or step.closed:
            return
        if step.events:
            self.start_ev = step.backend.record_event()
        if step.memory is not None:
            self.window = step.memory.open()
        self.start_ns = time.perf_counter_ns()

    def one_done(self) -> None:
        """A gradient left the layer; the last one ends its backward."""
        step = self.step
        if self.start_ns is None or self.pending <= 0 or step.closed:
            return
        self.pending -= 1
        self.end_ns = time.perf_counter_ns()
        if step.events and not self.pending:
            self.end_ev = step.backend.record_event()
        if self.window is not None:  # a segment per gradient: the peak up to the last one counts
            start, peak = step.memory.close(self.window)
            if self.start_bytes is None:  # the first segment's start is the backward's
                self.start_bytes = start
            self.peak = max(self.peak, peak)
            self.window = step.memory.open() if self.pending else None
        if not self.pending:
            self.finish()

    def finish(self) -> None:
        """Put what was measured into the layer's figures; a window still open (a gradient that
        never came: an unused parameter) is closed and its segment left out. Once only."""
        if self.done:
            return
        self.done = True
        if self.window is not None:
            self.step.memory.close(self.window)
            self.window = None
        if self.start_ns is None or not self.end_ns:
            return
        stats = self.stats
        if self.start_ev is not None and self.end_ev is not None:
            stats.spans.append(EventSpan(self.start_ev, self.end_ev, stats.prefix + "backward_s", True,
                                         self.step.backend))
        else:  # the CPU, or a gradient that never came: host time to the last one that did
            if self.start_ev is not None:
                self.step.backend.release_event(self.start_ev)
            stats.add("backward_s", (self.end_ns - self.start_ns) / 1e9)
        if self.start_bytes is not None:
            stats.peak("backward_peak_delta_bytes", self.peak - self.start_bytes)


class StepRecord:
    """The layers' figures of one watched row; the run reads it when it finishes the row
    (a :class:`~gnnmon.record.inbox.Deferred`)."""

    def __init__(self, row: Row, names: list[str], memory: bool, model: Any = None) -> None:
        """``names``: the layers' ``<name>`` in ``layer_<name>_<figure>``, by layer index;
        ``memory``: open peak windows per layer; ``model``: whose device the layers are measured
        on (:func:`~gnnmon.measure.row_device.model_backend`)."""
        self.row = row
        self.backend = model_backend(row, model)
        self.events = not self.backend.memory_is_host
        windows = LayerMemory(self.backend) if memory else None
        self.memory = windows if windows is not None and windows.available else None
        self.stats = [LayerStats(f"layer_{name}_") for name in names]
        self.backwards: list[BackwardSpan] = []
        self.open_forwards: dict[int, Any] = {}  # layer -> memory window of a forward still running
        self.closed = False
        self.unstarted = 0  # layer calls whose backward had not begun when the row closed
        self._lock = threading.Lock()
        if memory and self.memory is None:
            row.note("layer memory not measured: this machine's RSS can only be sampled")

    def finish(self) -> None:
        """At the row's close: end what is still open (a backward run outside the row, a forward
        an interrupt cut short); later hooks for this row do nothing."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            memory = self.memory
            for window in self.open_forwards.values():
                if memory is not None and window is not None:
                    memory.close(window)
            self.open_forwards.clear()
            for backward in self.backwards:
                if backward.start_ns is None:
                    self.unstarted += 1
                backward.finish()
            self.backwards.clear()
            self.row = None  # type: ignore[assignment]

    def ready(self) -> bool:
        if not self.closed:
            return False
        return all(span.ready() for stats in self.stats for span in stats.spans)

    def resolve(self, fields: dict[str, Any]) -> None:
        self.finish()
        if self.unstarted:
            add_note(fields, "layer backward figures missing: the backward ran after the row closed (call "
                             "backward() inside the measured step)")
        for stats in self.stats:
            if not stats.calls:
                continue
            for figure in LAYER_FIGURES:
                value = getattr(stats, figure)
                if value is not None:
                    fields[stats.prefix + figure] = value
            for span in stats.spans:  # device times, added to what the host measured
                span.resolve(fields)
            stats.spans = []
