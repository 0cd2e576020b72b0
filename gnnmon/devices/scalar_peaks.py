"""Nesting-safe peak windows over one resettable figure, for the step's path: the host's RSS and
its high-water mark (:mod:`gnnmon.devices.rss`), in bytes.

The rule is :class:`~gnnmon.devices.peaks.CounterPeaks`'s: each open window keeps its own running
peak; before the counter is reset its peak is folded into every open window, so an inner window's
reset never hides an outer one's peak; a reset is done only when the counter is above the figure
now. Windows are ``[start, peak]`` lists the caller owns, so that no tuple is built or folded per
call and whatever interrupts an opening, the caller can close the window.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class ScalarPeaks:
    """:class:`~gnnmon.devices.peaks.CounterPeaks` for one figure read as ``(current, peak)`` ints (the
    host's RSS and its high-water mark): the same nesting rule, with windows as ``[start, peak]`` lists, for the step's
    path (no tuples to build and fold)."""

    def __init__(self, read: Callable[[], tuple[int, int]], reset: Callable[[], None]) -> None:
        self._read = read
        self._reset = reset
        self._lock = threading.RLock()
        self._open: list[list[int]] = []

    def open(self, window: list[int]) -> list[int]:
        """Start ``window`` (a list of two ints the caller keeps first, so that whatever interrupts
        this, it can close it) at the current figure; resets the counter only if it is above it."""
        with self._lock:
            current, peak = self._read()
            for w in self._open:
                if peak > w[1]:
                    w[1] = peak
            if peak > current:
                self._reset()  # the counter now reads current: the new window starts there
            window[0] = window[1] = current
            self._open.append(window)
            return window

    def close(self, window: list[int]) -> int:
        """End a window: returns the figure now (the window's peak is ``window[1]``). Closing a
        window again, or one whose opening was interrupted, only reads the figure."""
        with self._lock:
            current, peak = self._read()
            opened = self._open
            for w in opened:
                if peak > w[1]:
                    w[1] = peak
            if opened and opened[-1] is window:
                opened.pop()
            else:
                for i, w in enumerate(opened):
                    if w is window:
                        del opened[i]
                        break
            return current

    @property
    def depth(self) -> int:
        return len(self._open)
