"""Heterogeneous batches (HeteroData): a memory model fitted on per-type terms (``num_nodes__<type>``,
``num_edges__<src>__<rel>__<dst>``) is read on shapes that carry each type's count, wherever a
calibration, a probe or a batch of summed graphs gives one.

The plant: a step on the fake CUDA allocator that holds 64 MiB plus 4,096 B a paper node, 256 B an
author node, 2,048 B a writes edge and 128 B a cites edge, over graphs whose four counts are each
small or large apart from the others (16 kinds), so the totals cannot say the cost and the fit
picks the per-type terms."""

from __future__ import annotations

import pytest
import torch

import gnnmon

pyg = pytest.importorskip("torch_geometric")
from torch_geometric.data import HeteroData  # noqa: E402
from torch_geometric.loader import DataLoader  # noqa: E402

from gnnmon.forecast.shapes import graph_sizes, heaviest  # noqa: E402

MiB = 2**20
CONST = 64 * MiB
COST = {"num_nodes__paper": 4096, "num_nodes__author": 256, "num_edges__author__writes__paper": 2048,
        "num_edges__paper__cites__paper": 128}
"""Bytes a node or edge of each type holds in the planted step, beside its constant CONST."""
WRITES, CITES = ("author", "writes", "paper"), ("paper", "cites", "paper")


def counts(i: int) -> dict[str, int]:
    """Graph i's counts: each type small or large by one bit of i (16 kinds, every count apart)."""
    bit = [(i >> j) & 1 for j in range(4)]
    return {"num_nodes__paper": 40 if bit[0] else 2, "num_nodes__author": 40 if bit[1] else 2,
            "num_edges__author__writes__paper": 60 if bit[2] else 3,
            "num_edges__paper__cites__paper": 60 if bit[3] else 3}


def hgraph(i: int) -> HeteroData:
    c = counts(i)
    papers, authors = c["num_nodes__paper"], c["num_nodes__author"]
    writes = torch.arange(c["num_edges__author__writes__paper"])
    cites = torch.arange(c["num_edges__paper__cites__paper"])
    g = HeteroData()
    g["paper"].x = torch.zeros(papers, 2)
    g["author"].x = torch.zeros(authors, 2)
    g[WRITES].edge_index = torch.stack([writes % authors, writes % papers])
    g[CITES].edge_index = torch.stack([cites % papers, (cites + 1) % papers])
    return g


def planted(shape: dict) -> int:
    """The planted step's peak for a batch of ``shape``, bytes."""
    return CONST + sum(COST[t] * shape[t] for t in COST)


def hetero_step(fake_cuda):
    @gnnmon.monitor_memory_device(label="train_step", device="cuda:0")
    def train_step(batch):
        handles = []
        try:  # freed however the step ends
            handles.append(fake_cuda.alloc(CONST, 0))
            for t in ("paper", "author"):
                handles.append(fake_cuda.alloc(COST[f"num_nodes__{t}"] * batch[t].num_nodes, 0))
            for t in (WRITES, CITES):
                handles.append(fake_cuda.alloc(COST[f"num_edges__{'__'.join(t)}"] * batch[t].num_edges, 0))
        finally:
            for h in handles:
                fake_cuda.free(h)

    return train_step


def summed(indices) -> dict[str, int]:
    return {t: sum(counts(i)[t] for i in indices) for t in COST}


def test_a_calibration_over_heterogeneous_graphs_records_and_aims_with_each_types_count(fake_cuda):
    """320 graphs of the 16 kinds, batches of 8: the fit picks the per-type terms and finds the
    plant (exact rows, no spread). Each calibration batch's shape holds every type's count (they
    sum to its totals), the batch of whole graphs a search aims at holds the costliest graphs'
    counts summed (each graph's, as the dataset gives it), and so the first probe is aimed at the
    limit itself: with the target half an item's cost above k0 items' planted peak (the costliest
    k0 graphs), the exact model aims at k0 (k0 + 1 is over by half an item), and the probe's
    forecast is not the constant: it bounds the planted peak the probe measured. Without the
    counts every forecast is the constant (64 MiB), and the first probe goes to the reach, 8 x 16."""
    dataset = [hgraph(i) for i in range(320)]
    loader = DataLoader(dataset, batch_size=8)
    step = hetero_step(fake_cuda)
    cal = gnnmon.calibrate(step, loader, repeats=3)
    model = cal.model
    assert model.trusted and set(model.terms) == set(COST), (model.terms, model.problems, model.notes)
    assert model.coefficients == pytest.approx({"const": CONST, **COST}, rel=1e-9)
    for shape in cal.shapes:
        assert set(COST) <= set(shape), shape
        assert shape["num_nodes"] == shape["num_nodes__paper"] + shape["num_nodes__author"]
        assert shape["num_edges"] == shape["num_edges__author__writes__paper"] + shape["num_edges__paper__cites__paper"]

    cost = {i: planted({**counts(i)}) - CONST for i in range(320)}
    order = sorted(range(320), key=lambda i: cost[i], reverse=True)
    k0 = 50
    peak0, peak1 = planted(summed(order[:k0])), planted(summed(order[:k0 + 1]))
    assert peak1 - peak0 >= 2  # the target lies strictly between, whole bytes apart from each
    capacity = (peak0 + peak1) // 2
    cal = gnnmon.calibrate(step, loader, repeats=3, capacity=capacity, fraction=1.0)
    found = cal.search
    assert found is not None and found.probes, cal.summary()
    first = found.probes[0]
    assert first["size"] == k0, found.summary()
    assert {t: first[t] for t in COST} == summed(order[:k0])  # the costliest k0 graphs, each type summed
    assert first["peak_bytes"] == peak0 and first["fits"]
    assert first["upper_bytes"] >= peak0 > CONST, found.summary()  # a forecast of the batch, not the constant
    assert found.batch_size == k0 and found.over is not None and found.over > k0, found.summary()


def test_whole_graphs_give_each_types_count_to_their_sizes_and_their_heaviest_batch():
    """The 16 kinds of graph: graph_sizes gives each graph's count of each type, and the heaviest
    batch of k graphs under per-type weights (the plant's) is the k costliest, each type summed; a
    batch of none has none of each type."""
    dataset = [hgraph(i) for i in range(16)]
    sizes = graph_sizes(dataset)
    assert [{t: s[t] for t in COST} for s in sizes] == [counts(i) for i in range(16)]
    weight = {t: float(c) for t, c in COST.items()}
    worst = heaviest(dataset, sizes, weight)
    assert worst is not None
    order = sorted(range(16), key=lambda i: planted(counts(i)), reverse=True)
    assert worst.order == order
    for k in (1, 5, 16):
        shape = worst(k)
        assert {t: shape[t] for t in COST} == summed(order[:k])
        assert shape["num_nodes"] == shape["num_nodes__paper"] + shape["num_nodes__author"]
    assert {t: worst(0)[t] for t in COST} == dict.fromkeys(COST, 0)

