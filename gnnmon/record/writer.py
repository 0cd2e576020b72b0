"""The background writer: a daemon thread that drains a run every ``interval`` seconds.

Encoding rows to JSON and writing them are taken off the step's path: a closed row is only
appended to the run's inbox, and this thread resolves, joins, encodes and writes the rows that
are ready, in batches (one ``write`` per batch). What a kill can lose is bounded: rows closed in
the last ``interval`` seconds, plus rows still waiting for their device events or for the
timeline to cover them (``docs/performance.md`` has the measured figures).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable

DEFAULT_INTERVAL = 0.05
"""Seconds between two drains of a run with a file."""


class Flusher:
    """Calls ``drain()`` every ``interval`` seconds on a daemon thread until :meth:`stop`."""

    def __init__(self, drain: Callable[[], None], interval: float = DEFAULT_INTERVAL,
                 name: str = "gnnmon-writer") -> None:
        self._drain = drain
        self.interval = interval
        self._name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[str] = []

    def start(self) -> Flusher:
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and wait for it (its last drain finishes first)."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            if thread is not threading.current_thread():
                thread.join()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._drain()
            except Exception as exc:  # noqa: BLE001 - keep the rows in memory; say what failed, once
                text = f"{type(exc).__name__}: {exc}"
                if text not in self.errors:
                    self.errors.append(text)
                    warnings.warn(f"gnnmon could not write rows: {text}; they stay in memory "
                                  "(run.records)", RuntimeWarning, 2)
