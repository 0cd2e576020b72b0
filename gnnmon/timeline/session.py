"""A sampler's session with a run: started for the run's process and its GPUs (found once, with how
they were mapped), the run's rows joined to what it feeds, what the manifest says of it. The one
set-up both a whole run (``collect(sample=...)``) and a block (``sample_utilisation``) use."""

from __future__ import annotations

from typing import Any

from gnnmon.data.points import Counters
from gnnmon.devices.cuda import cuda_uuids
from gnnmon.timeline.join import FillsRow, RowJoin, Samples
from gnnmon.timeline.sampler import Sampler, Sink, start_sampler


class Session:
    """A started sampler (not yet going: :meth:`go` once the run can take its samples) for
    ``interval`` seconds, feeding ``sink``; ``energy``: read the energy counters too;
    ``include_children``: the process's children count in its CPU figures."""

    def __init__(self, interval: float, sink: Sink, mode: str = "process", *, energy: bool = False,
                 include_children: bool = True) -> None:
        uuids, self.gpus_mapped_by = cuda_uuids()
        settings = {"interval": interval, "uuids": uuids, "energy": energy, "include_children": include_children}
        self.sampler: Sampler = start_sampler(settings, sink, mode)

    @property
    def interval(self) -> float:
        """The sampler's interval in seconds (as it runs: a sampler may round it)."""
        return self.sampler.interval

    @property
    def hello(self) -> dict[str, Any]:
        """What the sampler said as it started (its pid, NVML, the counters it found)."""
        return self.sampler.hello

    def join(self, samples: Samples, counters: Counters, energy: FillsRow | None = None) -> RowJoin:
        """What the run joins to its rows from ``samples`` and ``counters`` (the energy too when
        ``energy`` is given); a flush asks the sampler for a sample now."""
        return RowJoin(samples, counters, self.sampler.interval, energy, refresh=self.sampler.now)

    def describe(self) -> dict[str, Any]:
        """The manifest's ``sampler`` entry: mode, why that mode, pid, start-up seconds, how GPUs were
        mapped to the sampler's NVML."""
        hello = self.sampler.hello
        return {"mode": self.sampler.mode, "why": self.sampler.why, "pid": hello.get("pid"),
                "startup_s": hello.get("startup_s"), "gpus_mapped_by": self.gpus_mapped_by}

    def go(self, first_sample: bool = False) -> None:
        """Start sampling (``first_sample``: one sample and every counter's first point now, so
        the first rows have a point before them)."""
        self.sampler.go()
        if first_sample:
            self.sampler.now()

    def stop(self) -> None:
        """Stop the sampler (its last sample covers the rows closed before)."""
        self.sampler.stop()
