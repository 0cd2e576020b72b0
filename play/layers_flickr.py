"""Where a GCN's step goes, layer by layer: GCN (hidden 256; ``--conv graphconv`` for GraphConv) on
the Flickr stand-in with NeighborLoader fanouts [25, 10], ``gnnmon.watch_layers`` on the model and
``gnnmon.watch_loader`` on the loader; prints the report's Layers section and the data figures.

    python play/layers_flickr.py [--fraction 0.1] [--steps 12] [--conv gcn|graphconv] [--device cpu]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gnnmon
from gnnmon.integrations.pyg_sampler import neighbor_loader
from gnnmon.report.markdown import layer_lines
from play.models import CONVS, GCN
from play.synthetic import FLICKR, planted_partition


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fraction", type=float, default=0.1, help="of Flickr's nodes and edges")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--conv", default="gcn", choices=sorted(CONVS))
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    gnnmon.exact_host_memory()
    torch.manual_seed(0)
    data = planted_partition(FLICKR.scaled(args.fraction))
    device = torch.device(args.device)
    loader = neighbor_loader(data, [25, 10], batch_size=1024, shuffle=True, input_nodes=data.train_mask)
    model = GCN(FLICKR.num_features, args.hidden, FLICKR.num_classes, conv=args.conv).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    @gnnmon.monitor_memory_device
    @gnnmon.cuda_timed
    def train_step(batch):
        batch = batch.to(device)
        out = model(batch.x, batch.edge_index)[: batch.batch_size]
        loss = F.cross_entropy(out, batch.y[: batch.batch_size])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    with gnnmon.collect() as run, gnnmon.watch_layers(model), gnnmon.watch_loader(loader) as batches:
        for i, batch in enumerate(batches):
            if i == args.steps:
                break
            train_step(batch)
    report = run.report()
    rows = run.records[1:] or run.records  # the first pays one-off costs: left out where others are
    print(f"{args.conv.upper()} hidden {args.hidden} on the Flickr stand-in at {args.fraction:g} "
          f"({data.num_nodes} nodes, {data.num_edges} edges), fanouts [25, 10], batch 1024, "
          f"{len(rows)} steps after the first, on {args.device}")
    print(f"median step {statistics.median(r['wall_s'] for r in rows) * 1e3:.1f} ms, "
          f"nodes {statistics.median(r['num_nodes'] for r in rows):.0f}, "
          f"edges {statistics.median(r['num_edges'] for r in rows):.0f}, "
          f"peak above start {statistics.median(r['mem_peak_delta_bytes'] for r in rows) / 2**20:.0f} MiB")
    print("data: " + ", ".join(f"{k} {statistics.median(r[k] for r in rows) * 1e3:.1f} ms"
                               for k in ("data_wait_s", "data_sample_s", "data_gather_s"))
          + ", nodes per hop " + " → ".join(f"{statistics.median(r[f'data_hop_{k}_nodes'] for r in rows):.0f}"
                                           for k in range(3)))
    print()
    print("\n".join(layer_lines(report.layers())))


if __name__ == "__main__":
    main()
