"""The MPS (Apple GPU) backend.

Where torch offers the device-generic allocator statistics on MPS (``torch.accelerator.memory``:
``memory_stats``, ``reset_peak_memory_stats``; recent torch builds back them with the MPS
allocator), the peak is *exact*: read from the allocator's peak counter the way CUDA's is (the
windows of :class:`~gnnmon.devices.peaks.CounterPeaks`, so nested windows keep their own peaks),
labelled ``measured:mps-allocator``, with the allocator's reserved bytes beside it. Which way a
backend reads is settled once, when it is made (a call that raises, or statistics without
``allocated_bytes.all.peak``, mean the older way).

Otherwise ``torch.mps`` has no peak API: the peak is *sampled* by a daemon thread reading
``current_allocated_memory`` (memory held by tensors, a host-side counter of the MPS allocator:
read without a synchronize) every ``sample_interval`` seconds, and labelled ``sampled``. While a
``collect`` run is active the thread stays up between windows (see
:meth:`~gnnmon.devices.peaks.PolledPeaks.hold`), so a row does not start and join a thread.
``driver_allocated_memory`` (everything Metal's driver holds for the process,
including caches) is read beside it as the window's ``driver`` counters, with
``recommended_max_memory``; it is not the tensors' memory.
"""

from __future__ import annotations

from typing import Any

import torch

from gnnmon.devices.base import EVENT_POOL_MAX, MemoryState, MemoryWindow
from gnnmon.devices.peaks import CounterPeaks, PolledPeaks
from gnnmon.errors import DeviceError

ALLOCATOR = "measured:mps-allocator"
"""How an MPS window's peak is read where the allocator keeps a peak counter (exact)."""


def _read() -> tuple[int, int]:
    return torch.mps.current_allocated_memory(), torch.mps.driver_allocated_memory()


def _allocator_stats() -> Any:
    """``torch.accelerator.memory``'s ``memory_stats`` where it answers for MPS with a peak, else None."""
    memory = getattr(getattr(torch, "accelerator", None), "memory", None)
    stats = getattr(memory, "memory_stats", None)
    reset = getattr(memory, "reset_peak_memory_stats", None)
    if stats is None or reset is None:
        return None
    try:
        current = torch.accelerator.current_accelerator()
        if current is None or current.type != "mps" or "allocated_bytes.all.peak" not in stats(0):
            return None
    except (AttributeError, RuntimeError, TypeError, ValueError):  # a torch whose MPS allocator lacks them
        return None
    return memory


def _counters(memory: Any) -> tuple[tuple[int, int], tuple[int, int]]:
    s = memory.memory_stats(0)
    return ((s["allocated_bytes.all.current"], s["reserved_bytes.all.current"]),
            (s["allocated_bytes.all.peak"], s["reserved_bytes.all.peak"]))


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
        memory = _allocator_stats()
        self.counter: CounterPeaks | None = None if memory is None else CounterPeaks(
            lambda: _counters(memory), lambda: memory.reset_peak_memory_stats(0))

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
        if self.counter is not None:
            return None, self.counter.open()
        peaks = self._peaks(sample_interval)
        return peaks, peaks.open()

    def close_window(self, token: Any) -> MemoryWindow:
        peaks, window = token
        if peaks is None:  # the allocator's peak counter
            assert self.counter is not None
            (end, res_end), (peak, res_peak) = self.counter.close(window)
            start, res_start = window.start
            return MemoryWindow(start, end, peak, ALLOCATOR, (res_start, res_end, res_peak))
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
