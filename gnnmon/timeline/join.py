"""Joining the timeline to rows by time (``t_ns`` of samples and points, ``t_start_ns``/``t_end_ns``
of rows: all ``time.time_ns()``). One join for every sampled figure, in the run, off the step's path:

* gauges (utilisation, GPU power, host memory; :data:`GAUGES`): a row gets the mean of the samples
  taken inside its window (``util_samples`` of them); a row with none inside (shorter than the
  interval) gets the value interpolated at its middle from the samples on each side, or, for a
  figure that is a mean over the window ending at each sample (:data:`WINDOWED`), the next
  sample's, whose window holds the row (the sample before it measured time before the row: a
  first sample taken before the loop began never blends into its first rows); a row with
  no sample on one side that has the figure (or, for a GPU's figures, no GPU) lacks it: the field
  is absent. How each is measured is the same for every row of a run, so it is said once, in the
  manifest's ``sampled`` entry (:func:`gauge_statement`), never on the rows;
* cumulative counters (energy: :class:`~gnnmon.data.points.Counters`): interpolated linearly
  between the points around the row's start and end, so rows and the gaps between them add up to
  the counter's own delta.

:class:`RowJoin` does both for a run; it joins a row once the timeline covers it (a sample and a
point of every counter at or after the row's end, :meth:`RowJoin.covers`).
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeGuard

from gnnmon.data.points import Counters
from gnnmon.devices.registry import gauge_index

Samples = Sequence[Mapping[str, Any]]

GAUGES = (
    # row field, sample key ({i}: the row's CUDA index), what measured it (a row's field has no _source:
    # gauge_statement says how, once for the run)
    ("cpu_util_pct", "cpu_util_pct", "psutil"),
    ("gpu_util_pct", "gpu{i}_util_pct", "nvml"),
    ("gpu_power_w", "gpu{i}_power_w", "nvml"),
    ("workers_rss_bytes", "children_rss_bytes", "psutil"),
    ("ram_used_bytes", "ram_used_bytes", "psutil"),
    ("others_cpu_pct", "others_cpu_pct", "psutil"),
    ("idle_cpu_pct", "idle_cpu_pct", "psutil"),
)
"""Sampled figures a row gets (how each is measured said once, :func:`gauge_statement`): the training process's and its
workers' CPU % (100 = one core), the row's GPU's utilisation (% of time a kernel ran) and power
(W), the DataLoader workers' RSS (bytes), the machine's used RAM (bytes), and on the cores the
process may run on, the CPU other processes took and the idle time left (% of one core:
:mod:`gnnmon.timeline.machine_load`)."""

WINDOWED = frozenset({"cpu_util_pct", "gpu_util_pct", "others_cpu_pct", "idle_cpu_pct"})
"""The :data:`GAUGES` whose sample is a mean over the time since the sampler's previous one (psutil's
CPU % since its last call, NVML's utilisation over its sample period, the machine's CPU ticks
between two reads), not a reading at the sample's moment."""


sample_time: Callable[[Mapping[str, Any]], int] = operator.itemgetter("t_ns")
"""A sample's time (a C getter: no Python frame per bisection step)."""


def _number(v: Any) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def samples_in(samples: Samples, a_ns: int, b_ns: int) -> Samples:
    """The samples with ``a_ns <= t_ns <= b_ns`` (samples are in time order)."""
    lo = bisect.bisect_left(samples, a_ns, key=sample_time)
    hi = bisect.bisect_right(samples, b_ns, key=sample_time)
    return samples[lo:hi]


def gauge_at(samples: Samples, key: str, t_ns: int, i: int | None = None, window: bool = False) -> float | None:
    """``key`` at ``t_ns``, interpolated linearly between the nearest samples on each side that
    have it (None if one side has none). ``window``: the figure is a mean over the window that ends
    at each sample (utilisation), so before the first sample that has it, that sample's value
    holds (its window holds ``t_ns``). ``i``: where ``t_ns`` falls in ``samples``, if known."""
    if i is None:
        i = bisect.bisect_left(samples, t_ns, key=sample_time)
    after = i
    while after < len(samples) and not _number(samples[after].get(key)):
        after += 1
    before = i - 1
    while before >= 0 and not _number(samples[before].get(key)):
        before -= 1
    if after == len(samples):
        return None
    if before < 0:
        return float(samples[after][key]) if window else None
    s0, s1 = samples[before], samples[after]
    t0, t1 = sample_time(s0), sample_time(s1)
    v0, v1 = float(s0[key]), float(s1[key])
    return v0 + (v1 - v0) * (t_ns - t0) / (t1 - t0) if t1 > t0 else v1


_KEYS: dict[int | None, list[tuple[str, str | None, str]]] = {}


def _gauge_keys(index: int | None) -> list[tuple[str, str | None, str]]:
    """(row field, sample key or None where the row has no GPU, what measured it) per gauge."""
    keys = _KEYS.get(index)
    if keys is None:
        keys = _KEYS[index] = [
            (name, (key.format(i=index) if index is not None else None) if "{i}" in key else key, how)
            for name, key, how in GAUGES]
    return keys


def _kept(name: str, value: float) -> float | int:
    """A gauge's value to the resolution its samples have: bytes whole, percent and watts to two
    decimals (a mean or an interpolation of samples carries no more)."""
    return round(value) if name.endswith("_bytes") else round(value, 2)


def gauge_statement(interval: float) -> dict[str, Any]:
    """How every :data:`GAUGES` figure of a row is had, the same for every row of a run: said once,
    in the manifest's ``sampled`` entry (a row carries its figures alone). ``sources``: each
    figure's ``measured:<how>@<interval>``; ``keys``: the sample key it is read from (``{i}``: the
    row's CUDA index; those figures are a CUDA row's only); ``rule``: how a row's value is made
    from the samples, and when a row lacks it."""
    every = f"@{interval * 1000:g}ms"
    return {
        "interval_s": interval,
        "rule": ("a row's figure is the mean of the samples inside its window (util_samples of them); where "
                 "util_samples is 0, the value interpolated at its middle from the samples on each side, or for "
                 f"a mean over the time since the previous sample ({', '.join(sorted(WINDOWED))}) the next "
                 "sample's; absent where no sample on one side of the row has it"),
        "sources": {name: f"measured:{how}{every}" for name, _, how in GAUGES},
        "keys": {name: key for name, key, _ in GAUGES},
        "cuda_only": [name for name, key, _ in GAUGES if "{i}" in key],
    }


def join_gauges(fields: dict[str, Any], samples: Samples) -> None:
    """Add every :data:`GAUGES` figure the samples give the row, and ``util_samples`` (samples in
    its window); a figure the samples cannot give is left out (see :func:`gauge_statement`)."""
    a, b = fields["t_start_ns"], fields["t_end_ns"]
    lo = bisect.bisect_left(samples, a, key=sample_time)
    hi = bisect.bisect_right(samples, b, key=sample_time)
    fields["util_samples"] = hi - lo
    window = samples[lo:hi]
    mid = (a + b) // 2  # with no sample in [a, b], it falls where a does: at lo
    for name, key, _ in _gauge_keys(gauge_index(fields.get("device"))):
        if key is None:  # a GPU's figure on a row with no GPU
            continue
        if window:
            values = [s[key] for s in window if _number(s.get(key))]
            if values:
                fields[name] = _kept(name, sum(values) / len(values))
                continue
        value = _next(samples, key, hi) if name in WINDOWED else gauge_at(samples, key, mid, lo, window=True)
        if value is not None:
            fields[name] = _kept(name, value)


def _next(samples: Samples, key: str, i: int) -> float | None:
    """``key`` of the first sample from index ``i`` on that has it (None: none does)."""
    while i < len(samples):  # by index: a slice would copy the rest of a long run's samples
        value = samples[i].get(key)
        if _number(value):
            return float(value)
        i += 1
    return None


class FillsRow(Protocol):
    """Adds figures to a row from the timeline (:class:`gnnmon.timeline.energy_join.EnergyJoin`)."""

    def fill(self, fields: dict[str, Any], samples: Samples, counters: Counters) -> None: ...


class RowJoin:
    """What a run joins to its rows while a sampler feeds ``samples`` and ``counters``: the gauges,
    and energy when ``energy`` is given. ``refresh`` asks the sampler for a sample and every
    counter's next point now (what a flush does, so that rows just closed are covered)."""

    def __init__(self, samples: Samples, counters: Counters, energy: FillsRow | None = None,
                 refresh: Callable[[], Any] | None = None) -> None:
        self.samples = samples
        self.counters = counters
        self.energy = energy
        self._refresh = refresh

    def refresh(self) -> None:
        if self._refresh is not None:
            self._refresh()

    def covers(self, fields: Mapping[str, Any]) -> bool:
        """True once nothing the row needs is still to come."""
        samples = self.samples
        end = fields["t_end_ns"]
        return bool(samples) and sample_time(samples[-1]) >= end and self.counters.covers(end)

    def join(self, fields: dict[str, Any]) -> None:
        join_gauges(fields, self.samples)
        if self.energy is not None:
            self.energy.fill(fields, self.samples, self.counters)
