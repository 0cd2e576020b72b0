"""Will it fit? Fit a step's memory model on small batches, forecast larger ones, then run them.

Two models, each trained for real with ``@monitor_memory_device`` on its step:

* ``node``: a GCN on the Flickr stand-in with ``NeighborLoader``: the model is fitted on one pass
  of small batches (32, 64 and 128 seed nodes, fanouts [10, 5]), then batch sizes 256-1024 and
  fanouts [15, 10] and [25, 10] are forecast (``gnnmon.forecast`` over each loader: its sampler
  only) and run;
* ``graph``: a GIN graph regression on QM9-shaped molecules with PyG's ``DataLoader``: fitted on
  batches of 16-64 molecules, batch sizes 128-512 forecast and run.

For each configuration: the forecast peak of its worst batch, the measured peak of the run, and
the error; then the budget ``forecast(...).budget(0.9)`` recommends for ``--capacity`` and whether
a run at that budget stayed under the target. The peak is the absolute one (``mem_peak_bytes``):
on the CPU the process's RSS, made exact by ``gnnmon.exact_host_memory()``; on a GPU the caching
allocator's.

Run: ``python play/memory_forecast.py`` (a few minutes on 2 CPU cores), ``--device cuda``,
``--tiny`` (what the test runs). Writes ``runs/memory_forecast.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch_geometric.loader import DataLoader, DynamicBatchSampler
from torch_geometric.nn import GINConv, global_add_pool

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gnnmon
from gnnmon.report.memory_model import format_bytes
from play.models import GCN
from play.neighbor_sampler import make_loader
from play.synthetic import FLICKR, QM9, molecules, planted_partition


class GIN(torch.nn.Module):
    """Two GIN layers over embedded atom types, summed per molecule, a linear head."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(16, hidden)
        mlp = lambda: torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),  # noqa: E731
                                          torch.nn.Linear(hidden, hidden))
        self.convs = torch.nn.ModuleList([GINConv(mlp()), GINConv(mlp())])
        self.head = torch.nn.Linear(hidden, 1)

    def forward(self, batch: Any) -> torch.Tensor:
        h = self.embed(batch.x[:, 0].clamp(0, 15))
        for conv in self.convs:
            h = F.relu(conv(h, batch.edge_index))
        return self.head(global_add_pool(h, batch.batch)).squeeze(-1)


def train(step: Callable[[Any], Any], loaders: Iterable[Any], limit: int) -> None:
    """Run ``step`` on up to ``limit`` batches of each loader."""
    for loader in loaders:
        for i, batch in enumerate(loader):
            if i >= limit:
                break
            step(batch)


def node_study(device: torch.device, tiny: bool) -> tuple[Callable, Any, list, list]:
    data = planted_partition(FLICKR.scaled(0.02 if tiny else 0.1), seed=0)
    model = GCN(data.num_features, 128, int(data.y.max()) + 1).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    @gnnmon.monitor_memory_device(label="train_step")
    def step(batch: Any) -> None:
        batch = batch.to(device)
        out = model(batch.x, batch.edge_index)
        F.cross_entropy(out[: batch.batch_size], batch.y[: batch.batch_size]).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def loader(batch_size: int, fanouts: list[int]) -> Any:
        return make_loader(data, fanouts, batch_size=batch_size, shuffle=True)

    fit = [loader(b, [10, 5]) for b in (32, 64, 128)]
    sizes = (128, 256) if tiny else (256, 512, 1024)
    tests = [(f"batch {b}, fanouts [10, 5]", loader(b, [10, 5])) for b in sizes]
    tests += [(f"batch 128, fanouts {f}", loader(128, f)) for f in ([15, 10], [25, 10])]
    return step, lambda budget: make_loader(data, [10, 5], batch_size=budget["batch_size"], shuffle=True), fit, tests


def graph_study(device: torch.device, tiny: bool) -> tuple[Callable, Any, list, list]:
    graphs = molecules(QM9, 2000 if tiny else 8000, seed=1)
    model = GIN(64).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    @gnnmon.monitor_memory_device(label="train_step")
    def step(batch: Any) -> None:
        batch = batch.to(device)
        F.mse_loss(model(batch), batch.y.view(-1).float()).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    fit = [DataLoader(graphs, batch_size=b, shuffle=True) for b in (16, 32, 64)]
    sizes = (128, 256) if tiny else (128, 256, 512)
    tests = [(f"batch {b}", DataLoader(graphs, batch_size=b, shuffle=True)) for b in sizes]

    def at_budget(budget: dict[str, Any]) -> Any:
        sampler = DynamicBatchSampler(graphs, max_num=budget["max_num_nodes"], mode="node", shuffle=True)
        return DataLoader(graphs, batch_sampler=sampler)

    return step, at_budget, fit, tests


def measure(study: str, device: torch.device, tiny: bool, capacity: str | None, out: Path) -> dict[str, Any]:
    torch.manual_seed(0)
    step, at_budget, fit_loaders, tests = (node_study if study == "node" else graph_study)(device, tiny)
    limit = 12 if tiny else 40
    with gnnmon.collect(out / f"memory_forecast_{study}_fit.jsonl") as run:
        train(step, fit_loaders, limit)
    model = run.report().memory_model("train_step", "mem_peak_bytes")
    result: dict[str, Any] = {"study": study, "model": model.as_dict(), "configs": []}
    if not model.trusted:
        return result
    for name, loader in tests:
        fc = gnnmon.forecast(loader, model, progress=False)
        with gnnmon.collect() as run:
            train(step, [loader], limit)
        rows = [r for r in run.records if r["label"] == "train_step"]
        errors = [model.predict(**{t: r[t] for t in model.terms}).bytes / r["mem_peak_bytes"] - 1 for r in rows]
        result["configs"].append({"config": name, "forecast_worst_bytes": fc.worst[0]["bytes"],
                                  "forecast_upper_bytes": fc.peak_bytes,
                                  "measured_max_bytes": max(r["mem_peak_bytes"] for r in rows),
                                  "per_batch_error_pct": 100 * max(errors, key=abs), "steps": len(rows)})
    cap = capacity or int(1.5 * model.predict(**{t: model.ranges[t][1] for t in model.terms}).bytes)
    fc = gnnmon.forecast(tests[-1][1], model, cap, progress=False)
    budget = fc.budget(0.9)
    with gnnmon.collect() as run:
        train(step, [at_budget(budget)], limit)
    peak = max(r["mem_peak_bytes"] for r in run.records if r["label"] == "train_step")
    result["budget"] = {**budget, "capacity_bytes": fc.capacity_bytes, "measured_max_bytes": peak,
                        "stayed_under": peak <= budget["target_bytes"]}
    return result


def markdown(results: list[dict[str, Any]], command: str, device: torch.device) -> str:
    lines = ["# Memory forecast: fitted on small batches, checked on larger ones", "",
             f"`{command}` on {device} (the peak: {'RSS, exact' if device.type == 'cpu' else 'allocator'}). "
             "Forecast worst: the forecast for the worst batch the loader's scan found; measured max: the "
             "highest peak of the run (other batches: sampling differs between scan and run); error above "
             "the constant: the error over the part of the peak that grows with the batch; per-batch error: "
             "each run batch's forecast from its own shape against its measured peak, the worst.", ""]
    for r in results:
        lines += [f"## {r['study']}", "", f"Model: {r['model']['summary']}", ""]
        if not r["configs"]:
            continue
        const = r["model"]["coefficients"]["const"]
        lines += ["| configuration | steps | forecast worst | upper bound | measured max | error | error above "
                  "the constant | worst per-batch error |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for c in r["configs"]:
            f, m = c["forecast_worst_bytes"], c["measured_max_bytes"]
            lines.append(f"| {c['config']} | {c['steps']} | {format_bytes(f)} | {format_bytes(c['forecast_upper_bytes'])} "
                         f"| {format_bytes(m)} | {100 * (f / m - 1):+.1f} % | {100 * (f - m) / (m - const):+.1f} % "
                         f"| {c['per_batch_error_pct']:+.1f} % |")
        b = r["budget"]
        lines += ["", f"Budget for a capacity of {format_bytes(b['capacity_bytes'])} at 90 % "
                      f"({format_bytes(b['target_bytes'])}): batch size {b['batch_size']:,}, DynamicBatchSampler "
                      f"max_num {b['max_num_nodes']:,} nodes or {b['max_num_edges']:,} edges. A run at that budget "
                      f"peaked at {format_bytes(b['measured_max_bytes'])}: "
                      f"{'under' if b['stayed_under'] else 'OVER'} the target.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--tiny", action="store_true", help="small graphs and few steps (the test)")
    parser.add_argument("--study", choices=("node", "graph", "both"), default="both")
    parser.add_argument("--capacity", help="the memory to budget for (default: 1.5x the largest fitted peak)")
    parser.add_argument("--out", default="runs")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cpu":
        gnnmon.exact_host_memory()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    studies = ("node", "graph") if args.study == "both" else (args.study,)
    results = [measure(s, device, args.tiny, args.capacity, out) for s in studies]
    command = "python play/memory_forecast.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(results, command.strip(), device)
    (out / "memory_forecast.md").write_text(text)
    (out / "memory_forecast.json").write_text(json.dumps(results, indent=1, default=str))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
