"""``gnnmon run --sched --sample S`` records what ``gnnmon compare`` judges and names, as
``collect(sched=True, sample=S)`` does: each step row's thread CPU time and run queue, and other
processes' CPU on the run's cores. Planted: a script of 30 updates whose step computes (a linear
layer) and sleeps 20 ms between its forward and its update; its thread's CPU time is under its wall
time by at least the sleep, which the rows must show. Without the options the rows carry neither,
and compare says the load went unsampled."""

from __future__ import annotations

import pytest

from gnnmon.cli.run import split
from gnnmon.devices.sched import AVAILABLE
from gnnmon.report.compare.comparison import Comparison
from tests.cli.running import gnnmon_run, rows_of
from tests.report.compare.planted import rerun, result

SLEEPY = """
    import time
    import torch

    model = torch.nn.Linear(64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(256, 64)
    for i in range(30):                                    # planted: 30 updates, each sleeping 20 ms
        opt.zero_grad()
        loss = model(x).square().mean()
        time.sleep(0.02)                                   # inside the row: from the forward to the update
        loss.backward()
        opt.step()
"""
SLEEP_S = 0.02


def test_split_keeps_the_samples_interval_with_gnnmon():
    assert split(["run", "--sample", "0.5", "--sched", "train.py", "--sample", "9"]) == (
        ["run", "--sample", "0.5", "--sched", "train.py"], ["--sample", "9"])


@pytest.mark.skipif(not AVAILABLE, reason="no per-thread CPU time and run queue on this OS (Linux only)")
def test_sched_and_sample_record_the_threads_cpu_and_the_machines_load(tmp_path):
    done = gnnmon_run(tmp_path, "--sched", "--sample", "0.1", "-o", "run.jsonl", "train.py", script=SLEEPY)
    assert done.returncode == 0, done.stderr[-3000:]
    steps = [r for r in rows_of(tmp_path / "run.jsonl") if r.get("label") == "step"]
    assert len(steps) == 30, len(steps)
    for r in steps:
        assert r["thread_cpu_s"] >= 0 and r["thread_queued_s"] >= 0, r
        assert r["wall_s"] - r["thread_cpu_s"] >= 0.9 * SLEEP_S, r  # off the CPU: the sleep, less sleep's slack
    assert any(r.get("others_cpu_pct") is not None for r in steps), "no sample reached a row"


def test_without_the_options_the_rows_carry_neither(tmp_path):
    done = gnnmon_run(tmp_path, "-o", "run.jsonl", "train.py", script=SLEEPY)
    assert done.returncode == 0, done.stderr[-3000:]
    steps = [r for r in rows_of(tmp_path / "run.jsonl") if r.get("label") == "step"]
    assert steps and not any("thread_cpu_s" in r or r.get("others_cpu_pct") is not None for r in steps)


def test_a_bad_interval_is_refused(tmp_path):
    done = gnnmon_run(tmp_path, "--sample", "0", "train.py", script=SLEEPY)
    assert done.returncode == 2 and "over 0" in done.stderr, done.stderr


def test_compare_of_runs_that_sampled_no_load_says_so():
    """Neither side sampled (as gnnmon run's files without --sample): a note says the load is
    unknown and how to record it; one run a side, that the assumed spread is a quiet machine's."""
    for runs in (1, 3):
        base = [result(rerun(s, 0.01), s) for s in range(runs)]
        new = [result(rerun(s, 0.01), s) for s in range(runs, 2 * runs)]
        c = Comparison(base, new, max_slowdown=0.05)
        (note,) = [n for n in c.notes if "not sampled beside either side" in n]
        assert "gnnmon run --sample 0.5" in note and ("quiet machine's" in note) == (runs == 1), note
        assert f"note: {note}" in c.markdown()
