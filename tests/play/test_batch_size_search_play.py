"""play/batch_size_search.py at its tiny size, against what each method is known to do: Lightning's
power mode tries 2, 4, 8, ... with 3 steps each and stops at the first size with an out-of-memory
step (the simulated capacity: a step whose measured peak is over it raises the CPU allocator's
error), keeping the size before; accelerate shrinks from its start by 0.9 until a size's steps all
fit; gnnmon's calibration runs 15 steps and up to 3 denser twins, then probes and re-checks, and
what it found was last measured under its target by the host's RSS resolution, its bracket closed
within 5 % or its probes spent; the exhaustive bisection's limit is a size it saw fit, the next one
over. (How near the true limit gnnmon's answer lies is the full-size run's question: at this size
the batches cover most of the graph and the peak barely grows.) The methods run in children forked
from one fresh process (``--fork``: one start of torch, PyG, Lightning and accelerate instead of
three); the script's own part runs in the test's process."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch_geometric")
pytest.importorskip("lightning")
pytest.importorskip("accelerate")

from gnnmon.forecast.search import RECHECKS


@pytest.mark.slow
def test_the_batch_size_search_comparison_runs_at_a_tiny_size(tmp_path):
    from play.batch_size_search import main

    assert main(["--tiny", "--fork", "--out", str(tmp_path),
                 "--methods", "exhaustive,gnnmon-1.0,lightning-power,accelerate-8192"]) == 0
    truth, gnn, power, accel = json.loads((tmp_path / "batch_size_search.json").read_text())

    limit = truth["limits"]["capacity"]
    fitted = [c["seeds"] for c in truth["calls"] if not c["oom"]]
    assert truth["limits"]["target"] <= limit and limit in fitted
    # the bisection closed on it: its last probe one above the limit ran out. An earlier pass may
    # have fitted that size: the same batch size's host peak moves by up to the RSS resolution
    # (0.71 MB seen at 1,250 seeds, across a capacity between), so only the closing probe decides
    above = [c["oom"] for c in truth["calls"] if c["seeds"] == limit + 1]
    assert above and above[-1], truth["calls"]

    sizes = [c["seeds"] for c in power["calls"]]
    tried = sorted({s for s in sizes if s & (s - 1) == 0})  # a loader's last, partial batch aside
    assert tried == [2 ** k for k in range(1, len(tried) + 1)]
    failed = [c for c in power["calls"] if c["oom"]]
    assert len(failed) == 1 and power["batch_size"] == tried[-1] // 2 == power["calls"][-4]["seeds"]

    chain = [8192]
    while chain[-1] != accel["batch_size"]:
        chain.append(int(chain[-1] * 0.9))
    assert accel["tried"] == chain
    assert accel["oom_steps"] == len(chain) - 1 and accel["trial_steps"] >= len(chain) - 1 + 3

    assert gnn["trial_steps"] == 15 + gnn["twin_steps"] + gnn["probe_steps"] and 1 <= gnn["twin_steps"] <= 3
    probed = gnn["probe_steps"] - gnn["recheck_steps"]
    assert gnn["batch_size"] > 0 and gnn["oom_steps"] <= gnn["probe_steps"] and probed <= 8
    assert gnn["recheck_steps"] <= RECHECKS
    assert gnn["off_by"] is None or gnn["off_by"] <= 0.05 or probed == 8  # closed, or out of probes
    # fraction 1.0: its target is the capacity; a peak counts as under it by the host's RSS resolution
    limit = gnn["capacity_bytes"] - gnn["margin_bytes"]
    assert gnn["margin_bytes"] > 0
    last = [c for c in gnn["calls"] if c["seeds"] == gnn["batch_size"]][-1]
    assert last["peak_bytes"] <= limit  # the answer's latest measurement is under it ...
    if gnn["over"] is not None:  # ... and the bracket's top over it, the last time it was measured
        assert [c for c in gnn["calls"] if c["seeds"] == gnn["over"]][-1]["peak_bytes"] > limit
    text = (tmp_path / "batch_size_search.md").read_text()
    assert "| Lightning Tuner.scale_batch_size(mode='power') |" in text
