"""The Flickr GCN memory study (the seed article "Slimming the Graph Neural Network Footprint"),
done with gnnmon: every setting really applied and read back, memory read at its peak inside each
step rather than after it.

Sweeps (each configuration a fresh model and loader; warm-up steps excluded from the figures):

* ``hidden``      hidden size 32, 64, 128, 256, 512
* ``pin_memory``  off / on
* ``precision``   float64, float32, float16 (weights and features), bfloat16 autocast (loss in float32)
* ``workers``     DataLoader workers 0, 2, 4, 6 (their memory included)
* ``sampling``    NeighborLoader fanouts [5], [10], [10,5], [15,10], [25,10], [25,15,10]
* ``checkpoint``  activation checkpointing off / on

Data: PyG's Flickr from ``--root`` when it can be loaded (or downloaded), else a synthetic stand-in
with Flickr's statistics (89,250 nodes, 899,756 edges, 500 features, 7 classes). Writes, per sweep,
``runs/flickr_<sweep>.jsonl``, ``.md`` and ``.png``, and ``runs/flickr_comparison.md``.

Run: ``make demo`` (all sweeps at demo size, about 6 minutes of CPU time: README), ``--full`` for the
full-size study, ``--sweep precision`` for one axis, ``--device cuda`` / ``mps`` / ``cpu``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gnnmon
from gnnmon import cuda_timed, gc_controlled, monitor_memory_device, phase
from gnnmon.integrations.pyg_sampler import neighbor_loader
from play.models import GCN
from play.progress import progress
from play.synthetic import FLICKR, GraphSpec, planted_partition

MiB = 2**20


@dataclasses.dataclass(frozen=True)
class Setting:
    """One configuration of the training step."""

    hidden: int = 128
    pin_memory: bool = False
    precision: str = "float32"
    num_workers: int = 0
    fanouts: tuple[int, ...] = (10, 5)
    checkpoint: bool = False
    conv: str = "gcn"
    batch_size: int = 256


# precision -> (dtype of weights and features, autocast dtype or None)
PRECISIONS: dict[str, tuple[torch.dtype, torch.dtype | None]] = {
    "float64": (torch.float64, None),
    "float32": (torch.float32, None),
    "float16": (torch.float16, None),
    "bfloat16-autocast": (torch.float32, torch.bfloat16),
}

SWEEPS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "hidden": [(str(h), {"hidden": h}) for h in (32, 64, 128, 256, 512)],
    "pin_memory": [("off", {"pin_memory": False}), ("on", {"pin_memory": True})],
    "precision": [(p, {"precision": p}) for p in PRECISIONS],
    "workers": [(str(w), {"num_workers": w}) for w in (0, 2, 4, 6)],
    "sampling": [(str(list(f)), {"fanouts": f}) for f in ((5,), (10,), (10, 5), (15, 10), (25, 10), (25, 15, 10))],
    "checkpoint": [("off", {"checkpoint": False}), ("on", {"checkpoint": True})],
}

ARTICLE = {
    "precision 64 -> 32 bit": "-43.4 %",
    "precision 64 -> 16 bit": "-63.6 %",
}


# -- data ---------------------------------------------------------------------------------------

def load_flickr(root: str | None, scale: float = 1.0, seed: int = 0) -> tuple[Any, str]:
    """PyG's Flickr from ``root`` (downloaded there if the network allows), else the stand-in."""
    why = "no --root given"
    if root is not None:
        try:
            from torch_geometric.datasets import Flickr

            with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
                warnings.simplefilter("ignore")
                data = Flickr(root)[0]
            return data, f"PyG Flickr from {root}: {data.num_nodes:,} nodes, {data.num_edges:,} edges"
        except Exception as exc:  # noqa: BLE001 - no network, no files: fall back, say why
            why = f"PyG Flickr could not be loaded from {root} ({type(exc).__name__}: {str(exc)[:120]})"
    spec: GraphSpec = FLICKR if scale == 1.0 else FLICKR.scaled(scale)
    data = planted_partition(spec, seed=seed)
    return data, (f"synthetic Flickr stand-in {spec.name}: {spec.num_nodes:,} nodes, {spec.num_edges:,} edges, "
                  f"{spec.num_features} features, {spec.num_classes} classes — {why}")


# -- one configuration --------------------------------------------------------------------------

def make_step(model: GCN, optimizer: torch.optim.Optimizer, device: torch.device, setting: Setting) -> Callable:
    """The decorated train step for one configuration (loss on the batch's seed nodes only)."""
    dtype, autocast_dtype = PRECISIONS[setting.precision]

    @monitor_memory_device(label="train_step", include_children=setting.num_workers > 0,
                           sample_interval=0.01)
    @cuda_timed
    @gc_controlled
    def train_step(model: GCN, batch: Any) -> torch.Tensor:
        model.train()
        with phase("h2d"):
            batch = batch.to(device, non_blocking=setting.pin_memory)
            x = batch.x if batch.x.dtype == dtype else batch.x.to(dtype)
        with phase("forward"):
            with torch.autocast(device.type, dtype=autocast_dtype or torch.bfloat16,
                                enabled=autocast_dtype is not None):
                out = model(x, batch.edge_index)
            seeds = batch.batch_size
            loss = F.cross_entropy(out[:seeds].float(), batch.y[:seeds])  # the loss in float32
        with phase("backward"):
            loss.backward()
        with phase("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return train_step


def run_config(data: Any, setting: Setting, name: str, *, run: gnnmon.Run, steps: int, warmup: int,
               device: torch.device, seed: int = 0) -> dict[str, Any]:
    """Train ``warmup + steps`` steps of one configuration inside ``run``; returns what was read
    back from the loader and the model (the proof each setting took effect)."""
    with warnings.catch_warnings():
        # torch's advice on 6 workers for 2 cores, and on pin_memory without an accelerator, is
        # what the sweep is about; both are recorded in the read-back instead.
        warnings.filterwarnings("ignore", message=".*(worker processes in total|pin_memory).*")
        return _run_config(data, setting, name, run=run, steps=steps, warmup=warmup, device=device,
                           seed=seed)


def _run_config(data: Any, setting: Setting, name: str, *, run: gnnmon.Run, steps: int, warmup: int,
                device: torch.device, seed: int) -> dict[str, Any]:
    torch.manual_seed(seed)
    dtype, autocast_dtype = PRECISIONS[setting.precision]
    model = GCN(data.num_features, setting.hidden, int(data.y.max()) + 1, conv=setting.conv,
                checkpoint=setting.checkpoint).to(device=device, dtype=dtype)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    # filter_per_worker=True: the batch's features are gathered in collate (in the workers), before
    # the DataLoader pins what collate returns. With False (PyG's inferred choice for CPU data in
    # some versions) they are gathered afterwards in the main process, from unpinned memory, and
    # pin_memory pins only the sampler's index tensors.
    import psutil

    others = {c.pid for c in psutil.Process().children()}  # not the loader's: a test runner's, a forkserver
    loader = neighbor_loader(data, list(setting.fanouts), batch_size=setting.batch_size,
                         input_nodes=data.train_mask, shuffle=True, filter_per_worker=True,
                         num_workers=setting.num_workers, pin_memory=setting.pin_memory)
    step = make_step(model, optimizer, device, setting)
    seen_dtypes: list[str] = []  # the first convolution's matmul output (what autocast lowers)
    conv_dtypes: list[str] = []  # its output (GCNConv's float32 bias add promotes it back)
    inner = getattr(model.conv1, "lin", None) or getattr(model.conv1, "lin_rel", None) or model.conv1
    hooks = [inner.register_forward_hook(lambda m, i, o: seen_dtypes.append(str(o.dtype))),
             model.conv1.register_forward_hook(lambda m, i, o: conv_dtypes.append(str(o.dtype)))]
    readback: dict[str, Any] = {
        "hidden": model.conv1.out_channels,
        "conv": type(model.conv1).__name__,
        "param_dtype": str(next(model.parameters()).dtype),
        "autocast": str(autocast_dtype) if autocast_dtype else None,
        "pin_memory": loader.pin_memory,
        "filter_per_worker": loader.filter_per_worker,
        "num_workers": loader.num_workers,
        "fanouts": list(loader.node_sampler.num_neighbors.values),
        "batch_size": loader.batch_size,
        "sampler": loader.sampler_name,
        "checkpoint": model.checkpoint,
        "device": str(device),
    }
    run.mark("config", name)
    run.mark("stage", "warm-up")
    if setting.num_workers > (os.cpu_count() or 1):
        readback["note"] = f"{setting.num_workers} workers on {os.cpu_count()} CPU cores"
    batches = iter(loader)
    try:
        for i in range(warmup + steps):
            if i == warmup:
                run.mark("stage", "measured")
            try:
                batch = next(batches)
            except StopIteration:  # a small graph: start another epoch
                batches = iter(loader)
                batch = next(batches)
            calls = model.conv_calls
            if i == 0:  # before the step: PyG's Data.to() moves the batch's tensors in place
                readback["batch_pinned"] = bool(batch.x.is_pinned())
            loss = step(model, batch)
            if i == 0:
                for hook in hooks:
                    hook.remove()
                readback["activation_dtype"] = seen_dtypes[0] if seen_dtypes else None
                readback["conv_output_dtype"] = conv_dtypes[0] if conv_dtypes else None
                readback["worker_processes"] = len([c for c in psutil.Process().children() if c.pid not in others])
                readback["conv_forwards_per_step"] = model.conv_calls - calls
        readback["last_loss"] = float(loss)
        if setting.num_workers:  # what the workers add: private memory, read once (slow to read)
            from gnnmon.devices.children import children_private_memory

            kids = children_private_memory()
            readback["workers_uss_mib"] = kids["uss_bytes"] / MiB
            readback["workers_pss_mib"] = kids["pss_bytes"] / MiB
    finally:
        del batches  # shuts the workers down
    if setting.pin_memory and not readback["batch_pinned"]:
        readback["note"] = ("pin_memory asked but batches are not pinned: " +
                            ("no accelerator here" if not _accelerator() else
                             f"filter_per_worker={loader.filter_per_worker}"))
    run.mark("readback", {"config": name, **readback}, carry=False)
    return readback


# -- a sweep ------------------------------------------------------------------------------------

def summarise(records: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """Medians and maxima of one configuration's measured steps, each device's memory apart: the
    step's device (``mem_*``: the GPU's allocator on CUDA and MPS, the host's RSS on the CPU), the
    main process's own host memory (``rss_*`` less its workers) and the workers' (``rss_children_*``)."""
    rows = [r for r in records if r.get("config") == name and r.get("stage") == "measured"
            and r["label"] == "train_step"]
    if not rows:
        return {"steps": 0}

    def med(key: str) -> float | None:
        vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        return statistics.median(vals) if vals else None

    def mx(key: str) -> float | None:
        vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        return max(vals) if vals else None

    # The host process alone: RSS (which counts the workers when they are included) less them.
    host = [r["rss_peak_bytes"] - (r.get("rss_children_peak_bytes") or 0) for r in rows]
    h2d = med("phase_h2d_s")
    return {
        "steps": len(rows),
        "backend": rows[0].get("backend"),
        "device": rows[0].get("device"),
        "step_peak_mib_median": med("mem_peak_delta_bytes") / MiB,
        "step_peak_mib_max": mx("mem_peak_delta_bytes") / MiB,
        "device_peak_mib_median": med("mem_peak_bytes") / MiB,
        "device_peak_mib_max": mx("mem_peak_bytes") / MiB,
        "own_peak_mib_median": statistics.median(host) / MiB,
        "children_peak_mib_median": (med("rss_children_peak_bytes") or 0) / MiB,
        "step_s_median": med("device_s"),
        "h2d_ms_median": None if h2d is None else h2d * 1e3,
        "nodes_median": med("num_nodes"),
        "edges_median": med("num_edges"),
        "peak_source": rows[0].get("mem_peak_bytes_source"),
        "host_source": rows[0].get("rss_peak_bytes_source"),
    }


def _accelerator() -> bool:
    return torch.cuda.is_available() or torch.backends.mps.is_available()


def run_sweep(axis: str, data: Any, *, base: Setting, steps: int, warmup: int, device: torch.device,
              out: Path, data_note: str, log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """All configurations of one axis into ``out/flickr_<axis>.jsonl``; writes its table and figure."""
    configs = SWEEPS[axis]
    config = {"sweep": axis, "data": data_note, "steps": steps, "warmup": warmup,
              "base": dataclasses.asdict(base), "device": str(device)}
    results = []
    with gnnmon.collect(out / f"flickr_{axis}.jsonl", config=config) as run:
        for k, (name, change) in enumerate(progress(configs, f"sweep {axis}"), 1):
            setting = dataclasses.replace(base, **change)
            t0 = time.perf_counter()
            readback = run_config(data, setting, name, run=run, steps=steps, warmup=warmup, device=device)
            results.append({"name": name, "setting": dataclasses.asdict(setting), "readback": readback})
            log(f"  [{axis} {k}/{len(configs)}] {name:<18} {time.perf_counter() - t0:5.1f} s")
    records = run.records
    for r in results:
        r["summary"] = summarise(records, r["name"])
        # The main process's own peak plus what the workers hold privately (their USS).
        r["summary"]["with_workers_mib"] = (r["summary"]["own_peak_mib_median"]
                                            + r["readback"].get("workers_uss_mib", 0.0))
    (out / f"flickr_{axis}.md").write_text(sweep_markdown(axis, results, data_note, steps, warmup))
    plot_sweep(axis, results, out / f"flickr_{axis}.png", data_note)
    return results


def _effect(r: dict[str, Any]) -> str:
    """The read-back values that prove this axis' setting took effect."""
    b = r["readback"]
    parts = [f"hidden={b['hidden']}", f"params {b['param_dtype'].replace('torch.', '')}",
             f"activations {str(b.get('activation_dtype')).replace('torch.', '')} (conv matmul; conv output "
             f"{str(b.get('conv_output_dtype')).replace('torch.', '')})",
             f"fanouts={b['fanouts']}", f"workers={b['num_workers']} ({b.get('worker_processes')} proc)",
             f"pin_memory={b['pin_memory']} (pinned: {b.get('batch_pinned')}, "
             f"filter_per_worker={b.get('filter_per_worker')})",
             f"checkpoint={b['checkpoint']} ({b.get('conv_forwards_per_step')} conv fwd/step)"]
    return "; ".join(parts)


def sweep_markdown(axis: str, results: list[dict[str, Any]], data_note: str, steps: int, warmup: int) -> str:
    first = results[0]["summary"]
    where = first.get("device") or "?"
    on_host = first.get("backend") == "cpu"
    dev = "host RSS" if on_host else f"{where} allocator"
    lines = [f"## Sweep: {axis}", "", f"Data: {data_note}. {steps} measured steps per configuration "
             f"after {warmup} warm-up steps; fresh model and loader each. Device: {where}.", "",
             f"| setting | steps | step peak MiB median ({dev}) | step peak MiB max | device peak MiB median "
             "| host process peak MiB | workers RSS / USS MiB | host process + workers' USS MiB | h2d ms "
             "| s / step | nodes / batch | edges / batch |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        s = r["summary"]
        uss = r["readback"].get("workers_uss_mib")
        workers = f"{s['children_peak_mib_median']:.0f} / {uss:.0f}" if uss is not None else "–"
        h2d = "–" if s.get("h2d_ms_median") is None else f"{s['h2d_ms_median']:.2f}"
        lines.append(
            f"| {r['name']} | {s['steps']} | {s['step_peak_mib_median']:.1f} | {s['step_peak_mib_max']:.1f} | "
            f"{s['device_peak_mib_median']:.0f} | {s['own_peak_mib_median']:.0f} | {workers} | "
            f"{s['with_workers_mib']:.0f} | {h2d} | {s['step_s_median']:.3f} | {s['nodes_median']:,.0f} | "
            f"{s['edges_median']:,.0f} |")
    lines += ["", f"Step peak: the highest memory of the step's device ({dev}) inside the train step above "
              "its start (`mem_peak_delta_bytes`). Device peak: that device's highest absolute figure "
              f"(`mem_peak_bytes`, {first.get('peak_source')}). Host process peak: the main process's own "
              f"RSS peak (`rss_peak_bytes` less its workers, {first.get('host_source')}). Workers: "
              "their summed RSS sampled during the steps (`rss_children_peak_bytes`: every worker counts "
              "the parent's pages it shares) and their USS read once after the steps (the memory they "
              "alone hold). h2d: the `h2d` phase, the batch's copy to the device.", "",
              "Read back from the loader and the model:", ""]
    lines += [f"- {r['name']}: {_effect(r)}" + (f" — {r['readback']['note']}" if r['readback'].get('note') else "")
              for r in results]
    return "\n".join(lines) + "\n"


AXIS_LABELS = {
    "hidden": "hidden channels",
    "pin_memory": "pin_memory of the loader",
    "precision": "parameter / activation precision",
    "workers": "DataLoader workers",
    "sampling": "neighbour-sampling fanouts per layer",
    "checkpoint": "activation checkpointing",
}


def plot_sweep(axis: str, results: list[dict[str, Any]], path: Path | None, data_note: str) -> Any:
    """One sweep's chart: the step's peak memory per setting (bars: median, points: max), on the
    step's device; for the workers sweep also the main process + workers' USS (right axis, from 0).
    Titled with the data actually used (Flickr or its synthetic stand-in) and the device; the
    legend sits above the plot, never on the bars. Returns the Figure (saved as PNG at ``path``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    first = results[0]["summary"]
    device = first.get("device") or "?"
    measured = "host RSS" if first.get("backend") == "cpu" else "CUDA allocator" if first.get("backend") == "cuda" \
        else f"{first.get('backend')} allocator"
    data = "Flickr" if data_note.startswith("PyG Flickr") else "synthetic Flickr stand-in"
    names = [r["name"] for r in results]
    med = [r["summary"]["step_peak_mib_median"] for r in results]
    mx = [r["summary"]["step_peak_mib_max"] for r in results]
    handles = [ax.bar(names, med, color="C0", label="step peak, median"),
               ax.scatter(names, mx, color="C3", zorder=3, label="step peak, max")]
    ax.set_ylim(0, max(mx + med) * 1.1 or 1)
    ax.set_xlabel(AXIS_LABELS.get(axis, axis))
    ax.set_ylabel(f"peak above the step's start (MiB, {measured})")
    ax.set_title(f"GCN on {data} ({device}): peak memory of a train step by {AXIS_LABELS.get(axis, axis)}", fontsize=10)
    if axis == "workers":
        ax2 = ax.twinx()
        total = [r["summary"]["with_workers_mib"] for r in results]
        handles += ax2.plot(names, total, "k--o", label="main process peak + workers' USS (right)")
        ax2.set_ylim(0, max(total) * 1.1 or 1)  # from 0: a +10 % change must not fill the height
        ax2.set_ylabel("main process peak + workers' USS (MiB)")
    fig.legend(handles=handles, loc="outside upper center", ncols=len(handles), fontsize=8, frameon=False)
    ax.tick_params(axis="x", rotation=20)
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


# -- comparison with the article ------------------------------------------------------------------

def comparison(all_results: dict[str, list[dict[str, Any]]]) -> str:
    def by(axis: str, key: str = "step_peak_mib_median") -> dict[str, float]:
        return {r["name"]: r["summary"].get(key) for r in all_results.get(axis, [])}

    lines = ["## Our figures next to the article's claims", "",
             "| claim (article) | article | ours | agree? |", "| --- | --- | --- | --- |"]
    p = by("precision")
    if {"float64", "float32", "float16"} <= set(p):
        r32 = 100 * (p["float32"] / p["float64"] - 1)
        r16 = 100 * (p["float16"] / p["float64"] - 1)
        lines.append(f"| 64 -> 32 bit | -43.4 % | {r32:+.1f} % | {'yes' if abs(r32 + 43.4) < 15 else 'no'} |")
        lines.append(f"| 64 -> 16 bit | -63.6 % | {r16:+.1f} % | {'yes' if abs(r16 + 63.6) < 15 else 'no'} |")
    spreads = {}
    for axis in ("hidden", "pin_memory", "workers", "sampling", "checkpoint", "precision"):
        vals = [v for v in by(axis).values() if v]
        if vals:
            spreads[axis] = max(vals) / min(vals)
    if "sampling" in spreads:
        top = max(spreads, key=spreads.get)
        text = ", ".join(f"{a} ×{s:.2f}" for a, s in sorted(spreads.items(), key=lambda kv: -kv[1]))
        lines.append(f"| neighbour sampling dominates | largest effect | max/min per axis: {text} | "
                     f"{'yes' if top == 'sampling' else 'no: ' + top + ' is larger'} |")
    pin = by("pin_memory")
    if {"off", "on"} <= set(pin):
        d = 100 * (pin["on"] / pin["off"] - 1)
        lines.append(f"| pin_memory marginal | small | {d:+.1f} % (on vs off) | {'yes' if abs(d) < 10 else 'no'} |")
        h2d = by("pin_memory", "h2d_ms_median")
        if h2d.get("off") and h2d.get("on") is not None:
            lines.append(f"| (not in the article) pinning speeds the copy to the device | – | h2d "
                         f"{h2d['off']:.2f} -> {h2d['on']:.2f} ms ({100 * (h2d['on'] / h2d['off'] - 1):+.1f} %) | – |")
    w = by("workers", "with_workers_mib")
    if {"0", "6"} <= set(w):
        d = 100 * (w["6"] / w["0"] - 1)
        lines.append(f"| worker count marginal | small | {d:+.1f} % (process peak + workers' USS, 6 vs 0 "
                     f"workers) | {'yes' if abs(d) < 10 else 'no'} |")
    h = by("hidden")
    if h:
        vals = list(h.values())
        grows = all(b >= a for a, b in zip(vals, vals[1:], strict=False))
        lines.append(f"| memory grows with hidden size | grows | {' < '.join(f'{v:.0f}' for v in vals)} MiB "
                     f"({', '.join(h)}) | {'yes' if grows else 'no'} |")
    c = by("checkpoint")
    if {"off", "on"} <= set(c):
        d = 100 * (c["on"] / c["off"] - 1)
        lines.append(f"| activation checkpointing cuts memory (recommended, never measured) | up to -50 % | "
                     f"{d:+.1f} % | {'yes' if d < -5 else 'no'} |")
    return "\n".join(lines) + "\n"


# -- main -----------------------------------------------------------------------------------------

def pick_device(name: str) -> torch.device:
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: CUDA is not available here")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise SystemExit("--device mps: MPS is not available here")
    return device


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default="data/Flickr", help="where PyG's Flickr is (or is downloaded to)")
    parser.add_argument("--full", action="store_true", help="full-size study: more steps, larger batches")
    parser.add_argument("--device", default="auto", help="cuda, mps, cpu or auto")
    parser.add_argument("--sweep", action="append", choices=sorted(SWEEPS), help="one axis (repeatable)")
    parser.add_argument("--steps", type=int, default=None, help="measured steps per configuration")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--conv", choices=("gcn", "graphconv"), default="gcn")
    parser.add_argument("--scale", type=float, default=1.0, help="stand-in size as a share of Flickr")
    parser.add_argument("--out", default="runs")
    args = parser.parse_args(argv)

    steps = args.steps or (40 if args.full else 12)
    batch_size = args.batch_size or (1024 if args.full else 256)
    device = pick_device(args.device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    if device.type == "cpu":
        # On the CPU the step's memory is the process's RSS: make freed tensors leave it at once,
        # or every step after the first would reuse the same pages and read as zero growth. First
        # thing, before the data exists: memory freed into the heap earlier could be reused unseen.
        exact = gnnmon.exact_host_memory()
        print(f"host memory: large frees returned to the OS at once: {exact}", flush=True)
    data, note = load_flickr(args.root, args.scale)
    print(f"data: {note}", flush=True)
    base = Setting(conv=args.conv, batch_size=batch_size)
    axes = args.sweep or list(SWEEPS)
    print(f"device: {device}; {steps} measured + {args.warmup} warm-up steps per configuration; "
          f"batch size {batch_size}; sweeps: {', '.join(axes)}", flush=True)
    results: dict[str, list[dict[str, Any]]] = {}
    for axis in axes:
        results[axis] = run_sweep(axis, data, base=base, steps=steps, warmup=args.warmup, device=device,
                                  out=out, data_note=note, log=lambda m: print(m, flush=True))
        print((out / f"flickr_{axis}.md").read_text(), flush=True)
    text = comparison(results)
    (out / "flickr_comparison.md").write_text(text)
    (out / "flickr_results.json").write_text(json.dumps(results, indent=1, default=str))
    print(text)
    print(f"done in {time.perf_counter() - t_start:.0f} s; tables, figures and runs in {out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
