"""The machine's load beside the run, as the sampler reads it: what the cores the training process
may run on (its CPU affinity) did between two samples.

* ``idle_cpu_pct``: their idle time (idle and I/O wait), % of one core (100: a core's worth stood
  idle throughout the window);
* ``others_cpu_pct``: the CPU time other processes (and the hypervisor's other guests: ``steal``)
  took on them, % of one core: their busy time less the training process's, its children's (the
  DataLoader workers) and the sampler's own.

A step slowed while ``idle_cpu_pct`` was near 0 and ``others_cpu_pct`` well above its usual level
was slowed by a busy machine, not by the job (the report's ``busy machine``). Read from the
kernel's per-CPU counters (``psutil.cpu_times(percpu=True)``: one read of ``/proc/stat``, about
0.1 ms on 2 cores) in the sampler, never on the step's path. Where the affinity cannot be read
(macOS) every core counts.
"""

from __future__ import annotations

from typing import Any

MIN_WINDOW_S = 0.015
"""The shortest window measured, as for the process's utilisation (the kernel counts CPU time in
10 ms ticks)."""


class CoresLoad:
    """Idle and others' CPU on the training process's cores, each over the window since the last
    measured reading (never shorter than :data:`MIN_WINDOW_S`)."""

    def __init__(self, psutil: Any, process: Any) -> None:
        self.psutil = psutil
        self.process = process
        self.base: tuple[float, float, float, float] | None = None  # busy s, idle s, sampler s, monotonic s

    def _cores(self) -> list[int] | None:
        try:
            return list(self.process.cpu_affinity())
        except (AttributeError, NotImplementedError, OSError, self.psutil.Error):
            return None

    def read(self, own_pct: float | None, sampler_cpu_s: float, now: float) -> dict[str, Any]:
        """``idle_cpu_pct``, ``others_cpu_pct`` and ``cores`` (None for the first window, or one
        shorter than the minimum). ``own_pct``: the CPU the training process and its children used
        over the same window, % of one core (None: unknown, and so are the others');
        ``sampler_cpu_s``: the sampler process's CPU seconds so far (0 for a sampler thread, whose
        time is the training process's)."""
        per_cpu = self.psutil.cpu_times(percpu=True)
        cores = self._cores()
        picked = [per_cpu[i] for i in cores if i < len(per_cpu)] if cores else per_cpu
        idle = sum(t.idle + getattr(t, "iowait", 0.0) for t in picked)
        total = sum(sum(getattr(t, f) for f in t._fields if f not in ("guest", "guest_nice")) for t in picked)
        out: dict[str, Any] = {"cores": len(picked), "idle_cpu_pct": None, "others_cpu_pct": None}
        base = self.base
        if base is not None and now - base[3] < MIN_WINDOW_S:
            return out  # keep the baseline: the next sample measures the longer window
        self.base = (total - idle, idle, sampler_cpu_s, now)
        if base is None:
            return out
        window = now - base[3]
        out["idle_cpu_pct"] = 100.0 * max(idle - base[1], 0.0) / window
        if own_pct is not None:
            busy = max(total - idle - base[0], 0.0) - max(sampler_cpu_s - base[2], 0.0)
            out["others_cpu_pct"] = max(100.0 * busy / window - own_pct, 0.0)
        return out
