"""Profiler ranges, a row's: while :class:`emit_ranges` is on, every row is a ``torch.profiler``
range (and an NVTX range on CUDA) named by its label; phases push their own
(:mod:`gnnmon.devices.ranges` holds the switch and the ranges)."""

from __future__ import annotations

import warnings
from typing import Any

from gnnmon.devices.ranges import RANGES, pop_range, push_range, switch_ranges
from gnnmon.errors import raised_by_handler
from gnnmon.record.state import probes_changed


class emit_ranges:
    """Turn profiler ranges on (``gnnmon.emit_ranges()``) or off (``emit_ranges(False)``), for the
    whole process; as ``with gnnmon.emit_ranges():`` only inside the block.

    ``nvtx``: also push NVTX ranges (for Nsight Systems); default: where CUDA is available.
    """

    __slots__ = ("_before",)

    def __init__(self, enabled: bool = True, *, nvtx: bool | None = None) -> None:
        self._before = switch_ranges(enabled, nvtx)
        probes_changed()

    def __enter__(self) -> emit_ranges:
        return self

    def __exit__(self, *exc: Any) -> None:
        RANGES.on, RANGES.nvtx = self._before
        probes_changed()


class RowRange:
    """Opens the row's range as it opens, closes it as it closes."""

    top_level = False

    def open(self, row: Any) -> Any:
        return push_range(row.fields["label"])

    def close(self, row: Any, opened: Any, fields: dict[str, Any], error: BaseException | None) -> None:
        try:
            pop_range(opened)
        except Exception as exc:  # a profiler range must not change the user's call
            if raised_by_handler(exc):
                raise
            warnings.warn(f"gnnmon could not close a profiler range: {exc!r}", RuntimeWarning, 3)


def choose(run: Any) -> RowRange | None:
    """While ranges are on."""
    return RowRange() if RANGES.on else None
