"""``with gnnmon.sample_utilisation(0.5):`` — the timeline's sampler feeding the active run for a
block (what ``collect(sample=0.5)`` does for a whole run)."""

from __future__ import annotations

from typing import Any

from gnnmon.devices.cuda import cuda_uuids
from gnnmon.errors import is_positive_number
from gnnmon.record.active import active_run
from gnnmon.timeline.join import RowJoin
from gnnmon.timeline.sampler import DEFAULT_INTERVAL, Sampler, start_sampler


class sample_utilisation:
    """``with gnnmon.sample_utilisation(0.5):`` — sample into the active run for a block (what
    ``collect(sample=0.5)`` does for a whole run). Rows closed inside get the sampled figures
    (``cpu_util_pct``, ``gpu_util_pct``, ...). The sampler (a process; ``sampler="thread"`` for a
    thread) is stopped on exit, also when the block raised. Inside a run that already samples,
    the run's sampler covers the block and no second one starts."""

    def __init__(self, interval: float = DEFAULT_INTERVAL, *, include_children: bool = True,
                 sampler: str = "process") -> None:
        if not is_positive_number(interval):
            raise ValueError(f"sample interval must be a finite number of seconds > 0, got {interval!r}")
        self.interval = float(interval)
        self.include_children = include_children
        self.mode = sampler
        self._sampler: Sampler | None = None

    def __enter__(self) -> sample_utilisation:
        self._run = run = active_run()
        self._previous = (run.sample_interval, run.join)
        if run.join is not None:
            return self
        settings = {"interval": self.interval, "uuids": cuda_uuids()[0], "energy": False,
                    "include_children": self.include_children}
        self._sampler = sampler = start_sampler(settings, run._take_timeline, self.mode)
        run.sample_interval = sampler.interval
        run.set_join(RowJoin(run.samples, run.counters, sampler.interval, refresh=sampler.now))
        sampler.go()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if self._sampler is not None:
                self._sampler.stop()  # its last sample covers the rows closed inside
        finally:
            self._run.sample_interval = self._previous[0]
            if self._run.join is not self._previous[1]:
                self._run.set_join(self._previous[1])  # rows closed inside are joined first
