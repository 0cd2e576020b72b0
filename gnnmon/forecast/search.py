"""The largest batch size that fits, found by probes the memory model aims and the probes decide.

Halving and doubling (Lightning's ``BatchSizeFinder``, accelerate's ``find_executable_batch_size``)
learn one bit per trial: it fit, or it did not. A memory model says how far from the limit a trial
was, so each probe can aim at the limit itself:

1. the model (fitted on the calibration's batches) gives the largest size whose heaviest batch —
   :class:`~gnnmon.forecast.shapes.Heaviest`: for a neighbour loader the heaviest of the batches
   one epoch at that size makes (its sampler alone, every seed once), for whole graphs the
   costliest summed; the budget of
   :meth:`~gnnmon.forecast.forecast.Forecast.budget` forecasts the same batch — is forecast under
   the target, its growing part scaled by what the last probe measured against its forecast
   (where both rose above the model's constant: a forecast at the constant has no growing part to
   scale, and a peak at or under it measured none; a probe whose shape lacks one of the model's
   terms has no forecast; the scale then stays as it was); never beyond :data:`REACH` times the
   largest size that ran. A term the shapes it aims with lack (a per-type count of a heterogeneous
   model where they give the totals alone, or ``num_graphs``) is never read as none of it: the
   search cannot forecast, says so (``cannot forecast: the shapes lack ...``) and aims no probe;
2. the step runs once on that heaviest batch (the probe; for a neighbour loader its seeds, sampled
   again: the hops' draws are fresh, the seeds that made it heavy are the same);
3. a probe whose peak is under the target by the figure's resolution (the model's
   ``resolution_bytes``: what the host's RSS cannot resolve between two states of the process; 0
   for a GPU allocator's count) raises the floor, and its row refits the model; one that is not,
   or runs out of memory (a peak of the whole capacity), caps the size: the limit is then
   bracketed. A refit that cannot be trusted (a peak that curves beyond the calibration's sizes)
   is set aside and the last trusted model aims on. A calibration batch (a random draw) under
   the target that is lighter than the heaviest a sampler draws at its size raises no floor: on
   a graph with hubs a light draw fits where the epoch's heaviest batch does not (one over the
   target still caps the size: the loader can draw it);
4. where the model says the floor is the limit, a probe :data:`CLOSE` above it tests that (it
   fits: the floor rises; it does not: the bracket is closed); inside a bracket the aim is where
   the chord between the two measured peaks meets the target (a peak that curves upward meets it
   at or after the chord), or :data:`CLOSE` above the floor where the chord lies closer; after
   two probes over the target in a row (a jump the chord cannot see, such as a kernel that
   switches algorithm at a size) the bracket is halved instead;
5. it stops when the largest size that fits and the smallest that does not are within
   :data:`CLOSE` of each other, when the loader's whole set fits, or after ``probes`` probes;
6. where anything ran after the answer was measured (larger probes, the calibration's twins),
   the answer runs again on its heaviest batch before the search stops (a re-check): what a process
   holds at a step's start grows with what ran before it, so the answer is measured in the state
   the search leaves, as training will meet it; one over the target caps the size and the search
   goes on below it (at most :data:`RECHECKS` re-checks).

The answer is the largest size a probe (or the calibration) ran under the target, the last
measured: measured, not forecast; the search says how far below the limit it may be.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gnnmon.forecast.forecast import largest, next_steps
from gnnmon.forecast.shapes import SHAPE_KEYS
from gnnmon.report.memory.model import MemoryModel, Prediction, format_bytes

REACH = 8
"""A probe aims at most this many times the largest size that ran (a forecast further out is a
guess; each probe that fits extends the reach)."""
SCALE_LIMIT = 2.0
"""The most the growing part of the next aim's forecast is scaled, either way, by what the last
probe measured against it."""
CLOSE = 0.05
"""A bracket this narrow ends the search: the limit, at most one below the smallest size over the
target, is at most this share above the largest size under it (the answer)."""
RECHECKS = 3
"""The most re-checks of the answer (module docstring, 6): each is one step, beside the ``probes``."""

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
    shape; NaN without a trusted model, or where the shape lacks one of its terms), ``peak_bytes``
    (None after an out-of-memory error), ``fits`` (under the target by :attr:`margin_bytes`),
    ``error`` and ``recheck`` (the answer run again after the search)."""
    stopped: str = ""
    over: int | None = None
    """The smallest size measured over the target (or out of memory); None where none was: the
    limit then lies somewhere above :attr:`batch_size`."""
    items: int = 0
    """The items the loader has: no batch is larger."""
    margin_bytes: float = 0.0
    """How far under the target a measured peak must be to count as under it, bytes: the figure's
    resolution (:attr:`~gnnmon.report.memory.model.MemoryModel.resolution_bytes`)."""
    before_training: str | None = None
    """What to do before a loader of the answer's size is built, in words, where the answer was
    measured on the host beside a loader that holds its own copy of the graph (a neighbour
    sampler's, docs/memory.md): a second one beside it adds to every step's peak; None elsewhere."""

    @property
    def off_by(self) -> float | None:
        """How far below the limit the answer may be, as a share of the answer: the bracket's width
        (``(over - 1) / batch_size - 1``: the limit is at most one below ``over``); None where no size
        over the target was measured (unbounded)."""
        if self.over is None or not self.batch_size:
            return None
        return (self.over - 1) / self.batch_size - 1

    def summary(self) -> str:
        """The answer, how close to the limit it is, and each probe, in words."""
        if self.over is None and self.items and self.batch_size >= self.items:
            bound = "no batch is larger"
        elif self.over is None:
            bound = "no size over it was tried: the limit may be further above"
        elif self.batch_size:
            bound = f"{self.over:,} was over it: the answer is at most {self.off_by:.1%} below the limit"
        else:
            bound = f"{self.over:,} was over it"
        lines = [f"batch size {self.batch_size:,}: the largest measured under {format_bytes(self.target_bytes)}"
                 f"{_less(self.margin_bytes)} ({len(self.probes)} probe{'s' if len(self.probes) != 1 else ''}; "
                 f"{self.stopped}; {bound})"]
        for p in self.probes:
            seen = (f"peaked at {format_bytes(p['peak_bytes'])}" if p["peak_bytes"] is not None
                    else f"ran out of memory ({p['error']})")
            said = "-" if math.isnan(p["upper_bytes"]) else format_bytes(p["upper_bytes"])
            lines.append(f"  {'re-check' if p.get('recheck') else 'probe'} {p['size']:,} items ({p['num_nodes']:,} "
                         f"nodes, {p['num_edges']:,} edges): forecast {said}, {seen}")
        if self.batch_size and self.before_training:
            lines.append(f"note: {self.before_training}")
        return "\n".join(lines)


class ShapeLacksTerms(ValueError):
    """A shape the search would forecast lacks one of the model's terms: none of a term is not 0 of
    it (a batch read for its totals alone has papers, whatever its shape does not say)."""


def _given(model: MemoryModel, shape: dict[str, Any], where: str) -> dict[str, float]:
    """The model's terms as ``shape`` gives them; :class:`ShapeLacksTerms` naming each one it lacks
    (absent or None) and ``where`` the shape came from."""
    missing = [t for t in model.terms if shape.get(t) is None]
    if missing:
        raise ShapeLacksTerms(f"the shapes lack {', '.join(missing)}, which the model of {model.label!r} needs "
                              f"(its terms: {', '.join(model.terms)}); the shape from {where} has "
                              f"{', '.join(t for t, v in shape.items() if v is not None) or 'no field'}")
    return {t: float(shape[t]) for t in model.terms}


def _source(shape_of: Callable[[int], dict[str, float]]) -> str:
    """Where the search's shapes of a size come from, in words."""
    how = getattr(shape_of, "how", None)
    return f"the heaviest batch of a size ({how})" if how else "the heaviest batch of a size"


def _aim(model: MemoryModel, shape_of: Callable[[int], dict[str, float]], target: float, scale: float,
         cap: int, start: int = 1, where: str = "the heaviest batch of a size") -> int:
    """The largest size in [0, cap] whose heaviest batch's forecast (its growing part times
    ``scale``) stays under ``target``: the probe measures whether it does. ``start``: a size that
    fits (the floor), where the doubling starts. A shape that lacks one of the model's terms raises
    :class:`ShapeLacksTerms` (``where``: what gave it)."""
    const = model.coefficients["const"]

    def forecast(shape: dict[str, float]) -> float:
        point = model.predict(**_given(model, shape, where)).bytes
        return const + scale * (point - const)

    near = getattr(shape_of, "within", 0.0)  # a sampled shape costs a few samplings: an aim within CLOSE / 2
    return largest(lambda k: forecast(shape_of(k)) <= target, max(cap, 0), max(near, CLOSE / 2) if near else 0.0,
                   start)


def aimed_upper(model: MemoryModel, shape: dict[str, float], scale: float,
                where: str = "the batch's shape") -> float:
    """The forecast upper bound a probe aims with for a batch of ``shape``: its growing part (above
    the constant) times ``scale``, bytes; a shape that lacks one of the model's terms raises
    :class:`ShapeLacksTerms` (``where``: what gave it)."""
    const = model.coefficients["const"]
    upper = model.predict(**_given(model, shape, where),
                          **{t: shape[t] for t in model.confounded if shape.get(t)}).upper_bytes
    return const + scale * (upper - const)


def search(probe: Probe, refit: Callable[[], MemoryModel], measured: list[tuple[int, dict[str, int], float]],
           count: int, capacity: int, fraction: float, probes: int,
           heaviest: Callable[[int], dict[str, float]] | None = None) -> BatchSizeSearch:
    """Probe toward the largest size that fits (module docstring). ``measured``: the calibration's
    (size, shape, peak bytes), in the order they ran; ``count``: the items there are;
    ``capacity``: bytes; ``heaviest``: the shape of the heaviest batch of a size
    (:class:`~gnnmon.forecast.shapes.Heaviest`: sampled at the size, or the costliest graphs
    summed), else the items per batch of the largest batches measured times the size (each shape
    field's: the totals, and a heterogeneous batch's count of each node and edge type, which a
    model of per-type terms forecasts from)."""
    target = fraction * capacity
    out = BatchSizeSearch(0, target, capacity, items=count)
    latest = refit()
    out.margin_bytes = margin = latest.resolution_bytes
    limit = target - margin  # a peak measured at or under it is under the target, whatever the figure cannot resolve
    model: MemoryModel | None = latest if latest.trusted else None
    # every verdict, in the order measured; a calibration batch under the target lighter than the
    # heaviest a sampler draws at its size says nothing of that size (module docstring, 3)
    history = [(s, p, p <= limit) for s, sh, p in measured if p > limit or _as_heavy(heaviest, s, sh)]
    floor, floor_peak = max(((s, p) for s, p, fits in history if fits), default=(0, 0.0))
    # a size over the target below one under it is noise between draws: the bracket is above the floor
    ceiling, ceiling_peak = min(((s, p) for s, p, fits in history if not fits and s > floor),
                                default=(count + 1, math.nan))
    largest_ran = max((s for s, _, _ in measured), default=0)
    scale = 1.0
    runs = list(measured)
    rechecks = 0
    first = True
    cannot: str | None = None  # why the shapes aimed with cannot be forecast
    while True:
        stop = None
        if floor >= count:
            stop = f"the loader's whole set ({count:,} items) fits"
        elif ceiling <= count and floor and ceiling - 1 <= floor * (1 + CLOSE):  # the limit: floor to ceiling - 1
            stop = f"closed within {CLOSE:.0%}"
        elif sum(not p["recheck"] for p in out.probes) >= probes:
            stop = f"{probes} probes made"
        elif cannot is not None:
            stop = cannot
        else:
            if not first:
                latest = refit()
                if latest.trusted:
                    model = latest
            first = False
            if model is None:
                steps = next_steps(latest)
                stop = ("no trustworthy model to aim with: " + "; ".join(latest.problems)
                        + (f"; next: {'; '.join(steps)}" if steps else ""))
        last = out.probes[-1] if out.probes else None
        fresh = last is not None and last["size"] == floor and last["fits"]  # nothing ran since it was measured
        if stop is not None and (not floor or fresh or rechecks >= RECHECKS):
            out.stopped += stop if not out.stopped else f"; {stop}"
            if floor and not fresh:
                out.stopped += f"; {floor:,} was not measured again after {RECHECKS} re-checks"
            break
        aiming = model or latest
        if stop is not None:  # the answer again, in the state the search leaves (module docstring, 6)
            k, rechecks = floor, rechecks + 1
        elif ceiling <= count and floor:  # bracketed: the chord, or a step up where it lies closer
            step_up = min(count, max(floor + 1, math.ceil(floor * (1 + CLOSE))))  # tests "the floor is the limit"
            stuck = len(out.probes) >= 2 and not out.probes[-1]["fits"] and not out.probes[-2]["fits"]
            chord = (floor + (limit - floor_peak) / (ceiling_peak - floor_peak) * (ceiling - floor)
                     if ceiling_peak > floor_peak and not stuck else (floor + ceiling) / 2)
            k = max(step_up, min(ceiling - 1, int(chord)))  # twice over in a row: a jump; halve instead
        else:
            assert model is not None
            step_up = min(count, max(floor + 1, math.ceil(floor * (1 + CLOSE))))
            shape_of = heaviest or _per_item(runs)
            where = _source(heaviest) if heaviest is not None else _PER_ITEM
            try:
                k = _aim(model, shape_of, limit, scale, min(count, ceiling - 1, int(REACH * max(largest_ran, 1))),
                         max(floor, 1), where)
                one = aimed_upper(model, shape_of(1), scale, where) if k == 0 and floor == 0 else math.nan
            except ShapeLacksTerms as exc:  # none of a term is not 0 of it: no aim, the answer stays measured
                cannot = f"cannot forecast: {exc}"
                continue
            if k == 0 and floor == 0:
                out.stopped = (f"nothing fits: a batch of one item is forecast at up to "
                               f"{format_bytes(one)} (the model's constant "
                               f"{format_bytes(model.coefficients['const'])}), over the target {format_bytes(target)}"
                               + _less(margin) + ": a smaller model or batch item, a larger device, or a "
                               "fraction nearer 1")
                break
            k = max(k, step_up) if floor else max(k, 1)
        again = stop is not None
        shape, peak, fits, actual = _measure(out, probe, aiming, k, limit, capacity, recheck=again)
        history.append((k, actual, fits))
        if peak is not None:
            runs.append((k, shape, float(peak)))
        forecast = _forecast(aiming, shape)
        if forecast is not None:
            const = aiming.coefficients["const"]
            predicted = forecast.bytes
            if predicted > const and actual > const:  # the next aim follows what this probe measured
                scale = min(SCALE_LIMIT, max(1 / SCALE_LIMIT, (actual - const) / (predicted - const)))
        if fits:
            floor, floor_peak, largest_ran = k, actual, max(largest_ran, k)
        elif again:  # the answer went over on the state the search left: the next size under it, in turn
            ceiling, ceiling_peak = k, actual
            every: dict[int, tuple[bool, float]] = {}
            for s_, p_, f_ in history:
                every[s_] = (every.get(s_, (True, 0.0))[0] and f_, p_)
            floor, floor_peak = max(((s_, p_) for s_, (f_, p_) in every.items() if f_ and s_ < ceiling),
                                    default=(0, 0.0))
            out.stopped += f"{'; ' if out.stopped else ''}{k:,} went over the target when measured again"
        else:
            ceiling, ceiling_peak = k, actual
    out.batch_size = floor
    out.over = ceiling if ceiling <= count else None
    return out


def _as_heavy(heaviest: Callable[[int], dict[str, float]] | None, size: int, shape: dict[str, Any]) -> bool:
    """Whether a calibration batch of ``size`` items and ``shape`` is as heavy as the heaviest batch
    of the size ``heaviest`` gives, where that is a sampler's (:class:`~gnnmon.forecast.shapes.Heaviest`
    with no :attr:`~gnnmon.forecast.shapes.Heaviest.order`: a random draw can be far lighter than
    the batches an epoch makes); True for anything else (whole graphs, a given function)."""
    if heaviest is None or getattr(heaviest, "order", False) is not None or not hasattr(heaviest, "key"):
        return True
    key = heaviest.key
    return bool(key(shape) >= key(heaviest(size)))


_PER_ITEM = "the items per batch of the largest batches measured"
"""Where :func:`_per_item`'s shapes come from, in words."""


def _per_item(runs: list[tuple[int, dict[str, int], float]]) -> Callable[[int], dict[str, float]]:
    """Each shape field's most per item among the largest batches measured times the size (where
    no heavier batch of a size is known): the totals, and for a heterogeneous batch each node and
    edge type's count (``num_nodes__<type>``, ``num_edges__<src>__<rel>__<dst>``), so a model
    fitted on per-type terms forecasts the size from them. A field none of them gives is left out
    (never 0 of it: a forecast that needs it says the shapes lack it)."""
    top = max(s for s, _, _ in runs)
    biggest = [sh for s, sh, _ in runs if s == top]
    fields = [*SHAPE_KEYS, *sorted({t for sh in biggest for t in sh if t.startswith(("num_nodes__", "num_edges__"))})]
    per = {t: max(sh[t] for sh in biggest if sh.get(t) is not None) / top
           for t in fields if any(sh.get(t) is not None for sh in biggest)}
    return lambda k: {t: k * v for t, v in per.items()}


def _forecast(model: MemoryModel, shape: dict[str, Any]) -> Prediction | None:
    """The trusted ``model``'s :class:`~gnnmon.report.memory.model.Prediction` for a probe's
    ``shape``; None without a trusted model or where the shape lacks one of its terms (none of a
    term is not 0 of it: the probe has no forecast)."""
    if not model.trusted:
        return None
    try:
        return model.predict(**_given(model, shape, "the probe's batch"))
    except ShapeLacksTerms:
        return None


def _measure(out: BatchSizeSearch, probe: Probe, model: MemoryModel, k: int, limit: float, capacity: int,
             recheck: bool) -> tuple[dict[str, int], float | None, bool, float]:
    """Run one probe of ``k`` items and note it: (its shape, its peak or None, whether it is
    under ``limit``, its peak or the whole ``capacity`` after an out-of-memory error)."""
    shape, peak, error = probe(k)
    forecast = _forecast(model, shape)
    upper = forecast.upper_bytes if forecast is not None else math.nan
    fits = peak is not None and peak <= limit
    out.probes.append({"size": k, **shape, "upper_bytes": upper, "peak_bytes": peak, "fits": fits,
                       "error": error, "recheck": recheck})
    return shape, peak, fits, float(capacity) if peak is None else float(peak)


def _less(margin: float) -> str:
    return f" less the {format_bytes(margin)} the figure cannot resolve" if margin else ""
