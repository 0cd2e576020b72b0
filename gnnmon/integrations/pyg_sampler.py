"""Neighbour sampling for PyG's ``NeighborLoader`` and ``LinkNeighborLoader`` without pyg-lib or
torch-sparse, which PyG's own sampler needs (pyg-lib is on PyG's wheel index only; torch-sparse
compiles from source). Without either, PyG raises at the first batch::

    from gnnmon.integrations.pyg_sampler import neighbor_loader
    loader = neighbor_loader(data, num_neighbors=[10, 5], batch_size=1024, shuffle=True)

:func:`neighbor_loader` and :func:`link_neighbor_loader` are PyG's own loaders, with PyG's sampler
where pyg-lib or torch-sparse is installed and :class:`TorchNeighborSampler` otherwise
(``loader.sampler_name`` says which ran). :class:`TorchNeighborSampler` subclasses PyG's
``NeighborSampler`` and implements the same homogeneous, directional sampling in plain PyTorch,
vectorised per hop:

* hop by hop, for every node added in the previous hop (the seeds first), up to ``fanout``
  incoming neighbours, uniformly, without replacement by default (``replace=True``: exactly
  ``fanout`` draws with replacement); ``-1`` takes all;
* ``node`` lists the seeds first, in order, then each hop's new nodes in order of first
  appearance; ``row``/``col`` are local indices of the neighbour (message source) and of the node
  it was sampled for; ``edge`` are positions in the sampler's CSC order (PyG maps them back to
  edge ids with ``perm``); ``num_sampled_nodes`` / ``num_sampled_edges`` per hop.

Heterogeneous, temporal and disjoint sampling are PyG's alone (``NotImplementedError`` here).
Importing this module imports PyG (``pip install "gnnmon[pyg]"``).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

try:
    import torch_geometric.typing
    from torch_geometric.loader import LinkNeighborLoader, NeighborLoader
    from torch_geometric.sampler import NeighborSampler, SamplerOutput
except ImportError as exc:  # pragma: no cover - PyG is an extra
    raise ImportError("gnnmon.integrations.pyg_sampler needs PyG: pip install torch-geometric "
                      "(or 'gnnmon[pyg]')") from exc

__all__ = ["TorchNeighborSampler", "link_neighbor_loader", "native_sampler_available", "neighbor_loader",
           "sample_neighbors"]


class TorchNeighborSampler(NeighborSampler):  # type: ignore[misc]  # PyG ships no types
    """``NeighborSampler`` with a pure-PyTorch homogeneous sampling routine."""

    def __init__(self, data: Any, num_neighbors: Any, **kwargs: Any) -> None:
        with warnings.catch_warnings():  # "without pyg-lib is deprecated": that is the point here
            warnings.filterwarnings("ignore", message=".*without a 'pyg-lib' installation.*")
            super().__init__(data, num_neighbors, **kwargs)
        if self.disjoint or str(getattr(self.subgraph_type, "value", self.subgraph_type)) != "directional":
            raise NotImplementedError("TorchNeighborSampler does directional, non-disjoint sampling")
        self.generator: torch.Generator | None = None

    def _sample(self, seed: Any, seed_time: Any = None, **kwargs: Any) -> SamplerOutput:
        if isinstance(seed, dict) or seed_time is not None or self.node_time is not None:
            raise NotImplementedError("TorchNeighborSampler samples homogeneous, untimed graphs")
        return sample_neighbors(
            self.colptr, self.row, seed, self.num_neighbors.get_mapped_values(), self.replace,
            self.num_nodes, generator=self.generator,
        )


def sample_neighbors(
    colptr: torch.Tensor,
    row: torch.Tensor,
    seed: torch.Tensor,
    fanouts: list[int],
    replace: bool = False,
    num_nodes: int | None = None,
    generator: torch.Generator | None = None,
) -> SamplerOutput:
    """Directional multi-hop neighbour sampling over a CSC graph (see the module doc)."""
    n = int(num_nodes if num_nodes is not None else colptr.numel() - 1)
    seed = seed.to(torch.long)
    local = torch.full((n,), -1, dtype=torch.long)
    local[seed] = torch.arange(seed.numel())
    nodes = [seed]
    count = seed.numel()
    rows, cols, edges = [], [], []
    num_nodes_per_hop, num_edges_per_hop = [seed.numel()], []
    frontier = seed
    for fanout in fanouts:
        pos, center = _pick(colptr, frontier, fanout, replace, generator)
        nbr = row[pos].to(torch.long)
        new = _first_appearance_unique(nbr[local[nbr] < 0])
        local[new] = torch.arange(count, count + new.numel())
        count += new.numel()
        rows.append(local[nbr])
        cols.append(local[center])
        edges.append(pos)
        nodes.append(new)
        num_nodes_per_hop.append(new.numel())
        num_edges_per_hop.append(pos.numel())
        frontier = new
    empty = torch.empty(0, dtype=torch.long)
    return SamplerOutput(
        node=torch.cat(nodes),
        row=torch.cat(rows) if rows else empty,
        col=torch.cat(cols) if cols else empty,
        edge=torch.cat(edges) if edges else empty,
        batch=None,
        num_sampled_nodes=num_nodes_per_hop,
        num_sampled_edges=num_edges_per_hop,
    )


def _pick(
    colptr: torch.Tensor, frontier: torch.Tensor, fanout: int, replace: bool,
    generator: torch.Generator | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """CSC positions of the sampled in-edges of each frontier node, and the node each is for."""
    start = colptr[frontier].to(torch.long)
    deg = colptr[frontier + 1].to(torch.long) - start
    if fanout < 0 or (not replace and bool((deg <= fanout).all())):
        take = deg  # everything
        seg = torch.repeat_interleave(torch.arange(frontier.numel()), take)
        offset = torch.arange(int(take.sum())) - torch.repeat_interleave(torch.cumsum(take, 0) - take, take)
        return start[seg] + offset, frontier[seg]
    if replace:
        has = deg > 0
        f_idx = torch.arange(frontier.numel())[has].repeat_interleave(fanout)
        draw = (torch.rand(f_idx.numel(), generator=generator) * deg[f_idx]).long()
        return start[f_idx] + draw, frontier[f_idx]
    # Without replacement: a random key per candidate edge, keep the `fanout` smallest per node.
    seg = torch.repeat_interleave(torch.arange(frontier.numel()), deg)
    first = torch.cumsum(deg, 0) - deg
    offset = torch.arange(int(deg.sum())) - first[seg]
    keys = torch.rand(seg.numel(), generator=generator) + seg.to(torch.float64)
    order = torch.argsort(keys)  # grouped by node (integer part), random within (fraction)
    rank = torch.arange(order.numel()) - first[seg[order]]
    keep = order[rank < fanout]
    keep, _ = torch.sort(keep)  # back in CSC order within each node
    return start[seg[keep]] + offset[keep], frontier[seg[keep]]


def _first_appearance_unique(values: torch.Tensor) -> torch.Tensor:
    """Distinct values in the order they first appear."""
    if values.numel() == 0:
        return values
    uniq, inverse = torch.unique(values, return_inverse=True)
    first = torch.full((uniq.numel(),), values.numel(), dtype=torch.long)
    first.scatter_reduce_(0, inverse, torch.arange(values.numel()), reduce="amin")
    return uniq[torch.argsort(first)]


def native_sampler_available() -> bool:
    """Whether PyG's own sampler can run here (pyg-lib or torch-sparse is installed)."""
    return bool(torch_geometric.typing.WITH_PYG_LIB or torch_geometric.typing.WITH_TORCH_SPARSE)


def _with_sampler(cls: Any, data: Any, num_neighbors: list[int], **kwargs: Any) -> Any:
    """``cls`` (PyG's NeighborLoader or LinkNeighborLoader) with PyG's sampler when pyg-lib /
    torch-sparse exist, else ours; ``loader.sampler_name`` says which ran."""
    if native_sampler_available():
        loader = cls(data, num_neighbors=num_neighbors, **kwargs)
        loader.sampler_name = "pyg-lib" if torch_geometric.typing.WITH_PYG_LIB else "torch-sparse"
        return loader
    sampler = TorchNeighborSampler(data, num_neighbors=num_neighbors,
                                   replace=kwargs.pop("replace", False),
                                   share_memory=kwargs.get("num_workers", 0) > 0)
    loader = cls(data, num_neighbors=num_neighbors, neighbor_sampler=sampler, **kwargs)
    loader.sampler_name = "gnnmon TorchNeighborSampler (pure PyTorch)"
    return loader


def neighbor_loader(data: Any, num_neighbors: list[int], **kwargs: Any) -> NeighborLoader:
    """PyG's ``NeighborLoader(data, num_neighbors=..., **kwargs)``, with PyG's sampler when pyg-lib
    or torch-sparse is installed, else :class:`TorchNeighborSampler` (``loader.sampler_name`` says
    which ran). ``replace=True`` samples with replacement."""
    return _with_sampler(NeighborLoader, data, num_neighbors, **kwargs)


def link_neighbor_loader(data: Any, num_neighbors: list[int], **kwargs: Any) -> LinkNeighborLoader:
    """PyG's ``LinkNeighborLoader(data, num_neighbors=..., **kwargs)``, with PyG's sampler when
    pyg-lib or torch-sparse is installed, else :class:`TorchNeighborSampler`
    (``loader.sampler_name`` says which ran)."""
    return _with_sampler(LinkNeighborLoader, data, num_neighbors, **kwargs)
