"""Garbage collection inside the loop's wait for its batches: a collection between calls (the gc
log's events with no ``row``) that fell in a wait is the collector's pause, which the
garbage-collection finding says; the input findings (the steady wait, the epoch starts, "looked
for") read the wait without it, the measured time counts it once, and the words say how much of
the wait it was. Planted rows and gc events on a fake clock (integer ns): every figure is the
plant's, to the float rounding of ns (:data:`NS`)."""

from __future__ import annotations

import numpy as np
import pytest

import gnnmon
from gnnmon.data.result import RunResult
from gnnmon.report.diagnosis.gc_waits import gc_in_waits
from gnnmon.report.loops import Loop, loops
from tests.report.diagnosis.test_input_finding import planted

NS = 1e-6
"""The bound on a planted figure (s): ns on the fake clock, summed over at most a thousand values."""

STEP, WAIT = 0.017, 0.025
"""The planted step (s) and the loader's own wait before each (s)."""

BATCHES, EPOCHS = 10, 3


def collection(at_ns: int, seconds: float, generation: int = 2, row: str | None = None) -> dict:
    """A gc log event: an automatic collection starting at ``at_ns`` for ``seconds``."""
    return {"type": "gc", "generation": generation, "t_start_ns": at_ns, "duration_s": seconds, "collected": 0,
            "uncollectable": 0, "requested": False, "reason": "automatic", "row": row, "phase": None,
            "thread": "MainThread"}


def run(waits: list[float], gc_events: list[dict], **fields) -> gnnmon.Report:
    """Calls of :data:`STEP` s each after its planted wait (``waits``, s, the collections in it
    included), the epochs marked every :data:`BATCHES` calls, no workers, 2 cores."""
    rows = planted(len(waits), 0.0, STEP, data_workers=0, **fields)
    for i, (row, wait) in enumerate(zip(rows, waits, strict=True)):
        row["data_wait_s"], row["epoch"] = wait, i // BATCHES
    return gnnmon.Report(rows, manifest={"devices": {"cpu_count": 2, "cpu_usable": 2}}, gc_events=gc_events)


def kinds(report: gnnmon.Report) -> dict[str, dict]:
    return {f["kind"]: f for f in report.diagnosis()}


def test_a_full_collection_in_an_epochs_first_wait_is_not_the_loaders_set_up() -> None:
    """The newcomer's run: a loader without workers waits 25 ms a batch; the third epoch's first
    wait holds one 492 ms generation-2 collection (its wait 517 ms). It was read as 3 epoch
    starts' set-up ("the loader starts anew … do that set-up once"); the collection is the GC
    finding's: the input finding is the steady 25 ms a batch, with no epoch start, and the
    measured time counts the 492 ms once."""
    n = EPOCHS * BATCHES
    waits = [WAIT] * n
    waits[2 * BATCHES] += 0.492
    start = int(2 * BATCHES * 1e9 - waits[2 * BATCHES] * 1e9) + 10_000_000  # 10 ms into that wait
    report = run(waits, [collection(start, 0.492)])
    found = kinds(report)
    said = found["input-bound"]
    assert "epoch start" not in said["words"] and "starts anew" not in said["next"]
    assert said["at_stake"] == pytest.approx(n * WAIT, abs=NS)
    total = n * (STEP + WAIT) + 0.492  # the loop's calls and waits, the collection once
    assert said["share"] == pytest.approx(n * WAIT / total, abs=NS)
    assert found["garbage collection"]["share"] == pytest.approx(0.492 / total, abs=NS)
    assert said["words"].startswith(f"step waited 25.0 ms per batch for its data against 17.0 ms per step "
                                    f"({100 * n * WAIT / total:.0f} % of its loop), garbage collection aside "
                                    f"(492.0 ms of the waits, 40 %, were collections: the garbage-collection "
                                    f"finding's)")
    (gc,) = [e for e in said["evidence"] if e["figure"] == "gc events in the waits"]
    assert gc["value"] == pytest.approx(0.492, abs=NS)


def test_an_epoch_start_with_a_collection_in_it_is_said_without_the_collection() -> None:
    """Each epoch's first batch waits 200 ms more (a set-up, the loader's); the third one's wait
    also holds a 492 ms collection. The starts are found, their excess 3 × 200 ms and each first
    wait 225 ms, the collection said beside them, not in them."""
    n = EPOCHS * BATCHES
    waits = [WAIT + (0.2 if i % BATCHES == 0 else 0.0) for i in range(n)]
    waits[2 * BATCHES] += 0.492
    start = int(2 * BATCHES * 1e9 - waits[2 * BATCHES] * 1e9) + 10_000_000
    said = kinds(run(waits, [collection(start, 0.492)]))["input-bound"]
    assert ("; 600.0 ms of it at 3 epoch start(s) beyond the other batches' 25.0 ms (each epoch's first batch: "
            "225, 225, 225 ms, garbage collection aside: 492.0 ms of collections in them)") in said["words"]
    assert said["at_stake"] == pytest.approx(n * WAIT + 0.6, abs=NS)
    assert said["next"].startswith("at each epoch's start the loader starts anew")


def test_collections_in_every_wait_are_the_gc_findings_not_the_loaders() -> None:
    """Every wait holds 120 ms of collections (three of 40 ms) beside the loader's 25 ms: the
    input finding is 25 ms a batch, "at most 25.0 ms a batch to win", 83 % of the waits said to be
    collections; the GC finding holds the 3.6 s, and the two shares add up to no more than the
    measured time."""
    n = EPOCHS * BATCHES
    waits = [WAIT + 0.120] * n
    events = [collection(int(i * 1e9 - waits[i] * 1e9) + k * 50_000_000, 0.040, generation=0)
              for i in range(n) for k in range(3)]
    found = kinds(run(waits, events))
    said = found["input-bound"]
    total = n * (STEP + WAIT + 0.120)
    assert said["at_stake"] == pytest.approx(n * WAIT, abs=NS)
    assert "(3.60 s of the waits, 83 %, were collections" in said["words"]
    assert said["next"].endswith(f"at most 25.0 ms a batch to win ({100 * n * WAIT / total:.0f} % of the measured "
                                 "time): data_wait_s in the next run says how much was")
    assert found["garbage collection"]["at_stake"] == pytest.approx(n * 0.120, abs=NS)
    assert said["share"] + found["garbage collection"]["share"] == pytest.approx(n * (WAIT + 0.120) / total, abs=NS)


def test_waits_that_are_all_collection_are_looked_for_without_it() -> None:
    """Waits of 1 ms each besides 100 ms of collection: no input finding (the collector's, not the
    loader's); what was looked for says 1 ms a batch."""
    n = EPOCHS * BATCHES
    waits = [0.001 + 0.100] * n
    events = [collection(int(i * 1e9 - waits[i] * 1e9), 0.100, generation=1) for i in range(n)]
    report = run(waits, events)
    assert "input-bound" not in kinds(report) and "garbage collection" in kinds(report)
    (said,) = [c for c in report.looked_for() if c.get("check") == "input"]
    assert said["wait_s"] == pytest.approx(0.001, abs=NS)


def test_only_the_part_of_a_collection_inside_a_wait_counts() -> None:
    """Calls at 1, 2, 3 s, each after a 100 ms wait: a 60 ms collection starting 30 ms before the
    first wait (30 ms of it inside), one wholly in the second wait (20 ms), one in the second call
    (starting at its start: none of the wait), one inside a call by its ``row`` (none), one
    straddling the third wait's end (40 ms in it); no collections: zeros."""
    rows = [{"label": "step", "index": i, "t_start_ns": int(s * 1e9), "t_end_ns": int(s * 1e9) + 10_000_000,
             "wall_s": 0.01, "data_wait_s": 0.1} for i, s in enumerate((1, 2, 3))]
    loop = Loop("step", gnnmon.Report(rows).table.parts["step"])
    ms = 1_000_000
    events = [collection(900 * ms - 30 * ms, 0.060), collection(1950 * ms, 0.020), collection(2000 * ms, 0.005),
              collection(2920 * ms, 0.050, row="step#2"), collection(2960 * ms, 0.060)]
    assert gc_in_waits(loop, events) == pytest.approx([0.030, 0.020, 0.040], abs=NS)
    assert np.all(gc_in_waits(loop, []) == 0.0)


def test_a_jobs_ranks_meet_their_own_collections_alone():
    """Two ranks of one job on one host (their clocks alike): rank 0's waits hold a planted 20 ms
    collection each (29 of them), rank 1's none. Rank 0's waits lose 580 ms, rank 1's nothing, and
    the input finding's waits are both ranks' less those 580 ms (45 and 25 ms a batch planted)."""
    n = 30

    def rank(r: int, gc: bool) -> RunResult:
        rows = planted(n, 0.0, STEP, data_workers=0)
        for i, row in enumerate(rows):
            row["data_wait_s"], row["epoch"] = 0.025 + (0.020 if gc else 0.0), i // 10
        events = [collection(int(i * 1e9 - 0.040e9), 0.020) for i in range(1, n)] if gc else []
        return RunResult(rows, manifest={"distributed": {"rank": r, "world_size": 2},
                                         "devices": {"cpu_count": 2, "cpu_usable": 2}}, gc_events=events)

    job = RunResult.merge([rank(0, True), rank(1, False)])
    (loop,) = loops(job.table)
    gc, where = gc_in_waits(loop, job.gc_events), loop.column("rank")
    assert gc[where == 0].sum() == pytest.approx(29 * 0.020) and gc[where == 1].sum() == 0.0
    (found,) = [f for f in gnnmon.Report(job).diagnosis() if f["kind"] == "input-bound"]
    assert found["at_stake"] == pytest.approx(n * (0.045 + 0.025) - 29 * 0.020), found
