"""One run's time is shared out once: planted in rows, a compile warm-up in the first calls and an
epoch of calls slowed by another job on the run's cores. Warm-up and the busy machine are two
findings, each at its planted excess, and together never more than the run; a short run's first
epochs are not most of it as warm-up."""

from __future__ import annotations

import pytest

import gnnmon

LEVEL, COMPILE, CROWDED = 0.100, 0.900, 0.100
"""A quiet call's seconds; the extra a first call spends compiling; the extra a crowded call takes."""


def row(i: int, epoch: int, wall: float, others: float, idle: float) -> dict:
    t = int(i * 2e9)
    return {"label": "step", "index": i, "epoch": epoch, "t_start_ns": t, "t_end_ns": t + int(wall * 1e9),
            "wall_s": wall, "others_cpu_pct": others, "idle_cpu_pct": idle}


def planted(epochs: int = 3, per_epoch: int = 20, noise: float = 0.002) -> list[dict]:
    """Calls 0-1 compile (quiet cores); the rest of epoch 0 runs beside a job that takes a whole
    core (others 100 %, idle 0 %); later epochs are quiet. Quiet calls vary by ``noise`` seconds."""
    out = []
    for i in range(epochs * per_epoch):
        e = i // per_epoch
        jitter = noise * ((i * 7) % 5 - 2) / 2
        if i < 2:
            out.append(row(i, e, LEVEL + COMPILE + jitter, 0.0, 50.0))
        elif e == 0:
            out.append(row(i, e, LEVEL + CROWDED + jitter, 100.0, 0.0))
        else:
            out.append(row(i, e, LEVEL + jitter, 0.0, 50.0))
    return out


def test_a_compile_warm_up_and_a_busy_epoch_are_two_findings_that_share_the_run_once():
    found = {f["kind"]: f for f in gnnmon.Report(planted()).diagnosis()}
    warm, crowded = found["warm-up"], found["busy machine"]
    assert warm["at_stake"] == pytest.approx(2 * COMPILE, rel=0.02), warm["words"]
    assert crowded["at_stake"] == pytest.approx(18 * CROWDED, rel=0.05), crowded["words"]
    assert "the first 2 call(s)" in warm["words"] and "first epoch" not in warm["words"]
    assert "18 call(s) of step ran on full cores" in crowded["words"]
    assert sum(f["share"] for f in found.values()) <= 1.0, {k: f["share"] for k, f in found.items()}


def test_a_short_run_s_first_epochs_are_not_most_of_it_as_warm_up():
    """Three calls, one per epoch (PyG's PNA example: a train() row an epoch): the first is slow;
    the second, as quick as the third, is not warm-up."""
    rows = [row(0, 0, LEVEL + COMPILE, 0.0, 50.0), row(1, 1, LEVEL, 0.0, 50.0), row(2, 2, LEVEL, 0.0, 50.0)]
    found = {f["kind"]: f for f in gnnmon.Report(rows).diagnosis()}
    warm = found["warm-up"]
    assert "the first 1 call(s)" in warm["words"] and "first epoch" not in warm["words"], warm["words"]
    assert warm["at_stake"] == pytest.approx(COMPILE, rel=0.02)
