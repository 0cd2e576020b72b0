"""Figures a reader understands without the text: axis labels with units, titles that name the
data and the device, axes from 0, no empty panels, markers drawn, GPU memory on a GPU, legends
off the data. Checked on the matplotlib Figure objects the code returns."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("matplotlib")

import gnnmon
from gnnmon.data.result import RunResult
from gnnmon.report.renderers.timeline_plot import plot_timeline

MIB = 2**20
T0 = 1_000_000_000_000


def _rows(n: int, *, backend: str = "cpu", device: str = "cpu", peak_mib: float = 100.0) -> list[dict]:
    return [{"label": "train_step", "index": i, "t_start_ns": T0 + i * 10**8, "t_end_ns": T0 + i * 10**8 + 5 * 10**7,
             "backend": backend, "device": device, "mem_peak_bytes": int(peak_mib * MIB)} for i in range(n)]


def _samples(n: int, **fields: float) -> list[dict]:
    return [{"t_ns": T0 + i * 5 * 10**7, "rss_bytes": 300 * MIB, **fields} for i in range(n)]


def _lines(ax) -> dict[str, list[float]]:
    return {line.get_label(): list(line.get_ydata()) for line in ax.get_lines() if not line.get_label().startswith("_")}


def test_the_timeline_does_not_zoom_into_a_flat_cpu_line():
    samples = [{**s, "cpu_util_pct": 135.0 + (i % 3)} for i, s in enumerate(_samples(12))]
    fig = plot_timeline(RunResult(_rows(4), samples=samples))
    util, mem, rows = fig.axes[:3]
    assert util.get_ylim()[0] == 0 and util.get_ylim()[1] >= 137  # 135-137 % sits high in a 0-144 axis
    assert mem.get_ylim()[0] == 0
    assert util.get_ylabel() == "utilisation (%)" and mem.get_ylabel() == "memory (MiB)"
    assert rows.get_ylabel() == "rows by label" and rows.get_xlabel() == "seconds since the first row or sample"
    assert fig.get_suptitle() == "gnnmon timeline — cpu"


def test_no_samples_no_empty_panels():
    fig = plot_timeline(RunResult(_rows(3)))
    assert len(fig.axes) == 1 and [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["train_step"]
    assert fig.axes[0].get_xlabel()
    assert "collect(sample=0.5) samples them" in fig.get_suptitle()  # why there is no utilisation panel


def test_a_timeline_saved_into_a_new_folder_makes_it_and_keeps_marker_labels_inside(tmp_path):
    markers = [{"kind": "epoch", "value": e, "t_ns": T0 + e * 10**8, "carry": True} for e in range(3)]
    path = tmp_path / "new" / "dir" / "t.png"
    fig = plot_timeline(RunResult(_rows(4), samples=_samples(8, cpu_util_pct=100.0), markers=markers), path)
    assert path.stat().st_size > 5000
    top = fig.axes[0]
    texts = [t for t in top.texts if t.get_text().strip().startswith("epoch=")]
    assert len(texts) == 3 and all(t.get_position()[1] <= 1.0 and t.get_va() == "top" for t in texts)
    assert "collect(sample" not in fig.get_suptitle()


def test_on_a_gpu_the_memory_panel_shows_gpu_memory():
    rows = _rows(3, backend="cuda", device="cuda:0", peak_mib=512)
    samples = _samples(6, cpu_util_pct=100.0, gpu0_util_pct=80.0, gpu0_mem_used_bytes=1024 * MIB)
    fig = plot_timeline(RunResult(rows, samples=samples))
    util, mem = fig.axes[:2]
    assert _lines(util)["GPU 0"] == [80.0] * 6
    lines = _lines(mem)
    assert lines["GPU 0: used (NVML)"] == [1024.0] * 6 and lines["host: process RSS"] == [300.0] * 6
    (peaks,) = [c for c in mem.collections if c.get_label() == "cuda:0: allocator peak per row"]
    assert [y for _, y in peaks.get_offsets()] == [512.0] * 3
    assert "cuda:0" in fig.get_suptitle()
    # without samples the GPU rows' peaks still get their panel (not an empty utilisation one)
    assert len(plot_timeline(RunResult(rows)).axes) == 2


def test_markers_are_drawn_on_every_panel():
    with gnnmon.collect(sample=0.01) as run:
        for epoch in range(2):
            run.mark("epoch", epoch)
            with gnnmon.timed(label="step"):
                time.sleep(0.03)
    fig = plot_timeline(run.report())
    texts = [t.get_text().strip() for t in fig.axes[0].texts]
    assert texts == ["epoch=0", "epoch=1"]
    for ax in fig.axes:
        dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
        assert len(dashed) == 2
