"""gnnmon's overhead and accuracy, measured side by side with the tools people use today.

Run: ``.venv/bin/python benchmarks/run.py`` (about 5 minutes on 2 CPU cores); ``--quick`` runs every
part at a tiny size (what the test does). Prints the tables and writes them to
``runs/benchmarks.md``.

Every figure is a ratio or an error measured in this run. Overheads: each round runs every
variant, in a shuffled order, right after a pass of the bare loop; the figure is the median over
rounds of the variant's time over that adjacent bare pass ("bare (again)" measures the noise); gnnmon
variants stream every row to a JSON Lines file (one unbuffered write per row) unless the variant
says otherwise. Errors: reported minus planted, median over repeats. Last, ``benchmarks/stream.py``'s
parts: the step's path as paired, interleaved calls (bare and decorated alternating, the median of
the differences) and the report of a 300,000-row run against a ``json.loads`` pass over its file.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# Another gnnmon to measure instead of this checkout's (e.g. an earlier commit, for before/after):
# GNNMON_BENCH_PACKAGE=/path/holding/gnnmon python benchmarks/run.py --device cuda --before
if os.environ.get("GNNMON_BENCH_PACKAGE"):
    sys.path.insert(0, os.environ["GNNMON_BENCH_PACKAGE"])

import gnnmon
from benchmarks.gpu import plain_step
from gnnmon import cuda_timed, gc_controlled, memory_scope, monitor_memory_device
from gnnmon.integrations.pyg_sampler import neighbor_loader
from play.models import GCN
from play.synthetic import FLICKR, planted_partition

MiB = 2**20


def _quiet_import(name: str) -> Any:
    """Import a peer, swallowing what it prints at import (pytorch_memlab talks about CUDA)."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return __import__(name)


# -- overhead -----------------------------------------------------------------------------------

def _codecarbon_tracker() -> Any:
    import logging

    from codecarbon import OfflineEmissionsTracker

    logging.getLogger("codecarbon").setLevel(logging.ERROR)
    tracker = OfflineEmissionsTracker(country_iso_code="FRA", log_level="error", output_methods=[],
                                      tracking_mode="process")
    tracker.start()
    return tracker


def overhead_variants(step: Callable[..., Any], tmp: Path) -> dict[str, tuple[Callable, Callable | None]]:
    """name -> (the step as that tool wraps it, a context manager factory around the whole pass)."""
    from memory_profiler import memory_usage
    from torch_geometric.profile import timeit

    def in_run(**options: Any) -> Callable:
        return lambda: gnnmon.collect(tmp / "overhead.jsonl", max_records=100, **options)

    def in_memory() -> Callable:
        return lambda: gnnmon.collect(max_records=100)

    def pyg_timeit(*a: Any) -> Any:
        with timeit(log=False):
            return step(*a)

    def mprof(*a: Any) -> Any:
        return memory_usage((step, a), max_usage=True, retval=True)[1]

    tracker_box: dict[str, Any] = {}

    def codecarbon_tasks(*a: Any) -> Any:
        tracker = tracker_box.setdefault("t", None) or tracker_box.__setitem__("t", _codecarbon_tracker()) \
            or tracker_box["t"]
        tracker.start_task("step")
        try:
            return step(*a)
        finally:
            tracker.stop_task()

    return {
        "bare": (step, None),
        "bare (again: the noise floor)": (step, None),
        "gnnmon memory": (monitor_memory_device(step), in_run()),
        "gnnmon timing": (cuda_timed(step), in_run()),
        "gnnmon GC control": (gc_controlled(step), in_run()),
        "gnnmon timing + GC": (cuda_timed(gc_controlled(step)), in_run()),
        "gnnmon timing + GC, rows kept in memory (no file)": (cuda_timed(gc_controlled(step)), in_memory()),
        "gnnmon full stack + 500 ms sampler": (
            monitor_memory_device(cuda_timed(gc_controlled(step))), in_run(sample=0.5)),
        "gnnmon full stack + 100 ms sampler + energy": (
            monitor_memory_device(cuda_timed(gc_controlled(step))), in_run(sample=0.1, energy=True)),
        "torch_geometric.profile.timeit": (pyg_timeit, None),
        "memory_profiler.memory_usage": (mprof, None),
        "codecarbon start_task/stop_task": (codecarbon_tasks, None),
        "_tracker": (lambda: tracker_box.get("t"), None),
    }


HEAVY = ("memory_profiler.memory_usage", "codecarbon start_task/stop_task")
"""Peers that cost milliseconds per call: timed over fewer calls (the per-call figure is the same)."""


def run_overhead(name: str, step: Callable, make_args: Callable[[int], tuple], calls: int, rounds: int,
                 tmp: Path, heavy_calls: int | None = None, settle: bool = True) -> list[dict[str, Any]]:
    """Every variant of :func:`overhead_variants`, ``rounds`` times, each pass of ``calls`` calls
    right after a bare pass; with ``settle``, each pass starts after a ``gc.collect()`` (a quarter
    of a second with PyG loaded on a busy 2-core machine: ``--quick`` leaves it out)."""
    variants = overhead_variants(step, tmp)
    tracker_of = variants.pop("_tracker")[0]
    names = list(variants)
    n_calls = {n: (min(calls, heavy_calls) if heavy_calls and n in HEAVY else calls) for n in names}
    args = [make_args(i) for i in range(calls)]
    per_call: dict[str, list[float]] = {n: [] for n in names}  # seconds per call, one per round
    bare_next_to: dict[str, list[float]] = {n: [] for n in names}  # the bare pass run just before
    with_writer: dict[str, list[float]] = {n: [] for n in names}  # ... until every row is on disk

    def one_pass(n: str) -> float:
        fn, ctx = variants[n]
        if settle:
            gc.collect()
        t0 = time.perf_counter()
        with ctx() if ctx else contextlib.nullcontext():
            t0 = time.perf_counter()
            for a in args[: n_calls[n]]:
                fn(*a)
            loop = (time.perf_counter() - t0) / n_calls[n]
        with_writer[n].append((time.perf_counter() - t0) / n_calls[n])  # the run stopped: all written
        return loop

    for _ in range(rounds):
        order = [n for n in names if n != "bare"]
        random.shuffle(order)
        for n in order:  # each variant right after a bare pass: the pair shares the machine's state
            bare_next_to[n].append(one_pass("bare"))
            per_call[n].append(one_pass(n))
            per_call["bare"].append(bare_next_to[n][-1])
    bare_next_to["bare"] = per_call["bare"]
    tracker = tracker_of()
    if tracker is not None:
        tracker.stop()
    rows = []
    for n in names:
        pairs = list(zip(per_call[n], bare_next_to[n], strict=True))
        written = with_writer[n][-len(pairs):] if n != "bare" else per_call["bare"]
        rows.append({"loop": name, "variant": n, "calls": n_calls[n],
                     "ratio": statistics.median(t / b for t, b in pairs),
                     "per_call_us": statistics.median((t - b) * 1e6 for t, b in pairs),
                     "with_writer_us": statistics.median((w - b) * 1e6 for w, (_, b) in
                                                         zip(written, pairs, strict=False)),
                     "bare_call_us": statistics.median(per_call["bare"]) * 1e6})
    return rows


def realistic_loop(scale: float, batches: int) -> tuple[Callable, Callable[[int], tuple]]:
    """A GCN train step on the synthetic Flickr-shaped graph, NeighborLoader batches ([10, 5], 256
    seeds) sampled once beforehand so every variant does the same work."""
    spec = FLICKR if scale == 1.0 else FLICKR.scaled(scale)
    data = planted_partition(spec)
    loader = neighbor_loader(data, [10, 5], batch_size=256, input_nodes=data.train_mask, shuffle=True)
    it = iter(loader)
    fixed = [next(it) for _ in range(batches)]
    torch.manual_seed(0)
    model = GCN(spec.num_features, 128, spec.num_classes)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    return plain_step, lambda i: (model, fixed[i % len(fixed)], opt)


def tiny_loops() -> dict[str, tuple[Callable, Callable[[int], tuple]]]:
    """Two steps that cost (almost) nothing, to expose the per-call cost: one returns its tensor
    argument, one adds 1 to 8 floats (an allocation and a kernel, ~4 µs)."""
    x = torch.ones(8)

    def identity(x: torch.Tensor) -> torch.Tensor:
        return x

    def add_one(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    return {"tiny step (identity)": (identity, lambda i: (x,)),
            "tiny step (x + 1)": (add_one, lambda i: (x,))}


# -- accuracy -----------------------------------------------------------------------------------

def plant(nbytes: int, hold_s: float) -> None:
    t = torch.empty(nbytes, dtype=torch.uint8)
    t.fill_(1)  # touch every page
    time.sleep(hold_s)
    del t


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def memory_tools() -> dict[str, Callable[[int, float], float]]:
    """tool -> f(size, hold) returning the bytes it reports for the call's memory."""
    from memory_profiler import memory_usage

    def with_gnnmon(n: int, h: float) -> float:
        with memory_scope() as f:
            plant(n, h)
        return f["mem_peak_delta_bytes"]

    def with_mprof(n: int, h: float) -> float:
        base = _rss()
        peak_mib = memory_usage((plant, (n, h)), max_usage=True)  # default interval 0.1 s
        return peak_mib * MiB - base

    def with_psutil(n: int, h: float) -> float:
        before = _rss()
        plant(n, h)
        return _rss() - before

    def with_tracemalloc(n: int, h: float) -> float:
        tracemalloc.start()
        try:
            plant(n, h)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    return {"gnnmon (VmHWM)": with_gnnmon, "memory_profiler (0.1 s sampling)": with_mprof,
            "psutil before/after": with_psutil, "tracemalloc": with_tracemalloc}


def run_memory_accuracy(sizes: list[int], holds: list[float], repeats: int) -> list[dict[str, Any]]:
    tools = memory_tools()
    rows = []
    for size in sizes:
        for hold in holds:
            row: dict[str, Any] = {"size_mib": size / MiB, "hold_s": hold}
            for name, tool in tools.items():
                got = [tool(size, hold) for _ in range(repeats)]
                row[name] = statistics.median(got) - size  # error, bytes
            rows.append(row)
    return rows


def spin(seconds: float) -> None:
    """A planted duration exact to about a microsecond (time.sleep overshoots by ~60 µs)."""
    end = time.perf_counter() + seconds
    if seconds > 0.02:
        time.sleep(seconds - 0.01)
    while time.perf_counter() < end:
        pass


def run_time_accuracy(durations: list[float], repeats: int) -> list[dict[str, Any]]:
    from torch_geometric.profile import timeit

    timed_spin = cuda_timed(spin)
    rows = []
    for d in durations:
        g, p = [], []
        for _ in range(repeats):
            with gnnmon.collect() as run:
                timed_spin(d)
            g.append(run.records[0]["wall_s"] - d)
            with timeit(log=False) as t:
                spin(d)
            p.append(t.duration - d)
        rows.append({"planted_s": d, "gnnmon cuda_timed": statistics.median(g),
                     "torch_geometric.profile.timeit": statistics.median(p)})
    return rows


# -- scale --------------------------------------------------------------------------------------

def run_scale(checkpoints: list[int], tmp: Path) -> list[dict[str, Any]]:
    """Rows streamed to disk with max_records=1000: the process's memory at each checkpoint, and
    every row read back."""
    @cuda_timed(label="tiny")
    def tiny() -> None:
        return None

    path = tmp / "scale.jsonl"
    gc.collect()
    base = _rss()
    rows, done = [], 0
    t0 = time.perf_counter()
    with gnnmon.collect(path, max_records=1000):
        for target in checkpoints:
            while done < target:
                tiny()
                done += 1
            rows.append({"rows": target, "rss_growth_mib": (_rss() - base) / MiB,
                         "file_mib": path.stat().st_size / MiB,
                         "us_per_row": (time.perf_counter() - t0) / target * 1e6})
    t1 = time.perf_counter()
    count, ok = 0, True
    for i, r in enumerate(gnnmon.iter_rows(path)):
        ok &= r["index"] == i
        count += 1
    rows[-1]["read_back"] = count
    rows[-1]["read_back_in_order"] = ok
    rows[-1]["read_s"] = time.perf_counter() - t1
    return rows


# -- durability: what a SIGKILL loses ------------------------------------------------------------

KILLED = r"""
import sys, time, torch, gnnmon
from gnnmon import cuda_timed, gc_controlled, monitor_memory_device

@monitor_memory_device(label="step")
@cuda_timed
@gc_controlled
def step(x):
    return (x * 2).sum()

x = torch.ones(10_000)
with gnnmon.collect(sys.argv[1], flush_interval=float(sys.argv[2])):
    i = 0
    while True:
        step(x)
        print(i, time.time_ns(), flush=True)
        i += 1
        time.sleep(float(sys.argv[3]))
"""


def run_kill_loss(trials: int, flush: float, tmp: Path, pause_s: float = 0.001) -> dict[str, Any]:
    """A child streams decorated steps (one every ~1 ms) to a file; it is SIGKILLed at a random
    moment; the rows it reported complete are compared with the rows on disk."""
    import signal
    import warnings

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    lost_counts, lost_ages, kept = [], [], []
    for trial in range(trials):
        path = tmp / f"killed{trial}.jsonl"
        proc = subprocess.Popen([sys.executable, "-c", KILLED, str(path), str(flush), str(pause_s)],
                                stdout=subprocess.PIPE, text=True, env=env)
        done: dict[int, int] = {}
        i, t = map(int, proc.stdout.readline().split())  # the child has started (imports done)
        done[i] = t
        deadline = time.monotonic() + 0.5 + random.random()
        while time.monotonic() < deadline:
            i, t = map(int, proc.stdout.readline().split())
            done[i] = t
        kill_ns = time.time_ns()
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate()
        for line in rest.splitlines():
            parts = line.split()
            if len(parts) == 2:
                done[int(parts[0])] = int(parts[1])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            on_disk = len(gnnmon.load(path).records)
        lost = [i for i in done if i >= on_disk]
        lost_counts.append(len(lost))
        lost_ages += [(kill_ns - done[i]) / 1e6 for i in lost]
        kept.append(on_disk)
    return {"trials": trials, "flush_interval_s": flush, "step_every_s": pause_s,
            "lost_rows_median": statistics.median(lost_counts), "lost_rows_max": max(lost_counts),
            "oldest_lost_ms": max(lost_ages, default=0.0), "rows_on_disk_median": statistics.median(kept)}


# -- report -------------------------------------------------------------------------------------

def markdown(results: dict[str, Any], meta: dict[str, Any]) -> str:
    out = [f"Command: `{meta['command']}` · {meta['machine']} · {meta['when']} · total {meta['total_s']:.0f} s", ""]
    out += ["### Overhead (median over rounds of the ratio to an adjacent bare pass)", "",
            "| loop | variant | calls per round | ratio to bare | cost per call µs (step's path) | "
            "… until the run's rows are on disk µs | bare call µs |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in results["overhead"]:
        out.append(f"| {r['loop']} | {r['variant']} | {r['calls']} | {r['ratio']:.3f}x | "
                   f"{r['per_call_us']:,.1f} | {r['with_writer_us']:,.1f} | {r['bare_call_us']:,.1f} |")
    out += ["", "Not on this table: `torch_geometric.profile.profileit` refuses the CPU ('does not support "
            "profiling on non GPU devices'); pytorch_memlab's `LineProfiler` reads only "
            "`torch.cuda` memory statistics (on a CPU-only torch it has nothing to report).", ""]
    out += ["### Memory accuracy: reported minus planted, MiB (median of repeats)", "",
            "| planted MiB | held | " + " | ".join(results["memory_tools"]) + " |",
            "| ---: | ---: | " + " | ".join("---:" for _ in results["memory_tools"]) + " |"]
    for r in results["memory"]:
        cells = " | ".join(f"{r[t] / MiB:+.2f} ({100 * r[t] / (r['size_mib'] * MiB):+.0f} %)"
                           for t in results["memory_tools"])
        out.append(f"| {r['size_mib']:g} | {r['hold_s'] * 1e3:g} ms | {cells} |")
    out += ["", "### Timing accuracy: reported minus planted, µs (median of repeats)", "",
            "| planted | gnnmon cuda_timed | torch_geometric.profile.timeit |", "| ---: | ---: | ---: |"]
    for r in results["time"]:
        out.append(f"| {r['planted_s'] * 1e3:g} ms | {r['gnnmon cuda_timed'] * 1e6:+.1f} | "
                   f"{r['torch_geometric.profile.timeit'] * 1e6:+.1f} |")
    out += ["", "### Scale: rows streamed to disk, `collect(path, max_records=1000)`", "",
            "| rows | process RSS growth MiB | file MiB | µs per row (call + row + write) |",
            "| ---: | ---: | ---: | ---: |"]
    for r in results["scale"]:
        out.append(f"| {r['rows']:,} | {r['rss_growth_mib']:.1f} | {r['file_mib']:.1f} | {r['us_per_row']:.1f} |")
    last = results["scale"][-1]
    out += ["", f"Read back with `gnnmon.iter_rows`: {last['read_back']:,} rows, in order: "
            f"{last['read_back_in_order']}, in {last['read_s']:.1f} s.", ""]
    out += kill_markdown(results["kill"])
    if "stream" in results:
        from benchmarks import stream

        out += ["", "### The step's path, paired, and a long run's report (`benchmarks/stream.py`)", "",
                "Bare and decorated identity calls alternate inside `collect(path)`; the figure is the median "
                "of their differences. The report reads a run file in a fresh process.", ""]
        out += stream.tables(results["stream"])
    if results.get("row_cost"):
        out += ["", "### A row's CUDA calls, counted on the fake CUDA (`benchmarks/row_cost.py`)", "",
                "Each stack's CUDA calls a row on the step's thread, their price at an H200's costs, and the "
                "budget in docs/performance.md.", "", results["row_cost"]]
    return "\n".join(out)


def kill_markdown(k: dict[str, Any]) -> list[str]:
    return ["### What a SIGKILL loses", "",
            f"A child process runs the full stack once every ~{k['step_every_s'] * 1e3:g} ms inside "
            f"`collect(path, flush_interval={k['flush_interval_s']:g})` and is killed at a random moment, "
            f"{k['trials']} times.", "",
            "| rows on disk (median) | rows lost (median) | rows lost (max) | oldest lost row, ms before the kill |",
            "| ---: | ---: | ---: | ---: |",
            f"| {k['rows_on_disk_median']:,.0f} | {k['lost_rows_median']:g} | {k['lost_rows_max']} | "
            f"{k['oldest_lost_ms']:.1f} |", ""]


def accuracy_part(q: bool) -> dict[str, Any]:
    """Run in a fresh process (see main): RSS must follow the tensors, so exact_host_memory() is
    set before anything is allocated — in a process that has already freed big blocks into its
    heap, glibc would serve the planted tensors from those pages and RSS would not move."""
    assert gnnmon.exact_host_memory()
    with memory_scope():  # first use of gnnmon and of torch's fill kernel, outside the figures
        torch.empty(MiB, dtype=torch.uint8).fill_(1)
    sizes = [1 * MiB] if q else [1 * MiB, 16 * MiB, 256 * MiB, 1024 * MiB]
    holds = [0.001] if q else [0.001, 0.01, 0.1, 1.0]
    return {"memory": run_memory_accuracy(sizes, holds, 1 if q else 3),
            "memory_tools": list(memory_tools()),
            "time": run_time_accuracy([0.001] if q else [0.001, 0.01, 0.1, 1.0], 1 if q else 5)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="every part at a tiny size")
    parser.add_argument("--check", action="store_true",
                        help="with --device cuda: the sizes of the GPU acceptance run (make gpu-check)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cpu: overhead, accuracy and scale on the CPU, with the peers; cuda: the "
                             "GPU benchmark (benchmarks/gpu.py) and what a kill loses")
    parser.add_argument("--before", action="store_true",
                        help="with --device cuda: only the loops, through public decorators (for a gnnmon "
                             "from GNNMON_BENCH_PACKAGE, such as an earlier commit)")
    parser.add_argument("--out", default="runs/benchmarks.md",
                        help="the markdown file to write, or a folder (benchmarks[-cuda].md goes in it)")
    parser.add_argument("--accuracy-only", metavar="JSON", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    q = args.quick
    if args.accuracy_only:
        Path(args.accuracy_only).write_text(json.dumps(accuracy_part(q)))
        return 0
    random.seed(0)
    out = Path(args.out)
    if out.is_dir() or args.out.endswith("/"):
        out = out / ("benchmarks-cuda.md" if args.device == "cuda" else "benchmarks.md")
    if args.device == "cuda":
        return main_cuda("quick" if q else "check" if args.check else "full", out, before=args.before)
    t_start = time.perf_counter()
    results: dict[str, Any] = {"overhead": []}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        print("accuracy: planted allocations and durations (fresh process) ...", flush=True)
        acc = tmp / "accuracy.json"

        subprocess.run([sys.executable, __file__, "--accuracy-only", str(acc)] + (["--quick"] if q else []),
                       check=True)
        results.update(json.loads(acc.read_text()))
        step, make = realistic_loop(0.01 if q else 1.0, 2 if q else 8)
        print("overhead: realistic GCN loop ...", flush=True)
        results["overhead"] += run_overhead("GCN on Flickr stand-in", step, make, 2 if q else 4,
                                            1 if q else 15, tmp, settle=not q)
        for loop, (step, make) in tiny_loops().items():
            print(f"overhead: {loop} ...", flush=True)
            results["overhead"] += run_overhead(loop, step, make, 50 if q else 5000, 1 if q else 7, tmp,
                                                heavy_calls=2 if q else 10, settle=not q)
        print("scale: rows streamed to disk ...", flush=True)
        results["scale"] = run_scale([100, 1000] if q else [10_000, 100_000, 1_000_000], tmp)
        print("durability: SIGKILL mid-run ...", flush=True)
        results["kill"] = run_kill_loss(1 if q else 10, 0.05, tmp)
    from benchmarks import stream

    results["stream"] = stream.measure(q)  # the step's path, paired; a long run's report
    print("a row's CUDA calls, on the fake CUDA at H200 prices ...", flush=True)
    results["row_cost"] = subprocess.run([sys.executable, str(Path(__file__).with_name("row_cost.py"))]
                                         + (["--quick"] if q else []), capture_output=True, text=True,
                                         timeout=600).stdout.strip()
    meta = {
        "command": "python benchmarks/run.py" + (" --quick" if q else ""),
        "machine": f"{platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
                   f"torch {torch.__version__}",
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "total_s": time.perf_counter() - t_start,
    }
    text = markdown(results, meta)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, **results}, indent=1, default=str))
    print(text)
    return 0


def main_cuda(size: str, out: Path, fake: bool = False, before: bool = False) -> int:
    """``--device cuda``: benchmarks/gpu.py at ``size`` (quick, check or full), then what a kill
    loses; writes ``out`` and its JSON."""
    from benchmarks.gpu import SIZES, run_gpu
    from benchmarks.gpu import markdown as gpu_markdown

    sizes = SIZES[size]
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        results = run_gpu(tmp, sizes, fake=fake, before=before)
        if not before:
            print("durability: SIGKILL mid-run ...", flush=True)
            results["kill"] = run_kill_loss(sizes.kill_trials, 0.05, tmp)
    meta = {
        "command": "python benchmarks/run.py --device cuda" + ("" if size == "full" else f" --{size}")
                   + (f" --before (GNNMON_BENCH_PACKAGE={os.environ.get('GNNMON_BENCH_PACKAGE')})" if before else ""),
        "machine": f"{results['device_name']}, {platform.platform()}, {os.cpu_count()} cores, "
                   f"Python {platform.python_version()}, torch {torch.__version__}",
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "total_s": time.perf_counter() - t_start,
    }
    text = "\n".join([f"Command: `{meta['command']}` · {meta['machine']} · {meta['when']} · "
                       f"total {meta['total_s']:.0f} s", ""] + gpu_markdown(results)
                      + (kill_markdown(results["kill"]) if "kill" in results else []))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, **results}, indent=1, default=str))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
