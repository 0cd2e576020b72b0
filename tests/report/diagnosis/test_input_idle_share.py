"""The input-bound finding's workers from the cores that stood idle (sampled ``idle_cpu_pct``,
planted): a worker for each whole core idle, a core counted from three quarters of it idle
(``WORKER_CORE``), and words that agree with the figure: 98 % of a core idle is a worker's core,
not "the cores full"; 50 % is idle, under a worker's share; 5 % is full."""

from __future__ import annotations

import pytest

import gnnmon
from gnnmon.report.diagnosis.input_finding import WORKER_CORE

WAIT, STEP = 0.030, 0.010
"""Seconds each planted call waited for its batch (in next(), no workers), and took itself."""

GATHER = "keep the features where the step reads them (on the device: a GPU feature store), or fewer sampled nodes"
"""The lighter-batch lever of a loader whose wait is feature gathering."""


def planted(idle_pct: float, workers: int = 0, calls: int = 40) -> list[dict]:
    """``calls`` steps of STEP s after a WAIT s wait that was feature gathering, ``idle_pct`` % of a
    core idle and no other process's CPU on the run's cores."""
    out = []
    for i in range(calls):
        t = int(i * 1e8)
        out.append({"label": "step", "index": i, "t_start_ns": t, "t_end_ns": t + int(STEP * 1e9), "wall_s": STEP,
                    "data_wait_s": WAIT, "data_gather_s": WAIT, "data_workers": workers, "idle_cpu_pct": idle_pct,
                    "others_cpu_pct": 0.0})
    return out


def advice(rows: list[dict], cores: int = 2) -> str:
    manifest = {"devices": {"cpu_count": cores, "cpu_usable": cores}}
    (found,) = [f for f in gnnmon.Report(rows, manifest=manifest).diagnosis() if f["kind"] == "input-bound"]
    return found["next"]


def test_a_core_nearly_all_idle_is_a_workers_core_not_full_cores():
    """98 % of a core idle of 2 (the newcomer's t6.jsonl): one worker, said with the figure."""
    text = advice(planted(98.0))
    assert text.startswith("num_workers=1 in the DataLoader (1.0 core(s) stood idle beside the run)"), text
    assert "full" not in text.split(" — ")[0] and "cannot help" not in text, text


@pytest.mark.parametrize("idle, workers, said", [
    (50.0, 0, "the training process leaves 50 % of a core idle, under the 75 % a worker needs to make its batches at "
              "a useful pace beside the step: more workers cannot help here; less work per batch: " + GATHER),
    (74.0, 2, "the 2 worker(s) and the training process leave 74 % of a core idle, under the 75 % a worker needs to "
              "make its batches at a useful pace beside the step: more workers cannot help here; less work per "
              "batch: " + GATHER),
    (5.0, 0, "the training process keeps the cores full (5 % of a core stood idle): more workers cannot help here; "
             "less work per batch: " + GATHER)])
def test_under_a_workers_share_of_a_core_idle_is_said_as_idle_or_full_by_the_figure(idle, workers, said):
    assert advice(planted(idle, workers)).startswith(said)


@pytest.mark.parametrize("idle, workers, n", [(100 * WORKER_CORE, 0, 1), (174.0, 0, 1), (175.0, 0, 2),
                                             (175.0, 1, 3), (198.0, 0, 2)])
def test_idle_cores_count_whole_from_three_quarters_of_one(idle, workers, n):
    text = advice(planted(idle, workers), cores=4)
    said = f"num_workers={n} in the DataLoader" if workers == 0 else f"more workers (num_workers={n})"
    assert text.startswith(said + f" ({idle / 100:.1f} core(s) stood idle beside the run)"), text
