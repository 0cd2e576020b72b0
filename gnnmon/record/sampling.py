"""``with gnnmon.sample_utilisation(0.5):`` — the timeline's sampler feeding the active run for a
block (what ``collect(sample=0.5)`` does for a whole run)."""

from __future__ import annotations

from typing import Any

from gnnmon.devices.nvml import Nvml
from gnnmon.record.run import active_run
from gnnmon.timeline.join import RowJoin
from gnnmon.timeline.sampler import DEFAULT_INTERVAL, UtilisationSampler


class sample_utilisation:
    """``with gnnmon.sample_utilisation(0.5):`` — sample into the active run for a block (what
    ``collect(sample=0.5)`` does for a whole run). Rows closed inside get ``cpu_util_pct`` /
    ``gpu_util_pct``. The thread is joined on exit, also when the block raised. Inside a run that
    already samples, the run's sampler covers the block and no second one starts."""

    def __init__(self, interval: float = DEFAULT_INTERVAL, *, include_children: bool = True) -> None:
        self.interval = interval
        self.include_children = include_children
        self._sampler: UtilisationSampler | None = None
        self._nvml: Nvml | None = None

    def __enter__(self) -> sample_utilisation:
        self._run = run = active_run()
        self._previous = (run.sample_interval, run.join)
        if run.join is not None:
            return self
        self._nvml = Nvml()
        self._nvml.open()
        self._sampler = UtilisationSampler(run.add_sample, self.interval, nvml=self._nvml,
                                           include_children=self.include_children)
        run.sample_interval = self._sampler.interval
        run.join = RowJoin(run.samples, self._sampler.interval, refresh=self._sampler.sample_now)
        self._sampler.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if self._sampler is not None:
                self._sampler.stop()  # its last sample covers the rows closed inside
        finally:
            self._run.sample_interval, self._run.join = self._previous
            if self._nvml is not None:
                self._nvml.close()
