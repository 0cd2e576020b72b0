"""A per-type (HeteroData) memory model's budget in nodes and edges: the largest ``max_num`` of PyG's
``DynamicBatchSampler`` (which counts a batch's nodes or edges of all types together), each type
taken at the most of it per node (per edge) of any batch or graph the forecast read, so every mix
the loader can make of those graphs fits. Before, a per-type model gave ``max_num_nodes`` and
``max_num_edges`` of 0 (the model has no term of the totals) and its line said nothing of the
sampler while claiming that "nodes weigh most"; where the forecast cannot give one (a graph of
nodes and no edge, which a sampler in edge mode does not bound) the budget now says so, with None.

The plants: the search test's exact per-type model (100 B + 3 B a paper node, 5 B an author node,
2 B a writes edge, 1 B a cites edge: :func:`tests.forecast.test_search.typed_model`) on plain batch
shapes whose mix of types is known, and the hetero test's step (64 MiB + 4,096 B a paper node, 256
B an author node, 2,048 B a writes edge, 128 B a cites edge: :func:`tests.forecast.test_hetero.cost_model`)
over real HeteroData graphs, batched by the sampler at the budget. Every expected limit is the
plant's, in exact fractions: floor((target − constant) / the bytes of one node (edge) at the
scan's most of each type), away from a tie by more than the floats' error."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

import gnnmon
from tests.forecast.test_search import TYPE_COST, typed_model, typed_shape

pyg = pytest.importorskip("torch_geometric")
from torch_geometric.loader import DataLoader, DynamicBatchSampler  # noqa: E402

from gnnmon.measure.graph import graph_shape  # noqa: E402
from tests.forecast.test_hetero import CONST, COST, cost_model, counts, exact, hgraph, planted  # noqa: E402


def limit(spare: float, cost: Fraction) -> int:
    """The most units of ``cost`` bytes each within ``spare`` bytes, checked away from a tie."""
    exact_count = Fraction(spare) / cost
    assert exact_count - math.floor(exact_count) > Fraction(1, 100), "a plant on a tie: move the target"
    return math.floor(exact_count)


def per_unit_cost(shapes: list[dict[str, int]], cost: dict[str, float], unit: str) -> Fraction:
    """Bytes of one node (``unit`` num_nodes) or edge (num_edges) with each type at the most of it
    per that unit among ``shapes``, in exact fractions."""
    return sum((Fraction(c) * max(Fraction(s[t], s[unit]) for s in shapes) for t, c in cost.items()), Fraction(0))


def test_a_per_type_model_budgets_the_samplers_totals_at_the_planted_mix():
    """Batches of 2-6 items of 4 paper and 2 author nodes, 6 writes and 3 cites edges an item (every
    batch the same mix): a node of the totals costs 3·4/6 + 5·2/6 + 2·6/6 + 1·3/6 = 37/6 B, an
    edge 37/9 B; under a target of 350 B (250 B over the constant) the sampler may take 40 nodes
    (40.5 exactly) or 60 edges (60.8). Nodes weigh most (11/3 B of a node's 37/6 is nodes). No
    limit reads 0, and the line names both."""
    model = exact(typed_model())
    shapes = [{**typed_shape(k), "items": k} for k in range(2, 7)]
    fc = gnnmon.forecast(shapes, model, capacity=350, progress=False, anchor=False)
    budget = fc.budget(1.0)
    node_cost, edge_cost = per_unit_cost(shapes, TYPE_COST, "num_nodes"), per_unit_cost(shapes, TYPE_COST, "num_edges")
    assert (node_cost, edge_cost) == (Fraction(37, 6), Fraction(37, 9))
    assert budget.max_num_nodes == limit(250, node_cost) == 40, budget
    assert budget.max_num_edges == limit(250, edge_cost) == 60, budget
    assert budget.per_type and budget.samplers_why is None and budget.binds == "nodes", budget
    assert not budget.limited_by_model and budget.batch_size == 6, budget  # 6 items: 322 B; 7: 359 B
    said = str(budget)
    assert "DynamicBatchSampler(mode='node', max_num=40) / (mode='edge', max_num=60)" in said, said
    assert "max_num=0" not in said and "nodes weigh most" in said, said


def test_a_per_type_budget_stops_where_the_model_stops_vouching():
    """The same model saw at most 32 writes edges a batch, so it vouches for 64; a node of the
    scanned mix carries one writes edge: the node budget stops at 64 nodes (not 0, not beyond)
    under a target that would hold far more, and says it stopped there."""
    model = exact(typed_model())
    assert model.ranges["num_edges__author__writes__paper"][1] == 32
    shapes = [{**typed_shape(k), "items": k} for k in range(2, 7)]
    budget = gnnmon.forecast(shapes, model, capacity=10**6, progress=False, anchor=False).budget(1.0)
    assert budget.max_num_nodes == 64 and budget.limited_by_model, budget
    assert "stopped where the model stops vouching" in str(budget), str(budget)


def test_each_type_is_taken_at_its_most_per_node_of_any_batch():
    """Two mixes of items: 4 paper, 2 author nodes, 6 writes, 3 cites edges; and 1 paper, 5 author,
    2 writes, 1 cites. A sampler's batch may hold either mix, so a node is budgeted at the most of
    each type per node of either: paper 4/6, author 5/6, writes 1, cites 1/2 (3·4/6 + 5·5/6 + 2·1 +
    1·1/2 = 26/3 B); an edge at paper 4/9, author 5/3, writes 2/3, cites 1/3 (3·4/9 + 5·5/3 + 2·2/3
    + 1·1/3 = 34/3 B). Under 350 B: 28 nodes (28.8) and 22 edges (22.06)."""
    model = exact(typed_model())
    other = {"num_nodes__paper": 1, "num_nodes__author": 5, "num_edges__author__writes__paper": 2,
             "num_edges__paper__cites__paper": 1}
    shapes = [{**typed_shape(k), "items": k} for k in range(2, 5)]
    shapes += [{**{t: k * v for t, v in other.items()}, "num_nodes": 6 * k, "num_edges": 3 * k, "num_graphs": 1,
                "items": k} for k in range(2, 5)]
    node_cost, edge_cost = per_unit_cost(shapes, TYPE_COST, "num_nodes"), per_unit_cost(shapes, TYPE_COST, "num_edges")
    assert (node_cost, edge_cost) == (Fraction(26, 3), Fraction(34, 3))
    budget = gnnmon.forecast(shapes, model, capacity=350, progress=False, anchor=False).budget(1.0)
    assert budget.max_num_nodes == limit(250, node_cost) == 28, budget
    assert budget.max_num_edges == limit(250, edge_cost) == 22, budget


def test_an_edge_budget_the_scan_cannot_bound_is_not_given_and_says_why():
    """Beside the batches of test one, one item of 4 paper and 2 author nodes and no edge: a sampler
    in edge mode counts it as nothing, so no number of edges bounds its nodes. The edge budget is
    None (not 0) and the line says why; the node budget is the same 40 nodes (its edges per node
    are at most those of the other batches)."""
    model = exact(typed_model())
    bare = {"num_nodes__paper": 4, "num_nodes__author": 2, "num_edges__author__writes__paper": 0,
            "num_edges__paper__cites__paper": 0, "num_nodes": 6, "num_edges": 0, "num_graphs": 1, "items": 1}
    shapes = [{**typed_shape(k), "items": k} for k in range(2, 7)] + [bare]
    budget = gnnmon.forecast(shapes, model, capacity=350, progress=False, anchor=False).budget(1.0)
    assert budget.max_num_nodes == 40 and budget.max_num_edges is None, budget
    said = str(budget)
    assert "DynamicBatchSampler(mode='node', max_num=40)" in said and "mode='edge'" not in said, said
    assert ("max_num_edges not given: a batch or graph the scan read has num_nodes__paper, num_nodes__author and "
            "no edge") in said, said


def test_the_samplers_batches_at_the_budget_fit_the_planted_step():
    """64 HeteroData graphs of the hetero test's 16 kinds (paper and author nodes 2 or 40, writes and
    cites edges 3 or 60, each apart), the plant's exact per-type model, and a target 150.5 nodes of
    the heaviest mix above the constant: the node budget is the plant's 150, the edge budget its own
    exact count; DynamicBatchSampler at each then makes only batches whose planted peak is under
    the target."""
    dataset = [hgraph((5 * i) % 16) for i in range(64)]
    graphs = [{**counts((5 * i) % 16)} for i in range(64)]
    for g in graphs:
        g["num_nodes"] = g["num_nodes__paper"] + g["num_nodes__author"]
        g["num_edges"] = g["num_edges__author__writes__paper"] + g["num_edges__paper__cites__paper"]
    node_cost, edge_cost = per_unit_cost(graphs, COST, "num_nodes"), per_unit_cost(graphs, COST, "num_edges")
    spare = int(Fraction(301, 2) * node_cost)
    target = CONST + spare
    model = cost_model()
    fc = gnnmon.forecast(DataLoader(dataset, batch_size=8), model, capacity=target, progress=False, anchor=False)
    budget = fc.budget(1.0)
    assert budget.max_num_nodes == limit(spare, node_cost) == 150, budget
    assert budget.max_num_edges == limit(spare, edge_cost), budget
    assert not budget.limited_by_model and budget.samplers_why is None, budget
    assert budget.max_num_edges >= max(g["num_edges"] for g in graphs)  # no graph over the budget alone
    for mode, most in (("node", budget.max_num_nodes), ("edge", budget.max_num_edges)):
        batches = DataLoader(dataset, batch_sampler=DynamicBatchSampler(dataset, max_num=most, mode=mode))
        peaks = [planted(graph_shape(batch)) for batch in batches]
        assert len(peaks) > 1 and max(peaks) <= target, (mode, most, max(peaks) - target)
