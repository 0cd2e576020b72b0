"""Will it fit: the shapes a loader would make are read without running a model (the sampler alone
for a NeighborLoader and a LinkNeighborLoader, one item per seed edge there, graph sizes for a
DataLoader over graphs) and match the batches it makes; the forecast over a planted model finds the
planted largest batch; the budget keeps every batch a loader made at that budget under the target;
the command line prints the model and budgets."""

from __future__ import annotations

import dataclasses
import json
import random
import re

import pytest
import torch

import gnnmon
from gnnmon.cli import main
from gnnmon.forecast.budget import Budget
from gnnmon.forecast.forecast import parse_capacity
from gnnmon.forecast.shapes import batch_shapes
from gnnmon.report.memory.model import UntrustedModelError

pyg = pytest.importorskip("torch_geometric")
from torch_geometric.data import Data  # noqa: E402
from torch_geometric.datasets import FakeDataset  # noqa: E402
from torch_geometric.loader import DataLoader, DynamicBatchSampler  # noqa: E402

from gnnmon.integrations.pyg_sampler import (  # noqa: E402  (PyG's own sampler where pyg-lib exists)
    link_neighbor_loader,
    neighbor_loader,
)

MiB, GiB = 2**20, 2**30
A, B, C = 300 * MiB, 40_000, 9_000  # the planted truth: bytes, per node, per edge


def truth(shape) -> float:
    return A + B * shape["num_nodes"] + C * shape["num_edges"]


def planted_model():
    rng = random.Random(2)
    rows = []
    for i in range(60):
        n = rng.randint(100, 5000)
        e = rng.randint(n, 6 * n)
        rows.append({"label": "step", "index": i, "error": None, "num_nodes": n, "num_edges": e,
                     "mem_peak_bytes": truth({"num_nodes": n, "num_edges": e}) + rng.gauss(0, 256 * 1024)})
    return gnnmon.Report(rows).memory_model(figure="mem_peak_bytes")


def full_shapes(loader):
    return [(int(b.num_nodes), int(b.num_edges)) for b in loader]


def test_a_neighbor_loaders_shapes_come_from_its_sampler_alone():
    torch.manual_seed(0)
    n = 2000
    data = Data(x=torch.randn(n, 8), edge_index=torch.randint(0, n, (2, 12_000)))
    loader = neighbor_loader(data, [-1, -1], batch_size=128, shuffle=False)  # all neighbours: deterministic
    scanned = list(batch_shapes(loader, progress=False))
    assert [(s["num_nodes"], s["num_edges"]) for s in scanned] == full_shapes(loader)
    assert [s["items"] for s in scanned] == [128] * (n // 128) + [n % 128]

    fc = gnnmon.forecast(loader, planted_model(), capacity="4GiB", progress=False)
    worst = max(range(len(scanned)), key=lambda i: truth(scanned[i]))
    assert fc.batches == len(scanned) and fc.worst[0]["batch"] == worst
    assert fc.worst[0]["bytes"] == pytest.approx(truth(scanned[worst]), rel=0.01)
    assert fc.capacity_bytes == 4 * GiB and fc.headroom_bytes == 4 * GiB - fc.worst[0]["upper_bytes"]


def test_a_link_loaders_shapes_come_from_its_sampler_alone_one_item_per_seed_edge():
    torch.manual_seed(0)
    n = 2000
    data = Data(x=torch.randn(n, 8), edge_index=torch.randint(0, n, (2, 12_000)))
    seeds = data.edge_index[:, :1000]
    loader = link_neighbor_loader(data, [-1, -1], edge_label_index=seeds, batch_size=128, shuffle=False)
    scanned = list(batch_shapes(loader, progress=False))
    assert [(s["num_nodes"], s["num_edges"]) for s in scanned] == full_shapes(loader)
    assert [s["items"] for s in scanned] == [128] * (1000 // 128) + [1000 % 128]  # seed edges, not batches

    fc = gnnmon.forecast(loader, planted_model(), capacity="4GiB", progress=False)
    budget = fc.budget(0.9)
    # a budget in seed edges: every one of the 1,000 (a batch of them all holds under 2,000 nodes and fits);
    # the node budget, which the planted model would put near 10,000, is the graph's 2,000 nodes
    assert budget["batch_size"] == fc.heaviest.items == 1000 and budget["max_num_nodes"] == n, budget
    # plain data: whole numbers where PyG takes whole numbers, one line when printed, JSON when asked
    assert isinstance(budget, Budget)
    assert budget.batch_size == budget["batch_size"] and type(budget.batch_size) is int and budget.fits
    assert type(budget.max_num_nodes) is int and type(budget.max_num_edges) is int
    assert budget.target_bytes == 0.9 * 4 * 2**30 and budget.fraction == 0.9
    assert (json.loads(json.dumps(budget.as_dict()))["batch_size"] == budget.batch_size
            and dict(budget) == budget.as_dict())
    assert str(budget).startswith(f"batch_size <= {budget.batch_size:,}, or DynamicBatchSampler(mode='node', max_num="
                                  f"{budget.max_num_nodes:,})") and "3.6 GiB (90% of the capacity)" in str(budget)


def test_a_graph_loaders_shapes_come_from_graph_sizes_and_its_budgets_hold():
    dataset = FakeDataset(num_graphs=300, avg_num_nodes=60, avg_degree=4, num_channels=4)
    loader = DataLoader(dataset, batch_size=16, shuffle=False)
    scanned = list(batch_shapes(loader, progress=False))  # from the dataset's slices: no batch is built
    assert [(s["num_nodes"], s["num_edges"]) for s in scanned] == full_shapes(loader)
    as_list = list(batch_shapes(DataLoader(list(dataset), batch_size=16), progress=False))  # from each graph
    assert as_list == scanned

    fc = gnnmon.forecast(loader, planted_model(), capacity=2 * GiB, progress=False)
    budget = fc.budget(0.5)
    target = 0.5 * 2 * GiB
    assert budget["target_bytes"] == target and 1 < budget["batch_size"] < len(dataset)
    by_size = DataLoader(dataset, batch_size=budget["batch_size"], shuffle=True)
    assert max(truth(s) for s in batch_shapes(by_size, progress=False)) <= target
    for mode, key in (("node", "max_num_nodes"), ("edge", "max_num_edges")):
        sampler = DynamicBatchSampler(dataset, max_num=budget[key], mode=mode, shuffle=True)
        shapes = list(batch_shapes(DataLoader(dataset, batch_sampler=sampler), progress=False))
        assert shapes and max(truth(s) for s in shapes) <= target, mode
    # the exact largest batch size (the biggest graphs together under the planted truth): the budget
    # is at most that, and beyond the fitted shapes no more conservative than the widened bound's floor
    biggest = sorted((truth({"num_nodes": g.num_nodes, "num_edges": g.num_edges}) - A for g in dataset),
                     reverse=True)
    exact = max(k for k in range(len(biggest) + 1) if A + sum(biggest[:k]) <= target)
    assert 0.75 * exact <= budget["batch_size"] <= exact


def test_a_budget_where_nothing_fits_says_what_is_over_the_target_in_its_own_figures():
    """The planted 300 MiB constant against targets below it, and between it and a batch of one
    graph: batch size 0, each time with the reason its own numbers bear out."""
    dataset = FakeDataset(num_graphs=50, avg_num_nodes=2000, avg_degree=4, num_channels=4)
    loader = DataLoader(dataset, batch_size=4, shuffle=False)
    below = gnnmon.forecast(loader, planted_model(), capacity=256 * MiB, progress=False).budget(0.9)
    assert below.batch_size == 0 and not below.fits
    assert (below.why.startswith("the model's constant alone is forecast at up to 30")
            and "over the target 230" in below.why)
    assert str(below).startswith("no batch fits under 230 MiB (90% of the capacity): the model's constant alone")
    biggest = max(truth({"num_nodes": g.num_nodes, "num_edges": g.num_edges}) for g in dataset)
    between = gnnmon.forecast(loader, planted_model(), capacity=(A + biggest) / 2 / 0.9, progress=False).budget(0.9)
    assert between.batch_size == 0 and "a batch of one item" in between.why, between.why
    assert "the constant alone, 30" in between.why and "is under it" in between.why
    fits = gnnmon.forecast(loader, planted_model(), capacity=4 * GiB, progress=False).budget(0.9)
    assert fits.fits and fits.why is None


def test_no_budget_goes_beyond_what_the_model_vouches_for():
    """One batch of 1,000 nodes and 5,000 edges against 80 GiB: the planted model (fitted on 100-5,000
    nodes) would fit billions, but every budget stops at VOUCH times the largest batch it saw, and
    says so (a single shape once gave batch_size 1,099,511,627,776)."""
    from gnnmon.forecast.forecast import VOUCH

    model = planted_model()
    fc = gnnmon.forecast([{"num_nodes": 1000, "num_edges": 5000}], model, capacity="80GiB", progress=False)
    budget = fc.budget(0.9)
    seen_nodes = model.ranges["num_nodes"][1]
    assert 0 < budget["max_num_nodes"] <= VOUCH * seen_nodes and budget["limited_by_model"]
    assert 0 < budget["max_num_edges"] <= VOUCH * model.ranges["num_edges"][1]
    assert 0 < budget["batch_size"] <= VOUCH * seen_nodes / 1000
    reach = (f"stops where the model stops vouching ({int(VOUCH * seen_nodes):,} num_nodes, "
             f"{int(VOUCH * model.ranges['num_edges'][1]):,} num_edges: 2x the most of each it was fitted on)")
    # in the figures it was fitted on, not in batch sizes
    assert reach in fc.summary(), fc.summary()
    small = gnnmon.forecast([{"num_nodes": 1000, "num_edges": 5000}], model, capacity="1GiB", progress=False)
    assert not small.budget(0.9)["limited_by_model"]  # a budget the capacity sets says nothing of the sort


def test_an_edge_budget_the_scan_cannot_bound_is_not_given_and_says_why():
    """Beside a batch of 1,000 nodes and 5,000 edges, one of 500 nodes and no edge: a sampler in edge
    mode counts that one as nothing, so no number of edges bounds its nodes. The edge budget is None
    (before, a silent 0, which reads as "nothing fits") and the line says why; the node budget is the
    one the dense batch alone gives (edges at its 5 a node, the densest either batch has)."""
    model = planted_model()
    dense = {"num_nodes": 1000, "num_edges": 5000}
    both = gnnmon.forecast([dense, {"num_nodes": 500, "num_edges": 0}], model, capacity="1GiB", progress=False)
    alone = gnnmon.forecast([dense], model, capacity="1GiB", progress=False).budget(0.9)
    budget = both.budget(0.9)
    assert budget.max_num_edges is None and alone.max_num_edges and alone.max_num_edges > 0, (budget, alone)
    assert budget.max_num_nodes == alone.max_num_nodes > 0, (budget, alone)
    said = str(budget)
    assert f"DynamicBatchSampler(mode='node', max_num={alone.max_num_nodes:,})" in said and "mode='edge'" not in said
    assert "max_num_edges not given: a batch or graph the scan read has nodes and no edge" in said, said
    assert alone.samplers_why is None


@pytest.mark.parametrize("shapes, why", [
    ([{"num_nodes": 1000, "num_edges": 5000}, {"num_nodes": 500}], "a batch the scan read gave no edge count"),
    ([{"num_nodes": 0, "num_edges": 0}], "the scan read no batch with nodes"),
])
def test_an_edge_budget_is_not_given_where_the_scan_read_no_edge_count_or_no_node(shapes, why):
    """A shape without an edge count (its edges per node unknown, not 0) and a scan with no batch
    with nodes (no edges per node at all): no edge budget, and the reason is the true one (a
    shape with no edge count was said to have "nodes and no edge"; no batch with nodes raised
    OverflowError). The summary prints a missing edge count as "?"."""
    rng = random.Random(3)
    nodes_only = gnnmon.Report([{"label": "step", "index": i, "error": None, "num_nodes": n,
                                 "mem_peak_bytes": A + B * n + rng.gauss(0, 256 * 1024)}
                                for i, n in enumerate(rng.randint(100, 5000) for _ in range(60))]
                               ).memory_model(figure="mem_peak_bytes")  # no edge term: shapes need no edge count
    assert set(nodes_only.terms) == {"num_nodes"}, nodes_only.terms
    fc = gnnmon.forecast(shapes, nodes_only, capacity="1GiB", progress=False)
    budget = fc.budget(0.9)
    assert budget.max_num_edges is None and budget.samplers_why == f"max_num_edges not given: {why}", budget
    assert "no edge:" not in str(budget)
    if any("num_edges" not in shape for shape in shapes):
        assert re.search(r"batch 1: 500 nodes, \? edges -> ", fc.summary()), fc.summary()


def test_a_model_that_cannot_be_trusted_is_refused_before_the_scan():
    flat = [{"label": "step", "index": i, "error": None, "num_nodes": 100, "num_edges": 400,
             "mem_peak_bytes": 5 * MiB} for i in range(40)]
    model = gnnmon.Report(flat).memory_model(figure="mem_peak_bytes")

    def never():
        raise AssertionError("scanned")
        yield

    with pytest.raises(UntrustedModelError, match="barely vary"):
        gnnmon.forecast(never(), model)
    delta = [dict(r, mem_peak_delta_bytes=r["mem_peak_bytes"]) for r in flat]
    with pytest.raises(ValueError, match="absolute peak"):
        gnnmon.forecast([], gnnmon.Report(delta).memory_model(figure="mem_peak_delta_bytes"))


def test_the_command_exits_3_with_the_reason_when_the_model_cannot_be_trusted(tmp_path, capsys):
    """Not an error (2) and not compare's "limit exceeded" (1): its own status, which its --help names."""
    @gnnmon.monitor_memory_device(device="cpu")
    def step(batch):
        return batch.x.sum()

    batch = Data(x=torch.randn(100, 4), edge_index=torch.randint(0, 100, (2, 400)))
    with gnnmon.collect(tmp_path / "flat.jsonl"):
        for _ in range(40):  # one batch shape: nothing to fit a slope on
            step(batch)
    assert main(["forecast", str(tmp_path / "flat.jsonl"), "--capacity", "1GiB"]) == 3
    out = capsys.readouterr().out
    assert "barely vary" in out and "budget" not in out
    assert any(line.startswith("next: ") for line in out.splitlines()), out  # the refusal names what to do next
    for command in ("report", "export", "forecast", "compare", "fields"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        shown = " ".join(capsys.readouterr().out.split())
        assert "Exit status: 0" in shown, command
    with pytest.raises(SystemExit):
        main(["forecast", "--help"])
    assert "3 no trusted memory model" in " ".join(capsys.readouterr().out.split())


def test_the_command_leaves_out_rows_without_a_batch_shape_and_says_so(tmp_path, capsys):
    """A run whose 31st of 60 planted rows lost its num_nodes (None): the forecast is of the other
    59 and says one was left out (it raised a TypeError with a traceback); none with a shape: exit
    2 naming the problem."""
    from tests.report.diagnosis.planted import steps, write_run

    rows = [{"type": "row", **r} for r in steps(60)]
    rows[30]["num_nodes"] = None
    assert main(["forecast", str(write_run(tmp_path / "one.jsonl", rows)), "--capacity", "1GiB"]) == 0
    out = capsys.readouterr().out
    assert "note: 1 of train_step's 60 rows carry no readable batch shape" in out, out
    assert "the batch size is scaled from the run's own 59 batches" in out, out
    for r in rows:
        r["num_nodes"] = None
    assert main(["forecast", str(write_run(tmp_path / "none.jsonl", rows)), "--capacity", "1GiB"]) == 2
    assert "carry both mem_peak_bytes and a batch shape" in capsys.readouterr().err


def test_capacities_are_read_from_sizes_and_devices(fake_cuda):
    assert parse_capacity("80GiB")[0] == 80 * GiB and parse_capacity("80 GB")[0] == 80 * 10**9
    assert parse_capacity(1024)[0] == 1024 and parse_capacity(None) == (None, None)
    fake_cuda.total = 24 * GiB
    assert parse_capacity("cuda:1")[0] == 24 * GiB  # CUDA not started: the total, and it says so
    assert "CUDA has not started here" in parse_capacity("cuda:1")[1]
    fake_cuda.other = 3 * GiB  # NCCL, cuBLAS workspaces, another process: outside torch's allocator
    held = fake_cuda.alloc(5 * GiB, 1)  # the allocator's own: still the allocator's to use
    capacity, what = parse_capacity("cuda:1")
    assert capacity == 21 * GiB and "3.00 GiB is held outside it" in what
    fake_cuda.free(held)
    with pytest.raises(ValueError, match="capacity must be bytes, a size such as '80GiB'"):
        parse_capacity("lots")
    with pytest.raises(ValueError, match="positive"):
        parse_capacity(-5)
    with pytest.raises(ValueError, match="a budget needs a capacity"):
        gnnmon.forecast([{"num_nodes": 10, "num_edges": 20}], planted_model()).budget()


def test_the_command_line_prints_the_model_and_the_budgets(tmp_path, capsys):
    rng = random.Random(4)

    @gnnmon.monitor_memory_device(device="cpu")
    def step(batch):
        return batch

    with gnnmon.collect(tmp_path / "run.jsonl") as run:
        for _ in range(30):
            n = rng.randint(100, 3000)
            step(Data(x=torch.empty(n, 1), edge_index=torch.empty(2, rng.randint(n, 4 * n), dtype=torch.long)))
    # plant the peaks: rewrite the file's rows with a known peak per shape
    lines = (tmp_path / "run.jsonl").read_text().splitlines()
    import json

    out = []
    for line in lines:
        row = json.loads(line)
        if row.get("type") == "row":
            row["mem_peak_bytes"] = truth(row)
        out.append(json.dumps(row))
    (tmp_path / "run.jsonl").write_text("\n".join(out) + "\n")
    assert main(["forecast", str(tmp_path / "run.jsonl"), "--capacity", "8GiB", "--fraction", "0.5"]) == 0
    text = capsys.readouterr().out
    assert "step: mem_peak_bytes ≈ 39.1 KiB per node + 8.79 KiB per edge + 300 MiB" in text
    assert "30 batches forecast" in text and "capacity 8 GiB" in text
    assert re.search(r"budget at 50% \(4 GiB\): batch_size <= [0-9,]+, "
                     r"or DynamicBatchSampler\(mode='node', max_num=", text)
    assert run.rows_written == 30
    assert main(["forecast", str(tmp_path / "run.jsonl"), "--capacity", "lots"]) == 2
    assert "capacity must be bytes" in capsys.readouterr().err


def complete_graph(n: int) -> Data:
    """Every ordered pair of distinct nodes an edge: two hops of every neighbour reach every node
    and every edge from any seed."""
    src, dst = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    keep = src != dst
    return Data(x=torch.randn(n, 4), edge_index=torch.stack([src[keep], dst[keep]]))


def test_a_neighbour_loaders_batch_size_budget_samples_each_size_rather_than_scaling_the_loaders():
    """A complete graph of 50 nodes sampled two hops with every neighbour: a batch of any size
    holds all 50 nodes and 2,450 edges (the planted truth), so when the whole graph fits under the
    target every batch size does, up to all 50 seeds. Scaling the loader's own batches (50 nodes
    from 4 seeds) by the size would call a batch of 20 seeds 250 nodes and 12,250 edges (the most
    per seed of any of them, 25 from its last batch of 2, would call it 500 nodes)."""
    data = complete_graph(50)
    loader = neighbor_loader(data, [-1, -1], batch_size=4, shuffle=False)
    assert {(int(b.num_nodes), int(b.num_edges)) for b in loader} == {(50, 2450)}
    whole = {"num_nodes": 50, "num_edges": 2450}
    model = planted_model()
    target = model.predict(**whole).upper_bytes + 20 * MiB  # the whole graph, with 20 MiB to spare
    fc = gnnmon.forecast(loader, model, capacity=target / 0.9, progress=False)
    assert fc.heaviest is not None and fc.heaviest.items == 50
    assert all((fc.shape_at(k)["num_nodes"], fc.shape_at(k)["num_edges"]) == (50, 2450) for k in (1, 7, 20, 50))
    budget = fc.budget(0.9)
    assert budget.batch_size == budget.batch_size_high == 50, budget
    scaled = fc._scaled(20)
    assert (scaled["num_nodes"], scaled["num_edges"]) == (250, 12_250)  # what scaling would say
    assert model.predict(**scaled).upper_bytes > target


def test_a_budget_states_the_limit_between_its_upper_and_lower_bounds():
    """The planted model over a graph loader (the costliest graphs summed at each size): the
    exact limit under the planted truth lies between the budget's batch size (its worst batch's
    upper bound under the target) and ``batch_size_high`` (its lower bound under it)."""
    dataset = FakeDataset(num_graphs=300, avg_num_nodes=60, avg_degree=4, num_channels=4)
    loader = DataLoader(dataset, batch_size=16, shuffle=False)
    costs = sorted((truth({"num_nodes": g.num_nodes, "num_edges": g.num_edges}) - A for g in dataset), reverse=True)
    for target in (400 * MiB, 700 * MiB, 1100 * MiB):
        exact = max(k for k in range(len(costs) + 1) if A + sum(costs[:k]) <= target)
        budget = gnnmon.forecast(loader, planted_model(), capacity=target / 0.5, progress=False).budget(0.5)
        assert budget.batch_size <= exact <= budget.batch_size_high, (target, exact, budget)
        said = f"the model puts the limit between batch_size {budget.batch_size:,} and {budget.batch_size_high:,}"
        assert (said in str(budget)) == (budget.batch_size_high > budget.batch_size)


def test_a_summary_never_prints_a_size_of_zero_as_a_budget():
    """Where nothing fits, ``print(forecast)`` says so and why, not ``max_num=0`` or ``batch_size
    <= 0``; a sampler budget of 0 beside a batch size that fits is left out (DynamicBatchSampler
    with max_num=0 takes nothing)."""
    dataset = FakeDataset(num_graphs=50, avg_num_nodes=2000, avg_degree=4, num_channels=4)
    loader = DataLoader(dataset, batch_size=4, shuffle=False)
    text = str(gnnmon.forecast(loader, planted_model(), capacity=256 * MiB, progress=False))
    assert "budget at 90% (230 MiB): no batch fits: the model's constant alone" in text, text
    assert "max_num=0" not in text and "batch_size <= 0" not in text
    some = Budget(batch_size=3, max_num_nodes=0, max_num_edges=900, target_bytes=GiB, fraction=0.9, binds="nodes",
                  limited_by_model=False, beyond_fitted=None, batch_size_high=4)
    assert str(some).startswith("batch_size <= 3, or DynamicBatchSampler(mode='edge', max_num=900), under 1 GiB")
    assert "max_num=0" not in str(some) and "max_num=0" not in some.said()


def test_a_forecast_of_no_batch_says_there_was_nothing_to_forecast_and_why():
    """A loader that makes no batch (50 seeds, batch size 99, its last batch dropped) and a run of no
    rows: the summary says there was nothing to forecast and why, not "the worst batch is 0 B over"
    (the capacity minus no peak), and a budget is refused saying so rather than sized from nothing."""
    model = planted_model()
    loader = neighbor_loader(complete_graph(50), [-1], batch_size=99, drop_last=True)
    assert len(list(loader)) == 0
    for source, why in ((loader, "the loader drops its last batch (drop_last=True), and its 50 seeds are fewer "
                                 "than its batch_size 99"),
                        ([], "the batches given are none (an empty list)")):
        fc = gnnmon.forecast(source, model, capacity="4GiB", progress=False)
        text = fc.summary()
        assert fc.batches == 0 and fc.worst == [] and fc.fits is None and fc.headroom_bytes is None
        assert f"nothing to forecast: no batch was read: {why}" in text, text
        assert "capacity 4 GiB (4 GiB): no batch to size against it, so no headroom and no budget" in text, text
        assert not any(said in text for said in ("worst batch", "B over", "batches forecast", "budget at")), text
        assert str(fc) == text and "nothing to forecast" in repr(fc)
        with pytest.raises(ValueError, match=f"nothing to forecast, so no budget: no batch was read: {re.escape(why)}"):
            fc.budget(0.9)
    read = gnnmon.forecast([{"num_nodes": 10, "num_edges": 20}], model, capacity="4GiB", progress=False)
    kept_none = dataclasses.replace(read, worst=[])  # a batch read, its forecast not kept
    assert "headroom not known: no batch's forecast was kept" in kept_none.summary()
    assert "0 B over" not in kept_none.summary()
    with pytest.raises(ValueError, match="top must be at least 1"):
        gnnmon.forecast([{"num_nodes": 10, "num_edges": 20}], model, top=0)


def test_a_refusal_names_the_next_step():
    """Each reason a model is refused comes with what to do about it: more rows, calibrate, exact
    host memory."""
    few = [{"label": "s", "index": i, "error": None, "num_nodes": 100 * (i + 1), "num_edges": 300 * (i + 1),
            "mem_peak_bytes": 5 * MiB + 1000 * i} for i in range(6)]
    rng = random.Random(3)
    loose = [{"label": "s", "index": i, "error": None, "num_nodes": (n := rng.randint(100, 5000)),
              "num_edges": 3 * n + rng.randint(0, 50), "mem_peak_bytes": 50 * MiB + rng.uniform(0, 40 * MiB)}
             for i in range(60)]
    for rows, said, step in ((few, "too few rows", "gnnmon.calibrate(step, loader)"),
                             (loose, "explains only", "gnnmon.exact_host_memory()")):
        model = gnnmon.Report(rows).memory_model(figure="mem_peak_bytes", warmup=0)
        assert not model.trusted and said in model.problems[0], model.problems
        with pytest.raises(UntrustedModelError, match=re.escape(step)) as refused:
            gnnmon.forecast([{"num_nodes": 100, "num_edges": 300}], model, progress=False)
        assert said in str(refused.value) and "next:" in str(refused.value)


def test_a_forecast_does_not_keep_a_neighbour_loader_alive():
    """A NeighborLoader holds its own copy of the graph's edges; a forecast that kept it would hold
    that memory after training moved to a loader of another batch size. It is held weakly: once
    freed, a budget that must sample a size it has not (here one seed: under the planted 300 MiB
    constant nothing fits) says so, and the summary says why it has none."""
    import gc
    import weakref

    data = complete_graph(50)
    loader = neighbor_loader(data, [-1, -1], batch_size=4, shuffle=False)
    fc = gnnmon.forecast(loader, planted_model(), capacity=200 * MiB, progress=False)
    assert fc.shape_at(50)["num_nodes"] == 50  # sampled while the loader lives
    gone = weakref.ref(loader)
    del loader
    gc.collect()  # a PyG loader sits in a reference cycle
    assert gone() is None
    assert fc.shape_at(50)["num_nodes"] == 50  # a size it sampled stays known
    with pytest.raises(ReferenceError, match="has been freed: .* forecast again with the loader"):
        fc.budget(0.5)
    assert "budget at 90%: not sized: the loader whose batches these are has been freed" in fc.summary()
