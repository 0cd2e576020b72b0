"""Does ``gnnmon compare``'s gate decide on real reruns? A GraphSAGE model (500-128-7, two
``SAGEConv``) on a Flickr stand-in through a ``NeighborLoader`` ([10, 5], 512 seeds a batch;
gnnmon's pure-PyTorch sampler where pyg-lib is missing), two epochs, each run a fresh process with
torch on one thread (``--threads``) and ``collect(sched=True, sample=0.5)`` (so each row has its thread's CPU time,
and the machine's load is sampled). ``--runs N`` runs a side: side A
the code as it is, side B either the same code (identical) or with ``--planted`` more compute in
every step (a loop of matrix products for that share of the step's own CPU time; each B row records
the truth planted: ``planted_base_cpu_s``, the step's CPU time before the loop, ``planted_cpu_s``, the
loop's, and ``planted_iter_cpu_s``, its longest iteration, the most it can overshoot). Then the gate at
``--max-slowdown 5%``: N a side, and each pair of runs one a side. The runs go A B B A A B ..., so that
a machine whose speed drifts through the study slows both sides alike. ``--burners K`` runs K
CPU-burning processes beside every run (a shared machine).

    python play/compare_reruns.py --runs 5 --out runs/reruns                       # ~3 minutes on 2 cores
    python play/compare_reruns.py --runs 5 --planted 0.25 --out runs/planted
    python play/compare_reruns.py --runs 5 --burners 2 --out runs/loaded

``--tiny`` is what the test runs (a small graph, 2 runs a side).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHILD = r"""
import sys, time
import torch
import torch.nn.functional as F
from torch_geometric.nn import SAGEConv
import gnnmon
from gnnmon.integrations.pyg_sampler import neighbor_loader
from play.synthetic import FLICKR, planted_partition

path, scale, extra, threads = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
torch.manual_seed(0)
spec = FLICKR.scaled(scale)
data = planted_partition(spec)


class SAGE(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = SAGEConv(spec.num_features, 128), SAGEConv(128, spec.num_classes)

    def forward(self, x, edge_index):
        return self.c2(F.relu(self.c1(x, edge_index)), edge_index)


model = SAGE()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loader = neighbor_loader(data, [10, 5], batch_size=512, shuffle=True)
w = torch.randn(128, 128)


@gnnmon.monitor_memory_device
@gnnmon.cuda_timed
def train_step(batch):
    cpu0 = time.thread_time()
    with gnnmon.phase("forward"):
        out = model(batch.x, batch.edge_index)[: batch.batch_size]
        loss = F.cross_entropy(out, batch.y[: batch.batch_size])
    with gnnmon.phase("backward"):
        loss.backward()
    with gnnmon.phase("optimizer"):
        opt.step()
        opt.zero_grad()
    if extra:  # the planted slowdown: more compute, a share of the step's own CPU time
        with gnnmon.phase("planted"):
            start = time.thread_time()
            until = start + extra * (start - cpu0)
            now = start
            longest = 0.0  # the loop stops past `until` by less than one iteration's CPU time
            while now < until:
                (w @ w).sum()
                then = time.thread_time()
                longest, now = max(longest, then - now), then
            # the truth planted, for the test: the step's CPU time before the phase, the phase's, and
            # the longest iteration (the most the phase can overshoot extra x the first)
            fields = gnnmon.current_row().fields
            fields["planted_base_cpu_s"] = start - cpu0
            fields["planted_cpu_s"] = now - start
            fields["planted_iter_cpu_s"] = longest


with gnnmon.collect(path, mode="w", sample=0.5, sched=True) as run:
    for epoch in range(2):
        run.mark("epoch", epoch)
        for batch in gnnmon.watch_loader(loader):
            train_step(batch)
"""

BURN = "while True: pass"


def one_run(path: Path, scale: float, extra: float, threads: int = 1) -> float:
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path), str(scale), str(extra), str(threads)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode:
        raise RuntimeError(f"the run {path} failed: {proc.stderr[-2000:]}")
    return time.perf_counter() - t


def gate(bases: list[Path], news: list[Path]) -> dict[str, Any]:
    """``gnnmon compare`` at a 5 % limit: its exit status, verdict, the judged line and the notes."""
    from gnnmon.cli import main

    args = ["compare", *map(str, bases), *(["--"] if len(bases) > 1 else []), *map(str, news),
            "--max-slowdown", "5%", "--format", "json"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(args)
    data = json.loads(out.getvalue())
    judged = [d for d in data["decisions"] if d["scope"] == "all"]
    return {"exit": code, "verdict": data["verdict"], "notes": data["notes"],
            "judged": [{k: d[k] for k in ("figure", "change", "low", "high", "decision", "runs_needed", "test")}
                       for d in judged]}


def per_run(path: Path) -> dict[str, float | None]:
    """A run's steady steps: the median wall and thread CPU time (ms) and the others' load (% of a core)."""
    import gnnmon
    from gnnmon.report.stats import median

    rows = [r for r in gnnmon.load(path).records if r["label"] == "train_step" and r["index"] >= 2]

    def mid(key: str, scale: float = 1.0) -> float | None:
        values = sorted(float(r[key]) * scale for r in rows if r.get(key) is not None)
        return round(median(np.array(values)), 3) if values else None

    return {"wall_ms": mid("wall_s", 1e3), "cpu_ms": mid("thread_cpu_s", 1e3), "others_pct": mid("others_cpu_pct")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs a side (5)")
    parser.add_argument("--planted", type=float, default=0.0, help="side B's extra compute, a share of the step (0.25)")
    parser.add_argument("--burners", type=int, default=0, help="CPU-burning processes beside every run")
    parser.add_argument("--threads", type=int, default=1, help="torch's intra-op threads in the runs (1)")
    parser.add_argument("--scale", type=float, default=0.1, help="the Flickr stand-in's size, a share of Flickr")
    parser.add_argument("--tiny", action="store_true", help="2 runs a side on a small graph (the test's size)")
    parser.add_argument("--out", default="runs/reruns")
    args = parser.parse_args(argv)
    runs, scale = (2, 0.01) if args.tiny else (args.runs, args.scale)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    a, b = [out / f"a{i}.jsonl" for i in range(runs)], [out / f"b{i}.jsonl" for i in range(runs)]
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(args.burners)]
    try:
        seconds = []
        for i in range(runs):  # A B B A A B ...: a drift in the machine's speed falls on both sides alike
            pair = [(a[i], 0.0), (b[i], args.planted)]
            for path, extra in pair if i % 2 == 0 else pair[::-1]:
                seconds.append(one_run(path, scale, extra, args.threads))
    finally:
        for p in burners:
            p.kill()
            p.wait()
    result: dict[str, Any] = {
        "runs a side": runs, "planted": args.planted, "burners": args.burners, "threads": args.threads, "scale": scale,
        "seconds_per_run": sum(seconds) / len(seconds),
        "per run": {"A": [per_run(p) for p in a], "B": [per_run(p) for p in b]},
        "all runs a side": gate(a, b),
        "one a side": [gate([a[i]], [b[i]]) for i in range(runs)]}
    text = json.dumps(result, indent=1)
    (out / "reruns.json").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
