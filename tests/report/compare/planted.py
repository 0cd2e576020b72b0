"""Planted reruns for the compare gate: each run's calls are tests/report/diagnosis/planted.py's steps
(200 calls, 3 % noise a call), every time in the run scaled by one factor drawn for the run from
N(1, ``spread``) (reruns of the same code landing apart, as fresh processes do), and by ``slower``.
Nothing depends on the machine's speed."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from gnnmon.data.result import RunResult
from gnnmon.report.compare.comparison import Comparison
from tests.report.diagnosis.planted import steps

TIMES = ("wall_s", "device_s", "thread_cpu_s", "cpu_s")


def rerun(seed: int, spread: float, slower: float = 1.0, n: int = 200, *, cpu: bool = False,
          waited: float = 0.0, slept: float = 0.0, sched: bool = False, around: float = 0.0, scale: float = 1.0,
          graphs: int = 1, process: bool = False) -> list[dict[str, Any]]:
    """One run's rows: its factor is ``gauss(1, spread) · slower`` (seeded); ``cpu``: each row also
    carries its thread's CPU time (the step's work), and ``waited`` adds that share of it to the
    wall time only (time off the CPU: a busy machine), ``slept`` that share again (the step's own
    wait: a sleep); ``sched``: each row carries its thread's run-queue time (the ``waited`` part)
    and a window (``t_start_ns`` to ``t_end_ns``) as long as its wall time and ``around`` that
    share of its work more (gnnmon's bookkeeping around the call, preempted where the run queue is
    not read); ``scale``: the graphs' nodes (and edges) that many times the planted ones, their
    phases' times with them (tests/report/diagnosis/planted.py); ``graphs``: each step's graphs
    (``num_graphs``); ``process``: each row carries its process's CPU time (``cpu_s``, the step's
    work, as every row does) where ``cpu`` gives its thread's."""
    factor = random.Random(seed + 500).gauss(1.0, spread) * slower
    rows = steps(n, seed=seed, scale=scale)
    for r in rows:
        r["num_graphs"] = graphs
        if cpu:
            r["thread_cpu_s"] = r["wall_s"]
        if process:
            r["cpu_s"] = r["wall_s"]
        for key in [k for k in r if k.startswith("phase_")] + [k for k in TIMES if k in r]:
            r[key] *= factor
        work = r.get("thread_cpu_s", r.get("cpu_s", r["wall_s"]))
        r["wall_s"] += (waited + slept) * work
        r["device_s"] = r["wall_s"]
        if sched:
            r["thread_queued_s"] = waited * work
            r["t_end_ns"] = r["t_start_ns"] + round((r["wall_s"] + around * work) * 1e9)
    return rows


def result(rows: Sequence[dict[str, Any]], seed: int, threads: int | None = 1) -> RunResult:
    """A run's plain result over ``rows``, with a manifest that tells it from other runs (its
    ``start_ns``) and says torch's threads."""
    devices = {} if threads is None else {"torch_threads": threads}
    return RunResult(list(rows), manifest={"type": "manifest", "host": "planted", "pid": seed,
                                           "start_ns": 1_000_000 + seed, "devices": devices})


def side(seeds: Sequence[int], spread: float, slower: float = 1.0, **kw: Any) -> list[RunResult]:
    """Runs of one side, one per seed."""
    return [result(rerun(s, spread, slower, **kw), s) for s in seeds]


def cell(runs: int, spread: float, slower: float, pairs: int, limit: float = 0.05) -> dict[str, int]:
    """``pairs`` comparisons of fresh planted sides (``runs`` each, the new side ``slower``) at
    ``limit``: how many passed, regressed and were inconclusive. The seeds follow from the pair's
    number and the runs a side alone."""
    counts = {"pass": 0, "regressed": 0, "inconclusive": 0}
    for k in range(pairs):
        seed = 10_000 * k + 1_000 * runs
        base = side(range(seed, seed + runs), spread)
        new = side(range(seed + runs, seed + 2 * runs), spread, slower)
        counts[Comparison(base, new, max_slowdown=limit).verdict()] += 1
    return counts
