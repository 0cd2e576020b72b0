"""A node (edge) budget above what the graph holds is no batch anyone can make: where the graph's
size is known (a neighbour loader's graph, a dataset of whole graphs, the one graph of a full
batch) the budget stops at it and says so; where it is not (a run's rows) a node budget above
every batch read says it may be above the graph's. Each graph is planted with a known size, and
the planted model (fitted on up to 5,000 nodes) would allow several times more at 8 GiB."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import gnnmon
from gnnmon.forecast.shapes import graph_size

pytest.importorskip("torch_geometric")
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader, DynamicBatchSampler

from gnnmon.integrations.pyg_sampler import neighbor_loader
from tests.forecast.test_forecast import GiB, complete_graph, planted_model
from tests.forecast.test_run_and_loader import HUBS, SEEDS, hub_graph


def test_a_neighbour_loaders_budgets_stop_at_its_graphs_nodes_and_edges():
    """The hub graph: 1,020 nodes and 1,000 edges. Its loader's budgets at 8 GiB are all of them,
    saying so, and not "stopped where the model stops vouching" (the graph stops them); the same
    batches as plain rows cannot say how large the graph is: a node budget above the 119 nodes of
    any batch read says it may be above the graph's."""
    loader = neighbor_loader(hub_graph(), [-1], batch_size=99, input_nodes=torch.arange(SEEDS), shuffle=False)
    fc = gnnmon.forecast(loader, planted_model(), capacity=8 * GiB, progress=False, anchor=False)
    assert fc.graph == {"num_nodes": SEEDS + HUBS, "num_edges": SEEDS} and fc.graph_said == "the loader's graph"
    budget = fc.budget(0.9)
    assert (budget.max_num_nodes, budget.max_num_edges, budget.batch_size) == (1020, 1000, 1000), budget
    assert not budget.limited_by_model, budget
    assert budget.graph_note.startswith("max_num_nodes is all 1,020 nodes of the loader's graph (the forecast "
                                        "allows "), budget.graph_note
    assert "max_num_edges is all 1,000 edges of the loader's graph" in budget.graph_note
    assert "all 1,020 nodes of the loader's graph" in fc.summary() and "stops vouching" not in fc.summary()

    rows = [{"num_nodes": int(b.num_nodes), "num_edges": int(b.num_edges), "batch_size": int(b.batch_size)}
            for b in loader]
    plain = gnnmon.forecast(rows, planted_model(), capacity=8 * GiB, progress=False, anchor=False)
    assert plain.graph == {}
    unknown = plain.budget(0.9)
    assert unknown.max_num_nodes > 1020, unknown  # nothing in the rows says the graph holds 1,020
    assert unknown.graph_note == (f"max_num_nodes {unknown.max_num_nodes:,} is above the most nodes of any batch read "
                                  "(119) and may be above what the graph holds: the batches read do not say how "
                                  "large their graph is (a run's rows record its batches, not its graph)")


def test_whole_graphs_budgets_stop_at_the_datasets_nodes_and_edges():
    """Ten graphs of 30 nodes and 60 edges: no batch holds more than 300 nodes and 600 edges, and
    a DynamicBatchSampler at the budget puts every graph in one batch."""
    torch.manual_seed(0)
    graphs = [Data(x=torch.randn(30, 4), edge_index=torch.randint(0, 30, (2, 60))) for _ in range(10)]
    loader = DataLoader(graphs, batch_size=4)
    fc = gnnmon.forecast(loader, planted_model(), capacity=8 * GiB, progress=False, anchor=False)
    budget = fc.budget(0.9)
    assert (budget.max_num_nodes, budget.max_num_edges, budget.batch_size) == (300, 600, 10), budget
    assert "max_num_nodes is all 300 nodes of the dataset's 10 graphs together" in budget.graph_note
    sampler = DynamicBatchSampler(graphs, max_num=budget.max_num_nodes, mode="node", shuffle=False)
    assert [len(b) for b in sampler] == [10]


def test_a_full_batch_budget_stops_at_the_graph():
    """One graph (the full-batch step), a complete graph of 50 nodes and 2,450 edges."""
    fc = gnnmon.forecast(complete_graph(50), planted_model(), capacity=8 * GiB, progress=False, anchor=False)
    budget = fc.budget(0.9)
    assert (budget.max_num_nodes, budget.max_num_edges) == (50, 2450), budget
    assert "max_num_nodes is all 50 nodes of the graph" in budget.graph_note


def test_a_budget_under_the_graphs_size_is_left_as_it_is():
    """At 350 MiB (a target of 315 MiB) the planted model (300 MiB + 40,000 B a node + 9,000 B an
    edge, 99/119 edges a node at the densest) allows at most 15.7 MB / 40,000 B, under 400 nodes,
    fewer than the hub graph's 1,020: no cap, no note."""
    loader = neighbor_loader(hub_graph(), [-1], batch_size=99, input_nodes=torch.arange(SEEDS), shuffle=False)
    budget = gnnmon.forecast(loader, planted_model(), capacity=350 * 2**20, progress=False, anchor=False).budget(0.9)
    assert 0 < budget.max_num_nodes < 400 and budget.graph_note is None, budget


def test_where_a_batch_can_hold_a_node_twice_the_graph_does_not_bound_it():
    """A disjoint sampler copies each seed's neighbourhood; with replacement an edge can be drawn
    twice (its nodes still once); a loader over stores has no graph to read."""
    data = hub_graph()
    disjoint = SimpleNamespace(node_sampler=SimpleNamespace(disjoint=True), input_data=None, data=data)
    assert graph_size(disjoint) == ({}, "the loader's sampler is disjoint: each seed gets its own copy of its "
                                        "neighbourhood, so a batch can hold a node more than once")
    replace = SimpleNamespace(node_sampler=SimpleNamespace(disjoint=False, replace=True), input_data=None, data=data)
    assert graph_size(replace) == ({"num_nodes": SEEDS + HUBS}, "the loader's graph")
    stores = SimpleNamespace(node_sampler=SimpleNamespace(), input_data=None, data=(object(), object()))
    assert graph_size(stores)[0] == {} and "not a PyG Data or HeteroData (tuple)" in graph_size(stores)[1]


def test_a_budget_the_graph_caps_still_says_the_models_reach_stopped_its_batch_size():
    """A link loader over a planted 4,000-node graph: ``k`` seed edges hold at most its 4,000
    nodes and ``3k`` edges, denser than the fitted rows (1.5 edges a node, so the model vouches for
    edges through nodes: 2 x the most nodes x 1.5). The node budget is the graph's 4,000, not the
    model's reach; the batch size stops at the edges' reach (``3k`` at most that), bisected to
    within 1 % below it, so the next size is still within reach: what stopped it is the nearest
    size ruled out above it, and the note names the edges' reach."""
    import random

    from gnnmon.forecast.forecast import Forecast
    from gnnmon.forecast.shapes import SAMPLED_WITHIN, Heaviest
    from tests.forecast.test_forecast import A, B, C

    rng = random.Random(5)
    rows = []
    for i in range(60):
        n = rng.randint(100, 5000)
        rows.append({"label": "step", "index": i, "error": None, "num_nodes": n, "num_edges": round(1.5 * n),
                     "mem_peak_bytes": A + B * n + C * round(1.5 * n) + rng.gauss(0, 256 * 1024)})
    model = gnnmon.Report(rows).memory_model(figure="mem_peak_bytes")
    assert model.confounded["num_edges"]["with"] == "num_nodes", model.confounded
    heaviest = Heaviest(10**5, lambda k: {"num_nodes": min(k, 4000), "num_edges": 3 * k, "num_graphs": 1},
                        "k seed edges of the planted graph", within=SAMPLED_WITHIN)
    fc = Forecast(model, 80 * GiB, "80 GiB", 1, [], heaviest=heaviest, graph={"num_nodes": 4000},
                  graph_said="the planted graph",
                  ratios={"edges_per_node_max": 3.0, "edges_per_node_min": 1.5, "nodes_per_item_max": 1.3,
                          "edges_per_item_max": 3.9})  # a start below the reach: the bisection ends inside 1 %
    edges = fc._vouched("num_edges")
    assert edges == int(2 * model.ranges["num_nodes"][1] * model.confounded["num_edges"]["ratio"][1])
    budget = fc.budget(0.9)
    reach = edges // 3  # the most seed edges whose batch the model vouches for
    assert budget.max_num_nodes == 4000 and "all 4,000 nodes of the planted graph" in budget.graph_note, budget
    assert (1 - SAMPLED_WITHIN) * reach <= budget.batch_size < reach, budget  # the next size is within reach too
    assert budget.limited_by_model, budget
    assert f"{edges:,} num_edges: 2x the most of each it was fitted on" in fc.summary(), fc.summary()
