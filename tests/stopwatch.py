"""The host's time around a block: the ceiling of any time measured inside it, whatever the load.

A test of a planted sleep bounds the figure below by the plant (a sleep never returns early) and
above by this, not by a fixed allowance a busy machine can exceed::

    with Stopwatch() as outer:
        step()
    assert 0.05 <= row["wall_s"] <= outer.s
"""

from __future__ import annotations

import time
from types import TracebackType

# perf_counter and gnnmon's clocks are read to the nanosecond: one rounding each side
TICK_S = 2e-9


class Stopwatch:
    """Seconds from entering to leaving (``s``), read with ``time.perf_counter``; ``TICK_S`` added so
    that a figure read inside on a nanosecond clock is never above it by a rounding."""

    def __init__(self) -> None:
        self.s = float("nan")
        self._t0 = 0.0

    def __enter__(self) -> Stopwatch:
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.s = time.perf_counter() - self._t0 + TICK_S
