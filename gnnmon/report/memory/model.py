"""A step's peak memory as a linear function of its batch's shape, fitted over a run's rows.

``peak ≈ const + a·num_nodes + b·num_edges (+ c·num_graphs)``, bytes: message passing holds a
few tensors per node (features, hidden states, their gradients) and per edge (the messages), and
the rest (weights, optimizer state, workspace) does not grow with the batch. The fit leaves out
the first ``warmup`` calls of the label, failed calls, and outliers (residuals beyond 4 robust
spreads and beyond the figure's resolution, at most :data:`OUTLIER_FLOOR_CAP_BYTES`, refitted
until none is left out), and refuses to be
trusted when it cannot be: too few rows, shapes that barely vary (no row says what a larger batch
costs), a shape that explains little of the peak, a peak that curves with the shape, or more rows
left out than gross errors explain (:func:`~gnnmon.report.memory.least_squares.too_many_left_out`:
such a fit describes the rows it keeps, not the batches). An untrusted model says why
(:attr:`MemoryModel.problems`) and will not predict. Rows with each node or edge type's count (a
heterogeneous batch) are fitted on those counts where the totals leave rows out, explain little or
cannot be trusted, and chosen where the types' fit is trusted and the totals' is not, or both are
and the types' fit misses the rows both keep by under 0.7 of the totals' residual.

What memory is constrains the fit: a batch never needs less memory for being larger, so no
coefficient of a shape is negative (the least-squares fit under that constraint: where the
unconstrained one would go below 0, the term is held at 0 and the model says so), and no forecast
is below the constant. Two shape fields that move together in every row (a sampled batch's edges
and nodes, 1.4-1.7 edges per node: values and ranks both correlated beyond :data:`MAX_CORR`)
cannot be told apart: the second is left out and the model says
which split it cannot identify (:attr:`MemoryModel.confounded`); it still predicts along the
ratio it saw, and for a batch off that ratio its upper bound is the larger of the two ways of
splitting the cost (all of it on one field, or all on the other), so a denser batch is never
forecast to fit for the split being unknown.

The upper bound of a prediction is one-sided, at ``confidence``: the fit's robust residual spread
and its uncertainty at that shape (growing away from the shapes seen), under a normal residual;
beyond the shapes seen it widens by the error the model's own rows showed when the smaller ones
were fitted and the larger ones forecast (:mod:`gnnmon.report.memory.extrapolation`). A model of
the host's RSS holds, in every upper bound, what RSS cannot resolve between two states of the
process (:func:`host_resolution`); a GPU allocator's count needs nothing more.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from statistics import NormalDist
from typing import Any

import numpy as np

from gnnmon.data.table import Part, Table
from gnnmon.figures import MEM_PEAK, MEM_PEAK_DELTA, MEM_START, RSS_PEAK, RSS_PEAK_DELTA, RSS_START
from gnnmon.report.memory import extrapolation
from gnnmon.report.memory.extrapolation import Extrapolation
from gnnmon.report.memory.least_squares import (
    GROSS_ERROR_CHANCE,
    GROSS_ERROR_RATE,
    lstsq,
    nonneg,
    robust_fit,
    too_many_left_out,
    varies,
)

TERMS = ("num_nodes", "num_edges", "num_graphs")
"""The shape fields a model is fitted on by default (those that vary among the rows)."""

PER = {"num_nodes": "node", "num_edges": "edge", "num_graphs": "graph"}

FIGURES = (MEM_PEAK_DELTA.name, MEM_PEAK.name, RSS_PEAK_DELTA.name, RSS_PEAK.name)
"""Figures a model may be fitted on: the peak above the step's start, or the absolute peak."""
STARTS = {MEM_PEAK.name: MEM_START.name, RSS_PEAK.name: RSS_START.name}
"""The memory held at the step's start, for each absolute figure."""

MIN_R2 = 0.9
HEAP_SLACK_BYTES = 256 * 1024
"""What glibc keeps free at the top of its heap before it gives memory back once
``gnnmon.exact_host_memory()`` set its trim threshold (128 KiB) and top pad (128 KiB), bytes: a
step's peak above what the process held moves by up to that much with the heap's state, whatever
its tensors do. Each thread that allocates on its own heap (a glibc arena) can add as much."""
RSS_COUNTERS = 3
"""The counters Linux sums into a process's RSS: anonymous, file and shared-memory pages."""
OUTLIER_FLOOR_CAP_BYTES = HEAP_SLACK_BYTES + 2 * RSS_COUNTERS * 2 * 32 * 4096
"""The most of :func:`host_resolution` a fit passes as the outlier floor (a row that close to the
fit is never an outlier, :func:`~gnnmon.report.memory.least_squares.robust_fit`), bytes: the
resolution of a 2-CPU host with 4 KiB pages, 1.75 MiB. The floor is there for the RSS counters'
lag, seen at ±1.1 MiB on this project's 2-core VM, which lies under it. :func:`host_resolution`
is a worst case that grows with the CPUs (a batch of pages on every one: 12.25 MiB on 16, 192 MiB
on 64, 768 MiB on 128), and a floor that high keeps a gross error in the fit (a warm-up-like row
60 MiB high at the largest batch bent a 64-CPU fit to 2,418 bytes a node for 3,000). A host whose
readings do lag further shows it in its rows' scatter, and the outlier limit, 4 robust spreads
of it, follows; every upper bound still holds the whole :func:`host_resolution`."""
MAX_CORR = 0.95
"""Two shape fields whose values (Pearson's correlation) and ranks (Spearman's) are both more
correlated than this cannot be told apart: the second is left out, and bounds a prediction off
the ratio they kept (:attr:`MemoryModel.confounded`). Both, as each alone misleads
(:func:`_moves_with`): one batch far beyond the rest, at whatever mix of the two, makes their
values' correlation near 1 by itself, hiding that every other row varied them apart (their ranks
say so); and a few rows far off the others' ratio, ``calibrate``'s denser twins (2.5 edges a node
beside sampled batches' 1.4-1.7), tell the two apart by their values but barely move the ranks,
where the twins' sizes fall among the others' (edges confounded in 34 of 50 seeds on ranks alone,
2 on values)."""
RATIO_SLACK = 1.1
"""A batch whose ratio of two confounded fields lies beyond the ratios seen by more than this
factor is off the direction the model saw (its prediction says ``extrapolated``)."""


def format_bytes(n: float) -> str:
    """Bytes in the largest binary unit that keeps the number at 1 or more (``1.9 KiB``, ``210 MiB``)."""
    sign, n = ("-" if n < 0 else ""), abs(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{sign}{n:.0f} {unit}" if unit == "B" or n >= 100 else f"{sign}{n:.3g} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def per_of(term: str) -> str:
    """What a coefficient is per: ``node``, ``edge``, ``graph``, or a type (``paper node``)."""
    if term in PER:
        return PER[term]
    if term.startswith("num_nodes__"):
        return f"{term[len('num_nodes__'):]} node"
    if term.startswith("num_edges__"):
        return f"{term[len('num_edges__'):].replace('__', ' ')} edge"
    return term


@dataclass(frozen=True)
class Prediction:
    """A forecast peak for one shape, bytes."""

    bytes: float
    upper_bytes: float
    """Not exceeded by ``confidence`` of steps of that shape, under the fit's residual spread."""
    confidence: float
    extrapolated: bool
    """The shape lies beyond the largest one the model saw (by more than 10 %)."""
    widened_bytes: float = 0.0
    """What the upper bound holds for the model's measured error beyond its shapes
    (:mod:`gnnmon.report.memory.extrapolation`), bytes; 0 within them."""
    resolution_bytes: float = 0.0
    """What the upper bound holds for the figure's resolution (:attr:`MemoryModel.resolution_bytes`),
    bytes."""


class UntrustedModelError(ValueError):
    """A prediction asked of a model that cannot be trusted; the message says why."""


@dataclass
class MemoryModel:
    """The fitted model of one label's peak memory (see the module's docstring)."""

    label: str
    figure: str
    devices: list[str]
    terms: tuple[str, ...]
    coefficients: dict[str, float]
    """Bytes per unit of each term, and ``const`` (bytes)."""
    rows: int
    """Rows the fit used (after warm-up, failures and outliers were left out)."""
    outliers: int
    r2: float
    spread_bytes: float
    """The robust standard deviation of the residuals (1.4826 × their MAD), bytes."""
    confidence: float
    ranges: dict[str, tuple[float, float]]
    """Each term's smallest and largest value among the rows used."""
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    confounded: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each field left out for moving with a term (``num_edges`` with ``num_nodes``): ``with``
    (the term), ``ratio`` (the smallest and largest field/term ratio among the rows) and
    ``coefficients`` (the fit with this field in the term's place: the other split of the cost)."""
    extrapolation: Extrapolation | None = None
    """How the error grew beyond the smaller rows' shapes (the rate that widens a bound beyond the
    shapes seen); None for a model with nothing fitted."""
    start_bytes: float | None = None
    """What the device held at the fitted steps' start without their batch, bytes (the constant of
    their start fitted on the shape; a model of the absolute peak whose rows record the start, else
    None): the part of the constant that is not the step's. On the CPU it is the whole process's
    RSS, which drifts as the process runs (:meth:`anchored`)."""
    pid: int | None = None
    """The process that recorded the fitted rows, where the run's manifest says."""
    anchor_bytes: float = 0.0
    """What :meth:`anchored` added to the constant, bytes."""
    resolution_bytes: float = 0.0
    """What the figure cannot resolve between two states of the device, added to every upper bound,
    bytes: :func:`host_resolution` for the host's RSS, 0 for a GPU allocator's count."""
    _inverse: Any = None  # (XᵀX)⁻¹ of the scaled design, for the prediction's uncertainty
    _scale: Any = None
    _kept: Any = None  # the positions in the label's rows of those the fit kept

    @property
    def trusted(self) -> bool:
        return not self.problems

    def anchored(self, held_bytes: float) -> MemoryModel:
        """This model for a device that holds ``held_bytes`` when the step starts: its constant (and
        the other split's) raised by what that is above :attr:`start_bytes`, never lowered. A model
        of the absolute peak measured the memory held then; on the CPU that is the whole process,
        and whatever it holds more by the time of the forecast (objects, loaders, heap growth) adds
        to every peak."""
        if self.start_bytes is None:
            raise ValueError(f"the model of {self.label!r} ({self.figure}) does not know the memory held at its "
                             f"steps' start: anchor a model of the absolute peak fitted on rows that record it")
        shift = max(0.0, float(held_bytes) - self.start_bytes)
        if shift < 1.0:  # under a byte: the start's fit rounding, not memory
            return self
        confounded = {k: {**v, "coefficients": {**v["coefficients"], "const": v["coefficients"]["const"] + shift}}
                      for k, v in self.confounded.items()}
        return replace(self, coefficients={**self.coefficients, "const": self.coefficients["const"] + shift},
                       confounded=confounded, start_bytes=self.start_bytes + shift,
                       anchor_bytes=self.anchor_bytes + shift, notes=list(self.notes), problems=list(self.problems))

    def units(self) -> dict[str, str]:
        """Each coefficient's unit: ``bytes/node`` ..., ``bytes`` for ``const``."""
        return {t: ("bytes" if t == "const" else f"bytes/{per_of(t)}") for t in self.coefficients}

    def predict(self, num_nodes: float | None = None, num_edges: float | None = None,
                num_graphs: float | None = None, **per_type: float) -> Prediction:
        """The peak (bytes) for a batch of this shape; every term of the model must be given.
        Raises :class:`UntrustedModelError` for a model that cannot be trusted."""
        if self.problems:
            raise UntrustedModelError(f"the memory model of {self.label!r} cannot be trusted: "
                                      + "; ".join(self.problems))
        given = {"num_nodes": num_nodes, "num_edges": num_edges, "num_graphs": num_graphs, **per_type}
        missing = [t for t in self.terms if given.get(t) is None]
        if missing:
            raise ValueError(f"the model of {self.label!r} needs {', '.join(missing)} "
                             f"(its terms: {', '.join(self.terms)})")
        x = np.array([1.0, *(float(given[t]) for t in self.terms)])  # type: ignore[arg-type]
        value = _value(self.coefficients, self.terms, given)
        z = x / self._scale
        leverage = float(z @ self._inverse @ z)
        q = NormalDist().inv_cdf(self.confidence)
        width = q * self.spread_bytes * math.sqrt(1.0 + max(leverage, 0.0))
        upper = value + width
        beyond = any(x[i + 1] > self.ranges[t][1] * RATIO_SLACK for i, t in enumerate(self.terms))
        for name, split in self.confounded.items():
            other, partner = given.get(name), float(given[split["with"]])  # type: ignore[arg-type]
            if other is None:
                continue
            lo, hi = split["ratio"]
            ratio = float(other) / partner if partner else math.inf
            if not lo / RATIO_SLACK <= ratio <= hi * RATIO_SLACK:
                beyond = True  # off the direction the model saw
            alt_terms = tuple(name if t == split["with"] else t for t in self.terms)
            upper = max(upper, _value(split["coefficients"], alt_terms, given) + width)
        size = max((float(given[t]) / self.ranges[t][1] for t in self.terms if self.ranges[t][1] > 0),  # type: ignore[arg-type]
                   default=0.0)
        widened = (self.extrapolation.widening(size, value - self.coefficients["const"])
                   if self.extrapolation else 0.0)
        # whole bytes, rounded up: a fit with no spread forecasts a peak to within rounding, not under it
        return Prediction(value, float(math.ceil(upper + widened + self.resolution_bytes)), self.confidence,
                          beyond, widened, self.resolution_bytes)

    def summary(self) -> str:
        """The model in plain words, or why it cannot be trusted."""
        head = f"{self.label}: {self.figure}"
        if self.problems:
            return f"{head}: no trustworthy model ({'; '.join(self.problems)})"
        formula = ""
        for t in (*self.terms, "const"):
            c = self.coefficients[t]
            term = format_bytes(abs(c)) + ("" if t == "const" else f" per {per_of(t)}")
            formula += (f" {'-' if c < 0 else '+'} " if formula else "-" if c < 0 else "") + term
        left = f", {self.outliers} outlier{'s' if self.outliers != 1 else ''} left out" if self.outliers else ""
        text = (f"{head} ≈ {formula} (r² {self.r2:.3f} over {self.rows} rows{left}; residual spread "
                f"{format_bytes(self.spread_bytes)}, {self.confidence:.0%} upper bound "
                f"+{format_bytes(NormalDist().inv_cdf(self.confidence) * self.spread_bytes + self.resolution_bytes)} "
                f"at the shapes seen{self._resolution_said()})")
        grow = self.extrapolation
        if grow is not None:
            top = {t: 2 * self.ranges[t][1] for t in self.terms}
            twice = _value(self.coefficients, self.terms, top) - self.coefficients["const"]
            how = (f"a fit of the smaller rows missed the {grow.checked_rows} larger ones by a peak that curves"
                   if grow.curvature else f"at least {extrapolation.FLOOR:.0%} of the growing part per doubling"
                   + ("" if grow.curvature is not None else f"; the curve is not measured: {grow.why_not}"))
            text += (f"; beyond the shapes seen the upper bound widens, by {format_bytes(grow.widening(2.0, twice))} "
                     f"at twice the largest ({how})")
        if self.anchor_bytes:
            text += (f"; the constant is raised by {format_bytes(self.anchor_bytes)}: the device held that much more "
                     f"than at the fitted steps' start")
        for name, split in self.confounded.items():
            lo, hi = split["ratio"]
            text += (f"; {name} moves with {split['with']} ({lo:.3g}-{hi:.3g} {per_of(name)}s per "
                     f"{per_of(split['with'])} in every row): their split cannot be told apart, so the cost is "
                     f"put on {per_of(split['with'])}s, and a batch off that ratio is bounded by the other split "
                     f"({format_bytes(split['coefficients'][name])} per {per_of(name)})")
        return text

    def _resolution_said(self) -> str:
        if not self.resolution_bytes:
            return ""
        return (f", {format_bytes(self.resolution_bytes)} of it what the host's RSS cannot resolve: what glibc keeps "
                f"free at its heap's top and Linux's per-CPU RSS counters lag")

    def __str__(self) -> str:
        return self.summary()

    def as_dict(self) -> dict[str, Any]:
        """The model as plain data (JSON-ready)."""
        return {"label": self.label, "figure": self.figure, "devices": self.devices, "terms": list(self.terms),
                "coefficients": self.coefficients, "units": self.units(), "rows": self.rows,
                "outliers": self.outliers, "r2": self.r2, "spread_bytes": self.spread_bytes,
                "confidence": self.confidence, "ranges": {t: list(r) for t, r in self.ranges.items()},
                "trusted": self.trusted, "problems": self.problems, "notes": self.notes,
                "confounded": {k: {"with": v["with"], "ratio": list(v["ratio"]), "coefficients": v["coefficients"]}
                               for k, v in self.confounded.items()},
                "extrapolation": None if self.extrapolation is None else {
                    "curvature_bytes": self.extrapolation.curvature, "checked_rows": self.extrapolation.checked_rows,
                    "checked_to": self.extrapolation.checked_to, "why_not": self.extrapolation.why_not},
                "start_bytes": self.start_bytes, "pid": self.pid, "anchor_bytes": self.anchor_bytes,
                "resolution_bytes": self.resolution_bytes, "summary": self.summary()}


def _value(coefficients: dict[str, float], terms: Sequence[str], given: dict[str, Any]) -> float:
    """``const + Σ coefficient·value`` for the terms, bytes."""
    return float(coefficients["const"] + sum(coefficients[t] * float(given[t]) for t in terms))


def _pick_label(table: Table, figure: str) -> str:
    best, most = None, 0
    for label, part in table.parts.items():
        if figure in part.cols and "num_nodes" in part.cols:
            n = int(np.sum(~np.isnan(part.numbers(figure)) & ~np.isnan(part.numbers("num_nodes"))))
            if n > most:
                best, most = label, n
    if best is None:
        raise ValueError(f"no label's rows carry both {figure} and a batch shape (num_nodes): decorate the step "
                         f"that takes the PyG batch with @monitor_memory_device, or call record_graph(batch) in it")
    return best


def _rows(part: Part, figure: str, terms: Sequence[str], device: str | None, warmup: int,
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], np.ndarray]:
    """The usable rows' shape matrix, figure and start (:data:`STARTS`; NaN where unknown), their
    devices, and their positions among the label's rows."""
    y = part.numbers(figure)
    keep = ~np.isnan(y) & (part.numbers("index") >= warmup)
    keep &= np.array([e is None for e in part.objects("error")], dtype=bool) if "error" in part.cols else True
    devices = part.objects("device") if "device" in part.cols else [None] * part.n
    if device is not None:
        keep &= np.array([d == device for d in devices], dtype=bool)
    cols = [part.numbers(t) if t in part.cols else np.full(part.n, math.nan) for t in terms]
    for c in cols:
        keep &= ~np.isnan(c)
    x = np.column_stack(cols)[keep] if cols else np.empty((int(keep.sum()), 0))
    start = part.numbers(STARTS[figure]) if STARTS.get(figure) in part.cols else np.full(part.n, math.nan)
    used = sorted({str(d) for d, k in zip(devices, keep, strict=True) if k and d is not None})
    return x, y[keep], start[keep], used, np.flatnonzero(keep)


def prime() -> None:
    """Run the fit's numerical routines once, on a small planted problem. Their first call in a
    process leaves lasting host memory behind (numpy's BLAS and LAPACK buffers: about 2-5 MiB of
    RSS with OpenBLAS), so a calibration that fits after measuring the process's constant on the
    CPU would find the process holding more than it measured; :func:`gnnmon.calibrate` primes
    before its first step."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(24):
        n = int(rng.integers(100, 1000))
        e = int(n * rng.uniform(1, 4))
        rows.append({"label": "prime", "index": i, "num_nodes": n, "num_edges": e,
                     MEM_PEAK.name: 1e8 + 1e3 * n + 1e2 * e + float(rng.normal(0, 1e3))})
    model = fit(Table(rows), "prime", MEM_PEAK.name, warmup=0)
    model.predict(num_nodes=2000, num_edges=8000)
    model.summary()


def fit(table: Table, label: str | None = None, figure: str = MEM_PEAK_DELTA.name, *,
        device: str | None = None, warmup: int = 2, terms: Sequence[str] | None = None,
        confidence: float = 0.95, pid: int | None = None, cpus: int | None = None,
        usable: int | None = None) -> MemoryModel:
    """Fit the memory model of ``label``'s rows (see :meth:`gnnmon.Report.memory_model`); ``pid``,
    ``cpus`` and ``usable``: the process that recorded them, its machine's CPUs and those it could
    run on (its run's manifest)."""
    if figure not in FIGURES:
        raise ValueError(f"figure must be one of {', '.join(FIGURES)}; got {figure!r}")
    if not 0.5 <= confidence < 1:
        raise ValueError(f"confidence must be in [0.5, 1), got {confidence!r}")
    label = _pick_label(table, figure) if label is None else label
    part = table.parts.get(label)
    if part is None:
        raise ValueError(f"no rows labelled {label!r}; the labels here: {', '.join(table.labels()) or 'none'}")
    if figure not in part.cols:
        raise ValueError(f"the rows of {label!r} carry no {figure}: measure them with @monitor_memory_device")
    if terms is None:
        model = _fit(part, label, figure, tuple(t for t in TERMS if t in part.cols), device, warmup, confidence,
                     pid, cpus, usable, auto=True)
        typed = tuple(k for k in part.cols if k.startswith(("num_nodes__", "num_edges__")))
        # a heterogeneous batch: per-type terms may explain more, or explain the rows the totals left out
        if typed and (model.problems or model.r2 < 0.99 or model.outliers):
            other = _fit(part, label, figure, typed, device, warmup, confidence, pid, cpus, usable, auto=True)
            if not other.problems:
                if model.problems:  # a trusted model always beats an untrusted one
                    other.notes.append(f"per-type terms, as the totals' fit cannot be trusted "
                                       f"({'; '.join(model.problems)})")
                    return other
                rows, (mine, theirs) = _rms_where_both_kept(part, figure, (model, other))
                if theirs < 0.7 * mine:
                    other.notes.append(f"per-type terms fit better than the totals (residuals of "
                                       f"{format_bytes(theirs)} < {format_bytes(mine)} root-mean-square over the "
                                       f"{rows} rows both fits keep)")
                    return other
        return model
    return _fit(part, label, figure, tuple(terms), device, warmup, confidence, pid, cpus, usable, auto=False)


def _ranks(v: np.ndarray) -> np.ndarray:
    """Each value's rank among ``v`` (from 0), tied values at their ranks' mean."""
    order = np.argsort(v, kind="stable")
    ranks = np.empty(len(v))
    ranks[order] = np.arange(len(v))
    _, tie = np.unique(v, return_inverse=True)
    return (np.bincount(tie, ranks) / np.bincount(tie))[tie]


def _moves_with(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two shape fields move together: their values' and their ranks' correlations both
    beyond :data:`MAX_CORR`."""
    return (abs(float(np.corrcoef(a, b)[0, 1])) > MAX_CORR
            and abs(float(np.corrcoef(_ranks(a), _ranks(b))[0, 1])) > MAX_CORR)


def _rms_where_both_kept(part: Part, figure: str, models: Sequence[MemoryModel]) -> tuple[int, list[float]]:
    """Each model's root-mean-square residual over the rows every one of them kept, bytes (and how
    many rows): the models are compared on the same rows, and on none that a trusted fit left out
    as a gross error (over the rows either kept, a gross error the other fit kept in would count
    against the fit that rightly left it out)."""
    rows = np.asarray(models[0]._kept, dtype=int)
    for m in models[1:]:
        rows = np.intersect1d(rows, np.asarray(m._kept, dtype=int))
    y = part.numbers(figure)[rows]
    predicted = [m.coefficients["const"] + sum((m.coefficients[t] * part.numbers(t)[rows] for t in m.terms),
                                               np.zeros(len(rows))) for m in models]
    known = np.isfinite(y) & np.logical_and.reduce([np.isfinite(p) for p in predicted])
    return int(known.sum()), [float(np.sqrt(np.mean((y[known] - p[known]) ** 2))) if known.any() else math.nan
                              for p in predicted]


def _fit(part: Part, label: str, figure: str, terms: tuple[str, ...], device: str | None, warmup: int,
         confidence: float, pid: int | None, cpus: int | None, usable: int | None, auto: bool) -> MemoryModel:
    x, y, start, devices, where = _rows(part, figure, terms, device, warmup)
    if device is None and len({d.split(":")[0] for d in devices}) > 1:
        raise ValueError(f"the rows of {label!r} ran on {', '.join(devices)}: pass device= to fit one of them")
    problems: list[str] = []
    notes: list[str] = []
    kept: list[int] = []
    for i, t in enumerate(terms):
        if not len(y):
            continue
        if varies(x[:, i]):
            kept.append(i)
            continue
        span = f"({float(x[:, i].min()):,.0f}-{float(x[:, i].max()):,.0f})"
        if auto:
            notes.append(f"{t} left out: it barely varies {span}")
        else:
            problems.append(f"{t} barely varies {span}")
    moves_with: dict[int, int] = {}
    for j in list(kept):
        for i in kept:
            if i < j and j in kept and _moves_with(x[:, i], x[:, j]):
                kept.remove(j)
                moves_with[j] = i
    used = tuple(terms[i] for i in kept)
    need = max(10, 3 * (len(used) + 1))
    if len(y) < need:
        problems.append(f"too few rows: {len(y)} usable after {warmup} warm-up calls and failures, {need} needed")
    elif not used:
        problems.append("the batch shapes barely vary: no row says what a larger batch costs "
                        "(gnnmon.calibrate(step, loader) runs your step on a few batches of spread sizes "
                        "before training, in seconds; or vary the batch size)")
    design = np.column_stack([np.ones(len(y)), x[:, kept]]) if len(y) else np.empty((0, 1 + len(kept)))
    scale = np.maximum(np.abs(design).max(axis=0), 1.0) if len(y) else np.ones(1 + len(kept))
    z = design / scale
    coefficients: dict[str, float] = {"const": math.nan, **{t: math.nan for t in used}}
    r2, spread, outliers, inverse, ranges, grow = math.nan, math.nan, 0, None, {}, None
    confounded: dict[str, dict[str, Any]] = {}
    held, kept_rows = None, where
    resolution = _resolution(figure, devices, cpus, usable)
    if len(y) >= len(used) + 2:
        beta, inliers, spread = robust_fit(z, y, min(resolution, OUTLIER_FLOOR_CAP_BYTES))
        beta = beta / scale
        coefficients = {"const": float(beta[0]), **{t: float(beta[i + 1]) for i, t in enumerate(used)}}
        free = lstsq(z[inliers], y[inliers]) / scale  # what the fit would say without the constraint
        for i, t in enumerate(used):
            if free[i + 1] < 0:
                notes.append(f"{t}: an unconstrained fit gives {format_bytes(float(free[i + 1]))} per {per_of(t)}, "
                             f"which no batch costs; held at 0")
        for j, i in moves_with.items():  # the other split: this field in its partner's place
            alt_cols = [j if k == i else k for k in kept]
            alt = np.column_stack([np.ones(len(y)), x[:, alt_cols]])
            alt_scale = np.maximum(np.abs(alt).max(axis=0), 1.0)
            alt_beta = nonneg(alt[inliers] / alt_scale, y[inliers]) / alt_scale
            with np.errstate(divide="ignore", invalid="ignore"):
                ratios = x[inliers, j] / x[inliers, i]
            ratios = ratios[np.isfinite(ratios)]
            confounded[terms[j]] = {
                "with": terms[i], "ratio": (float(ratios.min()), float(ratios.max())) if len(ratios) else (0.0, 0.0),
                "coefficients": {"const": float(alt_beta[0]),
                                 **{terms[k]: float(alt_beta[n + 1]) for n, k in enumerate(alt_cols)}}}
        outliers = int((~inliers).sum())
        yi, zi = y[inliers], z[inliers]
        resid = yi - design[inliers] @ beta
        total = float(np.sum((yi - yi.mean()) ** 2))
        r2 = 1.0 - float(np.sum(resid**2)) / total if total > 0 else (1.0 if not resid.any() else 0.0)
        inverse = np.linalg.pinv(zi.T @ zi)
        ranges = {t: (float(x[inliers, i].min()), float(x[inliers, i].max())) for t, i in zip(used, kept, strict=True)}
        if used and not problems:
            problems += _misfit(zi, yi, resid, r2, used)
        bound = too_many_left_out(len(y))
        if outliers >= bound:
            problems.append(
                f"the fit leaves out {outliers} of its {len(y)} rows as outliers ({outliers / len(y):.0%}): more than "
                f"gross errors explain ({bound} or more of {len(y)} rows happen under {GROSS_ERROR_CHANCE:.0%} of the "
                f"time at a {GROSS_ERROR_RATE:.0%} rate of them), so its r² and spread describe the rows it keeps "
                f"and miss the rest (a batch field it lacks, such as each node type's count, or a peak that moves "
                f"with something else)")
        kept_rows = where[inliers]
        grow = extrapolation.measure(x[inliers][:, kept], yi, NormalDist().inv_cdf(confidence), nonneg)
        held = _held_without_a_batch(z[inliers], start[inliers], scale)
        y = yi
    return MemoryModel(label, figure, devices, used, coefficients, int(len(y)), outliers, r2, spread, confidence,
                       ranges, problems, notes, confounded, grow, held, pid,
                       resolution_bytes=resolution, _inverse=inverse, _scale=scale, _kept=kept_rows)


def rss_counter_lag(cpus: int | None = None, usable: int | None = None) -> float:
    """How far one reading of the host's RSS may lag the pages the process holds, bytes: since Linux
    6.2 each of its :data:`RSS_COUNTERS` is kept per CPU and folded into the total in batches of
    max(32, 2 × online CPUs) pages (``lib/percpu_counter.c``), so a reading lags by up to a batch
    on each CPU the process may run on, for each counter (older kernels cache 64 pages per thread
    instead: not modelled). ``cpus`` and ``usable``: the recording machine's CPUs and the process's
    (its affinity; a run's manifest says both), else this machine's and this process's; pages of
    this machine's size."""
    n = cpus or os.cpu_count() or 1
    if usable is None:  # a manifest without it: every CPU it names; no manifest: this process's
        usable = len(os.sched_getaffinity(0)) if cpus is None and hasattr(os, "sched_getaffinity") else n
    on = min(usable, n)
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    return float(RSS_COUNTERS * on * max(32, 2 * n) * page)


def host_resolution(cpus: int | None = None, usable: int | None = None) -> float:
    """What a figure of the host's RSS cannot resolve between two states of the process, bytes:
    :data:`HEAP_SLACK_BYTES`, plus twice :func:`rss_counter_lag` (a peak above the memory held is
    the difference of two readings). With 4 KiB pages: 1.75 MiB on 2 CPUs, 12.25 MiB on 16."""
    return HEAP_SLACK_BYTES + 2 * rss_counter_lag(cpus, usable)


def _resolution(figure: str, devices: Sequence[str], cpus: int | None, usable: int | None) -> float:
    """:func:`host_resolution` for a figure of the host's RSS (the process's RSS figures, or a CPU
    step's memory), else 0: a GPU allocator counts its blocks exactly."""
    host = figure in (RSS_PEAK.name, RSS_PEAK_DELTA.name) or (
        bool(devices) and all(d.split(":")[0] == "cpu" for d in devices))
    return host_resolution(cpus, usable) if host else 0.0


def _held_without_a_batch(z: np.ndarray, start: np.ndarray, scale: np.ndarray) -> float | None:
    """What the device held at a step's start, the batch's own memory taken out: the constant of
    the start fitted on the shape (the batch a step receives is held when it starts; a forecast
    made between steps holds none), whole bytes; None where the rows do not record the start."""
    known = ~np.isnan(start)
    if known.sum() < z.shape[1] + 2:
        return None
    beta = nonneg(z[known], start[known]) / scale
    return float(round(beta[0]))  # whole bytes: a fit's last digits are rounding, not memory


def _misfit(z: np.ndarray, y: np.ndarray, resid: np.ndarray, r2: float, used: tuple[str, ...]) -> list[str]:
    """Why a linear fit does not describe the peak, if it does not."""
    if r2 < MIN_R2:
        return [f"the batch shape explains only r² {r2:.2f} of the peak's variation (something else drives it)"]
    rss = float(np.sum(resid**2))
    if rss <= 0:
        return []
    curved = np.column_stack([z, z[:, 1:] ** 2])
    r_curved = y - curved @ lstsq(curved, y)
    if float(np.sum(r_curved**2)) < 0.25 * rss and np.max(np.abs(resid)) > 0.02 * max(float(np.mean(np.abs(y))), 1.0):
        return [f"the peak curves with {' and '.join(used)}: a linear model misses by up to "
                f"{format_bytes(float(np.max(np.abs(resid))))} (a squared term halves its error or better)"]
    return []
