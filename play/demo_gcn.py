"""A small decorated GCN training on a synthetic graph, printing gnnmon's report.

Run: ``make demo`` (or ``.venv/bin/python play/demo_gcn.py``). Writes ``runs/demo.jsonl``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gnnmon
from gnnmon import memory_scope, monitor_memory_device
from play.models import GCN
from play.synthetic import FLICKR, planted_partition


@monitor_memory_device(label="train_step")
def train_step(model, data, optimizer):
    model.train()
    optimizer.zero_grad(set_to_none=True)
    out = model(data.x, data.edge_index)
    loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
    loss.backward()
    optimizer.step()
    return loss.detach()


@torch.no_grad()
def accuracy(model, data, mask):
    model.eval()
    pred = model(data.x, data.edge_index).argmax(-1)
    return (pred[mask] == data.y[mask]).float().mean().item()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fraction", type=float, default=0.1, help="share of Flickr's size")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--out", default="runs/demo.jsonl")
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    spec = FLICKR.scaled(args.fraction)
    t0 = time.perf_counter()
    data = planted_partition(spec)
    print(f"data: synthetic stand-in {spec.name}: {data.num_nodes:,} nodes, {data.num_edges:,} edges, "
          f"{spec.num_features} features, {spec.num_classes} classes ({time.perf_counter() - t0:.1f} s)")
    model = GCN(spec.num_features, args.hidden, spec.num_classes)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    with gnnmon.collect(args.out, config=vars(args) | {"data": spec.name}) as run:
        for epoch in range(args.epochs):
            run.mark("epoch", epoch)
            loss = train_step(model, data, optimizer)
            with memory_scope(label="evaluate"):
                acc = accuracy(model, data, data.val_mask)
            print(f"epoch {epoch:2d}  loss {loss.item():.3f}  val acc {acc:.3f}", flush=True)
    print()
    print(run.report().markdown())
    print(f"rows written to {args.out}; reread with: gnnmon report {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
