"""gnnmon's full stack against TraceML's step tracing, on the same GCN step, paired in one run.

Run: ``.venv/bin/python benchmarks/traceml_peer.py`` (the CPU; about two minutes on 2 cores),
``--device cuda`` on a GPU, ``--quick`` for the test's size. Needs ``traceml-ai`` (the ``bench``
extra).

TraceML runs as its docs show: the script is launched by ``traceml run`` (its launcher starts the
aggregator its workers report to), calls ``traceml.init(mode="auto")`` and wraps each step in
``with traceml.trace_step(model):``. Inside that one process the passes alternate as in
``benchmarks/gpu.py`` (each variant right after a bare pass of as many steps, rounds in shuffled
order, a device sync at each pass's end, the median of the ratios): the bare step, TraceML's
traced step, and gnnmon's full stack with forward, backward and optimizer phases, rows streamed
to a file. TraceML's automatic patches (forward, backward, DataLoader) stay installed for the
whole process, so the bare passes carry whatever they cost outside a traced step: the ratio
shown for TraceML is its cost beyond that.

On CUDA, each tool's figure for the step's peak is set beside torch's own counter
(``torch.cuda.max_memory_allocated`` after a peak reset at the step's start): gnnmon's
``mem_peak_bytes`` (median over its rows), TraceML's average per-step peak (its
``final_summary.json``). On the CPU TraceML reports no step memory.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MiB = 2**20


def traceml_launcher() -> str | None:
    """The ``traceml`` command beside this interpreter, or on the PATH; None where not installed."""
    beside = Path(sys.executable).with_name("traceml")
    return str(beside) if beside.exists() else shutil.which("traceml")


def child(device: str, quick: bool, out: Path) -> None:
    """Inside ``traceml run``: the interleaved passes and the peaks; writes ``out`` (JSON)."""
    import torch
    import traceml_ai as traceml

    from benchmarks.gpu import Realistic, phased_step, plain_step, run_interleaved
    from gnnmon import collect, cuda_timed, gc_controlled, monitor_memory_device

    traceml.init(mode="auto")
    dev = torch.device(device)
    scale, batches, steps, rounds = (0.02, 4, 5, 3) if quick else ((1.0, 20, 40, 7) if dev.type == "cuda"
                                                                    else (0.25, 10, 10, 7))
    loop = Realistic(dev, scale, batches)
    tmp = Path(tempfile.mkdtemp(prefix="gnnmon-peer-"))
    try:  # the rows' file is the run's alone: removed with its directory, whatever interrupts it

        def traced(model: Any, batch: Any, opt: Any) -> Any:
            with traceml.trace_step(model):
                return plain_step(model, batch, opt)

        full = monitor_memory_device(device=dev)(cuda_timed(device=dev)(gc_controlled(phased_step)))
        variants: dict[str, tuple[Any, Any, Any]] = {
            "bare": (plain_step, None, None),
            "bare (again: the noise floor)": (plain_step, None, None),
            "TraceML trace_step (init mode='auto')": (traced, None, None),
            "gnnmon full stack, phases inside, rows to a file": (
                full, lambda: collect(tmp / "peer.jsonl", max_records=200), None),
        }

        def sync() -> None:
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)

        rows = run_interleaved("GCN step", variants, loop.args, steps, rounds, sync, slow_steps=steps)
        peaks: dict[str, Any] = {}
        if dev.type == "cuda":
            truth = []
            for i in range(5):
                sync()
                torch.cuda.reset_peak_memory_stats(dev)
                plain_step(*loop.args(i))
                truth.append(torch.cuda.max_memory_allocated(dev))
            with collect() as run:
                for i in range(5):
                    full(*loop.args(i))
            peaks = {"torch": statistics.median(truth),
                     "gnnmon": statistics.median(r["mem_peak_bytes"] for r in run.records)}
        out.write_text(json.dumps({"rows": rows, "peaks": peaks, "nodes": loop.nodes, "edges": loop.edges,
                                   "steps": steps, "rounds": rounds, "device": device,
                                   "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
                                   "torch": torch.__version__}))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def free_port() -> int:
    """A TCP port on the loopback that nothing listens on now (TraceML's aggregator and torchrun's
    rendezvous each need one; their defaults are fixed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def traceml_peak(logs: Path) -> float | None:
    """TraceML's average per-step peak allocated bytes, from its final summary (None: it has none)."""
    for summary in logs.rglob("final_summary.json"):
        data = json.loads(summary.read_text())
        value = data.get("step_memory", {}).get("global", {}).get("average", {}).get("peak_allocated_bytes")
        return float(value) if value is not None else None
    return None


def measure(device: str, quick: bool) -> dict[str, Any]:
    """Launch this script under ``traceml run`` and read what it and TraceML wrote."""
    launcher = traceml_launcher()
    if launcher is None:
        return {"skipped": "TraceML is not installed (pip install traceml-ai, or the bench extra)"}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(
        os.pathsep))
    with tempfile.TemporaryDirectory(prefix="gnnmon-traceml-") as tmp:
        out, logs = Path(tmp) / "peer.json", Path(tmp) / "logs"
        for attempt in range(3):  # a probed port another process took in between: probe again
            argv = [launcher, "run", "--logs-dir", str(logs), "--run-name", f"peer{attempt}",
                    "--aggregator-port", str(free_port()), "--master-port", str(free_port()),
                    str(Path(__file__).resolve()), "--args", "--child", "--device", device, "--out", str(out)]
            proc = subprocess.run(argv + (["--quick"] if quick else []), capture_output=True, text=True,
                                  timeout=1200, env=env, cwd=tmp)
            if out.exists() or "already in use" not in proc.stdout + proc.stderr:
                break
        if not out.exists():
            return {"failed": f"traceml run exited {proc.returncode}: {(proc.stdout + proc.stderr)[-2000:]}"}
        result: dict[str, Any] = json.loads(out.read_text())
        if result["peaks"]:
            result["peaks"]["traceml"] = traceml_peak(logs)
    return result


def markdown(r: dict[str, Any]) -> list[str]:
    if "skipped" in r or "failed" in r:
        return [f"TraceML comparison not run: {r.get('skipped') or r.get('failed')}"]
    lines = [f"GCN step on {r['device_name']} ({r['nodes']:,.0f} nodes, {r['edges']:,.0f} edges a batch), "
             f"{r['steps']} steps a pass, {r['rounds']} rounds, torch {r['torch']}, under `traceml run`", "",
             "| variant | ratio to the adjacent bare pass | µs a step above it |", "| --- | ---: | ---: |"]
    for row in r["rows"]:
        if row["ratio"] is None:
            lines.append(f"| {row['variant']} | {row['note']} | |")
        else:
            lines.append(f"| {row['variant']} | {row['ratio']:.3f}x | {row['per_step_us']:.0f} |")
    bare = next(row for row in r["rows"] if row["variant"] == "bare")
    lines += ["", f"Bare step: {bare['bare_step_us'] / 1e3:.2f} ms."]
    peaks = r["peaks"]
    if peaks:
        def mib(v: float | None) -> str:
            return "none" if v is None else f"{v / MiB:.1f} MiB"

        lines += ["", "| the step's peak, as reported by | MiB | against torch's counter |", "| --- | ---: | ---: |",
                  f"| torch.cuda.max_memory_allocated (the truth) | {mib(peaks['torch'])} | |"]
        for tool in ("gnnmon", "traceml"):
            value = peaks.get(tool)
            diff = "" if value is None else f"{(value - peaks['torch']) / MiB:+.1f} MiB"
            lines.append(f"| {tool} | {mib(value)} | {diff} |")
    else:
        lines += ["", "Peaks: on the CPU TraceML reports no step memory (it reads torch's GPU counters)."]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    parser.add_argument("--quick", action="store_true", help="a tiny graph, 5 steps x 3 rounds (the test's size)")
    parser.add_argument("--out", help="the markdown file to write (the child: its JSON)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.device, args.quick, Path(args.out))
        return 0
    t0 = time.perf_counter()
    result = measure(args.device, args.quick)
    text = "\n".join([f"gnnmon against TraceML ({platform.node()}, {os.cpu_count()} cores, "
                      f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {time.perf_counter() - t0:.0f} s): "
                      f"`python benchmarks/traceml_peer.py{' --device ' + args.device if args.device != 'cpu' else ''}"
                      f"{' --quick' if args.quick else ''}`", "", *markdown(result)])
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
        Path(args.out).with_suffix(".json").write_text(json.dumps(result, indent=1, default=str))
    return 0 if "failed" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
