"""A ``gnnmon run`` row of several batches (gradient accumulation: ``batches`` of them) carries its
loader figures summed over them (``data_wait_s``, the loader's parts, nodes per hop); the input
finding reads each per batch: the sum over the batches' count, never a row's sum as one batch's.

* Planted rows: 40 steps of 4 batches, each batch waiting 31.25 ms (sampling 15.625 ms of it) with
  50 → 150 nodes per hop, beside the same batches one a row (``watch_loader``'s): the per-batch
  figures agree; a wait of 0.122 ms a batch, under the finding's share, is looked for over 160
  batches at that wait.
* Planted sleeps: a script run through ``gnnmon run`` whose dataset sleeps 20 ms an item (a batch of
  one, no workers) and steps once every 4 batches: 40 rows of 4 batches, each row's wait at least
  4 × 20 ms; the finding's wait a batch is the rows' sum over 160 batches, 20 ms or more."""

from __future__ import annotations

import pytest

import gnnmon
from gnnmon.report.diagnosis.input_finding import batches, looked_for
from gnnmon.report.loops import Loop, ms
from tests.cli.running import gnnmon_run, rows_of

K, STEPS = 4, 40
"""Batches a step and steps, planted."""

WAIT, SAMPLE = 2**-5, 2**-6
"""A batch's wait (31.25 ms) and the sampling inside it (15.625 ms), planted: binary fractions, so
sums over the batches are exact."""

HOPS = (50, 150)


def rows(per_row: int, wait: float = WAIT) -> list[dict]:
    """The planted loop: 160 batches, ``per_row`` a row (``batches`` written where a row takes
    several, as ``gnnmon run`` writes it), each row's loader figures its batches' sum; a step's own
    time 62.5 ms a row."""
    out = []
    for i in range(K * STEPS // per_row):
        row = {"label": "step", "index": i, "wall_s": 2**-4, "data_wait_s": per_row * wait,
               "data_sample_s": per_row * SAMPLE, "data_workers": 0,
               **{f"data_hop_{k}_nodes": per_row * n for k, n in enumerate(HOPS)}}
        if per_row > 1:
            row.update(batches=per_row, step_rule="update")
        out.append(row)
    return out


def input_bound(records: list[dict]) -> dict:
    (found,) = [f for f in gnnmon.Report(records).diagnosis() if f["kind"] == "input-bound"]
    return found


@pytest.mark.parametrize("per_row", [1, K])
def test_the_input_finding_reads_a_row_of_several_batches_per_batch(per_row):
    found = input_bound(rows(per_row))
    figures = {e["figure"]: e for e in found["evidence"]}
    assert figures["data_wait_s"]["value"] == WAIT
    assert figures["data_wait_s"]["where"].endswith(f"mean of {K * STEPS} batches")
    assert figures["data_sample_s"]["value"] == SAMPLE
    assert figures["data_hop_<k>_nodes"]["where"] == "num_sampled_nodes: 50 → 150"
    step = "" if per_row == 1 else f"of {K} batches "
    assert found["words"].startswith("step waited 31.2 ms per batch for its data against 62.5 ms "
                                     f"per step {step}("), found["words"]
    assert "; of it sampling 15.6 ms" in found["words"] and "nodes per hop 50 → 150" in found["words"]
    assert found["at_stake"] == K * STEPS * WAIT
    assert f"at most {ms(WAIT)} a batch to win" in found["next"], found["next"]


@pytest.mark.parametrize("per_row", [1, K])
def test_a_wait_under_its_share_is_looked_for_per_batch(per_row):
    small = 2**-13  # 0.122 ms a batch: under 1 % of the loop
    planted = rows(per_row, small)
    loop = Loop("step", gnnmon.Report(planted).table.parts["step"])
    assert batches(loop).tolist() == [float(per_row)] * len(planted)
    total = loop.total
    (said,) = looked_for(loop, total)
    assert (said["batches"], said["wait_s"]) == (K * STEPS, small)
    assert said["share"] == K * STEPS * small / total
    assert said["unsaid_s"] == 0.05 * total / (K * STEPS)  # the waits do not scatter: the share's bound


SLEEP = 0.02
"""Seconds each item of the planted dataset sleeps (a batch of one)."""

SCRIPT = f"""
    import time
    import torch
    from torch.utils.data import DataLoader, Dataset


    class Slow(Dataset):
        def __len__(self):
            return {K * STEPS}

        def __getitem__(self, i):
            time.sleep({SLEEP})                    # planted: each batch waits this long at least
            return torch.randn(16)


    model = torch.nn.Linear(16, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    if __name__ == "__main__":
        for i, x in enumerate(DataLoader(Slow(), batch_size=1, num_workers=0)):
            model(x).square().mean().backward()
            if i % {K} == {K} - 1:                 # planted: an update every {K} batches
                opt.step()
                opt.zero_grad()
"""


def test_gnnmon_run_s_wait_a_batch_is_its_rows_sum_over_their_batches(tmp_path):
    done = gnnmon_run(tmp_path, "-o", "run.jsonl", "train.py", script=SCRIPT)
    assert done.returncode == 0, done.stderr[-3000:]
    recorded = rows_of(tmp_path / "run.jsonl")
    assert [(r["label"], r["batches"], r["updates"]) for r in recorded] == [("step", K, 1)] * STEPS
    assert all(r["data_wait_s"] >= K * SLEEP for r in recorded), [r["data_wait_s"] for r in recorded]
    found = input_bound(recorded)
    (wait,) = [e for e in found["evidence"] if e["figure"] == "data_wait_s"]
    per_batch = sum(r["data_wait_s"] for r in recorded) / (K * STEPS)
    assert wait["value"] == pytest.approx(per_batch, rel=1e-12) and wait["value"] >= SLEEP
    assert wait["where"] == f"the loop's next(), timed by gnnmon run, mean of {K * STEPS} batches"
    assert found["words"].startswith(f"step waited {ms(per_batch)} per batch"), found["words"]
    assert f"per step of {K} batches (" in found["words"], found["words"]
    assert f"at most {ms(found['at_stake'] / (K * STEPS))} a batch to win" in found["next"], found["next"]
