"""The ``cpu_s`` probe: the process's CPU seconds in a row (a clock read, ~1 µs), on every run: the
diagnosis tells a call that computed from one that waited for a core (a loaded epoch is not
warm-up), and the CPU's energy model reads it."""

from __future__ import annotations

import time
from typing import Any

from gnnmon.figures import CPU_S


class CpuTime:
    """``cpu_s``: :func:`time.process_time` from the row's opening to its closing."""

    top_level = False

    def open(self, row: Any) -> float:
        return time.process_time()

    def close(self, row: Any, opened: Any, fields: dict[str, Any], error: BaseException | None) -> None:
        fields[CPU_S.name] = time.process_time() - opened


def choose(run: Any) -> CpuTime:
    """On every run."""
    return CpuTime()
