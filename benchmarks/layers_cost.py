"""What ``watch_layers`` and ``watch_loader`` cost on the README's Quick start loop, paired and
interleaved: each pair runs the same batch through the README's decorated step on a bare model and
on a watched copy (same weights), in alternating order; the figure is the median (and the mean,
which carries the one-in-N watched steps of ``every=N``) of the per-pair differences.

    python benchmarks/layers_cost.py [--pairs 400]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch_geometric.datasets import FakeDataset
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GCNConv, global_mean_pool

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gnnmon
from gnnmon import cuda_timed, gc_controlled, monitor_memory_device, phase


class GCN(torch.nn.Module):  # the README's
    def __init__(self, features: int, hidden: int, classes: int):
        super().__init__()
        self.conv1, self.conv2 = GCNConv(features, hidden), GCNConv(hidden, hidden)
        self.head = torch.nn.Linear(hidden, classes)

    def forward(self, batch: Any) -> torch.Tensor:
        x = F.relu(self.conv1(batch.x, batch.edge_index))
        x = F.relu(self.conv2(x, batch.edge_index))
        return self.head(global_mean_pool(x, batch.batch))


def make_step(label: str) -> Any:
    @monitor_memory_device(label=label)
    @cuda_timed
    @gc_controlled
    def train_step(model: Any, batch: Any, optimizer: Any) -> Any:
        gnnmon.record_graph(batch)
        with phase("forward"):
            loss = F.cross_entropy(model(batch), batch.y)
        with phase("backward"):
            loss.backward()
        with phase("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return loss

    return train_step


def paired(bare: Any, watched: Any, pairs: int) -> tuple[float, float, float]:
    """(median difference, mean difference, median bare call) in µs over ``pairs`` pairs."""
    diffs, base = [], []
    for i in range(pairs):
        order = (bare, watched) if i % 2 else (watched, bare)
        took = {}
        for fn in order:
            t0 = time.perf_counter_ns()
            fn(i)
            took[fn] = time.perf_counter_ns() - t0
        diffs.append(took[watched] - took[bare])
        base.append(took[bare])
    return statistics.median(diffs) / 1e3, statistics.fmean(diffs) / 1e3, statistics.median(base) / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=400)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dataset = FakeDataset(num_graphs=256, avg_num_nodes=40, num_channels=16, num_classes=4, task="graph")
    batches = list(DataLoader(dataset, batch_size=32))
    print(f"README Quick start loop (GCN 16-64-4, batches of 32 graphs), {args.pairs} pairs, "
          f"torch {torch.__version__}, {torch.get_num_threads()} thread")
    print("| variant | median extra µs/step | mean extra µs/step | bare step µs | extra % |")
    print("| --- | ---: | ---: | ---: | ---: |")
    with gnnmon.collect(max_records=100):
        for name, every, memory in (("watch_layers(every=1)", 1, True), ("watch_layers(every=10)", 10, True),
                                    ("watch_layers(every=1, memory=False)", 1, False)):
            model = GCN(16, 64, 4)
            twin = copy.deepcopy(model)
            opts = [torch.optim.Adam(m.parameters(), lr=1e-3) for m in (model, twin)]
            bare_step, watched_step = make_step("bare"), make_step("watched")
            with gnnmon.watch_layers(twin, every=every, memory=memory):
                for i in range(20):  # warm-up, both
                    bare_step(model, batches[i % len(batches)], opts[0])
                    watched_step(twin, batches[i % len(batches)], opts[1])
                med, mean, base = paired(
                    lambda i, f=bare_step, m=model, o=opts[0]: f(m, batches[i % len(batches)], o),
                    lambda i, f=watched_step, m=twin, o=opts[1]: f(m, batches[i % len(batches)], o),
                    args.pairs)
            print(f"| {name} | {med:.0f} | {mean:.0f} | {base:.0f} | {100 * mean / base:.1f} |")
        loader = DataLoader(dataset, batch_size=32)
        plain, watched_it = [iter(loader)], [iter(gnnmon.watch_loader(loader))]

        def take(holder: list[Any], make: Any) -> None:
            try:
                next(holder[0])
            except StopIteration:
                holder[0] = make()
                next(holder[0])

        med, mean, base = paired(lambda i: take(plain, lambda: iter(loader)),
                                 lambda i: take(watched_it, lambda: iter(gnnmon.watch_loader(loader))),
                                 args.pairs)
        print(f"| watch_loader (per batch, DataLoader of 32 graphs) | {med:.1f} | {mean:.1f} | {base:.0f} | "
              f"{100 * mean / base:.1f} |")


if __name__ == "__main__":
    main()
