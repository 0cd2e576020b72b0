"""Does ``gnnmon compare``'s 5 % gate hold on identical reruns? Issue 52's loop: a GraphSAGE model
(64-128-10, two ``SAGEConv``) on a synthetic graph through a ``NeighborLoader`` ([10, 5], 512 seeds a
batch; gnnmon's pure-PyTorch sampler where pyg-lib is missing), two epochs, each run a fresh
process. ``--runs N`` identical runs, then ``N // 2`` runs whose optimizer phase sleeps 10 % of the
step longer (a planted slowdown). Pairs of identical runs (1 vs 2, 3 vs 4, ...) and the planted runs
against the identical ones are gated at ``--max-slowdown 5%``, one run a side and three a side;
the tally says how many passed, regressed or were inconclusive.

    python play/compare_reruns.py --runs 20 --out runs/reruns     # about 10 minutes on 2 cores

``--tiny`` is what the test runs (a small graph, 2 identical runs and a planted one).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

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

path, scale, extra = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
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
slept = []


@gnnmon.monitor_memory_device
@gnnmon.cuda_timed
def train_step(batch):
    t0 = time.perf_counter()
    with gnnmon.phase("forward"):
        out = model(batch.x, batch.edge_index)[: batch.batch_size]
        loss = F.cross_entropy(out, batch.y[: batch.batch_size])
    with gnnmon.phase("backward"):
        loss.backward()
    with gnnmon.phase("optimizer"):
        opt.step()
        opt.zero_grad()
        if extra:
            time.sleep(extra * (time.perf_counter() - t0))  # the planted slowdown: a share of the step


with gnnmon.collect(path, mode="w", sample=0.5) as run:
    for epoch in range(2):
        run.mark("epoch", epoch)
        for batch in gnnmon.watch_loader(loader):
            train_step(batch)
"""


def one_run(path: Path, scale: float, extra: float) -> float:
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path), str(scale), str(extra)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode:
        raise RuntimeError(f"the run {path} failed: {proc.stderr[-2000:]}")
    return time.perf_counter() - t


def gate(bases: list[Path], news: list[Path]) -> int:
    from gnnmon.cli import main

    args = ["compare", *map(str, bases), *(["--"] if len(bases) > 1 else []), *map(str, news),
            "--max-slowdown", "5%", "--format", "json"]
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(args)


def tally(codes: list[int]) -> dict[str, int]:
    names = {0: "passed", 1: "regressed", 4: "inconclusive"}
    out = {name: 0 for name in names.values()}
    for code in codes:
        out[names.get(code, f"exit {code}")] = out.get(names.get(code, f"exit {code}"), 0) + 1
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="identical runs (even); half as many planted ones")
    parser.add_argument("--planted", type=int, help="planted runs (default: half the identical ones)")
    parser.add_argument("--scale", type=float, default=0.1, help="the Flickr stand-in's size, a share of Flickr")
    parser.add_argument("--tiny", action="store_true", help="3 runs on a small graph (the test's size)")
    parser.add_argument("--out", default="runs/reruns")
    args = parser.parse_args(argv)
    runs, scale = (2, 0.01) if args.tiny else (args.runs - args.runs % 2, args.scale)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    same = [out / f"same{i}.jsonl" for i in range(runs)]
    planted_runs = runs // 2 if args.planted is None or args.tiny else args.planted
    slow = [out / f"planted{i}.jsonl" for i in range(planted_runs)]
    seconds = [one_run(p, scale, 0.0) for p in same] + [one_run(p, scale, 0.10) for p in slow]
    pairs = [gate([same[i]], [same[i + 1]]) for i in range(0, runs, 2)]
    planted = [gate([same[2 * i]], [slow[i]]) for i in range(min(len(slow), runs // 2))]
    trios = [gate(same[i:i + 3], same[i + 3:i + 6]) for i in range(0, runs - 5, 6)]
    planted_trios = [gate(same[i:i + 3], slow[i // 2:i // 2 + 3]) for i in range(0, min(runs, 2 * len(slow)) - 5, 6)]
    result: dict[str, Any] = {
        "runs": runs, "scale": scale, "seconds_per_run": sum(seconds) / len(seconds),
        "identical pairs": tally(pairs), "planted +10 % (optimizer), one a side": tally(planted),
        "identical, three a side": tally(trios), "planted +10 %, three a side": tally(planted_trios)}
    text = json.dumps(result, indent=1)
    (out / "reruns.json").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
