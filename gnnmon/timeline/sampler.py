"""Utilisation sampled on a daemon thread, every ``interval`` seconds (default 0.5 s).

Deadline scheduling: sample k is due at ``start + k·interval``, so the cadence does not drift with
the time a sample takes; a sample that comes late says by how much (``late_s``: a GC pause stalls
this thread too) and deadlines already missed are skipped, not bunched. Each sample is a flat,
timestamped dict: ``t_ns`` (epoch ns, the clock of rows' ``t_start_ns``/``t_end_ns``),
``late_s``, ``interval_s``, ``cpu_time_s`` (this process's CPU-seconds so far, cumulative),
``cpu_util_pct`` (this process and its children, percent of one core, psutil), ``rss_bytes``,
``children_rss_bytes``, ``ram_used_bytes`` (whole system), per NVIDIA GPU ``gpu<i>_util_pct``,
``_mem_util_pct``, ``_mem_used_bytes``, ``_power_w``, ``_sm_clock_mhz``, ``_temp_c``, and whatever
cumulative counters ``counters`` reads (energy: ``gpu<i>_energy_mj``, ``rapl_<kind>_j``).

One sample is taken when the sampler starts and one when it stops (after the thread is joined),
so every row made in between has a reading on each side. The thread is stopped and joined on
exit, also when the body raised.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from gnnmon.devices.nvml import Nvml

DEFAULT_INTERVAL = 0.5


class _Procs:
    """psutil CPU percentages of this process and its children (Process objects kept per pid:
    ``cpu_percent`` measures since the previous call on the same object)."""

    def __init__(self, include_children: bool) -> None:
        import psutil

        self.psutil = psutil
        self.me = psutil.Process()
        self.me.cpu_percent(None)  # prime: the first call has no baseline
        self.children: dict[int, Any] = {}
        self.include_children = include_children

    def sample(self) -> dict[str, Any]:
        psutil = self.psutil
        cpu = self.me.cpu_percent(None)
        rss = self.me.memory_info().rss
        kids_rss = 0
        if self.include_children:
            alive: dict[int, Any] = {}
            for child in self.me.children(recursive=True):
                proc = self.children.get(child.pid, child)
                try:
                    pct = proc.cpu_percent(None)
                    kids_rss += proc.memory_info().rss
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                if child.pid in self.children:
                    cpu += pct  # a new child's first reading has no baseline yet
                alive[child.pid] = proc
            self.children = alive
        return {
            "cpu_util_pct": cpu,
            "rss_bytes": rss,
            "children_rss_bytes": kids_rss,
            "ram_used_bytes": psutil.virtual_memory().used,
        }


class UtilisationSampler:
    """``with UtilisationSampler(sink, interval=0.5, nvml=None):`` — ``sink(sample)`` per sample."""

    def __init__(
        self,
        sink: Callable[[dict[str, Any]], None],
        interval: float = DEFAULT_INTERVAL,
        *,
        nvml: Nvml | None = None,
        include_children: bool = True,
        counters: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0:
            raise ValueError(f"sample interval must be a number of seconds > 0, got {interval!r}")
        self.sink = sink
        self.interval = float(interval)
        self.nvml = nvml if nvml is not None and nvml.ok else None
        self.include_children = include_children
        self.counters = counters
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.samples_taken = 0
        self.skipped = 0
        self.errors: list[str] = []

    def start(self) -> UtilisationSampler:
        if self._thread is not None:
            raise RuntimeError("this sampler is already running")
        self._procs = _Procs(self.include_children)
        self._stop.clear()
        self.sample_now()  # the first reading, before any row of the run closes
        self._thread = threading.Thread(target=self._loop, name="gnnmon-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop and join the thread, then take the last sample."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join()
            self.sample_now()

    def sample_now(self, due_ns: int | None = None) -> None:
        """Take a sample now, from the calling thread (the loop, a flush, the start, the stop);
        ``due_ns``: when it was due (perf_counter ns; now if None). One lock around reading and
        handing over: samples reach the sink in time order."""
        with self._lock:
            try:
                self.sink(self.take(time.perf_counter_ns() if due_ns is None else due_ns))
                self.samples_taken += 1
            except Exception as exc:  # noqa: BLE001 - keep going; say what failed
                if len(self.errors) < 10:
                    self.errors.append(f"{type(exc).__name__}: {exc}")

    def __enter__(self) -> UtilisationSampler:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def take(self, due_ns: int) -> dict[str, Any]:
        """One sample now (``due_ns``: when it was due, perf_counter ns)."""
        late = (time.perf_counter_ns() - due_ns) / 1e9
        sample: dict[str, Any] = {"t_ns": time.time_ns(), "late_s": max(0.0, late),
                                  "interval_s": self.interval, "cpu_time_s": time.process_time()}
        if self.counters is not None:  # cumulative counters first, nearest to t_ns
            sample.update(self.counters())
        sample.update(self._procs.sample())
        if self.nvml is not None:
            sample.update(self.nvml.sample())
        return sample

    def _loop(self) -> None:
        step = int(self.interval * 1e9)
        due = time.perf_counter_ns() + step
        while not self._stop.wait(max(0, due - time.perf_counter_ns()) / 1e9):
            self.sample_now(due)
            due += step
            now = time.perf_counter_ns()
            if now > due:  # deadlines missed (a long pause): skip them, keep the grid
                missed = (now - due) // step + 1
                self.skipped += missed
                due += missed * step
