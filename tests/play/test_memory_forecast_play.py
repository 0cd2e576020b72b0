"""play/memory_forecast.py at its tiny size: the models it fits (from a run for node and graph,
by ``gnnmon.calibrate`` for the GraphSAGE, full-batch and link cases) are trusted; issue 53's dense
case forecasts 8 times its batch within 15 % and the full batch within 25 % of the peak's growth,
with an upper bound at most 1.5 times that growth; in every
configuration and every control, each run batch is covered by the upper bound of the forecast made
just before it ran (anchored to the memory the process held then); node and graph are forecast
within 10 % of their measured peaks (absolute, RSS made exact); a run at the recommended budget
stays under its target; each study ends with a control whose drift is reported. Slow: about half a minute of CPU."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.scripts import ROOT

pytest.importorskip("torch_geometric")


@pytest.mark.slow
def test_the_forecast_study_runs_at_a_tiny_size(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "play" / "memory_forecast.py"), "--tiny", "--out", str(tmp_path)],
                   check=True, capture_output=True, text=True, timeout=1200)
    results = json.loads((tmp_path / "memory_forecast.json").read_text())
    assert [r["study"] for r in results] == ["node", "graph", "sage", "dense", "link"]
    for r in results:
        assert r["model"]["trusted"], r["model"]["problems"]
        assert len(r["configs"]) >= 2
        for c in [*r["configs"], r["control"]]:  # the forecast made just before each ran covers every batch
            assert c["covered"] == c["steps"], (r["study"], c)
            if c is not r["control"]:
                assert c["measured_max_bytes"] <= c["forecast_upper_bytes"], c
            if r["study"] in ("node", "graph"):
                assert abs(c["per_batch_error_pct"]) < 10, c
                assert abs(c["forecast_worst_bytes"] / c["measured_max_bytes"] - 1) < 0.10, c
        assert r["budget"]["stayed_under"] and r["budget"]["batch_size"] > 0
        assert r["control"]["steps"] > 0 and "start_drift_bytes" in r["control"]
    sage = results[2]
    assert sage["calibration"]["steps"] == 15  # a warm-up, then 2 batches at each of 7 sizes
    full = sage["configs"][-1]
    assert full["config"].startswith("full batch") and full["steps"] == 1
    dense = results[3]  # issue 53's bar: the per-edge cost measured, so a full batch is forecast
    assert dense["calibration"]["measured_terms"]["num_edges"] == "measured"
    eight, full = dense["configs"]
    fitted = {k: dense["model"][k] for k in ("rows", "outliers", "spread_bytes", "ranges", "resolution_bytes")}
    for c, within in ((eight, 0.15), (full, 0.25)):
        growth = c["measured_max_bytes"] - c["const_bytes"]
        assert abs(c["forecast_worst_bytes"] - c["measured_max_bytes"]) <= within * growth, (c, fitted)
        assert c["forecast_upper_bytes"] - c["const_bytes"] <= 1.5 * growth, (c, fitted)
    text = (tmp_path / "memory_forecast.md").read_text()
    assert "| batch 256, fanouts [10, 5] |" in text and "Budget for a capacity of" in text
    assert "| full batch (10,000 nodes) |" in text and "| batch 256 edges, fanouts [10, 5] |" in text
