"""A list that keeps a tensor every step is a leak at its planted rate; a run whose batches grow
epoch by epoch is bigger graphs, not a leak. Both run in a fresh process whose host memory is exact
(``gnnmon.exact_host_memory()``: freed blocks leave the process, so RSS follows the tensors alive)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

KEPT = 4 * 2**20
"""Bytes the leaking step keeps each call (a float32 tensor of 1 Mi elements)."""
STEPS, EPOCHS = 20, 5
PER_NODE = 1024
"""Bytes per node the growing run's step keeps until the next step (its last activations)."""

SCRIPT = r"""
import json, random, sys, time
import torch
from torch_geometric.data import Data
import gnnmon

assert gnnmon.exact_host_memory()
mode, steps, epochs, kept_bytes, per_node = sys.argv[1], *map(int, sys.argv[2:6])
kept, last = [], {}
rng = random.Random(0)


@gnnmon.monitor_memory_device
@gnnmon.cuda_timed
def step(n):
    gnnmon.record_graph(Data(num_nodes=n, edge_index=torch.zeros(2, 2 * n, dtype=torch.long)))
    if mode == "leak":
        kept.append(torch.ones(kept_bytes // 4))  # never let go
    else:
        last["out"] = torch.ones(n * per_node // 4)  # replaced by the next step's
    time.sleep(0.001)


with gnnmon.collect() as run, gnnmon.gc_paused():
    for e in range(epochs):
        run.mark("epoch", e)
        for _ in range(steps):
            step(rng.randint(10_000, 20_000) * (e + 1 if mode == "grow" else 1))
nodes = [r["num_nodes"] for r in run.records]
print(json.dumps({"diagnosis": run.report().diagnosis(), "nodes": nodes}))
"""


def diagnose(mode: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, mode, str(STEPS), str(EPOCHS), str(KEPT), str(PER_NODE)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="exact host memory needs glibc")


@pytest.mark.slow
@linux_only
def test_a_list_that_keeps_a_tensor_is_a_leak_at_its_rate():
    leak = diagnose("leak")["diagnosis"]
    found = [f for f in leak if f["kind"] == "leak"]
    planted = KEPT * STEPS  # bytes per epoch
    rate = next(e["value"] for e in found[0]["evidence"] if e["figure"] == "growth not explained by shapes")
    print(f"leak: {rate / 2**20:.2f} MiB per epoch against {planted / 2**20:.0f} planted")
    # one leak, at its rate (the step's 1 ms sleep is a wait in every call: a finding about time beside it)
    assert len(found) == 1 and abs(rate / planted - 1) < 0.10, leak


@pytest.mark.slow
@linux_only
def test_batches_that_grow_each_epoch_are_bigger_graphs_not_a_leak():
    grown = diagnose("grow")
    assert not [f for f in grown["diagnosis"] if f["kind"] == "leak"], grown["diagnosis"]
    creep = [f for f in grown["diagnosis"] if f["kind"] == "creep"]
    nodes = grown["nodes"]
    truth = PER_NODE * (sum(nodes[-STEPS:]) / STEPS - sum(nodes[:STEPS]) / STEPS)  # first epoch to last
    explained = next(e["value"] for e in creep[0]["evidence"] if e["figure"] == "growth explained by shapes")
    print(f"bigger graphs: {explained / 2**20:.1f} MiB explained by shapes against {truth / 2**20:.1f} planted")
    assert "explained by bigger graphs" in creep[0]["words"] and abs(explained / truth - 1) < 0.10
