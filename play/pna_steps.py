"""The seed PNA profiling study (seed 000) with gnnmon: raw steps vs a GC-controlled baseline,
swept over batch sizes and DataLoader workers, with a verdict on each of the study's findings.

A PNA network (mean/min/max/std aggregators, identity/amplification/attenuation scalers, global
max pooling, a linear head) trained on PCQM4Mv2-shaped molecules (synthetic: the real dataset cannot
be downloaded here), held in a PyG ``InMemoryDataset`` as PyG's real datasets are, batched by PyG's
``DataLoader``. For each batch size two runs of the same training:

* ``raw`` — Python's automatic GC as is: gen-2 collections land inside steps and batch loads;
* ``controlled`` — automatic GC off for the epoch (``gc_paused``; the step is also
  ``@gc_controlled``) and ``gnnmon.collect_garbage()`` runs the deferred collection between epochs;

then controlled runs at the largest batch size with each other worker count. Each step is
``@cuda_timed`` with ``forward`` / ``backward`` / ``optimizer`` phases; loading a batch (and its
copy to the device) is a row of its own (``phase("data")``). The sampler reads utilisation every
``--sample`` seconds (the study's 500 ms) and rows get energy (``--energy``).

Presets (flags given explicitly override them):

* ``study`` — the study's setting: 64 PNA layers, hidden 64, 10,000 graphs, batch sizes
  512/1024/2048/4096 with 2 workers, then 0 and 4 workers at 4096 (for a GPU);
* ``cpu`` (default) — the same data, batch sizes and worker sweep with 4 layers of 32 channels, so
  that the whole sweep finishes in minutes on a CPU; the batch-size sweep loads in the main
  process (0 workers), because on a CPU the workers take the cores the step runs on (the worker
  sweep shows it);
* ``example`` — the worked example of ``docs/timing-and-gc.md``: 4 layers, batch 128, no workers,
  raw and controlled only;
* ``tiny`` — seconds, for the tests.

Writes ``runs/pna_<preset>_bs<B>_w<W>_<mode>.jsonl`` per run and, for a sweep,
``runs/pna_<preset>.md`` (tables and the claims table) and ``runs/pna_<preset>.json``.

    .venv/bin/python play/pna_steps.py [--preset cpu|study|example|tiny] [--device cpu|cuda|mps]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch_geometric.data import InMemoryDataset
from torch_geometric.loader import DataLoader
from torch_geometric.nn import PNAConv, global_max_pool
from torch_geometric.utils import degree

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gnnmon
from gnnmon import cuda_timed, gc_controlled, gc_paused, phase
from gnnmon.report.analysis import dips
from gnnmon.report.renderers.timeline_plot import plot_timeline
from play.progress import progress
from play.synthetic import PCQM4MV2, molecules

PRESETS: dict[str, dict[str, Any]] = {
    "study": {"layers": 64, "hidden": 64, "graphs": 10_000, "batch_sizes": [512, 1024, 2048, 4096],
              "workers": 2, "worker_sweep": [0, 2, 4], "epochs": 5, "sample": 0.5, "energy": True},
    "cpu": {"layers": 4, "hidden": 32, "graphs": 10_000, "batch_sizes": [512, 1024, 2048, 4096],
            "workers": 0, "worker_sweep": [0, 2, 4], "epochs": 4, "sample": 0.5, "energy": True},
    "example": {"layers": 4, "hidden": 32, "graphs": 10_000, "batch_sizes": [128], "workers": 0,
                "worker_sweep": [], "epochs": 4, "sample": None, "energy": False},
    "tiny": {"layers": 2, "hidden": 8, "graphs": 300, "batch_sizes": [16, 32, 64, 128], "workers": 2,
             "worker_sweep": [0, 2, 4], "epochs": 1, "sample": 0.5, "energy": False},
}
# The study's figures (bs512 / 1024 / 2048 / 4096 unless said), to set ours beside.
STUDY = {"step_ms": "105 / 148 / 322 / 775 (raw baseline); 105 -> 615 controlled",
         "epoch_s": "2.1 (bs512) ... 1.5 (bs1024, lowest)", "fwd_bwd": "55/39 % (bs512) -> 37/61 % (bs4096)",
         "gpu_util": "45 -> 56 -> 63 -> 92 %", "energy": "0.264 mWh/epoch at bs1024 (lowest), 0.310 at bs4096"}


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


def train(mode: str, batch_size: int, workers: int, graphs, args, device: torch.device, out: Path
          ) -> tuple[gnnmon.Run, list[float]]:
    """One run; (the run, each epoch's wall time in s, the between-epoch collection left out)."""
    torch.manual_seed(0)
    model = PNA(degree_histogram(graphs), args.layers, args.hidden, PCQM4MV2.atom_features,
                PCQM4MV2.bond_features).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(Molecules(graphs), batch_size=batch_size, shuffle=True, num_workers=workers,
                        pin_memory=device.type == "cuda")

    def step(batch):
        with phase("forward"):
            loss = F.mse_loss(model(batch), batch.y)
        with phase("backward"):
            loss.backward()
        with phase("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    step = cuda_timed(label="step", device=device)(gc_controlled(step) if mode == "controlled" else step)
    config = {"mode": mode, "data": f"synthetic {PCQM4MV2.name} stand-in", "preset": args.preset,
              "batch_size": batch_size, "workers": workers, "layers": args.layers, "hidden": args.hidden,
              "graphs": len(graphs), "epochs": args.epochs, "device": str(device)}
    epoch_s = []
    with gnnmon.collect(out, config=config, sample=args.sample, energy=args.energy,
                        country=args.country) as run:
        for epoch in range(args.epochs):
            run.mark("epoch", epoch)
            t0 = time.perf_counter()
            with gc_paused() if mode == "controlled" else contextlib.nullcontext():
                batches = iter(loader)
                for _ in range(len(loader)):
                    with phase("data"):
                        batch = next(batches).to(device, non_blocking=True)
                        gnnmon.record_graph(batch)
                    loss = step(batch)
                value = loss.item()  # waits for the device: the epoch's time is its work
            epoch_s.append(time.perf_counter() - t0)
            if mode == "controlled":
                gnnmon.collect_garbage()
            print(f"  [bs {batch_size}, {workers} workers, {mode}] epoch {epoch}  loss {value:.4f}  "
                  f"{epoch_s[-1]:.2f} s", flush=True)
    return run, epoch_s


# --- the figures of a run -------------------------------------------------------------------------

def _mean(values: list[float]) -> float | None:
    return statistics.mean(values) if values else None


def _q(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(p * len(s)))]


def summarise(run: gnnmon.Run, epoch_s: list[float], mode: str, batch_size: int, workers: int) -> dict[str, Any]:
    """The figures the claims are judged on, from one run's rows."""
    rows = run.records
    steps = [r for r in rows if r["label"] == "step"]
    loads = [r for r in rows if r["label"] == "data"]
    top = [r for r in rows if r.get("parent") is None]
    per_epoch = len(steps) // max(1, len(epoch_s))
    ms = [1e3 * r["device_s"] for r in steps]
    later = [1e3 * r["device_s"] for r in steps if r.get("epoch", 0) > 0] or ms
    phases = {p: sum(r.get(f"phase_{p}_s") or 0.0 for r in steps) for p in ("forward", "backward", "optimizer")}
    total = sum(r["device_s"] for r in steps)
    gen2 = [r for r in rows if r.get("gc_max_generation") == 2 and (r.get("gc_pause_s") or 0) > 0]
    full = [r for r in steps if r.get("num_graphs") == batch_size]
    partial = [r for r in steps if r.get("num_graphs") is not None and r["num_graphs"] < batch_size]
    median = _q([r["device_s"] for r in steps], 0.5) if steps else 0.0
    short = [r for r in steps if r["device_s"] < 0.6 * median]  # the study's: 285 vs 775 ms
    energy = {k: sum(r.get(k) or 0.0 for r in top) for k in ("energy_cpu_j", "energy_gpu_j", "energy_ram_j")}
    sources = {k: next((r.get(f"{k}_source") for r in top if r.get(f"{k}_source")), None) for k in energy}
    epochs = max(1, len(epoch_s))
    report = run.report()
    # An iteration is a batch load and its step: a collection lands in either (the study saw them in
    # the step, PyG's DataLoader having set them off; here they land in the loads that allocate).
    iters = [(a["device_s"] + b["device_s"], (a.get("gc_pause_s") or 0.0) + (b.get("gc_pause_s") or 0.0))
             for a, b in zip(loads, steps, strict=False)]
    raw_p90 = _q([t for t, _ in iters], 0.9) if iters else None
    clean_p90 = _q([t - g for t, g in iters], 0.9) if iters else None
    return {
        "mode": mode, "batch_size": batch_size, "workers": workers, "steps": len(steps), "steps_per_epoch": per_epoch,
        "epoch_s": statistics.median(epoch_s[1:]) if len(epoch_s) > 1 else epoch_s[0],
        "first_epoch_s": epoch_s[0],
        "step_p50_ms": _q(later, 0.5), "step_p90_ms": _q(later, 0.9), "step_p99_ms": _q(later, 0.99),
        "step_max_ms": max(ms),
        "data_p50_ms": _q([1e3 * r["device_s"] for r in loads], 0.5),
        "shares": {p: v / total for p, v in phases.items()} if total else {},
        "gc_p90_cost": raw_p90 / clean_p90 - 1 if raw_p90 and clean_p90 else None,
        "gc_share": sum(g for _, g in iters) / sum(t for t, _ in iters) if iters else None,
        "gen2_rows": len(gen2), "gen2_pause_ms": [round(1e3 * r["gc_pause_s"], 1) for r in gen2],
        "gc_spikes": sum(1 for s in report.spikes() if s["cause"] == "gc"),
        "partial_steps": [r["index"] for r in partial], "short_steps": [r["index"] for r in short],
        "partial_to_full": (statistics.median(r["device_s"] for r in partial)
                            / statistics.median(r["device_s"] for r in full)) if partial and full else None,
        "partial_graphs": partial[0]["num_graphs"] if partial else None,
        "shape_dips": sum(1 for d in dips(report.table) if d["label"] == "step" and d["cause"] == "shape"),
        "cpu_util_pct": _mean([r["cpu_util_pct"] for r in steps if r.get("cpu_util_pct") is not None]),
        "gpu_util_pct": _mean([r["gpu_util_pct"] for r in steps if r.get("gpu_util_pct") is not None]),
        "energy_j_per_epoch": {k: v / epochs for k, v in energy.items()},
        "energy_sources": sources,
        "device_s_source": steps[0].get("device_s_source") if steps else None,
    }


# --- the study's claims ---------------------------------------------------------------------------

def _fmt(v: float | None, spec: str = ".0f", unit: str = "") -> str:
    return "–" if v is None else f"{v:{spec}}{unit}"


def verdicts(results: list[dict[str, Any]], batch_sizes: list[int], workers: int, device: str
             ) -> list[tuple[str, str, str, str]]:
    """(finding, the study, ours, verdict) for each of the study's findings."""
    def get(mode: str, bs: int, w: int = workers) -> dict[str, Any] | None:
        return next((r for r in results if (r["mode"], r["batch_size"], r["workers"]) == (mode, bs, w)), None)

    gpu = device.startswith("cuda")
    out = []
    raws = [r for bs in batch_sizes if (r := get("raw", bs))]
    ctrls = [r for bs in batch_sizes if (r := get("controlled", bs))]
    small = batch_sizes[:-1] or batch_sizes
    pauses = [p for r in raws if r["batch_size"] in small for p in r["gen2_pause_ms"]]
    raw_spikes = sum(r["gc_spikes"] for r in raws if r["batch_size"] in small)
    ctrl_gen2 = sum(r["gen2_rows"] for r in ctrls)
    ctrl_spikes = sum(r["gc_spikes"] for r in ctrls)
    out.append(("gen-2 GC spikes at small batches; flat with GC off", "130-180 ms pauses; GC off: flat",
                f"raw, bs {'/'.join(map(str, small))}: {len(pauses)} gen-2 collection(s) inside rows"
                + (f" ({min(pauses):.0f}-{max(pauses):.0f} ms)" if pauses else "") + f", {raw_spikes} `gc` spike(s); "
                f"controlled: {ctrl_gen2} gen-2 inside rows, {ctrl_spikes} `gc` spike(s)",
                ("yes" if pauses and ctrl_gen2 == 0 and ctrl_spikes == 0 else
                 "not seen: no gen-2 collection fell in a row (too few steps for the heap to age)" if not pauses
                 else "no: collections inside rows with GC off")))
    big = get("controlled", batch_sizes[-1])
    if big:
        period = big["steps_per_epoch"]
        same = big["partial_steps"] and set(big["short_steps"]) == set(big["partial_steps"])
        out.append(("the periodic short step at the largest batch is the partial batch",
                    "every third step short at 4096 (1808 of 4096 graphs)",
                    f"bs {batch_sizes[-1]}: {period} steps / epoch, partial steps "
                    f"{big['partial_steps']} ({big['partial_graphs']} graphs), short steps (< 0.6 x the median) "
                    f"{big['short_steps']}"
                    + (f", a partial step taking {big['partial_to_full']:.2f}x a full one"
                       if big.get("partial_to_full") else "")
                    + f"; {big['shape_dips']} `shape` dip(s) found by the report",
                    "yes" if same else "no: " + ("no partial batch" if not big["partial_steps"]
                                                 else "short and partial steps differ")))
    if len(ctrls) > 1:
        steps_ms = [r["step_p50_ms"] for r in ctrls]
        grows = all(b > a for a, b in zip(steps_ms, steps_ms[1:], strict=False))
        ranked = sorted(ctrls, key=lambda r: r["epoch_s"])
        best = ranked[0]
        tie = ranked[1]["epoch_s"] / best["epoch_s"] - 1 < 0.05  # closer than this VM's run-to-run noise
        out.append(("step time grows with batch size; epoch time lowest at 1024",
                    f"step {STUDY['step_ms']} ms; epoch {STUDY['epoch_s']} s",
                    "step p50 " + " / ".join(f"{v:.0f}" for v in steps_ms) + " ms; epoch "
                    + " / ".join(f"{r['epoch_s']:.2f}" for r in ctrls) + f" s (lowest at {best['batch_size']})",
                    ("yes" if grows else "no: step time not monotonic") + "; "
                    + (f"no clear lowest epoch: {best['batch_size']} and {ranked[1]['batch_size']} within 5 %"
                       if tie else f"lowest epoch at {best['batch_size']} as in the study"
                       if best["batch_size"] == batch_sizes[min(1, len(batch_sizes) - 1)] else
                       f"lowest epoch at {best['batch_size']}, not the second size "
                       + ("(no per-launch overhead to amortise on a CPU: fewer, larger steps win)"
                          if not gpu else ""))))
        first, last = ctrls[0]["shares"], ctrls[-1]["shares"]
        if first and last:
            shifts = last["backward"] - last["forward"] > first["backward"] - first["forward"]
            flips = first["forward"] > first["backward"] and last["backward"] > last["forward"]
            out.append(("forward's share gives way to backward's as batches grow", STUDY["fwd_bwd"],
                        f"forward/backward {100 * first['forward']:.0f}/{100 * first['backward']:.0f} % "
                        f"(bs {ctrls[0]['batch_size']}) -> {100 * last['forward']:.0f}/{100 * last['backward']:.0f} % "
                        f"(bs {ctrls[-1]['batch_size']})",
                        "yes" if flips else
                        "no: backward's share does not grow" if not shifts else
                        "partly: backward's share grows, but " + (
                            "it leads already at the smallest batch" + ("" if gpu else
                            " (no launch-bound forward on a CPU)") if first["backward"] >= first["forward"]
                            else "forward still leads at the largest")))
        utils = [r["gpu_util_pct"] for r in ctrls]
        cpu = " / ".join(_fmt(r["cpu_util_pct"]) for r in ctrls)
        if all(u is not None for u in utils):
            mono = all(b >= a for a, b in zip(utils, utils[1:], strict=False))
            out.append(("GPU utilisation rises monotonically with batch size", STUDY["gpu_util"],
                        "GPU " + " / ".join(f"{u:.0f}" for u in utils) + f" %; process CPU {cpu} %",
                        "yes" if mono else "no: not monotonic"))
        else:
            out.append(("GPU utilisation rises monotonically with batch size", STUDY["gpu_util"],
                        f"no GPU ({device}); process CPU utilisation {cpu} %", "pending a GPU"))
    wruns = sorted((r for r in results if r["mode"] == "controlled" and r["batch_size"] == batch_sizes[-1]),
                   key=lambda r: r["workers"])
    if len({r["workers"] for r in wruns}) > 2 and wruns[0]["workers"] == 0:
        cells = "; ".join(f"{r['workers']} workers: epoch {r['epoch_s']:.2f} s, data p50 {r['data_p50_ms']:.0f} ms"
                          + (f", GPU {r['gpu_util_pct']:.0f} %" if r["gpu_util_pct"] is not None else "")
                          + f", CPU {_fmt(r['cpu_util_pct'])} %" for r in wruns)
        if all(r["gpu_util_pct"] is not None for r in wruns):
            u = [r["gpu_util_pct"] for r in wruns]
            verdict = "yes" if u[1] - u[0] > 2 * abs(u[2] - u[1]) else "no"
        else:
            e = [r["epoch_s"] for r in wruns]
            verdict = ("pending a GPU for utilisation; on this CPU "
                       + ("workers shorten the epoch, 0 -> 2 more than 2 -> 4" if e[0] - e[1] > abs(e[1] - e[2])
                          else f"workers do not help ({os.cpu_count()} cores: they compete with the step)"))
        out.append(("0 -> 2 workers lifts GPU utilisation, 2 -> 4 adds little",
                    "large jump 0 -> 2, plateau 2 -> 4 (bs4096)", cells, verdict))
    energies = [(r["batch_size"], sum(r["energy_j_per_epoch"].values())) for r in ctrls]
    if energies and all(e > 0 for _, e in energies):
        ranked_e = sorted(energies, key=lambda t: t[1])
        best_bs = ranked_e[0][0]
        close = [bs for bs, e in ranked_e if e <= 1.05 * ranked_e[0][1]]  # within this VM's noise
        src = ctrls[0]["energy_sources"]
        modelled = not gpu
        out.append(("an energy sweet spot below the largest batch", STUDY["energy"],
                    "J / epoch " + " / ".join(f"{e:.1f}" for _, e in energies) + f" (lowest at bs {best_bs}; "
                    f"CPU {src.get('energy_cpu_j')}, GPU {src.get('energy_gpu_j') or '–'})",
                    ("yes" if batch_sizes[-1] not in close else "no: lowest at the largest batch")
                    + (f" (no single lowest: {', '.join(map(str, sorted(close)))} within 5 %)"
                       if len(close) > 1 else "")
                    + (" — modelled: on a CPU the estimate follows time, so this is the epoch-time curve"
                       if modelled else "")))
        e = ctrls[-1]["energy_j_per_epoch"]
        total = sum(e.values())
        out.append(("CPU energy ~66 %: an artefact of a constant-TDP model", "66 % CPU at every batch size",
                    f"bs {ctrls[-1]['batch_size']}: CPU {100 * e['energy_cpu_j'] / total:.0f} %, GPU "
                    f"{100 * e['energy_gpu_j'] / total:.0f} %, RAM {100 * e['energy_ram_j'] / total:.0f} % "
                    f"(CPU: {src.get('energy_cpu_j')})",
                    ("gnnmon charges the CPU by measured CPU-seconds or RAPL, not a constant TDP: see the "
                     "sources" if gpu else "can't judge without a GPU: the shares here are of CPU and RAM "
                     "estimates only")))
    else:
        out.append(("an energy sweet spot below the largest batch", STUDY["energy"], "energy not recorded",
                    "run with --energy"))
    overheads, within = [], []
    for bs in batch_sizes:
        r, c = get("raw", bs), get("controlled", bs)
        if r and c:
            overheads.append((bs, 100 * (r["step_p90_ms"] / c["step_p90_ms"] - 1)))
        if r and r["gc_p90_cost"] is not None:
            within.append((bs, 100 * r["gc_p90_cost"], 100 * (r["gc_share"] or 0.0)))
    if within:
        worst = max(v for _, v, _ in within)
        out.append(("GC costs 1-2 % at p90", "~1-2 % at p90 (spikes dramatic, cost modest)",
                    "raw runs, p90 of an iteration (load + step) with vs without its GC pauses: "
                    + ", ".join(f"bs {bs} {v:+.1f} % (GC {g:.1f} % of the time)" for bs, v, g in within)
                    + "; raw vs controlled run, step p90 (run-to-run noise included): "
                    + ", ".join(f"bs {bs} {v:+.1f} %" for bs, v in overheads),
                    "yes: modest" if worst <= 5 else f"more here: up to {worst:.0f} % at p90"))
    return out


def markdown(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [f"Command: `{meta['command']}` · {meta['machine']} · {meta['when']} · total {meta['total_s']:.0f} s",
             "", f"Preset `{meta['preset']}`: PNA with {meta['layers']} layers, hidden {meta['hidden']}, "
             f"{meta['graphs']:,} synthetic PCQM4Mv2-shaped molecules, {meta['epochs']} epochs per run, device "
             f"{meta['device']} (steps timed by {meta['timer']}); sampling every {meta['sample']} s.", "",
             "| mode | batch | workers | steps / epoch | epoch s | step p50 / p90 / p99 / max ms | data p50 ms | "
             "fwd / bwd / opt % | gen-2 in rows | `gc` spikes | CPU % | GPU % | J / epoch (CPU / GPU / RAM) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        s = r["shares"]
        e = r["energy_j_per_epoch"]
        lines.append(
            f"| {r['mode']} | {r['batch_size']} | {r['workers']} | {r['steps_per_epoch']} | {r['epoch_s']:.2f} | "
            f"{r['step_p50_ms']:.0f} / {r['step_p90_ms']:.0f} / {r['step_p99_ms']:.0f} / {r['step_max_ms']:.0f} | "
            f"{r['data_p50_ms']:.1f} | "
            + (f"{100 * s['forward']:.0f} / {100 * s['backward']:.0f} / {100 * s['optimizer']:.0f}" if s else "–")
            + f" | {r['gen2_rows']} | {r['gc_spikes']} | {_fmt(r['cpu_util_pct'])} | {_fmt(r['gpu_util_pct'])} | "
            + (" / ".join(f"{e[k]:.1f}" for k in ("energy_cpu_j", "energy_gpu_j", "energy_ram_j"))
               if any(e.values()) else "–") + " |")
    lines += ["", "## The study's findings", "", "| finding | study (GPU) | ours | verdict |",
              "| --- | --- | --- | --- |"]
    lines += [f"| {f} | {s} | {o} | {v} |" for f, s, o, v in verdicts(results, meta["batch_sizes"], meta["workers"],
                                                                    meta["device"])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="cpu", choices=list(PRESETS))
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda", "mps"))
    parser.add_argument("--graphs", type=int)
    parser.add_argument("--batch-sizes", type=int, nargs="+")
    parser.add_argument("--workers", type=int, help="DataLoader workers of the batch-size sweep")
    parser.add_argument("--worker-sweep", type=int, nargs="*", help="worker counts tried at the largest batch")
    parser.add_argument("--layers", type=int)
    parser.add_argument("--hidden", type=int)
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--out", default="runs")
    parser.add_argument("--sample", type=float, help="utilisation sample interval, s (0: none)")
    parser.add_argument("--energy", action=argparse.BooleanOptionalAction, help="energy and CO2 per row")
    parser.add_argument("--country", default=None, help="ISO alpha-3 code for the carbon intensity")
    parser.add_argument("--figures", default=None, help="folder for the timeline PNGs")
    args = parser.parse_args(argv)
    for key, value in PRESETS[args.preset].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.sample = args.sample or None
    device = torch.device(args.device)
    t_start = time.perf_counter()
    graphs = molecules(PCQM4MV2, args.graphs)
    print(f"data: synthetic PCQM4Mv2 stand-in, {len(graphs):,} molecules "
          f"({sum(g.num_nodes for g in graphs) / len(graphs):.1f} atoms on average); preset {args.preset}, "
          f"device {device}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plan = [(mode, bs, args.workers) for bs in args.batch_sizes for mode in ("raw", "controlled")]
    plan += [("controlled", args.batch_sizes[-1], w) for w in args.worker_sweep if w != args.workers]
    results, runs = [], []
    for mode, bs, workers in progress(plan, f"{args.preset} runs"):
        name = "pna" if args.preset == "example" else f"pna_{args.preset}_bs{bs}_w{workers}"
        run, epoch_s = train(mode, bs, workers, graphs, args, device, out / f"{name}_{mode}.jsonl")
        results.append(summarise(run, epoch_s, mode, bs, workers))
        runs.append((mode, bs, workers, run))
    if len(runs) <= 2 or args.figures:
        for mode, bs, workers, run in runs:
            report = run.report()
            if len(runs) <= 2:
                print(f"\n## {mode}\n")
                print(report.markdown())
            if args.figures:
                Path(args.figures).mkdir(parents=True, exist_ok=True)
                stem = "pna" if args.preset == "example" else f"pna_{args.preset}_bs{bs}_w{workers}"
                png = Path(args.figures) / f"{stem}_{mode}_timeline.png"
                plot_timeline(report, png, title=f"PNA on {device}, synthetic PCQM4Mv2, batch {bs}, "
                                                 f"{workers} workers, {mode} GC")
                print(f"timeline: {png}")
    if len(runs) > 2:
        meta = {"command": "python play/pna_steps.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                "machine": f"{platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
                           f"torch {torch.__version__}",
                "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "total_s": time.perf_counter() - t_start,
                "preset": args.preset, "layers": args.layers, "hidden": args.hidden, "graphs": len(graphs),
                "epochs": args.epochs, "device": str(device), "sample": args.sample,
                "batch_sizes": args.batch_sizes, "workers": args.workers,
                "timer": results[0]["device_s_source"]}
        text = markdown(results, meta)
        (out / f"pna_{args.preset}.md").write_text(text)
        (out / f"pna_{args.preset}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
        print("\n" + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
