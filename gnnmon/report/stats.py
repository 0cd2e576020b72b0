"""Small statistics over lists of numbers, or sorted numpy arrays (a column's numbers)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

STATS = ("count", "mean", "p50", "p90", "p99", "max")


class _ScipyStats:
    """``scipy.stats``, imported when a test first asks for it (0.3-1.4 s on the 2-core VM: a
    report that bounds no change and fits no leak never pays it)."""

    def __getattr__(self, name: str) -> Any:
        from scipy import stats  # heavy, and needed by few reports

        return getattr(stats, name)


scipy_stats: Any = _ScipyStats()
"""The tests of scipy.stats (Student's t, Kendall's tau, Theil-Sen), loaded on first use."""


def percentile(sorted_values: Sequence[float] | np.ndarray, q: float) -> float:
    """The q-th percentile (0..100) of already sorted values, linear interpolation (numpy's default)."""
    if not len(sorted_values):
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def describe(values: Sequence[float] | np.ndarray) -> dict[str, float]:
    """count, mean, p50, p90, p99 and max of the values (count only when there are none); a
    numpy array must come sorted (:func:`gnnmon.data.column.sorted_numbers` gives one). The mean is
    exact (``math.fsum``); ``max`` keeps an int an int."""
    xs: Any = values if isinstance(values, np.ndarray) else sorted(values)
    if not len(xs):
        return {"count": 0}
    if isinstance(xs, np.ndarray):
        return {"count": len(xs), "mean": math.fsum(xs.tolist()) / len(xs), "p50": float(percentile(xs, 50)),
                "p90": float(percentile(xs, 90)), "p99": float(percentile(xs, 99)), "max": xs[-1].item()}
    return {
        "count": len(xs),
        "mean": math.fsum(xs) / len(xs),
        "p50": percentile(xs, 50),
        "p90": percentile(xs, 90),
        "p99": percentile(xs, 99),
        "max": xs[-1],
    }


def median(values: Sequence[float] | np.ndarray) -> float:
    """The median (NaN of no values)."""
    xs = np.sort(np.asarray(values, dtype=float))
    return float(percentile(xs, 50)) if xs.size else math.nan


def mad(values: Sequence[float] | np.ndarray) -> float:
    """Median absolute deviation from the median."""
    xs = np.asarray(values, dtype=float)
    return median(np.abs(xs - median(xs)))


def spread(values: Sequence[float] | np.ndarray) -> float:
    """The robust standard deviation: 1.4826 × the median absolute deviation (NaN of no values)."""
    return 1.4826 * mad(values)
