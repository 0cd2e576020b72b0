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

Each shape is a dict of ``num_nodes``, ``num_edges``, ``num_graphs`` (per type for heterogeneous
graphs) and ``items``: the seed nodes or graphs the batch was made of.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping, Sized
from typing import Any

from gnnmon.measure.graph import graph_shape

SHAPE_KEYS = ("num_nodes", "num_edges", "num_graphs")


def _progress(items: Any, total: int | None, show: bool | None) -> Any:
    """``items`` with a progress bar on stderr (tqdm; ``show`` None: only on a terminal, after a second)."""
    if show is False:
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return items
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


def _node_loader(loader: Any, show: bool | None) -> Iterator[dict[str, Any]]:
    for index in _progress(loader.batch_sampler, len(loader.batch_sampler), show):
        out = loader.node_sampler.sample_from_nodes(loader.input_data[index])
        yield _sampled(out, len(index))


def _link_loader(loader: Any, show: bool | None) -> Iterator[dict[str, Any]]:
    for index in _progress(loader.batch_sampler, len(loader.batch_sampler), show):
        out = loader.link_sampler.sample_from_edges(loader.input_data[index], neg_sampling=loader.neg_sampling)
        yield _sampled(out, len(index))


def graph_sizes(dataset: Any) -> list[dict[str, Any]]:
    """Each graph's shape, in the dataset's order: from an ``InMemoryDataset``'s slices (no graph
    is built) where it has ``x``/``edge_index`` slices, else from each graph."""
    slices = getattr(dataset, "slices", None)
    if isinstance(slices, Mapping) and "edge_index" in slices and ("x" in slices or "num_nodes" in slices):
        nodes = slices["x"] if "x" in slices else None
        edges = slices["edge_index"]
        out = []
        for i in dataset.indices():
            n = int(nodes[i + 1] - nodes[i]) if nodes is not None else int(dataset[i].num_nodes)
            out.append({"num_nodes": n, "num_edges": int(edges[i + 1] - edges[i]), "num_graphs": 1})
        return out
    return [{k: graph_shape(dataset[i]).get(k) for k in SHAPE_KEYS} for i in range(len(dataset))]


def _graph_loader(batch_sampler: Any, sizes: list[dict[str, Any]], show: bool | None) -> Iterator[dict[str, Any]]:
    for index in _progress(batch_sampler, None, show):
        index = list(index)
        yield {"num_nodes": sum(sizes[i]["num_nodes"] for i in index),
               "num_edges": sum(sizes[i]["num_edges"] for i in index), "num_graphs": len(index), "items": len(index)}


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
    if hasattr(source, "node_sampler") and hasattr(source, "input_data") and hasattr(source, "batch_sampler"):
        yield from _node_loader(source, progress)
        return
    if hasattr(source, "link_sampler") and hasattr(source, "input_data") and hasattr(source, "batch_sampler"):
        yield from _link_loader(source, progress)
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
