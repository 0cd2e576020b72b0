"""Will it fit: the shapes a loader would make are read without running a model (the sampler alone
for a NeighborLoader and a LinkNeighborLoader, one item per seed edge there, graph sizes for a DataLoader over graphs) and match the batches it makes; the
forecast over a planted model finds the planted largest batch; the budget keeps every batch a
loader made at that budget under the target; the command line prints the model and budgets."""

from __future__ import annotations

import json
import random

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

    budget = gnnmon.forecast(loader, planted_model(), capacity="4GiB", progress=False).budget(0.9)
    per_edge = max(s["num_nodes"] / s["items"] for s in scanned)
    assert budget["batch_size"] >= 0.9 * budget["max_num_nodes"] / per_edge > 128  # a budget in seed edges
    # plain data: whole numbers where PyG takes whole numbers, one line when printed, JSON when asked
    assert isinstance(budget, Budget)
    assert budget.batch_size == budget["batch_size"] and type(budget.batch_size) is int and budget.fits
    assert type(budget.max_num_nodes) is int and type(budget.max_num_edges) is int
    assert budget.target_bytes == 0.9 * 4 * 2**30 and budget.fraction == 0.9
    assert json.loads(json.dumps(budget.as_dict()))["batch_size"] == budget.batch_size and dict(budget) == budget.as_dict()
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
    assert below.why.startswith("the model's constant alone is forecast at up to 30") and "over the target 230" in below.why
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
    assert "vouches for nothing larger" in fc.summary()
    small = gnnmon.forecast([{"num_nodes": 1000, "num_edges": 5000}], model, capacity="1GiB", progress=False)
    assert not small.budget(0.9)["limited_by_model"]  # a budget the capacity sets says nothing of the sort


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
    for command in ("report", "export", "forecast", "compare", "fields"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        shown = " ".join(capsys.readouterr().out.split())
        assert "Exit status: 0" in shown, command
    with pytest.raises(SystemExit):
        main(["forecast", "--help"])
    assert "3 no trusted memory model" in " ".join(capsys.readouterr().out.split())


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
    assert "budget at 50% (4 GiB): DynamicBatchSampler(mode='node', max_num=" in text
    assert run.rows_written == 30
    assert main(["forecast", str(tmp_path / "run.jsonl"), "--capacity", "lots"]) == 2
    assert "capacity must be bytes" in capsys.readouterr().err
