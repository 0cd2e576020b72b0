"""What the diagnosis reads a run as: each label's top-level calls (a loop's steps) with their times,
the data waits before them, their steady level and the spread the run itself shows; and how a
finding is said (plain data) and judged against its noise.

A finding's time at stake is claimed only when it is at least :data:`MIN_SHARE` of the measured time
and beyond its own noise. A cost measured at each step (a wait, a pause, compiling: :func:`cost_beyond_noise`)
is held against its own spread across the steps: its mean must exceed :data:`NOISE_K` standard
errors of batch means (:func:`block_se`, which holds where neighbouring steps are alike, as a
loader's waits are); a noisy step does not hide a steady wait. A cost read as an excess over the
steps' level (warm-up, a busy machine's calls, spikes: :func:`beyond_noise`) is held against what
the steps' own spread could add up to over the steps it is in (``spread · √steps``): a cost the
run's jitter could make is not a cause.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from gnnmon.data.table import Part, Table
from gnnmon.report.stats import median, spread

MIN_SHARE = 0.05
"""The least share of the measured time (or of its memory) a finding must hold to be said."""

NOISE_K = 3.0
"""How many times the run's own noise over the steps concerned a cost must exceed."""

WARMUP = 2
"""Calls of each label the steady level is judged without (as the step analysis does)."""


BLOCKS = 8
"""Stretches a series is cut into for its batch means (at least 5 values each, 3 stretches or none)."""


def block_se(values: np.ndarray, statistic: Callable[[np.ndarray], float] = np.mean) -> float:
    """The standard error of ``statistic`` over a series in its order (autocorrelated: neighbours
    alike): the standard deviation of the statistic over :data:`BLOCKS` consecutive stretches
    / √stretches (batch means); the independent-values error of a mean where the series is too
    short for 3 stretches of 5."""
    values = values[~np.isnan(values)]
    blocks = min(BLOCKS, values.size // 5)
    if blocks < 3:
        return float(np.std(values, ddof=1) / math.sqrt(values.size)) if values.size > 1 else math.inf
    parts = np.array([statistic(b) for b in np.array_split(values, blocks)])
    return float(parts.std(ddof=1) / math.sqrt(blocks))


def cost_beyond_noise(costs: np.ndarray, total: float, min_share: float = MIN_SHARE) -> bool:
    """Whether a cost measured at each step (seconds, in the steps' order) is a finding: its sum at
    least ``min_share`` of ``total``, and its mean more than :data:`NOISE_K` batch-means standard
    errors of itself above 0 (see the module doc)."""
    costs = costs[~np.isnan(costs)]
    cost = float(costs.sum())
    return total > 0 and cost >= min_share * total and costs.mean() > NOISE_K * block_se(costs)


def beyond_noise(cost: float, steps: int, step_spread: float, total: float, min_share: float = MIN_SHARE) -> bool:
    """Whether ``cost`` (seconds over ``steps`` steps), an excess over the steps' level, is a
    finding: at least ``min_share`` of ``total`` and more than :data:`NOISE_K` spreads over those
    steps (see the module doc)."""
    noise = NOISE_K * (step_spread if math.isfinite(step_spread) else 0.0) * math.sqrt(max(steps, 1))
    return total > 0 and cost >= min_share * total and cost > noise


class Loop:
    """One label's top-level calls that returned: ``t`` their times (``device_s``, else ``wall_s``,
    else the window), ``wait`` the loop's wait for each one's batch and its copy to the device
    (``data_wait_s`` + ``data_to_device_s``, 0 where not watched), ``before`` the part of it that came
    before the call (less ``data_wait_in_row_s``: a row of several batches waits for the later ones
    inside its time), ``steady`` the calls after the first :data:`WARMUP`; ``level`` and ``noise``
    the steady calls' median and robust spread."""

    def __init__(self, label: str, part: Part, warmup: int = WARMUP) -> None:
        self.label = label
        self.part = part
        keep = part.nulls("parent") & part.nulls("error")
        t = part.time()
        keep &= ~np.isnan(t)
        self.at = np.flatnonzero(keep)
        self.t = t[keep]
        self.index = np.nan_to_num(part.numbers("index")[keep], nan=0.0)
        self.steady = self.index >= warmup
        if not self.steady.any():
            self.steady = np.ones(self.t.size, dtype=bool)
        self.wait = self.zeros("data_wait_s") + self.zeros("data_to_device_s")
        self.before = self.wait - self.zeros("data_wait_in_row_s")
        self.level = median(self.t[self.steady])
        self.noise = spread(self.t[self.steady])

    def column(self, name: str) -> np.ndarray:
        """Field ``name`` of these calls, as floats (NaN where missing)."""
        return self.part.numbers(name)[self.at]

    def zeros(self, name: str) -> np.ndarray:
        """Field ``name`` of these calls with 0 where missing."""
        return np.nan_to_num(self.column(name), nan=0.0)

    def has(self, name: str) -> bool:
        return name in self.part.cols and bool(np.any(~np.isnan(self.column(name))))

    @property
    def own(self) -> np.ndarray:
        """Per call, its own time, s: its time less the waits for batches inside it (``wait -
        before``: a ``gnnmon run`` row of several batches waits for its later ones in its window)."""
        return self.t - (self.wait - self.before)

    @property
    def total(self) -> float:
        """The loop's time: its calls and the waits before them (each wait counted once)."""
        return float(np.sum(self.t) + np.sum(self.before))


def loops(table: Table) -> list[Loop]:
    """Every label's loop that has timed top-level calls."""
    out = [Loop(label, part) for label, part in table.parts.items()]
    return [loop for loop in out if loop.t.size]


def finding(kind: str, label: str | None, at_stake: float, total: float, words: str,
            evidence: list[dict[str, Any]], next_step: str, of: str = "time", **extra: Any) -> dict[str, Any]:
    """A finding as plain data: its ``kind``, the ``label`` it concerns (None: the run), the
    ``share`` of the measured time (or of the memory, ``of="memory"``) at stake and that amount
    (``at_stake``, seconds or bytes: ``unit``), what was found in ``words``, its ``evidence``
    (each figure, its value and unit, and where it was measured) and the ``next`` thing to try."""
    return {"kind": kind, "label": label, "share": at_stake / total if total > 0 else 0.0, "of": of,
            "at_stake": at_stake, "unit": "s" if of == "time" else "bytes", "words": words,
            "evidence": evidence, "next": next_step, **extra}


def evidence(figure: str, value: float | None, unit: str, where: str) -> dict[str, Any]:
    """One figure behind a finding: its name, value (in ``unit``) and where it was measured."""
    return {"figure": figure, "value": value, "unit": unit, "where": where}


def ms(seconds: float) -> str:
    """Seconds as a reader expects them: ms below a second."""
    return f"{seconds * 1e3:,.1f} ms" if seconds < 1 else f"{seconds:,.2f} s"
