"""Joining utilisation samples to rows by time: a row gets the mean over the samples taken inside
its own window, or None with a reason when none fell in it."""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any


def samples_in(samples: Sequence[Mapping[str, Any]], a_ns: int, b_ns: int) -> Sequence[Mapping[str, Any]]:
    """The samples with ``a_ns <= t_ns <= b_ns`` (samples are in time order)."""
    lo = bisect.bisect_left(samples, a_ns, key=lambda s: s["t_ns"])
    hi = bisect.bisect_right(samples, b_ns, key=lambda s: s["t_ns"])
    return samples[lo:hi]


def _mean(values: list[Any]) -> float | None:
    nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return sum(nums) / len(nums) if nums else None


def join_utilisation(fields: dict[str, Any], samples: Sequence[Mapping[str, Any]], interval: float) -> None:
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
