"""Batches denser than a neighbour loader's, so a calibration measures a node's cost and an edge's
apart.

A neighbour sampler keeps edges per node nearly constant (each sampled edge brings about one new
node), so its batches at any size move nodes and edges together and cannot tell one's cost from
the other's; a full batch then has ten or twenty times the edges per node the fit saw.
:func:`denser` keeps a sampled batch's nodes (and every node attribute and batch field:
``batch_size``, ``n_id``, ``input_id``) and gives it every edge of the loader's graph among them
(the induced subgraph: a full batch's density where the batch covers the graph; what a sampler
with ``subgraph_type="induced"`` returns), edge attributes gathered from the graph, so the user's
step takes it as it takes the loader's own.

Only denser: below the sampler's ratio the peak is set by the nodes' tensors, not the edges' (a
GraphSAGE step on the CPU with half its edges dropped peaked within 1 MiB of the whole batch;
docs/memory.md), so a sparser batch says nothing of what an edge costs at a full batch's density,
and skews the fit.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

CHUNK = 1 << 24
"""Edges of the graph looked at at once when a denser twin gathers a batch's edges (16 M: a few
hundred MiB of temporaries, not the whole index's)."""

HOP_COUNTS = ("num_sampled_nodes", "num_sampled_edges")
"""Per-hop counts a sampled batch carries for ``trim_to_layer``: a variant's edges no longer follow
the hops, so it drops them (a step that trims then runs untrimmed, which is what a full batch does)."""


def graph_of(loader: Any) -> Any | None:
    """The in-memory graph a PyG node loader samples from (``loader.data``), or None (a remote
    feature and graph store, or a loader of whole graphs)."""
    data = getattr(loader, "data", None)
    if data is None or isinstance(data, tuple) or getattr(data, "edge_index", None) is None:
        return None
    return data


WHY_NOT = ("the batch does not name each graph node once (n_id; disjoint sampling repeats them) "
           "or carries an edge attribute the graph does not hold")
"""What a calibration says where :func:`denser` gives None."""


def denser(batch: Any, graph: Any) -> Any | None:
    """``batch`` with every edge of ``graph`` among its nodes (``batch.n_id``: their ids in the
    graph); None where the batch does not name each graph node once, or carries an edge attribute
    the graph does not hold (see :data:`WHY_NOT`)."""
    n_id = getattr(batch, "n_id", None)
    if not isinstance(n_id, torch.Tensor) or getattr(batch, "edge_index", None) is None:
        return None
    if n_id.unique().numel() != n_id.numel():  # disjoint sampling: a node in several subgraphs
        return None
    edge_index = graph.edge_index
    local = torch.full((int(graph.num_nodes),), -1, dtype=torch.long, device=edge_index.device)
    local[n_id.to(edge_index.device)] = torch.arange(n_id.numel(), device=edge_index.device)
    kept: list[torch.Tensor] = []
    for start in range(0, edge_index.shape[1], CHUNK):  # a large graph's index is not copied whole
        part = local[edge_index[:, start:start + CHUNK]]
        kept.append(((part[0] >= 0) & (part[1] >= 0)).nonzero().view(-1) + start)
    keep = torch.cat(kept) if kept else torch.empty(0, dtype=torch.long)
    out = _without_hops(batch)
    out.edge_index = local[edge_index[:, keep]].to(batch.edge_index.device)
    for key in list(out.keys()):
        if key == "edge_index" or key == "n_id":
            continue
        if key == "e_id":
            out.e_id = keep.to(batch.edge_index.device)
        elif key in graph and isinstance(graph[key], torch.Tensor):  # the graph says what it is
            if graph.is_edge_attr(key):
                out[key] = graph[key][keep.to(graph[key].device)].to(batch[key].device)
        elif batch.is_edge_attr(key) and not batch.is_node_attr(key):
            return None  # an edge attribute of the batch's own the graph does not hold
    return out


def _without_hops(batch: Any) -> Any:
    out = copy.copy(batch)
    for key in HOP_COUNTS:
        if key in out:
            del out[key]
    return out
