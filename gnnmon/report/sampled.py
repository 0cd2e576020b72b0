"""The sampled timeline's figures by unit, for the exports (trace counters, TensorBoard scalars)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

UNITS = (("_pct", "pct", 1.0), ("_bytes", "mib", 1 / 2**20), ("_w", "w", 1.0))
"""A sampled field's suffix -> (unit, factor): percentages, bytes as MiB, watts."""

NOT_FIGURES = {"t_ns", "late_s", "interval_s", "sampler_cpu_s", "children", "rank"}
"""A sample's fields that are about the sample, not the machine."""


def sampled_figures(sample: Mapping[str, Any]) -> Iterator[tuple[str, str, float]]:
    """``(figure, unit, value)`` of each numeric figure of a sample with a known unit
    (``gpu0_mem_used_bytes`` -> ``("gpu0_mem_used", "mib", MiB)``)."""
    for key, value in sample.items():
        if key in NOT_FIGURES or not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        for suffix, unit, factor in UNITS:
            if key.endswith(suffix):
                yield key[: -len(suffix)], unit, value * factor
                break
