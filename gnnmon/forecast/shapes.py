"""The shapes of the batches a loader would make, read without running a model.

* a PyG ``NeighborLoader`` (any ``NodeLoader``): its sampler alone runs on each batch of seed nodes
  (``sample_from_nodes``); features are never gathered;
* a PyG ``LinkNeighborLoader`` (any ``LinkLoader``): its sampler alone runs on each batch of seed
  edges, with the loader's negative sampling (``sample_from_edges``); ``items`` counts the seed
  edges;
* a ``DataLoader`` over a dataset of graphs (PyG's, with a batch size or a ``batch_sampler`` such as
  ``DynamicBatchSampler``): each graph's size is read once (from an ``InMemoryDataset``'s slices
  where it has them, else from the graph) and summed over the indices each batch would hold;
* a dataset of graphs: each graph as a batch of one;
* one graph (a PyG ``Data`` or ``HeteroData``): the full batch, the whole graph in one step;
* any other iterable: its items, as :func:`gnnmon.graph_shape` reads them (a loader of another kind
  is run in full), or shape dicts as a run's rows carry them.

Each shape is a dict of ``num_nodes``, ``num_edges``, ``num_graphs`` and ``items``: the seed nodes
or graphs the batch was made of; for heterogeneous graphs (``HeteroData``) also each type's count,
``num_nodes__<type>`` and ``num_edges__<src>__<rel>__<dst>`` (:data:`TYPED`), wherever a shape is
read, summed or sampled (a graph's size, a batch of whole graphs, a sampler's batch, the heaviest
batch of a size): a memory model fitted on per-type terms is asked each of them.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sized
from typing import Any

from gnnmon.measure.graph import graph_shape

SHAPE_KEYS = ("num_nodes", "num_edges", "num_graphs")
TYPED = ("num_nodes__", "num_edges__")
"""The prefixes of a heterogeneous shape's per-type fields (:func:`gnnmon.graph_shape`)."""


def typed(shape: Mapping[str, Any]) -> dict[str, int]:
    """``shape``'s per-type counts (:data:`TYPED` fields whose count is known); none for a
    homogeneous shape."""
    return {t: v for t, v in shape.items() if t.startswith(TYPED) and v is not None}


def _progress(items: Any, total: int | None, show: bool | None) -> Any:
    """``items`` with a progress bar on stderr (tqdm; ``show`` None: only on a terminal, after a second)."""
    if show is False:
        return items
    from tqdm import tqdm  # a dependency, imported where a bar may be shown

    return tqdm(items, total=total, desc="gnnmon: reading batch shapes", unit="batch", delay=0 if show else 1.0,
                file=sys.stderr, leave=False, disable=None if show is None else False)


def _sampled(out: Any, seeds: int) -> dict[str, Any]:
    """The shape of a sampler's output (``SamplerOutput`` or ``HeteroSamplerOutput``)."""
    if isinstance(out.node, Mapping):
        shape: dict[str, Any] = {f"num_nodes__{t}": int(v.numel()) for t, v in out.node.items()}
        shape.update({f"num_edges__{'__'.join(t)}": int(v.numel()) for t, v in out.row.items()})
        shape["num_nodes"] = sum(v for k, v in shape.items() if k.startswith("num_nodes__"))
        shape["num_edges"] = sum(v for k, v in shape.items() if k.startswith("num_edges__"))
    else:
        shape = {"num_nodes": int(out.node.numel()), "num_edges": int(out.row.numel())}
    return {**shape, "num_graphs": 1, "items": seeds}


def _sample(loader: Any, index: Any) -> Any:
    """A node or link loader's sampler alone on the seeds at ``index`` (with the loader's negative sampling)."""
    if hasattr(loader, "node_sampler"):
        return loader.node_sampler.sample_from_nodes(loader.input_data[index])
    return loader.link_sampler.sample_from_edges(loader.input_data[index], neg_sampling=loader.neg_sampling)


def sampling(source: Any) -> bool:
    """Whether ``source`` is a PyG node or link loader (its sampler can run without it)."""
    return (hasattr(source, "node_sampler") or hasattr(source, "link_sampler")) and hasattr(source, "input_data")


def graph_sizes(dataset: Any) -> list[dict[str, Any]]:
    """Each graph's shape, in the dataset's order: from an ``InMemoryDataset``'s slices (no graph
    is built) where it has ``x``/``edge_index`` slices, else from each graph: its totals and, for a
    ``HeteroData`` graph, each type's count (:data:`TYPED`)."""
    slices = getattr(dataset, "slices", None)
    out: list[dict[str, Any]] = []
    if isinstance(slices, Mapping) and "edge_index" in slices and ("x" in slices or "num_nodes" in slices):
        nodes = slices["x"] if "x" in slices else None
        edges = slices["edge_index"]
        for i in dataset.indices():
            n = int(nodes[i + 1] - nodes[i]) if nodes is not None else int(dataset[i].num_nodes)
            out.append({"num_nodes": n, "num_edges": int(edges[i + 1] - edges[i]), "num_graphs": 1})
        return out
    for i in range(len(dataset)):
        shape = graph_shape(dataset[i])
        out.append({**{k: shape.get(k) for k in SHAPE_KEYS}, **typed(shape)})
    return out


def _graph_loader(batch_sampler: Any, sizes: list[dict[str, Any]], show: bool | None) -> Iterator[dict[str, Any]]:
    fields = sorted({t for g in sizes for t in typed(g)})  # a type a graph lacks: 0 of it
    for index in _progress(batch_sampler, None, show):
        index = list(index)
        yield {"num_nodes": sum(sizes[i]["num_nodes"] for i in index),
               "num_edges": sum(sizes[i]["num_edges"] for i in index), "num_graphs": len(index), "items": len(index),
               **{t: sum(sizes[i].get(t) or 0 for i in index) for t in fields}}


def _is_graph_dataset(obj: Any) -> bool:
    """A PyG dataset, or a list of PyG graphs (what PyG's DataLoader also takes)."""
    pyg = sys.modules.get("torch_geometric.data")
    if pyg is None:
        return False
    if isinstance(obj, pyg.Dataset):
        return True
    return isinstance(obj, (list, tuple)) and bool(obj) and isinstance(obj[0], pyg.data.BaseData)


def batch_shapes(source: Any, progress: bool | None = None,
                 sizes: list[dict[str, Any]] | None = None) -> Iterator[dict[str, Any]]:
    """The shape of each batch ``source`` would make (see the module's docstring); ``sizes``: its
    graphs' shapes where :func:`item_sizes` has read them already."""
    if sampling(source) and hasattr(source, "batch_sampler"):
        for index in _progress(source.batch_sampler, len(source.batch_sampler), progress):
            yield _sampled(_sample(source, index), len(index))
        return
    pyg = sys.modules.get("torch_geometric.data")
    if pyg is not None and isinstance(source, pyg.data.BaseData):  # one graph: the full batch
        yield {**graph_shape(source), "items": 1}
        return
    sizes = item_sizes(source) if sizes is None else sizes
    if sizes is not None:
        if _is_graph_dataset(source):
            for shape in sizes:
                yield {**shape, "items": 1}
        else:
            yield from _graph_loader(source.batch_sampler, sizes, progress)
        return
    if not isinstance(source, Iterable):
        raise TypeError(f"forecast needs a loader, a dataset of graphs or an iterable of batches; "
                        f"got {type(source).__name__}")
    for item in _progress(source, len(source) if isinstance(source, Sized) else None, progress):
        shape = dict(item) if isinstance(item, Mapping) else graph_shape(item)
        if shape.get("num_nodes") is None:
            raise TypeError(f"a batch whose shape cannot be read: {type(item).__name__} (give PyG batches, "
                            f"or dicts with num_nodes and num_edges)")
        graphs = shape.get("num_graphs") or 1
        shape.setdefault("items", shape.get("batch_size") or graphs)
        yield shape


def item_sizes(source: Any) -> list[dict[str, Any]] | None:
    """Each graph's shape where ``source`` batches whole graphs (a dataset, or a loader with a batch
    sampler over one): what a batch of any size would sum; None for a node-level loader or plain batches."""
    if _is_graph_dataset(source):
        return graph_sizes(source)
    dataset = getattr(source, "dataset", None)
    if getattr(source, "batch_sampler", None) is not None and _is_graph_dataset(dataset):
        return graph_sizes(dataset)
    return None


def graph_size(source: Any, sizes: list[dict[str, Any]] | None = None) -> tuple[dict[str, int], str]:
    """The most nodes and edges one batch of ``source`` can hold, where its graph's size is known,
    and what that graph is in words; else no count and why it is not known. A neighbour loader's
    batch holds each node of its graph at most once (no edge more than once without replacement),
    unless its sampler is disjoint (each seed its own copy of its neighbourhood); a batch of whole
    graphs holds at most all of them (``sizes``, as :func:`item_sizes` read them); one graph is the
    full batch. Plain batches (a run's rows) do not say how large their graph is."""
    pyg = sys.modules.get("torch_geometric.data")
    if sampling(source):
        sampler = getattr(source, "node_sampler", None) or getattr(source, "link_sampler", None)
        if getattr(sampler, "disjoint", False):
            return {}, ("the loader's sampler is disjoint: each seed gets its own copy of its neighbourhood, so a "
                        "batch can hold a node more than once")
        data = getattr(source, "data", None)
        if pyg is None or not isinstance(data, pyg.data.BaseData):
            return {}, (f"the loader's graph is not a PyG Data or HeteroData ({type(data).__name__}): its size is "
                        "not read")
        shape = graph_shape(data)
        out = {"num_nodes": shape.get("num_nodes"), "num_edges": None if getattr(sampler, "replace", False)
               else shape.get("num_edges")}  # with replacement an edge can be sampled twice
        return {t: int(v) for t, v in out.items() if v is not None}, "the loader's graph"
    if sizes is not None:
        return ({t: sum(g[t] or 0 for g in sizes) for t in ("num_nodes", "num_edges")},
                f"the dataset's {len(sizes):,} graphs together")
    if pyg is not None and isinstance(source, pyg.data.BaseData):
        shape = graph_shape(source)
        return {t: int(shape[t]) for t in ("num_nodes", "num_edges") if shape.get(t) is not None}, "the graph"
    return {}, "the batches read do not say how large their graph is (a run's rows record its batches, not its graph)"


DRAWS = 3
"""The fewest batches a sampler draws at a size for :class:`Heaviest` (the heaviest is kept): at a
size of more than a third of the seeds an epoch holds fewer batches than this."""

EPOCH_DRAWS = 512
"""The most batches a sampler draws at a size for :class:`Heaviest`: one epoch's batches at the
size (every seed once, as a shuffling loader draws them), up to this many where an epoch holds
more (small sizes: each draw is cheap, but there are many)."""


def draws_at(k: int, count: int, least: int = DRAWS, most: int = EPOCH_DRAWS) -> int:
    """How many batches of ``k`` of ``count`` items :class:`Heaviest` draws: an epoch's full
    batches (``count // k``), at least ``least``, at most ``most``; one where ``k`` holds every item."""
    if k >= count:
        return 1
    return max(least, min(most, count // max(k, 1)))


def heaviness(shape: Mapping[str, Any], weight: Mapping[str, float] | None) -> tuple[float, float, float]:
    """What orders batches, heaviest last: ``(cost, nodes, edges)``, the cost the batch's bytes under
    ``weight`` (bytes per each shape field it names: ``num_nodes``, ``num_edges``, ``num_graphs``, or a
    per-type count such as ``num_nodes__paper``, a memory model's coefficients; none: 0, so nodes
    decide)."""
    w = weight or {}
    cost = sum(c * float(shape.get(t) or 0) for t, c in w.items())
    return cost, float(shape.get("num_nodes") or 0), float(shape.get("num_edges") or 0)


SAMPLED_WITHIN = 0.01
"""A search over sizes of a sampler's batches stops within this share of the largest that fits:
each size it asks costs a few samplings (tens to hundreds of milliseconds on a 2-core machine)."""


class Heaviest:
    """The shape of the heaviest batch of ``k`` items a loader makes, for any ``k`` (one definition
    for the budget's worst batch and the batch-size search's aim), heaviest by ``weight`` (bytes
    per node, edge and graph, or per node and edge of each type: a memory model's coefficients),
    then by nodes and edges. A shape holds the totals and, for heterogeneous graphs, each type's
    count (every term a model of per-type terms asks); a batch of none, 0 of each:

    * a neighbour loader (``NeighborLoader``, ``LinkNeighborLoader``): its sampler alone (no
      features gathered) on the seed sets one epoch at size ``k`` makes (:func:`draws_at`: every
      seed once, from a shuffled order, as a shuffling loader draws them; at least :data:`DRAWS`,
      at most :data:`EPOCH_DRAWS`), the heaviest kept, and its seeds (:meth:`seeds`: the batch a
      probe runs). A graph with hubs makes a few batches far heavier than the rest: three draws
      miss them, an epoch's do not. Sampled neighbourhoods overlap more as batches grow, so a
      batch's nodes per seed fall with its size: they are sampled at each size, not scaled from
      another. The seed sets and the sampler's draws come from torch's generator seeded by ``k``
      (the caller's state put back), so one size always gives one shape. Batches the loader made
      (:meth:`scanned`: a forecast's scan of an epoch at the loader's batch size) count too: a
      batch of at least their items is taken to be at least as heavy as the heaviest of them. The
      loader is held weakly (it holds its own copy of the graph's edges): a size asked after it was
      freed raises ``ReferenceError``;
    * whole graphs: the ``k`` graphs that cost most, summed (each field, each type's count too): no
      batch of ``k`` of them costs more.

    ``items``: what the loader batches (seed nodes or edges, graphs); no batch holds more;
    ``order``: for whole graphs, their indices, costliest first (the first ``k`` are the batch);
    ``within``: how near the last item a search over sizes goes (:func:`~gnnmon.forecast.forecast.largest`):
    :data:`SAMPLED_WITHIN` where each size costs a few samplings, 0 for summed graphs."""

    def __init__(self, items: int, shape: Callable[[int], dict[str, float]], how: str,
                 weight: Mapping[str, float] | None = None, order: list[int] | None = None,
                 within: float = 0.0) -> None:
        self.items = items
        self._shape = shape
        self.how = how
        self.weight = dict(weight or {})
        self.order = order
        self.within = within
        self._seen: dict[int, dict[str, float]] = {}
        self.drawn: dict[int, int] = {}
        """Per size sampled: how many batches were drawn at it."""
        self._seeds: dict[int, list[int]] = {}
        self._scanned: dict[int, tuple[int, dict[str, float]]] = {}
        self._drawn_shape: dict[int, dict[str, float]] = {}

    def key(self, shape: Mapping[str, Any]) -> tuple[float, float, float]:
        """:func:`heaviness` under :attr:`weight`."""
        return heaviness(shape, self.weight)

    def scanned(self, items: int, shape: Mapping[str, Any]) -> None:
        """Note a batch of ``items`` the loader made (a forecast's scan): every size of at least
        ``items`` is then at least as heavy as the heaviest such batch (a batch of more seeds holds
        at least as many heavy ones where the sampler meets them)."""
        shape = {t: v for t, v in shape.items() if t != "items" and v is not None}
        count, heaviest = self._scanned.get(items, (0, shape))
        self._scanned[items] = (count + 1, shape if self.key(shape) > self.key(heaviest) else heaviest)
        self._seen.clear()  # every size at or above it may now be heavier

    def _floor(self, k: int) -> tuple[int, int, dict[str, float]] | None:
        """The heaviest scanned batch of at most ``k`` items: (its items, batches read of them, its shape)."""
        below = [(s, n, sh) for s, (n, sh) in self._scanned.items() if s <= k]
        return max(below, key=lambda b: self.key(b[2])) if below else None

    def seeds(self, k: int) -> list[int] | None:
        """The seed positions of the heaviest batch drawn at ``k`` (a sampler's; None for whole
        graphs, whose batch is :attr:`order`'s first ``k``)."""
        self(k)
        return self._seeds.get(max(0, min(int(k), self.items)))

    def said(self, k: int) -> str:
        """What the worst batch of ``k`` items is taken from, in words: how many batches were drawn
        at the size and the heaviest's nodes, the scanned batch where that is heavier, and the chance
        that one batch training draws is heavier than the heaviest of ``n`` drawn (at most
        ``1 / (n + 1)``: any ``n + 1`` draws are alike, and each is the heaviest as often; an epoch of
        ``n`` more holds a heavier one up to half the time)."""
        k = max(0, min(int(k), self.items))
        shape = self(k)
        n = self.drawn.get(k)
        if n is None:
            return f"{self.how} ({k:,} items: {shape['num_nodes']:,.0f} nodes)"
        epoch = self.items // k if k else 0
        whole = ("one epoch's: every seed once" if n == epoch else
                 f"of an epoch's {epoch:,}" if n < epoch else f"more than an epoch's {max(epoch, 1):,}")
        text = f"the heaviest of {n:,} batches its sampler draws at {k:,} items ({whole})"
        floor = self._floor(k)
        if floor is not None and self.key(floor[2]) >= self.key(self._drawn_shape[k]):
            s, count, sh = floor
            text += (f", or heavier: of the {count:,} batches of {s:,} items the loader made, the heaviest "
                     f"({sh['num_nodes']:,.0f} nodes), which a batch of more items is taken to reach")
        # exchangeable draws: a further batch beats the heaviest of n with a chance of at most 1 in n + 1, and
        # some batch of an epoch of E more with a chance of at most E / (n + E)
        risk = f"; one epoch of {epoch:,} holds a heavier one with a chance of up to {epoch / (n + epoch):.0%}" \
            if epoch > 1 else ""
        return (f"{text}: {shape['num_nodes']:,.0f} nodes; a batch training draws is heavier than the heaviest drawn "
                f"with a chance of at most 1 in {n + 1:,}{risk}")

    def __call__(self, k: int) -> dict[str, float]:
        k = max(0, min(int(k), self.items))
        if k not in self._seen:
            if k == 0:
                self._seen[k] = dict.fromkeys(self(1) if self.items else SHAPE_KEYS, 0)
                return self._seen[k]
            if k not in self._drawn_shape:
                self._drawn_shape[k] = self._shape(k)
            shape = self._drawn_shape[k]
            floor = self._floor(k)
            self._seen[k] = floor[2] if floor is not None and self.key(floor[2]) > self.key(shape) else shape
        return self._seen[k]


def heaviest(source: Any, sizes: list[dict[str, Any]] | None = None,
             weight: Mapping[str, float] | None = None, draws: int = DRAWS) -> Heaviest | None:
    """:class:`Heaviest` for ``source`` (a neighbour loader, or a loader or dataset of whole graphs
    whose ``sizes`` :func:`item_sizes` read); None for anything else (its batches at other sizes
    are not known). ``weight``: bytes per ``num_nodes``, ``num_edges``, ``num_graphs`` and per-type
    count (:func:`heaviness`; default: heaviest by nodes, then edges); ``draws``: the fewest batches a
    sampler draws at a size (:func:`draws_at`: an epoch's, at least these)."""
    if draws < 1:
        raise ValueError(f"draws must be at least 1, got {draws!r}")
    if sampling(source):
        count = len(source.dataset)  # a node or link loader's dataset: the positions of its seeds
        held = weakref.ref(source)  # not kept alive: a loader holds its own copy of the graph's edges

        def sampled(k: int) -> dict[str, float]:
            import torch  # a forecast is off the step's path

            loader = held()
            if loader is None:
                raise ReferenceError("the loader whose batches these are has been freed: its batches at other "
                                     "sizes are sampled from it; keep it, or forecast again with the loader")
            n = draws_at(k, count, draws)
            best: tuple[tuple[float, float, float], dict[str, float], Any] | None = None
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(k)
                per_epoch, order = max(1, count // k), None
                for j in range(n):  # an epoch's batches: a shuffled order cut into runs of k, as the loader cuts it
                    if j % per_epoch == 0:
                        order = torch.randperm(count)
                    assert order is not None
                    index = order[(j % per_epoch) * k:(j % per_epoch + 1) * k]
                    out = _sample(loader, index)
                    shape = {t: v for t, v in _sampled(out, k).items() if t != "items"}
                    del out
                    if best is None or result.key(shape) > best[0]:
                        best = (result.key(shape), shape, index)
            assert best is not None
            result.drawn[k] = n
            result._seeds[k] = [int(i) for i in best[2]]
            return best[1]

        result = Heaviest(count, sampled, "the heaviest of an epoch's batches its sampler draws at the size",
                          weight, within=SAMPLED_WITHIN)
        return result
    if sizes is None:
        return None
    order = sorted(range(len(sizes)), key=lambda i: heaviness(sizes[i], weight), reverse=True)
    fields = ["num_nodes", "num_edges", *sorted({t for g in sizes for t in typed(g)})]  # a type a graph lacks: 0
    sums = [dict.fromkeys(fields, 0)]
    for i in order:
        sums.append({t: sums[-1][t] + (sizes[i][t] if t == "num_nodes" else sizes[i].get(t) or 0) for t in fields})

    def summed(k: int) -> dict[str, float]:
        return {**sums[k], "num_graphs": k}

    return Heaviest(len(sizes), summed, "the graphs that cost most, summed", weight, order)
