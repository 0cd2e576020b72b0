"""A row: the figures of one measured call or block, filled by its measurements, then emitted.

The row being filled is kept in :data:`gnnmon.record.state.CURRENT_ROW`, so a decorated call made
inside another gets its own row whose ``parent`` names the enclosing one. Measurements write flat
fields into ``row.fields``; figures that can only be read later (CUDA events) are registered with
:meth:`Row.defer` and resolved by the run, never on the hot path.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch

from gnnmon.devices import Backend, get_backend
from gnnmon.devices.resolve import check_supported, default_device, parse_device
from gnnmon.record import state
from gnnmon.record.gc_log import GC_LOG, row_gc_fields
from gnnmon.record.run import Deferred, Run, active_run


class Row:
    """One row being filled. ``fields`` is the plain dict that ends up in the run."""

    __slots__ = (
        "fields", "run", "parent", "ctx", "_found", "_backend", "_deferred", "_token",
        "_gc0", "_after", "_e0", "_hook",
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
        self.ctx: dict[str, Any] = {}  # state measurements of one row share (e.g. the sync mode)
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
            "notes": [],
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
        self._gc0 = GC_LOG.snapshot()
        meter = self.run.energy
        self._e0 = meter.read() if meter is not None else None
        self._token = state.CURRENT_ROW.set(self)

    @property
    def key(self) -> str:
        """``label#index``: how children name this row in their ``parent`` field."""
        return f"{self.fields['label']}#{self.fields['index']}"

    def backend(self, explicit: Any = None) -> Backend:
        """The backend for this call: ``explicit`` device if given, else resolved from arguments.

        The first backend resolved sets the row's ``device`` and ``backend`` fields.
        """
        if explicit is None and self._backend is not None:
            return self._backend
        if explicit is not None:
            dev = explicit if isinstance(explicit, torch.device) else parse_device(explicit)
        else:
            dev = check_supported(self._found or default_device())
        backend = get_backend(dev)
        if self._backend is None:
            self._backend = backend
            self.fields["device"] = str(backend.device)
            self.fields["backend"] = backend.name
        return backend

    def note(self, text: str) -> None:
        """Say why a figure is missing or how it was made (kept in ``notes``)."""
        if text not in self.fields["notes"]:
            self.fields["notes"].append(text)

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
        fields["t_end_ns"] = time.time_ns()
        if error is not None:
            fields["error"] = type(error).__name__
        try:
            state.CURRENT_ROW.reset(self._token)
        except ValueError:  # closed in another context (a thread): just drop our marker
            if state.CURRENT_ROW.get() is self:
                state.CURRENT_ROW.set(self.parent)
        fields.update(row_gc_fields(self._gc0, GC_LOG.snapshot()))
        if fields["device"] is None:
            self._settle_device()
        meter = self.run.energy
        if self._e0 is not None and meter is not None:
            meter.fill_row(fields, self._e0, meter.read())
        try:
            try:
                self.run.add_row(fields, self._deferred)
            except Exception as exc:  # noqa: BLE001 - e.g. a full disk: the call's result comes first
                warnings.warn(f"gnnmon could not store the row {self.key}: {exc!r}", RuntimeWarning, 3)
            if self._after is not None:
                for action in self._after:
                    action()
        finally:
            if self._hook:
                GC_LOG.release()

    def _settle_device(self) -> None:
        try:
            dev = check_supported(self._found or default_device())
        except Exception as exc:  # noqa: BLE001 - identity only: a row without memory/timing must not fail
            self.note(f"device not resolved: {exc}")
            return
        self.fields["device"] = str(dev)
        self.fields["backend"] = dev.type
