"""``gnnmon run``'s live line: one line on stderr, redrawn once a second from rows already written
(a sink of the run: read on its writer thread, never on the step's path), only on a terminal
(or when asked), silent while a tqdm bar is live; the script's own writes to stdout and stderr
erase it first and are left whole."""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import threading
from collections import deque
from typing import Any, TextIO

INTERVAL = 1.0
"""Seconds between two draws."""

STEP_LABELS = ("step",)
RECENT = 256
"""Steps whose times make the median shown."""


def wanted(forced: bool | None, stream: TextIO) -> bool:
    """Whether to draw: as forced (``--status`` / ``--no-status``), else on a terminal that is not
    ``dumb``, outside CI, on rank 0 only."""
    if forced is not None:
        return forced
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    rank = os.environ.get("RANK") or os.environ.get("LOCAL_RANK") or "0"
    return tty and os.environ.get("TERM", "") != "dumb" and not os.environ.get("CI") and rank == "0"


class Tally:
    """What the line shows, kept from the rows as they are written (a run's sink)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.times: deque[float] = deque(maxlen=RECENT)
        self.wait_s = self.busy_s = 0.0
        self.peak: float | None = None
        self.gc_s = 0.0

    def open(self, manifest: dict[str, Any]) -> None:
        """Nothing to open."""

    def write(self, batch: Any) -> None:
        """Take a batch of finished rows (:class:`gnnmon.record.sinks.Batch`), on the run's writer thread."""
        with self.lock:
            for row in batch.rows:
                if row.get("parent") is not None:
                    continue
                label = str(row.get("label"))
                self.counts[label] = self.counts.get(label, 0) + 1
                wall = row.get("wall_s")
                if isinstance(wall, (int, float)):
                    self.busy_s += wall - (row.get("data_wait_in_row_s") or 0.0)  # a wait counted once, as data
                    if label in STEP_LABELS:
                        self.times.append(float(wall))
                wait = row.get("data_wait_s")
                if isinstance(wait, (int, float)):
                    self.wait_s += wait
                peak = row.get("mem_peak_bytes")
                if isinstance(peak, (int, float)) and (self.peak is None or peak > self.peak):
                    self.peak = float(peak)
                gc_s = row.get("gc_pause_s")
                if isinstance(gc_s, (int, float)):
                    self.gc_s += gc_s

    def close(self, end: dict[str, Any]) -> None:
        """Nothing to close."""

    def line(self, path: str) -> str:
        """``gnnmon ▸ step 1,234 · 41.0 ms a step (p50) · data 12 % · peak 3.1 GiB · GC 0.2 s → run.jsonl``."""
        with self.lock:
            counts, times = dict(self.counts), list(self.times)
            wait, busy, peak, gc_s = self.wait_s, self.busy_s, self.peak, self.gc_s
        if not counts:
            return f"gnnmon ▸ no step yet → {path}"
        parts = [", ".join(f"{label} {n:,}" for label, n in counts.items())]
        if times:
            parts.append(f"{1e3 * statistics.median(times):.1f} ms a step (p50)")
        if wait + busy > 0 and wait:
            parts.append(f"data {100 * wait / (wait + busy):.0f} %")
        if peak is not None:
            parts.append(f"peak {_bytes(peak)}")
        if gc_s:
            parts.append(f"GC {gc_s:.2f} s")
        return "gnnmon ▸ " + " · ".join(parts) + f" → {path}"


def _bytes(value: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{value:.0f} B"
        value /= 1024
    return f"{value:.1f} GiB"


def _bar_live() -> bool:
    """Whether a tqdm bar is being drawn (two painters on one line garble each other)."""
    tqdm = sys.modules.get("tqdm.std")
    instances = getattr(getattr(tqdm, "tqdm", None), "_instances", None)
    try:
        return bool(instances) and any(not getattr(bar, "disable", False) for bar in list(instances or ()))
    except Exception:  # noqa: BLE001 - a bar's state read mid-change: give the line up this once
        return True


class Live:
    """The line's painter: a daemon thread that draws :class:`Tally`'s line every
    :data:`INTERVAL` seconds on ``stream``, and proxies over ``sys.stdout`` / ``sys.stderr`` that
    erase it before the script writes (:meth:`start`, :meth:`stop`)."""

    def __init__(self, tally: Tally, path: str, stream: TextIO) -> None:
        self.tally, self.path, self.stream = tally, path, stream
        self.lock = threading.RLock()
        self.shown = False
        self.at_line_start = True  # the script's last write ended its line: the line may be drawn
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gnnmon-live", daemon=True)
        self._saved: tuple[Any, Any] | None = None
        self.pid = os.getpid()

    def start(self) -> Live:
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = _Erasing(sys.stdout, self), _Erasing(sys.stderr, self)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._saved is not None:
            sys.stdout, sys.stderr = self._saved
            self._saved = None
        self.erase()

    def _loop(self) -> None:
        while not self._stop.wait(INTERVAL):
            self.draw()

    def draw(self) -> None:
        with self.lock:
            if not self.at_line_start or _bar_live():
                self.erase()
                return
            width = max(20, shutil.get_terminal_size((100, 24)).columns - 1)
            text = self.tally.line(self.path)[:width]
            try:
                self.stream.write("\r" + text + "\033[K")
                self.stream.flush()
                self.shown = True
            except (OSError, ValueError):
                self._stop.set()

    def erase(self) -> None:
        with self.lock:
            if self.shown and os.getpid() == self.pid:
                self.shown = False
                try:
                    self.stream.write("\r\033[K")
                    self.stream.flush()
                except (OSError, ValueError):
                    pass


class _Erasing:
    """A stream that erases the live line before each write and passes everything else through."""

    def __init__(self, stream: Any, live: Live) -> None:
        self._stream = stream
        self._live = live

    def write(self, text: str) -> int:
        live = self._live
        if text:
            with live.lock:
                live.erase()
                written = self._stream.write(text)
                live.at_line_start = text.endswith("\n")
            return int(written or 0)
        return int(self._stream.write(text) or 0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
