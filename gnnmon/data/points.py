"""Energy counters' points: a cumulative counter (NVML's GPU energy, RAPL's packages) sampled on
the timeline as ``{"key", "t_ns", "value"}`` points, kept per key in time order and interpolated
linearly between them, so that rows and the gaps between them add up to the counter's own delta.

A point's ``key`` says whose counter it is: ``gpu<i>_energy_mj`` is the NVML energy counter
(millijoules) of CUDA device ``i`` (the sampler maps NVML's GPUs to CUDA's indices), and
``rapl_<kind>_j`` a RAPL domain of the host (joules).
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable, Mapping
from typing import Any


def counter_device(key: str) -> str | None:
    """The device whose counter ``key`` is (``gpu1_energy_mj`` -> ``cuda:1``); None for the
    host's counters (RAPL), which every row of the process shares."""
    if key.startswith("gpu"):
        index = key[3:].split("_", 1)[0]
        if index.isdigit():
            return f"cuda:{int(index)}"
    return None


def joules_per_unit(key: str) -> float:
    """The factor from a counter's own unit to joules (``_mj``: millijoules)."""
    return 1e-3 if key.endswith("_mj") else 1.0


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
        """Take a point (from the sampler's reader thread, while the writer thread reads: every
        key readers can find has at least one point, and its values are appended first)."""
        key = point["key"]
        times = self.times.get(key)
        if times is None:  # a new counter, published last and whole (readers find keys through times)
            self.values[key] = array("d", [float(point["value"])])
            self.stepped[key] = bool(point.get("step", True))
            self._periods[key] = None
            self.times[key] = array("q", [int(point["t_ns"])])
            return
        if point["t_ns"] <= times[-1]:
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
