"""The README's examples run as printed, each in a process of its own, and record what they say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests import rawjsonl

ROOT = Path(__file__).resolve().parents[2]


def quick_start() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Quick start"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_quick_start_runs_as_printed(tmp_path):
    (tmp_path / "quickstart.py").write_text(quick_start())
    proc = subprocess.run([sys.executable, "quickstart.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                                            "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "### train_step — 24 call(s)" in proc.stdout  # 3 epochs of 256 graphs in batches of 32
    # no advice the script already follows: it freezes set-up and its step is @gc_controlled
    start = proc.stdout.index("### Diagnosis")
    diagnosis = proc.stdout[start:proc.stdout.index("\n### ", start + 1)]
    assert "freeze_gc()" not in diagnosis and "@gc_controlled" not in diagnosis, diagnosis
    lines = rawjsonl.lines(tmp_path / "runs" / "quickstart.jsonl")  # rows made whole: repeated fields said once
    steps = [r for r in lines if r.get("type") == "row" and r["label"] == "train_step"]
    assert len(steps) == 24 and sum(r["num_graphs"] for r in steps) == 3 * 256
    assert [r["epoch"] for r in steps] == [e for e in range(3) for _ in range(8)]
    # a figure with its source, or None with a note saying why (no RAPL and no CodeCarbon: a GPU machine)
    assert all(r["energy_cpu_j_source"] if r["energy_cpu_j"] is not None
               else any(n.startswith("energy_cpu_j: ") for n in r["notes"]) for r in steps)
    asked = [r for r in lines if r.get("type") == "gc" and r.get("requested")]
    assert len(asked) == 3 and all(r["reason"] == "collect_garbage" for r in asked)  # one per epoch
    assert (tmp_path / "runs" / "timeline.png").stat().st_size > 5000
    printed = re.search(r"^([0-9.]+) J over (\d+) rows$", proc.stdout, re.M)  # the energy, printed
    assert printed and int(printed.group(2)) == len([r for r in lines if r.get("type") == "row"
                                                     and r.get("parent") is None]), proc.stdout[-2000:]
    assert float(printed.group(1)) > 0


def test_the_three_line_example_prints_what_the_readme_shows(tmp_path):
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Three lines"):readme.index("## Quick start")]
    code, shown = re.findall(r"```(?:python)?\n(.*?)```", section, re.S)
    (tmp_path / "first.py").write_text(code)
    proc = subprocess.run([sys.executable, "first.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "gnnmon" not in proc.stderr and "Traceback" not in proc.stderr  # nothing but the report
    rows = rawjsonl.lines(tmp_path / "runs" / "first.jsonl")
    assert sum(r["type"] == "row" and r["label"] == "train_step" for r in rows) == 20
    printed = proc.stdout.splitlines()
    for line in shown.strip().splitlines()[1:]:  # the same table, figure by figure (numbers vary)
        if line.startswith("| ") and not line.startswith(("| figure", "| ---")):
            figure = line.split(" | ")[0] + " | " + line.split(" | ")[1] + " | " + line.split(" | ")[2]
            assert any(p.startswith(figure) for p in printed), figure
        elif line.startswith("###"):
            assert line.replace("on cpu", "on ") in [p.replace("on cpu", "on ").replace("on cuda:0", "on ")
                                                     for p in printed]


def test_the_answer_first_prints_the_diagnosis_the_readme_shows(tmp_path):
    """The README's first example: the diagnosis it shows is what the run prints, word for word
    but for the figures (they vary with the machine), and it leads with input-bound."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## The answer first"):readme.index("## Install")]
    code, shown = re.findall(r"```(?:python)?\n(.*?)```", section, re.S)
    (tmp_path / "answer.py").write_text(code)
    proc = subprocess.run([sys.executable, "answer.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = proc.stdout.splitlines()
    lines = shown.strip().splitlines()[1:]  # the versions line differs
    assert lines[0] == "" and lines[1] == "### Diagnosis" and lines[3].startswith("1. **input-bound — ")
    start = printed.index("### Diagnosis")
    for want, got in zip(lines[1:], printed[start:start + len(lines) - 1], strict=True):
        pattern = re.escape(re.sub(r"\d[\d,.]*", "0", want)).replace("0", r"\d[\d,.]*")
        assert re.fullmatch(pattern, got), (want, got)
