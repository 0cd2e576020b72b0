"""The memory model: a step's peak against its batch's shape. Steps hold tensors of a planted
``a + b·nodes + c·edges`` bytes over batches of varying shape (on the CPU with exact_host_memory(),
on the fake CUDA allocator, and as plain rows with noise, warm-up rows and outliers); the fit must
find a, b and c and predict a held-out batch within 5 %, and say when it cannot be trusted."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

import gnnmon
from gnnmon.data.table import Table
from gnnmon.report.memory.model import (
    HEAP_SLACK_BYTES,
    UntrustedModelError,
    fit,
    format_bytes,
    host_resolution,
    rss_counter_lag,
)
from tests.scripts import ROOT

MiB = 2**20
A, B, C = 48 * MiB, 1900, 600  # bytes, bytes per node, bytes per edge


def planted_rows(n: int = 120, noise: float = 64 * 1024, seed: int = 0) -> list[dict]:
    """Rows of a step whose peak is A + B·nodes + C·edges plus gaussian noise; the first two calls
    (warm-up) three times higher, two outliers 200 MiB higher, one failed call."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        nodes = rng.randint(1_000, 20_000)
        edges = rng.randint(2 * nodes, 10 * nodes)
        peak = A + B * nodes + C * edges + rng.gauss(0, noise)
        if i < 2:
            peak *= 3
        if i in (40, 77):
            peak += 200 * MiB
        rows.append({"label": "step", "index": i, "error": "ValueError" if i == 90 else None, "device": "cuda:0",
                     "num_nodes": nodes, "num_edges": edges, "num_graphs": 1, "mem_peak_delta_bytes": peak,
                     "mem_peak_bytes": peak + 300 * MiB})
    if n > 90:
        rows[90]["mem_peak_delta_bytes"] = 10 * 2**30  # a failed call's figure must not count
    return rows


def close(got: float, want: float, rel: float = 0.05) -> bool:
    return abs(got - want) <= rel * abs(want)


def test_the_planted_coefficients_come_back_despite_warm_up_outliers_and_a_failed_call():
    model = gnnmon.Report(planted_rows()).memory_model()
    assert model.trusted, model.problems
    assert model.label == "step" and model.terms == ("num_nodes", "num_edges")
    assert close(model.coefficients["const"], A) and close(model.coefficients["num_nodes"], B)
    assert close(model.coefficients["num_edges"], C)
    assert model.outliers == 2 and model.rows == 120 - 2 - 1 - 2
    assert model.units() == {"const": "bytes", "num_nodes": "bytes/node", "num_edges": "bytes/edge"}
    assert any("num_graphs left out" in n for n in model.notes)
    held_out = model.predict(num_nodes=15_000, num_edges=90_000)
    assert close(held_out.bytes, A + B * 15_000 + C * 90_000, 0.01) and not held_out.extrapolated
    assert held_out.upper_bytes > held_out.bytes
    text = model.summary()
    assert re.search(r"≈ 1\.8\d KiB per node \+ 60\d B per edge \+ 4[78]\.?\d* MiB \(r² 1\.000 over 115 rows, "
                     r"2 outliers left out", text), text
    absolute = gnnmon.Report(planted_rows()).memory_model(figure="mem_peak_bytes")
    assert close(absolute.coefficients["const"], A + 300 * MiB)


def test_the_upper_bound_covers_about_its_confidence_of_new_steps():
    model = gnnmon.Report(planted_rows(noise=2 * MiB)).memory_model(confidence=0.9)
    fresh = [r for r in planted_rows(n=400, noise=2 * MiB, seed=1)[2:] if r["index"] not in (40, 77, 90)]
    under = sum(r["mem_peak_delta_bytes"] <= model.predict(num_nodes=r["num_nodes"],
                                                           num_edges=r["num_edges"]).upper_bytes for r in fresh)
    assert 0.85 <= under / len(fresh) <= 0.97
    far = model.predict(num_nodes=200_000, num_edges=2_000_000)
    near = model.predict(num_nodes=10_000, num_edges=50_000)
    assert far.extrapolated and far.upper_bytes - far.bytes > near.upper_bytes - near.bytes


def test_a_model_that_cannot_be_trusted_says_why_and_predicts_nothing():
    flat = [dict(r, num_nodes=3000, num_edges=12_000) for r in planted_rows()]
    model = gnnmon.Report(flat).memory_model()
    assert not model.trusted and "barely vary" in model.problems[0]
    assert "no trustworthy model" in model.summary()
    with pytest.raises(UntrustedModelError, match="barely vary"):
        model.predict(num_nodes=3000, num_edges=12_000)
    few = gnnmon.Report(planted_rows(n=9)).memory_model()
    assert any("too few rows" in p for p in few.problems)
    curved = [dict(r, mem_peak_delta_bytes=50.0 * r["num_nodes"] ** 2) for r in planted_rows()]
    assert any("curves with num_nodes" in p for p in gnnmon.Report(curved).memory_model().problems)
    noisy = [dict(r, mem_peak_delta_bytes=random.Random(r["index"]).uniform(0, 500 * MiB)) for r in planted_rows()]
    assert any("explains only" in p for p in gnnmon.Report(noisy).memory_model().problems)


def test_bad_questions_get_named_errors():
    report = gnnmon.Report(planted_rows())
    with pytest.raises(ValueError, match="figure must be one of"):
        report.memory_model(figure="wall_s")
    with pytest.raises(ValueError, match="no rows labelled 'train'.*step"):
        report.memory_model("train")
    with pytest.raises(ValueError, match="needs num_edges"):
        report.memory_model().predict(num_nodes=10)
    mixed = planted_rows() + [dict(r, device="cpu", index=r["index"] + 200) for r in planted_rows()]
    with pytest.raises(ValueError, match="ran on cpu, cuda:0: pass device="):
        gnnmon.Report(mixed).memory_model()
    assert gnnmon.Report(mixed).memory_model(device="cpu").trusted
    with pytest.raises(ValueError, match="no label's rows carry both"):
        gnnmon.Report([{"label": "x", "index": 0, "wall_s": 1.0}]).memory_model()


def test_per_type_terms_for_a_heterogeneous_batch():
    rng = random.Random(3)
    rows = []
    for i in range(60):
        papers, authors = rng.randint(1000, 9000), rng.randint(1000, 9000)
        cites = rng.randint(2 * papers, 6 * papers)
        rows.append({"label": "step", "index": i, "error": None, "num_nodes": papers + authors, "num_edges": cites,
                     "num_nodes__paper": papers, "num_nodes__author": authors,
                     "num_edges__paper__cites__paper": cites,
                     "mem_peak_delta_bytes": 5 * MiB + 4096 * papers + 256 * authors + 300 * cites})
    model = gnnmon.Report(rows).memory_model()  # the totals cannot tell a paper from an author
    assert set(model.terms) == {"num_nodes__paper", "num_nodes__author", "num_edges__paper__cites__paper"}
    assert close(model.coefficients["num_nodes__paper"], 4096) and close(model.coefficients["num_nodes__author"], 256)
    assert "per paper node" in model.summary() and any(
        n.startswith("per-type terms, as the totals' fit cannot be trusted (the batch shape explains only r²")
        for n in model.notes), model.notes


def test_on_the_fake_cuda_allocator(fake_cuda):
    from torch_geometric.data import Data

    @gnnmon.monitor_memory_device(device="cuda:0")
    def step(batch):
        handles = [fake_cuda.alloc(A, 0), fake_cuda.alloc(B * batch.num_nodes, 0),
                   fake_cuda.alloc(C * batch.num_edges, 0)]
        for h in handles:
            fake_cuda.free(h)

    keep = fake_cuda.alloc(100 * MiB, 0)  # the model's weights: in the absolute peak only
    rng = random.Random(5)
    with gnnmon.collect() as run:
        for _ in range(30):
            n = rng.randint(1000, 30_000)
            step(Data(x=torch.empty(n, 1), edge_index=torch.empty(2, rng.randint(n, 8 * n), dtype=torch.long)))
    fake_cuda.free(keep)
    model = run.report().memory_model(figure="mem_peak_bytes")
    assert model.devices == ["cuda:0"] and model.rows == 28
    assert close(model.coefficients["const"], A + 100 * MiB, 0.001)
    assert close(model.coefficients["num_nodes"], B, 0.001) and close(model.coefficients["num_edges"], C, 0.001)


CPU_STEPS = r"""
import json, random, sys, torch, gnnmon
from torch_geometric.data import Data
sys.path.insert(0, sys.argv[1])
assert gnnmon.exact_host_memory()
A, B, C = 128 << 20, 8192, 2048

@gnnmon.monitor_memory_device
def step(batch):
    held = [torch.empty(size, dtype=torch.uint8).fill_(1)
            for size in (A, B * batch.num_nodes, C * batch.num_edges)]
    del held

rng = random.Random(7)
with gnnmon.collect() as run:
    for _ in range(24):
        n = rng.randint(2_000, 20_000)
        step(Data(x=torch.empty(n, 1), edge_index=torch.empty(2, rng.randint(2 * n, 5 * n), dtype=torch.long)))
m = run.report().memory_model()
print(json.dumps({"trusted": m.trusted, "problems": m.problems, "coefficients": m.coefficients,
                  "held_out": m.predict(num_nodes=15_000, num_edges=60_000).bytes}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="exact host memory is Linux's")
def test_on_the_cpu_with_exact_host_memory():
    """In a fresh process (glibc here may serve the tensors from pages earlier tests freed)."""
    out = subprocess.run([sys.executable, "-c", CPU_STEPS, str(ROOT)], capture_output=True, text=True,
                         check=True, timeout=300).stdout
    got = json.loads(out)
    a, b, c = 128 * MiB, 8192, 2048
    assert got["trusted"], got["problems"]
    assert close(got["coefficients"]["num_nodes"], b) and close(got["coefficients"]["num_edges"], c)
    # 128 MiB: 5 % of it outweighs RSS counter slack even on many cores (tests/devices/test_memory_cpu.py)
    assert close(got["coefficients"]["const"], a)
    assert close(got["held_out"], a + b * 15_000 + c * 60_000)


def test_bytes_are_shown_in_binary_units():
    assert [format_bytes(x) for x in (0, 600, 1900, 48 * MiB, 3.5 * 2**30, -12 * MiB)] == [
        "0 B", "600 B", "1.86 KiB", "48 MiB", "3.5 GiB", "-12 MiB"]


def sampled_rows(n: int = 40, seed: int = 5) -> list[dict]:
    """Sampled batches (a NeighborLoader's): 1.4-1.7 edges per node in every row, so nodes and
    edges move together, of a step whose peak is 400 MiB + 8 KiB·nodes + 3 KiB·edges."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        nodes = rng.randint(5_000, 40_000)
        edges = int(nodes * rng.uniform(1.4, 1.7))
        peak = 400 * MiB + 8192 * nodes + 3072 * edges + rng.gauss(0, 256 * 1024)
        rows.append({"label": "train_step", "index": i, "error": None, "device": "cuda:0", "num_nodes": nodes,
                     "num_edges": edges, "num_graphs": 1, "mem_peak_bytes": peak})
    return rows


def test_fields_that_move_together_are_reported_and_a_batch_off_their_ratio_is_bounded_safely():
    """Nodes and edges move together: the model keeps one, says which split it cannot identify,
    predicts the sampled batches it saw within 2 %, and a full-batch step (16 edges per node:
    off the ratio) gets an upper bound at or above its planted truth, never a negative forecast."""
    model = gnnmon.Report(sampled_rows()).memory_model(figure="mem_peak_bytes")
    assert model.trusted and model.terms == ("num_nodes",)
    split = model.confounded["num_edges"]
    assert split["with"] == "num_nodes" and 1.39 <= split["ratio"][0] < split["ratio"][1] <= 1.71
    assert all(c >= 0 for t, c in model.coefficients.items() if t != "const")
    assert "num_edges moves with num_nodes" in model.summary() and "cannot be told apart" in model.summary()
    seen = model.predict(num_nodes=20_000, num_edges=31_000)
    assert close(seen.bytes, 400 * MiB + 8192 * 20_000 + 3072 * 31_000, 0.02) and not seen.extrapolated
    nodes, edges = 100_000, 1_600_000  # the whole graph in one step
    truth = 400 * MiB + 8192 * nodes + 3072 * edges
    full = model.predict(num_nodes=nodes, num_edges=edges)
    assert full.extrapolated and full.bytes >= model.coefficients["const"] > 0
    assert full.upper_bytes >= truth


def twins_rows(seed: int, density: float = 2.5) -> list[dict]:
    """calibrate's rows of a sampled step on the fake GPU: a warm-up and 3 batches at each of 1/4 to
    2 times 3,840 nodes at 1.4-1.7 edges a node, and 3 denser twins (0.5, 1 and 2 times) at
    ``density`` edges a node (within 10 %); peak 50 MiB + 2,000 bytes a node + 3,000 an edge, with
    gaussian noise of 4 KiB."""
    rng = random.Random(seed)
    sizes = [2.0] + [m for m in (0.25, 0.5, 0.75, 1, 1.25, 1.5, 2.0) for _ in range(3)]
    shapes = []
    for m in sizes:
        nodes = int(15 * m * 256 * rng.uniform(0.95, 1.05))
        shapes.append((nodes, int(nodes * rng.uniform(1.4, 1.7))))
    for m in (0.5, 1, 2):
        nodes = int(15 * m * 256 * rng.uniform(0.95, 1.05))
        shapes.append((nodes, int(nodes * density * rng.uniform(0.9, 1.1))))
    return [{"label": "s", "index": i, "error": None, "device": "cuda:0", "num_nodes": n, "num_edges": e,
             "mem_peak_bytes": 50 * MiB + 2_000 * n + 3_000 * e + rng.gauss(0, 4096)}
            for i, (n, e) in enumerate(shapes)]


@pytest.mark.parametrize("seed", range(20))
def test_denser_twins_tell_an_edge_from_a_node(seed):
    """Three twins at 2.5 edges a node beside batches at 1.4-1.7 set the edges' values apart from
    the nodes' (correlation under 0.95) though their sizes fall among the others' (ranks' over
    0.95): on ranks alone the edges were confounded in 34 of 50 seeds, so calibrate measured no
    edge. Now the edges are a term in every seed, each coefficient within 5 of its standard
    errors under the planted noise (a chance of 6e-7 each to be further)."""
    rows = twins_rows(seed)
    model = fit(Table(rows), "s", "mem_peak_bytes", warmup=1)
    assert model.trusted and model.terms == ("num_nodes", "num_edges") and not model.confounded, model.summary()
    assert model.outliers == 0
    x = np.array([[1.0, r["num_nodes"], r["num_edges"]] for r in rows[1:]])
    se = 4096 * np.sqrt(np.diag(np.linalg.inv(x.T @ x)))
    for (term, want), s in zip({"const": 50 * MiB, "num_nodes": 2_000, "num_edges": 3_000}.items(), se, strict=True):
        assert abs(model.coefficients[term] - want) <= 5 * s, (term, model.coefficients[term], s)


def test_no_coefficient_is_negative_and_no_forecast_below_the_constant():
    """A peak that does not grow with edges, on batches where edges vary on their own, plus noise
    that tilts an unconstrained fit below 0 per edge: the edge term is held at 0 (and said so),
    and no shape, however small, is forecast below the constant."""
    rng = random.Random(11)
    rows = []
    for i in range(60):
        nodes, edges = rng.randint(1_000, 20_000), rng.randint(1_000, 200_000)
        peak = 400 * MiB + 12_288 * nodes - 40 * edges + rng.gauss(0, 2 * MiB)  # a planted tilt
        rows.append({"label": "s", "index": i, "error": None, "num_nodes": nodes, "num_edges": edges,
                     "mem_peak_bytes": peak})
    model = gnnmon.Report(rows).memory_model(figure="mem_peak_bytes")
    assert model.coefficients["num_edges"] == 0.0
    assert any("num_edges: an unconstrained fit gives -" in n and "held at 0" in n for n in model.notes)
    for nodes, edges in [(1, 1), (0, 0), (500, 10**7)]:
        assert model.predict(num_nodes=nodes, num_edges=edges).bytes >= model.coefficients["const"]


def test_a_batch_ten_times_the_largest_fitted_one_is_forecast_at_95_percent_of_its_truth_or_more():
    """The issue's bar: a step of planted ``a + b·nodes + c·edges`` over batches whose edges stay
    within 5 % of 1.5 × nodes; a batch ten times the largest fitted one, at that ratio, is forecast
    at 95 % of its planted truth or more (and its upper bound covers it); at 16 edges per node (off
    the ratio) the upper bound covers it too. No coefficient is negative."""
    rng = random.Random(8)
    a, b, c = 200 * MiB, 6_000, 2_500
    rows = []
    for i in range(40):
        nodes = rng.randint(2_000, 20_000)
        edges = int(1.5 * nodes * rng.uniform(0.95, 1.05))
        rows.append({"label": "s", "index": i, "error": None, "num_nodes": nodes, "num_edges": edges,
                     "mem_peak_bytes": a + b * nodes + c * edges + rng.gauss(0, 512 * 1024)})
    model = gnnmon.Report(rows).memory_model(figure="mem_peak_bytes")
    assert model.trusted and all(v >= 0 for v in model.coefficients.values())
    nodes = 10 * max(r["num_nodes"] for r in rows)
    for edges in (int(1.5 * nodes), 16 * nodes):
        truth = a + b * nodes + c * edges
        p = model.predict(num_nodes=nodes, num_edges=edges)
        assert p.extrapolated and p.upper_bytes >= truth
        if edges == int(1.5 * nodes):
            assert p.bytes >= 0.95 * truth


def test_the_upper_bound_beyond_the_fitted_shapes_widens_by_the_error_the_rows_showed():
    """A peak that grows a little faster than linearly (``a + b·n + k·n²``, as allocator rounding
    and workspaces make it): within the rows the linear fit is trusted and close, beyond them it is
    low. Fitting the smaller rows and forecasting the larger ones measures how fast the error grows;
    the upper bound at 2x and 4x the largest fitted batch covers the planted truth, where the
    residual spread alone did not, and within the rows nothing is widened."""
    rng = random.Random(3)
    a, b, k = 300 * MiB, 8_000, 0.05  # bytes, bytes per node, bytes per node²
    truth = lambda n: a + b * n + k * n * n  # noqa: E731
    rows = []
    for i in range(60):
        nodes = rng.randint(1_000, 10_000)
        rows.append({"label": "s", "index": i, "error": None, "num_nodes": nodes, "num_edges": 3 * nodes,
                     "mem_peak_bytes": truth(nodes) + rng.gauss(0, 128 * 1024)})
    model = gnnmon.Report(rows).memory_model(figure="mem_peak_bytes", terms=["num_nodes"])
    assert model.trusted, model.problems
    grow = model.extrapolation
    assert grow is not None and grow.curvature and grow.checked_rows >= 3
    for factor in (2, 4):
        nodes = factor * 10_000
        p = model.predict(num_nodes=nodes)
        assert p.bytes < truth(nodes)  # the linear fit alone is low beyond the rows
        assert p.upper_bytes - p.widened_bytes < truth(nodes) <= p.upper_bytes
    inside = model.predict(num_nodes=5_000)
    assert inside.widened_bytes == 0 and inside.upper_bytes >= truth(5_000)
    assert ("upper bound widens, by" in model.summary()
            and model.as_dict()["extrapolation"]["curvature_bytes"] == grow.curvature)


def test_a_model_whose_rows_span_no_sizes_says_its_extrapolation_is_not_measured():
    rows = [{"label": "s", "index": i, "error": None, "num_nodes": n, "num_edges": 2 * n,
             "mem_peak_bytes": 100 * MiB + 5_000 * n + (i % 3) * 1024}
            for i, n in enumerate([9_000 + 50 * (j % 20) for j in range(40)])]
    model = gnnmon.Report(rows).memory_model(figure="mem_peak_bytes", terms=["num_nodes"])
    assert model.extrapolation is not None and model.extrapolation.curvature is None
    assert "not measured" in model.summary()


def test_a_host_model_holds_what_rss_cannot_resolve_in_every_upper_bound():
    """The same rows as a CPU step's and as a GPU step's: the same fit, and the host's bounds hold
    :func:`host_resolution` more (the heap's slack and the kernel's per-CPU counters' lag, twice,
    for the recording machine's CPUs and those its process could use: the manifest's, else this
    machine's); a GPU's hold nothing more."""
    gpu = planted_rows()
    cpu = [{**r, "device": "cpu"} for r in gpu]
    shape = {"num_nodes": 15_000, "num_edges": 90_000}
    page = os.sysconf("SC_PAGE_SIZE")
    lag = lambda on, n: 3 * on * max(32, 2 * n) * page  # noqa: E731  three counters, a batch a CPU each
    cases = [(2, None, 256 * 1024 + 2 * lag(2, 2)), (16, None, 256 * 1024 + 2 * lag(16, 16)),
             (16, 4, 256 * 1024 + 2 * lag(4, 16)), (None, None, host_resolution())]
    for cpus, usable, want in cases:
        host = fit(Table(cpu), "step", "mem_peak_bytes", cpus=cpus, usable=usable)
        device = fit(Table(gpu), "step", "mem_peak_bytes", cpus=cpus, usable=usable)
        assert host.coefficients == device.coefficients and device.resolution_bytes == 0
        assert host.resolution_bytes == want == host.predict(**shape).resolution_bytes
        assert abs(host.predict(**shape).upper_bytes - device.predict(**shape).upper_bytes - want) <= 1
        assert host.as_dict()["resolution_bytes"] == want
    if page == 4096:  # the figures the docs give
        assert [host_resolution(c, u) for c, u, _ in cases[:3]] == [1.75 * MiB, 12.25 * MiB, 3.25 * MiB]
    # the host's RSS figures are the host's on any device
    rss = [{**r, "rss_peak_bytes": r["mem_peak_bytes"]} for r in gpu]
    assert fit(Table(rss), "step", "rss_peak_bytes", cpus=2).resolution_bytes == host_resolution(2)
    with gnnmon.collect() as run:  # a run's manifest names its machine's CPUs and the process's
        pass
    machine = run.manifest["devices"]
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert machine["cpu_count"] == os.cpu_count() and machine["cpu_usable"] == usable
    on_16 = gnnmon.Report(cpu, manifest={**run.manifest, "devices": {**machine, "cpu_count": 16, "cpu_usable": 4}})
    assert on_16.memory_model(figure="mem_peak_bytes").resolution_bytes == host_resolution(16, 4)
    assert f"{format_bytes(host_resolution(2))} of it what the host's RSS cannot resolve" in fit(
        Table(cpu), "step", cpus=2).summary()
    assert "cannot resolve" not in device.summary()


def test_rows_within_what_rss_cannot_resolve_are_never_outliers():
    """Exact rows of a CPU step on 2 CPUs, the two with most edges off by 0.6 of the host's
    resolution either way (the kernel's RSS counters lag by that much) and one 10 resolutions off:
    only that one is left out, and the largest batches stay in the fit the forecast leans on. The
    same rows of a GPU step (counted exactly) leave all three out."""
    rng = random.Random(3)
    res = host_resolution(2)
    rows = []
    for i in range(40):
        nodes = rng.randint(1_000, 20_000)
        edges = rng.randint(2 * nodes, 10 * nodes)
        rows.append({"label": "step", "index": i, "error": None, "device": "cpu", "num_nodes": nodes,
                     "num_edges": edges, "mem_peak_bytes": A + B * nodes + C * edges + rng.gauss(0, 1024)})
    rows[20]["mem_peak_bytes"] += 10 * res
    first, second = sorted(range(2, 40), key=lambda i: rows[i]["num_edges"])[-2:]  # after the warm-up
    rows[first]["mem_peak_bytes"] += 0.6 * res
    rows[second]["mem_peak_bytes"] -= 0.6 * res
    host = fit(Table(rows), "step", "mem_peak_bytes", cpus=2)
    assert host.resolution_bytes == res and host.outliers == 1
    assert host.ranges["num_edges"][1] == rows[second]["num_edges"]
    device = fit(Table([{**r, "device": "cuda:0"} for r in rows]), "step", "mem_peak_bytes", cpus=2)
    assert device.outliers == 3 and device.ranges["num_edges"][1] < rows[first]["num_edges"]


@pytest.mark.parametrize("cpus", [64, 128])
def test_on_a_many_core_host_a_gross_error_at_the_largest_batch_is_still_left_out(cpus):
    """The floor that keeps rows within the host's resolution in is capped at a 2-CPU host's
    (OUTLIER_FLOOR_CAP_BYTES): the worst case on 64 CPUs is 192 MiB, and the row with most edges
    60 MiB high (a warm-up's excess) stayed in and bent the fit to 2,418 bytes a node for 3,000.
    The plant: 200 MiB + 3,000 bytes a node + 400 an edge, gaussian noise of 300 KiB; that row is
    the only one left out and each coefficient comes back within 5 of its standard errors under the
    noise (a chance of 6e-7 each to be further), from the kept rows' design alone."""
    rng = random.Random(1)
    noise, const, node, edge = 300 * 1024, 200 * MiB, 3_000, 400
    rows = []
    for i in range(40):
        nodes = rng.randint(2_000, 20_000)
        edges = rng.randint(3 * nodes, 8 * nodes)
        rows.append({"label": "s", "index": i, "error": None, "device": "cpu", "num_nodes": nodes,
                     "num_edges": edges, "rss_peak_delta_bytes": const + node * nodes + edge * edges
                     + rng.gauss(0, noise)})
    big = max(range(2, 40), key=lambda i: rows[i]["num_edges"])  # after the 2 warm-up calls
    rows[big]["rss_peak_delta_bytes"] += 60 * MiB
    model = fit(Table(rows), "s", "rss_peak_delta_bytes", cpus=cpus)
    assert model.resolution_bytes == host_resolution(cpus) >= 192 * MiB  # every upper bound still holds it all
    assert model.trusted and model.outliers == 1, model.summary()
    assert model.ranges["num_edges"][1] < rows[big]["num_edges"]  # the row left out is the planted one
    kept = [r for i, r in enumerate(rows) if i >= 2 and i != big]
    x = np.array([[1.0, r["num_nodes"], r["num_edges"]] for r in kept])
    se = noise * np.sqrt(np.diag(np.linalg.inv(x.T @ x)))
    for (term, want), s in zip({"const": const, "num_nodes": node, "num_edges": edge}.items(), se, strict=True):
        assert abs(model.coefficients[term] - want) <= 5 * s, (term, model.coefficients[term], s)


def test_a_cpu_out_of_memory_is_bounded_with_the_recording_machine_s_resolution():
    """The post-mortem's forecast for a failed CPU call: its upper bound holds the resolution of
    the machine the run's manifest names, not of the machine reading it."""
    rows = [{**r, "device": "cpu"} for r in planted_rows()]
    rows.append({**rows[10], "index": len(rows), "error": "OutOfMemoryError", "num_nodes": 30_000,
                 "num_edges": 150_000, "oom_requested_bytes": 64 * MiB})
    uppers = {}
    for cpus in (2, 16):
        report = gnnmon.Report(rows, manifest={"devices": {"cpu_count": cpus, "cpu_usable": cpus}})
        [oom] = report.oom()
        uppers[cpus] = oom["forecast_upper_bytes"]
        assert oom["forecast_upper_bytes"] - oom["forecast_bytes"] >= host_resolution(cpus, cpus)
    assert abs(uppers[16] - uppers[2] - (host_resolution(16, 16) - host_resolution(2, 2))) <= 1


def test_the_heap_slack_is_what_exact_host_memory_lets_glibc_keep():
    from gnnmon.devices.malloc import TOP_PAD_BYTES, TRIM_THRESHOLD_BYTES

    assert HEAP_SLACK_BYTES == TRIM_THRESHOLD_BYTES + TOP_PAD_BYTES


HEAP_TOP = r"""
import ctypes, json, os
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.free(libc.malloc(8 << 20))  # a freed 8 MiB mapping: glibc's dynamic trim threshold is now 16 MiB
import gnnmon
assert gnnmon.exact_host_memory()
page = os.sysconf("SC_PAGE_SIZE")
# Read by pread on a file opened once, and the list made first: nothing of the test's own that lasts
# lands above the blocks (an open() read left an 80-byte chunk at the heap's top, and glibc trims the
# top alone: whether any was returned then hung on where import's frees had left room for it)
fd = os.open("/proc/self/statm", os.O_RDONLY)
rss = lambda: int(os.pread(fd, 128, 0).split()[1]) * page
blocks = [0] * 320
before = rss()
for i in range(320):
    blocks[i] = libc.malloc(32 << 10)  # 10 MiB in 32 KiB blocks: below the mmap threshold
for b in blocks:
    ctypes.memset(b, 1, 32 << 10)
held = rss()
for b in reversed(blocks):
    libc.free(b)
print(json.dumps({"held": held - before, "left": rss() - before}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_exact_host_memory_gives_back_what_a_step_frees_on_the_heap_whatever_came_before():
    """10 MiB freed in 32 KiB blocks (on the heap, under the mmap threshold) after an 8 MiB mapping
    was freed before the call (which raises glibc's trim threshold to 16 MiB): the process gives
    all of it back but what :func:`host_resolution` allows."""
    got = json.loads(subprocess.run([sys.executable, "-c", HEAP_TOP], capture_output=True, text=True, check=True,
                                    timeout=120).stdout)
    assert got["held"] >= 10 * MiB - rss_counter_lag()
    assert got["left"] <= host_resolution(), got


HEAP_STATES = r"""
import json, random, sys, torch, gnnmon
assert gnnmon.exact_host_memory()
keep, rng = [], random.Random(int(sys.argv[1]))
weights = torch.nn.Linear(256, 256)

@gnnmon.monitor_memory_device(label="step")
def step(x):
    planted = torch.empty(4 << 20, dtype=torch.uint8).fill_(1)  # 4 MiB, alive through the step
    weights(x).relu().sum().backward()  # tensors of 64 KiB and more, with Python and small blocks beside
    del planted

x = torch.randn(512, 256)
growth = []
with gnnmon.collect() as run:
    for state in range(30):  # what a loop leaves between steps: objects kept, small and large, others freed
        made = [bytearray(rng.choice([64, 512, 4096, 30_000])) for _ in range(rng.randint(0, 400))]
        keep.extend(made[::rng.randint(1, 5)])
        made = [torch.randn(rng.randint(10, 5000)) for _ in range(rng.randint(0, 50))]
        keep.extend(made[::7])
        del made
        for _ in range(3):
            step(x)
            row = run.records[-1]
            growth.append(row["mem_peak_bytes"] - row["mem_start_bytes"])
print(json.dumps({"growth": growth[3:], "cpus": run.manifest["devices"]["cpu_count"],
                  "usable": run.manifest["devices"]["cpu_usable"]}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="exact host memory is Linux's")
def test_the_same_step_between_heap_states_moves_within_the_host_resolution():
    """The planted truth behind :func:`host_resolution`: one step on one input, between heap states
    a training loop leaves (objects of 64 B to 30 KB kept and freed, tensors too), grows the
    process's RSS by the same amount each time to within it, and by at least the 4 MiB planted in it
    and the 1 MiB of activations beside it (two 512×256 float32) to within it."""
    for seed in (0, 1):
        out = subprocess.run([sys.executable, "-c", HEAP_STATES, str(seed)], capture_output=True,
                             text=True, check=True, timeout=300).stdout
        got = json.loads(out)
        growth, slack = got["growth"], host_resolution(got["cpus"], got["usable"])
        assert max(growth) - min(growth) <= slack, (max(growth) - min(growth), slack)
        assert min(growth) >= 5 * MiB - slack, min(growth)
