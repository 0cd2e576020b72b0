"""Opt-in profiler ranges: with ``gnnmon.emit_ranges()`` rows and phases show in ``torch.profiler``
(record_function) and, on CUDA, as NVTX ranges; off by default, at no cost."""

from __future__ import annotations

import time

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import gnnmon
from gnnmon.devices.ranges import RANGES

SLEEP_S = 0.03
STAMP_MS = 1e-6
"""The profiler's resolution: its events' start and end are µs stamped to the ns."""


@gnnmon.cuda_timed
def train_step() -> None:
    with gnnmon.phase("forward"):
        time.sleep(SLEEP_S)
        torch.ones(1)  # a marker op: the profiler names the range it ran in
    with gnnmon.phase("backward"):
        time.sleep(SLEEP_S / 2)
        torch.zeros(1)


def profiled(parents: dict[str, str | None] | None = None) -> dict[str, list[float]]:
    """Each profiler event's name -> its durations (ms), for one call of the step; ``parents``
    gets each event's name -> the name of the range it ran in."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        train_step()
    spans: dict[str, list[float]] = {}
    for event in prof.events():
        spans.setdefault(event.name, []).append(event.cpu_time_total / 1e3)
        if parents is not None:
            parents[event.name] = event.cpu_parent.name if event.cpu_parent is not None else None
    return spans


def test_rows_and_phases_show_in_torch_profiler_when_asked():
    parents: dict[str, str | None] = {}
    with gnnmon.collect(), gnnmon.emit_ranges():
        spans = profiled(parents)
    # the row and its phases, each spanning its planted sleep (a profiler's ms, from its µs)
    assert len(spans["train_step"]) == 1 and spans["train_step"][0] >= 1.5 * SLEEP_S * 1e3 - 0.5
    assert len(spans["train_step.forward"]) == len(spans["train_step.backward"]) == 1
    forward, backward = spans["train_step.forward"][0], spans["train_step.backward"][0]
    assert forward >= SLEEP_S * 1e3 - 0.5 and backward >= SLEEP_S / 2 * 1e3 - 0.5
    # side by side inside the row, neither holding the other: together within the row's span
    # (six stamps, each to the profiler's ns)
    assert forward + backward <= spans["train_step"][0] + 6 * STAMP_MS
    # each phase's range holds its own work: the phases are named for what ran in them
    assert parents["train_step.forward"] == parents["train_step.backward"] == "train_step"
    assert parents["aten::ones"] == "train_step.forward" and parents["aten::zeros"] == "train_step.backward"
    assert not RANGES.on  # the block turned them back off


def test_no_range_by_default_and_none_pushed():
    with gnnmon.collect():
        spans = profiled()
    assert "train_step" not in spans and "train_step.forward" not in spans


def test_nvtx_ranges_open_and_close_with_rows_and_phases_on_cuda(monkeypatch):
    """NVTX needs a CUDA build: a stand-in for torch.cuda.nvtx records the pushes and pops."""
    calls: list[str] = []
    ids = iter(range(100, 200))

    def range_start(name: str) -> int:
        calls.append(f"start {name}")
        return next(ids)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda.nvtx, "range_start", range_start)
    monkeypatch.setattr(torch.cuda.nvtx, "range_end", lambda i: calls.append(f"end {i}"))

    @gnnmon.cuda_timed(device="cpu")  # CUDA is only pretended: the step runs on the CPU
    def cpu_step() -> None:
        with gnnmon.phase("forward"):
            pass
        with gnnmon.phase("backward"):
            pass

    with gnnmon.collect(), gnnmon.emit_ranges():
        cpu_step()
    assert calls == ["start cpu_step", "start cpu_step.forward", "end 101", "start cpu_step.backward", "end 102",
                     "end 100"]


def test_nvtx_without_cuda_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="NVTX"):
        gnnmon.emit_ranges(nvtx=True)
    with pytest.raises(TypeError, match="True or False"):
        gnnmon.emit_ranges("yes")  # type: ignore[arg-type]
    assert not RANGES.on
