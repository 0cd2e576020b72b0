"""The input-bound finding's next step fits the run (planted in rows): more workers only where
cores stood idle beside it, a count no higher than those cores allow, nothing the loader already
does, and the gain it can bring as a figure to check. And ``watch_loader`` records the loader's
``num_workers`` (``data_workers``) on every row, the manifest the cores the process may use."""

from __future__ import annotations

import os

import torch
from torch.utils.data import DataLoader

import gnnmon

WAIT, STEP = 0.030, 0.010
"""Seconds each planted call waited for its batch, and took itself."""


def planted(workers: int | None, idle_pct: float | None, calls: int = 40) -> list[dict]:
    out = []
    for i in range(calls):
        t = int(i * 1e8)
        r = {"label": "step", "index": i, "t_start_ns": t, "t_end_ns": t + int(STEP * 1e9), "wall_s": STEP,
             "data_wait_s": WAIT + 1e-4 * (i % 3)}
        if workers is not None:
            r["data_workers"] = workers
        if idle_pct is not None:
            r["idle_cpu_pct"], r["others_cpu_pct"] = idle_pct, 0.0
        out.append(r)
    return out


def advice(rows: list[dict], cores: int | None) -> str:
    manifest = {"devices": {"cpu_count": cores, "cpu_usable": cores}} if cores else None
    (found,) = [f for f in gnnmon.Report(rows, manifest=manifest).diagnosis() if f["kind"] == "input-bound"]
    return found["next"]


def test_a_loader_with_workers_on_full_cores_is_not_told_to_add_more():
    """The issue's 2-core machine: 2 workers and the step keep both cores busy (5 % of a core idle)."""
    text = advice(planted(workers=2, idle_pct=5.0), cores=2)
    assert "more workers cannot help here" in text and "num_workers=" not in text, text
    assert "less work per batch" in text


def test_idle_cores_bound_the_workers_advised():
    text = advice(planted(workers=0, idle_pct=250.0), cores=4)  # 2.5 cores idle
    assert "num_workers=2 in the DataLoader (2.5 core(s) stood idle beside the run)" in text, text
    text = advice(planted(workers=2, idle_pct=1200.0), cores=16)
    assert "more workers (num_workers=6)" in text, text  # 2 + at most 4 more at a time


def test_without_samples_the_cores_bound_the_workers():
    assert "num_workers=1 in the DataLoader (2 core(s), one for the training process)" in advice(
        planted(workers=0, idle_pct=None), cores=2)
    text = advice(planted(workers=1, idle_pct=None), cores=2)  # cores left none, and nothing says the worker computes
    assert text.startswith("the 1 worker(s) on 2 core(s): if they compute, the cores are full and more workers cannot "
                           "help; if they wait off the CPU (I/O, a sleep), more workers overlap the wait even on full "
                           "cores; which, the run does not record: collect(sample=0.5)"), text


def test_the_gain_is_a_figure_the_next_run_can_check():
    text = advice(planted(workers=0, idle_pct=None), cores=None)
    assert "num_workers=N" in text and "at most 30.1 ms a batch to win (75 % of the measured time)" in text, text
    assert "data_wait_s in the next run" in text


def test_watch_loader_records_the_loaders_workers_and_the_manifest_the_usable_cores():
    data = [torch.ones(3) for _ in range(8)]

    @gnnmon.cuda_timed
    def step(batch):
        return batch.sum()

    with gnnmon.collect() as run:
        for workers in (0, 2):
            for batch in gnnmon.watch_loader(DataLoader(data, batch_size=2, num_workers=workers)):
                step(batch)
    assert [r["data_workers"] for r in run.records] == [0] * 4 + [2] * 4
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert run.manifest["devices"]["cpu_usable"] == usable


def test_gnnmons_fallback_sampler_is_named_with_the_lever_that_replaces_it():
    """Most of each wait is sampling by gnnmon's pure-PyTorch sampler (``data_sampler``): the next
    step is to install pyg-lib, with the sampling time it would take over; with PyG's own sampler,
    nothing of the kind."""
    rows = planted(workers=0, idle_pct=None)
    for r in rows:
        r["data_sample_s"], r["data_gather_s"] = 0.025, 0.003
    assert "pyg-lib" not in advice(rows, cores=2)
    for r in rows:
        r["data_sampler"] = "gnnmon"
    text = advice(rows, cores=2)
    assert (text.startswith("install pyg-lib, PyG's compiled sampler")
            and "fallback sampler took 25.0 ms of each wait" in text)
    assert "num_workers=1" in text  # the rest of the advice still follows
