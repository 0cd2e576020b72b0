"""docs/data-tools.md's examples, run as a user would paste them, on a real run file plain and
compressed: pandas', polars' and DuckDB's medians and counts equal gnnmon's report's, and jq's
lines are the rows gnnmon reads."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import gnnmon

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "data-tools.md"
DOCS_PATH = "runs/train.jsonl.gz"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", PAGE.read_text(), re.S)


@pytest.fixture(scope="module", params=["train.jsonl", "train.jsonl.gz"])
def run(request, tmp_path_factory) -> tuple[Path, gnnmon.Report]:
    path = tmp_path_factory.mktemp("tools") / request.param

    @gnnmon.monitor_memory_device
    @gnnmon.cuda_timed
    def train_step(i: int) -> None:
        with gnnmon.phase("forward"):
            time.sleep(0.001)

    @gnnmon.cuda_timed
    def eval_step(i: int) -> None:
        time.sleep(0.0005)

    with gnnmon.collect(path, sample=0.1) as live:
        for epoch in range(2):
            live.mark("epoch", epoch)
            for i in range(30):
                train_step(i)
            for i in range(7):
                eval_step(i)
    return path, gnnmon.Report.load(path)


def execute(code: str, path: Path) -> dict:
    space: dict = {}
    exec(compile(code.replace(DOCS_PATH, str(path)), str(PAGE), "exec"), space)
    return space


def truth(report: gnnmon.Report) -> dict[str, tuple[int, float]]:
    """Per label: calls and median wall time, from gnnmon's own summary of every call."""
    return {label: (s["wall_s"]["count"], s["wall_s"]["p50"]) for label, s in report.summary().items()}


def test_pandas(run):
    pytest.importorskip("pandas")
    path, report = run
    (code,) = [b for b in blocks("python") if "import pandas" in b]
    medians = execute(code, path)["medians"]
    assert {k: pytest.approx(v, rel=1e-12) for k, v in medians.items()} == {k: m for k, (_, m) in truth(report).items()}


def test_polars(run):
    pytest.importorskip("polars")
    path, report = run
    (code,) = [b for b in blocks("python") if "import polars" in b]
    medians = execute(code, path)["medians"]
    got = dict(zip(medians["label"].to_list(), medians["wall_s"].to_list(), strict=True))
    assert got == pytest.approx({k: m for k, (_, m) in truth(report).items()}, rel=1e-12)


def test_duckdb(run):
    pytest.importorskip("duckdb")
    path, report = run
    (code,) = [b for b in blocks("python") if "import duckdb" in b]
    calls = execute(code, path)["calls"]
    peaks = {label: max(r["mem_peak_bytes"] for r in report.records if r["label"] == label and
                        r.get("mem_peak_bytes") is not None) if label == "train_step" else None
             for label in truth(report)}
    assert [(label, n) for label, n, _, _ in calls] == [(k, n) for k, (n, _) in sorted(truth(report).items())]
    assert {label: m for label, _, m, _ in calls} == pytest.approx({k: m for k, (_, m) in truth(report).items()},
                                                                   rel=1e-12)
    assert {label: peak for label, _, _, peak in calls} == peaks


@pytest.mark.skipif(shutil.which("jq") is None or shutil.which("zcat") is None,
                    reason="no jq (Debian: apt-get install jq) or zcat")
def test_jq(run):
    path, report = run
    (code,) = blocks("bash")
    first, second = [line.replace(DOCS_PATH, str(path)) for line in code.strip().splitlines()]
    shown = subprocess.run(["bash", "-o", "pipefail", "-c", first], capture_output=True, text=True, timeout=60)
    rows = [json.loads(line) for line in shown.stdout.splitlines()]
    assert shown.returncode in (0, 141) and len(rows) == 3  # head closes the pipe
    assert rows == [{k: r.get(k) for k in ("label", "index", "wall_s", "mem_peak_bytes")} for r in report.records[:3]]
    counted = subprocess.run(["bash", "-o", "pipefail", "-c", second], capture_output=True, text=True, timeout=60,
                             check=True)
    assert json.loads(counted.stdout) == [{"label": k, "calls": n} for k, (n, _) in sorted(truth(report).items())]
