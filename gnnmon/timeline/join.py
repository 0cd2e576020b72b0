"""Joining the timeline to rows by time (``t_ns`` of samples and points, ``t_start_ns``/``t_end_ns``
of rows: all ``time.time_ns()``). One join for every sampled figure, in the run, off the step's path:

* gauges (utilisation, GPU power, host memory; :data:`GAUGES`): a row gets the mean of the samples
  taken inside its window; a row with none inside (shorter than the interval) gets the value
  interpolated at its middle from the samples on each side, and its source says
  ``(interpolated)``;
* cumulative counters (energy: :class:`Counters`): interpolated linearly between the points around
  the row's start and end, so rows and the gaps between them add up to the counter's own delta.

:class:`RowJoin` does both for a run; it joins a row once the timeline covers it (a sample and a
point of every counter at or after the row's end, :meth:`RowJoin.covers`).
"""

from __future__ import annotations

import bisect
import operator
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeGuard

from gnnmon.devices.registry import gauge_index
from gnnmon.fields import add_note

Samples = Sequence[Mapping[str, Any]]

GAUGES = (
    # row field, sample key ({i}: the row's CUDA index), what measured it
    ("cpu_util_pct", "cpu_util_pct", "psutil"),
    ("gpu_util_pct", "gpu{i}_util_pct", "nvml"),
    ("gpu_power_w", "gpu{i}_power_w", "nvml"),
    ("workers_rss_bytes", "children_rss_bytes", "psutil"),
    ("ram_used_bytes", "ram_used_bytes", "psutil"),
)
"""Sampled figures a row gets, each with ``<field>_source``: the training process's and its
workers' CPU % (100 = one core), the row's GPU's utilisation (% of time a kernel ran) and power
(W), the DataLoader workers' RSS (bytes) and the machine's used RAM (bytes)."""


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


note = add_note


_KEYS: dict[int | None, list[tuple[str, str | None, str]]] = {}


def _gauge_keys(index: int | None) -> list[tuple[str, str | None, str]]:
    """(row field, sample key or None where the row has no GPU, what measured it) per gauge."""
    keys = _KEYS.get(index)
    if keys is None:
        keys = _KEYS[index] = [
            (name, (key.format(i=index) if index is not None else None) if "{i}" in key else key, how)
            for name, key, how in GAUGES]
    return keys


def join_gauges(fields: dict[str, Any], samples: Samples, interval: float) -> None:
    """Add every :data:`GAUGES` figure, its source and ``util_samples`` (samples in the window)."""
    a, b = fields["t_start_ns"], fields["t_end_ns"]
    lo = bisect.bisect_left(samples, a, key=sample_time)
    hi = bisect.bisect_right(samples, b, key=sample_time)
    fields["util_samples"] = hi - lo
    every = f"@{interval * 1000:g}ms"
    index = gauge_index(fields.get("device"))
    window = samples[lo:hi]
    mid = (a + b) // 2  # with no sample in [a, b], it falls where a does: at lo
    for name, key, how in _gauge_keys(index):
        if key is None:
            fields[name] = fields[f"{name}_source"] = None
            continue
        if window:
            values = [s[key] for s in window if _number(s.get(key))]
            if values:
                fields[name] = sum(values) / len(values)
                fields[f"{name}_source"] = f"measured:{how}{every}"
                continue
        value = gauge_at(samples, key, mid, lo, window=True)
        fields[name] = value
        if value is None:
            fields[f"{name}_source"] = None
            note(fields, f"{name}: no {key} sample on each side of the row")
        else:
            fields[f"{name}_source"] = f"measured:{how}{every}(interpolated)"
    if index is None:
        note(fields, "gpu figures: not a CUDA row")


class Counters:
    """Points of cumulative counters, per key, in time order: :meth:`value_at` interpolates.
    Kept as two arrays per key (16 bytes a point: an H100's counter steps 10 times a second, 14 MB
    a day per GPU; the file keeps every point in full)."""

    def __init__(self, points: Iterable[Mapping[str, Any]] = ()) -> None:
        self.times: dict[str, array[int]] = {}
        self.values: dict[str, array[float]] = {}
        self.stepped: dict[str, bool] = {}  # whether the newest point of a key is a step
        self._periods: dict[str, float | None] = {}
        for p in points:
            self.add(p)

    def add(self, point: Mapping[str, Any]) -> None:
        key = point["key"]
        if key not in self.times:  # values first: readers index through times
            self.values[key] = array("d")
            self.times[key] = array("q")
        times = self.times[key]
        if times and point["t_ns"] <= times[-1]:
            return  # out of order or repeated: the series stays monotonic
        self.values[key].append(float(point["value"]))
        self.stepped[key] = bool(point.get("step", True))
        times.append(int(point["t_ns"]))
        newest = times[-10:]
        gaps = sorted(y - x for x, y in zip(newest, newest[1:], strict=False))
        self._periods[key] = gaps[len(gaps) // 2] / 1e9 if gaps else None

    def keys(self) -> list[str]:
        return list(self.times)

    def points(self) -> list[dict[str, Any]]:
        """Every point as ``{"key", "t_ns", "value"}``, key by key, in time order."""
        return [{"key": key, "t_ns": t, "value": v}
                for key, times in self.times.items() for t, v in zip(times, self.values[key], strict=False)]

    def covers(self, t_ns: int) -> bool:
        """True when every counter has a point at or after ``t_ns``."""
        return all(times[-1] >= t_ns for times in list(self.times.values()))  # keys may arrive meanwhile

    def value_at(self, key: str, t_ns: int) -> float | None:
        """The counter at ``t_ns``, linear between the points on each side (None outside them)."""
        times = self.times.get(key)
        if not times or t_ns < times[0] or t_ns > times[-1]:
            return None
        i = bisect.bisect_left(times, t_ns)
        values = self.values[key]
        if times[i] == t_ns:
            return values[i]
        t0, t1 = times[i - 1], times[i]
        return values[i - 1] + (values[i] - values[i - 1]) * (t_ns - t0) / (t1 - t0)

    def delta(self, key: str, a_ns: int, b_ns: int) -> float | None:
        """How much ``key`` grew between ``a_ns`` and ``b_ns`` (None where not covered)."""
        a, b = self.value_at(key, a_ns), self.value_at(key, b_ns)
        return None if a is None or b is None else b - a

    def period_s(self, key: str) -> float | None:
        """The median spacing of the newest points of ``key`` (its step period, for a stepped
        counter), seconds."""
        return self._periods.get(key)


class FillsRow(Protocol):
    """Adds figures to a row from the timeline (:class:`gnnmon.timeline.energy.EnergyJoin`)."""

    def fill(self, fields: dict[str, Any], samples: Samples, counters: Counters) -> None: ...


class RowJoin:
    """What a run joins to its rows while a sampler feeds ``samples`` and ``counters``: the gauges,
    and energy when ``energy`` is given. ``refresh`` asks the sampler for a sample and every
    counter's next point now (what a flush does, so that rows just closed are covered)."""

    def __init__(self, samples: Samples, counters: Counters, interval: float,
                 energy: FillsRow | None = None, refresh: Callable[[], Any] | None = None) -> None:
        self.samples = samples
        self.counters = counters
        self.interval = interval
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
        join_gauges(fields, self.samples, self.interval)
        if self.energy is not None:
            self.energy.fill(fields, self.samples, self.counters)


def energy_balance(rows: Iterable[Mapping[str, Any]], counters: Counters) -> dict[str, dict[str, Any]]:
    """Per energy counter (``gpu<i>_energy_mj`` in J, ``rapl_<kind>_j``): what the top-level rows
    on it got (``rows_j``), the time between them (``gaps_j``), before the first and after the
    last (``outside_j``), and the counter's own delta from its first point to its last
    (``counter_j``): ``rows_j + gaps_j + outside_j == counter_j`` up to rounding, by construction
    (one interpolated curve)."""
    out: dict[str, dict[str, Any]] = {}
    top = sorted((r for r in rows if r.get("parent") is None), key=lambda r: r["t_start_ns"])
    for key in counters.keys():
        scale = 1e-3 if key.endswith("_mj") else 1.0
        if key.startswith("gpu"):
            index = int(key[3:].split("_")[0])
            mine = [r for r in top if gauge_index(r.get("device")) == index]
        else:
            mine = top
        times = counters.times[key]
        first, last = times[0], times[-1]
        rows_j = gaps_j = 0.0
        counted = 0
        first_start: int | None = None
        previous_end: int | None = None
        for r in mine:
            d = counters.delta(key, r["t_start_ns"], r["t_end_ns"])
            if d is None:
                continue
            rows_j += d * scale
            counted += 1
            if previous_end is None:
                first_start = r["t_start_ns"]
            elif r["t_start_ns"] > previous_end:
                gaps_j += (counters.delta(key, previous_end, r["t_start_ns"]) or 0.0) * scale
            previous_end = r["t_end_ns"] if previous_end is None else max(previous_end, r["t_end_ns"])
        outside_j = 0.0
        if first_start is not None and previous_end is not None:
            outside_j = ((counters.delta(key, first, first_start) or 0.0)
                         + (counters.delta(key, previous_end, last) or 0.0)) * scale
        out[key] = {"rows": counted, "rows_j": rows_j, "gaps_j": gaps_j, "outside_j": outside_j,
                    "counter_j": (counters.values[key][-1] - counters.values[key][0]) * scale,
                    "span_s": (last - first) / 1e9, "period_s": counters.period_s(key)}
    return out
