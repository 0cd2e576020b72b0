"""A busy machine, as the rows' sampled load says it (``others_cpu_pct`` and ``idle_cpu_pct``, see
:mod:`gnnmon.timeline.machine_load`).

On cores with no idle time left, a call's wall time is its own CPU time plus the time the cores
gave to other processes: a call slowed by a busy machine is one whose excess over the label's
level is matched by the CPU other processes took during it beyond their usual amount per call.
So a call ran on **crowded** cores when the cores the process may run on had less than
:data:`IDLE_FULL` idle (they were full) and other processes took, in CPU seconds
(``others_cpu_pct / 100 × its time``), at least :data:`EXPLAINS` of its excess more than they
usually took per call (the median over the label's steady calls). This holds whatever the
machine's usual load: on a quiet 64-core machine the others' share of a pinned core rises from 0 to
a half with one busy process beside it; on a 2-core machine already shared with three processes it
rises only from 3/4 to 4/5, yet the CPU seconds they took during the slowed call still add up to
its excess. A slow call on crowded cores was slowed by the machine, not by the job: the spikes'
cause ``busy machine``, and the diagnosis's finding of that name.
"""

from __future__ import annotations

import numpy as np

IDLE_FULL = 25.0
"""% of one core: less idle time than this on the process's cores, and they were full."""

EXPLAINS = 0.5
"""The least share of a call's excess that other processes' extra CPU seconds must match."""

CAUSE = "busy machine"


def others_s(others: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per call: the CPU seconds other processes took on the run's cores while it ran (NaN where
    not sampled)."""
    return others / 100.0 * t


def usual_others_s(others: np.ndarray, t: np.ndarray) -> float:
    """Other processes' usual CPU seconds per call: the median over the calls given that have it
    (0 where none does)."""
    took = others_s(others, t)
    known = took[~np.isnan(took)]
    return float(np.median(known)) if known.size else 0.0


def crowded(others: np.ndarray, idle: np.ndarray, t: np.ndarray, level: float, usual_s: float) -> np.ndarray:
    """Per call: whether its cores were crowded (see the module doc) against the label's ``level``
    (seconds per call) and the others' usual CPU seconds per call; False where not sampled or
    not slower than the level."""
    extra = others_s(others, t) - usual_s
    excess = t - level
    with np.errstate(invalid="ignore"):
        return (~np.isnan(extra) & ~np.isnan(idle) & (idle < IDLE_FULL) & (excess > 0)
                & (extra >= EXPLAINS * excess))


def crowded_words(others: float, idle: float, t: float, level: float, usual_s: float) -> str:
    """A crowded call's detail: the CPU other processes took during it against their usual amount."""
    took = others / 100.0 * t
    return (f"other processes took {took * 1e3:.1f} ms of CPU on this process's cores during it (usually "
            f"{usual_s * 1e3:.1f} ms per call; {others:.0f} % of a core), against {(t - level) * 1e3:.1f} ms "
            f"over the level; {idle:.0f} % idle left")
