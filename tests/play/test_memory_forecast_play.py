"""play/memory_forecast.py at its tiny size: the models it fits are trusted, each larger
configuration's batches are forecast within 10 % of their measured peaks (absolute, RSS made
exact), and a run at the recommended budget stays under its target."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.scripts import ROOT


def test_the_forecast_study_runs_at_a_tiny_size(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "play" / "memory_forecast.py"), "--tiny", "--out", str(tmp_path)],
                   check=True, capture_output=True, text=True, timeout=600)
    results = json.loads((tmp_path / "memory_forecast.json").read_text())
    assert [r["study"] for r in results] == ["node", "graph"]
    for r in results:
        assert r["model"]["trusted"], r["model"]["problems"]
        assert len(r["configs"]) >= 2
        for c in r["configs"]:
            assert abs(c["per_batch_error_pct"]) < 10, c
            assert abs(c["forecast_worst_bytes"] / c["measured_max_bytes"] - 1) < 0.10, c
        assert r["budget"]["stayed_under"] and r["budget"]["batch_size"] > 0
    text = (tmp_path / "memory_forecast.md").read_text()
    assert "| batch 256, fanouts [10, 5] |" in text and "Budget for a capacity of" in text
