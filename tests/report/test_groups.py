"""Reports grouped by a marker (``config``, ``stage``…): summaries, markdown, spikes judged within
their group, natural order, and ``gnnmon report --by``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import gnnmon
from gnnmon import Report, cuda_timed

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = [128, 256, 32, 512, 64]  # the order a sweep ran them in; as strings they sort 128, 256, 32, …


def sweep() -> Report:
    """20 steps per fanout setting, each setting's steps taking (fanout / 32)^2 ms (1 to 256 ms);
    one planted slow step (index 10 of the 64 setting: 10x its group's time, 40 ms)."""
    rows, i = [], 0
    for config in CONFIGS:
        for k in range(20):
            t = (config / 32) ** 2 * 1e-3 * (10 if (config, k) == (64, 10) else 1)
            rows.append({"label": "train_step", "index": i, "parent": None, "device_s": t, "config": config,
                         "t_start_ns": i * 10**8, "t_end_ns": i * 10**8 + int(t * 1e9)})
            i += 1
    return Report(rows, markers=[{"kind": "config", "carry": True}])


def test_pooled_spikes_are_the_largest_setting_grouped_ones_are_real():
    report = sweep()
    pooled = report.spikes()
    assert pooled and {r["index"] // 20 for r in pooled} == {CONFIGS.index(512)}  # a setting, not a spike
    grouped = report.spikes(by="config")
    assert [(s["config"], s["index"]) for s in grouped] == [(64, 4 * 20 + 10)]


def test_groups_come_in_natural_order_with_their_own_summaries():
    report = sweep()
    assert list(report.groups("config")) == [32, 64, 128, 256, 512]
    summary = report.summary(by="config")
    assert list(summary) == [32, 64, 128, 256, 512]
    assert summary[128]["train_step"]["device_s"]["p50"] == pytest.approx(0.016)
    assert summary[512]["train_step"]["device_s"]["count"] == 20
    text = report.markdown(by="config")
    headings = [line for line in text.splitlines() if line.startswith("## config = ")]
    assert headings == [f"## config = {c} (20 rows)" for c in (32, 64, 128, 256, 512)]


def test_a_marker_no_row_carries_is_named():
    with pytest.raises(ValueError, match="no row carries 'stage'; the markers here: config"):
        sweep().groups("stage")


def test_the_cli_groups_by_a_marker(tmp_path):
    step = cuda_timed(label="train_step")(lambda: None)
    with gnnmon.collect(tmp_path / "sweep.jsonl") as run:
        for config in CONFIGS:
            run.mark("config", config)
            for _ in range(3):
                step()
    proc = subprocess.run([sys.executable, "-m", "gnnmon", "report", "--by", "config", str(tmp_path / "sweep.jsonl")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    headings = [line for line in proc.stdout.splitlines() if line.startswith("## config = ")]
    assert headings == [f"## config = {c} (3 rows)" for c in (32, 64, 128, 256, 512)]
    bad = subprocess.run([sys.executable, "-m", "gnnmon", "report", "--by", "stage", str(tmp_path / "sweep.jsonl")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert bad.returncode == 2 and bad.stdout == "" and "no row carries 'stage'" in bad.stderr


def test_by_epoch_keeps_the_collections_made_between_rows():
    """``@gc_controlled(collect="after")``: each step's collection runs after its row closes, so
    between rows. Grouped by epoch, each epoch keeps the collections made while it was marked, and
    its markdown has its GC section."""
    import gc

    @gnnmon.gc_controlled(collect="after")
    @cuda_timed(label="train_step")
    def step():
        a = []
        a.append(a)  # a cycle: only a collection frees it

    gc.collect()
    with gnnmon.collect() as run:
        for epoch in range(2):
            run.mark("epoch", epoch)
            for _ in range(3):
                step()
    report = run.report()
    between = [e for e in report.gc_events if e.get("row") is None and e.get("reason") == "gc_controlled"]
    assert len(between) == 6  # planted: one asked-for collection after each of the six steps
    groups = report.groups("epoch")
    assert {epoch: len([e for e in part.gc_events if e.get("reason") == "gc_controlled"])
            for epoch, part in groups.items()} == {0: 3, 1: 3}
    text = report.markdown(by="epoch")
    assert text.count("### Garbage collection") == 2


def test_a_config_given_to_collect_is_not_a_marker_and_the_error_says_how_to_mark_one():
    step = cuda_timed(label="train_step")(lambda: None)
    with gnnmon.collect(config={"hidden": 64}) as run:
        step()
    for by in ("config", "hidden"):
        with pytest.raises(ValueError, match=r"collect\(config=\.\.\.\) describes the run .* run\.mark"):
            run.report().groups(by)
