"""Joining the timeline to rows by time (``t_ns`` of samples, ``t_start_ns``/``t_end_ns`` of rows,
both ``time.time_ns()``).

* utilisation: a row gets the mean over the samples taken inside its own window, or None with a
  reason when none fell in it;
* cumulative counters (energy, CPU time): interpolated linearly to the row's start and end.

:class:`RowJoin` does both for a run; it joins a row once a sample at or after the row's end has
arrived (:meth:`RowJoin.covers`), so that interpolation has a reading on each side.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

Samples = Sequence[Mapping[str, Any]]


class FillsRow(Protocol):
    """Adds figures to a row from samples (:class:`gnnmon.timeline.energy.EnergyJoin`)."""

    def fill(self, fields: dict[str, Any], samples: Samples) -> None: ...


def _t(sample: Mapping[str, Any]) -> int:
    return int(sample["t_ns"])


def samples_in(samples: Samples, a_ns: int, b_ns: int) -> Samples:
    """The samples with ``a_ns <= t_ns <= b_ns`` (samples are in time order)."""
    lo = bisect.bisect_left(samples, a_ns, key=_t)
    hi = bisect.bisect_right(samples, b_ns, key=_t)
    return samples[lo:hi]



def value_at(samples: Samples, key: str, t_ns: int) -> float | None:
    """A cumulative counter ``key`` at time ``t_ns``, interpolated linearly between the nearest
    samples on each side that have it; None if there is none on one side."""
    i = bisect.bisect_left(samples, t_ns, key=_t)
    after = i
    while after < len(samples) and not _number(samples[after].get(key)):
        after += 1
    if after == len(samples):
        return None
    s1 = samples[after]
    if _t(s1) == t_ns:
        return float(s1[key])
    before = i - 1
    while before >= 0 and not _number(samples[before].get(key)):
        before -= 1
    if before < 0:
        return None
    s0 = samples[before]
    t0, t1 = _t(s0), _t(s1)
    v0, v1 = float(s0[key]), float(s1[key])
    return v0 + (v1 - v0) * (t_ns - t0) / (t1 - t0)


def delta_between(samples: Samples, key: str, a_ns: int, b_ns: int) -> float | None:
    """How much a cumulative counter grew between ``a_ns`` and ``b_ns`` (interpolated)."""
    a = value_at(samples, key, a_ns)
    b = value_at(samples, key, b_ns)
    if a is None or b is None:
        return None
    return b - a


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _mean(values: list[Any]) -> float | None:
    nums = [v for v in values if _number(v)]
    return sum(nums) / len(nums) if nums else None


def join_utilisation(fields: dict[str, Any], samples: Samples, interval: float) -> None:
    """Add ``cpu_util_pct``, ``gpu_util_pct`` (means over the row's window), their sources and
    ``util_samples`` (how many samples fell in the window)."""
    window = samples_in(samples, fields["t_start_ns"], fields["t_end_ns"])
    fields["util_samples"] = len(window)
    every = f"@{interval * 1000:g}ms"
    notes = fields.setdefault("notes", [])
    if not window:
        fields["cpu_util_pct"] = fields["gpu_util_pct"] = None
        fields["cpu_util_pct_source"] = fields["gpu_util_pct_source"] = None
        text = f"utilisation: no sample fell in the row's window (one every {interval * 1000:g} ms)"
        if text not in notes:
            notes.append(text)
        return
    fields["cpu_util_pct"] = _mean([s.get("cpu_util_pct") for s in window])
    fields["cpu_util_pct_source"] = f"measured:psutil{every}"
    device = fields.get("device")
    key = None
    if isinstance(device, str) and device.startswith("cuda"):
        key = f"gpu{int(device.split(':')[1]) if ':' in device else 0}_util_pct"
    value = _mean([s.get(key) for s in window]) if key else None
    fields["gpu_util_pct"] = value
    fields["gpu_util_pct_source"] = f"measured:nvml{every}" if value is not None else None
    if value is None:
        why = "not a CUDA row" if key is None else "no NVML utilisation for this device"
        text = f"gpu_util_pct: {why}"
        if text not in notes:
            notes.append(text)


class RowJoin:
    """What a run joins to its rows while a sampler feeds ``samples``: utilisation, and energy
    when ``energy`` is given."""

    def __init__(self, samples: Samples, interval: float, energy: FillsRow | None = None,
                 refresh: Callable[[], None] | None = None) -> None:
        self.samples = samples
        self.interval = interval
        self.energy = energy
        self._refresh = refresh

    def refresh(self) -> None:
        """Take a sample now (what a flush does, so that rows just closed are covered)."""
        if self._refresh is not None:
            self._refresh()

    def covers(self, fields: Mapping[str, Any]) -> bool:
        """True once a sample at or after the row's end exists (nothing it needs is still to come)."""
        samples = self.samples
        return bool(samples) and _t(samples[-1]) >= fields["t_end_ns"]

    def join(self, fields: dict[str, Any]) -> None:
        join_utilisation(fields, self.samples, self.interval)
        if self.energy is not None:
            self.energy.fill(fields, self.samples)
