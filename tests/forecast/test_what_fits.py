"""One answer to "what fits", on the CPU with exact host memory: at three targets planted around
the peak of a GraphSAGE step's own batches (3 MiB under it, 15 MiB over it, and 200 MiB over it,
where every seed fits), the batch-size search of ``gnnmon.calibrate(capacity=...)`` and the budget
of ``gnnmon.forecast(...).budget()`` from its model agree within their stated bounds (the
search's bracket, the budget's upper and lower bounds), and each answer, run afterwards in the same
process on batches drawn as the loader draws them, peaks under the target.

The steps run in a fresh process (exact host memory is for the whole process, and is called before
anything else); issue 42's graph at a tenth (10,000 nodes, 5,000 training seeds)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("torch_geometric")

CHILD = """
import json

import gnnmon

gnnmon.exact_host_memory()  # first thing: RSS follows the tensors
import torch

from gnnmon.integrations.pyg_sampler import neighbor_loader
from gnnmon.report.memory.model import host_resolution
from play.memory_forecast import sage_graph, sage_step
from play.models import SAGE

MiB = 2**20
torch.manual_seed(0)
data = sage_graph(True)
net = SAGE(data.num_features, 128, int(data.y.max()) + 1)
optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
loader = neighbor_loader(data, [10, 5], batch_size=128, input_nodes=data.train_mask, shuffle=True)
step = sage_step(net, optimizer, torch.device("cpu"))
with gnnmon.collect() as run:  # the loader's own batches, warm: the targets are planted around their peak
    for i, batch in enumerate(loader):
        if i == 3:
            break
        step(batch)
batch = None
base = max(r["mem_peak_bytes"] for r in run.records)


def run_at(k):
    # six batches of k seeds drawn as the loader draws them, afterwards, through the same loader
    order = torch.randperm(len(loader.dataset))
    with gnnmon.collect() as run:
        for i in range(0, min(6 * k, len(order) - k + 1), k):
            batch = loader(order[i:i + k])
            step(batch)
            batch = None
    return [r["mem_peak_bytes"] for r in run.records]


out = []
for extra in (-3, 15, 200):
    capacity = (base + extra * MiB) / 0.9
    cal = gnnmon.calibrate(step, loader, capacity=capacity, restore=(net, optimizer))
    found = cal.search
    budget = gnnmon.forecast(loader, cal, capacity, progress=False).budget(0.9)
    out.append({"extra_mib": extra, "target": 0.9 * capacity, "items": len(loader.dataset),
                "search": found.batch_size, "over": found.over, "margin": found.margin_bytes,
                "resolution": host_resolution(), "summary": cal.summary(),
                "budget": budget.batch_size, "high": budget.batch_size_high, "said": str(budget),
                "search_peaks": run_at(found.batch_size) if found.batch_size else [],
                "budget_peaks": run_at(budget.batch_size) if budget.batch_size else []})
print(json.dumps(out))
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="exact host peaks need Linux's VmHWM")
def test_the_search_and_the_budget_agree_and_each_answer_runs_under_the_target(tmp_path):
    from tests.scripts import ROOT

    script = tmp_path / "what_fits.py"
    script.write_text(CHILD)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900, cwd=tmp_path,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [r["extra_mib"] for r in results] == [-3, 15, 200]
    for r in results:
        said = f"{r['extra_mib']:+} MiB: {r['summary']}\n{r['said']}"
        # a peak counts as under the target only by what the host's RSS cannot resolve
        assert r["margin"] == r["resolution"] > 0, said
        assert r["search"] >= 1 and r["budget"] >= 1, said
        top = r["over"] - 1 if r["over"] is not None else r["items"]
        assert r["budget"] <= top and r["search"] <= r["high"], said  # the bracket and the bounds overlap
        assert max(r["search_peaks"]) <= r["target"], (said, r["search_peaks"])
        assert max(r["budget_peaks"]) <= r["target"], (said, r["budget_peaks"])
    under, beyond, every = results
    assert under["search"] < 128 < beyond["search"]  # under the loader's batch size, and beyond it
    assert every["search"] == every["budget"] == every["items"]  # every seed fits: both say so
