"""The protocol every device backend follows (``gnnmon.devices`` picks one per device and caches it)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch

EVENT_POOL_MAX = 1024
"""Free timing events a backend keeps (more are left to the garbage collector). The pool settles
at the events in flight between two drains of the run: rows per flush interval × events per row
(2, plus 2 per phase)."""


@runtime_checkable
class Backend(Protocol):
    """What gnnmon needs from a device.

    ``name`` is ``"cuda"``, ``"mps"`` or ``"cpu"``; ``device`` the ``torch.device`` measured.
    ``memory_is_host`` is True when device memory *is* the process's RSS (the CPU backend).
    """

    name: str
    device: torch.device
    label: str  # str(device), made once: the row's ``device`` field
    memory_is_host: bool

    def synchronize(self) -> None:
        """Wait until the device has finished all queued work (no-op on the CPU)."""

    def record_event(self) -> Any:
        """A timing event recorded now on the device's current stream, or None if the device has
        no events (the CPU, whose work is synchronous). Events have ``query()``,
        ``synchronize()`` and ``elapsed_time(end)`` (milliseconds), like ``torch.cuda.Event``;
        they come from a pool: give each back with :meth:`release_event` once read."""

    def release_event(self, event: Any) -> None:
        """Return a read event to the pool."""

    def open_window(self, sample_interval: float) -> Any:
        """Start a nesting-safe peak window; returns a token for :meth:`close_window`."""

    def close_window(self, token: Any) -> dict[str, Any]:
        """End a window; returns its row fields (``mem_start_bytes``, ``mem_peak_bytes``, ...)."""
