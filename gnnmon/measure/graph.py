"""The shape of the PyG batch a call works on: nodes, edges, graphs, seed nodes.

Read from tensor sizes only (never a value, so never a device sync), and only when PyG is already
imported (gnnmon never imports it). Fields: ``num_nodes``, ``num_edges``, ``num_graphs``,
``batch_size`` (seed nodes of a NeighborLoader batch); for ``HeteroData`` also
``num_nodes__<type>`` and ``num_edges__<src>__<rel>__<dst>`` per type.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import torch

from gnnmon.record import state

# Attributes whose first dimension is the node count (PyG's N_KEYS).
_NODE_KEYS = ("x", "pos", "batch", "n_id", "node_type", "feat")


def _num_nodes(store: Any) -> int | None:
    mapping = store._mapping
    n = mapping.get("num_nodes")
    if isinstance(n, int):
        return n
    for key in _NODE_KEYS:
        v = mapping.get(key)
        if isinstance(v, torch.Tensor) and v.dim() > 0:
            return int(v.size(0))
    return None


def _num_edges(store: Any) -> int | None:
    mapping = store._mapping
    ei = mapping.get("edge_index")
    if isinstance(ei, torch.Tensor) and ei.dim() == 2:
        return int(ei.size(1))
    for key in ("edge_attr", "e_id", "edge_weight"):
        v = mapping.get(key)
        if isinstance(v, torch.Tensor) and v.dim() > 0:
            return int(v.size(0))
    return None


def _int_attr(obj: Any, name: str) -> int | None:
    v = obj._store._mapping.get(name) if hasattr(obj, "_store") else None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def graph_shape(data: Any) -> dict[str, Any]:
    """Shape fields of a PyG ``Data``, ``Batch`` or ``HeteroData`` (values None where unknown)."""
    pyg = sys.modules.get("torch_geometric.data")
    if pyg is None:
        return {}
    if isinstance(data, pyg.HeteroData):
        fields: dict[str, Any] = {}
        nodes = edges = 0
        nodes_known = edges_known = True
        for store in data.node_stores:
            n = _num_nodes(store)
            fields[f"num_nodes__{store._key}"] = n
            nodes_known &= n is not None
            nodes += n or 0
        for store in data.edge_stores:
            e = _num_edges(store)
            fields[f"num_edges__{'__'.join(store._key)}"] = e
            edges_known &= e is not None
            edges += e or 0
        seeds = None
        for store in data.node_stores:
            b = store._mapping.get("batch_size")
            if isinstance(b, int):
                seeds = (seeds or 0) + b
        fields.update(
            num_nodes=nodes if nodes_known else None,
            num_edges=edges if edges_known else None,
            num_graphs=_num_graphs(data, pyg),
            batch_size=seeds,
        )
        return fields
    if isinstance(data, pyg.Data):
        store = data._store
        return {
            "num_nodes": _num_nodes(store),
            "num_edges": _num_edges(store),
            "num_graphs": _num_graphs(data, pyg),
            "batch_size": _int_attr(data, "batch_size"),
        }
    return {}


def _num_graphs(data: Any, pyg: Any) -> int | None:
    if isinstance(data, pyg.Batch):
        n = getattr(data, "_num_graphs", None)
        if isinstance(n, int):
            return n
        ptr = data._store._mapping.get("ptr") if hasattr(data, "_store") else None
        if isinstance(ptr, torch.Tensor):
            return int(ptr.numel()) - 1
        return None  # only batch.max() would tell: a device sync, so not read
    return 1


def record_graph(data: Any) -> dict[str, Any]:
    """Add the shape of ``data`` (a PyG object) to the row being filled, e.g. inside
    ``with phase("data"):`` right after loading a batch. Returns the fields added; outside any
    row it warns and adds nothing; what is not PyG data is refused (``TypeError``)."""
    row = state.CURRENT_ROW.get()
    shape = graph_shape(data)
    if not shape:
        raise TypeError(f"record_graph() takes PyG data (Data, HeteroData, a Batch), got {type(data).__name__}")
    if row is None:
        warnings.warn("record_graph() outside any decorated call or scope: no row to add the shape to",
                      RuntimeWarning, 2)
        return {}
    row.fields.update(shape)
    return shape
