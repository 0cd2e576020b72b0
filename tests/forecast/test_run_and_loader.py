"""A run's recorded batches and the loader they came from, forecast by one model: the run's rows
(``gnnmon forecast RUN``, ``gnnmon.forecast(rows, ...)``) scale the batches it read to each size,
the loader (``gnnmon.forecast(loader, ...)``) samples batches at each size. Each says which it did.

The planted graph: 1,000 seed nodes and 20 hubs, seed ``s``'s one in-neighbour hub ``s mod 20``;
sampled one hop with every neighbour, a batch of ``k`` seeds holds ``k`` edges and ``k`` plus the
hubs of its seeds' residues, at most ``k + 20`` nodes: nodes per seed fall as batches grow (their
seeds share hubs), as a sampler's neighbourhoods overlap. Batches of 99 consecutive seeds hold 119
nodes; the epoch's last batch, 10 seeds, holds 20 (2 a seed)."""

from __future__ import annotations

import json

import pytest
import torch

import gnnmon
from gnnmon.cli import main
from gnnmon.forecast.budget import Budget

pytest.importorskip("torch_geometric")
from torch_geometric.data import Data

from gnnmon.integrations.pyg_sampler import neighbor_loader
from tests.forecast.test_forecast import A, B, C, planted_model, truth

SEEDS, HUBS = 1000, 20


def hub_graph(seeds: int = SEEDS, hubs: int = HUBS) -> Data:
    """``seeds`` seed nodes, seed ``s``'s one in-neighbour hub ``s mod hubs``."""
    at = torch.arange(seeds)
    return Data(x=torch.randn(seeds + hubs, 4), edge_index=torch.stack([seeds + at % hubs, at]))


def record(path, sizes, shuffle: bool, seeds: int = SEEDS, hubs: int = HUBS) -> list[dict]:
    """A run of a decorated step over the hub graph's batches of each of ``sizes`` seeds, its
    peaks planted (``truth``); its rows as the file holds them."""
    data = hub_graph(seeds, hubs)

    @gnnmon.monitor_memory_device(device="cpu")
    def step(batch):
        return batch

    with gnnmon.collect(path):
        for size in sizes:
            for batch in neighbor_loader(data, [-1], batch_size=size, input_nodes=torch.arange(seeds),
                                         shuffle=shuffle):
                step(batch)
    lines, rows = [], []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row.get("type") == "row":
            row["mem_peak_bytes"] = truth(row)
            rows.append(row)
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n")
    return rows


def library_budget(path, capacity: int) -> tuple[int, Budget]:
    """What the library answers for the run at ``path`` as the command reads it: its rows' count and
    the budget at 90 % of ``capacity`` from its own model and batches."""
    report = gnnmon.Report(gnnmon.load(path))
    model = report.memory_model(None, "mem_peak_bytes")
    part = report.table.parts[model.label]
    return part.n, gnnmon.forecast([part.row(i) for i in range(part.n)], model, capacity, progress=False).budget(0.9)


def test_a_runs_batches_are_scaled_from_its_largest_not_its_short_last_batch(tmp_path):
    """The target is the planted peak of 600 seeds' heaviest batch (620 nodes, 600 edges). The
    loader's budget samples each size: the planted limit, 600, lies between its bounds. The run's
    rows (10 batches of 99 seeds, 119 nodes; the last of 10 seeds, 20 nodes) scale the 99-seed
    batches: 119/99 nodes a seed, at least the planted k + 20 from 99 seeds up, whose limit under
    the planted truth is 529 seeds. Scaling the most nodes per seed of any batch (the last one's 2)
    put it at 339 (the newcomer's trial: 558 from the run, 1,195 from the loader)."""
    torch.manual_seed(0)
    rows = record(tmp_path / "run.jsonl", [99], shuffle=False)
    assert sorted({(r["batch_size"], r["num_nodes"], r["num_edges"]) for r in rows}) == [(10, 20, 10), (99, 119, 99)]
    model = planted_model()
    target = A + B * (600 + HUBS) + C * 600
    loader = neighbor_loader(hub_graph(), [-1], batch_size=99, input_nodes=torch.arange(SEEDS), shuffle=False)
    sampled = gnnmon.forecast(loader, model, capacity=target, progress=False, anchor=False).budget(1.0)
    assert sampled.batch_size <= 600 <= sampled.batch_size_high, sampled
    drawn = f"the heaviest of 3 batches its sampler draws at {sampled.batch_size:,} items (more than an epoch's 1)"
    assert sampled.batch_size_from.startswith(drawn), sampled  # 1,000 seeds: an epoch of over 500 is one batch

    fc = gnnmon.forecast(rows, model, capacity=target, progress=False, anchor=False)
    for k in (99, 100, 250, 529, 1000):
        nodes = fc.shape_at(k)["num_nodes"]
        assert nodes == pytest.approx(119 * k / 99) and nodes >= k + HUBS
        assert fc.shape_at(k)["num_edges"] == pytest.approx(k)
    budget = fc.budget(1.0)
    scaled_limit = (B * (600 + HUBS) + C * 600) // (B * 119 / 99 + C)  # 529: the planted truth at 119/99 a seed
    tail_limit = (B * (600 + HUBS) + C * 600) // (B * 2 + C)  # 339: at the last batch's 2 a seed
    assert (scaled_limit, tail_limit) == (529, 339)
    assert tail_limit < budget.batch_size <= scaled_limit <= budget.batch_size_high, budget
    assert budget.batch_size < sampled.batch_size
    assert budget.batch_size_from.startswith(
        f"scaled from the batches read, not sampled: {budget.batch_size:,} items as "
        f"{budget.batch_size / 99:.3g}x the most of the 99-item batches read (119 nodes, 99 edges)"), budget
    assert "overstates" in str(budget)


def test_the_command_says_its_batch_size_is_scaled_from_the_runs_batches(tmp_path, capsys, monkeypatch):
    """The command forecasts the run's rows as ``gnnmon.forecast(rows, model)`` does (one batch
    size), and says what its batch size is: the run's 99-seed batches (119 nodes: 99 seeds and the
    20 hubs) scaled, not sampled; and how to sample the loader's instead."""
    import sys

    module = sys.modules["gnnmon.forecast.forecast"]
    monkeypatch.setattr(module, "held_now", lambda model: None)  # as another process would: no anchor
    torch.manual_seed(0)
    path = tmp_path / "run.jsonl"
    record(path, [25, 50, 99], shuffle=True)
    capacity = int((A + B * 180 + C * 150) / 0.9)  # 150 seeds' planted peak, inside what the model vouches for
    assert main(["forecast", str(path), "--capacity", str(capacity)]) == 0
    text = capsys.readouterr().out
    rows_read, budget = library_budget(path, capacity)
    assert 99 < budget.batch_size < 198, budget  # scaled beyond the largest batch read, within 2x of it
    assert f"batch_size <= {budget.batch_size:,}," in text, text
    assert (f"the batch size's worst batch: scaled from the batches read, not sampled: {budget.batch_size:,} items "
            f"as {budget.batch_size / 99:.3g}x the most of the 99-item batches read (119 nodes, 99 edges)") in text
    assert (f"note: the batch size is scaled from the run's own {rows_read} batches; gnnmon.forecast(loader, "
            f"{str(path)!r}, capacity=...) samples") in text, text
    assert "extrapolated" not in text and budget.extrapolated is None, text  # above the smallest batch read


def test_a_batch_size_below_the_smallest_batch_read_is_said_to_be_extrapolated(tmp_path, capsys, monkeypatch):
    """A run of shuffled batches of 2,500, 4,000 and 5,000 seeds over 20,000 seeds and 1,000 hubs
    (its peaks planted): ``k`` seeds hold ``k`` edges and ``k`` plus their distinct hubs, at most
    ``k + min(k, 1000)`` nodes (consecutive seeds reach that), so fewer seeds share fewer hubs. The
    target is the planted peak of 2,000 consecutive seeds (3,000 nodes, 2,000 edges): the planted
    limit is 2,000. Below the 2,500 seeds read, the run's 2,500-seed batches are scaled down, their
    most nodes a seed (about 1.38), whose limit under the planted truth is above 2,000: the answer
    lies above the planted limit, as no batch that small was read, and the command and the budget
    say that it is extrapolated (they said nothing)."""
    import sys

    module = sys.modules["gnnmon.forecast.forecast"]
    monkeypatch.setattr(module, "held_now", lambda model: None)  # as another process would: no anchor
    torch.manual_seed(0)
    path = tmp_path / "run.jsonl"
    rows = record(path, [2500, 4000, 5000], shuffle=True, seeds=20_000, hubs=1000)
    assert sorted({r["batch_size"] for r in rows}) == [2500, 4000, 5000]
    assert all(r["num_edges"] == r["batch_size"] < r["num_nodes"] <= r["batch_size"] + 1000 for r in rows)
    most = max(r["num_nodes"] for r in rows if r["batch_size"] == 2500)
    target = truth({"num_nodes": 3000, "num_edges": 2000})
    scaled_limit = (target - A) // (B * most / 2500 + C)  # the planted truth at the 2,500-seed batches' most a seed
    assert 2000 < scaled_limit < 2500, (most, scaled_limit)
    capacity = int(target / 0.9)
    assert main(["forecast", str(path), "--capacity", str(capacity)]) == 0
    text = capsys.readouterr().out
    rows_read, budget = library_budget(path, capacity)
    assert 2000 < budget.batch_size <= scaled_limit, budget  # over the planted limit: not a bound
    assert "budget at 90% (" in text and f"): batch_size <= {budget.batch_size:,}," in text, text
    assert (f"note: batch_size {budget.batch_size:,} is below the smallest batch read (2,500 items): its worst "
            "batch is theirs scaled down") in text, text
    assert budget.extrapolated == (
        f"batch_size {budget.batch_size:,} is below the smallest batch read (2,500 items): its worst batch is theirs "
        f"scaled down by {budget.batch_size / 2500:.3g}, extrapolated, not a bound (a smaller batch's items share "
        f"fewer nodes: it may hold more per item); measure batches of about {budget.batch_size:,} items to size it")
    assert str(budget).endswith(f"; {budget.extrapolated}") and f"note: {budget.extrapolated}" in text, budget


@pytest.mark.parametrize("items", ["seed", "graph"])
def test_plain_batches_of_many_sizes_scale_each_size_from_every_size_read(items):
    """Batches of over 1,000 distinct sizes (planted at random), of seeds (a seed count, ``batch_size``)
    or of whole graphs (``num_graphs`` of them, no seed count): the shape of ``k`` items is, for each
    field, figured here by hand: of seeds, the least over the sizes read of their most times ``k / s``
    (at most their most above ``k``; the smallest size scaled down below it); of whole graphs, which
    share no nodes, ``k`` times the most per graph of the sizes read up to ``k`` (the smallest size's
    below it), holding ``k`` graphs."""
    import random

    rng = random.Random(0)
    rows = [{"num_nodes": (n := rng.randint(100, 5000)), "num_edges": 3 * n + rng.randint(0, 9),
             **({"num_graphs": 1, "batch_size": (g := rng.randint(1, 2000))} if items == "seed"
                else {"num_graphs": (g := rng.randint(1, 2000))}), "items": g} for _ in range(5000)]
    fc = gnnmon.forecast(rows, planted_model(), capacity=80 * 2**30, progress=False, anchor=False)
    assert fc.batches_of == items
    most: dict[int, dict[str, int]] = {}
    for r in rows:
        m = most.setdefault(r["items"], {"num_nodes": 0, "num_edges": 0})
        m["num_nodes"], m["num_edges"] = max(m["num_nodes"], r["num_nodes"]), max(m["num_edges"], r["num_edges"])
    assert len(most) == len(fc.most_at) > 1000
    smallest = min(most)
    for k in (1, 7, 500, 1999, 2000, 4000):
        for t in ("num_nodes", "num_edges"):
            if items == "seed":
                by_hand = min(m[t] * (k / s if k >= s or s == smallest else 1) for s, m in most.items())
            else:
                by_hand = max(m[t] * k / s for s, m in most.items() if s <= k or s == smallest)
            assert fc.shape_at(k)[t] == pytest.approx(by_hand), (k, t)
        assert fc.shape_at(k)["num_graphs"] == (k if items == "graph" else 1)


def test_a_neighbour_loaders_edge_budget_scales_from_a_full_batch_not_its_short_last_one():
    """The edge budget (``DynamicBatchSampler(mode='edge')``) forecasts a batch of ``E`` edges
    carrying nodes at the sparsest edges per node read. The loader's full batches (99 consecutive
    seeds: 99 edges, 119 nodes) hold 99/119 edges a node; its short last batch of 10 seeds holds
    10 edges and 20 nodes, 1/2 a node, sparser as its few seeds share no hub. The target is the
    planted peak of 600 edges at the full batches' ratio, so the planted limit is 600 edges; at
    the last batch's ratio it would be 384 (it answered 380, before the ratio was taken from a
    full batch). The answer is the model's own largest ``E`` at the full batches' ratio, at most
    the planted 600 and above 384."""
    torch.manual_seed(0)
    model = planted_model()
    loader = neighbor_loader(hub_graph(), [-1], batch_size=99, input_nodes=torch.arange(SEEDS), shuffle=False)
    shapes = [(int(b.batch_size), int(b.num_nodes), int(b.num_edges)) for b in loader]
    assert shapes == [(99, 119, 99)] * 10 + [(10, 20, 10)], shapes
    full, short = 99 / 119, 10 / 20

    def nodes_at(edges: float, ratio: float) -> float:
        return edges / ratio

    target = truth({"num_nodes": nodes_at(600, full), "num_edges": 600})
    full_limit = (target - A) / (B / full + C)  # the planted truth's largest edge count at the full ratio
    short_limit = (target - A) / (B / short + C)  # and at the short last batch's
    assert round(full_limit) == 600 and int(short_limit) == 384, (full_limit, short_limit)
    fc = gnnmon.forecast(loader, model, capacity=target, progress=False, anchor=False)
    budget = fc.budget(1.0)
    by_model = max(e for e in range(1, 1001)
                   if model.predict(num_nodes=nodes_at(e, full), num_edges=e).upper_bytes <= target)
    assert short_limit < budget.max_num_edges <= full_limit, budget
    assert budget.max_num_edges == by_model, (budget, by_model)
    assert fc.ratios["edges_per_node_min"] == fc.ratios["edges_per_node_max"] == pytest.approx(full), fc.ratios
