"""The MPS (Apple GPU) backend.

``torch.mps`` has no peak API: the peak is *sampled* by a daemon thread reading
``current_allocated_memory`` (memory held by tensors, a host-side counter of the MPS allocator:
read without a synchronize) every ``sample_interval`` seconds, and labelled ``sampled``. While a
``collect`` run is active the thread stays up between windows (see
:meth:`~gnnmon.devices.peaks.PolledPeaks.hold`), so a row does not start and join a thread. ``driver_allocated_memory`` (everything Metal's driver holds for the process,
including caches) is read beside it as the window's ``driver`` counters, with
``recommended_max_memory``; it is not the tensors' memory.
"""

from __future__ import annotations

from typing import Any

import torch

from gnnmon.devices.base import EVENT_POOL_MAX, MemoryState, MemoryWindow
from gnnmon.devices.peaks import PolledPeaks
from gnnmon.errors import DeviceError


def _read() -> tuple[int, int]:
    return torch.mps.current_allocated_memory(), torch.mps.driver_allocated_memory()


class MpsBackend:
    """The MPS device (there is only one)."""

    name = "mps"
    memory_is_host = False

    def __init__(self, device: torch.device | None = None) -> None:
        if not torch.backends.mps.is_available():
            raise DeviceError(
                "device 'mps' requested but MPS is not available "
                "(torch.backends.mps.is_available() is False)"
            )
        self.device = torch.device("mps")
        self.label = "mps"
        self._polled: dict[float, PolledPeaks] = {}
        self._pool: list[Any] = []

    def synchronize(self) -> None:
        torch.mps.synchronize()

    def record_event(self) -> Any:
        """An MPS event from the pool, where this torch has them (``torch.mps.event.Event``),
        recorded now; else None."""
        pool = self._pool
        if pool:
            event = pool.pop()
        else:
            event_cls = getattr(torch.mps, "Event", None)
            if event_cls is None:
                return None
            event = event_cls(enable_timing=True)
        event.record()
        return event

    def release_event(self, event: Any) -> None:
        if len(self._pool) < EVENT_POOL_MAX:
            self._pool.append(event)

    def _peaks(self, interval: float) -> PolledPeaks:
        peaks = self._polled.get(interval)
        if peaks is None:
            peaks = self._polled.setdefault(interval, PolledPeaks(_read, interval, "gnnmon-mps"))
        return peaks

    def open_window(self, sample_interval: float) -> Any:
        peaks = self._peaks(sample_interval)
        return peaks, peaks.open()

    def close_window(self, token: Any) -> MemoryWindow:
        peaks, window = token
        (end, driver_end), (peak, driver_peak) = peaks.close(window)
        start, driver_start = window.start
        try:
            limit = torch.mps.recommended_max_memory()
        except (AttributeError, RuntimeError):  # older torch
            limit = None
        return MemoryWindow(start, end, peak, f"sampled:mps@{peaks.interval * 1000:g}ms",
                            driver=(driver_start, driver_end, driver_peak, limit))

    def memory_state(self) -> MemoryState:
        """Tensors' bytes, the driver's (as what the allocator holds), and its recommended maximum
        as the device's memory (free: what the driver may still take)."""
        allocated, driver = torch.mps.current_allocated_memory(), torch.mps.driver_allocated_memory()
        total = torch.mps.recommended_max_memory()
        return MemoryState(allocated, driver, None, max(total - driver, 0), total)

    def capacity(self) -> tuple[int, str]:
        return int(torch.mps.recommended_max_memory()), "MPS's recommended maximum"

    def __repr__(self) -> str:
        return "MpsBackend()"
