"""The diagnosis and ``gnnmon compare`` on a real PyG model: a two-layer GCN classifying synthetic
graphs (PyG's FakeDataset: 40 nodes a graph on average, 16 features) through PyG's DataLoader, on the CPU in seconds.

Three runs: ``base`` (batches of 32 graphs), ``bigger`` (64 graphs a batch: twice the nodes and
edges) and ``slower`` (the same batches as ``base`` with a forward that does its convolutions twice).
Each run's report opens with its diagnosis; ``gnnmon compare`` then judges bigger and slower
against base. Run: ``python play/diagnosis_compare.py [--out runs/diagnosis]``; docs/diagnosis.md
shows what it printed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch_geometric.datasets import FakeDataset
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GCNConv, global_mean_pool

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import gnnmon
from gnnmon import cuda_timed, monitor_memory_device, phase


class GCN(torch.nn.Module):
    def __init__(self, features: int, hidden: int = 64, repeat: int = 1) -> None:
        super().__init__()
        self.conv1, self.conv2 = GCNConv(features, hidden), GCNConv(hidden, hidden)
        self.head = torch.nn.Linear(hidden, 4)
        self.repeat = repeat  # convolutions done this many times (the planted slowdown)

    def forward(self, batch):
        for _ in range(self.repeat):
            x = F.relu(self.conv1(batch.x, batch.edge_index))
            x = F.relu(self.conv2(x, batch.edge_index))
        return self.head(global_mean_pool(x, batch.batch))


def train(path: Path, batch_size: int, repeat: int, graphs: list, epochs: int = 3) -> None:
    torch.manual_seed(0)
    model = GCN(graphs[0].num_features, repeat=repeat)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    @monitor_memory_device
    @cuda_timed
    def train_step(batch):
        gnnmon.record_graph(batch)
        with phase("forward"):
            loss = F.cross_entropy(model(batch), batch.y)
        with phase("backward"):
            loss.backward()
        with phase("optimizer"):
            optimizer.step()
            optimizer.zero_grad()

    loader = DataLoader(graphs, batch_size=batch_size, shuffle=True)
    with gnnmon.collect(path, mode="w", sample=0.2) as run:
        for epoch in range(epochs):
            run.mark("epoch", epoch)
            for batch in gnnmon.watch_loader(loader):
                train_step(batch)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="runs/diagnosis")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    graphs = FakeDataset(num_graphs=1024, avg_num_nodes=40, num_channels=16, num_classes=4, task="graph")
    for name, batch_size, repeat in (("base", 32, 1), ("bigger", 64, 1), ("slower", 32, 2)):
        train(out / f"{name}.jsonl", batch_size, repeat, graphs)
    print(gnnmon.Report.load(out / "base.jsonl").markdown().split("### train_step")[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
