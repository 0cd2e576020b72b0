"""DataLoader workers whose memory was not sampled (``gnnmon/report/diagnosis/creep.py``'s
:func:`creep.looked_for`): rows record the loader's ``data_workers`` but no ``workers_rss_bytes``
(``collect`` without ``sample``), so a leak in the workers is never looked at; the "not found" words
say so, and how to look."""

from __future__ import annotations

import gnnmon
from gnnmon.report.diagnosis import creep
from gnnmon.report.diagnosis.findings_markdown import looked_for_text
from tests.report.diagnosis.test_creep_levels import loop_of, merged, plant

MiB = 2**20


def rows_with(workers: int | None, sampled: bool = False, epochs: int = 5) -> list[dict]:
    """Flat device memory over ``epochs`` epochs (each call wobbling ±1 MiB), the loader's ``workers``
    recorded on every row (None: not), the workers' RSS sampled, flat, where ``sampled``."""
    rows = plant([500 * MiB] * epochs, wobble=MiB, device="cuda:0")
    if sampled:
        rows = merged(rows, plant([200 * MiB] * epochs, figure="workers_rss_bytes", wobble=MiB))
    for r in rows:
        if workers is not None:
            r["data_workers"] = workers
    return rows


def test_workers_not_sampled_are_said_not_looked_at():
    """Two workers, not sampled: the leak check lists them as not looked at, before the figures it
    did look in (the device's memory: no leak), and its words name the way to look. On main: only
    "no leak in mem_end_bytes", the workers unmentioned."""
    loop = loop_of(rows_with(2))
    out = creep.looked_for(loop, 0.0)
    assert out[0] == {"check": "workers", "label": "step", "workers": 2}
    assert [c.get("figure") for c in out[1:]] == ["mem_end_bytes"]
    assert looked_for_text(out[0]) == (
        "the memory of step's 2 DataLoader workers was not looked at (a leak there goes unsaid): no sample read "
        "it; gnnmon.collect(..., sample=0.5) or gnnmon run --sample 0.5 records workers_rss_bytes")
    assert "step's 1 DataLoader worker was not looked at" in looked_for_text(
        creep.looked_for(loop_of(rows_with(1)), 0.0)[0])
    report = gnnmon.Report(rows_with(2)).markdown()
    assert "Looked for, not found: the memory of step's 2 DataLoader workers was not looked at" in report


def test_sampled_workers_no_workers_or_no_epochs_say_nothing_of_it():
    """Sampled workers are looked in (their figure listed); no workers (0, or no loader recorded) have
    no memory to look at; calls with no epochs marked are not looked at at all (said elsewhere)."""
    sampled = creep.looked_for(loop_of(rows_with(2, sampled=True)), 0.0)
    assert [c.get("figure") for c in sampled] == ["mem_end_bytes", "workers_rss_bytes"]
    assert all("check" not in c for c in sampled)
    for workers in (0, None):
        assert all("check" not in c for c in creep.looked_for(loop_of(rows_with(workers)), 0.0))
    unmarked = [{k: v for k, v in r.items() if k != "epoch"} for r in rows_with(2)]
    assert creep.looked_for(loop_of(unmarked), 0.0) == []
