"""A sampler's session with a run: started for the run's process and its GPUs (found once, with how
they were mapped), the run's rows joined to what it feeds, what the manifest says of it. The one
set-up both a whole run (``collect(sample=...)``) and a block (``sample_utilisation``) use.
:class:`Timeline` is what a run keeps of what its sessions feed: samples, counters' points, the
join, and its own session's life and cost."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any

from gnnmon.data.format import POINT, SAMPLE
from gnnmon.data.points import Counters
from gnnmon.devices.cuda import cuda_uuids
from gnnmon.timeline.energy_join import EnergyJoin
from gnnmon.timeline.energy_sources import EnergySources
from gnnmon.timeline.join import FillsRow, RowJoin, Samples, sample_time
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
        return RowJoin(samples, counters, energy, refresh=self.sampler.now)

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

    def stop(self) -> dict[str, Any]:
        """Stop the sampler (its last sample covers the rows closed before); returns its own cost
        (what it said at its end: samples taken, CPU seconds, ...), with ``errors`` where it failed
        mid-run."""
        sampler = self.sampler
        sampler.stop()
        stats = dict(sampler.bye)
        stats.pop("m", None)
        if sampler.errors:
            stats["errors"] = list(sampler.errors)
        return stats


class Timeline:
    """What a run keeps of the timeline: the samples (in time order: rows are joined to them by
    bisection) and the energy counters' points that its sessions send to :meth:`take`, each also
    handed to ``pass_on(kind, item)`` (the run's sinks); ``join``, what rows closed now get from
    them; and the run's own session (``collect(sample=...)``): :meth:`open`, :meth:`go`,
    :meth:`stop`, with ``stats``, its sampler's own cost, once stopped. A ``sample_utilisation``
    block starts a session of its own that feeds :meth:`take` too."""

    def __init__(self, pass_on: Callable[[str, dict[str, Any]], None]) -> None:
        self.samples: list[dict[str, Any]] = []
        self.counters = Counters()  # energy counters' points (their steps), for interpolation
        self.join: RowJoin | None = None
        self.session: Session | None = None
        self.stats: dict[str, Any] = {}  # the run's sampler's own cost, after stop (changed in place)
        self.energy: EnergySources | None = None  # the run's session's, with energy figures
        self._pass_on = pass_on
        self._energy_join: EnergyJoin | None = None

    def take(self, message: dict[str, Any]) -> None:
        """A session's sink (on its sampler's reader thread): a sample or a counter's point
        (``key``, ``t_ns``, ``value``, ``err_ns``, ``step``), kept and passed on."""
        if message.pop("type", None) == POINT:
            self.counters.add(message)
            self._pass_on(POINT, message)
        else:
            self.samples.append(message)
            self._pass_on(SAMPLE, message)

    def open(self, interval: float, mode: str, energy: dict[str, Any] | None) -> dict[str, Any]:
        """Start the run's session, not yet going (:meth:`go`), every ``interval`` seconds in
        ``mode``; ``energy``: the keywords of :class:`EnergySources` (None: no energy figures).
        Returns what the manifest's options say of it: ``sampler``, ``nvml`` and, with energy,
        ``energy``. On a failure (a bad energy option) the session is stopped again."""
        self.session = session = Session(interval, self.take, mode, energy=energy is not None)
        said: dict[str, Any] = {"sampler": session.describe(), "nvml": session.hello.get("nvml")}
        if energy is not None:
            try:
                self.energy = EnergySources(session.hello, **energy)
            except BaseException:
                self.stop()
                raise
            said["energy"] = described = self.energy.describe()
            self._energy_join = EnergyJoin(described, session.interval)
        return said

    def go(self) -> None:
        """The run's session starts sampling, and rows closed from now on are joined to it (the
        energy too, where :meth:`open` was asked for it); one sample and every counter's first
        point are taken now, so that the first rows have a point before them."""
        if self.session is not None:
            self.join = self.session.join(self.samples, self.counters, self._energy_join)
            self.session.go(first_sample=True)

    def stop(self) -> None:
        """Stop the run's session (its last sample and every counter's next step cover every row
        closed before) and keep its sampler's cost in ``stats``."""
        session, self.session = self.session, None
        if session is not None:
            stats = session.stop()
            self.stats.clear()
            self.stats.update(stats)

    def trim(self, keep: int, oldest_ns: int | None) -> None:
        """Keep about the newest ``keep`` samples, never one that a row opened at ``oldest_ns`` (the
        oldest waiting for its join) needs. Under the run's lock: a sampler's thread only appends."""
        samples = self.samples
        cut = len(samples) - keep
        if oldest_ns is not None:
            cut = min(cut, bisect.bisect_left(samples, oldest_ns, key=sample_time) - 1)
        if cut > 0:
            del samples[:cut]

    def forget(self) -> None:
        """In a forked child: the session is the parent's, and no row is joined to it any more."""
        self.session = self.join = None
