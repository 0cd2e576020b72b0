"""A memory model from an ordinary set-up: ``gnnmon.calibrate`` runs the user's own step on batches
the loader's own sampler builds at spread sizes, and fits the planted truth (on the fake CUDA
allocator: a step that allocates 64 MiB + 2,048 B·nodes + 512 B·edges); a batch that does not fit
is caught and reported; the model and optimizer are put back; the refusal of an ordinary run's
model names it."""

from __future__ import annotations

import random
import warnings

import pytest
import torch

import gnnmon

pyg = pytest.importorskip("torch_geometric")
from torch_geometric.data import Data  # noqa: E402
from torch_geometric.datasets import FakeDataset  # noqa: E402
from torch_geometric.loader import DataLoader  # noqa: E402

from gnnmon.integrations.pyg_sampler import neighbor_loader  # noqa: E402

MiB = 2**20
A, B, C = 64 * MiB, 2048, 512


def planted_step(fake_cuda):
    @gnnmon.monitor_memory_device(label="train_step", device="cuda:0")
    def train_step(batch):
        handles = []
        try:  # freed however the step ends, as a real step's tensors are when its frame unwinds
            for nbytes in (A, B * batch.num_nodes, C * batch.num_edges):
                handles.append(fake_cuda.alloc(nbytes, 0))
        finally:
            for h in handles:
                fake_cuda.free(h)

    return train_step


def graph(n: int = 3000, seed: int = 0) -> Data:
    g = torch.Generator().manual_seed(seed)
    return Data(x=torch.randn(n, 4), edge_index=torch.randint(0, n, (2, 8 * n), generator=g))


def test_an_ordinary_runs_refusal_names_calibrate():
    rows = [{"label": "s", "index": i, "error": None, "num_nodes": 1000, "num_edges": 4000,
             "mem_peak_bytes": 5 * MiB} for i in range(40)]
    model = gnnmon.Report(rows).memory_model(figure="mem_peak_bytes")
    assert "gnnmon.calibrate(step, loader)" in model.problems[0]


def test_calibrate_on_a_neighbor_loader_fits_the_planted_peak(fake_cuda):
    loader = neighbor_loader(graph(), [10, 5], batch_size=64, shuffle=True)
    cal = gnnmon.calibrate(planted_step(fake_cuda), loader)
    model = cal.model
    assert model.trusted, model.problems
    assert min(cal.sizes) == 16 and max(cal.sizes) == 128  # 1/4 to 2 times the batch size
    assert len({s["num_nodes"] for s in cal.shapes}) >= 5  # the sampler's own batches, of spread sizes
    shape = cal.shapes[-1]
    truth = A + B * shape["num_nodes"] + C * shape["num_edges"]
    assert model.predict(**{t: shape[t] for t in model.terms}).bytes == pytest.approx(truth, rel=0.02)
    assert all(c >= 0 for c in model.coefficients.values())
    assert "calibrated on" in str(cal) and cal.does_not_fit is None
    fc = gnnmon.forecast(loader, cal, capacity="16GiB", progress=False)  # the calibration goes to forecast
    assert fc.worst and fc.fits


def test_calibrate_on_graphs_reports_a_batch_that_does_not_fit_and_restores_the_model(fake_cuda):
    dataset = FakeDataset(num_graphs=200, avg_num_nodes=50, avg_degree=4, num_channels=4)
    loader = DataLoader(dataset, batch_size=32)
    net = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    step = planted_step(fake_cuda)
    fake_cuda.total = 70 * MiB  # room for about 32 graphs, not 64

    def train(batch):
        net(batch.x).sum().backward()  # the step trains: its weights move
        opt.step()
        step(batch)

    cal = gnnmon.calibrate(train, loader, restore=(net, opt))
    failed = cal.does_not_fit
    assert failed is not None and "out of memory" in failed["error"]
    # Sizes run in increasing order, each twice, on random graphs: the batch that failed can be the
    # second of its size (24 graphs fitted, then 24 larger ones did not). What holds is the plant:
    # it needed more than any batch that ran.
    def planted(shape: dict) -> int:
        return A + B * shape["num_nodes"] + C * shape["num_edges"]

    assert failed["size"] >= max(cal.sizes) and planted(failed) > max(planted(s) for s in cal.shapes)
    assert "does not fit" in cal.summary()
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())  # put back
    assert fake_cuda.devices[0].allocated == 0  # nothing of the failed step left held


def test_forecast_given_a_model_object_says_what_it_wants():
    with pytest.raises(TypeError, match=r"got Linear: to measure your model's step, run gnnmon.calibrate"):
        gnnmon.forecast([{"num_nodes": 10, "num_edges": 20}], torch.nn.Linear(2, 2))
    for wrong, name in ((torch.zeros(3), "Tensor"), (None, "NoneType"), (7, "int")):
        with pytest.raises(TypeError, match=rf"a memory model, a calibration or a run .*; got {name}"):
            gnnmon.forecast([{"num_nodes": 10, "num_edges": 20}], wrong)
    rows = [{"label": "s", "index": i, "error": None, "num_nodes": 100 + 37 * i, "num_edges": 300 + 90 * i,
             "mem_peak_bytes": A + 1000 * (100 + 37 * i)} for i in range(40)]
    for wrong in (5, None):
        with pytest.raises(TypeError, match=r"forecast needs a loader, a dataset of graphs or an iterable of batches"):
            gnnmon.forecast(wrong, rows)
    with pytest.raises(TypeError, match=r"a batch whose shape cannot be read: Tensor"):
        gnnmon.forecast(torch.zeros(3), rows)


def test_a_forecast_prints_its_summary():
    rng = random.Random(1)
    rows = []
    for i in range(40):
        n = rng.randint(100, 5000)
        e = rng.randint(n, 6 * n)
        rows.append({"label": "s", "index": i, "error": None, "num_nodes": n, "num_edges": e,
                     "mem_peak_bytes": A + B * n + C * e})
    model = gnnmon.Report(rows).memory_model(figure="mem_peak_bytes")
    fc = gnnmon.forecast([{"num_nodes": 1000, "num_edges": 5000}], model, capacity="1GiB", progress=False)
    assert str(fc) == fc.summary() and "worst" in str(fc) and "budget" in str(fc)
    assert repr(fc).startswith("<Forecast of 1 batches") and "array" not in repr(fc)
    assert str(model) == model.summary()


def _largest_fitting(dataset, limit: float, extra=lambda k: 0.0) -> int:
    """The truth the search looks for: the largest k whose heaviest batch (the k largest graphs)
    peaks at or under ``limit`` bytes under the planted step."""
    sizes = sorted(((int(g.num_nodes), int(g.num_edges)) for g in dataset), reverse=True)
    best, nodes, edges = 0, 0, 0
    for k, (n, e) in enumerate(sizes, 1):
        nodes, edges = nodes + n, edges + e
        if A + B * nodes + C * edges + extra(k) > limit:
            break
        best = k
    return best


def test_calibrate_with_a_capacity_probes_to_the_largest_batch_size_that_fits(fake_cuda):
    """Graphs of the planted step on the fake CUDA allocator: the search answers the largest batch
    size whose heaviest batch (the largest graphs) peaks under 90 % of the capacity, measured by its
    own probe, with a probe over the target at most 5 % above it (the bracket closed), in at most
    four probes — where doubling from 2 and halving back would need about log2 of the answer, each
    a trial step or more."""
    torch.manual_seed(0)  # the same graphs whatever ran before in this process (one draw fell 6 % short)
    dataset = FakeDataset(num_graphs=2000, avg_num_nodes=40, avg_degree=6, num_channels=4)
    loader = DataLoader(dataset, batch_size=16)
    capacity = 256 * MiB
    truth = _largest_fitting(dataset, 0.9 * capacity)
    assert truth > 4 * 32  # the limit lies well beyond the calibration's largest batch (2 x 16)
    cal = gnnmon.calibrate(planted_step(fake_cuda), loader, capacity=capacity)
    found = cal.search
    assert found is not None and 1 <= len(found.probes) <= 4, found.summary()
    assert 0.95 * truth <= found.batch_size <= truth, (truth, found.summary())
    assert found.over is not None and truth < found.over and found.off_by <= 0.05  # the limit bracketed
    assert "closed within 5%" in found.stopped and "at most" in found.summary()
    best = next(p for p in found.probes if p["size"] == found.batch_size)
    assert best["fits"] and best["peak_bytes"] <= 0.9 * capacity
    assert best["peak_bytes"] == A + B * best["num_nodes"] + C * best["num_edges"]  # measured: the planted truth
    assert "probe" in cal.summary() and f"batch size {found.batch_size:,}" in cal.summary()


def test_a_probe_that_runs_out_of_memory_or_over_the_target_steers_the_next(fake_cuda):
    """A step whose peak jumps where the calibration's batches cannot see it (a planted 120 MiB
    workspace from 150 graphs up, as a kernel that switches algorithm at a size): the first aim
    runs over the target or out of memory, and the search still answers a size at or under the
    planted limit whose own probe measured under the target, with nothing left held."""
    dataset = FakeDataset(num_graphs=2000, avg_num_nodes=40, avg_degree=6, num_channels=4)
    loader = DataLoader(dataset, batch_size=16)
    capacity = 256 * MiB
    workspace = lambda k: 120 * MiB if k >= 150 else 0  # noqa: E731
    inner = planted_step(fake_cuda)

    def step(batch):
        handle = fake_cuda.alloc(workspace(batch.num_graphs), 0)
        try:
            inner(batch)
        finally:
            fake_cuda.free(handle)

    # the workspace is outside the decorated step: measure the whole step instead
    step = gnnmon.monitor_memory_device(label="outer", device="cuda:0")(step)
    fake_cuda.total = capacity
    cal = gnnmon.calibrate(step, loader, capacity=capacity, label="outer", probes=6)
    found = cal.search
    assert found is not None and any(not p["fits"] for p in found.probes), found.summary()
    truth = _largest_fitting(dataset, 0.9 * capacity, workspace)
    assert 0 < found.batch_size <= truth, found.summary()
    best = next(p for p in found.probes if p["size"] == found.batch_size)
    assert best["fits"] and best["peak_bytes"] <= 0.9 * capacity
    assert fake_cuda.devices[0].allocated == 0


QUICK_START_CALIBRATION = """
import json, sys
import gnnmon
gnnmon.exact_host_memory()  # first thing: RSS follows the tensors
import torch
import torch.nn.functional as F
from torch_geometric.datasets import FakeDataset
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GCNConv, global_mean_pool


class GCN(torch.nn.Module):  # the README Quick start's model
    def __init__(self, features, hidden, classes):
        super().__init__()
        self.conv1, self.conv2 = GCNConv(features, hidden), GCNConv(hidden, hidden)
        self.head = torch.nn.Linear(hidden, classes)

    def forward(self, batch):
        x = F.relu(self.conv1(batch.x, batch.edge_index))
        x = F.relu(self.conv2(x, batch.edge_index))
        return self.head(global_mean_pool(x, batch.batch))


torch.manual_seed(0)
dataset = FakeDataset(num_graphs=512, avg_num_nodes=40, num_channels=16, num_classes=4, task="graph")
loader = DataLoader(dataset, batch_size=32, shuffle=True)
model = GCN(16, 64, 4)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)


@gnnmon.monitor_memory_device
def train_step(model, batch, optimizer):
    gnnmon.record_graph(batch)
    loss = F.cross_entropy(model(batch), batch.y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


cal = gnnmon.calibrate(lambda b: train_step(model, b, optimizer), loader, restore=(model, optimizer))
big = loader.collate_fn([dataset[i] for i in range(2 * max(cal.sizes))])  # twice the largest calibrated
with gnnmon.collect() as run:
    train_step(model, big, optimizer)
shape = {"num_nodes": big.num_nodes, "num_edges": big.num_edges, "num_graphs": big.num_graphs}
p = cal.model.predict(**{t: shape[t] for t in cal.model.terms})
print(json.dumps({"trusted": cal.model.trusted, "measured": run.records[-1]["mem_peak_bytes"],
                  "bytes": p.bytes, "upper": p.upper_bytes, "summary": cal.summary()}))
"""


@pytest.mark.slow
def test_calibrating_the_quick_start_model_forecasts_a_larger_batch_within_its_bound(tmp_path):
    """The README Quick start's GCN on the CPU, in a fresh process (exact_host_memory first):
    calibrate on its loader (8 to 64 graphs), then a planted batch of twice the largest calibrated
    size runs; its measured peak lies under the model's upper bound."""
    import json
    import subprocess
    import sys

    from tests.scripts import ROOT

    script = tmp_path / "calibrate_quick_start.py"
    script.write_text(QUICK_START_CALIBRATION)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                          cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["trusted"], got["summary"]
    assert got["measured"] <= got["upper"], got
    assert got["bytes"] <= got["upper"]
    assert "exact_host_memory" not in proc.stderr and "exact_host_memory" not in got["summary"]  # it was on


def test_calibrating_host_memory_without_exact_host_memory_refuses_or_says_its_peaks_are_not_each_batchs():
    """The allocator keeps freed memory unless gnnmon.exact_host_memory() was called: calibrate
    refuses after its warm-up call, naming the reason and both ways on, and puts the model back;
    with exact_host=False it fits and says so (a warning and a note on its model). With exact host
    memory on (an earlier test in this process may have turned it on for good) there is nothing to
    refuse or say."""
    from gnnmon.devices.malloc import mmap_threshold
    from gnnmon.forecast.calibrate import INEXACT_HOST, InexactHostMemory

    net = torch.nn.Linear(4, 4)
    before = {k: v.clone() for k, v in net.state_dict().items()}

    @gnnmon.monitor_memory_device(label="train_step", device="cpu")
    def step(batch):
        with torch.no_grad():
            net.weight.add_(1.0)  # the step trains: calibrate puts it back, refused or not
        return torch.ones(batch.num_nodes, 64).sum()

    graphs = [Data(x=torch.randn(n, 4), edge_index=torch.randint(0, n, (2, 2 * n))) for n in range(5, 105)]
    if mmap_threshold() is None:  # off: the host's allocator keeps what the batches free
        with pytest.raises(InexactHostMemory, match=r"exact_host_memory\(\) first .* exact_host=False"):
            gnnmon.calibrate(step, DataLoader(graphs, batch_size=16), restore=(net,))
        assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cal = gnnmon.calibrate(step, DataLoader(graphs, batch_size=16), exact_host=False)
    said = [str(w.message) for w in caught if "exact_host_memory" in str(w.message)]
    if mmap_threshold() is None:
        assert said == [f"gnnmon.calibrate: {INEXACT_HOST}"] and INEXACT_HOST in cal.model.notes
    else:
        assert said == [] and INEXACT_HOST not in cal.model.notes


def test_calibrate_primes_the_fit_before_its_first_step(monkeypatch):
    """The fit's first call in a process keeps host memory (numpy's BLAS buffers): calibrate runs it
    before the first step, so on the CPU the constant it measures already holds it."""
    import importlib

    calibration = importlib.import_module("gnnmon.forecast.calibrate")  # the module, not the function

    order: list[str] = []
    real = calibration.prime
    monkeypatch.setattr(calibration, "prime", lambda: (order.append("prime"), real())[1])

    @gnnmon.monitor_memory_device(label="train_step")
    def step(batch):
        order.append("step")

    graphs = [Data(x=torch.randn(n, 4), edge_index=torch.randint(0, n, (2, 2 * n))) for n in range(5, 105)]
    gnnmon.calibrate(step, DataLoader(graphs, batch_size=16), exact_host=False)
    assert order[:2] == ["prime", "step"] and order.count("prime") == 1


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc/self/statm")
def test_after_priming_a_fit_leaves_no_lasting_host_memory():
    import subprocess
    import sys

    code = ("import numpy\n"
            "from gnnmon.report.memory.model import prime\n"
            "from gnnmon.report import Report\n"
            "rss = lambda: int(open('/proc/self/statm').read().split()[1]) * 4096\n"
            "prime(); before = rss()\n"
            "rows = [{'label': 's', 'index': i, 'num_nodes': n, 'num_edges': 3 * n + i % 7,\n"
            "         'mem_peak_bytes': 1e8 + 1e3 * n + (i % 5) * 1e3} for i, n in enumerate(range(100, 4100, 100))]\n"
            "model = Report(rows).memory_model(figure='mem_peak_bytes', warmup=0)\n"
            "model.predict(num_nodes=8000, num_edges=24000)\n"
            "print(rss() - before)\n")
    grown = int(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                               cwd=__import__("tests.scripts", fromlist=["ROOT"]).ROOT).stdout.split()[-1])
    assert grown < 512 * 1024, f"a fit after prime() still kept {grown / MiB:.2f} MiB"


def test_a_probe_holds_only_the_batch_it_runs(fake_cuda):
    """A probe draws a few batches of the size it aims at and runs the heaviest: the others are
    freed before the step, so on the CPU (where a batch is host memory) they do not count in its
    peak. Every batch the loader builds is watched; during each step only the stepped one lives."""
    import gc
    import weakref

    loader = neighbor_loader(graph(), [5, 5], batch_size=64, shuffle=False)
    built: list[weakref.ref] = []
    make = loader.__call__

    def watched(index):
        batch = make(index)
        built.append(weakref.ref(batch))
        return batch

    loader.__call__ = watched  # type: ignore[method-assign]
    alive: list[int] = []
    inner = planted_step(fake_cuda)

    def step(batch):
        gc.collect()
        alive.append(sum(r() is not None for r in built))
        inner(batch)

    class Watched:  # calibrate calls the loader: route the call through the watch
        def __init__(self) -> None:
            self.__dict__.update({k: getattr(loader, k) for k in ("node_sampler", "collate_fn", "dataset",
                                                                  "batch_size")})

        def __call__(self, index):
            return watched(index)

    cal = gnnmon.calibrate(step, Watched(), capacity=256 * MiB)
    assert cal.search is not None and cal.search.probes, cal.summary()
    assert alive and max(alive) == 1, alive


def test_a_capacity_below_the_models_constant_says_nothing_fits(fake_cuda):
    dataset = FakeDataset(num_graphs=200, avg_num_nodes=40, avg_degree=6, num_channels=4)
    cal = gnnmon.calibrate(planted_step(fake_cuda), DataLoader(dataset, batch_size=16), capacity=32 * MiB)
    assert cal.search is not None and cal.search.batch_size == 0 and not cal.search.probes
    assert "nothing fits" in cal.search.stopped and "64" in cal.search.stopped  # the planted 64 MiB constant


def six_per_node(count: int, seed: int = 0) -> list[Data]:
    """Graphs of 20-60 nodes with exactly 6 edges a node: under the planted step a graph's cost
    grows with its nodes whatever the split between nodes and edges, so the costliest k graphs are
    the k largest under any model's weights, and the planted limit is one number."""
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(20, 61, (count,), generator=g).tolist()
    return [Data(x=torch.randn(n, 4, generator=g), edge_index=torch.randint(0, n, (2, 6 * n), generator=g))
            for n in sizes]


@pytest.mark.parametrize("capacity", [96 * MiB, 256 * MiB, 2 * 2**30])
def test_the_search_and_the_budget_agree_within_their_bounds(fake_cuda, capacity):
    """The planted step on the fake CUDA allocator over graphs: at a capacity where the limit is a
    few dozen graphs, one where it lies far beyond the calibration's batches, and one where every
    graph fits, the search's bracket and the budget's bounds (from the calibration's model, over the
    same largest graphs) both hold the planted limit, so they overlap; where every graph fits, both
    say so."""
    dataset = six_per_node(2000)
    loader = DataLoader(dataset, batch_size=16)
    costs = sorted((B * int(g.num_nodes) + C * int(g.num_edges) for g in dataset), reverse=True)
    truth = max(k for k in range(len(costs) + 1) if A + sum(costs[:k]) <= 0.9 * capacity)
    cal = gnnmon.calibrate(planted_step(fake_cuda), loader, capacity=capacity)
    found = cal.search
    assert found is not None and found.margin_bytes == 0  # an allocator's count: nothing it cannot resolve
    top = found.over - 1 if found.over is not None else len(dataset)
    assert found.batch_size <= truth <= top, (truth, found.summary())
    budget = gnnmon.forecast(loader, cal, capacity=capacity, progress=False).budget(0.9)
    assert budget.batch_size <= truth <= budget.batch_size_high, (truth, budget)
    assert budget.batch_size <= top and found.batch_size <= budget.batch_size_high  # the two agree
    if truth == len(dataset):
        assert found.batch_size == budget.batch_size == len(dataset), (found.summary(), budget)


def test_the_warm_up_runs_the_largest_size_so_the_fitted_rows_start_from_one_state(fake_cuda):
    """A planted step that keeps, for the rest of the process, 1 MiB for each graph of the largest
    batch it has run (an allocator's pool; on the host, a heap's high-water mark), on top of its
    transient 64 MiB + 2,048 B·nodes + 512 B·edges. The warm-up runs the largest size, so every
    fitted row starts holding the pool at its last size: the fit finds the planted costs (nothing
    per graph), the pool is in the constant: a small batch run afterwards is forecast to within 5 %
    of its growth. (A warm-up at the smallest size let the pool grow with the fitted sizes, a per-item
    cost of 1 MiB a graph in the fit, and forecast that batch several MiB under its peak.)"""
    dataset = FakeDataset(num_graphs=300, avg_num_nodes=40, avg_degree=6, num_channels=4)
    loader = DataLoader(dataset, batch_size=16)
    inner = planted_step(fake_cuda)
    pool: dict[str, int] = {"graphs": 0}
    handles: list[int] = []

    @gnnmon.monitor_memory_device(label="outer", device="cuda:0")
    def step(batch):
        if batch.num_graphs > pool["graphs"]:  # the pool grows to the largest batch, and stays
            handles.append(fake_cuda.alloc((batch.num_graphs - pool["graphs"]) * MiB, 0))
            pool["graphs"] = batch.num_graphs
        inner(batch)

    try:
        cal = gnnmon.calibrate(step, loader, label="outer")
        model = cal.model
        assert cal.sizes[0] == max(cal.sizes) == 32 and pool["graphs"] == 32  # the warm-up: the largest
        assert model.trusted, model.problems
        small = loader.collate_fn([dataset[i] for i in range(4)])
        with gnnmon.collect() as run:
            step(small)
        row = run.records[-1]
        truth = A + 32 * MiB + B * row["num_nodes"] + C * row["num_edges"]
        assert row["mem_peak_bytes"] == truth  # the fake allocator's count: the plant, exactly
        p = model.predict(**{t: row[t] for t in model.terms}, **{t: row[t] for t in model.confounded})
        # within 5 % of its growth (edges move with nodes: the model cannot split their costs, and
        # this batch's ratio is not the fitted rows'); a pool grown with the fitted sizes misses by MiBs
        assert p.bytes == pytest.approx(truth, abs=0.05 * (truth - A - 32 * MiB))
        assert truth <= p.upper_bytes
    finally:
        for h in handles:
            fake_cuda.free(h)
