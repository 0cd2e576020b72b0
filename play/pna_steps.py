"""The seed PNA study's step analysis on the CPU: raw steps, then a GC-controlled baseline.

A PNA network trained on synthetic PCQM4Mv2-shaped molecules (the real dataset cannot be
downloaded here), held in a PyG ``InMemoryDataset`` as PyG's real datasets are, batched by PyG's
DataLoader. Two runs of the same training:

* ``raw`` — Python's automatic GC as is: gen-2 collections land inside steps and batch loads;
* ``controlled`` — automatic GC off for the epoch (``gc_paused``; the step is also
  ``@gc_controlled``) and ``gnnmon.collect_garbage()`` runs the deferred collection between epochs.

Each step is ``@cuda_timed`` with ``forward`` / ``backward`` / ``optimizer`` phases; loading a
batch is a row of its own (``phase("data")``). The report finds the spikes and says why, and
compares p50/p90/p99 with and without GC.

Run: ``.venv/bin/python play/pna_steps.py`` (about 40 s on 2 CPU cores). With
``--sample 0.5 --energy --country FRA --figures docs/figures`` it also samples utilisation every
0.5 s, adds energy and CO2 per row, and draws each run's timeline.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch_geometric.data import InMemoryDataset
from torch_geometric.loader import DataLoader
from torch_geometric.nn import PNAConv, global_max_pool
from torch_geometric.utils import degree

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gnnmon
from gnnmon import cuda_timed, gc_controlled, gc_paused, phase
from play.synthetic import PCQM4MV2, molecules


class PNA(torch.nn.Module):
    def __init__(self, deg: torch.Tensor, layers: int, hidden: int, atom_features: int, bond_features: int):
        super().__init__()
        self.embed = torch.nn.Linear(atom_features, hidden)
        self.edge_embed = torch.nn.Linear(bond_features, hidden)
        self.convs = torch.nn.ModuleList(
            PNAConv(hidden, hidden, aggregators=["mean", "min", "max", "std"],
                    scalers=["identity", "amplification", "attenuation"], deg=deg, edge_dim=hidden)
            for _ in range(layers)
        )
        self.head = torch.nn.Linear(hidden, 1)

    def forward(self, batch):
        x = self.embed(batch.x.float())
        e = self.edge_embed(batch.edge_attr.float())
        for conv in self.convs:
            x = F.relu(conv(x, batch.edge_index, e))
        return self.head(global_max_pool(x, batch.batch)).squeeze(-1)


class Molecules(InMemoryDataset):
    """Graphs collated into one store and sliced per item, like PyG's own datasets."""

    def __init__(self, graphs) -> None:
        super().__init__(None)
        self.data, self.slices = self.collate(graphs)


def degree_histogram(graphs) -> torch.Tensor:
    max_deg = max(int(degree(g.edge_index[1], g.num_nodes).max()) for g in graphs)
    hist = torch.zeros(max_deg + 1, dtype=torch.long)
    for g in graphs:
        hist += torch.bincount(degree(g.edge_index[1], g.num_nodes).long(), minlength=hist.numel())
    return hist


def train(mode: str, graphs, args, out: Path) -> gnnmon.Run:
    torch.manual_seed(0)
    model = PNA(degree_histogram(graphs), args.layers, args.hidden, PCQM4MV2.atom_features,
                PCQM4MV2.bond_features)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(Molecules(graphs), batch_size=args.batch_size, shuffle=True)

    def step(batch):
        with phase("forward"):
            loss = F.mse_loss(model(batch), batch.y)
        with phase("backward"):
            loss.backward()
        with phase("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    step = cuda_timed(label="step")(gc_controlled(step) if mode == "controlled" else step)
    config = {"mode": mode, "data": f"synthetic {PCQM4MV2.name} stand-in", **vars(args)}
    with gnnmon.collect(out, config=config, sample=args.sample, energy=args.energy,
                        country=args.country) as run:
        for epoch in range(args.epochs):
            run.mark("epoch", epoch)
            with gc_paused() if mode == "controlled" else _nothing():
                batches = iter(loader)
                for _ in range(len(loader)):
                    with phase("data"):
                        batch = next(batches)
                        gnnmon.record_graph(batch)
                    loss = step(batch)
            if mode == "controlled":
                gnnmon.collect_garbage()
            print(f"  [{mode}] epoch {epoch}  loss {loss.item():.4f}", flush=True)
    return run


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graphs", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--out", default="runs")
    parser.add_argument("--sample", type=float, default=None, help="utilisation sample interval, s")
    parser.add_argument("--energy", action="store_true", help="energy and CO2 per row")
    parser.add_argument("--country", default=None, help="ISO alpha-3 code for the carbon intensity")
    parser.add_argument("--figures", default=None, help="folder for the timeline PNGs")
    args = parser.parse_args(argv)
    graphs = molecules(PCQM4MV2, args.graphs)
    print(f"data: synthetic PCQM4Mv2 stand-in, {len(graphs):,} molecules "
          f"({sum(g.num_nodes for g in graphs) / len(graphs):.1f} atoms on average)")
    out = Path(args.out)
    runs = {mode: train(mode, graphs, args, out / f"pna_{mode}.jsonl") for mode in ("raw", "controlled")}
    for mode, run in runs.items():
        print(f"\n## {mode}\n")
        report = run.report()
        print(report.markdown())
        if args.figures:
            Path(args.figures).mkdir(parents=True, exist_ok=True)
            png = Path(args.figures) / f"pna_{mode}_timeline.png"
            report.plot_timeline(png, title=f"PNA, synthetic PCQM4Mv2, {mode} GC")
            print(f"timeline: {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
