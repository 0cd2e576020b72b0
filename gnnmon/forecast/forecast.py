"""Will it fit? Each batch a loader would make, forecast by a run's memory model, and the budgets
that keep the worst batch under a target share of the device's memory.

The model forecasts the absolute peak (:data:`~gnnmon.figures.MEM_PEAK` against nodes, edges and graphs; see
:mod:`gnnmon.report.memory.model`), so a batch fits when its forecast upper bound is under the
capacity. Budgets are found by bisection on the model's upper bound:

* ``max_num_nodes`` / ``max_num_edges``: the largest ``max_num`` of PyG's ``DynamicBatchSampler``
  in ``mode="node"`` / ``"edge"``, assuming a batch of that many nodes carries edges at the
  densest ratio of any graph where the loader batches whole graphs (a batch's ratio lies between
  its graphs'), else of any scanned batch (and in edge mode, nodes at the sparsest: of a neighbour
  loader's full batches, not its short last batch, whose few seeds share the fewest nodes);
* ``batch_size``: the largest batch size whose heaviest batch fits
  (:class:`~gnnmon.forecast.shapes.Heaviest`: for a neighbour loader, the heaviest of the batches
  one epoch at that size makes, its sampler alone on every seed once — sampled neighbourhoods
  overlap more as batches grow, so nodes per seed are sampled at each size, not scaled from the
  loader's —, and at least as heavy as the heaviest batch the scan read of as many items or fewer
  (a size whose own scanned batches are over the target is never answered); for whole graphs, the
  ones that cost most under the model, summed). These are the batches a calibration's batch-size search
  aims at and probes (:mod:`gnnmon.forecast.search`), so the two answers come from one model and
  one batch. Given plain batches (a run's rows), each size the scan read bounds a batch of ``k``
  items: ``k / s`` times the most nodes and edges of its ``s``-item batches where ``k >= s``
  (batches of more items share more nodes: a sampler's neighbourhoods overlap), their most where
  ``k < s``; the least of these, and below the smallest size read that size scaled down
  (:meth:`Forecast._scaled`), not a bound: a batch size there is said to be extrapolated
  (``extrapolated``). An upper bound on a sampler's batches beyond the sizes read, so a
  budget from a run's rows can be well below one from its loader. Rows of whole graphs (several
  graphs a batch, no seed count: :attr:`Forecast.batches_of`) share no nodes: ``k`` times the most
  per graph of the batches of ``k`` graphs or fewer, holding ``k`` graphs, linear in them. The
  budget says which batch it forecast (``batch_size_from``). ``batch_size_high`` is the same with
  the lower bound of the forecast: the model puts the limit between the two.

No budget goes beyond what the model can vouch for: :data:`VOUCH` times the largest batch it was
fitted on (a model fitted on 5,000-node batches does not size a 10-million-node one); a budget
that reaches that limit says so (``limited_by_model``).

A model fitted on per-type terms (a ``HeteroData`` step: ``num_nodes__<type>``,
``num_edges__<src>__<rel>__<dst>``) is read on shapes that carry each type's count: every batch's,
the heaviest batch of a size (summed or sampled per type), and, for plain batches, the most of each
type per item times the size; it vouches for each type up to :data:`VOUCH` times the most it saw. A
shape that lacks one of the model's terms is refused naming it (``ValueError``). Its budgets in
nodes and edges (``max_num_nodes``, ``max_num_edges``) are of the totals, as ``DynamicBatchSampler``
counts them, with each type at the most of it per node (per edge) of any batch or graph the scan
read (:data:`PER_NODE`, :data:`PER_EDGE`): a batch of whole graphs holds no larger share of a type
than its graphs do, so the budget bounds every mix the loader can make. Where the scan gives no such
share of a type the model asks (no batch with nodes, or one of that type's nodes with no edge at
all, which a sampler in edge mode cannot bound), that budget is not given: None, and the budget's
``samplers_why`` says why — never a 0, which would read as nothing fits. So for a model of the
totals: a batch or graph of nodes and no edge (or a shape with no edge count, or no batch with
nodes) leaves ``max_num_edges`` None, saying why.
"""

from __future__ import annotations

import heapq
import os
import re
from collections.abc import Callable, Sized
from dataclasses import dataclass, field
from typing import Any

import torch

from gnnmon.data.load import load
from gnnmon.data.result import RunResult
from gnnmon.devices import get_backend
from gnnmon.devices.malloc import mmap_threshold
from gnnmon.figures import MEM_PEAK, RSS_PEAK, RSS_PEAK_DELTA
from gnnmon.forecast.budget import Budget
from gnnmon.forecast.shapes import (
    SHAPE_KEYS,
    TYPED,
    Heaviest,
    batch_shapes,
    graph_size,
    heaviest,
    item_sizes,
    sampling,
    typed,
)
from gnnmon.report import Report
from gnnmon.report.diagnosis.creep import creep
from gnnmon.report.loops import loops
from gnnmon.report.memory.model import MemoryModel, UntrustedModelError, format_bytes, host_resolution

_SIZE = re.compile(r"^\s*([0-9.]+)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_FACTOR = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
           "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def parse_capacity(capacity: Any) -> tuple[int | None, str | None]:
    """(bytes, what it is) from bytes, a size (``"80GiB"``, ``"80 GB"``) or a device (``"cuda:0"``,
    a ``torch.device``: the capacity its backend gives, its total memory; ``"cpu"``: the machine's
    RAM); None stays None."""
    if capacity is None:
        return None, None
    if isinstance(capacity, (int, float)) and not isinstance(capacity, bool):
        if capacity <= 0:
            raise ValueError(f"capacity must be a positive number of bytes, got {capacity!r}")
        return int(capacity), f"{format_bytes(capacity)}"
    text = str(capacity)
    found = _SIZE.match(text)
    if found:
        return parse_capacity(float(found.group(1)) * _FACTOR[(found.group(2) or "B").upper()])
    try:
        device = torch.device(capacity)
    except (RuntimeError, TypeError):
        raise ValueError(f"capacity must be bytes, a size such as '80GiB' or a device such as 'cuda:0'; "
                         f"got {capacity!r}") from None
    return get_backend(device).capacity()


def _model_of(model: Any, label: str | None) -> tuple[MemoryModel, Report | None]:
    """The memory model ``model`` is or fits, and the run it was fitted on where given one (its
    manifest and findings word a refusal's next step)."""
    if isinstance(model, MemoryModel):
        return model, None
    calibrated = getattr(model, "model", None)
    if isinstance(calibrated, MemoryModel):  # a Calibration
        return calibrated, None
    if isinstance(model, (str, os.PathLike)):
        model = load(model)
    elif not isinstance(model, (Report, RunResult)) and not (
            isinstance(model, list) and all(isinstance(r, dict) for r in model)):
        how = (": to measure your model's step, run gnnmon.calibrate(step, loader) and pass what it returns"
               if isinstance(model, (torch.nn.Module, torch.Tensor)) else "")
        raise TypeError(f"forecast's second argument is a memory model, a calibration or a run (a path, a "
                        f"RunResult, a Report, rows); got {type(model).__name__}{how}")
    report = model if isinstance(model, Report) else Report(model)
    return report.memory_model(label, MEM_PEAK.name), report


NEXT_STEPS = (
    ("too few rows", "more rows: more steps of the label, or gnnmon.calibrate(step, loader) (your step on two "
                     "batches at each of seven sizes, in seconds)"),
    ("barely var", "batches of spread sizes: gnnmon.calibrate(step, loader)"),
    ("explains only", "on the CPU, where the run did not call gnnmon.exact_host_memory() (its manifest's "
                      "host_memory has no mmap_threshold), call it first thing (without it a step's peak shows only "
                      "growth beyond what earlier steps left); else measure the step alone, under a label of its "
                      "own, or gnnmon.calibrate(step, loader)"),
    ("curves", "sizes nearer those you will run: gnnmon.calibrate(step, loader, sizes=...) or a loader whose "
               "batch size is nearer them"),
)
"""For each reason a memory model is refused (a phrase of :attr:`MemoryModel.problems`), the next step
where nothing is known of the run; :func:`next_steps` words the scatter's from the run."""

ALONE = "measure the step alone, under a label of its own, or gnnmon.calibrate(step, loader)"
"""The next step for a peak the batch's shape explains little of, whatever the run says."""


HOST_FIGURES = (RSS_PEAK.name, RSS_PEAK_DELTA.name)
"""The figures a model may be fitted on that count the host process's memory on every device."""


def on_host(model: MemoryModel) -> bool:
    """Whether ``model``'s figure counted the host's memory, so the host's allocator and copies held
    on the host move its peak: an RSS figure (:data:`HOST_FIGURES`), or rows that ran on the CPU
    (where the device figures are the process's RSS) or name no device. A CUDA step's
    ``mem_peak_delta_bytes``, like its ``mem_peak_bytes``, is its allocator's count, not the host's."""
    return model.figure in HOST_FIGURES or not model.devices or any(str(d).startswith("cpu") for d in model.devices)


def exact_in_force(model: MemoryModel, run: Report | RunResult | None = None) -> bool | None:
    """Whether ``gnnmon.exact_host_memory()`` was in force when ``model``'s rows were recorded: the
    run's manifest (``host_memory``'s ``mmap_threshold``, set or null), else this process's state
    where it recorded them (the model's ``pid``); None where neither says."""
    manifest = (run.manifest if run is not None else None) or {}
    host = manifest.get("host_memory")
    if isinstance(host, dict) and "mmap_threshold" in host:
        return host["mmap_threshold"] is not None
    if model.pid is not None and model.pid == os.getpid():
        return mmap_threshold() is not None
    return None


def growth_findings(model: MemoryModel, run: Report | RunResult | None) -> list[dict[str, Any]]:
    """The run's findings of memory that grew across epochs more than the batches' shapes explain
    (a leak, or growth too short to tell from one: :mod:`gnnmon.report.diagnosis.creep`) in the
    model's label: a peak that climbs with them is scatter the shape cannot explain. [] without a
    run, or where its epochs are not marked."""
    if run is None:
        return []
    report = run if isinstance(run, Report) else Report(run)
    host = (report.manifest or {}).get("devices") or {}
    resolution = host_resolution(host.get("cpu_count"), host.get("cpu_usable"))
    return [f for loop in loops(report.table) if loop.label == model.label for f in creep(loop, resolution)
            if any(e["figure"] == "growth not explained by shapes" for e in f["evidence"])]


def _scatter_step(model: MemoryModel, run: Report | RunResult | None) -> str:
    """The next step for a peak the batch's shape explains little of, read from the run where given:
    exact host memory advised only where the run (or this process) did not have it in force and the
    model is of the host, and growth across epochs named where the run's report finds it."""
    exact = exact_in_force(model, run)
    host = on_host(model)
    parts = [f"the run's report finds its memory growing across epochs ({f['words']}): a peak that climbs with it "
             f"is not the batch's shape; {f['next']}" for f in growth_findings(model, run)]
    if exact is None:
        return "; ".join([*parts, dict(NEXT_STEPS)["explains only"]])
    if host and not exact:
        parts.append("on the CPU, gnnmon.exact_host_memory() first thing (the run's manifest says it was not in "
                     "force: a step's peak then shows only growth beyond what earlier steps left)")
    elif host and not parts:
        return ("gnnmon.exact_host_memory() was in force (the run's manifest host_memory), so something besides the "
                "batch's shape moves the peak: memory held from one step into the next, or other threads' "
                f"allocations during the step; {ALONE}")
    return "; ".join([*parts, ("else " if parts else "") + ALONE])


def next_steps(model: MemoryModel, run: Report | RunResult | None = None) -> list[str]:
    """What to do about each reason ``model`` cannot be trusted (:data:`NEXT_STEPS`), once each;
    ``run``: the run it was fitted on, whose manifest and findings word the next step for a peak
    the batch's shape explains little of (:func:`_scatter_step`)."""
    out: list[str] = []
    for problem in model.problems:
        for phrase, step in NEXT_STEPS:
            if phrase not in problem:
                continue
            step = _scatter_step(model, run) if phrase == "explains only" else step
            if step not in out:
                out.append(step)
    return out


PER_ITEM = "_per_item_max"
"""The suffix of a type's most per item in :attr:`Forecast.ratios` (``num_nodes__paper_per_item_max``)."""

PER_NODE = "_per_node_max"
"""The suffix of a type's most per node (of the totals) in :attr:`Forecast.ratios`
(``num_edges__author__writes__paper_per_node_max``): a per-type model's node budget reads it."""

PER_EDGE = "_per_edge_max"
"""The suffix of a type's most per edge (of the totals) in :attr:`Forecast.ratios` (infinite where a
batch or graph had that type's nodes and no edge): a per-type model's edge budget reads it."""

EDGES_UNREAD = "edge_counts_unread"
"""A key of :attr:`Forecast.ratios`, present (1.0) where a shape the scan read gave no edge count: its
edges per node were taken as 0, and no edge budget is given (no count of edges bounds its nodes)."""

VOUCH = 2.0
"""How far beyond the largest batch it was fitted on a model sizes a budget (a factor)."""


def largest(fits: Callable[[int], bool], high: int = 1 << 40, within: float = 0.0, start: int = 1) -> int:
    """The largest n in [0, high] with fits(n) (fits is monotone); 0 if none. Doubles from
    ``start`` (a size likely to fit: fewer calls where each costs much), then bisects; ``within``:
    stop bisecting once the bracket is narrower than this share of its lower end (the answer is
    then up to that share below the largest)."""
    lo, hi = 0, max(1, start)
    while hi < high and fits(hi):
        lo, hi = hi, hi * 2
    if hi >= high > lo and fits(high):  # all of it: exactly, whatever ``within``
        return high
    hi = min(hi, high)
    while lo < hi and hi - lo > within * lo:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass
class Forecast:
    """The forecast of every batch a loader would make: the worst ones and the headroom."""

    model: MemoryModel
    capacity_bytes: int | None
    capacity: str | None
    batches: int
    worst: list[dict[str, Any]]
    """The batches with the highest forecast upper bound, highest first: ``batch`` (its number in
    the loader's order), the shape, ``bytes`` and ``upper_bytes``."""
    ratios: dict[str, float] = field(default_factory=dict)
    """Densest and sparsest edges per node, and the most nodes and edges per item, over the scan;
    for heterogeneous batches also the most of each type per item (``<field>_per_item_max``, such as
    ``num_nodes__paper_per_item_max``), per node and per edge of the totals (:data:`PER_NODE`,
    :data:`PER_EDGE`; of whole graphs too, where the loader batches them)."""
    heaviest: Heaviest | None = None
    """The heaviest batch of each size the loader makes (see the module's docstring); None for
    plain batches, whose sizes are scaled from :attr:`most_at`. A neighbour loader is held weakly:
    :meth:`budget` raises ``ReferenceError`` once it was freed."""
    most_at: dict[float, dict[str, float]] = field(default_factory=dict)
    """For each number of items the scan read a batch of, the most of each shape field
    (``num_nodes``, ``num_edges``, each type's count) among those batches: what plain batches'
    sizes are scaled from (:meth:`_scaled`)."""
    graph: dict[str, int] = field(default_factory=dict)
    """The most ``num_nodes`` (and ``num_edges``) one batch can hold where the loader's graph's size
    is known (:func:`~gnnmon.forecast.shapes.graph_size`): the budgets' ``max_num`` go no higher."""
    graph_said: str | None = None
    """What :attr:`graph` is (``"the loader's graph"``), or why it is not known, in words."""
    empty_why: str | None = None
    """Where no batch was read (:attr:`batches` 0: nothing to forecast), why in words where the
    source tells (no seeds, no graphs, a last batch dropped, no rows given); None otherwise."""
    batches_of: str | None = None
    """What a batch's items are: ``"seed"`` (a neighbour sampler's seed nodes or edges: its loader, or
    rows that carry a seed count, ``batch_size``), ``"graph"`` (whole graphs: a loader or dataset of
    graphs, or rows of several graphs a batch and no seed count), None where the batches do not say
    (rows of one graph each and no seed count). Plain batches are scaled to other sizes by it
    (:meth:`_scaled`)."""

    @property
    def peak_bytes(self) -> float | None:
        return self.worst[0]["upper_bytes"] if self.worst else None

    @property
    def headroom_bytes(self) -> float | None:
        """Capacity minus the worst batch's upper bound (negative: it will not fit)."""
        if self.capacity_bytes is None or self.peak_bytes is None:
            return None
        return self.capacity_bytes - self.peak_bytes

    @property
    def fits(self) -> bool | None:
        h = self.headroom_bytes
        return None if h is None else h >= 0

    def _upper(self, nodes: float, edges: float, graphs: float) -> float:
        """The upper bound of a batch of these totals (a model of the totals)."""
        given = {"num_nodes": nodes, "num_edges": edges, "num_graphs": graphs}
        return self.model.predict(**_asked(self.model, given)).upper_bytes

    def _alone(self) -> float:
        """The upper bound of a batch of nothing: the constant alone, every term at 0 (the totals
        and each type's count)."""
        model = self.model
        return model.predict(**_asked(model, dict.fromkeys((*SHAPE_KEYS, *model.terms, *model.confounded), 0))
                             ).upper_bytes

    def _bounds(self, shape: dict[str, float]) -> tuple[float, float]:
        """(lower, upper) bound of the peak of a batch of ``shape``, bytes: the model's upper bound,
        and its mirror below the point forecast (the spread and the fit's uncertainty there, not
        the widening beyond the fitted shapes, which only rises) less the figure's resolution (a
        peak may read that much lower)."""
        p = self.model.predict(**_asked(self.model, {"num_graphs": 1, **shape}))
        width = max(0.0, p.upper_bytes - p.bytes - p.widened_bytes - p.resolution_bytes)
        return p.bytes - width - p.resolution_bytes, p.upper_bytes

    def _vouched(self, term: str) -> int:
        """The largest value of ``term`` a budget may reach: :data:`VOUCH` × the largest the model
        saw (directly, or through the term a confounded field moves with); 0 where it saw none."""
        model = self.model
        if term in model.ranges:
            return int(VOUCH * model.ranges[term][1])
        split = model.confounded.get(term)
        if split is not None and split["with"] in model.ranges:
            return int(VOUCH * model.ranges[split["with"]][1] * split["ratio"][1])
        return 0

    def shape_at(self, k: int) -> dict[str, float]:
        """The heaviest batch of ``k`` items the budget forecasts (see the module's docstring)."""
        return self.heaviest(k) if self.heaviest is not None else self._scaled(k)

    def _scaled(self, k: int) -> dict[str, float]:
        """The heaviest batch of ``k`` items plain batches bound: for each field (the totals, each
        type's count), the least over the sizes ``s`` the scan read of the most of it among the
        ``s``-item batches times ``k / s`` where ``k >= s`` (a batch of more items shares more of
        its nodes: a sampler's neighbourhoods overlap), or times 1 where ``k < s`` (fewer items, no
        more of it); below the smallest size read, that size's most scaled down by ``k / s`` (no
        batch that small was read: not a bound). So an epoch's short last batch, whose few seeds
        share the fewest nodes, bounds sizes up to its own, not every size. Whole graphs share no
        nodes (:attr:`batches_of` ``"graph"``): ``k`` times the most per graph of any batch read of
        ``k`` graphs or fewer (a batch that averages fewer graphs can be heavier per graph, and a
        short last batch lighter: it is never what bounds a larger size), holding ``k`` graphs.
        Without :attr:`most_at`, ``k`` times the most per item in :attr:`ratios`."""
        graphs = k if self.batches_of == "graph" else 1
        if not self.most_at:
            r = self.ratios
            each = {t[:-len(PER_ITEM)]: k * v for t, v in r.items() if t.startswith(TYPED) and t.endswith(PER_ITEM)}
            return {"num_nodes": k * r["nodes_per_item_max"], "num_edges": k * r["edges_per_item_max"],
                    "num_graphs": graphs, **each}
        smallest = min(self.most_at)
        out: dict[str, float] = {}
        if self.batches_of == "graph":
            for s in [s for s in self.most_at if s <= k] or [smallest]:
                for t, v in self.most_at[s].items():
                    out[t] = max(out.get(t, 0.0), v * k / s)
            return {**out, "num_graphs": graphs}
        for s, most in self.most_at.items():
            factor = self._factor(k, s, smallest)
            for t, v in most.items():
                out[t] = min(out.get(t, float("inf")), v * factor)
        return {**out, "num_graphs": graphs}

    def _factor(self, k: float, s: float, smallest: float | None = None) -> float:
        """How many times the most of the ``s``-item batches bounds a batch of ``k`` items (see
        :meth:`_scaled`; ``smallest``: the fewest items of any batch read, where known)."""
        return k / s if k >= s or s == (min(self.most_at) if smallest is None else smallest) else 1.0

    def _scaled_from(self, k: int) -> str | None:
        """The batches :meth:`_scaled` bounds ``k`` items' nodes from, in words; None without :attr:`most_at`."""
        if not self.most_at:
            return None
        smallest = min(self.most_at)
        if self.batches_of == "graph":
            s = max([s for s in self.most_at if s <= k] or [smallest], key=lambda s: self.most_at[s]["num_nodes"] / s)
            most = self.most_at[s]
            return (f"{k / s:.3g}x the heaviest per graph of the batches read, one of {s:,.0f} graphs "
                    f"({most['num_nodes']:,.0f} nodes, {most['num_edges']:,.0f} edges)")
        s = min(self.most_at, key=lambda s: (self.most_at[s]["num_nodes"] * self._factor(k, s, smallest), -s))
        most = self.most_at[s]
        how = (f"{k / s:.3g}x" if self._factor(k, s, smallest) != 1 else "at most")
        return (f"{how} the most of the {s:,.0f}-item batches read ({most['num_nodes']:,.0f} nodes, "
                f"{most['num_edges']:,.0f} edges)")

    def _per_item_least(self, t: str) -> float:
        """The fewest of ``t`` per item :meth:`_scaled` grows by beyond every size read: the least
        over the sizes read of their most per item (the most for whole graphs; the most per item in
        :attr:`ratios` without :attr:`most_at`); 0 where no batch gave ``t``."""
        if not self.most_at:
            key = {"num_nodes": "nodes_per_item_max", "num_edges": "edges_per_item_max"}.get(t, t + PER_ITEM)
            return self.ratios.get(key, 0.0)
        per = [most[t] / s for s, most in self.most_at.items() if t in most]
        return (max if self.batches_of == "graph" else min)(per, default=0.0)

    def nothing(self) -> str:
        """That no batch was read, and why where known (:attr:`empty_why`), in words."""
        return "no batch was read" + (f": {self.empty_why}" if self.empty_why else "")

    def budget(self, fraction: float = 0.9) -> Budget:
        """The largest ``DynamicBatchSampler`` ``max_num`` (nodes and edges) and batch size whose
        worst batch stays under ``fraction × capacity`` (see the module's docstring), as a
        :class:`~gnnmon.forecast.budget.Budget` (``print(budget)`` says it in a line). Where no batch
        was read there is nothing to size from: ``ValueError`` saying so."""
        if self.batches == 0:
            raise ValueError(f"nothing to forecast, so no budget: {self.nothing()}")
        if self.capacity_bytes is None:
            raise ValueError("a budget needs a capacity: forecast(..., capacity='80GiB' or 'cuda:0')")
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
        target = fraction * self.capacity_bytes
        r = self.ratios
        dense = r["edges_per_node_max"]
        kinds = [t for t in (*self.model.terms, *self.model.confounded) if t.startswith(TYPED)]
        caps = {t: self._vouched(t) for t in ("num_nodes", "num_edges", *kinds)}
        node_cap = min(filter(None, (self._vouched("num_nodes"),
                                     int(self._vouched("num_edges") / dense) if dense else 0)),
                       default=0)
        out: dict[str, Any] = {"target_bytes": target, "fraction": fraction}
        if kinds:
            out.update(self._typed_samplers(kinds, caps, target))
        else:
            nodes = largest(lambda n: self._upper(n, n * dense, 1) <= target, high=node_cap)
            edges, out["samplers_why"] = self._edge_budget(target), self._edges_why()
            a, b = self.model.coefficients.get("num_nodes", 0.0), self.model.coefficients.get("num_edges", 0.0)
            seen = self.model.ranges.get("num_nodes", (0.0, 0.0))[1]
            out.update({"max_num_nodes": int(nodes), "max_num_edges": edges,
                        "binds": "edges" if b * r["edges_per_node_max"] > a else "nodes",
                        "beyond_fitted": nodes / seen if seen else None,  # > 1: the budget extrapolates the model
                        "limited_by_model": bool(node_cap and nodes >= node_cap)})
        out["graph_note"] = self._cap_to_graph(out)
        items = self.heaviest.items if self.heaviest is not None else None
        if items is not None:
            high = items
        elif node_cap and self._per_item_least("num_nodes"):
            high = int(node_cap / self._per_item_least("num_nodes"))
        else:  # a model of per-type terms: the fewest items that reach the cap of a type it vouches for
            high = min((int(caps[t] / self._per_item_least(t)) for t in kinds if caps[t] and self._per_item_least(t)),
                       default=0)

        def within(shape: dict[str, float]) -> bool:  # the model vouches for it (each figure it saw, to VOUCH x)
            return any(caps.values()) and all(not cap or (shape.get(t) or 0) <= cap for t, cap in caps.items())

        reach_only: dict[int, bool] = {}  # each size the upper bound ruled out: whether only the model's reach did

        def fits(k: int, bound: int) -> bool:
            """1: the upper bound fits, where the model vouches for the batch; 0: the lower bound
            fits (beyond the model's reach it cannot rule a size out either)."""
            shape = self.shape_at(k)
            under = self._bounds(shape)[bound] <= target
            if bound == 1 and not (under and within(shape)):
                reach_only[k] = under
            return (within(shape) or bound == 0) and under

        # the scanned batches scaled to the size (of each type too): a start for a sampled batch, which
        # they bound where its seeds share more nodes as it grows (where the scan gave no count of a
        # type the model asks: from 1)
        scaled = largest(lambda k: within(self._scaled(k)) and self._bounds(self._scaled(k))[1] <= target,
                         high) if all(t in self._scaled(1) for t in self.model.terms) else 1
        near = self.heaviest.within if self.heaviest is not None else 0.0
        size = largest(lambda k: fits(k, 1), high, near, start=scaled)
        most = largest(lambda k: fits(k, 0), high, near, start=size)
        out["batch_size"], out["batch_size_high"] = int(size), int(max(most, size))
        # the model's reach stopped the batch size where the nearest size ruled out above it was under the
        # target (a sampled size is bisected to within 1 %: that size need not be the next one)
        above = [k for k in reach_only if k > size]
        stopped = bool(size < high and above and reach_only[min(above)])
        out["limited_by_model"] = out.pop("limited_by_model") or stopped
        if size < 1:
            out["why"] = self._why_none(target)
        else:
            out["batch_size_from"] = self._size_from(int(size))
            out["extrapolated"] = self._extrapolated(int(size))
        return Budget(**out)

    def _cap_to_graph(self, out: dict[str, Any]) -> str | None:
        """Lower ``out``'s ``max_num_nodes`` / ``max_num_edges`` to what the graph holds where they
        are above it (a budget no batch can reach: the node budget then is not the model's limit),
        and say so; where the graph's size is not known and the node budget is above every batch
        read, say that it may be above the graph's too. None where there is nothing to say."""
        notes = []
        for key, term, unit in (("max_num_nodes", "num_nodes", "nodes"), ("max_num_edges", "num_edges", "edges")):
            most, limit = out.get(key), self.graph.get(term)
            if most is None or limit is None or most <= limit:
                continue
            out[key] = limit
            notes.append(f"{key} is all {limit:,} {unit} of {self.graph_said} (the forecast allows {most:,}): "
                         "no batch holds more")
            if key == "max_num_nodes":
                out["limited_by_model"] = False  # the graph stops it, not the model
                if out.get("beyond_fitted"):
                    out["beyond_fitted"] *= limit / most
        read = max((most.get("num_nodes", 0) for most in self.most_at.values()), default=0)
        nodes = out.get("max_num_nodes")
        if "num_nodes" not in self.graph and nodes and read and nodes > read and self.batches_of != "graph":
            notes.append(f"max_num_nodes {nodes:,} is above the most nodes of any batch read ({read:,.0f}) and may be "
                         f"above what the graph holds: {self.graph_said}")
        return "; ".join(notes) or None

    def _size_from(self, k: int) -> str:
        """What the batch of ``k`` items a budget forecast is, in words: sampled at the size, the
        costliest graphs summed, or scaled from the batches the scan read (an upper bound where
        batches of more items share more nodes, not a batch the loader was asked for)."""
        if self.heaviest is not None:
            return self.heaviest.said(k)
        shape = self._scaled(k)
        scaled = self._scaled_from(k) or "the most nodes and edges per item read, times the size"
        if self.batches_of == "graph":
            return (f"scaled from the batches read, not sampled: {k:,} graphs as {scaled}, "
                    f"{shape['num_nodes']:,.0f} nodes; batches of whole graphs share no nodes, so this grows "
                    "linearly with the graphs, at the heaviest per graph read: a batch heavier per graph than any "
                    "read (more of the dataset's largest graphs) would hold more")
        said = ("a neighbour sampler's batches share more nodes the more seeds they hold, so beyond the sizes read "
                "this overstates them" if self.batches_of == "seed" else
                "where they are a neighbour sampler's, whose batches share more nodes the more seeds they hold, this "
                "overstates them beyond the sizes read; where each holds whole graphs, it grows linearly with them")
        return (f"scaled from the batches read, not sampled: {k:,} items as {scaled}, "
                f"{shape['num_nodes']:,.0f} nodes; {said}")

    def from_loader(self, run: str) -> str | None:
        """What ``gnnmon.forecast(loader, run, capacity=...)`` does instead of scaling these plain batches
        (``run``: how the reader names the run, a path), in words, by what the batches' items are
        (:attr:`batches_of`); None where the batches are a loader's already."""
        if self.heaviest is not None or not self.most_at:
            return None
        call = f"gnnmon.forecast(loader, {run!r}, capacity=...)"
        if self.batches_of == "graph":
            return (f"{call} sums the dataset's costliest graphs at each size instead: a bound on every batch the "
                    "loader can make of them, which the batches read are not")
        if self.batches_of == "seed":
            return (f"{call} samples a NeighborLoader's batches at each size instead, whose seeds share more nodes as "
                    "they grow: a larger batch size where they do")
        return (f"{call} reads the loader's batches at each size instead: a NeighborLoader's sampled, a DataLoader's "
                "graphs summed")

    def _extrapolated(self, k: int) -> str | None:
        """Where ``k`` items is below the fewest of any plain batch read, that :meth:`_scaled` scales
        those batches down to it: not a bound (a smaller batch's items share fewer nodes, so it can
        hold more of them per item), in words; None for a loader's batches or ``k`` at or above it."""
        if self.heaviest is not None or not self.most_at or k >= min(self.most_at):
            return None
        s = min(self.most_at)
        why = ("a smaller batch averages fewer graphs: it may hold more per graph" if self.batches_of == "graph" else
               "a smaller batch's items share fewer nodes: it may hold more per item")
        return (f"batch_size {k:,} is below the smallest batch read ({s:,.0f} items): its worst batch is theirs scaled "
                f"down by {k / s:.3g}, extrapolated, not a bound ({why}); measure batches of about {k:,} items to "
                "size it")

    def _edges_why(self) -> str | None:
        """Why a model of the totals gives no ``max_num_edges`` (a count of edges bounds no count of
        nodes: not a limit of 0), in words; None where it gives one."""
        r = self.ratios
        if r.get(EDGES_UNREAD):
            why = "a batch the scan read gave no edge count"
        elif r["edges_per_node_min"] == 0:
            why = "a batch or graph the scan read has nodes and no edge: a sampler in edge mode would not bound them"
        elif r["edges_per_node_min"] == float("inf"):
            why = "the scan read no batch with nodes"
        else:
            return None
        return f"max_num_edges not given: {why}"

    def _edge_budget(self, target: float) -> int | None:
        """A model of the totals' largest ``max_num`` in edges, nodes at the sparsest ratio the scan
        saw (None: :meth:`_edges_why` says why)."""
        if self._edges_why() is not None:
            return None
        sparse = self.ratios["edges_per_node_min"]
        cap = min(filter(None, (self._vouched("num_edges"), int(self._vouched("num_nodes") * sparse))), default=0)
        return largest(lambda e: self._upper(e / sparse, e, 1) <= target, high=cap)

    def _typed_shape(self, count: float, per: str) -> dict[str, float] | str:
        """The heaviest batch of ``count`` nodes (``per`` :data:`PER_NODE`) or edges (:data:`PER_EDGE`)
        of the totals, for a per-type model: each type at the most of it per node (edge) the scan
        saw, the totals at the densest (sparsest) ratio; or, where the scan gives no share of a
        type the model asks, why in words."""
        r = self.ratios
        dense, sparse = r["edges_per_node_max"], max(r["edges_per_node_min"], 1e-9)
        unit = "node" if per == PER_NODE else "edge"
        lacking = [t for t in self.model.terms if t.startswith(TYPED) and r.get(t + per) is None]
        if lacking:
            return (f"the scan read no batch with {unit}s to give {', '.join(lacking)} per {unit}, "
                    "which the per-type model asks")
        unbounded = [t for t in self.model.terms if t.startswith(TYPED) and r[t + per] == float("inf")]
        if unbounded:
            return (f"a batch or graph the scan read has {', '.join(unbounded)} and no edge: a sampler in edge mode "
                    "would not bound them")
        shape: dict[str, float] = ({"num_nodes": count, "num_edges": count * dense} if per == PER_NODE
                                   else {"num_nodes": count / sparse, "num_edges": count})
        shape["num_graphs"] = 1
        shape.update({t[:-len(per)]: count * v for t, v in r.items() if t.startswith(TYPED) and t.endswith(per)})
        return shape

    def _typed_samplers(self, kinds: list[str], caps: dict[str, int], target: float) -> dict[str, Any]:
        """A per-type model's ``DynamicBatchSampler`` budgets (the totals, each type at the most of
        it per node or per edge the scan saw: see the module's docstring), which of nodes and edges
        weighs most, how far beyond the fitted batches the node budget goes, and whether the
        vouched-for reach stopped it; a budget the scan cannot give is None, with the reason in
        ``samplers_why``."""
        out: dict[str, Any] = {"per_type": True}
        limits: dict[str, int | None] = {}
        whys: list[str] = []
        limited = False
        for key, per in (("max_num_nodes", PER_NODE), ("max_num_edges", PER_EDGE)):
            one = self._typed_shape(1, per)
            if isinstance(one, str):
                limits[key] = None
                whys.append(f"{key} not given: {one}")
                continue
            # the model vouches for each figure it saw up to VOUCH x: the most of the unit that keeps every one within
            reach = [int(cap / one[t]) for t, cap in caps.items() if cap and one.get(t)]
            cap = min(reach, default=0)

            def fits(count: int, per: str = per) -> bool:
                shape = self._typed_shape(count, per)
                return not isinstance(shape, str) and self._bounds(shape)[1] <= target

            if not cap:
                limits[key] = None
                whys.append(f"{key} not given: the model saw none of the types a batch of that unit carries")
                continue
            limits[key] = most = largest(fits, high=cap)
            limited = limited or (key == "max_num_nodes" and most >= cap)
        out.update(limits)
        out["samplers_why"] = "; ".join(whys) or None
        one = self._typed_shape(1, PER_NODE)
        coef = self.model.coefficients
        if isinstance(one, str):  # no share per node: say what weighs most by the coefficients alone
            node_cost = sum(c for t, c in coef.items() if t.startswith("num_nodes"))
            edge_cost = sum(c for t, c in coef.items() if t.startswith("num_edges"))
        else:  # what a node of the totals costs in its nodes of each type, and in the edges it carries
            node_cost = sum(c * one.get(t, 0.0) for t, c in coef.items() if t.startswith("num_nodes"))
            edge_cost = sum(c * one.get(t, 0.0) for t, c in coef.items() if t.startswith("num_edges"))
        out["binds"] = "edges" if edge_cost > node_cost else "nodes"
        nodes = limits["max_num_nodes"]
        at = self._typed_shape(nodes, PER_NODE) if nodes else None
        beyond = [at[t] / self.model.ranges[t][1] for t in kinds
                  if isinstance(at, dict) and t in self.model.ranges and self.model.ranges[t][1] and t in at]
        out["beyond_fitted"] = max(beyond) if beyond else None
        out["limited_by_model"] = limited
        return out

    def _why_none(self, target: float) -> str:
        """Why no batch size fits under ``target``, in this forecast's own figures: the constant's
        upper bound, else a batch of one item's, else the model vouches for none; each with the
        next thing to try."""
        fmt = format_bytes
        alone = self._alone()
        if alone > target:
            return (f"the model's constant alone is forecast at up to {fmt(alone)}, over the target {fmt(target)} "
                    "(a smaller model, a larger device, or a fraction nearer 1)")
        shape = self.shape_at(1)
        one = self._bounds(shape)[1]
        if one > target:
            return (f"a batch of one item ({shape['num_nodes']:,.0f} nodes, "
                    f"{shape['num_edges']:,.0f} edges at most) is forecast at up to {fmt(one)}, over the target "
                    f"{fmt(target)}; the constant alone, {fmt(alone)}, is under it (smaller items, a larger "
                    "device, or a fraction nearer 1)")
        seen = {t: r[1] for t, r in self.model.ranges.items() if t.startswith(("num_nodes", "num_edges"))}
        said = ", ".join(f"{v:,.0f} {t}" for t, v in seen.items()) or "no nodes"
        return (f"the model vouches for no batch size (it saw at most {said} a batch): "
                "gnnmon.calibrate(step, loader) on larger batches")

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        fits = "" if self.fits is None else f", fits={self.fits}"
        if self.batches == 0:
            return f"<Forecast of 0 batches: nothing to forecast ({self.nothing()})>"
        peak = f"{format_bytes(self.peak_bytes)}" if self.peak_bytes is not None else "-"
        return f"<Forecast of {self.batches} batches: worst {peak}{fits}; print() it for the summary>"

    def summary(self, fraction: float = 0.9) -> str:
        """The forecast and, with a capacity, the budgets, in words; where no batch was read, that
        there was nothing to forecast and why where known (no headroom, no budget)."""
        if self.batches == 0:
            lines = [self.model.summary(), f"nothing to forecast: {self.nothing()}"]
            if self.capacity_bytes is not None:
                lines.append(f"capacity {format_bytes(self.capacity_bytes)} ({self.capacity}): no batch to size "
                             "against it, so no headroom and no budget")
            return "\n".join(lines)
        lines = [self.model.summary(), f"{self.batches} batches forecast; the worst:"]
        for w in self.worst[:5]:
            edges = "?" if w["num_edges"] is None else f"{w['num_edges']:,}"  # a shape with no edge count
            lines.append(f"  batch {w['batch']}: {w['num_nodes']:,} nodes, {edges} edges -> "
                         f"{format_bytes(w['bytes'])} (upper {format_bytes(w['upper_bytes'])})")
        if self.capacity_bytes is not None:
            h = self.headroom_bytes
            room = ("headroom not known: no batch's forecast was kept" if h is None
                    else f"headroom {format_bytes(h)}" if h >= 0 else f"the worst batch is {format_bytes(-h)} over")
            lines.append(f"capacity {format_bytes(self.capacity_bytes)} ({self.capacity}): {room}")
            try:
                b = self.budget(fraction)
            except ReferenceError as gone:  # the loader a batch size is sampled from was freed
                lines.append(f"budget at {fraction:.0%}: not sized: {gone}")
                return "\n".join(lines)
            said = b.said() + (f" ({b.binds} weigh most)" if b.fits else "")
            lines.append(f"budget at {fraction:.0%} ({format_bytes(b.target_bytes)}): {said}")
            if b.batch_size_from:
                lines.append(f"the batch size's worst batch: {b.batch_size_from}")
            if b.extrapolated:
                lines.append(f"note: {b.extrapolated}")
            if b.limited_by_model:
                # every figure it vouches for, those confounded with another too (a sampled batch can be
                # denser than the fitted ones: its edges, not its nodes, may be what stopped it)
                reach = ", ".join(f"{self._vouched(t):,} {t}" for t in (*self.model.ranges, *self.model.confounded)
                                  if self._vouched(t))
                lines.append(f"note: the budget stops where the model stops vouching ({reach}: {VOUCH:g}x the most "
                             "of each it was fitted on); measure a larger batch to size beyond it")
        return "\n".join(lines)


def _asked(model: MemoryModel, shape: dict[str, Any]) -> dict[str, Any]:
    """What to ask the model of a batch: its terms (the totals, or each type's count for a model
    of per-type terms), and the fields confounded with them where the batch has them (they bound a
    batch off the ratio the model saw). A term the shape lacks is refused, naming it (``ValueError``)."""
    missing = [t for t in model.terms if shape.get(t) is None]
    if missing:
        raise ValueError(f"a batch shape without {', '.join(missing)}, which the model of {model.label!r} needs "
                         f"(its terms: {', '.join(model.terms)}; the shape's fields: {', '.join(shape) or 'none'})")
    asked = {t: shape[t] for t in model.terms}
    asked.update({t: shape[t] for t in model.confounded if shape.get(t) is not None})
    return asked


def _typed_ratios(ratios: dict[str, float], shape: dict[str, Any]) -> None:
    """Raise each type's most per node and per edge of the totals (:data:`PER_NODE`, :data:`PER_EDGE`)
    in ``ratios`` to ``shape``'s (a batch's or a whole graph's): a type's count over no edge is
    infinite (an edge budget cannot bound it), over no node none is read."""
    n, e = shape.get("num_nodes") or 0, shape.get("num_edges") or 0
    for t, v in typed(shape).items():
        if n:
            ratios[t + PER_NODE] = max(ratios.get(t + PER_NODE, 0.0), v / n)
        if e or v:
            ratios[t + PER_EDGE] = max(ratios.get(t + PER_EDGE, 0.0), v / e if e else float("inf"))


def _why_empty(source: Any, sizes: list[dict[str, Any]] | None) -> str | None:
    """Why ``source`` made no batch, in words, where it tells: no seeds or no graphs, fewer of them
    than its batch size with its last batch dropped, or an empty collection of batches; else None."""
    if sampling(source) or sizes is not None:
        count, unit = (len(source.dataset), "seeds") if sampling(source) else (len(sizes or ()), "graphs")
        size = getattr(source, "batch_size", None)
        if count == 0:
            return f"the loader has no {unit}" if sampling(source) else "the dataset holds no graph"
        if getattr(source, "drop_last", False) and isinstance(size, int) and count < size:
            return (f"the loader drops its last batch (drop_last=True), and its {count:,} {unit} are fewer "
                    f"than its batch_size {size:,}")
        return None
    if isinstance(source, Sized) and len(source) == 0:
        return f"the batches given are none (an empty {type(source).__name__})"
    return None


def _sparsest(sparsest_at: dict[float, float], sampled: bool) -> float:
    """The fewest edges per node the edge budget scales from (infinite where no batch had nodes):
    of every batch read, but for a neighbour loader (``sampled``) of its full batches alone, those
    of the most seeds read that have nodes. Its short last batch's few seeds share the fewest nodes,
    so it is the sparsest, and an edge budget at or above a full batch's edges holds batches of at
    least as many seeds: a full batch's ratio, not the short one's, bounds them."""
    if not sparsest_at:
        return float("inf")
    return sparsest_at[max(sparsest_at)] if sampled else min(sparsest_at.values())


def held_now(model: MemoryModel) -> float | None:
    """What the model's device holds now, bytes, read as its rows' start was (the CPU: the
    process's RSS; CUDA: its allocator's allocated bytes); None where it cannot say."""
    if model.figure == RSS_PEAK.name or not model.devices:
        import psutil  # a dependency; a forecast is off the step's path

        return float(psutil.Process().memory_info().rss)
    state = get_backend(torch.device(model.devices[0])).memory_state()
    return None if state is None else float(state.allocated)


def _anchor(fitted: MemoryModel, anchor: Any) -> MemoryModel:
    """``fitted`` raised to the memory held when the step will start (see :func:`forecast`)."""
    if anchor is None or anchor is False:
        return fitted
    if isinstance(anchor, bool) or anchor == "auto":
        if fitted.start_bytes is None or (anchor == "auto" and fitted.pid != os.getpid()):
            return fitted
        held = held_now(fitted)
        return fitted if held is None else fitted.anchored(held)
    return fitted.anchored(anchor)


def forecast(loader_or_dataset: Any, model: Any, capacity: Any = None, *, label: str | None = None,
             top: int = 10, progress: bool | None = None, anchor: Any = "auto") -> Forecast:
    """Forecast the peak of every batch ``loader_or_dataset`` would make (a ``NeighborLoader``, a
    ``DataLoader`` over graphs, a dataset, one graph — the full-batch step —, or batches / shape dicts; see
    :mod:`gnnmon.forecast.shapes`) with ``model``: a :class:`~gnnmon.report.memory.model.MemoryModel`
    of the absolute peak, or a run (a path, a RunResult, a Report) to fit one from (``label``:
    which step). ``capacity``: bytes, ``"80GiB"`` or a device whose memory it is. The model is
    never asked to run: shapes only.

    ``anchor``: the memory the device holds when the step starts. The model's constant is what it
    held at its fitted steps' start; where it holds more now (on the CPU the constant is the whole
    process's RSS, which grows as the process runs), every forecast is raised by the difference
    (:meth:`~gnnmon.report.memory.model.MemoryModel.anchored`), never lowered. ``"auto"``: read
    the device now when this process recorded the model's rows (a calibration, or a run's report
    in the same process); ``True``: read it whatever process recorded them; bytes: that much;
    ``False``: the model as fitted.

    A source that makes no batch (an empty loader, no rows) gives a forecast of none: its summary
    says there was nothing to forecast and why where the source tells (:attr:`Forecast.empty_why`),
    and it has no budget. ``top``: how many of the worst batches it keeps, at least 1."""
    if top < 1:
        raise ValueError(f"top must be at least 1 (the worst batches kept), got {top!r}")
    if not (anchor is None or isinstance(anchor, (bool, int, float)) or anchor == "auto"):
        raise ValueError(f"anchor must be 'auto', True, False or the bytes the device holds when the step starts; "
                         f"got {anchor!r}")
    fitted, run = _model_of(model, label)
    if fitted.figure not in (MEM_PEAK.name, RSS_PEAK.name):
        raise ValueError(f"forecast needs a model of the absolute peak (figure={MEM_PEAK.name!r}), not "
                         f"{fitted.figure}: what must fit in the device is the peak, not the step's growth")
    try:
        fitted.predict(**{t: 1 for t in fitted.terms})  # an untrusted model says why now, not after the scan
    except UntrustedModelError as exc:
        steps = next_steps(fitted, run)
        raise UntrustedModelError(f"{exc}; next: {'; '.join(steps)}" if steps else str(exc)) from None
    total, what = parse_capacity(capacity)
    worst: list[tuple[float, int, dict[str, Any]]] = []
    ratios = {"edges_per_node_max": 0.0, "edges_per_node_min": float("inf"), "nodes_per_item_max": 0.0,
              "edges_per_item_max": 0.0}
    most_at: dict[float, dict[str, float]] = {}  # per number of items: the most of each field
    sparsest_at: dict[float, float] = {}  # per number of items: the fewest edges per node of a batch with nodes
    count, seeded, several = 0, sampling(loader_or_dataset), False
    sizes = item_sizes(loader_or_dataset)  # read once: the scan sums them, the batch-size budget too
    weight = {t: c for t, c in fitted.coefficients.items() if t != "const"}  # the totals', or each type's
    worst_of = heaviest(loader_or_dataset if sizes is None else None, sizes, weight)
    sampled = worst_of is not None and worst_of.order is None  # a sampler's: its scanned batches bound larger sizes
    for count, shape in enumerate(batch_shapes(loader_or_dataset, progress, sizes), 1):
        n, e, items = shape["num_nodes"], shape.get("num_edges") or 0, shape.get("items") or 1
        seeded = seeded or shape.get("batch_size") is not None  # a seed count: a sampler's batch
        several = several or (shape.get("num_graphs") or 1) > 1
        if shape.get("num_edges") is None:
            ratios[EDGES_UNREAD] = 1.0
        missing = [t for t in fitted.terms if shape.get(t) is None]
        if missing:
            raise ValueError(f"batch {count - 1} has no {', '.join(missing)}, which the model needs")
        p = fitted.predict(**_asked(fitted, shape))
        entry = {"batch": count - 1, **{k: shape.get(k) for k in ("num_nodes", "num_edges", "num_graphs")},
                 "items": items, "bytes": p.bytes, "upper_bytes": p.upper_bytes}
        item = (p.upper_bytes, -count, entry)
        if len(worst) < top:
            heapq.heappush(worst, item)
        else:
            heapq.heappushpop(worst, item)
        if n:
            ratios["edges_per_node_max"] = max(ratios["edges_per_node_max"], e / n)
            sparsest_at[items] = min(sparsest_at.get(items, float("inf")), e / n)
        ratios["nodes_per_item_max"] = max(ratios["nodes_per_item_max"], n / items)
        ratios["edges_per_item_max"] = max(ratios["edges_per_item_max"], e / items)
        for t, v in typed(shape).items():  # each type's too: a model of per-type terms scales them
            ratios[t + PER_ITEM] = max(ratios.get(t + PER_ITEM, 0.0), v / items)
        if sampled:
            assert worst_of is not None
            worst_of.scanned(items, shape)
        most = most_at.setdefault(items, {})
        for t, v in {"num_nodes": n, "num_edges": e, **typed(shape)}.items():
            most[t] = max(most.get(t, 0), v)
        _typed_ratios(ratios, shape)
    if count == 0:
        held = _anchor(fitted, anchor)
        return Forecast(held, total, what, 0, [], ratios, None, {}, *graph_size(loader_or_dataset, sizes),
                        empty_why=_why_empty(loader_or_dataset, sizes))
    ratios["edges_per_node_min"] = _sparsest(sparsest_at, sampling(loader_or_dataset))
    for g in sizes or ():  # a batch of whole graphs is never denser (or sparser) than its densest graph
        if g["num_nodes"]:
            ratios["edges_per_node_max"] = max(ratios["edges_per_node_max"], g["num_edges"] / g["num_nodes"])
            ratios["edges_per_node_min"] = min(ratios["edges_per_node_min"], g["num_edges"] / g["num_nodes"])
        _typed_ratios(ratios, g)  # nor holds more of a type per node (edge) than its graphs do
    held = _anchor(fitted, anchor)  # after the scan: what the sampler's work left held counts too
    graph, graph_said = graph_size(loader_or_dataset, sizes)
    shift = held.anchor_bytes - fitted.anchor_bytes  # every forecast moves by it, their order does not
    entries = [w[2] for w in sorted(worst, reverse=True)]
    for entry in entries:
        entry["bytes"] += shift
        entry["upper_bytes"] += shift
    batches_of = "seed" if seeded else "graph" if sizes is not None or several else None
    return Forecast(held, total, what, count, entries, ratios, worst_of, most_at, graph, graph_said,
                    batches_of=batches_of)
