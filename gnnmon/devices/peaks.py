"""Nesting-safe peak windows.

Two ways to know the highest value a memory figure reached inside a window:

* :class:`CounterPeaks` — exact, over a hardware/OS peak counter that can only be *reset* globally
  (CUDA's ``reset_peak_memory_stats``, Linux's VmHWM via ``/proc/self/clear_refs``). Each open window
  keeps its own running peak; before any reset the counter's value is folded into every open window,
  so an inner window's reset never hides an outer window's peak. A reset is done only when needed
  (the counter is above the current value), so an un-nested window leaves a counter that has seen
  no higher value than now untouched. (:mod:`gnnmon.devices.scalar_peaks` is the same rule for one
  figure, on the step's path.)
* :class:`PolledPeaks` — sampled, for figures with no peak counter (MPS, RSS without procfs, child
  processes). A daemon thread reads the figure every ``interval`` seconds while any window is open
  and is stopped and joined when the last window closes — or, while :func:`hold_pollers` is in
  force (a ``collect`` run), when the hold ends, so rows do not start and join a thread each. A
  window its opener lost (an exception a signal handler raised inside ``open``) is dropped once
  nothing holds it, and the thread then ends at its next sample. Peaks between two samples are
  missed.

Closing a window twice (its first close was interrupted after the window ended) only reads the
figures again: a row's exit that runs again after an interruption never fails for it.

Both work on tuples of figures (e.g. allocated and reserved bytes) read together.
"""

from __future__ import annotations

import signal
import threading
import weakref
from collections.abc import Callable, Sequence

Figures = tuple[int, ...]


class PeakWindow:
    """One open window: the figures at its start and the highest seen so far (bytes)."""

    __slots__ = ("start", "peak", "__weakref__")

    def __init__(self, start: Figures) -> None:
        self.start = start
        self.peak = list(start)

    def fold(self, values: Sequence[int]) -> None:
        peak = self.peak
        i = 0
        for v in values:
            if v > peak[i]:
                peak[i] = v
            i += 1


class CounterPeaks:
    """Windows over a resettable peak counter.

    ``read()`` returns ``(current, peak)`` tuples of the same length; ``reset()`` sets every peak to
    its current value.
    """

    def __init__(
        self, read: Callable[[], tuple[Figures, Figures]], reset: Callable[[], None]
    ) -> None:
        self._read = read
        self._reset = reset
        self._lock = threading.RLock()
        # held weakly: a window whose opener was interrupted before it kept the window (an
        # exception a signal handler raised between two bytecodes) is gone once nothing holds it,
        # instead of staying open for the life of the process
        self._open: weakref.WeakSet[PeakWindow] = weakref.WeakSet()

    def open(self) -> PeakWindow:
        """Start a window at the current figures; resets the counter only if it is above them."""
        with self._lock:
            current, peak = self._read()
            for w in self._open:
                w.fold(peak)
            if peak != current:  # a peak is never below current: some figure is above it
                self._reset()
                # a reset sets the counter to current: the new window starts there (no second read)
            window = PeakWindow(tuple(current))
            self._open.add(window)
            return window

    def close(self, window: PeakWindow) -> tuple[Figures, Figures]:
        """End a window: returns ``(current, peak)`` figures at its end. Closing it again (its
        first close was interrupted after it ended) only reads the counter."""
        with self._lock:
            current, peak = self._read()
            opened = self._open
            if window in opened:
                for w in opened:
                    w.fold(peak)  # the counter's peak is at least current: folds both
                opened.discard(window)
            else:
                window.fold(current)
            return tuple(current), tuple(window.peak)

    @property
    def depth(self) -> int:
        return len(self._open)


_HOLD_LOCK = threading.RLock()
_holds = 0
_pollers: weakref.WeakSet[PolledPeaks] = weakref.WeakSet()


def hold_pollers() -> None:
    """Keep polling threads up between windows until the matching :func:`release_pollers`."""
    global _holds
    with _HOLD_LOCK:
        _holds += 1


def release_pollers() -> None:
    """End one hold; the last one stops (and joins) every polling thread with no open window."""
    global _holds
    with _HOLD_LOCK:
        _holds = max(0, _holds - 1)
        idle = list(_pollers) if _holds == 0 else []
    for poller in idle:
        poller.stop_if_idle()


def _start_whole(thread: threading.Thread) -> None:
    """``thread.start()`` with the signals held back from this thread (``pthread_sigmask``; a plain
    start where it does not exist), so that no Python signal handler runs, and raises, inside it:
    an exception raised inside ``Thread.start()`` leaves a thread that runs untracked, or one that
    never started (``join`` then fails). The mask before is read first, and put back however the
    block ends (a handler whose signal came before the block may still raise at its first call);
    the signals held back are delivered then, microseconds later. The thread keeps them blocked,
    so the process's signals go to the main thread, where Python runs its handlers anyway."""
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None:
        thread.start()
        return
    before = mask(signal.SIG_BLOCK, ())  # the mask now: blocking nothing
    try:
        mask(signal.SIG_BLOCK, signal.valid_signals())
        thread.start()
    finally:
        mask(signal.SIG_SETMASK, before)


def _join(thread: threading.Thread) -> None:
    """Wait for a polling thread to end; one that never started (a signal handler's exception cut
    its ``start()`` short) has nothing to wait for."""
    try:
        thread.join()
    except RuntimeError:  # "cannot join thread before it is started"
        pass


class PolledPeaks:
    """Windows over a figure that can only be sampled; one daemon thread while any window is open."""

    def __init__(self, read: Callable[[], Figures], interval: float, name: str = "gnnmon-peaks"):
        if not interval > 0:
            raise ValueError(f"sample interval must be > 0 seconds, got {interval!r}")
        self._read = read
        self.interval = float(interval)
        self._name = name
        self._lock = threading.RLock()
        # held weakly, as in CounterPeaks: a window whose opener was interrupted before it kept it
        # is gone once nothing holds it, and the thread stops at its next sample
        self._open: weakref.WeakSet[PeakWindow] = weakref.WeakSet()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.samples = 0
        _pollers.add(self)

    def _loop(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            try:
                values = self._read()
            except Exception:  # noqa: BLE001 - a failing read must not kill the window; the ends still count
                continue
            with self._lock:
                self.samples += 1
                for w in self._open:
                    w.fold(values)
                if self._thread is not threading.current_thread():
                    return  # orphaned: its opener was interrupted before it kept the thread
                if not self._open and not _holds:
                    self._thread = None  # every window was lost or closed, and no run holds the thread
                    return

    def open(self) -> PeakWindow:
        values = self._read()
        with self._lock:
            if self._thread is None:
                # started before the window exists (a signal held back during the start is handled
                # as it ends: its exception then loses no window), and kept once started: one that
                # an exception cut off runs untracked and ends at its next sample
                stop = threading.Event()
                thread = threading.Thread(target=self._loop, args=(stop,), name=self._name, daemon=True)
                _start_whole(thread)
                self._stop, self._thread = stop, thread
            window = PeakWindow(tuple(values))
            self._open.add(window)
            return window

    def close(self, window: PeakWindow) -> tuple[Figures, Figures]:
        """End a window: returns ``(current, peak)`` figures at its end. Closing it again (its
        first close was interrupted after it ended) only reads the figures."""
        values = self._read()
        thread = None
        with self._lock:
            self._open.discard(window)
            window.fold(values)
            if not self._open and self._thread is not None and not _holds:
                thread, self._thread = self._thread, None
                self._stop.set()
        if thread is not None and thread is not threading.current_thread():
            _join(thread)
        return tuple(values), tuple(window.peak)

    def stop_if_idle(self) -> None:
        """Stop and join the thread if no window is open."""
        thread = None
        with self._lock:
            if not self._open and self._thread is not None:
                thread, self._thread = self._thread, None
                self._stop.set()
        if thread is not None and thread is not threading.current_thread():
            _join(thread)

    @property
    def running(self) -> bool:
        return self._thread is not None
