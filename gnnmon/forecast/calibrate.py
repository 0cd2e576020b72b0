"""A memory model from an ordinary training set-up, in seconds: run the user's own decorated step on
a handful of batches the loader's own sampler builds at spread sizes, and fit.

An ordinary run has one batch size, so its batches' shapes barely vary and the memory model is
refused ("shapes barely vary"). :func:`calibrate` asks the loader for batches of 1/4 to 2 times its
batch size (a ``NeighborLoader`` samples them from seed sets of that size with its own sampler; a
``DataLoader`` over graphs collates that many graphs), runs the step on each, and fits the absolute
peak over them. The first step, left out of the fit, runs the largest size: what a process holds
at a step's start grows with the largest batch it has run (on the host, heap pages and objects;
an allocator's pool), so every fitted row then starts from the state that batch leaves, rather
than from one that grows with the rows' sizes and would be fitted as a cost per item. The
largest size is also the probe of the batches training will meet: an out-of-memory error there
is caught, reported as "does not fit" with the device's state, the device's cache emptied, and
the smallest size warms up instead, so training starts as it would have. The step trains as it
runs: pass ``restore=(model, optimizer)`` to put their states back afterwards.

For a neighbour loader over an in-memory graph, denser twins of a few sampled batches — every edge
of the graph among their nodes — run too (:mod:`gnnmon.forecast.variants`): sampled batches keep
edges per node nearly constant, so without them a node's cost and an edge's cannot be told apart
and a full batch's many edges per node are guessed, not measured.

Given a ``capacity``, the model then aims probes at the largest batch size whose heaviest batch
stays under ``fraction`` of it, until the largest that fits and the smallest that does not are
within 5 % (:mod:`gnnmon.forecast.search`): each probe runs the step once on the heaviest batch of
the size aimed at (for a neighbour loader, of an epoch's its sampler draws; for whole graphs, the
costliest graphs), so the answer is a measured
peak, not a forecast: under the target by what the figure cannot resolve, and measured again after
larger probes ran. The batch the model aims at is the one a budget forecasts
(:class:`~gnnmon.forecast.shapes.Heaviest`), so the search and ``forecast(loader, calibration,
capacity).budget()`` answer from one model about one batch.

Every shape a calibration records (its batches', its twins', each probe's) and every shape its
search aims at holds the batch's totals and, for heterogeneous graphs (``HeteroData``), each node
and edge type's count: the model's fit may pick per-type terms (where they explain the peaks better
than the totals), and each forecast then reads them; heaviest means costliest under every
coefficient the model has, per-type ones included.
"""

from __future__ import annotations

import copy
import math
import random
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from gnnmon.devices.oom_error import is_oom
from gnnmon.figures import MEM_PEAK
from gnnmon.forecast import variants
from gnnmon.forecast.forecast import on_host, parse_capacity
from gnnmon.forecast.search import BatchSizeSearch, Probe, search
from gnnmon.forecast.shapes import heaviest, heaviness, item_sizes, sampling, typed
from gnnmon.measure.graph import graph_shape
from gnnmon.measure.memory_fields import cached
from gnnmon.record.active import collect
from gnnmon.report.memory.model import MemoryModel, format_bytes, prime

SIZES = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
"""Batch sizes tried, as multiples of the loader's batch size (smallest first)."""

TWINS = (0.5, 1.0, 2.0)
"""The denser twins a calibration adds for a neighbour loader (:mod:`gnnmon.forecast.variants`): each
of a sampled batch of this multiple of the batch size."""


@dataclass
class Calibration:
    """What :func:`calibrate` ran and fitted."""

    model: MemoryModel
    sizes: list[int]
    """The batch sizes (seed nodes or graphs) the step ran at, in order."""
    shapes: list[dict[str, int]] = field(default_factory=list)
    """Each measured batch's ``num_nodes``, ``num_edges`` (``num_graphs`` for whole graphs) and, for
    a heterogeneous batch, each type's count (``num_nodes__<type>``, ``num_edges__<src>__<rel>__<dst>``):
    every term the model can be fitted on, so a search forecasts a size from them."""
    does_not_fit: dict[str, Any] | None = None
    """The smallest size whose step ran out of memory (the largest, as the warm-up, or the first of
    the sizes after it): ``size``, its shape and ``error``; None if all fit."""
    search: BatchSizeSearch | None = None
    """With a capacity: the probes toward the largest batch size that fits, and what they found."""
    twins: list[dict[str, Any]] = field(default_factory=list)
    """The denser twins run: ``twin`` (``denser``), ``size`` (the sampled batch's items),
    ``num_nodes``, ``num_edges``; where one could not run, ``error`` says why (out of memory, or
    refused by the step) and no larger one was tried."""

    def measured_terms(self) -> dict[str, str]:
        """Each shape field the model used or set aside: ``measured`` (a coefficient of its own),
        or why not (it moved with another field in every batch). A field that barely varied is in
        the model's notes instead."""
        model, out = self.model, {}
        for t in model.terms:
            out[t] = "measured"
        for t, split in model.confounded.items():
            lo, hi = split["ratio"]
            out[t] = f"not measured: it moved with {split['with']} ({lo:.3g}-{hi:.3g} per unit) in every batch"
        return out

    def summary(self) -> str:
        lines = [self.model.summary(), f"calibrated on {len(self.shapes)} batches of "
                 f"{min(self.sizes)}-{max(self.sizes)} items"]
        ran = [t for t in self.twins if "error" not in t]
        if ran:
            ratios = [t["num_edges"] / t["num_nodes"] for t in ran if t["num_nodes"]]
            lines.append(f"and {len(ran)} denser twins (every edge among a sampled batch's nodes: "
                         f"{min(ratios):.3g}-{max(ratios):.3g} edges per node)")
        lines += [f"twin {t['twin']} of {t['size']} items did not run: {t['error']}"
                  for t in self.twins if "error" in t]
        lines += [f"{t}: {how}" for t, how in self.measured_terms().items() if how != "measured"]
        if self.does_not_fit:
            d = self.does_not_fit
            lines.append(f"does not fit: a batch of {d['size']} items ({d['num_nodes']:,} nodes, "
                         f"{d['num_edges']:,} edges) ran out of memory ({d['error']})")
        if self.search is not None:
            lines.append(self.search.summary())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def calibrate(step: Callable[[Any], Any], loader: Any, *, sizes: Sequence[float] = SIZES, repeats: int = 2,
              label: str | None = None, restore: Sequence[Any] = (), seed: int = 0,
              confidence: float = 0.95, capacity: Any = None, fraction: float = 0.9, probes: int = 8,
              candidates: int = 3, exact_host: bool = True, twins: bool = True) -> Calibration:
    """Run ``step(batch)`` (your step decorated with ``@monitor_memory_device``, wrapped to take a
    batch: ``lambda batch: train_step(model, batch, optimizer)``) on ``repeats`` batches at each of
    ``sizes`` times ``loader``'s batch size, and fit the absolute peak (:class:`Calibration`; its
    ``model`` goes to :func:`gnnmon.forecast`). ``restore``: objects with ``state_dict`` (the model,
    the optimizer) put back as they were afterwards. The first batch, of the largest size, is a
    warm-up left out of the fit (see the module's docstring; where it runs out of memory, the
    smallest warms up and :attr:`Calibration.does_not_fit` names it). The rows go to a run of their
    own (in memory), not to the run you are collecting.
    The fit's numerical routines run once before the first step (:func:`~gnnmon.report.memory.model.prime`):
    the host memory their first call keeps is then in the constant the calibration measures.
    ``capacity`` (bytes, ``"80GiB"`` or a device): then up to ``probes`` probes find the largest
    batch size whose heaviest batch (for a neighbour loader, of an epoch's at the size, at least
    ``candidates``; its seeds sampled ``candidates`` times, the heaviest run) peaks under
    ``fraction`` of it by the figure's resolution, to within 5 %, measured last
    (:attr:`Calibration.search` says how close it got). A step measured on the host needs exact host memory
    (:func:`gnnmon.exact_host_memory`, called first): without it the allocator keeps what each
    batch frees, the peaks are not each batch's, and calibrate raises :class:`InexactHostMemory`
    after its warm-up call (the model and optimizer put back); ``exact_host=False`` fits them
    anyway, with a warning and a note on the model. ``twins`` (a neighbour loader over an
    in-memory graph): also run the step on :data:`TWINS`, sampled batches with every edge of the
    graph among their nodes (:mod:`gnnmon.forecast.variants`), so the per-node and per-edge costs
    are each measured and a full batch is forecast from what an edge costs."""
    total = parse_capacity(capacity)[0] if capacity is not None else None
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
    make = _batch_maker(loader)
    base = _batch_size(loader)
    count = _items(loader)
    counts = sorted({max(1, min(count, round(f * base))) for f in sizes})
    if len(counts) < 3:
        raise ValueError(f"calibrate needs at least 3 distinct batch sizes; the loader has {count} items "
                         f"and a batch size of {base}")
    saved = [(obj, copy.deepcopy(obj.state_dict())) for obj in restore]
    prime()  # the fit's first call leaves host memory behind: before the constant is measured, not after
    rng = random.Random(seed)
    shapes: list[dict[str, int]] = []
    ran: list[int] = []
    failed: dict[str, Any] | None = None
    found: BatchSizeSearch | None = None
    try:
        with collect(config={"calibration": {"sizes": counts, "repeats": repeats}}) as run:
            # the warm-up, left out of the fit, at the largest size: a process's host memory at a
            # step's start grows with the largest batch it has run (heap pages, objects), so the
            # fitted rows then start from one state instead of a state that grows with their size
            plan = [c for c in counts for _ in range(repeats)]
            warmups, queue = 1, [counts[-1], *plan]
            while queue:
                size = queue.pop(0)
                batch = make(rng.sample(range(count), size))
                shape = _shape(batch)
                error = _run(step, batch)
                first = not ran and failed is None
                if first and exact_host and _cached(run.records[-1:]):
                    raise InexactHostMemory(INEXACT_HOST.replace("the fit can be", "a fit would be"))
                if error is not None and first:  # the largest does not fit: the smallest warms up instead
                    failed, warmups = {"size": size, **shape, "error": error}, 2
                    queue = [counts[0]] + [c for c in plan if c < size]
                    continue
                if error is not None:
                    failed = {"size": size, **shape, "error": error}
                    break
                shapes.append(shape)
                ran.append(size)
            batch = None  # the last batch is freed: held, it would count in every probe's peak (host memory)
            done_twins = _run_twins(step, make, loader, base, count, rng) if twins and failed is None else []

            def refit() -> MemoryModel:
                return run.report().memory_model(label, MEM_PEAK.name, warmup=warmups, confidence=confidence)

            model = refit()
            if total is not None and failed is None:
                peaks = [r[MEM_PEAK.name] for r in run.records
                         if r.get("label") == model.label and r.get("error") is None]
                measured = [(s, sh, float(p)) for s, sh, p in zip(ran, shapes, peaks, strict=False)][1:]
                probe, shape_at = _prober(step, make, loader, count, rng, candidates, run, model)
                found = search(probe, refit, measured, count, total, fraction, probes, shape_at)
                model = refit()
                found.before_training = before_training(loader, model, found.batch_size)
    finally:
        for obj, state in saved:
            obj.load_state_dict(state)
    if failed is not None:
        model.notes.append(f"a batch of {failed['size']} items ({failed['num_nodes']:,} nodes) did not fit: "
                           "sizes above it were not tried")
    if _cached(run.records):
        model.notes.append(INEXACT_HOST)
        warnings.warn(f"gnnmon.calibrate: {INEXACT_HOST}", RuntimeWarning, 2)
    return Calibration(model, ran, shapes[1:], failed, found, done_twins)


def _run_twins(step: Callable[[Any], Any], make: Callable[[list[int]], Any], loader: Any, base: int,
               count: int, rng: random.Random) -> list[dict[str, Any]]:
    """Run the step on the denser :data:`TWINS` of a neighbour loader's batches (none for another
    loader: a batch of whole graphs holds every edge among its nodes already); what ran, and where
    one could not (out of memory, or the step refused it: it took the loader's own batches, so the
    twin is at fault), why; no larger twin is tried after one that could not run."""
    graph = variants.graph_of(loader) if _is_node_loader(loader) else None
    if graph is None:
        return []
    out: list[dict[str, Any]] = []
    for multiple in TWINS:
        size = max(1, min(count, round(multiple * base)))
        try:
            batch = variants.denser(make(rng.sample(range(count), size)), graph)
        except Exception as exc:  # noqa: BLE001 - an extra the calibration can do without
            out.append({"twin": "denser", "size": size, "error": f"it could not be built: {_first_line(exc)}"})
            break
        if batch is None:
            out.append({"twin": "denser", "size": size, "error": variants.WHY_NOT})
            break
        entry: dict[str, Any] = {"twin": "denser", "size": size, **_shape(batch)}
        try:
            error = _run(step, batch)
        except Exception as exc:  # the step ran the loader's batches: the twin is at fault
            if "CUDA error" in str(exc):
                raise  # the device is unusable (a device-side assert): nothing after would run
            error = f"the step refused it: {_first_line(exc)}"
        batch = None
        if error is not None:
            out.append({**entry, "error": error})
            break
        out.append(entry)
    return out


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


EDGE_COPY_BYTES = 16
"""Bytes a PyG neighbour loader's sampler keeps per edge of its graph: its own copy sorted by
destination (the row index and the permutation back, int64 each; docs/memory.md)."""


def before_training(loader: Any, model: MemoryModel, size: int) -> str | None:
    """What to do before building a loader of ``size`` items after calibrating on ``loader``, in
    words, where the search measured the host (``model``'s device) with a neighbour loader, which
    keeps its own copy of the graph's edges in a reference cycle (freed only by a garbage
    collection): the answer was measured with one such copy held, and a second beside it adds to
    every step's peak. None elsewhere: a GPU's peak does not hold the host's copy, and a loader of
    whole graphs holds no copy of its dataset."""
    if not (size and on_host(model) and sampling(loader)):
        return None
    data = getattr(loader, "data", None)
    edges = graph_shape(data).get("num_edges") if data is not None else None
    held = (f" ({format_bytes(EDGE_COPY_BYTES * edges)} for this graph's {edges:,} edges)" if edges else "")
    return (f"drop this calibration's loader before you build one of {size:,} items (del loader; gc.collect()): a "
            f"neighbour loader keeps its own copy of the graph's edges, {EDGE_COPY_BYTES} bytes an edge{held}, until "
            "a garbage collection, and the answer was measured with one such copy held: a second beside it adds "
            "to every step's peak on the host. Or train with this loader, or forecast again just before training "
            "(docs/memory.md)")


class InexactHostMemory(ValueError):
    """calibrate was asked to measure host memory the allocator keeps (no exact host memory)."""


def _cached(records: Sequence[dict[str, Any]]) -> bool:
    """Whether any of these rows measured host memory the allocator kept (the run's ``host_memory`` says so)."""
    return cached(records)


INEXACT_HOST = ("host memory was measured without gnnmon.exact_host_memory(): freed memory stayed in the "
                "process, so each batch's peak shows only growth beyond what earlier batches left and the fit "
                "can be several times off; call gnnmon.exact_host_memory() first (docs/memory.md), or "
                "calibrate(..., exact_host=False) to fit them anyway")
"""What a calibration on the host says when the allocator kept freed memory (its peaks are not each batch's)."""


def _prober(step: Callable[[Any], Any], make: Callable[[list[int]], Any], loader: Any, count: int,
            rng: random.Random, candidates: int, run: Any, model: MemoryModel,
            ) -> tuple[Probe, Callable[[int], dict[str, float]] | None]:
    """A probe that runs ``step`` once on the heaviest of ``candidates`` batches of a size (for a
    neighbour loader, each sampled on the seeds of the heaviest batch its sampler drew at the size,
    :meth:`~gnnmon.forecast.shapes.Heaviest.seeds`, so a re-check runs that batch again, not a
    fresh lighter one; for whole graphs, the ones that cost most under ``model``), inside the
    calibration's run: (shape,
    peak bytes or None, OOM text); and the shape of that heaviest batch at each size
    (:func:`~gnnmon.forecast.shapes.heaviest`, what a budget forecasts too), None where it is not
    known. Heaviest by every coefficient of ``model`` (the totals', or each type's for a model of
    per-type terms); each shape holds every field the model can ask (:func:`_shape`)."""
    sizes = item_sizes(getattr(loader, "dataset", None)) if not _is_node_loader(loader) else None
    weight = {t: c for t, c in model.coefficients.items()  # an untrusted fit's NaN: by nodes, then edges
              if t != "const" and math.isfinite(c)}
    shape_at = heaviest(loader if _is_node_loader(loader) else getattr(loader, "dataset", None), sizes,
                        weight, max(1, candidates))
    order = shape_at.order if shape_at is not None else None

    def probe(size: int) -> tuple[dict[str, int], float | None, str | None]:
        seeds = shape_at.seeds(size) if shape_at is not None and order is None else None
        if order is not None:
            batch = make(order[:size])
        else:  # the heaviest seed set the sampler drew at the size (re-sampled: its hops draw afresh), or any
            drawn = [make(seeds if seeds is not None else rng.sample(range(count), size))
                     for _ in range(max(1, candidates))]
            batch = max(drawn, key=lambda b: heaviness(_shape(b), weight))
            del drawn  # the others are freed: held, they would count in the probe's peak (host memory)
        shape = _shape(batch)
        error = _run(step, batch)
        batch = None  # freed before the next probe builds its own (host memory)
        if error is not None:
            return shape, None, error
        rows = [r for r in run.records if r.get("label") == model.label]
        return shape, float(rows[-1][MEM_PEAK.name]), None

    return probe, shape_at


def _run(step: Callable[[Any], Any], batch: Any) -> str | None:
    """Run ``step(batch)``: None, or the out-of-memory error's first line (the device's cache then
    emptied); any other error is the user's and propagates."""
    try:
        step(batch)
    except Exception as exc:  # only an out-of-memory error is ours to report
        if not is_oom(exc):
            raise
        _free_device_cache()
        return _first_line(exc)
    return None


def _shape(batch: Any) -> dict[str, int]:
    """A batch's ``num_nodes``, ``num_edges``, ``num_graphs`` (where it has them) and, for a
    heterogeneous batch, each node and edge type's count as :func:`gnnmon.graph_shape` reads it
    (what its row records, so what a model of per-type terms was fitted on)."""
    shape = {"num_nodes": int(batch.num_nodes), "num_edges": int(getattr(batch, "num_edges", 0) or 0)}
    graphs = getattr(batch, "num_graphs", None)
    if isinstance(graphs, int):
        shape["num_graphs"] = graphs
    shape.update({t: int(v) for t, v in typed(graph_shape(batch)).items()})
    return shape


def _is_node_loader(loader: Any) -> bool:
    return callable(loader) and hasattr(loader, "collate_fn") and (hasattr(loader, "node_sampler")
                                                                   or hasattr(loader, "link_sampler"))


def _batch_maker(loader: Any) -> Callable[[list[int]], Any]:
    """How to build a batch of chosen items with the loader's own machinery."""
    if _is_node_loader(loader):
        return lambda idx: loader(torch.tensor(idx))  # PyG's NodeLoader / LinkLoader: sample and gather
    collate = getattr(loader, "collate_fn", None)
    dataset = getattr(loader, "dataset", None)
    if collate is not None and dataset is not None:
        return lambda idx: collate([dataset[i] for i in idx])  # a DataLoader over graphs
    raise TypeError(f"calibrate needs a PyG loader (NeighborLoader, LinkNeighborLoader) or a DataLoader over "
                    f"graphs, got {type(loader).__name__}")


def _batch_size(loader: Any) -> int:
    size = getattr(loader, "batch_size", None)
    return int(size) if isinstance(size, int) and size > 0 else 32


def _items(loader: Any) -> int:
    dataset = getattr(loader, "dataset", None)
    if dataset is None:
        raise TypeError(f"calibrate needs a loader with a dataset, got {type(loader).__name__}")
    return len(dataset)


def _free_device_cache() -> None:
    """Give back what the failed step's allocator cached (CUDA), so training starts as it would have."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
