"""Static vs dynamic batching for a molecular GNN (seed 002: arXiv 2502.00944), redone in PyTorch
with gnnmon: SchNet on QM9 (or its stand-in) under ``torch.compile``.

Batching algorithms (each batch is padded with one padding graph holding the padding nodes, whose
padding edges loop on its last node; the loss masks the padding graph out):

* ``unpadded`` — PyG's own batching: ``batch_size`` graphs, no padding (every batch a new shape);
* ``static-64`` — ``batch_size`` graphs, nodes and edges padded up to the next multiple of 64;
* ``static-2^N`` — ``batch_size`` graphs, padded up to the next power of two;
* ``static-constant`` — padded once to the largest batch possible (``batch_size`` x the largest
  molecule's nodes and edges): a single shape;
* ``dynamic`` — graphs added until a node, edge or graph budget is full (the budget is
  ``batch_size`` x the data's mean nodes / edges, rounded up to a multiple of 64, as jraph's
  ``dynamically_batch`` is used in the paper), padded to the budget: a single shape with a varying
  number of graphs. Our own sampler: PyG's ``DynamicBatchSampler`` budgets nodes *or* edges, and
  with ``skip_too_big`` repeats samples (pyg-team/pytorch_geometric PR 10467, open).

Compile modes: ``static`` (``torch.compile(dynamic=False)``: every new shape is a recompilation,
as under JAX's ``jit``, until torch's ``recompile_limit`` sends the frame back to eager), ``auto``
(the default, automatic dynamic shapes: a second shape recompiles once with symbolic sizes) and
``eager`` (no compilation).

Per run, with gnnmon rows (``batching``: sampling, PyG's collate, padding and the copy to the
device; ``update``: forward, loss, backward and the optimizer step, ``@cuda_timed`` and
``@track_compile``): batching and update time per step (their sum is the paper's "combined"
time), recompilations and compile time, padding overhead (real vs padded nodes and edges), the
step-time distribution, and the test RMSE after a fixed number of steps; then the running mean of
the combined time as a function of the number of steps (the paper's Figure 2) and the speed ratio
between algorithms at each number of steps. Writes ``runs/batching_<mode>_<algorithm>.jsonl``,
``runs/batching.md`` (tables and the claims table), ``runs/batching.json`` and ``runs/batching.png``.

    .venv/bin/python play/batching.py [--device cpu|cuda|mps] [--steps 300] [--batch-size 32]

Each run has a process of its own (an empty inductor cache: every run compiles cold);
``--same-process`` runs them one after another in this one (the test, with ``--backend eager``).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch_geometric.data import Batch
from torch_geometric.nn.models import SchNet

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gnnmon
from gnnmon import cuda_timed, phase, track_compile
from play.progress import progress
from play.synthetic import QM9, qm9_molecules

ALGORITHMS = ("unpadded", "static-64", "static-2^N", "static-constant", "dynamic")
MODES = {"static": "torch.compile(dynamic=False)", "auto": "torch.compile() (automatic dynamic shapes)",
         "eager": "not compiled"}
CHECKPOINTS = (1, 3, 10, 30, 100, 300, 1000, 3000, 10000)


# --- data -----------------------------------------------------------------------------------------

def load_qm9(root: str | None, count: int, target: int, seed: int = 0) -> tuple[list[Any], str]:
    """PyG's QM9 (target column ``target``) when it can be loaded, else the stand-in."""
    why = "no root given"
    if root:
        try:
            from torch_geometric.datasets import QM9 as PygQM9

            ds = PygQM9(root)
            perm = torch.randperm(len(ds), generator=torch.Generator().manual_seed(seed))[:count]
            graphs = []
            for i in perm.tolist():
                d = ds[i]
                graphs.append(type(d)(z=d.z, pos=d.pos, edge_index=d.edge_index, y=d.y[:, target],
                                      num_nodes=d.num_nodes))
            return graphs, f"PyG QM9 from {root}, target {target}, {len(graphs):,} of {len(ds):,} molecules"
        except Exception as exc:  # noqa: BLE001 - no network, no files: the stand-in, saying why
            why = f"PyG QM9 could not be loaded from {root} ({type(exc).__name__}: {str(exc)[:100]})"
    graphs = qm9_molecules(count, seed=seed)
    return graphs, (f"synthetic QM9 stand-in: {len(graphs):,} molecules with QM9's statistics "
                    f"(~{QM9.mean_atoms:g} atoms, at most {QM9.max_atoms}, ~{QM9.mean_bonds:g} bonds), "
                    f"H/C/N/O/F shares and bond-length positions; a planted energy-like target — {why}")


# --- batching -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Shape:
    """What a batch is padded to: nodes, edges, graphs (the padding graph included)."""

    nodes: int
    edges: int
    graphs: int


def next_multiple(x: int, m: int) -> int:
    return -(-x // m) * m


def next_pow2(x: int) -> int:
    return 1 << max(0, x - 1).bit_length()


class Batcher:
    """The index batches of an epoch and the shape each is padded to, for one algorithm.

    ``nodes`` / ``edges``: each graph's counts (edges in both directions, as PyG stores them)."""

    def __init__(self, algorithm: str, nodes: list[int], edges: list[int], batch_size: int) -> None:
        if algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
        self.algorithm, self.nodes, self.edges, self.batch_size = algorithm, nodes, edges, batch_size
        b = batch_size
        self.constant = Shape(b * max(nodes) + 1, b * max(edges), b + 1)
        mean_n, mean_e = sum(nodes) / len(nodes), sum(edges) / len(edges)
        # jraph's estimate: batch_size x the mean, rounded up to a multiple of 64; never below the
        # largest graph (plus its padding node), so no graph is ever too big for a batch.
        self.budget = Shape(max(next_multiple(math.ceil(b * mean_n), 64), max(nodes) + 1),
                            max(next_multiple(math.ceil(b * mean_e), 64), max(edges)), b + 1)

    def pad_to(self, n: int, e: int) -> Shape | None:
        """The padded shape of a static batch of ``n`` nodes and ``e`` edges (None: unpadded)."""
        b = self.batch_size + 1
        if self.algorithm == "static-64":
            return Shape(next_multiple(n + 1, 64), next_multiple(max(e, 1), 64), b)
        if self.algorithm == "static-2^N":
            return Shape(next_pow2(n + 1), next_pow2(max(e, 1)), b)
        if self.algorithm == "static-constant":
            return self.constant
        return None

    def epoch(self, order: list[int]) -> Iterator[tuple[list[int], Shape | None]]:
        """(graph indices, padded shape) for each batch of one pass over ``order``."""
        if self.algorithm != "dynamic":
            for i in range(0, len(order), self.batch_size):
                idx = order[i:i + self.batch_size]
                yield idx, self.pad_to(sum(self.nodes[j] for j in idx), sum(self.edges[j] for j in idx))
            return
        budget = self.budget
        idx: list[int] = []
        n = e = 0
        for j in order:  # greedy, in order; a graph that does not fit starts the next batch
            if idx and (n + self.nodes[j] > budget.nodes - 1 or e + self.edges[j] > budget.edges
                        or len(idx) == budget.graphs - 1):
                yield idx, budget
                idx, n, e = [], 0, 0
            idx.append(j)
            n += self.nodes[j]
            e += self.edges[j]
        if idx:
            yield idx, budget


@dataclass
class Padded:
    """A batch as the model takes it; ``mask`` marks the real graphs (1.0) among ``num_graphs``."""

    z: torch.Tensor
    pos: torch.Tensor
    edge_index: torch.Tensor
    batch: torch.Tensor
    y: torch.Tensor
    mask: torch.Tensor
    num_graphs: int
    real: Shape

    def to(self, device: torch.device) -> Padded:
        t = {k: getattr(self, k).to(device, non_blocking=True)
             for k in ("z", "pos", "edge_index", "batch", "y", "mask")}
        return Padded(**t, num_graphs=self.num_graphs, real=self.real)


def collate(graphs: list[Any], shape: Shape | None) -> Padded:
    """PyG's collate of ``graphs``, then padded to ``shape``: the padding nodes (atomic number 0,
    at the origin) all belong to the first padding graph, the padding edges loop on its last node."""
    b = Batch.from_data_list(graphs)
    real = Shape(int(b.num_nodes), int(b.num_edges), int(b.num_graphs))
    if shape is None:
        return Padded(b.z, b.pos, b.edge_index, b.batch, b.y, torch.ones(real.graphs), real.graphs, real)
    pn, pe = shape.nodes - real.nodes, shape.edges - real.edges
    if pn < 1 or pe < 0 or shape.graphs <= real.graphs:
        raise ValueError(f"a batch of {real} does not fit {shape} with a padding graph")
    z = torch.cat([b.z, b.z.new_zeros(pn)])
    pos = torch.cat([b.pos, b.pos.new_zeros(pn, 3)])
    batch = torch.cat([b.batch, b.batch.new_full((pn,), real.graphs)])
    edge_index = torch.cat([b.edge_index, b.edge_index.new_full((2, pe), shape.nodes - 1)], dim=1)
    y = torch.cat([b.y, b.y.new_zeros(shape.graphs - real.graphs)])
    mask = (torch.arange(shape.graphs) < real.graphs).float()
    return Padded(z, pos, edge_index, batch, y, mask, shape.graphs, real)


def stream(batcher: Batcher, graphs: list[Any], seed: int) -> Iterator[tuple[list[int], Shape | None]]:
    """Batches epoch after epoch, each epoch in a new shuffled order."""
    g = torch.Generator().manual_seed(seed)
    while True:
        yield from batcher.epoch(torch.randperm(len(graphs), generator=g).tolist())


# --- model ----------------------------------------------------------------------------------------

class SchNetOnBonds(SchNet):
    """PyG's SchNet on the batch's own edges (no radius graph, so no torch-cluster and an edge count
    the batching decides), pooled into a known number of graphs (a static output shape)."""

    def forward(self, z: torch.Tensor, pos: torch.Tensor, edge_index: torch.Tensor,  # type: ignore[override]
                batch: torch.Tensor, num_graphs: int) -> torch.Tensor:
        weight = (pos[edge_index[0]] - pos[edge_index[1]]).norm(dim=-1)
        attr = self.distance_expansion(weight)
        h = self.embedding(z)
        for interaction in self.interactions:
            h = h + interaction(h, edge_index, weight, attr)
        h = self.lin2(self.act(self.lin1(h)))
        return self.readout(h, batch, dim=0, dim_size=num_graphs).squeeze(-1)


# --- one run --------------------------------------------------------------------------------------

class _LimitHits(logging.Handler):
    """Counts Dynamo's "hit config.recompile_limit" warnings (the frame runs eager from then on)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "recompile_limit" in record.getMessage():
            self.count += 1


def quantiles(values: list[float]) -> dict[str, float]:
    s = sorted(values)
    def q(p: float) -> float:
        return s[min(len(s) - 1, int(p * len(s)))]
    return {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": s[-1]}


def run_one(mode: str, algorithm: str, graphs: list[Any], split: int, args: argparse.Namespace,
            device: torch.device, path: Path | None, y_std: float, seed: int) -> dict[str, Any]:
    """Train for ``args.steps`` steps from ``seed`` (rows to ``path``; None: kept in memory); the
    figures of that run."""
    torch._dynamo.reset()  # each run compiles on its own, as a fresh process would
    torch.manual_seed(seed)
    model = SchNetOnBonds(hidden_channels=args.hidden, num_filters=args.hidden,
                          num_interactions=args.interactions, num_gaussians=50, cutoff=10.0).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    run_model: Any = model if mode == "eager" else torch.compile(
        model, dynamic=False if mode == "static" else None, backend=args.backend)
    train = graphs[:split]
    batcher = Batcher(algorithm, [g.num_nodes for g in train], [g.num_edges for g in train], args.batch_size)
    batches = stream(batcher, train, seed)

    @cuda_timed(device=device, label="update")
    @track_compile
    def update(b: Padded) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        pred = run_model(b.z, b.pos, b.edge_index, b.batch, b.num_graphs)
        loss = (((pred - b.y) ** 2) * b.mask).sum() / b.mask.sum()
        loss.backward()
        optimizer.step()
        return loss.detach()

    hits = _LimitHits()
    dynamo_log = logging.getLogger("torch._dynamo")
    dynamo_log.addHandler(hits)
    config = {"mode": mode, "algorithm": algorithm, "batch_size": args.batch_size, "steps": args.steps,
              "device": str(device), "backend": args.backend, "seed": seed}
    try:
        with gnnmon.collect(path, config=config) as run:
            for _ in range(args.steps):
                with phase("batching"):
                    idx, shape = next(batches)
                    b = collate([train[j] for j in idx], shape).to(device)
                    row = gnnmon.current_row()
                    if row is not None:
                        row.fields.update(real_nodes=b.real.nodes, real_edges=b.real.edges,
                                          real_graphs=b.real.graphs, padded_nodes=int(b.z.numel()),
                                          padded_edges=int(b.edge_index.shape[1]), padded_graphs=b.num_graphs)
                update(b)
    finally:
        dynamo_log.removeHandler(hits)
    rows = run.records
    batching = [r for r in rows if r["label"] == "batching"]
    updates = [r for r in rows if r["label"] == "update"]
    combined = [1e3 * (a["device_s"] + u["device_s"]) for a, u in zip(batching, updates, strict=True)]
    steady = [1e3 * u["device_s"] for u in updates if not u.get("compile_frames")]
    shapes = {(r["padded_nodes"], r["padded_edges"], r["padded_graphs"]) for r in batching}
    running, total = [], 0.0
    for k, c in enumerate(combined, 1):
        total += c
        running.append(total / k)
    return {
        "mode": mode, "algorithm": algorithm,
        "batching_ms": statistics.mean(1e3 * r["device_s"] for r in batching),
        "update_ms": statistics.mean(1e3 * r["device_s"] for r in updates),
        "combined_ms": statistics.mean(combined),
        "update_quantiles_ms": quantiles([1e3 * r["device_s"] for r in updates]),
        "steady_update_quantiles_ms": quantiles(steady) if steady else None,
        "compile_s": sum(r.get("compile_s") or 0.0 for r in updates),
        "compile_steps": [[k, r["compile_s"]] for k, r in enumerate(updates) if r.get("compile_s")],
        "compiles": sum(r.get("compile_frames") or 0 for r in updates),
        "recompiles": sum(r.get("compile_recompiles") or 0 for r in updates),
        "graph_breaks": sum(r.get("compile_graph_breaks") or 0 for r in updates),
        "recompile_limit_hits": hits.count,
        "shapes": len(shapes),
        "graphs_per_step": statistics.mean(r["real_graphs"] for r in batching),
        "node_padding": sum(r["padded_nodes"] for r in batching) / sum(r["real_nodes"] for r in batching) - 1,
        "edge_padding": sum(r["padded_edges"] for r in batching) / sum(r["real_edges"] for r in batching) - 1,
        "graphs_seen": sum(r["real_graphs"] for r in batching),
        "test_rmse": test_rmse(model, graphs[split:], device) * y_std,
        "running_combined_ms": running,
        "spikes": [s["cause"] for s in run.report().spikes() if s["label"] == "update"][:50],
    }


@torch.no_grad()
def test_rmse(model: SchNetOnBonds, graphs: list[Any], device: torch.device) -> float:
    """Root mean squared error on ``graphs`` (standardised target), eager, unpadded."""
    model.eval()
    se, n = 0.0, 0
    for i in range(0, len(graphs), 256):
        b = collate(graphs[i:i + 256], None).to(device)
        pred = model(b.z, b.pos, b.edge_index, b.batch, b.num_graphs)
        se += float(((pred - b.y) ** 2).sum())
        n += b.num_graphs
    model.train()
    return math.sqrt(se / n)


# --- the study ------------------------------------------------------------------------------------

def at_steps(r: dict[str, Any], k: int) -> float:
    """Mean combined ms per step over the first ``k`` steps (the paper's Figure 2)."""
    return float(r["running_combined_ms"][min(k, len(r["running_combined_ms"])) - 1])


def speedups(results: list[dict[str, Any]], mode: str, k: int, *, constant: bool = True
             ) -> tuple[float, str, str]:
    """(slowest / fastest mean combined time over the first ``k`` steps, fastest, slowest)."""
    rs = [r for r in results if r["mode"] == mode and (constant or r["algorithm"] != "static-constant")]
    fast = min(rs, key=lambda r: at_steps(r, k))
    slow = max(rs, key=lambda r: at_steps(r, k))
    return at_steps(slow, k) / at_steps(fast, k), fast["algorithm"], slow["algorithm"]


def checkpoints(steps: int) -> list[int]:
    return [k for k in CHECKPOINTS if k < steps] + [steps]


def steady_ms(r: dict[str, Any]) -> float:
    """Combined ms of a step once compiled: mean batching + median update of the steps that did
    not compile (what a long run, like the paper's two million steps, converges to)."""
    q = r["steady_update_quantiles_ms"] or r["update_quantiles_ms"]
    return float(r["batching_ms"] + q["p50"])


def recompile_share(r: dict[str, Any], k: int) -> float:
    """Share of the first ``k`` steps' time spent compiling again (every compilation after the
    first: the cost a varying shape adds to a run that compiles anyway)."""
    spent = sum(c for i, c in r["compile_steps"][1:] if i < k)
    return spent / (k * at_steps(r, k) / 1e3)


def permutation_p(a: list[float], b: list[float]) -> float:
    """Two-sided p-value of the difference of the means of ``a`` and ``b``: the share of all
    splits of the pooled values into groups of their sizes with a difference at least as large."""
    from itertools import combinations

    pooled, n = a + b, len(a) + len(b)
    observed = abs(statistics.mean(a) - statistics.mean(b))
    hits = total = 0
    for idx in combinations(range(n), len(a)):
        chosen = set(idx)
        x = [pooled[i] for i in idx]
        y = [pooled[i] for i in range(n) if i not in chosen]
        total += 1
        hits += abs(statistics.mean(x) - statistics.mean(y)) >= observed - 1e-12
    return hits / total


def verdicts(results: list[dict[str, Any]], steps: int, seeds: dict[str, list[float]] | None
             ) -> list[tuple[str, str, str, str]]:
    """(claim, the paper, ours, verdict) for each of the paper's claims, from ``results``."""
    modes = list(dict.fromkeys(r["mode"] for r in results))
    by = {(r["mode"], r["algorithm"]): r for r in results}
    out = []

    def steady_ratio(m: str) -> tuple[float, str, str]:
        rs = [r for r in results if r["mode"] == m and r["algorithm"] != "static-constant"] or \
            [r for r in results if r["mode"] == m]
        fast, slow = min(rs, key=steady_ms), max(rs, key=steady_ms)
        return steady_ms(slow) / steady_ms(fast), fast["algorithm"], slow["algorithm"]

    best = max((steady_ratio(m) + (m,) for m in modes), key=lambda t: t[0])
    with_compile = max((speedups(results, m, steps, constant=False) + (m,) for m in modes), key=lambda t: t[0])
    out.append(("switching algorithm speeds training up", "up to 2.7x (12.5x with static-constant), long runs",
                f"compiled steps: up to {best[0]:.2f}x ({best[1]} vs {best[2]}, {best[3]}); "
                f"over the first {steps} steps, compilation included: up to {with_compile[0]:.2f}x "
                f"({with_compile[1]} vs {with_compile[2]}, {with_compile[3]})",
                "yes" if max(best[0], with_compile[0]) >= 1.2 else
                f"no: within {max(best[0], with_compile[0]):.2f}x"))
    fastest = {(m, k): speedups(results, m, k)[1] for m in modes for k in checkpoints(steps)}
    changes = sorted({f"{m}: " + " -> ".join(dict.fromkeys(fastest[(m, k)] for k in checkpoints(steps)))
                      for m in modes})
    depends = len(set(fastest.values())) > 1
    out.append(("the fastest algorithm depends on the setting (incl. steps run)",
                "data, model, batch size, hardware, steps",
                "fastest as the steps run grow (static-constant included) — " + "; ".join(changes),
                "yes" if depends else "not seen: one algorithm fastest throughout (one model, batch size, machine)"))
    if "static" in modes:
        rec = {a: by[("static", a)]["recompiles"] for a in ALGORITHMS if ("static", a) in by}
        k0 = min(30, steps)
        share = {a: recompile_share(by[("static", a)], k0) for a in rec}
        varying = [a for a in ("unpadded", "static-64", "static-2^N") if a in rec]
        fixed = [a for a in ("static-constant", "dynamic") if a in rec]
        more = bool(varying and fixed) and max(rec[a] for a in varying) > max(rec[a] for a in fixed)
        dominated = bool(varying) and all(share[a] > 0.5 for a in varying if rec[a] > 1)
        out.append(("padding to varying shapes forces recompilations that dominate short runs",
                    "static-64 / 2^N recompile, dynamic and static-constant compile once; recompilation "
                    "dominates short runs",
                    "recompilations under dynamic=False: " + ", ".join(f"{a} {n}" for a, n in rec.items())
                    + f"; share of the first {k0} steps spent recompiling: "
                    + ", ".join(f"{a} {100 * v:.0f} %" for a, v in share.items()),
                    "yes" if more and dominated else
                    "partly: " + ("more recompilations" if more else "no more recompilations") + ", "
                    + ("recompilation dominates" if dominated else "recompilation does not dominate")))
    if "auto" in modes:
        rec = {a: by[("auto", a)]["recompiles"] for a in ALGORITHMS if ("auto", a) in by}
        out.append(("(ours, PyTorch) automatic dynamic shapes bound the recompilations", "not in the paper (JAX)",
                    "recompilations under automatic dynamic: " + ", ".join(f"{a} {n}" for a, n in rec.items()),
                    "yes" if max(rec.values()) <= 2 else "no"))
    statics = [by[(modes[0], a)]["test_rmse"] for a in ALGORITHMS[:4] if (modes[0], a) in by]
    same = len(statics) > 1 and max(statics) / min(statics) - 1 < 1e-3
    ours = (f"the static algorithms (same batches, padding masked) end at the same test RMSE "
            f"({min(statics):.4f}-{max(statics):.4f})" if same else
            "static algorithms' test RMSE: " + ", ".join(f"{v:.4f}" for v in statics)) if statics else ""
    verdict = "can't judge: one seed"
    if seeds and all(len(v) > 1 for v in seeds.values()):
        (a1, v1), (a2, v2) = list(seeds.items())[:2]
        p = permutation_p(v1, v2)
        ours += (f"; over {len(v1)} seeds (eager): {a1} {statistics.mean(v1):.4f} ± {statistics.stdev(v1):.4f}, "
                 f"{a2} {statistics.mean(v2):.4f} ± {statistics.stdev(v2):.4f}, permutation p = {p:.3f}")
        verdict = (f"yes at this setting: {a1} and {a2} differ (p = {p:.3f})" if p < 0.05 else
                   f"not at this setting: no difference (p = {p:.2f}); the paper saw it only in some combinations")
    out.append(("a few combinations change the final test error", "significant for some (t-test over runs)",
                ours.lstrip("; "), verdict))
    return out


def markdown(results: list[dict[str, Any]], meta: dict[str, Any],
             seeds: dict[str, list[float]] | None = None) -> str:
    steps = meta["steps"]
    lines = [f"Command: `{meta['command']}` · {meta['machine']} · {meta['when']} · total {meta['total_s']:.0f} s",
             "", f"Data: {meta['data']}. Device: {meta['device']}. SchNet ({meta['model']}), batch size "
             f"{meta['batch_size']}, {steps} steps per run, compile backend {meta['backend']}.", "",
             "| mode | algorithm | batching ms | update ms | combined ms | steady combined ms | update p50 / p90 / "
             "p99 / max ms (steady: no compile) | compile s | compiles | recompiles | limit hits | shapes | "
             "graphs / step | node padding | edge padding | test RMSE |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
             "---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        q = r["steady_update_quantiles_ms"] or r["update_quantiles_ms"]
        lines.append(f"| {r['mode']} | {r['algorithm']} | {r['batching_ms']:.2f} | {r['update_ms']:.2f} | "
                     f"{r['combined_ms']:.2f} | {steady_ms(r):.2f} | "
                     f"{q['p50']:.1f} / {q['p90']:.1f} / {q['p99']:.1f} / {q['max']:.1f} | "
                     f"{r['compile_s']:.1f} | {r['compiles']} | {r['recompiles']} | {r['recompile_limit_hits']} | "
                     f"{r['shapes']} | {r['graphs_per_step']:.1f} | {100 * r['node_padding']:.0f} % | "
                     f"{100 * r['edge_padding']:.0f} % | {r['test_rmse']:.4f} |")
    ks = checkpoints(steps)
    lines += ["", "## Mean combined time per step over the first k steps (ms; the paper's Figure 2)", "",
              "| mode | algorithm | " + " | ".join(f"k={k}" for k in ks) + " |",
              "| --- | --- | " + " | ".join("---:" for _ in ks) + " |"]
    for r in results:
        lines.append(f"| {r['mode']} | {r['algorithm']} | " + " | ".join(f"{at_steps(r, k):.1f}" for k in ks) + " |")
    lines += ["", "Speed ratio, slowest / fastest algorithm (static-constant left out, as in the paper's Figure 5):",
              "", "| mode | " + " | ".join(f"k={k}" for k in ks) + " |",
              "| --- | " + " | ".join("---:" for _ in ks) + " |"]
    for m in dict.fromkeys(r["mode"] for r in results):
        cells = []
        for k in ks:
            ratio, fast, _ = speedups(results, m, k, constant=False)
            cells.append(f"{ratio:.2f}x ({fast})")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines += ["", "## The paper's claims", "", "| claim | paper | ours | verdict |", "| --- | --- | --- | --- |"]
    lines += [f"| {c} | {p} | {o} | {v} |" for c, p, o, v in verdicts(results, steps, seeds)]
    return "\n".join(lines) + "\n"


def plot(results: list[dict[str, Any]], path: Path, title: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    modes = list(dict.fromkeys(r["mode"] for r in results))
    fig = Figure(figsize=(5 * len(modes), 4), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(modes), squeeze=False)[0]
    for ax, m in zip(axes, modes, strict=True):
        for r in (r for r in results if r["mode"] == m):
            ys = r["running_combined_ms"]
            ax.plot(range(1, len(ys) + 1), ys, label=r["algorithm"])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("training steps run")
        ax.set_ylabel("mean combined time per step (ms)")
        ax.set_title(MODES[m])
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.savefig(path, dpi=110)


def run_in_process(mode: str, algorithm: str, args: argparse.Namespace, data: Path, out: Path) -> dict[str, Any]:
    """``run_one`` in a fresh Python process with an empty inductor cache of its own, so that every
    run compiles cold, as a first run does (in one process, or with a shared cache, a later run
    would reuse an earlier run's kernels for a shape both met)."""
    import subprocess
    import tempfile

    result = out / f"batching_{mode}_{algorithm.replace('^', '')}.result.json"
    forwarded = [f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
                 if k in ("device", "steps", "batch_size", "hidden", "interactions", "lr", "backend", "seed", "out")]
    with tempfile.TemporaryDirectory(prefix="gnnmon-inductor-") as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        proc = subprocess.run([sys.executable, __file__, *forwarded, "--one", mode, algorithm, "--data", str(data)],
                              env=env, stdout=subprocess.PIPE, text=True)
    if proc.returncode:
        raise RuntimeError(f"the {mode} / {algorithm} run failed (exit {proc.returncode}); its output:\n"
                           + proc.stdout[-3000:])
    return dict(json.loads(result.read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda", "mps"))
    parser.add_argument("--graphs", type=int, default=6000, help="molecules (90 %% train, 10 %% test)")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--interactions", type=int, default=3)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--modes", nargs="*", default=["static", "auto"], choices=list(MODES))
    parser.add_argument("--algorithms", nargs="*", default=list(ALGORITHMS), choices=ALGORITHMS)
    parser.add_argument("--backend", default="inductor", help="torch.compile backend (eager: no C++ compiler)")
    parser.add_argument("--root", default="data/QM9", help="PyG QM9 folder, used when it loads")
    parser.add_argument("--target", type=int, default=7, help="QM9 target column (7: U0)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rmse-seeds", type=int, default=4,
                        help="seeds per algorithm for the test-error comparison (eager, static-64 vs dynamic)")
    parser.add_argument("--out", default="runs")
    parser.add_argument("--one", nargs=2, metavar=("MODE", "ALGORITHM"), help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--render", metavar="JSON", help="write the tables again from a saved batching.json")
    parser.add_argument("--same-process", action="store_true",
                        help="run every configuration in this process, one after another (Dynamo reset "
                             "before each; a later run may reuse an earlier run's inductor kernels, so "
                             "compile times are for --backend eager or a test, not a cold-start figure)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.render:  # the tables and claims again, from the figures of an earlier run
        saved = json.loads(Path(args.render).read_text())
        text = markdown(saved["results"], saved["meta"], saved.get("rmse_seeds"))
        (out / "batching.md").write_text(text)
        print(text)
        return 0
    if args.one:  # a single run, in the process run_in_process started
        mode, algorithm = args.one
        saved = torch.load(args.data, weights_only=False)
        stem = f"batching_{mode}_{algorithm.replace('^', '')}"
        r = run_one(mode, algorithm, saved["graphs"], saved["split"], args, device, out / f"{stem}.jsonl",
                    saved["std"], args.seed)
        (out / f"{stem}.result.json").write_text(json.dumps(r))
        return 0
    t_start = time.perf_counter()
    graphs, note = load_qm9(args.root, args.graphs, args.target, args.seed)
    split = int(0.9 * len(graphs))
    ys = torch.cat([g.y for g in graphs[:split]])
    mean, std = float(ys.mean()), float(ys.std())
    graphs = [g.clone() for g in graphs]
    for g in graphs:
        g.y = (g.y - mean) / std  # trained on the standardised target; RMSE reported in its units
    print(f"data: {note}", flush=True)
    data = out / "batching_data.pt"
    if not args.same_process:
        torch.save({"graphs": graphs, "split": split, "std": std}, data)
    results = []
    try:
        plan = [(mode, algorithm) for mode in args.modes for algorithm in args.algorithms]
        for mode, algorithm in progress(plan, "batching runs"):
            t0 = time.perf_counter()
            if args.same_process:
                r = run_one(mode, algorithm, graphs, split, args, device,
                            out / f"batching_{mode}_{algorithm.replace('^', '')}.jsonl", std, args.seed)
            else:
                r = run_in_process(mode, algorithm, args, data, out)
            results.append(r)
            print(f"  {mode:<6} {algorithm:<16} {time.perf_counter() - t0:6.1f} s  combined "
                  f"{r['combined_ms']:8.2f} ms  compile {r['compile_s']:5.1f} s  recompiles {r['recompiles']:2d}  "
                  f"test RMSE {r['test_rmse']:.4f}", flush=True)
        seeds: dict[str, list[float]] = {}
        if args.rmse_seeds > 1:
            t0 = time.perf_counter()
            for algorithm in ("static-64", "dynamic"):
                seeds[algorithm] = [run_one("eager", algorithm, graphs, split, args, device, None, std,
                                            args.seed + k)["test_rmse"] for k in range(args.rmse_seeds)]
            print(f"  test RMSE over {args.rmse_seeds} seeds (eager): {time.perf_counter() - t0:.1f} s", flush=True)
    finally:
        data.unlink(missing_ok=True)
    meta = {"command": "python play/batching.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "machine": f"{platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
                       f"torch {torch.__version__}",
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "total_s": time.perf_counter() - t_start,
            "data": note, "device": str(device), "steps": args.steps, "batch_size": args.batch_size,
            "backend": args.backend, "model": f"hidden {args.hidden}, {args.interactions} interactions",
            "target_std": std}
    text = markdown(results, meta, seeds)
    (out / "batching.md").write_text(text)
    (out / "batching.json").write_text(json.dumps({"meta": meta, "results": results, "rmse_seeds": seeds},
                                                  indent=1))
    plot(results, out / "batching.png", f"SchNet, {'QM9' if note.startswith('PyG') else 'QM9 stand-in'}, "
         f"batch {args.batch_size}, {device.type}")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
