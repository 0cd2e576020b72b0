"""Property tests of the pure-PyTorch neighbour sampler behind PyG's NeighborLoader."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_geometric.data import Data
from torch_geometric.utils import coalesce

from gnnmon.integrations.pyg_sampler import TorchNeighborSampler, neighbor_loader


@st.composite
def graphs(draw):
    n = draw(st.integers(1, 30))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=120))
    ei = torch.tensor(pairs, dtype=torch.long).t().reshape(2, -1)
    ei = coalesce(ei, num_nodes=n)  # no duplicate edges
    seeds = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    fanouts = draw(st.lists(st.one_of(st.just(-1), st.integers(1, 5)), min_size=1, max_size=3))
    return Data(edge_index=ei, num_nodes=n, x=torch.arange(n).float().view(-1, 1)), seeds, fanouts


def one_batch(data, seeds, fanouts, replace=False):
    loader = neighbor_loader(data, fanouts, batch_size=len(seeds), input_nodes=torch.tensor(seeds),
                         shuffle=False, replace=replace)
    assert isinstance(loader.node_sampler, TorchNeighborSampler)
    return next(iter(loader))


def in_degree(data, v):
    return int((data.edge_index[1] == v).sum())


@settings(max_examples=150, deadline=None)
@given(graphs())
def test_sampler_properties(case):
    data, seeds, fanouts = case
    batch = one_batch(data, seeds, fanouts)
    n_id, e_id = batch.n_id, batch.e_id
    # Seeds first, in order.
    assert n_id[: batch.batch_size].tolist() == seeds and batch.batch_size == len(seeds)
    assert len(set(n_id.tolist())) == n_id.numel()  # every node once
    # Every sampled edge exists, and e_id points at it (neighbour -> node it was sampled for).
    src, dst = n_id[batch.edge_index[0]], n_id[batch.edge_index[1]]
    assert torch.equal(data.edge_index[0, e_id], src) and torch.equal(data.edge_index[1, e_id], dst)
    # Without replacement: no edge twice.
    assert len(set(e_id.tolist())) == e_id.numel()
    # Per hop, each node added in the previous hop gets min(in-degree, fanout) neighbours.
    node_end = list(torch.cumsum(torch.tensor(batch.num_sampled_nodes), 0).tolist())
    edge_end = [0] + list(torch.cumsum(torch.tensor(batch.num_sampled_edges), 0).tolist())
    node_start = [0] + node_end[:-1]
    for hop, fanout in enumerate(fanouts):
        frontier = range(node_start[hop], node_end[hop])
        targets = batch.edge_index[1, edge_end[hop]:edge_end[hop + 1]]
        for local in frontier:
            got = int((targets == local).sum())
            deg = in_degree(data, int(n_id[local]))
            assert got == (deg if fanout < 0 else min(deg, fanout)), (hop, local, got, deg, fanout)


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_with_replacement_draws_exactly_fanout(case):
    data, seeds, fanouts = case
    fanouts = [abs(f) for f in fanouts]  # -1 -> 1: a fixed number of draws
    batch = one_batch(data, seeds, fanouts, replace=True)
    targets = batch.edge_index[1, : batch.num_sampled_edges[0]]
    for local, v in enumerate(seeds):
        deg = in_degree(data, v)
        assert int((targets == local).sum()) == (fanouts[0] if deg else 0)
    src, dst = batch.n_id[batch.edge_index[0]], batch.n_id[batch.edge_index[1]]
    assert torch.equal(data.edge_index[0, batch.e_id], src) and torch.equal(data.edge_index[1, batch.e_id], dst)


def test_sampling_is_uniform():
    """A node with 6 in-neighbours, fanout 2, 3000 draws: each neighbour about 1/3 of the time."""
    ei = torch.tensor([[1, 2, 3, 4, 5, 6], [0, 0, 0, 0, 0, 0]])
    data = Data(edge_index=ei, num_nodes=7, x=torch.zeros(7, 1))
    sampler = TorchNeighborSampler(data, [2])
    counts = torch.zeros(7)
    for _ in range(3000):
        out = sampler._sample(torch.tensor([0]))
        counts[out.node[out.row]] += 1
    share = counts[1:] / 3000
    assert torch.all((share - 1 / 3).abs() < 0.05), share
