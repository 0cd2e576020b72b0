"""A row: the figures of one measured call or block, filled by its measurements, then emitted.

The row being filled is kept in :data:`gnnmon.record.state.CURRENT_ROW`, so a decorated call made
inside another gets its own row whose ``parent`` names the enclosing one. Measurements write flat
fields into ``row.fields``; figures that can only be read later (CUDA events) are registered with
:meth:`Row.defer` and resolved by the run, never on the hot path. Nothing sampled (utilisation,
energy) is read here: the run joins the timeline to rows by their ``t_start_ns``/``t_end_ns``.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch

from gnnmon.devices import Backend, backend_for
from gnnmon.devices.ranges import RANGES, pop_range, push_range
from gnnmon.devices.resolve import (
    BY_ARGUMENT,
    BY_EXPLICIT,
    BY_NOTHING,
    accelerator_in_use,
    check_supported,
    infer_device,
    parse_device,
)
from gnnmon.errors import DeviceError
from gnnmon.fields import add_note
from gnnmon.record import state
from gnnmon.record.active import active_run
from gnnmon.record.gc_log import GC_LOG, row_gc_fields
from gnnmon.record.inbox import Deferred
from gnnmon.record.run import Run


class Row:
    """One row being filled. ``fields`` is the plain dict that ends up in the run."""

    __slots__ = (
        "fields", "run", "parent", "sync", "_found", "_backend", "_deferred",
        "gc_n", "gc_ns", "gc_gen", "_after", "_hook", "_cpu0", "_range", "closed",
    )

    def __init__(
        self,
        label: str,
        *,
        found: torch.device | None = None,
        shape: Mapping[str, Any] | None = None,
        run: Run | None = None,
    ) -> None:
        """``found``: the device of the call's arguments (None: the default device is used);
        ``shape``: graph-shape fields read from them; ``run``: where the row goes (the active run)."""
        self.run = run if run is not None else active_run()
        self.parent = state.CURRENT_ROW.get()
        self._backend: Backend | None = None
        self._deferred: list[Deferred] | None = None
        self._after: list[Callable[[], Any]] | None = None
        self.sync = "events"  # the row's timing mode, which its phases follow
        index, marks = self.run.next_index(label)
        self.fields: dict[str, Any] = {
            "label": label,
            "index": index,
            "parent": self.parent.key if self.parent is not None else None,
            "t_start_ns": time.time_ns(),
            "t_end_ns": None,
            "device": None,
            "backend": None,
            "error": None,
            "notes": (),
        }
        if marks:
            self.fields.update(marks)
        self._found = found
        if shape:
            self.fields.update(shape)
        # A top-level row makes sure the GC hook is installed (a collect run already holds it).
        self._hook = self.parent is None and not self.run.holds_gc_hook
        if self._hook:
            GC_LOG.acquire()
        # Collections attributed to this row or its children (the GC log's callback adds them).
        self.gc_n = self.gc_ns = 0
        self.gc_gen = -1
        # Process CPU-seconds, for the CPU energy model (a clock read, ~1 µs; only with energy on).
        self._cpu0 = time.process_time() if self.run.energy is not None else None
        self.closed = False
        state.CURRENT_ROW.set(self)
        self._range = push_range(label) if RANGES.on else None  # opt-in: gnnmon.emit_ranges()

    @property
    def key(self) -> str:
        """``label#index``: how children name this row in their ``parent`` field."""
        return f"{self.fields['label']}#{self.fields['index']}"

    def backend(self, explicit: Any = None) -> Backend:
        """The backend for this call: ``explicit`` device if given, else resolved from arguments.

        The first backend resolved sets the row's ``device`` and ``backend`` fields.
        """
        if explicit is None:
            if self._backend is not None:
                return self._backend
            if self._found is not None:
                dev, how = self._found, BY_ARGUMENT
            else:
                dev, how = infer_device()
            try:
                backend = backend_for(dev)
            except DeviceError:
                check_supported(dev)  # an unsupported device among the arguments: say so
                raise
        else:
            dev = explicit if isinstance(explicit, torch.device) else parse_device(explicit)
            backend, how = backend_for(dev), BY_EXPLICIT
        if self._backend is None:
            self._backend = backend
            fields = self.fields
            fields["device"] = backend.label
            fields["backend"] = backend.name
            fields["device_source"] = how
        return backend

    def note(self, text: str) -> None:
        """Say why a figure is missing or how it was made (kept in ``notes``)."""
        add_note(self.fields, text)

    def defer(self, item: Deferred) -> None:
        """Register figures to be read later (by the collector, off the hot path)."""
        if self._deferred is None:
            self._deferred = []
        self._deferred.append(item)

    def after_close(self, action: Callable[[], Any]) -> None:
        """Run ``action`` once the row is closed (outside its window), e.g. a deferred collection."""
        if self._after is None:
            self._after = []
        self._after.append(action)

    def close(self, error: BaseException | None = None) -> None:
        """Finish the row (``t_end_ns``, ``error``) and hand it to the run."""
        fields = self.fields
        if self._range is not None:
            _pop_quietly(self._range)
        self.closed = True
        if state.CURRENT_ROW.get() is self:
            # The nearest enclosing row still open becomes current again: rows closed out of
            # order (scope A, scope B, A closed first) never leave a closed row current.
            parent = self.parent
            while parent is not None and parent.closed:
                parent = parent.parent
            state.CURRENT_ROW.set(parent)
        # After the reset: a collection it triggered is the row's, and inside its window.
        fields["t_end_ns"] = time.time_ns()
        if error is not None:
            fields["error"] = type(error).__name__
        fields.update(row_gc_fields(self.gc_n, self.gc_ns, self.gc_gen))
        if self._cpu0 is not None:
            fields["cpu_s"] = time.process_time() - self._cpu0
        if fields["device"] is None:
            self._settle_device()
        elif fields.get("device_source") == BY_NOTHING:  # on the CPU: did this call start an accelerator?
            started = accelerator_in_use()
            if started is not None:
                name = started[0].type.upper()
                self.note(f"{name} was first used during this call, after it was measured on the CPU: its "
                          f"{name} memory is not in this row; later calls measure {name} (or pass device=)")
        try:
            try:
                self.run.add_row(fields, self._deferred)
            except Exception as exc:  # noqa: BLE001 - e.g. a full disk: the call's result comes first
                warnings.warn(f"gnnmon could not store the row {self.key}: {exc!r}", RuntimeWarning, 3)
        finally:
            try:
                if self._after is not None:  # also after a KeyboardInterrupt: GC must come back on
                    _run_all(self._after)
            finally:
                if self._hook:
                    GC_LOG.release()

    def _settle_device(self) -> None:
        try:
            self.backend()
        except Exception as exc:  # noqa: BLE001 - identity only: a row without memory/timing must not fail
            self.note(f"device not resolved: {exc}")


def current_row() -> Row | None:
    """The row being filled in this thread/task, if any."""
    row: Row | None = state.CURRENT_ROW.get()
    return row


def _pop_quietly(opened: Any) -> None:
    try:
        pop_range(opened)
    except Exception as exc:  # noqa: BLE001 - a profiler range must not change the user's call
        warnings.warn(f"gnnmon could not close a profiler range: {exc!r}", RuntimeWarning, 3)


def _run_all(actions: list[Callable[[], Any]]) -> None:
    """Run every action, even after one raised; then raise the first error."""
    first: BaseException | None = None
    for action in actions:
        try:
            action()
        except BaseException as exc:  # noqa: BLE001 - the others must still run (GC back on)
            if first is None:
                first = exc
    if first is not None:
        raise first
