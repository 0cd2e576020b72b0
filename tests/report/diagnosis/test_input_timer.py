"""The input-bound finding's evidence names what timed the wait: ``gnnmon run`` for its engine's rows
(each carries ``step_rule``), ``watch_loader`` for rows without it, both where a loop holds both.
Planted: the same 40 rows (30 ms waited, sampling 20 ms) with and without ``step_rule``; and a slow
2-worker loader run through ``gnnmon run``, whose rows the engine wrote."""

from __future__ import annotations

import pytest

from gnnmon.report.report import Report
from tests.report.diagnosis.test_input_finding import input_bound, planted

WORKERS = " (in the loader's workers where it has them)"


def _where(found: dict) -> dict[str, str]:
    return {e["figure"]: e["where"] for e in found["evidence"]}


@pytest.mark.parametrize(("rule", "timer"), [(None, "watch_loader"), ("update", "gnnmon run")])
def test_the_wait_is_said_timed_by_whichever_recorded_it(rule, timer):
    extra = {"step_rule": rule} if rule else {}
    rows = planted(40, 0.030, 0.010, data_sample_s=0.020, data_workers=2, **extra)
    where = _where(input_bound(rows))
    assert where["data_wait_s"] == f"the loop's next(), timed by {timer}, mean of 40 batches"
    assert where["data_sample_s"] == f"{timer}, mean per batch" + WORKERS


def test_a_loop_of_both_paths_rows_names_both():
    """20 rows of each: neither path alone timed the loop's wait."""
    rows = planted(40, 0.030, 0.010, data_sample_s=0.020)
    rows = [{**r, "step_rule": "update"} if r["index"] % 2 else r for r in rows]
    where = _where(input_bound(rows))
    assert where["data_wait_s"] == "the loop's next(), timed by watch_loader and gnnmon run, mean of 40 batches"
    assert where["data_sample_s"] == "watch_loader and gnnmon run, mean per batch" + WORKERS


def test_a_slow_loader_under_gnnmon_run_is_said_timed_by_gnnmon_run(tmp_path):
    """The engine's own rows (24 batches of a 2-worker loader sleeping 20 ms a batch): its evidence
    names gnnmon run, never watch_loader, which the script does not call."""
    pytest.importorskip("torch_geometric")
    from tests.cli.running import gnnmon_run
    from tests.cli.test_run_loader_settings import SLOW

    done = gnnmon_run(tmp_path, "-o", "slow.jsonl", "train.py", script=SLOW)
    assert done.returncode == 0, done.stderr[-3000:]
    (found,) = [f for f in Report.load(tmp_path / "slow.jsonl").diagnosis() if f["kind"] == "input-bound"]
    where = _where(found)
    assert where["data_wait_s"].startswith("the loop's next(), timed by gnnmon run, mean of "), where
    assert not any("watch_loader" in w for w in where.values()), where
