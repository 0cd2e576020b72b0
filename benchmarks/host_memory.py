"""What exact host peaks cost on a GraphSAGE loop, and how accurate each way of getting them is.

    python benchmarks/host_memory.py [--rounds 4] [--steps 20] [--quick] [--out runs/host_memory.md]

The loop is issue 42's: GraphSAGE 64-128-128-10 (two ``SAGEConv`` and a linear head) trained with
``NeighborLoader([10, 5])``, 1,024 seed nodes a batch, on a 100,000-node, 1,000,000-edge synthetic
graph (50,000 training nodes: 49 steps an epoch), its step under ``@monitor_memory_device`` inside
``gnnmon.collect()``. glibc's settings are per process and cannot be undone, so every variant runs
in a fresh child process, and the variants alternate: round after round, each runs once, in an
order that rotates. Each child runs ``--steps`` steps (after two to warm up) and reports their wall
and CPU time (every thread's, user + system) and minor page faults; the figures compared are the
median over rounds of the ratio to the default run of the same round.

Accuracy: then, in the same child, on a few more steps, two allocations are planted inside the
step, after the forward pass (its activations alive, as a per-layer window sees them), each in a
``memory_scope`` of its own: one 16 MiB tensor, and 16 MiB as 64 tensors of 256 KiB; every page
is written. A window's ``mem_peak_delta_bytes`` over the planted bytes is its accuracy (1.00 is
exact). The bound: glibc's own statistics (``mallinfo2().fordblks``, the free bytes its heaps keep)
read as the window opens; the planted bytes can lie anywhere from the RSS growth up to the growth
plus those free bytes, so that interval always covers the truth, and its width is the question.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MiB = 2**20
PLANT_BYTES = 16 * MiB
PIECE_BYTES = 256 * 1024
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
SLACK = MiB // 2  # how far a 2-core machine's RSS counters may lag (docs/memory.md): a bound's tolerance

VARIANTS: dict[str, str] = {
    "default": "glibc's defaults (mmap threshold dynamic, up to 32 MiB)",
    "exact 64 KiB": "gnnmon.exact_host_memory(): mmap threshold fixed at 64 KiB, trim threshold and top pad at 128 KiB",
    "mmap threshold 64 KiB only": "M_MMAP_THRESHOLD 64 KiB alone: the trim threshold stays wherever glibc's "
                                  "dynamic rule left it",
    "exact 1 MiB": "gnnmon.exact_host_memory(1 MiB)",
    "exact 4 MiB": "gnnmon.exact_host_memory(4 MiB)",
    "trim threshold 0": "M_MMAP_THRESHOLD 32 MiB, M_TRIM_THRESHOLD 0: the heap's top returned on every free",
    "malloc_trim per window": "glibc's defaults; malloc_trim(0) just before each window opens "
                              "(step rows, planted windows)",
    "exact 64 KiB + huge pages": "gnnmon.exact_host_memory(), GLIBC_TUNABLES=glibc.malloc.hugetlb=1 "
                                 "(THP on mmapped blocks)",
}
ENV: dict[str, dict[str, str]] = {"exact 64 KiB + huge pages": {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}}


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                 "fordblks", "keepcost")]


def _libc() -> Any:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _Mallinfo2
    return libc


def set_up(variant: str, libc: Any) -> Callable[[], None]:
    """Apply ``variant``'s settings to this process; returns what runs before each window opens."""
    import gnnmon

    if variant.startswith("exact"):
        size = {"exact 1 MiB": MiB, "exact 4 MiB": 4 * MiB}.get(variant, 64 * 1024)
        assert gnnmon.exact_host_memory(size)
    elif variant == "mmap threshold 64 KiB only":
        assert libc.mallopt(M_MMAP_THRESHOLD, 64 * 1024) == 1
        libc.malloc_trim(0)  # as exact_host_memory() does after its settings
    elif variant == "trim threshold 0":
        assert libc.mallopt(M_MMAP_THRESHOLD, 32 * MiB) == 1 and libc.mallopt(M_TRIM_THRESHOLD, 0) == 1
    elif variant == "malloc_trim per window":
        return lambda: libc.malloc_trim(0)
    return lambda: None


def build_graph(nodes: int, path: Path) -> None:
    """The synthetic graph (10 edges a node, 64 features, 10 classes), saved for the children."""
    import torch

    from play.synthetic import GraphSpec, planted_partition

    torch.save(planted_partition(GraphSpec("SAGE", nodes, nodes * 10, 64, 10), seed=0), path)


def child(variant: str, graph: Path, steps: int, plant_steps: int) -> dict[str, Any]:
    """One variant in this (fresh) process: the timed steps, then the planted windows."""
    libc = _libc()
    before_window = set_up(variant, libc)  # first thing, before the data is loaded
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import SAGEConv

    import gnnmon
    from gnnmon.integrations.pyg_sampler import neighbor_loader

    data = torch.load(graph, weights_only=False)
    torch.manual_seed(0)

    class SAGE(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1, self.conv2 = SAGEConv(64, 128), SAGEConv(128, 128)
            self.head = torch.nn.Linear(128, 10)

        def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
            return self.head(F.relu(self.conv2(F.relu(self.conv1(x, edge_index)), edge_index)))

    model = SAGE()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    plants: list[dict[str, float]] = []

    def plant(name: str, sizes: list[int]) -> None:
        before_window()
        free = libc.mallinfo2().fordblks
        with gnnmon.memory_scope(label=name) as f:
            held = [torch.empty(n, dtype=torch.uint8) for n in sizes]
            for t in held:
                t.fill_(1)
            del held
        read, planted = f["mem_peak_delta_bytes"], sum(sizes)
        plants.append({"plant": name, "ratio": read / planted, "free_mib": free / MiB,
                       "covered": read - SLACK <= planted <= read + free + SLACK})

    @gnnmon.monitor_memory_device(label="train_step")
    def step(batch: Any, planting: bool) -> None:
        out = model(batch.x, batch.edge_index)
        loss = F.cross_entropy(out[: batch.batch_size], batch.y[: batch.batch_size])
        if planting:
            plant("one 16 MiB tensor", [PLANT_BYTES])
            plant("64 x 256 KiB", [PIECE_BYTES] * (PLANT_BYTES // PIECE_BYTES))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    loader = neighbor_loader(data, [10, 5], batch_size=1024, shuffle=True, input_nodes=data.train_mask)
    batches = iter(loader)

    def next_batch() -> Any:
        nonlocal batches
        try:
            return next(batches)
        except StopIteration:
            batches = iter(loader)
            return next(batches)

    with gnnmon.collect() as run:
        for _ in range(2):  # warm-up
            before_window()
            step(next_batch(), False)
        faults, cpu, wall = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time(), time.perf_counter()
        for _ in range(steps):
            batch = next_batch()  # sampling is part of the loop's cost
            before_window()
            step(batch, False)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        for _ in range(plant_steps):
            before_window()
            step(next_batch(), True)
    rows = [r for r in run.records if r["label"] == "train_step"][2:2 + steps]
    t0 = time.perf_counter()
    for _ in range(200):
        libc.mallinfo2()
    return {"variant": variant, "wall_s": wall, "cpu_s": cpu, "faults": faults, "steps": steps,
            "step_peak_delta_mib": statistics.median(r["mem_peak_delta_bytes"] for r in rows) / MiB,
            "plants": plants, "mallinfo2_us": (time.perf_counter() - t0) / 200 * 1e6,
            "sampler": loader.sampler_name}


def run_child(variant: str, graph: Path, steps: int, plant_steps: int) -> dict[str, Any]:
    env = {**os.environ, **ENV.get(variant, {})}
    proc = subprocess.run([sys.executable, __file__, "--child", variant, "--graph", str(graph), "--steps", str(steps),
                           "--plant-steps", str(plant_steps)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{variant}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def summarize(rounds: list[dict[str, dict[str, Any]]], names: list[str]) -> list[dict[str, Any]]:
    """Per variant: medians over rounds of the paired ratios to the same round's default run, and
    of the planted windows' accuracy."""
    out = []
    for variant in names:
        runs = [r[variant] for r in rounds]
        base = [r["default"] for r in rounds]
        plants: dict[str, list[dict[str, Any]]] = {}
        for run in runs:
            for p in run["plants"]:
                plants.setdefault(p["plant"], []).append(p)
        out.append({
            "variant": variant,
            "wall_ratio": statistics.median(v["wall_s"] / b["wall_s"] for v, b in zip(runs, base, strict=True)),
            "wall_ratios": [round(v["wall_s"] / b["wall_s"], 2) for v, b in zip(runs, base, strict=True)],
            "cpu_ratio": statistics.median(v["cpu_s"] / b["cpu_s"] for v, b in zip(runs, base, strict=True)),
            "wall_s_per_step": statistics.median(v["wall_s"] / v["steps"] for v in runs),
            "faults_per_step": statistics.median(v["faults"] / v["steps"] for v in runs),
            "step_peak_delta_mib": statistics.median(v["step_peak_delta_mib"] for v in runs),
            "plants": {name: {"ratio_median": statistics.median(p["ratio"] for p in ps),
                              "ratio_min": min(p["ratio"] for p in ps), "ratio_max": max(p["ratio"] for p in ps),
                              "bound_covers": sum(p["covered"] for p in ps), "windows": len(ps),
                              "bound_width_mib": statistics.median(p["free_mib"] for p in ps)}
                       for name, ps in plants.items()},
            "mallinfo2_us": statistics.median(v["mallinfo2_us"] for v in runs),
        })
    return out


def markdown(rows: list[dict[str, Any]], header: str) -> str:
    names = list(rows[0]["plants"])
    lines = [header, "",
             "| variant | wall / default (median; each round) | CPU / default | s a step | page faults a step "
             "| step's peak delta, MiB | " + " | ".join(f"{n}: read / planted (min-max)" for n in names) + " |",
             "| --- | --- | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in names) + " |"]
    for r in rows:
        plants = " | ".join(f"{p['ratio_median']:.2f} ({p['ratio_min']:.2f}-{p['ratio_max']:.2f})"
                            for p in r["plants"].values())
        lines.append(f"| {r['variant']} | {r['wall_ratio']:.2f} ({', '.join(map(str, r['wall_ratios']))}) | "
                     f"{r['cpu_ratio']:.2f} | {r['wall_s_per_step']:.2f} | {r['faults_per_step']:,.0f} | "
                     f"{r['step_peak_delta_mib']:.1f} | {plants} |")
    lines += ["", "The bound (glibc's statistics, `mallinfo2().fordblks` as the window opens: the planted bytes "
              "lie between the RSS growth and the growth plus these free bytes):", "",
              "| variant | " + " | ".join(f"{n}: bound covers / windows, median width MiB" for n in names) + " |",
              "| --- | " + " | ".join("---:" for _ in names) + " |"]
    for r in rows:
        lines.append(f"| {r['variant']} | " + " | ".join(
            f"{p['bound_covers']}/{p['windows']}, {p['bound_width_mib']:.1f}" for p in r["plants"].values()) + " |")
    lines += ["", f"One `mallinfo2()` call: {statistics.median(r['mallinfo2_us'] for r in rows):.0f} µs (median).", "",
              "Variants:", ""] + [f"- **{r['variant']}**: {VARIANTS[r['variant']]}" for r in rows]
    return "\n".join(lines) + "\n"


def machine() -> str:
    import torch
    import torch_geometric

    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    return (f"{platform.platform()}, {os.cpu_count()} cores ({model}), Python {platform.python_version()}, "
            f"torch {torch.__version__}, PyG {torch_geometric.__version__}, {platform.libc_ver()[0]} "
            f"{platform.libc_ver()[1]}, load average {os.getloadavg()[0]:.1f} at the start")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20, help="timed steps a child (after two to warm up)")
    parser.add_argument("--plant-steps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a 10,000-node graph, 1 round, 3 steps")
    parser.add_argument("--variants", help="comma-separated names (default: all of them)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--graph", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.graph, args.steps, args.plant_steps)))
        return 0
    names = args.variants.split(",") if args.variants else list(VARIANTS)
    if "default" not in names or not set(names) <= set(VARIANTS):
        parser.error(f"--variants: names among {list(VARIANTS)}, default included")
    nodes = 100_000
    if args.quick:
        nodes, args.rounds, args.steps, args.plant_steps = 10_000, 1, 3, 1
    command = "python benchmarks/host_memory.py" + (" --quick" if args.quick else
                                                    f" --rounds {args.rounds} --steps {args.steps}")
    if args.variants:
        command += f" --variants '{args.variants}'"
    header = f"Command: `{command}` · {machine()}"
    print(header, flush=True)
    rounds: list[dict[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        graph = Path(tmp) / "graph.pt"
        build_graph(nodes, graph)
        for i in range(args.rounds):
            order = names[i % len(names):] + names[: i % len(names)]
            results = {}
            for variant in order:
                results[variant] = run_child(variant, graph, args.steps, args.plant_steps)
                r = results[variant]
                print(f"round {i}: {variant}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, "
                      f"{r['faults']:,} faults, plants {[round(p['ratio'], 2) for p in r['plants']]}", flush=True)
            rounds.append(results)
    rows = summarize(rounds, names)
    text = markdown(rows, header)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(
            json.dumps({"machine": header, "rows": rows, "rounds": rounds}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
