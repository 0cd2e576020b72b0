"""A forecast made later in the process that fitted its model: the memory the device holds by then
beyond what it held at the fitted steps' start (a planted ballast) raises every forecast by exactly
that, never lowers one, and only where the model's rows are this process's."""

from __future__ import annotations

import os

import numpy as np
import psutil
import pytest
import torch

import gnnmon

pyg = pytest.importorskip("torch_geometric")

from gnnmon.integrations.pyg_sampler import neighbor_loader  # noqa: E402

# the planted step on the fake CUDA allocator: A + B·nodes + C·edges bytes above what the device holds
from tests.forecast.test_calibrate import A, B, C, graph, planted_step  # noqa: E402

MiB = 2**20


def rows(start: float, figure: str = "mem_peak_bytes", batch_per_node: float = 0.0, **extra) -> list[dict]:
    """60 planted rows of a step that peaks at start + A + B·nodes + C·edges (``figure``); the
    batch it receives, ``batch_per_node`` bytes a node, is held when it starts."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(60):
        n = int(rng.integers(500, 5000))
        e = int(n * rng.uniform(1, 6))
        out.append({"label": "step", "index": i, "error": None, "num_nodes": n, "num_edges": e,
                    "mem_start_bytes": start + batch_per_node * n, figure: start + A + B * n + C * e, **extra})
    return out


def model_of(rows: list[dict], pid: int | None = None, figure: str = "mem_peak_bytes"):
    return gnnmon.Report(rows, manifest={"pid": pid} if pid is not None else None).memory_model(figure=figure)


def test_a_model_knows_what_the_device_held_at_its_steps_start_and_anchoring_raises_never_lowers():
    model = model_of(rows(100 * MiB))
    assert model.start_bytes == 100 * MiB
    base = model.predict(num_nodes=4000, num_edges=20_000)
    raised = model.anchored(130 * MiB)
    assert raised.anchor_bytes == 30 * MiB and raised.start_bytes == 130 * MiB
    p = raised.predict(num_nodes=4000, num_edges=20_000)
    assert (p.bytes == pytest.approx(base.bytes + 30 * MiB)
            and p.upper_bytes == pytest.approx(base.upper_bytes + 30 * MiB))
    assert model.anchored(70 * MiB) is model  # holding less than during the fit lowers nothing
    assert raised.anchored(130 * MiB).anchor_bytes == 30 * MiB  # the same memory is counted once
    assert "raised by 30 MiB" in raised.summary() and raised.as_dict()["anchor_bytes"] == 30 * MiB


def test_the_memory_held_at_the_start_leaves_out_the_batch_the_step_receives():
    """A step starts holding its batch (2 KiB a node here); a forecast between steps holds none: the
    model's start is what the device held without it, so a forecast made then is not raised for it."""
    model = model_of(rows(100 * MiB, batch_per_node=2048))
    assert model.start_bytes == pytest.approx(100 * MiB, abs=1)
    assert model.anchored(100 * MiB) is model


def test_a_model_of_the_growth_cannot_be_anchored():
    model = model_of(rows(0.0, "mem_peak_delta_bytes"), figure="mem_peak_delta_bytes")
    assert model.start_bytes is None
    with pytest.raises(ValueError, match="does not know the memory held"):
        model.anchored(MiB)


def test_a_later_forecast_in_the_same_process_counts_a_ballast_the_device_holds(fake_cuda):
    loader = neighbor_loader(graph(), [10, 5], batch_size=64, shuffle=False)
    step = planted_step(fake_cuda)
    cal = gnnmon.calibrate(step, loader)
    assert cal.model.start_bytes == 0 and cal.model.pid == os.getpid()
    ballast = fake_cuda.alloc(100 * MiB, 0)  # a dataset moved to the device after calibrating
    try:
        torch.manual_seed(1)  # the same sampled batches in both scans
        plain = gnnmon.forecast(loader, cal, anchor=False, progress=False)
        torch.manual_seed(1)
        fc = gnnmon.forecast(loader, cal, progress=False)
        assert fc.model.anchor_bytes == 100 * MiB
        assert [w["batch"] for w in fc.worst] == [w["batch"] for w in plain.worst]
        for got, was in zip(fc.worst, plain.worst, strict=True):
            assert got["bytes"] == pytest.approx(was["bytes"] + 100 * MiB)
            assert got["upper_bytes"] == pytest.approx(was["upper_bytes"] + 100 * MiB)
        assert "raised by 100 MiB" in fc.summary()
        with gnnmon.collect() as run:
            for batch in loader:
                step(batch)
        for r in run.records:
            shape = {t: r[t] for t in cal.model.terms}
            assert r["mem_peak_bytes"] <= fc.model.predict(**shape).upper_bytes  # the anchored bound covers it
            assert r["mem_peak_bytes"] > cal.model.predict(**shape).upper_bytes  # the fitted one would not
        assert gnnmon.forecast(loader, cal, anchor=50 * MiB, progress=False).model.anchor_bytes == 50 * MiB
    finally:
        fake_cuda.free(ballast)


def test_auto_anchors_only_a_model_this_process_recorded():
    other = model_of(rows(100 * MiB), pid=os.getpid() + 1)
    shapes = [{"num_nodes": 4000, "num_edges": 20_000}]
    assert gnnmon.forecast(shapes, other, progress=False).model is other
    assert gnnmon.forecast(shapes, other, anchor=200 * MiB, progress=False).model.anchor_bytes == 100 * MiB
    with pytest.raises(ValueError, match="anchor must be"):
        gnnmon.forecast(shapes, other, anchor="yes", progress=False)


def test_on_the_cpu_a_later_forecast_counts_what_the_process_allocated_since():
    """The CPU's constant is the process's RSS: 96 MiB written after the fit's rows raise the
    forecast by about that (what else the process did in between moves it by a few MiB)."""
    here = float(psutil.Process().memory_info().rss)
    fitted = model_of(rows(here, device="cpu"), pid=os.getpid())
    ballast = np.ones(96 * MiB, dtype=np.uint8)  # every page written: RSS holds it
    fc = gnnmon.forecast([{"num_nodes": 4000, "num_edges": 20_000}], fitted, progress=False)
    assert 80 * MiB <= fc.model.anchor_bytes <= 112 * MiB, fc.model.anchor_bytes
    del ballast
