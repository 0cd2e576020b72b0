"""What each sink costs per row, on the run's writer thread (never the step's path): the rows of a
real run (a decorated step with memory, timing and three phases, sampled every 20 ms) are handed
to each sink in the batches the run made, ``--rounds`` times, sinks alternating; the figure is the
median over rounds of the time per row. The file sink is the reference.

    python benchmarks/sinks_cost.py [--rows 2000] [--rounds 5]

Prometheus serves on a free port (no scrape meanwhile); MLflow logs to a sqlite store in a
temporary folder; W&B to an offline run there.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gnnmon
from gnnmon.data.format import encode
from gnnmon.data.read import read_lines
from gnnmon.record.sinks import Batch, JsonlSink

BATCH = 50
"""Rows per batch: about what a 0.05 s flush interval gathers of 1 ms steps."""


def real_rows(path: Path, n: int) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """The manifest, rows and samples of a real run of ``n`` steps."""
    @gnnmon.monitor_memory_device
    @gnnmon.cuda_timed
    def step(x: torch.Tensor) -> torch.Tensor:
        with gnnmon.phase("forward"):
            y = x @ x
        with gnnmon.phase("backward"):
            y = y.relu()
        with gnnmon.phase("optimizer"):
            return y.sum()

    x = torch.randn(64, 64)
    with gnnmon.collect(path, sample=0.02):
        for _ in range(n):
            step(x)
    lines = [line for line in read_lines(path) if line["type"] != "same"]  # rows made whole, as gnnmon reads them
    return lines[0], [r for r in lines if r["type"] == "row"], [r for r in lines if r["type"] == "sample"]


def makers(folder: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"jsonl (file)": lambda i: JsonlSink(folder / f"copy{i}.jsonl")}
    try:
        from gnnmon.integrations.prometheus import PrometheusSink
        out["prometheus"] = lambda i: PrometheusSink(0)
    except ImportError:
        pass
    try:
        from mlflow.tracking import MlflowClient

        from gnnmon.integrations.mlflow import MlflowSink
        store = f"sqlite:///{folder / 'mlflow.db'}"
        MlflowClient(store).create_experiment("bench", artifact_location=(folder / "artifacts").as_uri())
        out["mlflow (sqlite)"] = lambda i: MlflowSink(tracking_uri=store, experiment="bench", artifact=False)
    except ImportError:
        pass
    try:
        from gnnmon.integrations.wandb import WandbSink
        out["wandb (offline)"] = lambda i: WandbSink(project="bench", mode="offline", dir=folder)
    except ImportError:
        pass
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        manifest, rows, samples = real_rows(folder / "run.jsonl", args.rows)
        batches = [Batch(rows[i: i + BATCH], [encode(r) for r in rows[i: i + BATCH]],
                         [("sample", s) for s in samples[i // BATCH:: len(rows) // BATCH][:1]])
                   for i in range(0, len(rows), BATCH)]
        per_row: dict[str, list[float]] = {}
        made = makers(folder)
        for r in range(args.rounds):
            for name, make in made.items():
                sink = make(r)
                sink.open(dict(manifest, file=None))
                t0 = time.perf_counter()
                for batch in batches:
                    sink.write(batch)
                elapsed = time.perf_counter() - t0
                sink.close({"type": "end", "rows": len(rows), "ended": "stop"})
                per_row.setdefault(name, []).append(elapsed / len(rows) * 1e6)
    print(f"# sinks' cost per row on the writer thread ({len(rows)} real rows of {len(rows[0])} fields, batches of "
          f"{BATCH}, {args.rounds} rounds; {platform.platform()}, Python {platform.python_version()})\n")
    print("| sink | µs per row (median of rounds) | min | max |\n| --- | ---: | ---: | ---: |")
    for name, values in per_row.items():
        print(f"| {name} | {statistics.median(values):.1f} | {min(values):.1f} | {max(values):.1f} |")


if __name__ == "__main__":
    main()
