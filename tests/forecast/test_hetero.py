"""Heterogeneous batches (HeteroData): a memory model fitted on per-type terms (``num_nodes__<type>``,
``num_edges__<src>__<rel>__<dst>``) is read on shapes that carry each type's count, wherever a
calibration, a probe, a budget or a batch of summed graphs gives one; a term a shape truly lacks is
named in the error.

The plant: a step on the fake CUDA allocator that holds 64 MiB plus 4,096 B a paper node, 256 B an
author node, 2,048 B a writes edge and 128 B a cites edge, over graphs whose four counts are each
small or large apart from the others (16 kinds), so the totals cannot say the cost and the fit
picks the per-type terms; and, where no run is needed, a per-type model whose coefficients are
planted exactly (:func:`tests.forecast.test_search.typed_model`)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import gnnmon

pyg = pytest.importorskip("torch_geometric")
from torch_geometric.data import HeteroData  # noqa: E402
from torch_geometric.loader import DataLoader  # noqa: E402

from gnnmon.data.table import Table  # noqa: E402
from gnnmon.forecast.forecast import Forecast  # noqa: E402
from gnnmon.forecast.shapes import graph_sizes, heaviest  # noqa: E402
from gnnmon.report.memory.model import fit  # noqa: E402
from tests.forecast.test_search import typed, typed_model, typed_peak, typed_shape  # noqa: E402

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


def exact(model):
    """The planted per-type model with no widening beyond its shapes (every bound the line itself)."""
    return replace(model, extrapolation=None, resolution_bytes=0.0)


def test_a_budget_of_plain_heterogeneous_batches_scales_each_types_items():
    """Plain batch shapes (no heaviest batch known) of 2-6 items of the search test's typed batches
    (4 paper and 2 author nodes, 6 writes and 3 cites edges an item; 100 + 37 B an item exactly): the
    batch size under a target of 8 items' peak is 8 (9 is 37 B over), the most of each type per
    item scaled; without the per-type counts the budget has no term to give the model."""
    model = exact(typed_model())
    batches = [{**typed_shape(k), "items": k} for k in range(2, 7)]
    fc = gnnmon.forecast(batches, model, capacity=int(typed_peak(8)), progress=False, anchor=False)
    assert fc.worst[0]["upper_bytes"] == typed_peak(6) == 322.0
    budget = fc.budget(1.0)
    assert budget.batch_size == 8 and budget.batch_size_high == 8, budget
    assert {t: fc.shape_at(8)[t] for t in typed(8)} == typed(8)


def test_a_shape_that_lacks_a_term_is_named():
    """A shape that truly lacks one of the model's terms (no author count) is refused naming it,
    never a bare KeyError; a budget whose no size fits says the constant alone in the model's own
    terms."""
    model = exact(typed_model())
    fc = Forecast(model, 400, "400 B", 1, [], heaviest=None,
                  ratios={"edges_per_node_max": 1.5, "edges_per_node_min": 1.5, "nodes_per_item_max": 6.0,
                          "edges_per_item_max": 9.0})
    lacking = {k: v for k, v in typed_shape(3).items() if k != "num_nodes__author"}
    with pytest.raises(ValueError, match="num_nodes__author"):
        fc._bounds(lacking)
    batches = [{**typed_shape(k), "items": k} for k in range(2, 7)]
    budget = gnnmon.forecast(batches, model, capacity=99, progress=False, anchor=False).budget(1.0)
    assert budget.batch_size == 0 and "the model's constant alone is forecast at up to 100 B" in budget.why, budget.why


def cost_model():
    """The plant's per-type model: fitted on 40 rows of CONST plus COST, their counts varying apart
    up to 2,000 of each type (so it vouches for up to 4,000), then set to the plant exactly, with
    no widening beyond its shapes (every bound the line itself, whole bytes)."""
    rows = []
    for i in range(40):
        shape = dict(zip(COST, (1 + (37 * i) % 2000, 1 + (53 * i * i) % 1999, 1 + (71 * i) % 1997,
                                1 + (89 * i * i) % 1993), strict=True))
        rows.append({"label": "s", "index": i, **shape, "num_nodes": shape["num_nodes__paper"]
                     + shape["num_nodes__author"], "num_edges": shape["num_edges__author__writes__paper"]
                     + shape["num_edges__paper__cites__paper"], "num_graphs": 1, "mem_peak_bytes": planted(shape)})
    model = fit(Table(rows), "s", "mem_peak_bytes", warmup=0)
    assert model.trusted and set(model.terms) == set(COST), (model.terms, model.problems, model.notes)
    assert model.coefficients == pytest.approx({"const": CONST, **COST}, rel=1e-9)
    return exact(replace(model, coefficients={"const": float(CONST), **{t: float(c) for t, c in COST.items()}},
                         spread_bytes=0.0))


def test_a_forecast_of_a_loader_over_heterogeneous_graphs_reads_each_types_count():
    """A DataLoader of batches of 8 over 32 graphs of the 16 kinds, the plant's exact per-type
    model: each batch is forecast at its planted peak to the byte (its graphs' counts of each type
    summed), and the batch size under a target half an item's cost above the costliest 10 graphs'
    peak is 10 (their sum of each type is the heaviest batch of 10)."""
    dataset = [hgraph(i) for i in range(32)]
    model = cost_model()
    order = sorted(range(32), key=lambda i: planted(counts(i)), reverse=True)
    peak0, peak1 = planted(summed(order[:10])), planted(summed(order[:11]))
    assert peak1 - peak0 >= 2
    fc = gnnmon.forecast(DataLoader(dataset, batch_size=8), model, capacity=(peak0 + peak1) // 2, progress=False,
                         anchor=False)
    truths = sorted((planted(summed(range(8 * b, 8 * b + 8))) for b in range(4)), reverse=True)
    assert [w["upper_bytes"] for w in fc.worst] == [w["bytes"] for w in fc.worst] == truths
    assert {t: fc.shape_at(10)[t] for t in COST} == summed(order[:10])
    budget = fc.budget(1.0)
    assert budget.batch_size == 10 and budget.batch_size_high == 10, budget
