"""The Cora walk-through (play/cora_optimisations.py) at a tiny size, compiled with the ``eager``
backend (Dynamo's guards and recompilations without a C++ compiler): every configuration runs, the
compiled ones carry their compilation in their rows, and the claims table is written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from play.cora_optimisations import CONFIGS

ROOT = Path(__file__).resolve().parents[2]


def test_the_walk_through_runs_and_judges_every_claim(tmp_path):
    """In a process of its own, as a user runs it (it sets the host allocator up for exact RSS)."""
    proc = subprocess.run([sys.executable, str(ROOT / "play" / "cora_optimisations.py"), "--epochs", "2",
                           "--scale", "0.3", "--backend", "eager", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "## The article's claims" in proc.stdout
    text = (tmp_path / "cora_optimisations.md").read_text()
    for claim in ("sampling cuts memory", "sampling may slow a small graph's epoch", "AMP cuts memory and time",
                  "compile cuts time, not memory", "compilation is a one-time cost"):
        assert f"| {claim} |" in text
    results = json.loads((tmp_path / "cora_optimisations.json").read_text())["results"]
    assert list(results) == CONFIGS
    for name, r in results.items():
        assert r["steps_per_epoch"] >= 1 and 0.0 <= r["test_accuracy"] <= 1.0 and r["step_ms"] > 0
        if name.startswith("compiled"):
            assert r["compile_s"] > 0  # the compilation is in the first epoch's rows
            assert r["first_epoch_s"] > r["epoch_s"]
        else:
            assert r["compile_s"] is None
    assert results["sampled+amp"]["amp"].startswith("bfloat16 autocast")  # the CPU has no float16 autocast
    assert results["sampled"]["amp"] == "off" and results["sampled"]["steps_per_epoch"] >= 1
    assert (tmp_path / "cora_optimisations.png").stat().st_size > 5000
