"""The sampled timeline's figures by unit, for the exports (trace counters, TensorBoard scalars)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gnnmon.data.format import SAMPLE_NOT_FIGURES
from gnnmon.figures import BYTES, PERCENT, WATTS

SAMPLED_UNITS = (PERCENT, BYTES, WATTS)
"""The units of the sampled figures: percentages, bytes (shown as MiB), watts."""

def sampled_figures(sample: Mapping[str, Any]) -> Iterator[tuple[str, str, float]]:
    """``(figure, unit, value)`` of each numeric figure of a sample with a known unit
    (``gpu0_mem_used_bytes`` -> ``("gpu0_mem_used", "mib", MiB)``)."""
    for key, value in sample.items():
        if key in SAMPLE_NOT_FIGURES or not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        for unit in SAMPLED_UNITS:
            if key.endswith(unit.suffix):
                yield key[: -len(unit.suffix)], unit.tag, value * unit.factor
                break
