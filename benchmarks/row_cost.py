"""What a row costs on CUDA, measured on the CPU: each decorator stack's CUDA calls a row, counted
against the budget in ``docs/performance.md``, and the host time they cost at an H200's prices.

Run: ``.venv/bin/python benchmarks/row_cost.py`` (about a minute on 2 CPU cores; ``--quick``:
seconds, what the test runs). ``--torch-records`` measures as on a machine without CUDA's
Python bindings (every event recorded through torch).

Against the tests' fake CUDA (``tests/fakes.py``), which charges each call the host time it took
on an H200 or H100 (``CUDA_COSTS_US``) by busy-waiting, and counts it by kind and thread. For each
variant, a step given the loader's batch on the host (PyG's usual loop; the GPU's allocator is
used inside, as ``batch.to(device)`` does): its CUDA calls a row on the step's thread, after a
warm-up that fills the event pool; their cost at those prices ("CUDA µs", the sum of count ×
price: what regressed on the H200 without the CPU suite seeing it); and the whole row's cost on
this machine, paired and interleaved (bare and decorated calls alternating, the median of the
differences), the CUDA prices included. The CUDA µs are a GPU machine's; the rest is this
machine's Python.
"""

from __future__ import annotations

import argparse
import platform
import re
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402 - its MonkeyPatch installs the fake, as the tests do
import torch  # noqa: E402

import gnnmon  # noqa: E402
from gnnmon import cuda_timed, gc_controlled, monitor_memory_device, phase  # noqa: E402
from gnnmon.devices import clear_backends  # noqa: E402
from tests.fakes import CUDA_COSTS_US, FakeCuda  # noqa: E402

MiB = 2**20
DOC = ROOT / "docs" / "performance.md"
BUDGET_HEADING = "## A row's CUDA calls"


def budget_from_docs(path: Path = DOC) -> dict[str, tuple[int, str]]:
    """The per-row budget table under :data:`BUDGET_HEADING`: kind -> (most calls a row, its
    first cell). Kinds are the fake's names, the code span that opens each row's first cell."""
    text = path.read_text()
    section = text.split(BUDGET_HEADING, 1)[1].split("\n## ", 1)[0]
    budget = {}
    for line in section.splitlines():
        match = re.match(r"\|\s*`(\w+)`([^|]*)\|\s*(\d+)\s*\|", line)
        if match:
            budget[match.group(1)] = (int(match.group(3)), f"`{match.group(1)}`{match.group(2)}".strip())
    if not budget:
        raise ValueError(f"no budget table under {BUDGET_HEADING!r} in {path}")
    return budget


def variants(fake: FakeCuda) -> dict[str, Callable[[Any], Any]]:
    """name -> a step taking a host batch whose work allocates on the fake GPU."""

    def work() -> None:
        fake.free(fake.alloc(MiB, 0))

    def body(batch: Any) -> None:
        work()

    def phased(batch: Any) -> None:
        with phase("forward"):
            work()
        with phase("backward"):
            pass
        with phase("optimizer"):
            pass

    return {
        "@cuda_timed": cuda_timed(body),
        "@monitor_memory_device": monitor_memory_device(body),
        "full stack": monitor_memory_device(cuda_timed(gc_controlled(body))),
        "full stack + 3 phases": monitor_memory_device(cuda_timed(gc_controlled(phased))),
    }


def measure(rounds: int, warm: int, driver: bool) -> dict[str, Any]:
    """Per variant: its CUDA calls a row (kind -> count), their price (µs) and its paired cost (µs)."""
    patch = pytest.MonkeyPatch()
    clear_backends()
    fake = FakeCuda(n=1, driver=driver).install(patch)
    fake.free(fake.alloc(MiB, 0))  # the model was put on the GPU: CUDA is in use
    batch = torch.ones(4)  # the loader's batch, on the host
    me = threading.current_thread().name
    out: dict[str, Any] = {}
    tmp = tempfile.TemporaryDirectory()
    try:
        steps = variants(fake)

        def bare(b: Any) -> None:
            fake.free(fake.alloc(MiB, 0))

        # Drained only where flushed: as many rows in flight as the warm-up had, so the pool holds
        # their events and the counts are exact (the writer thread's own pace varies).
        with gnnmon.collect(Path(tmp.name) / "run.jsonl", max_records=100, flush_interval=3600) as run:
            for name, step in steps.items():
                for _ in range(warm):
                    step(batch)
                run.flush()
                before = dict(fake.thread_calls[me])
                for _ in range(rounds):
                    step(batch)
                after = fake.thread_calls[me]
                run.flush()
                counts = {k: (after.get(k, 0) - before.get(k, 0)) / rounds for k in after}
                counts = {k: v for k, v in counts.items() if v}
                price = sum(v * CUDA_COSTS_US.get(k, 0.0) for k, v in counts.items())
                diffs = []
                for _ in range(rounds):
                    t0 = time.perf_counter_ns()
                    bare(batch)
                    t1 = time.perf_counter_ns()
                    step(batch)
                    t2 = time.perf_counter_ns()
                    diffs.append((t2 - t1) - (t1 - t0))
                run.flush()
                out[name] = {"calls": counts, "cuda_us": price, "paired_us": statistics.median(diffs) / 1e3}
        out["_rows"] = len(run.records)
    finally:
        patch.undo()
        clear_backends()
        tmp.cleanup()
    return out


def table(results: dict[str, Any], budget: dict[str, tuple[int, str]]) -> list[str]:
    kinds = list(budget)
    lines = ["| variant | " + " | ".join(f"`{k}`" for k in kinds)
             + " | CUDA µs (H200 prices) | µs a row here, paired |",
             "| --- | " + " | ".join("---:" for _ in kinds) + " | ---: | ---: |"]
    for name, r in results.items():
        if name.startswith("_"):
            continue
        cells = [f"{r['calls'].get(k, 0):g}" for k in kinds]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {r['cuda_us']:.1f} | {r['paired_us']:.1f} |")
    lines.append("| budget, full stack + 3 phases | " + " | ".join(str(budget[k][0]) for k in kinds) + " | | |")
    return lines


def over_budget(results: dict[str, Any], budget: dict[str, tuple[int, str]]) -> list[str]:
    """The kinds the full stack with three phases calls more often a row than the budget allows
    (calls of a kind the budget does not name count as over a budget of 0)."""
    calls = results["full stack + 3 phases"]["calls"]
    return [f"{k}: {v:g} > {budget.get(k, (0, ''))[0]}" for k, v in calls.items() if v > budget.get(k, (0, ""))[0]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="300 rows a variant (the test's size)")
    parser.add_argument("--torch-records", action="store_true", help="no CUDA Python bindings: torch records events")
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    rounds = warm = 300 if args.quick else 3000
    budget = budget_from_docs()
    results = measure(rounds, warm, driver=not args.torch_records)
    head = (f"Fake CUDA at H200 prices, {'torch' if args.torch_records else 'driver'} event records; "
            f"{platform.node()}, {platform.python_version()}, torch {torch.__version__}, "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {rounds} rows a variant")
    lines = [head, "", *table(results, budget)]
    over = over_budget(results, budget)
    lines += ["", "over budget: " + ("; ".join(over) if over else "nothing")]
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
