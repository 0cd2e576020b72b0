"""A refused model's next step for a peak the batch's shape explains little of is read from the run it
was fitted on: exact host memory is advised only where the manifest says it was not in force (or
nothing says), and a leak the run's report finds is named as what else moves the peak. Planted
rows: 60 calls in 6 epochs of 100-5,000 nodes at 1,000 bytes a node over 50 MiB, the peak scattered
either by a leak of 40 MiB an epoch (end-of-call memory climbing with it) or by up to 40 MiB drawn
uniformly a call (nothing held across calls)."""

from __future__ import annotations

import random
from typing import Any

import pytest

import gnnmon
from gnnmon.forecast.forecast import exact_in_force, next_steps
from gnnmon.report.memory.model import UntrustedModelError

MiB = 2**20
LEAK = 40 * MiB
"""Bytes a call's memory climbs each epoch in the leaking run."""

EXACT = "gnnmon.exact_host_memory() first thing"
"""The advice to make host memory exact (in every wording that advises it)."""


def rows(leak: float, device: str = "cpu") -> list[dict[str, Any]]:
    rng = random.Random(5)
    out = []
    for i in range(60):
        epoch, n = i // 10, rng.randint(100, 5000)
        held = 50 * MiB + leak * epoch
        out.append({"label": "s", "index": i, "error": None, "device": device, "backend": device.split(":")[0],
                    "epoch": epoch, "num_nodes": n, "num_edges": 3 * n, "wall_s": 0.01,
                    "t_start_ns": i * 20_000_000, "t_end_ns": i * 20_000_000 + 10_000_000,
                    "mem_start_bytes": held + rng.gauss(0, 64 * 1024), "mem_end_bytes": held + rng.gauss(0, 64 * 1024),
                    "mem_peak_bytes": held + 1000 * n + (0.0 if leak else rng.uniform(0, 40 * MiB))})
    return out


def run(leak: float, threshold: Any = "absent", device: str = "cpu") -> gnnmon.Report:
    """The planted run; ``threshold``: its manifest's host_memory mmap_threshold (65536: exact host
    memory in force, None: not, "absent": no host_memory recorded), recorded by another process."""
    manifest: dict[str, Any] = {"type": "manifest", "pid": -1, "devices": {"cpu_count": 2, "cpu_usable": 2}}
    if threshold != "absent":
        manifest["host_memory"] = {"mmap_threshold": threshold}
    return gnnmon.Report(rows(leak, device), manifest=manifest)


def scatter_step(report: gnnmon.Report) -> str:
    model = report.memory_model("s", "mem_peak_bytes", warmup=0)
    assert not model.trusted and "explains only" in model.problems[0], model.problems
    (step,) = next_steps(model, report)
    return step


def test_exact_host_memory_is_not_advised_where_the_manifest_says_it_was_in_force():
    """Scatter with nothing held across calls, exact host memory in force: no advice to call it, and
    the step says what else could move the peak; not in force: advised; not recorded: advised where
    the run did not call it."""
    step = scatter_step(run(0.0, 65536))
    assert "exact_host_memory() first" not in step and "call it first" not in step, step
    assert step.startswith("gnnmon.exact_host_memory() was in force (the run's manifest host_memory)"), step
    assert "measure the step alone" in step and "leak" not in step, step
    assert EXACT in scatter_step(run(0.0, None)) and "it was not in force" in scatter_step(run(0.0, None))
    assert "where the run did not call gnnmon.exact_host_memory()" in scatter_step(run(0.0))


def test_a_leak_the_report_finds_is_named_as_what_moves_the_peak():
    """The leaking run: its report's leak (40 MiB an epoch, as planted) is the next step, and with exact
    host memory in force nothing else is blamed on the allocator."""
    report = run(LEAK, 65536)
    (leak,) = [f for f in report.diagnosis() if f["kind"] == "leak"]
    step = scatter_step(report)
    assert step.startswith(f"the run's report finds its memory growing across epochs ({leak['words']})"), step
    assert "40 MiB per epoch" in step and leak["next"] in step, step
    assert "exact_host_memory" not in step, step
    assert EXACT in scatter_step(run(LEAK, None)), "not in force: advised beside the leak"


def test_a_device_models_scatter_is_not_sent_to_the_hosts_allocator():
    """A CUDA step's peak is its allocator's count: exact host memory is no remedy, whatever the manifest."""
    step = scatter_step(run(0.0, None, device="cuda:0"))
    assert "exact_host_memory" not in step and step.startswith("measure the step alone"), step


def test_forecast_given_the_run_refuses_with_its_step_and_without_it_says_the_condition():
    """gnnmon.forecast(batches, run) words the refusal from the run; a bare model, recorded by another
    process, cannot know and advises exact host memory only where the run did not call it."""
    report = run(0.0, 65536)
    with pytest.raises(UntrustedModelError) as refused:
        gnnmon.forecast([{"num_nodes": 100, "num_edges": 300}], report, progress=False)
    assert "next: gnnmon.exact_host_memory() was in force" in str(refused.value), refused.value
    model = report.memory_model("s", "mem_peak_bytes", warmup=0)
    assert exact_in_force(model) is None and exact_in_force(model, report) is True
    with pytest.raises(UntrustedModelError, match="where the run did not call gnnmon.exact_host_memory()"):
        gnnmon.forecast([{"num_nodes": 100, "num_edges": 300}], model, progress=False)


def test_a_model_this_process_recorded_reads_its_state_now(monkeypatch):
    """No manifest to say, but the rows are this process's (a calibration's refit): whether exact host
    memory is in force is read from the process."""
    import os

    from gnnmon.devices import malloc

    report = gnnmon.Report(rows(0.0), manifest={"type": "manifest", "pid": os.getpid()})
    model = report.memory_model("s", "mem_peak_bytes", warmup=0)
    for threshold, said in ((65536, True), (None, False)):
        monkeypatch.setattr(malloc, "_mmap_threshold", threshold)
        assert exact_in_force(model) is said
        assert (EXACT in next_steps(model)[0]) is not said, next_steps(model)
