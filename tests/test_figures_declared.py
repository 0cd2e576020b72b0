"""One vocabulary: every field a run writes is declared once in gnnmon/figures.py (name, unit,
meaning, stage), the field reference and the README agree with it, and every renderer shows a
planted figure in the unit declared there."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import torch

import gnnmon
from gnnmon import cuda_timed, gc_controlled, monitor_memory_device, phase, track_compile
from gnnmon.figures import FIGURES, UNITS, figure_of, reference
from gnnmon.report.renderers.tensorboard import scalars
from gnnmon.report.renderers.trace import chrome_trace

ROOT = Path(__file__).resolve().parents[1]
MiB = 2**20


def test_the_field_reference_is_made_from_the_declarations():
    assert (ROOT / "docs" / "fields.md").read_text() == reference(), "run: gnnmon fields > docs/fields.md"


def test_each_declared_unit_is_the_one_its_name_ends_in():
    for figure in FIGURES:
        by_suffix = [u for u in UNITS if figure.name.endswith(u.suffix)]
        if figure.unit in UNITS:
            assert by_suffix == [figure.unit], figure.name
        else:
            assert not by_suffix, f"{figure.name} ends in a unit's suffix but is declared {figure.unit.name}"


def test_every_field_of_a_full_row_is_declared():
    """A call with every measurement, a phase, a PyG batch of known shape and a compile count."""
    from torch_geometric.data import Data

    data = Data(x=torch.ones(10, 4), edge_index=torch.zeros(2, 20, dtype=torch.long))

    @track_compile
    @monitor_memory_device(device="cpu")
    @cuda_timed(device="cpu")
    @gc_controlled
    def step(batch: Data) -> None:
        with phase("load"):
            time.sleep(0.001)

    with gnnmon.collect() as run:
        step(data)
    (row,) = run.records
    assert row["num_nodes"] == 10 and row["num_edges"] == 20 and row["phase_load_s"] >= 0.001
    undeclared = sorted(f for f in row if figure_of(f) is None)
    assert not undeclared, f"fields not declared in gnnmon/figures.py: {undeclared}"


def test_the_readme_names_only_declared_fields():
    api = (ROOT / "README.md").read_text() + (ROOT / "docs" / "api.md").read_text()
    named = set(re.findall(r"`([a-z][a-z0-9_]*(?:_bytes|_s|_pct|_w|_j|_kg|_ms|_mib))`", api))
    shown = {f.shown_name for f in FIGURES}
    unknown = sorted(n for n in named if figure_of(n) is None and n not in shown and not n.endswith("_power_w"))
    assert not unknown, f"README names fields gnnmon/figures.py does not declare: {unknown}"


PLANTED = {"label": "step", "index": 0, "parent": None, "t_start_ns": 1_000_000_000, "t_end_ns": 1_250_000_000,
           "device": "cpu", "backend": "cpu", "error": None, "notes": [],
           "wall_s": 0.25, "device_s": 0.25, "mem_peak_bytes": 64 * MiB, "mem_peak_delta_bytes": 48 * MiB,
           "phase_load_s": 0.01, "gc_pause_s": 0.002, "num_nodes": 10}


def _report() -> gnnmon.report.Report:
    return gnnmon.report.Report([dict(PLANTED, index=i) for i in range(3)])


def test_markdown_shows_bytes_in_mib_and_seconds_in_ms():
    text = _report().markdown()
    assert "| mem_peak_bytes | MiB | 3 | 64 | 64 |" in text, text
    assert "| wall_s | ms | 3 | 250 | 250 |" in text and "| phase_load_s | ms | 3 | 10 | 10 |" in text
    assert "| num_nodes |  | 3 | 10 | 10 |" in text  # a count keeps its own unit


def test_the_trace_shows_a_row_s_figures_under_their_shown_names():
    events = chrome_trace(_report())["traceEvents"]
    args = next(e["args"] for e in events if e.get("name") == "step" and e.get("ph") == "X")
    assert args["mem_peak_mib"] == pytest.approx(64) and args["wall_ms"] == pytest.approx(250)
    assert args["gc_ms"] == pytest.approx(2)


def test_tensorboard_writes_step_figures_and_any_phase_in_shown_units():
    tags = {tag: value for _, tag, value, step, _ in scalars(_report()) if step == 0}
    assert tags["step/mem_peak_mib"] == pytest.approx(64) and tags["step/wall_ms"] == pytest.approx(250)
    assert tags["step/load_ms"] == pytest.approx(10) and tags["step/num_nodes"] == 10


def test_lightning_logs_the_declared_step_figures():
    lightning = pytest.importorskip("gnnmon.integrations.lightning")
    metrics = lightning.step_metrics([PLANTED, dict(PLANTED, mem_peak_bytes=32 * MiB)], "gnnmon/")
    assert metrics["gnnmon/mem_peak_mib"] == pytest.approx(64)  # a peak: the largest
    assert metrics["gnnmon/wall_ms"] == pytest.approx(500)  # a time: summed over the batches


def test_the_cli_prints_the_field_reference(capsys):
    from gnnmon.cli import main

    assert main(["fields"]) == 0
    assert capsys.readouterr().out == reference()
