"""The writer thread: the one thread that resolves, joins, encodes and hands a run's rows to its
sinks, every ``interval`` seconds, when woken, and when asked to flush.

The drains keep to a schedule: the k-th falls ``k * interval`` after the writer's start time (the
run's start, given to :meth:`Writer.start`), whatever the drains before it took and however long
the run took to start, so a row reaches the sinks at most one interval (and its own drain) after
it closed, the first rows included.

A closed row is only appended to the run's inbox (what the step pays); everything else happens
here. :meth:`Writer.flush` and :meth:`Writer.stop` run their drain on this thread too and wait
for it, so every sink is only ever called from here, in order.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable


class Writer:
    """Calls ``drain(force)`` on a daemon thread every ``interval`` seconds (``force`` False), on
    :meth:`flush` (True, the caller waits) and once more at :meth:`stop` (then ``last()``)."""

    def __init__(self, drain: Callable[[bool], None], interval: float, name: str = "gnnmon-writer",
                 errors: list[str] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._drain = drain
        self.interval = interval
        self._clock = clock
        self.next_drain = 0.0  # when the next scheduled drain is due (``clock`` seconds)
        self._name = name
        self._cond = threading.Condition(threading.Lock())
        self._asked = 0  # flushes asked for (a count: each caller waits for its own)
        self._done = 0  # flushes done
        self._woken = False
        self._force = False  # a flush asked for every row
        self._then: list[Callable[[], None]] = []  # what flushes asked to run after their drain
        self._last: Callable[[], None] | None = None
        self._thread: threading.Thread | None = None
        self.errors: list[str] = errors if errors is not None else []  # the run's, where it gives one

    def start(self, at: float | None = None) -> Writer:
        """Start the thread; the first drain is due ``interval`` after ``at`` (``clock`` seconds: the
        run's start), else after now."""
        self.next_drain = (self._clock() if at is None else at) + self.interval
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def on_writer_thread(self) -> bool:
        return self._thread is threading.current_thread()

    def wake(self) -> None:
        """Drain soon (without force), without waiting."""
        with self._cond:
            self._woken = True
            self._cond.notify()

    def flush(self, force: bool = True, then: Callable[[], None] | None = None) -> None:
        """Drain on the writer thread (``force``: every row, waiting for the device where needed;
        else the rows that are ready), then call ``then`` there; wait until both are done."""
        if self.on_writer_thread() or not self.running:
            self._call(force)
            if then is not None:
                then()
            return
        with self._cond:
            self._asked += 1
            mine = self._asked
            self._force = self._force or force
            if then is not None:
                self._then.append(then)
            self._cond.notify()
            while self._done < mine and self.running:
                self._cond.wait(0.1)

    def stop(self, last: Callable[[], None] | None = None) -> None:
        """A last forced drain, then ``last()``, on the writer thread; returns once it has ended."""
        thread = self._thread
        if thread is None:
            return
        if thread is threading.current_thread() or not thread.is_alive():
            self._thread = None
            self._call(True)
            if last is not None:
                last()
            return
        with self._cond:
            self._last = last or (lambda: None)
            self._cond.notify()
        thread.join()
        self._thread = None

    def _loop(self) -> None:
        cond = self._cond
        while True:
            with cond:
                if self._last is None and self._asked == self._done and not self._woken:
                    wait = self.next_drain - self._clock()
                    if wait > 0:
                        cond.wait(wait)
                asked, last, force, then = self._asked, self._last, self._force, self._then
                self._woken, self._force, self._then = False, False, []
            now = self._clock()
            if now >= self.next_drain:  # the scheduled drain: the next is one interval on (after now)
                self.next_drain += self.interval * (1 + int((now - self.next_drain) // self.interval))
            self._call(force or last is not None)
            for action in then:
                try:
                    action()
                except Exception as exc:  # noqa: BLE001 - the flush still ends; say what failed
                    self._failed(exc)
            with cond:
                self._done = asked
                cond.notify_all()
            if last is not None:
                try:
                    last()
                except Exception as exc:  # noqa: BLE001 - the thread ends either way; say what failed
                    self._failed(exc)
                return

    def _call(self, force: bool) -> None:
        try:
            self._drain(force)
        except Exception as exc:  # noqa: BLE001 - keep the rows in memory; say what failed, once
            self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        text = f"{type(exc).__name__}: {exc}"
        if text not in self.errors:
            self.errors.append(text)
            warnings.warn(f"gnnmon could not write rows: {text}; they stay in memory (run.records)",
                          RuntimeWarning, 2)
