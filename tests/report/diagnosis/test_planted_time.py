"""The diagnosis leads with the planted cause of a run's lost time, and a clean run has nothing to
say. Each plant is large against the run's own noise (sleeps of tens of ms, collections over a
large heap), so a slow or busy machine changes the figures a little, never the verdict."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

import gnnmon
from gnnmon.report.diagnosis.findings_markdown import NOTHING
from gnnmon.report.loops import ms

ITEM_S, STEP_S = 0.030, 0.020
"""The planted input-bound run: each batch's one item sleeps ITEM_S in __getitem__, each step
STEP_S: the loop waits for data ITEM_S / (ITEM_S + STEP_S) = 60 % of its time."""


class Sleepy(Dataset):
    def __len__(self) -> int:
        return 24

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(ITEM_S)
        return torch.ones(4)


def test_a_sleeping_getitem_leads_as_input_bound_with_its_planted_share():
    @gnnmon.cuda_timed
    def step(batch):
        time.sleep(STEP_S)

    with gnnmon.collect() as run, gnnmon.gc_paused():
        for batch in gnnmon.watch_loader(DataLoader(Sleepy(), batch_size=1)):
            step(batch)
    found = run.report().diagnosis()
    first = found[0]
    planted = ITEM_S / (ITEM_S + STEP_S)
    print(f"input-bound: share {first['share']:.3f} against {planted:.3f} planted")
    assert first["kind"] == "input-bound" and first["label"] == "step", found
    assert abs(first["share"] - planted) < 0.05, (first["share"], planted)
    wait = next(e for e in first["evidence"] if e["figure"] == "data_wait_s")
    assert ITEM_S <= wait["value"] < ITEM_S * 1.5  # a sleep never ends early
    assert "num_workers" in first["next"]


def _cyclic_step():
    @gnnmon.cuda_timed
    def step():
        junk = []
        for _ in range(20_000):
            cell: list = []
            cell.append(cell)  # a cycle: only the collector frees it
            junk.append(cell)
        time.sleep(0.005)

    return step


def test_garbage_made_each_step_leads_as_garbage_collection():
    ballast = [[i] for i in range(300_000)]  # what each full collection must walk
    paused: list[float] = []
    started: list[float] = []

    def timer(phase, info):
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            paused.append(time.perf_counter() - started.pop())

    step = _cyclic_step()
    gc.callbacks.append(timer)
    try:
        with gnnmon.collect() as run:
            for _ in range(30):
                step()
    finally:
        gc.callbacks.remove(timer)
    del ballast
    found = run.report().diagnosis()
    first = found[0]
    assert first["kind"] == "garbage collection", found
    truth = sum(paused)  # every collection while the run was open, timed by the test's own callback
    print(f"GC: {first['at_stake']:.3f} s at stake ({first['share']:.2f} of the run) against {truth:.3f} s timed")
    assert 0.8 * truth <= first["at_stake"] <= 1.05 * truth, (first["at_stake"], truth)
    assert "freeze_gc" in first["next"]


def test_a_frozen_set_up_is_not_told_to_freeze_again():
    """The README's Quick start freezes before collect(): the manifest counts what it froze, and the
    advice is what is left to do (collections where you choose), not freeze_gc() again."""
    ballast = [[i] for i in range(300_000)]
    step = _cyclic_step()
    assert gnnmon.freeze_gc() >= 300_000
    try:
        with gnnmon.collect() as run:
            for _ in range(30):
                step()
    finally:
        gc.unfreeze()
    del ballast
    assert run.manifest["gc_frozen"] >= 300_000
    (first,) = [f for f in run.report().diagnosis() if f["kind"] == "garbage collection"]
    assert "freeze_gc" not in first["next"] and "set-up is frozen already" in first["next"], first["next"]
    assert "@gc_controlled" in first["next"]


def test_a_few_objects_a_library_froze_at_import_are_not_a_frozen_set_up():
    """On an H200 machine 375 objects were frozen once torch 2.11 was imported, before any set-up:
    planted here by a ``gc.freeze()`` before anything is imported, then 300,000 objects of
    set-up left unfrozen. The manifest counts both, and the advice is still ``freeze_gc()``."""
    script = textwrap.dedent("""
        import gc
        gc.freeze()  # what the interpreter's start-up made: a few thousand objects at most
        import json, time
        import gnnmon

        ballast = [[i] for i in range(300_000)]

        @gnnmon.cuda_timed
        def step():
            junk = []
            for _ in range(20_000):
                cell = []
                cell.append(cell)
                junk.append(cell)
            time.sleep(0.005)

        with gnnmon.collect() as run:
            for _ in range(30):
                step()
        (first,) = [f for f in run.report().diagnosis() if f["kind"] == "garbage collection"]
        gc.unfreeze()
        print(json.dumps({"frozen": run.manifest["gc_frozen"], "tracked": run.manifest["gc_tracked"],
                          "next": first["next"]}))
    """)
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert 0 < out["frozen"] < 20_000 and out["tracked"] > 300_000, out
    assert "freeze_gc()" in out["next"] and "frozen already" not in out["next"], out["next"]


def test_pauses_the_loop_asked_for_are_told_apart_from_automatic_ones():
    """Most of the time is collect_garbage() between steps, each walking what set-up left unfrozen
    (torch, PyG, 100,000 planted objects): the finding says so and advises fewer of them (and the
    freeze)."""
    ballast = [[i] for i in range(100_000)]

    @gnnmon.cuda_timed
    def step():
        time.sleep(0.002)

    with gnnmon.collect() as run, gnnmon.gc_paused():
        for _ in range(10):
            step()
            gnnmon.collect_garbage()
    del ballast
    asked = sum(e["duration_s"] for e in run.gc_events if e["requested"])
    (first,) = [f for f in run.report().diagnosis() if f["kind"] == "garbage collection"]
    assert f"{ms(asked)} of it in the collections the loop asked for" in first["words"], first["words"]
    assert first["next"].startswith("fewer of the collections you ask for") and "freeze_gc()" in first["next"]


def test_a_clean_run_has_nothing_to_say():
    @gnnmon.cuda_timed
    def step():
        time.sleep(0.05)

    with gnnmon.collect() as run, gnnmon.gc_paused():
        for _ in range(30):
            step()
    report = run.report()
    assert report.diagnosis() == []
    assert NOTHING in report.markdown()
