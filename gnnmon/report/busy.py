"""A busy machine, as the rows' sampled load says it (``others_cpu_pct`` and ``idle_cpu_pct``, see
:mod:`gnnmon.timeline.machine_load`): a call ran on crowded cores when the cores the process may
run on had less than :data:`IDLE_FULL` idle (they were full) while other processes took at least
:data:`MORE_BY` more of them than they usually did during the label's calls. A slow call on
crowded cores was slowed by the machine, not by the job: the spikes' cause ``busy machine``, and
the diagnosis's finding of that name.
"""

from __future__ import annotations

import numpy as np

IDLE_FULL = 25.0
"""% of one core: less idle time than this on the process's cores, and they were full."""

MORE_BY = 25.0
"""% of one core: what other processes must take above their usual level (the median over the
label's calls) for a call's cores to count as crowded."""

CAUSE = "busy machine"


def usual_others(others: np.ndarray) -> float:
    """Other processes' usual CPU on the run's cores: the median over the calls that have it (0
    where none does)."""
    known = others[~np.isnan(others)]
    return float(np.median(known)) if known.size else 0.0


def crowded(others: np.ndarray, idle: np.ndarray, usual: float) -> np.ndarray:
    """Per call: whether its cores were crowded (see the module doc); False where not sampled."""
    with np.errstate(invalid="ignore"):
        return ~np.isnan(others) & ~np.isnan(idle) & (idle < IDLE_FULL) & (others >= usual + MORE_BY)


def crowded_words(others: float, idle: float, usual: float) -> str:
    """A crowded call's detail: what the others took against their usual level, the idle left."""
    return (f"other processes took {others:.0f} % of a core on this process's cores (usually {usual:.0f} %), "
            f"{idle:.0f} % idle left")
