"""Smoke tests of the Flickr memory study, one per sweep axis, on a tiny synthetic graph: every
setting must really take effect (read back from the loader and the model) and every measured step
must be recorded with a peak."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import gnnmon
from play.flickr_memory import SWEEPS, Setting, comparison, run_sweep
from play.synthetic import GraphSpec, planted_partition

TINY = GraphSpec("tiny", 400, 3200, 16, 3)
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def tiny():
    return planted_partition(TINY, seed=3)


def sweep(axis, tiny, tmp_path, steps=2):
    base = Setting(batch_size=32, hidden=16)
    results = run_sweep(axis, tiny, base=base, steps=steps, warmup=1, device=CPU, out=tmp_path,
                        data_note="tiny", log=lambda m: None)
    assert [r["name"] for r in results] == [name for name, _ in SWEEPS[axis]]
    run = gnnmon.load(tmp_path / f"flickr_{axis}.jsonl")
    for r in results:
        s = r["summary"]
        assert s["steps"] == steps
        assert s["step_peak_mib_median"] is not None and s["device_peak_mib_median"] > 10
        assert s["own_peak_mib_median"] > 10 and s["h2d_ms_median"] is not None
        rows = [x for x in run.records if x.get("config") == r["name"] and x["label"] == "train_step"]
        assert len(rows) == steps + 1  # warm-up kept in the file, marked
        assert [x["stage"] for x in rows] == ["warm-up"] + ["measured"] * steps
        assert all(x["mem_peak_bytes"] and x["num_nodes"] and x["batch_size"] == 32 for x in rows)
    assert (tmp_path / f"flickr_{axis}.md").read_text().startswith(f"## Sweep: {axis}")
    assert (tmp_path / f"flickr_{axis}.png").stat().st_size > 5000
    return {r["name"]: r for r in results}


def test_hidden(tiny, tmp_path):
    r = sweep("hidden", tiny, tmp_path)
    assert [r[n]["readback"]["hidden"] for n in r] == [32, 64, 128, 256, 512]


def test_pin_memory(tiny, tmp_path):
    r = sweep("pin_memory", tiny, tmp_path)
    assert r["off"]["readback"]["pin_memory"] is False and r["on"]["readback"]["pin_memory"] is True
    # the features are gathered in collate, before the DataLoader pins what collate returns
    assert r["on"]["readback"]["filter_per_worker"] is True
    if not (torch.cuda.is_available() or torch.backends.mps.is_available()):  # nothing to pin for
        assert r["on"]["readback"]["batch_pinned"] is False
        assert r["on"]["readback"]["note"] == "pin_memory asked but batches are not pinned: no accelerator here"
    else:
        assert r["on"]["readback"]["batch_pinned"] is True


def test_precision(tiny, tmp_path):
    r = sweep("precision", tiny, tmp_path)
    b = {n: r[n]["readback"] for n in r}
    assert (b["float64"]["param_dtype"], b["float64"]["activation_dtype"]) == ("torch.float64", "torch.float64")
    assert (b["float16"]["param_dtype"], b["float16"]["activation_dtype"]) == ("torch.float16", "torch.float16")
    assert b["float32"]["param_dtype"] == "torch.float32"
    assert b["bfloat16-autocast"]["param_dtype"] == "torch.float32"
    assert b["bfloat16-autocast"]["autocast"] == "torch.bfloat16"
    # autocast lowers the convolution's matmul; GCNConv's float32 bias add promotes its output back
    assert b["bfloat16-autocast"]["activation_dtype"] == "torch.bfloat16"
    assert b["bfloat16-autocast"]["conv_output_dtype"] == "torch.float32"


def test_workers(tiny, tmp_path):
    r = sweep("workers", tiny, tmp_path)
    for w in (0, 2, 4, 6):
        b = r[str(w)]["readback"]
        assert b["num_workers"] == w and b["worker_processes"] == w
    run = gnnmon.load(tmp_path / "flickr_workers.jsonl")
    rows = [x for x in run.records if x.get("config") == "2" and x.get("stage") == "measured"]
    assert all(x["rss_children_peak_bytes"] > 10 * 2**20 for x in rows)  # the workers' memory counted
    assert r["2"]["readback"]["workers_uss_mib"] > 0 and r["0"]["readback"].get("workers_uss_mib") is None
    assert r["2"]["summary"]["with_workers_mib"] > r["2"]["summary"]["own_peak_mib_median"]


def test_sampling(tiny, tmp_path):
    r = sweep("sampling", tiny, tmp_path)
    assert [r[n]["readback"]["fanouts"] for n in r] == [[5], [10], [10, 5], [15, 10], [25, 10], [25, 15, 10]]
    assert r["[5]"]["summary"]["nodes_median"] < r["[10, 5]"]["summary"]["nodes_median"] \
        < r["[25, 15, 10]"]["summary"]["nodes_median"]


def test_checkpoint(tiny, tmp_path):
    r = sweep("checkpoint", tiny, tmp_path)
    assert r["off"]["readback"]["conv_forwards_per_step"] == 2
    assert r["on"]["readback"]["conv_forwards_per_step"] == 4  # each convolution recomputed in backward


def test_comparison_table_names_every_claim():
    def fake(names, values):
        return [{"name": n, "summary": {"step_peak_mib_median": v, "with_workers_mib": v}}
                for n, v in zip(names, values, strict=True)]

    text = comparison({
        "precision": fake(["float64", "float32", "float16"], [100, 56.6, 36.4]),
        "sampling": fake(["[5]", "[25, 15, 10]"], [5, 500]),
        "pin_memory": fake(["off", "on"], [50, 50]),
        "workers": fake(["0", "6"], [600, 610]),
        "hidden": fake(["32", "64"], [10, 20]),
        "checkpoint": fake(["off", "on"], [50, 49]),
    })
    assert "| 64 -> 32 bit | -43.4 % | -43.4 % | yes |" in text
    assert "| 64 -> 16 bit | -63.6 % | -63.6 % | yes |" in text
    assert "neighbour sampling dominates" in text and "| yes |" in text
    assert "activation checkpointing" in text and "-2.0 %" in text


def test_the_summary_keeps_each_devices_memory_apart():
    """Planted CUDA rows: the GPU's allocator figures (mem_*), the host process's RSS including its
    workers (rss_*) and the workers' (rss_children_*). No figure mixes two devices: the host
    process's own peak is its RSS less its workers, never the GPU's figure less host memory (which
    printed -3,094 MiB on an H100)."""
    from play.flickr_memory import summarise

    GiB = 2**30
    rows = [{"label": "train_step", "config": "4", "stage": "measured", "backend": "cuda", "device": "cuda:0",
             "mem_peak_bytes": 3 * GiB, "mem_peak_delta_bytes": GiB // 2, "rss_peak_bytes": 5 * GiB + k,
             "rss_children_peak_bytes": 3 * GiB, "device_s": 0.004, "phase_h2d_s": 0.0005,
             "num_nodes": 100, "num_edges": 200} for k in range(3)]
    s = summarise(rows, "4")
    assert s["device_peak_mib_median"] == 3 * 1024 and s["step_peak_mib_median"] == 512
    assert s["own_peak_mib_median"] == pytest.approx(2 * 1024, abs=0.01)  # host: 5 GiB less 3 GiB of workers
    assert s["children_peak_mib_median"] == 3 * 1024 and s["h2d_ms_median"] == 0.5
    assert s["backend"] == "cuda"


def test_settings_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Setting().hidden = 3
