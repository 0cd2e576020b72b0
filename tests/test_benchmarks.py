"""The benchmark runner works end to end at a tiny size (timings are printed, never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_runner_quick(tmp_path):
    out = tmp_path / "bench.md"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = out.read_text()
    for heading in ("### Overhead", "### Memory accuracy", "### Timing accuracy", "### Scale"):
        assert heading in text
    data = json.loads(out.with_suffix(".json").read_text())
    variants = {r["variant"] for r in data["overhead"]}
    assert {"bare", "gnnmon full stack + 500 ms sampler", "memory_profiler.memory_usage",
            "codecarbon start_task/stop_task", "torch_geometric.profile.timeit"} <= variants
    assert data["scale"][-1]["read_back"] == 1000 and data["scale"][-1]["read_back_in_order"]
