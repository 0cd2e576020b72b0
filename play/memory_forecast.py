"""Will it fit? Fit a step's memory model on small batches, forecast larger ones, then run them.

Two models, each trained for real with ``@monitor_memory_device`` on its step:

* ``node``: a GCN on the Flickr stand-in with ``NeighborLoader``: the model is fitted on one pass
  of small batches (32, 64 and 128 seed nodes, fanouts [10, 5]), then batch sizes 256-1024 and
  fanouts [15, 10] and [25, 10] are forecast (``gnnmon.forecast`` over each loader: its sampler
  only) and run;
* ``graph``: a GIN graph regression on QM9-shaped molecules with PyG's ``DataLoader``: fitted on
  batches of 16-64 molecules, batch sizes 128-512 forecast and run;
* ``sage``: issue 42's GraphSAGE (64-128-128-10) with ``NeighborLoader([10, 5])`` on a synthetic
  100,000-node graph (10 edges per node): fitted by ``gnnmon.calibrate`` on an ordinary loader of
  512 seed nodes (its sizes: 128-1,024), then batch sizes 2,048 and 4,096 and the full-batch step
  on the whole graph forecast and run;
* ``link``: the same encoder on a link-prediction step (dot-product scores, one negative per
  positive) with ``LinkNeighborLoader([10, 5])``, calibrated on 256 seed edges; 1,024 and 2,048
  forecast and run.

Every study ends with a control: the fitted batch size again, after everything else ran, its peaks
against the model's forecast for their shapes (the median gap: how far the process's RSS constant
drifted while the configurations ran).

For each configuration: the forecast peak of its worst batch, the measured peak of the run, the
error, and whether each run batch's upper bound (from its own shape) covered its measured peak; then
the budget ``forecast(...).budget(0.9)`` recommends for ``--capacity`` and whether a run at that
budget stayed under the target. The peak is the absolute one (``mem_peak_bytes``): on the CPU the
process's RSS, made exact by ``gnnmon.exact_host_memory()``; on a GPU the caching allocator's.

Run: ``python play/memory_forecast.py`` (a few minutes on 2 CPU cores), ``--device cuda``,
``--tiny`` (what the test runs). Writes ``runs/memory_forecast.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch_geometric.loader import DataLoader, DynamicBatchSampler
from torch_geometric.nn import GINConv, global_add_pool

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gnnmon
from gnnmon.integrations.pyg_sampler import link_neighbor_loader, neighbor_loader
from gnnmon.report.memory.model import format_bytes
from play.models import GCN, SAGE
from play.synthetic import FLICKR, QM9, GraphSpec, molecules, planted_partition

STUDIES = ("node", "graph", "sage", "dense", "link")
SAGE_GRAPH = GraphSpec("synthetic", 100_000, 1_000_000, 64, 10)
"""Issue 42's graph: 100,000 nodes, 10 edges per node (both directions), 64 features, 10 classes."""
DENSE_GRAPH = GraphSpec("synthetic", 60_000, 1_200_000, 64, 10)
"""Issue 53's graph: 60,000 nodes, 20 edges per node, where a full batch has 10-20 times the edges
per node a sampled batch has."""


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


class Timeline:
    """The step, noting each call's phase, its start (the process's memory before the step: RSS on
    the CPU) and its peak, in the order they ran."""

    def __init__(self, step: Callable[[Any], Any]) -> None:
        self.step = step
        self.phase = "fit"
        self.calls: list[tuple[str, float, float]] = []

    def __call__(self, batch: Any) -> None:
        self.step(batch)
        row = gnnmon.active_run().records[-1]
        self.calls.append((self.phase, float(row["mem_start_bytes"]), float(row["mem_peak_bytes"])))

    def start(self, phase: str) -> float:
        """The median start of ``phase``'s calls, bytes."""
        starts = sorted(c[1] for c in self.calls if c[0] == phase)
        return starts[len(starts) // 2]


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
        return neighbor_loader(data, fanouts, batch_size=batch_size, shuffle=True)

    fit = [loader(b, [10, 5]) for b in (32, 64, 128)]
    sizes = (128, 256) if tiny else (256, 512, 1024)
    tests = [(f"batch {b}, fanouts [10, 5]", loader(b, [10, 5])) for b in sizes]
    tests += [(f"batch 128, fanouts {f}", loader(128, f)) for f in ([15, 10], [25, 10])]
    return step, lambda budget: neighbor_loader(data, [10, 5], batch_size=budget["batch_size"],
                                                shuffle=True), fit, tests


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


def sage_graph(tiny: bool) -> Any:
    """:data:`SAGE_GRAPH` (a tenth of it at ``tiny``)."""
    return planted_partition(SAGE_GRAPH.scaled(0.1) if tiny else SAGE_GRAPH, seed=0)


def sage_step(model: SAGE, optimizer: Any, device: torch.device,
              backward: Callable[[torch.Tensor], Any] | None = None) -> Callable[[Any], None]:
    """The node-classification step, decorated: a ``NeighborLoader`` batch's loss on its seed nodes,
    the whole graph's on its training nodes; ``backward``: how to run it (Lightning's
    ``manual_backward``), ``loss.backward()`` by default."""

    @gnnmon.monitor_memory_device(label="train_step")
    def step(batch: Any) -> None:
        batch = batch.to(device)
        out = model(batch.x, batch.edge_index)
        seeds = getattr(batch, "batch_size", None)
        pick = slice(0, seeds) if seeds is not None else batch.train_mask
        loss = F.cross_entropy(out[pick], batch.y[pick])
        (backward or torch.Tensor.backward)(loss)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def sage_study(device: torch.device, tiny: bool) -> dict[str, Any]:
    data = sage_graph(tiny)
    model = SAGE(data.num_features, 128, int(data.y.max()) + 1).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def loader(batch_size: int) -> Any:
        return neighbor_loader(data, [10, 5], batch_size=batch_size, input_nodes=data.train_mask, shuffle=True)

    base = 128 if tiny else 512
    sizes = (512, 1024) if tiny else (2048, 4096)
    tests: list[tuple[str, Any]] = [(f"batch {b}, fanouts [10, 5]", loader(b)) for b in sizes]
    return {"step": sage_step(model, optimizer, device), "ordinary": loader(base),
            "at_budget": lambda budget: loader(budget["batch_size"]),
            "tests": [*tests, (f"full batch ({data.num_nodes:,} nodes)", [data])], "budget_from": tests[-1][1],
            "control": (f"batch {base} again (control)", loader(base)), "sampler": loader(base).sampler_name}


def dense_study(device: torch.device, tiny: bool) -> dict[str, Any]:
    """Issue 53's case: the sage model on :data:`DENSE_GRAPH`, ``NeighborLoader([15, 10])`` from 512
    seeds (64 tiny); 8 times the batch and the full batch forecast and run."""
    data = planted_partition(DENSE_GRAPH.scaled(0.1) if tiny else DENSE_GRAPH, seed=0)
    model = SAGE(data.num_features, 128, int(data.y.max()) + 1).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def loader(batch_size: int) -> Any:
        return neighbor_loader(data, [15, 10], batch_size=batch_size, input_nodes=data.train_mask, shuffle=True)

    base = 64 if tiny else 512
    return {"step": sage_step(model, optimizer, device), "ordinary": loader(base),
            "at_budget": lambda budget: loader(budget["batch_size"]),
            "tests": [(f"batch {8 * base} (8x), fanouts [15, 10]", loader(8 * base)),
                      (f"full batch ({data.num_nodes:,} nodes, {data.num_edges:,} edges)", [data])],
            "budget_from": loader(8 * base),
            "control": (f"batch {base} again (control)", loader(base)), "sampler": loader(base).sampler_name}


def link_study(device: torch.device, tiny: bool) -> dict[str, Any]:
    data = sage_graph(tiny)
    model = SAGE(data.num_features, 128, int(data.y.max()) + 1).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    pick = torch.randperm(data.num_edges, generator=torch.Generator().manual_seed(3))[: 4000 if tiny else 40_000]
    seeds = data.edge_index[:, pick]

    @gnnmon.monitor_memory_device(label="train_step")
    def step(batch: Any) -> None:
        batch = batch.to(device)
        z = model.encode(batch.x, batch.edge_index)
        src, dst = batch.edge_label_index
        loss = F.binary_cross_entropy_with_logits((z[src] * z[dst]).sum(-1), batch.edge_label)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def loader(batch_size: int) -> Any:
        return link_neighbor_loader(data, [10, 5], edge_label_index=seeds, neg_sampling_ratio=1.0,
                                batch_size=batch_size, shuffle=True)

    base = 64 if tiny else 256
    sizes = (256, 512) if tiny else (1024, 2048)
    tests = [(f"batch {b} edges, fanouts [10, 5]", loader(b)) for b in sizes]
    return {"step": step, "ordinary": loader(base), "at_budget": lambda budget: loader(budget["batch_size"]),
            "tests": tests, "budget_from": tests[-1][1],
            "control": (f"batch {base} edges again (control)", loader(base)), "sampler": loader(base).sampler_name}


def _asked(model: Any, row: dict[str, Any]) -> dict[str, Any]:
    """What the model is asked of a row: its terms, and the confounded fields the row has."""
    return {**{t: row[t] for t in model.terms}, **{t: row[t] for t in model.confounded if row.get(t) is not None}}


def run_config(step: Callable[[Any], Any], model: Any, name: str, loader: Any, limit: int) -> dict[str, Any]:
    """Forecast ``loader``'s batches with ``model``, run ``limit`` of them, compare. The forecast is
    anchored (its default): raised by what the process holds beyond what it held during the fit;
    ``covered_as_fitted`` counts the batches the model's own bounds covered without it;
    ``margins_bytes`` is each batch's anchored upper bound minus its measured peak."""
    fc = gnnmon.forecast(loader, model, progress=False)
    held = fc.model
    with gnnmon.collect() as run:
        train(step, [loader], limit)
    rows = [r for r in run.records if r["label"] == "train_step"]
    preds = [held.predict(**_asked(held, r)) for r in rows]
    errors = [p.bytes / r["mem_peak_bytes"] - 1 for p, r in zip(preds, rows, strict=True)]
    return {"config": name, "forecast_worst_bytes": fc.worst[0]["bytes"], "forecast_upper_bytes": fc.peak_bytes,
            "measured_max_bytes": max(r["mem_peak_bytes"] for r in rows), "anchor_bytes": held.anchor_bytes,
            "const_bytes": held.coefficients["const"],
            "per_batch_error_pct": 100 * max(errors, key=abs), "steps": len(rows),
            "covered": sum(r["mem_peak_bytes"] <= p.upper_bytes for p, r in zip(preds, rows, strict=True)),
            "margins_bytes": [p.upper_bytes - r["mem_peak_bytes"] for p, r in zip(preds, rows, strict=True)],
            "covered_as_fitted": sum(r["mem_peak_bytes"] <= model.predict(**_asked(model, r)).upper_bytes
                                     for r in rows),
            "gap_median_bytes": sorted(r["mem_peak_bytes"] - p.bytes for p, r in zip(preds, rows, strict=True))[
                len(rows) // 2]}


def measure_calibrated(study: str, device: torch.device, tiny: bool, capacity: str | None,
                       twins: bool = True) -> dict[str, Any]:
    """A study whose model comes from ``gnnmon.calibrate`` on an ordinary loader (``twins``: its
    denser twins too)."""
    torch.manual_seed(0)
    s = {"sage": sage_study, "dense": dense_study, "link": link_study}[study](device, tiny)
    step = Timeline(s["step"])
    limit = 6 if tiny else 10
    started = time.perf_counter()
    cal = gnnmon.calibrate(step, s["ordinary"], twins=twins)
    took = time.perf_counter() - started
    model = cal.model
    result: dict[str, Any] = {"study": study, "model": model.as_dict(), "configs": [], "sampler": s["sampler"],
                              "calibration": {"sizes": sorted(set(cal.sizes)), "steps": len(cal.sizes),
                                              "twins": cal.twins, "measured_terms": cal.measured_terms(),
                                              "seconds": took}}
    if not model.trusted:
        return result
    step.phase = "configurations"
    result["configs"] = [run_config(step, model, name, loader, limit) for name, loader in s["tests"]]
    result["budget"] = run_budget(step, model, s["budget_from"], s["at_budget"], capacity, limit)
    step.phase = "control"
    result["control"] = run_config(step, model, *s["control"], limit)
    result["control"]["start_drift_bytes"] = step.start("control") - step.start("fit")
    return result


def run_budget(step: Callable[[Any], Any], model: Any, loader: Any, at_budget: Callable[[Any], Any],
               capacity: str | None, limit: int) -> dict[str, Any]:
    """The budget ``forecast(loader, model, capacity).budget(0.9)`` gives, and a run at it."""
    cap = capacity or int(1.5 * model.predict(**{t: model.ranges[t][1] for t in model.terms}).bytes)
    fc = gnnmon.forecast(loader, model, cap, progress=False)
    budget = fc.budget(0.9)
    if not budget.fits:  # batch size 0: no loader takes it
        return {**budget, "capacity_bytes": fc.capacity_bytes, "measured_max_bytes": None, "stayed_under": None}
    with gnnmon.collect() as run:
        train(step, [at_budget(budget)], limit)
    peak = max(r["mem_peak_bytes"] for r in run.records if r["label"] == "train_step")
    return {**budget, "capacity_bytes": fc.capacity_bytes, "measured_max_bytes": peak,
            "stayed_under": peak <= budget["target_bytes"]}


def measure(study: str, device: torch.device, tiny: bool, capacity: str | None, out: Path) -> dict[str, Any]:
    torch.manual_seed(0)
    plain, at_budget, fit_loaders, tests = (node_study if study == "node" else graph_study)(device, tiny)
    step = Timeline(plain)
    limit = 6 if tiny else 40
    with gnnmon.collect(out / f"memory_forecast_{study}_fit.jsonl") as run:
        train(step, fit_loaders, limit)
    model = run.report().memory_model("train_step", "mem_peak_bytes")
    result: dict[str, Any] = {"study": study, "model": model.as_dict(), "configs": []}
    if not model.trusted:
        return result
    step.phase = "configurations"
    result["configs"] = [run_config(step, model, name, loader, limit) for name, loader in tests]
    result["budget"] = run_budget(step, model, tests[-1][1], at_budget, capacity, limit)
    step.phase = "control"
    result["control"] = run_config(step, model, "the largest fitted batch size again (control)", fit_loaders[-1], limit)
    result["control"]["start_drift_bytes"] = step.start("control") - step.start("fit")
    return result


def markdown(results: list[dict[str, Any]], command: str, device: torch.device) -> str:
    lines = ["# Memory forecast: fitted on small batches, checked on larger ones", "",
             f"`{command}` on {device} (the peak: {'RSS, exact' if device.type == 'cpu' else 'allocator'}). "
             "Forecast worst: the forecast for the worst batch the loader's scan found; upper bound: its upper "
             "bound; measured max: the highest peak of the run (other batches: sampling differs between scan "
             "and run); error above the constant: the error over the part of the peak that grows with the batch; "
             "upper bound above the constant: that part of the upper bound against the measured one; "
             "per-batch error: each run batch's forecast from its own shape against its measured peak, the worst; "
             "covered: the run batches whose own upper bound is at or above their measured peak; raised by: what "
             "the forecast, made just before the configuration ran, added to the model's constant for the memory "
             "the process held beyond what it held during the fit (`forecast(anchor='auto')`); covered as fitted: "
             "the same count with the model's own bounds, not raised.", ""]
    for r in results:
        lines += [f"## {r['study']}", "", f"Model: {r['model']['summary']}", ""]
        if "calibration" in r:
            c = r["calibration"]
            twins = [t for t in c.get("twins", []) if "error" not in t]
            spread = ", ".join(f"{t['twin']} {t['num_edges'] / t['num_nodes']:.3g} edges/node" for t in twins)
            lines += [f"Calibrated by `gnnmon.calibrate` on {c['steps']} steps at batch sizes "
                      f"{', '.join(map(str, c['sizes']))} and {len(twins)} twins "
                      f"({spread}) "
                      f"({c['seconds']:.0f} s); sampler: {r['sampler']}. Per-edge cost: "
                      f"{c.get('measured_terms', {}).get('num_edges', 'not asked')}.", ""]
        if not r["configs"]:
            continue
        lines += ["| configuration | steps | raised by | forecast worst | upper bound | measured max | error | "
                  "error above the constant | upper bound above the constant | worst per-batch error | covered | "
                  "covered as fitted |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for c in [*r["configs"], r["control"]]:
            f, m, const = c["forecast_worst_bytes"], c["measured_max_bytes"], c["const_bytes"]
            lines.append(f"| {c['config']} | {c['steps']} | {format_bytes(c['anchor_bytes'])} | {format_bytes(f)} "
                         f"| {format_bytes(c['forecast_upper_bytes'])} "
                         f"| {format_bytes(m)} | {100 * (f / m - 1):+.1f} % | {100 * (f - m) / (m - const):+.1f} % "
                         f"| {(c['forecast_upper_bytes'] - const) / (m - const):.2f}x measured "
                         f"| {c['per_batch_error_pct']:+.1f} % | {c['covered']}/{c['steps']} "
                         f"| {c['covered_as_fitted']}/{c['steps']} |")
        ctl = r["control"]
        lines += ["", f"Control: the median gap between the control's peaks and the anchored forecast for their "
                      f"shapes is {format_bytes(ctl['gap_median_bytes'])}; the process's memory at the start "
                      f"of a step (median) moved by {format_bytes(ctl['start_drift_bytes'])} between the fit and "
                      "the control."]
        b = r["budget"]
        if not b["batch_size"]:
            lines += ["", f"Budget for a capacity of {format_bytes(b['capacity_bytes'])} at 90 % "
                          f"({format_bytes(b['target_bytes'])}): no batch fits: {b['why']}.", ""]
            continue
        edges = "no count of" if b["max_num_edges"] is None else f"{b['max_num_edges']:,}"  # samplers_why says why
        lines += ["", f"Budget for a capacity of {format_bytes(b['capacity_bytes'])} at 90 % "
                      f"({format_bytes(b['target_bytes'])}): batch size {b['batch_size']:,}, DynamicBatchSampler "
                      f"max_num {b['max_num_nodes']:,} nodes or {edges} edges"
                      f"{' (limited by what the model vouches for)' if b['limited_by_model'] else ''}. A run at that "
                      f"budget peaked at {format_bytes(b['measured_max_bytes'])}: "
                      f"{'under' if b['stayed_under'] else 'OVER'} the target.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--tiny", action="store_true", help="small graphs and few steps (the test)")
    parser.add_argument("--study", choices=(*STUDIES, "all"), default="all")
    parser.add_argument("--capacity", help="the memory to budget for (default: 1.5x the largest fitted peak)")
    parser.add_argument("--no-twins", action="store_true", help="calibrate without its denser twins (what they add)")
    parser.add_argument("--out", default="runs")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cpu":
        gnnmon.exact_host_memory()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    studies = STUDIES if args.study == "all" else (args.study,)
    results = []
    for s in studies:
        # what the study before left in reference cycles (a PyG loader keeps its own copy of the graph's
        # edges) is freed now, not by a collection in the middle of this study's measurements
        gc.collect()
        results.append(measure(s, device, args.tiny, args.capacity, out) if s in ("node", "graph")
                       else measure_calibrated(s, device, args.tiny, args.capacity, not args.no_twins))
    command = "python play/memory_forecast.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(results, command.strip(), device)
    (out / "memory_forecast.md").write_text(text)
    (out / "memory_forecast.json").write_text(json.dumps(results, indent=1, default=str))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
