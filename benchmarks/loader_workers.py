"""A NeighborLoader with forked DataLoader workers feeding a GCN step under the full stack: every
batch arrives, no worker dies, every row is read.

Run on a GPU: ``python benchmarks/loader_workers.py --device cuda`` (300 steps, 4 workers, the
Flickr stand-in; half a minute on an H100); ``--device cpu --steps 20 --workers 2 --scale 0.02``
is what the test runs. The step is PyG's usual one: the loader's batch arrives on the host and
``batch.to(device)`` moves it inside the decorated step, with forward, backward and optimizer
phases, inside ``collect(path, sample=0.5)``. Workers fork every epoch (not persistent) while
earlier rows' events may still be pending, the case that killed a worker on an H200.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import gnnmon  # noqa: E402
from benchmarks.gpu import phased_step  # noqa: E402
from gnnmon import cuda_timed, gc_controlled, monitor_memory_device  # noqa: E402


def run(device: str, steps: int, workers: int, scale: float, out: Path) -> dict[str, Any]:
    from gnnmon.integrations.pyg_sampler import neighbor_loader
    from play.models import GCN
    from play.synthetic import FLICKR, planted_partition

    dev = torch.device(device)
    spec = FLICKR if scale == 1.0 else FLICKR.scaled(scale)
    data = planted_partition(spec)
    model = GCN(spec.num_features, 256, spec.num_classes).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    @monitor_memory_device
    @cuda_timed
    @gc_controlled
    def train_step(batch: Any) -> torch.Tensor:
        return phased_step(model, batch.to(dev, non_blocking=True), opt)  # benchmarks/gpu.py's step

    batches = epochs = 0
    t0 = time.perf_counter()
    with gnnmon.collect(out / "workers.jsonl", sample=0.5) as collected:
        while batches < steps:
            loader = neighbor_loader(data, [10, 5], batch_size=1024 if scale == 1.0 else 64,
                                     input_nodes=data.train_mask, shuffle=True, num_workers=workers,
                                     multiprocessing_context="fork")
            collected.mark("epoch", epochs)
            for batch in loader:
                train_step(batch)
                batches += 1
                if batches == steps:
                    break
            epochs += 1
    seconds = time.perf_counter() - t0
    rows = gnnmon.load(out / "workers.jsonl").records
    return {"device": device, "steps": steps, "workers": workers, "epochs": epochs, "batches": batches,
            "rows": len(rows), "seconds": seconds,
            "backends": sorted({r["backend"] for r in rows}), "sources": sorted({r["device_source"] for r in rows}),
            "device_s_read": sum(r["device_s"] is not None for r in rows),
            "phases_read": sum(r.get("phase_optimizer_s") is not None for r in rows),
            "children_forked": collected.result().children_forked}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--scale", type=float, default=1.0, help="the Flickr stand-in's size, a share of Flickr")
    parser.add_argument("--out", help="a folder for the run file and its summary (JSON)")
    args = parser.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="gnnmon-workers-"))
    out.mkdir(parents=True, exist_ok=True)
    result = run(args.device, args.steps, args.workers, args.scale, out)
    (out / "workers.json").write_text(json.dumps(result, indent=1))
    ok = result["rows"] == result["batches"] == args.steps and result["device_s_read"] == args.steps
    print(json.dumps(result), "\n" + ("every batch arrived and every row was read" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
