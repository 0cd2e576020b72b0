"""The largest batch size that fits, found by probes the memory model aims and the probes decide.

Halving and doubling (Lightning's ``BatchSizeFinder``, accelerate's ``find_executable_batch_size``)
learn one bit per trial: it fit, or it did not. A memory model says how far from the limit a trial
was, so each probe can aim at the limit itself:

1. the model (fitted on the calibration's batches) gives the largest size whose heaviest batch —
   the largest graphs summed, or the items per batch of the largest batches measured times the
   size — is forecast under the target, its growing part scaled by what the last probe measured
   against its forecast (a peak that grows slower than the model says, as a sampled batch's does
   where it covers much of the graph, is aimed further out); never beyond
   :data:`REACH` times the largest size that ran;
2. the step runs once on the heaviest of a few batches of that size (the probe);
3. a probe that stays under the target raises the floor, and its row refits the model; one that
   goes over, or runs out of memory (a peak of the whole capacity), caps the size: the limit is
   then bracketed. A refit that cannot be trusted (a peak that curves beyond the calibration's
   sizes) is set aside and the last trusted model aims on;
4. where the model says the floor is the limit, a probe :data:`CLOSE` above it tests that (it
   fits: the floor rises; it does not: the bracket is closed); inside a bracket the aim is where
   the chord between the two measured peaks meets the target (a peak that curves upward meets it
   at or after the chord), or :data:`CLOSE` above the floor where the chord lies closer; after
   two probes over the target in a row (a jump the chord cannot see, such as a kernel that
   switches algorithm at a size) the bracket is halved instead;
5. it stops when the largest size that fits and the smallest that does not are within
   :data:`CLOSE` of each other, when the loader's whole set fits, or after ``probes`` probes,
   saying how far below the limit its answer may be. The answer is the largest size a probe (or
   the calibration) ran under the target: measured, not forecast.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gnnmon.forecast.forecast import largest
from gnnmon.report.memory.model import MemoryModel, format_bytes

REACH = 8
"""A probe aims at most this many times the largest size that ran (a forecast further out is a
guess; each probe that fits extends the reach)."""
SCALE_LIMIT = 2.0
"""The most the growing part of the next aim's forecast is scaled, either way, by what the last
probe measured against it."""
CLOSE = 0.05
"""A bracket this narrow ends the search: the limit, at most one below the smallest size over the
target, is at most this share above the largest size under it (the answer)."""

Probe = Callable[[int], tuple[dict[str, int], float | None, str | None]]
"""Runs the step on the heaviest batch of a size: (its shape, its measured peak in bytes or None,
the out-of-memory error's text or None)."""


@dataclass
class BatchSizeSearch:
    """What the probes found (see the module's docstring)."""

    batch_size: int
    """The largest size measured under the target (0: none was)."""
    target_bytes: float
    capacity_bytes: int
    probes: list[dict[str, Any]] = field(default_factory=list)
    """Each probe: ``size``, its shape, ``upper_bytes`` (the aiming model's upper bound at that
    shape), ``peak_bytes`` (None after an out-of-memory error), ``fits`` and ``error``."""
    stopped: str = ""
    over: int | None = None
    """The smallest size measured over the target (or out of memory); None where none was: the
    limit then lies somewhere above :attr:`batch_size`."""
    items: int = 0
    """The items the loader has: no batch is larger."""

    @property
    def off_by(self) -> float | None:
        """How far below the limit the answer may be, as a share of the answer: the bracket's width
        (``(over - 1) / batch_size - 1``: the limit is at most one below ``over``); None where no size
        over the target was measured (unbounded)."""
        if self.over is None or not self.batch_size:
            return None
        return (self.over - 1) / self.batch_size - 1

    def summary(self) -> str:
        if self.over is None and self.items and self.batch_size >= self.items:
            bound = "no batch is larger"
        elif self.over is None:
            bound = "no size over it was tried: the limit may be further above"
        elif self.batch_size:
            bound = f"{self.over:,} was over it: the answer is at most {self.off_by:.1%} below the limit"
        else:
            bound = f"{self.over:,} was over it"
        lines = [f"batch size {self.batch_size:,}: the largest measured under {format_bytes(self.target_bytes)} "
                 f"({len(self.probes)} probe{'s' if len(self.probes) != 1 else ''}; {self.stopped}; {bound})"]
        for p in self.probes:
            seen = (f"peaked at {format_bytes(p['peak_bytes'])}" if p["peak_bytes"] is not None
                    else f"ran out of memory ({p['error']})")
            lines.append(f"  probe {p['size']:,} items ({p['num_nodes']:,} nodes, {p['num_edges']:,} edges): "
                         f"forecast {format_bytes(p['upper_bytes'])}, {seen}")
        return "\n".join(lines)


def _aim(model: MemoryModel, shape_of: Callable[[int], dict[str, float]], target: float, scale: float,
         cap: int) -> int:
    """The largest size in [0, cap] whose heaviest batch's forecast (its growing part times
    ``scale``) stays under ``target``: the probe measures whether it does."""
    const = model.coefficients["const"]

    def forecast(shape: dict[str, float]) -> float:
        point = model.predict(**{t: shape.get(t, 0.0) for t in model.terms}).bytes
        return const + scale * (point - const)

    return largest(lambda k: forecast(shape_of(k)) <= target, max(cap, 0))


def aimed_upper(model: MemoryModel, shape: dict[str, float], scale: float) -> float:
    """The forecast upper bound a probe aims with for a batch of ``shape``: its growing part (above
    the constant) times ``scale``, bytes."""
    const = model.coefficients["const"]
    upper = model.predict(**{t: shape.get(t, 0.0) for t in model.terms},
                          **{t: shape[t] for t in model.confounded if shape.get(t)}).upper_bytes
    return const + scale * (upper - const)


def search(probe: Probe, refit: Callable[[], MemoryModel], measured: list[tuple[int, dict[str, int], float]],
           count: int, capacity: int, fraction: float, probes: int,
           heaviest: Callable[[int], dict[str, float]] | None = None) -> BatchSizeSearch:
    """Probe toward the largest size that fits (module docstring). ``measured``: the calibration's
    (size, shape, peak bytes); ``count``: the items there are; ``capacity``: bytes; ``heaviest``:
    the shape of the heaviest batch of a size where it is known (the largest graphs summed), else
    the items per batch of the largest batches measured times the size."""
    target = fraction * capacity
    out = BatchSizeSearch(0, target, capacity, items=count)
    under = [(s, p) for s, _, p in measured if p <= target]
    floor, floor_peak = max(under, default=(0, 0.0))
    # a size over the target below one under it is noise between draws: the bracket is above the floor
    over = [(s, p) for s, _, p in measured if p > target and s > floor]
    ceiling, ceiling_peak = min(over, default=(count + 1, math.nan))
    largest_ran = max((s for s, _, _ in measured), default=0)
    scale = 1.0
    runs = list(measured)
    model: MemoryModel | None = None
    while True:
        if floor >= count:
            out.stopped = f"the loader's whole set ({count:,} items) fits"
            break
        if ceiling <= count and floor and ceiling - 1 <= floor * (1 + CLOSE):  # the limit: floor to ceiling - 1
            out.stopped = f"closed within {CLOSE:.0%}"
            break
        if len(out.probes) >= probes:
            out.stopped = f"{probes} probes made"
            break
        latest = refit()
        if latest.trusted:
            model = latest
        elif model is None:
            out.stopped = "no trustworthy model to aim with: " + "; ".join(latest.problems)
            break
        top = max(s for s, _, _ in runs)
        biggest = [sh for s, sh, _ in runs if s == top]
        per_item = {t: max(sh.get(t, 0) for sh in biggest) / top for t in ("num_nodes", "num_edges", "num_graphs")}
        shape_of = heaviest or (lambda k, per=per_item: {t: k * v for t, v in per.items()})  # type: ignore[misc]
        step_up = min(count, max(floor + 1, math.ceil(floor * (1 + CLOSE))))  # tests "the floor is the limit"
        if ceiling <= count and floor:  # bracketed: the chord, or a step up where it lies closer
            stuck = len(out.probes) >= 2 and not out.probes[-1]["fits"] and not out.probes[-2]["fits"]
            chord = (floor + (target - floor_peak) / (ceiling_peak - floor_peak) * (ceiling - floor)
                     if ceiling_peak > floor_peak and not stuck else (floor + ceiling) / 2)
            k = max(step_up, min(ceiling - 1, int(chord)))  # twice over in a row: a jump; halve instead
        else:
            k = _aim(model, shape_of, target, scale, min(count, ceiling - 1, int(REACH * max(largest_ran, 1))))
            if k == 0 and floor == 0:
                out.stopped = (f"nothing fits: a batch of one item is forecast at up to "
                               f"{format_bytes(aimed_upper(model, shape_of(1), scale))} (the model's constant "
                               f"{format_bytes(model.coefficients['const'])}), over the target {format_bytes(target)}")
                break
            k = max(k, step_up) if floor else max(k, 1)
        shape, peak, error = probe(k)
        upper = model.predict(**{t: shape.get(t, 0) for t in model.terms}).upper_bytes
        fits = peak is not None and peak <= target
        out.probes.append({"size": k, **shape, "upper_bytes": upper, "peak_bytes": peak, "fits": fits,
                           "error": error})
        if peak is not None:
            runs.append((k, shape, float(peak)))
        actual = float(capacity) if peak is None else float(peak)
        const = model.coefficients["const"]
        predicted = model.predict(**{t: shape.get(t, 0) for t in model.terms}).bytes
        if predicted > const and actual > const:  # the next aim follows what this probe measured
            scale = min(SCALE_LIMIT, max(1 / SCALE_LIMIT, (actual - const) / (predicted - const)))
        if fits:
            floor, floor_peak, largest_ran = k, actual, max(largest_ran, k)
        else:
            ceiling, ceiling_peak = k, actual
    out.batch_size = floor
    out.over = ceiling if ceiling <= count else None
    return out
