"""docs/diagnosis.md's CI jobs, as a user would paste them: each YAML block parses, and its gate runs
(bash, the installed ``gnnmon`` command) against planted runs in the paths its loop writes:
identical code passes, a planted +25 % fails the job, and runs too noisy to tell give GitHub a
warning and GitLab the exit status its ``allow_failure`` names."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.report.compare.planted import rerun
from tests.report.diagnosis.planted import write_run

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "diagnosis.md"
GNNMON = shutil.which("gnnmon", path=str(Path(sys.executable).parent)) or shutil.which("gnnmon")


def jobs() -> dict[str, dict]:
    """The YAML blocks of the page, by the file their first line names."""
    out = {}
    for block in re.findall(r"```yaml\n(.*?)```", PAGE.read_text(), re.S):
        out[block.splitlines()[0].lstrip("# ").strip()] = yaml.safe_load(block)
    return out


def plant(folder: Path, spread: float, slower: float) -> None:
    """Five runs a side where the jobs' loops write them (runs/base-1.jsonl ... runs/new-5.jsonl)."""
    (folder / "runs").mkdir()
    for i in range(1, 6):
        write_run(folder / "runs" / f"base-{i}.jsonl", rerun(i, spread))
        write_run(folder / "runs" / f"new-{i}.jsonl", rerun(10 + i, spread, slower))


def bash(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    assert GNNMON, "the gnnmon command is not installed beside this Python"
    path = f"{Path(GNNMON).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(["bash", "-e", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PATH": path, **env})


CASES = [("identical", 0.01, 1.0, 0, 0), ("slower", 0.01, 1.25, 1, 1), ("noisy", 0.10, 1.0, 0, 4)]
"""(name, rerun spread, planted factor, GitHub's exit status, the gate's own exit status)."""


def test_both_jobs_are_on_the_page_and_loop_over_the_runs_the_gate_reads():
    found = jobs()
    assert set(found) == {".github/workflows/perf.yml", ".gitlab-ci.yml"}
    steps = found[".github/workflows/perf.yml"]["jobs"]["gnnmon-compare"]["steps"]
    loop = next(s["run"] for s in steps if s.get("name", "").startswith("Five runs"))
    assert "runs/base-$i.jsonl" in loop and "runs/new-$i.jsonl" in loop and "for i in 1 2 3 4 5" in loop
    gitlab = found[".gitlab-ci.yml"]["gnnmon-compare"]
    assert gitlab["allow_failure"] == {"exit_codes": 4}
    assert any("runs/base-$i.jsonl" in line and "for i in 1 2 3 4 5" in line for line in gitlab["script"])


@pytest.mark.parametrize("name, spread, slower, github, status", CASES)
def test_the_github_gate_step(tmp_path, name, spread, slower, github, status):
    steps = jobs()[".github/workflows/perf.yml"]["jobs"]["gnnmon-compare"]["steps"]
    gate = next(s["run"] for s in steps if s.get("name") == "Gate")
    plant(tmp_path, spread, slower)
    summary = tmp_path / "summary.md"
    done = bash(gate, tmp_path, GITHUB_STEP_SUMMARY=str(summary))
    assert done.returncode == github, (done.stdout, done.stderr)
    heads = {0: "**Passed**", 1: "**Regressed**", 4: "**Inconclusive**"}
    assert heads[status] in summary.read_text()
    assert ("::warning::gnnmon compare: inconclusive" in done.stdout) == (status == 4)


@pytest.mark.parametrize("name, spread, slower, github, status", CASES)
def test_the_gitlab_gate_line(tmp_path, name, spread, slower, github, status):
    script = jobs()[".gitlab-ci.yml"]["gnnmon-compare"]["script"]
    gate = next(line for line in script if line.startswith("gnnmon compare"))
    plant(tmp_path, spread, slower)
    done = bash(gate, tmp_path)
    assert done.returncode == status, (done.stdout, done.stderr)
    assert (tmp_path / "compare.html").read_text().startswith("<!DOCTYPE html>")
