"""The largest batch size that fits, found by a few probes the memory model guides.

Halving and doubling (Lightning's ``BatchSizeFinder``, accelerate's ``find_executable_batch_size``)
learn one bit per trial: it fit, or it did not. A memory model says how far from the limit a trial
was, so each probe can aim at the limit itself:

1. the model (fitted on the calibration's batches) gives the largest size whose heaviest batch —
   the largest graphs summed, or the items per batch of the largest batches measured times the
   size — has its upper bound under the target; never beyond :data:`REACH` times the largest size that ran (each probe that fits
   extends it);
2. the step runs once on the heaviest of a few batches of that size (the probe);
3. a probe that stays under the target raises the floor, and its row refits the model; one that
   goes over, or runs out of memory, caps the size, and what the model missed scales its growing
   part for the next aim (an out-of-memory error counts as a peak of the whole capacity); a refit
   that cannot be trusted (a peak that curves beyond the calibration's sizes) is set aside and the
   last trusted model aims on, so scaled; once a size that fits and one that does not bracket the
   limit, the aim is where the chord between their measured peaks meets the target (a peak that
   curves upward, as memory does, meets it at or after the chord does, so the chord's size fits;
   a jump, such as a kernel that switches algorithm at a size, is found by its own probe);
4. it stops when the next aim gains less than :data:`MIN_GAIN` over the floor, or after
   ``probes`` probes. The answer is the largest size a probe (or the calibration) ran under the
   target: measured, not forecast.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gnnmon.forecast.forecast import largest
from gnnmon.report.memory_model import MemoryModel, format_bytes

REACH = 8
"""A probe aims at most this many times the largest size that ran (the model's upper bound, widened
for the distance, keeps the aim under the target; the probe measures it)."""
MIN_GAIN = 0.02
"""A next aim less than this share above the floor is not worth a probe."""

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
    """Each probe: ``size``, its shape, ``upper_bytes`` (the aim's forecast), ``peak_bytes`` (None
    after an out-of-memory error), ``fits`` and ``error``."""
    stopped: str = ""

    def summary(self) -> str:
        lines = [f"batch size {self.batch_size:,}: the largest measured under {format_bytes(self.target_bytes)} "
                 f"({len(self.probes)} probe{'s' if len(self.probes) != 1 else ''}; {self.stopped})"]
        for p in self.probes:
            seen = (f"peaked at {format_bytes(p['peak_bytes'])}" if p["peak_bytes"] is not None
                    else f"ran out of memory ({p['error']})")
            lines.append(f"  probe {p['size']:,} items ({p['num_nodes']:,} nodes, {p['num_edges']:,} edges): "
                         f"forecast {format_bytes(p['upper_bytes'])}, {seen}")
        return "\n".join(lines)


def _aim(model: MemoryModel, shape_of: Callable[[int], dict[str, float]], target: float, scale: float,
         cap: int) -> int:
    """The largest size in [0, cap] whose heaviest batch's forecast upper bound (its growing part
    times ``scale``) stays under ``target``."""
    return largest(lambda k: aimed_upper(model, shape_of(k), scale) <= target, max(cap, 0))


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
    out = BatchSizeSearch(0, target, capacity)
    under = [(s, p) for s, _, p in measured if p <= target]
    over = [(s, p) for s, _, p in measured if p > target]
    floor, floor_peak = max(under, default=(0, 0.0))
    ceiling, ceiling_peak = min(over, default=(count + 1, math.nan))
    largest_ran = max((s for s, _, _ in measured), default=0)
    scale = 1.0
    runs = list(measured)
    model: MemoryModel | None = None
    while True:
        if len(out.probes) >= probes:
            out.stopped = f"{probes} probes made"
            break
        latest = refit()
        if latest.trusted:
            model = latest
        elif model is None:
            out.stopped = "no trustworthy model to aim with: " + "; ".join(latest.problems)
            break
        # else: a probe made the model untrusted (a peak that curves beyond the calibration's
        # batches): the last trusted one aims on, its growing part scaled by what it missed
        top = max(s for s, _, _ in runs)
        biggest = [sh for s, sh, _ in runs if s == top]
        per_item = {t: max(sh.get(t, 0) for sh in biggest) / top for t in ("num_nodes", "num_edges", "num_graphs")}
        shape_of = heaviest or (lambda k, per=per_item: {t: k * v for t, v in per.items()})  # type: ignore[misc]
        k = _aim(model, shape_of, target, scale, min(count, ceiling - 1, int(REACH * largest_ran)))
        if ceiling <= count and floor and ceiling_peak > floor_peak:  # bracketed: aim at the chord
            k = int(floor + (target - floor_peak) / (ceiling_peak - floor_peak) * (ceiling - floor))
        if k == 0 and floor == 0:
            out.stopped = (f"nothing fits: a batch of one item is forecast at up to "
                           f"{format_bytes(aimed_upper(model, shape_of(1), scale))} (the model's constant "
                           f"{format_bytes(model.coefficients['const'])}), over the target {format_bytes(target)}")
            break
        if k <= floor * (1 + MIN_GAIN):
            out.stopped = f"the next aim ({k:,}) gains less than {MIN_GAIN:.0%} over {floor:,}"
            break
        shape, peak, error = probe(k)
        upper = model.predict(**{t: shape.get(t, 0) for t in model.terms}).upper_bytes
        fits = peak is not None and peak <= target
        out.probes.append({"size": k, **shape, "upper_bytes": upper, "peak_bytes": peak, "fits": fits,
                           "error": error})
        if peak is not None:
            runs.append((k, shape, float(peak)))
        if fits:
            floor, floor_peak, largest_ran = k, float(peak), max(largest_ran, k)  # type: ignore[arg-type]
            continue
        actual = float(capacity) if peak is None else float(peak)
        ceiling, ceiling_peak = k, actual
        const = model.coefficients["const"]
        predicted = model.predict(**{t: shape.get(t, 0) for t in model.terms}).bytes
        if predicted > const:
            scale = max(scale, (actual - const) / (predicted - const))
    out.batch_size = floor
    return out
