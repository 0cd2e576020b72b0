"""A PyG GCN trained with Lightning, measured by gnnmon's callback: one row per training batch
(forward, backward and optimizer phases), the figures in Lightning's CSV log, then the run as a
report, a Perfetto trace and TensorBoard scalars.

    .venv/bin/python play/lightning_gcn.py                 # 3 epochs on CPU (or --device cuda)
    .venv/bin/python play/lightning_gcn.py --profile       # also a torch.profiler table with gnnmon's ranges

Writes runs/lightning.jsonl, runs/lightning.trace.json, runs/lightning_tb/ and runs/lightning_logs/.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import lightning
import torch
from lightning.pytorch.loggers import CSVLogger
from torch_geometric.datasets import FakeDataset
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GCNConv, global_mean_pool

import gnnmon
from gnnmon.integrations.lightning import GnnmonCallback
from gnnmon.report.renderers.trace import chrome_trace


class GraphGCN(lightning.LightningModule):
    """Two GCN layers, mean pooling, a linear head: graph classification."""

    def __init__(self, features: int, classes: int, hidden: int = 64) -> None:
        super().__init__()
        self.conv1, self.conv2 = GCNConv(features, hidden), GCNConv(hidden, hidden)
        self.head = torch.nn.Linear(hidden, classes)

    def forward(self, batch):
        h = self.conv1(batch.x, batch.edge_index).relu()
        h = self.conv2(h, batch.edge_index).relu()
        return self.head(global_mean_pool(h, batch.batch))

    def training_step(self, batch, batch_idx):
        loss = torch.nn.functional.cross_entropy(self(batch), batch.y)
        self.log("loss", loss, batch_size=batch.num_graphs)
        return loss

    def validation_step(self, batch, batch_idx):
        acc = (self(batch).argmax(-1) == batch.y).float().mean()
        self.log("val_acc", acc, batch_size=batch.num_graphs)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=0.01)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--graphs", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--out", default="runs")
    parser.add_argument("--profile", action="store_true", help="print torch.profiler's table with gnnmon's ranges")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    data = FakeDataset(num_graphs=args.graphs, avg_num_nodes=40, avg_degree=6, num_channels=32, num_classes=4)
    split = int(0.8 * len(data))
    train = DataLoader(data[:split], batch_size=args.batch_size, shuffle=True)
    val = DataLoader(data[split:], batch_size=args.batch_size)
    model = GraphGCN(data.num_features, data.num_classes)
    path = out / "lightning.jsonl"
    trainer = lightning.Trainer(
        accelerator=args.device, devices=1, max_epochs=args.epochs, log_every_n_steps=1,
        logger=CSVLogger(out, name="lightning_logs"), enable_progress_bar=False, enable_model_summary=False,
        enable_checkpointing=False,
        callbacks=[GnnmonCallback(str(path), sample=0.5)],
    )
    gnnmon.freeze_gc()  # the set-up's objects out of the collector's way (docs/timing-and-gc.md)
    if args.profile:
        with gnnmon.emit_ranges(), torch.profiler.profile() as prof:
            trainer.fit(model, train, val)
        print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=8))
    else:
        trainer.fit(model, train, val)
    report = gnnmon.Report.load(path)
    print(report.markdown())
    report.export("trace", out / "lightning.trace.json")
    trace = chrome_trace(report.result)
    scalars = report.export("tensorboard", out / "lightning_tb")
    logged = Path(trainer.logger.log_dir) / "metrics.csv"
    print(f"\n{len(trace['traceEvents'])} trace events -> {out / 'lightning.trace.json'} (open in ui.perfetto.dev); "
          f"{scalars} TensorBoard scalars -> {out / 'lightning_tb'}; Lightning's log with gnnmon/* -> {logged}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
