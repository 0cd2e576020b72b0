"""torch.compile-aware rows (``@track_compile``) against a planted recompilation and a planted
graph break; gnnmon's decorators around compiled models (no graph break of gnnmon's making) and
inside compiled functions (traced as nothing: no graph break, no row). The ``eager`` backend
keeps Dynamo's work (guards, recompilations, graph breaks) without a C++ compiler's minutes."""

from __future__ import annotations

import pytest
import torch

import gnnmon
from gnnmon import cuda_timed, gc_controlled, monitor_memory_device, phase, track_compile

dynamo = pytest.importorskip("torch._dynamo")


def graph_breaks() -> int:
    return sum(dynamo.utils.counters["graph_break"].values())


def test_a_planted_recompilation_is_seen_in_its_row():
    """A compiled function called with a new shape is compiled again (a guard on the shape
    failed): that call's row says so; a call that reuses a compiled graph says 0."""
    compiled = torch.compile(lambda x: (x * 2).sum(), backend="eager", dynamic=False)

    @track_compile(label="step")
    @cuda_timed
    def step(x):
        return compiled(x)

    with gnnmon.collect() as run:
        for n in (3, 3, 5, 5):
            step(torch.ones(n))
    first, again, new_shape, reused = run.records
    assert first["compile_frames"] >= 1 and first["compile_recompiles"] == 0 and first["compile_s"] > 0
    assert first["compile_graphs"] >= 1
    assert again["compile_frames"] == 0 and again["compile_s"] == 0.0
    assert new_shape["compile_frames"] >= 1 and new_shape["compile_recompiles"] >= 1
    assert reused["compile_frames"] == 0 and reused["compile_recompiles"] == 0


def test_the_lazily_compiled_backward_is_in_compile_s():
    """AOTAutograd compiles a training step's backward at its first ``backward()``, outside the
    frame's compile timer: ``compile_s`` holds it, ``compile_backward_s`` names it, and a step that
    reuses both graphs says 0."""
    torch._dynamo.reset()
    model = torch.nn.Linear(8, 1)
    compiled = torch.compile(model, backend="aot_eager", dynamic=False)
    from torch._dynamo.utils import compilation_time_metrics

    @track_compile(label="step")
    def step(x):
        compiled(x).sum().backward()

    with gnnmon.collect() as run:
        before = len(compilation_time_metrics.get("backward._backward_impl", []))
        step(torch.ones(4, 8))
        planted = compilation_time_metrics["backward._backward_impl"][before:]
        step(torch.ones(4, 8))
    first, again = run.records
    assert len(planted) == 1 and first["compile_backward_s"] == pytest.approx(planted[0])
    assert first["compile_s"] > first["compile_backward_s"] > 0
    assert again["compile_s"] == again["compile_backward_s"] == 0.0


def test_a_planted_graph_break_is_counted_and_named():
    def body(x):
        y = x + 1
        torch._dynamo.graph_break()
        return y * 2

    compiled = torch.compile(body, backend="eager")

    @track_compile(label="step")
    def step(x):
        return compiled(x)

    with gnnmon.collect() as run:
        step(torch.ones(4))
        step(torch.ones(4))
    first, second = run.records
    assert first["compile_graph_breaks"] >= 1 and first["compile_graphs"] >= 2  # the graph was cut in two
    assert any(n.startswith("graph break: ") for n in first["notes"])
    assert second["compile_graph_breaks"] == 0 and second["compile_frames"] == 0


def test_decorators_around_a_compiled_model_cause_no_graph_break():
    model = torch.compile(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()), backend="eager")

    @monitor_memory_device
    @cuda_timed
    @gc_controlled
    @track_compile
    def step(x):
        with phase("forward"):
            out = model(x)
        with phase("backward"):
            out.sum().backward()
        return out

    before = graph_breaks()
    with gnnmon.collect() as run:
        for _ in range(3):
            step(torch.ones(2, 8))
    assert graph_breaks() == before
    rows = run.records
    assert rows[0]["compile_frames"] >= 1 and all(r["compile_frames"] == 0 for r in rows[1:])
    assert all(r["compile_graph_breaks"] == 0 and r["phase_forward_s"] > 0 for r in rows)


def test_a_compiled_decorated_function_is_traced_as_if_undecorated():
    """``torch.compile(decorated_step)``: Dynamo traces through gnnmon's wrapper and phases as
    nothing (``torch.compiler.is_compiling()``): no graph break of gnnmon's making and no row; the
    result is the step's own. To measure a compiled step, decorate the function that calls it."""
    @cuda_timed(label="inside")
    def step(x):
        with phase("forward"):
            y = x * 3
        return y + 1

    compiled = torch.compile(step, backend="eager")
    before = graph_breaks()
    with gnnmon.collect() as run:
        out = compiled(torch.ones(4))
        out = compiled(torch.ones(4))
    assert torch.equal(out, torch.full((4,), 4.0))
    assert graph_breaks() == before
    assert run.records == []

    @cuda_timed(label="outside")
    def measured(x):
        return compiled(x)

    with gnnmon.collect() as run:
        measured(torch.ones(4))
    (row,) = run.records
    assert row["label"] == "outside" and row["device_s"] is not None


def test_a_slow_row_with_a_compilation_is_a_recompile_spike():
    rows = [{"label": "step", "index": i, "device_s": 0.01, "compile_frames": 0} for i in range(12)]
    rows[0].update(device_s=2.0, compile_frames=3, compile_recompiles=0, compile_s=1.9, compile_graph_breaks=1)
    rows[7].update(device_s=0.5, compile_frames=1, compile_recompiles=1, compile_s=0.45, compile_graph_breaks=0)
    found = {s["index"]: s for s in gnnmon.Report(rows).spikes()}
    assert found[0]["cause"] == "recompile"  # ahead of warm-up: the first call is slow because it compiled
    assert found[7]["cause"] == "recompile" and "1 recompiled" in found[7]["detail"]
    assert "450 ms compiling" in found[7]["detail"]


def test_without_dynamo_loaded_the_figures_are_zero(monkeypatch):
    import sys

    from gnnmon.measure import compile as compile_module

    monkeypatch.delitem(sys.modules, "torch._dynamo.utils")

    @track_compile
    def step():
        return 1

    with gnnmon.collect() as run:
        assert step() == 1
    (row,) = run.records
    assert (row["compile_frames"], row["compile_recompiles"], row["compile_s"]) == (0, 0, 0.0)
    assert compile_module.snapshot() is None
