"""A run's rows of whole-graph batches (several graphs a batch, no seed count) against the same sizes
as a neighbour sampler's (a seed count, ``batch_size``): the forecast says what holds for each. Whole
graphs share no nodes, so a batch of ``k`` graphs is scaled linearly from the heaviest per graph
read, holding ``k`` graphs (a model's cost per graph counts), never from an epoch's short last batch
that happened to be lighter; neither the summary nor the advice speaks of a sampler's shared nodes.

Planted: each epoch 10 batches of 16 graphs of 40 nodes and 200 edges (640 nodes, 3,200 edges) and a
last batch of 8 graphs of 30 nodes and 150 edges (240 nodes, 1,200 edges); a model fitted on
``A + B·nodes + C·edges + G·graphs`` bytes. The target is the planted peak of 100 graphs of 40 nodes
(4,000 nodes, 20,000 edges): the planted limit is 100 graphs."""

from __future__ import annotations

import random
from typing import Any

import pytest

import gnnmon

MiB = 2**20
A, B, C, G = 300 * MiB, 40_000, 9_000, 200_000  # bytes, per node, per edge, per graph


def truth(nodes: float, edges: float, graphs: float) -> float:
    return A + B * nodes + C * edges + G * graphs


def model() -> Any:
    rng = random.Random(2)
    rows = []
    for i in range(80):
        n, g = rng.randint(100, 5000), rng.randint(1, 200)
        e = rng.randint(n, 6 * n)
        rows.append({"label": "step", "index": i, "error": None, "num_nodes": n, "num_edges": e, "num_graphs": g,
                     "mem_peak_bytes": truth(n, e, g) + rng.gauss(0, 256 * 1024)})
    fitted = gnnmon.Report(rows).memory_model(figure="mem_peak_bytes")
    assert fitted.trusted and set(fitted.terms) == {"num_nodes", "num_edges", "num_graphs"}, fitted.summary()
    return fitted


def batches(items: str) -> list[dict[str, Any]]:
    """Two epochs of the planted batches, as a run's rows carry them: of whole graphs (``num_graphs``
    of them), or of a sampler's seeds (``batch_size`` seeds, one graph)."""
    out = []
    for _ in range(2):
        for count, nodes, edges in [(16, 640, 3200)] * 10 + [(8, 240, 1200)]:
            out.append({"num_nodes": nodes, "num_edges": edges,
                        **({"num_graphs": count} if items == "graph" else {"num_graphs": 1, "batch_size": count})})
    return out


def test_whole_graph_batches_scale_linearly_from_the_heaviest_per_graph_and_count_each_graph():
    target = truth(4000, 20_000, 100)
    fc = gnnmon.forecast(batches("graph"), model(), capacity=target, progress=False, anchor=False)
    assert fc.batches_of == "graph" and fc.heaviest is None
    for k in (16, 50, 100, 200):  # 40 nodes and 200 edges a graph, the full batches'; not the last one's 30
        assert fc.shape_at(k) == pytest.approx({"num_nodes": 40 * k, "num_edges": 200 * k, "num_graphs": k})
    budget = fc.budget(1.0)
    assert budget.batch_size <= 100 <= budget.batch_size_high, budget  # the planted limit between the bounds
    assert budget.batch_size_from.startswith(
        f"scaled from the batches read, not sampled: {budget.batch_size:,} graphs as "
        f"{budget.batch_size / 16:.3g}x the heaviest per graph of the batches read, one of 16 graphs (640 nodes, "
        "3,200 edges)"), budget.batch_size_from
    assert "batches of whole graphs share no nodes, so this grows linearly with the graphs" in budget.batch_size_from
    text = fc.summary(1.0)
    assert "neighbour" not in text and "seeds" not in text and "what the graph holds" not in text, text
    advice = fc.from_loader("run.jsonl")
    assert advice is not None and "NeighborLoader" not in advice, advice
    assert advice.startswith("gnnmon.forecast(loader, 'run.jsonl', capacity=...) sums the dataset's costliest graphs")


def test_a_neighbour_samplers_batches_of_the_same_sizes_keep_the_samplers_words():
    """The same sizes with a seed count: scaled as a sampler's (the least over the sizes read: the
    short batch's 30 nodes a seed bounds larger sizes, its seeds' neighbourhoods overlapping more as
    they grow), one graph a batch, and the words and advice are a neighbour sampler's."""
    fc = gnnmon.forecast(batches("seed"), model(), capacity=truth(4000, 20_000, 100), progress=False, anchor=False)
    assert fc.batches_of == "seed"
    assert fc.shape_at(100) == pytest.approx({"num_nodes": 3000, "num_edges": 15_000, "num_graphs": 1})
    budget = fc.budget(1.0)
    assert "a neighbour sampler's batches share more nodes the more seeds they hold" in budget.batch_size_from
    advice = fc.from_loader("run.jsonl")
    assert advice is not None and "samples a NeighborLoader's batches at each size instead" in advice, advice


def test_rows_that_do_not_say_what_their_items_are_are_not_called_a_samplers():
    """One graph a batch and no seed count (a full-batch step's rows): neither kind is asserted."""
    rows = [{"num_nodes": n, "num_edges": 5 * n, "num_graphs": 1} for n in (600, 640, 620)]
    fc = gnnmon.forecast(rows, model(), capacity=truth(4000, 20_000, 1), progress=False, anchor=False)
    assert fc.batches_of is None
    said = fc.budget(1.0).batch_size_from
    assert said is not None and "where they are a neighbour sampler's" in said and "whole graphs" in said, said
    advice = fc.from_loader("run.jsonl")
    assert advice is not None and "a NeighborLoader's sampled, a DataLoader's graphs summed" in advice, advice
