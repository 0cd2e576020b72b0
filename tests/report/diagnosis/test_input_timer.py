"""The input-bound finding's evidence names what timed the wait: ``gnnmon run`` for its engine's rows
(each carries ``step_rule``), ``watch_loader`` for rows without it, both where a loop holds both.
Planted: the same 40 rows (30 ms waited, sampling 20 ms) with and without ``step_rule``; and a slow
loader run through ``gnnmon run``, whose rows the engine wrote."""

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


SLOW = """
    import time
    import torch
    from torch.utils.data import DataLoader, Dataset


    class Slow(Dataset):
        def __len__(self):
            return 24

        def __getitem__(self, i):
            time.sleep(0.02)                       # planted: each batch waits this long, at least
            return torch.randn(16)


    model = torch.nn.Linear(16, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    if __name__ == "__main__":
        for x in DataLoader(Slow(), batch_size=1, num_workers=0):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
"""
"""A loop whose every wait is a 20 ms sleep in the training process (no workers taking turns, whose
waits alternate between none and two batches' worth: a spread a loaded host widens past what 24
batches can tell), against a step of about a millisecond."""


def test_a_slow_loader_under_gnnmon_run_is_said_timed_by_gnnmon_run(tmp_path):
    """The engine's own rows (24 batches, each waiting 20 ms in the loader): its evidence names
    gnnmon run, never watch_loader, which the script does not call."""
    from tests.cli.running import gnnmon_run

    done = gnnmon_run(tmp_path, "-o", "slow.jsonl", "train.py", script=SLOW)
    assert done.returncode == 0, done.stderr[-3000:]
    (found,) = [f for f in Report.load(tmp_path / "slow.jsonl").diagnosis() if f["kind"] == "input-bound"]
    where = _where(found)
    assert where["data_wait_s"].startswith("the loop's next(), timed by gnnmon run, mean of "), where
    assert not any("watch_loader" in w for w in where.values()), where
