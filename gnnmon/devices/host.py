"""Peak windows over the host process's resident memory (RSS), exact where Linux allows it.

On Linux the peak is exact: the kernel's high-water mark of RSS, reset per window where needed
(see :mod:`gnnmon.devices.rss`). Where ``clear_refs`` cannot be written, or off Linux, the peak is
sampled with psutil and labelled so. Child processes (DataLoader workers) can only be sampled
(:mod:`gnnmon.devices.children`).
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from gnnmon.devices.base import MemoryWindow
from gnnmon.devices.children import children_rss
from gnnmon.devices.peaks import PolledPeaks
from gnnmon.devices.rss import RssCounter, psutil_rss
from gnnmon.devices.scalar_peaks import ScalarPeaks

EXACT_SOURCE = "measured:VmHWM"
"""How an exact host peak is measured: the kernel's high-water mark, read through getrusage."""


class HostMemory:
    """Peak windows over this process's RSS, exact (VmHWM) where possible, else sampled."""

    def __init__(self) -> None:
        self._exact: ScalarPeaks | None = None
        self.counter: RssCounter | None = None
        self._polled: dict[float, PolledPeaks] = {}
        self._children: dict[float, PolledPeaks] = {}
        self._mode: str | None = None
        self._why_sampled = ""
        self._lock = threading.RLock()

    def _choose(self) -> str:
        if self._mode is not None:
            return self._mode
        with self._lock:
            if self._mode is not None:
                return self._mode
            if sys.platform.startswith("linux"):
                try:
                    counter = self.counter = RssCounter()
                    self._exact = ScalarPeaks(counter.now, counter.reset)
                    self._mode = "exact"
                    return self._mode
                except OSError as exc:
                    if exc.errno is None:  # raised, not refused by the OS: a signal handler's TimeoutError
                        raise
                    self._why_sampled = f"VmHWM reset unavailable ({exc.__class__.__name__}: {exc})"
            else:
                self._why_sampled = f"no VmHWM on {sys.platform}"
            self._mode = "sampled"
            return self._mode

    @property
    def exact(self) -> bool:
        return self._choose() == "exact"

    def _polled_for(self, table: dict[float, PolledPeaks], interval: float, read: Any, name: str) -> PolledPeaks:
        with self._lock:
            peaks = table.get(interval)
            if peaks is None:
                peaks = table[interval] = PolledPeaks(read, interval, name=name)
            return peaks

    def open(self, include_children: bool, interval: float) -> tuple[Any, ...]:
        """Start a window over RSS (and children's RSS if asked); returns a token for :meth:`close`."""
        own: tuple[Any, ...]
        if self._choose() == "exact" and self._exact is not None:
            own = ("exact", self._exact.open([0, 0]))
        else:
            peaks = self._polled_for(self._polled, interval, psutil_rss, "gnnmon-rss")
            own = ("sampled", peaks, peaks.open())
        kids = None
        if include_children:
            peaks = self._polled_for(
                self._children, interval, lambda: (children_rss()[0],), "gnnmon-children-rss"
            )
            kids = (peaks, peaks.open())
        return own, kids, interval

    def close(self, token: tuple[Any, ...]) -> MemoryWindow:
        """End a window: the RSS at its start, end and highest (bytes; with child processes, their
        sum, and theirs apart in ``children``) and how the highest was read."""
        own, kids, interval = token
        if own[0] == "exact" and self._exact is not None:
            end = self._exact.close(own[1])
            start, peak = own[1]
            how = EXACT_SOURCE
        else:
            (end,), (peak,) = own[1].close(own[2])
            (start,) = own[2].start
            how = f"sampled:psutil@{interval * 1000:g}ms"
        if kids is None:
            return MemoryWindow(start, end, peak, how)
        (k_end,), (k_peak,) = kids[0].close(kids[1])
        (k_start,) = kids[1].start
        # Own and children's peaks may fall at different times: their sum is an upper bound.
        return MemoryWindow(start + k_start, end + k_end, peak + k_peak,
                            how + f"+sampled:children@{interval * 1000:g}ms", children=(k_start, k_end, k_peak))

    def exact_windows(self) -> ScalarPeaks | None:
        """The exact windows over RSS where this machine has them (Linux), else None: what a
        row's memory measurement opens directly, on the step's path."""
        if self._mode is None:
            self._choose()
        return self._exact

    @property
    def why_sampled(self) -> str:
        self._choose()
        return self._why_sampled


HOST = HostMemory()
