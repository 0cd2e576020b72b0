"""The GPU acceptance command without a GPU: its dry run, its step runner (a failing step, a step
that runs out of time and the budget), and its fake run, whose energy check meets a planted 300 W."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import psutil
import pytest

from benchmarks.gpu_acceptance import BUDGET_S, STEPS, Step, device_slug, main, run
from tests.scripts import ROOT, one_thread


def test_the_dry_run_lists_every_step_with_its_limit_and_claim_within_eight_minutes(capsys):
    assert main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    for step in STEPS:
        assert step.name in out and f"{step.limit_s} s" in out and step.claim and step.claim in out
    in_turn = sum(s.limit_s for s in STEPS if not s.background)
    assert in_turn <= BUDGET_S <= 8 * 60 and all(s.limit_s <= BUDGET_S for s in STEPS)
    assert {"environment", "install", "cuda tests", "benchmark", "suite", "energy", "compile", "flickr", "cora",
            "pna", "batching"} == {s.name for s in STEPS}


def test_a_step_that_fails_or_runs_out_of_time_is_recorded_and_the_run_goes_on(tmp_path):
    py = ("{py}", "-c")
    steps = (
        Step("fails", 20, "exits 3", py + ("import sys; print('broken'); sys.exit(3)",)),
        Step("beside", 20, "runs in the background", py + ("import time; time.sleep(0.5)",), background=True),
        Step("passes", 20, "prints", py + ("print('fine')",)),
        Step("hangs", 20, "sleeps 60 s: stopped when the budget ends", py + ("import time; time.sleep(60)",)),
        Step("late", 20, "no time left to start", py + ("print('late')",)),
    )
    t0 = time.monotonic()
    outcomes = {o.name: o for o in run(steps, tmp_path, fake=False, budget=3.0)}
    took = time.monotonic() - t0
    assert outcomes["fails"].status == "fail" and "broken" in outcomes["fails"].tail
    assert outcomes["hangs"].status == "timeout" and 1.5 < outcomes["hangs"].seconds < 5
    assert outcomes["beside"].status == "pass" and outcomes["passes"].status == "pass"
    assert outcomes["late"].status == "not run" and outcomes["late"].figures == {"why": "out of time"}
    assert took < 10
    leftover = [p for p in psutil.Process().children(recursive=True) if "time.sleep(60)" in " ".join(p.cmdline())]
    assert not leftover  # the step that ran out of time was killed with its children


def test_device_names_give_the_results_file_its_model():
    assert device_slug("NVIDIA H100 80GB HBM3") == "h100"
    assert device_slug("NVIDIA H200") == "h200"
    assert device_slug("NVIDIA A100-SXM4-40GB") == "a100"
    assert device_slug("Tesla T4") == "tesla-t4"


@pytest.mark.slow
def test_the_fake_run_checks_what_the_cpu_can_against_the_fakes(tmp_path):
    """``--fake``: the install, the GPU benchmark and the energy check run against the tests' fake
    CUDA and NVML; the rows' energy is the planted 300 W times their time; the GPU-only steps say
    so; the results file and its JSON are written."""
    proc = subprocess.run([sys.executable, "benchmarks/gpu_acceptance.py", "--fake", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, env=one_thread(), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (md,) = tmp_path.glob("gpu-fake-*.md")
    data = json.loads(md.with_suffix(".json").read_text())
    status = {s["name"]: s["status"] for s in data["steps"]}
    assert status == {"environment": "pass", "install": "pass", "cuda tests": "not run", "benchmark": "pass",
                      "suite": "not run", "energy": "pass", "compile": "not run", "flickr": "not run",
                      "cora": "not run", "pna": "not run", "batching": "not run"}
    energy = next(s for s in data["steps"] if s["name"] == "energy")["figures"]
    assert energy["rows_j"] == pytest.approx(300.0 * energy["rows_s"], rel=0.03)
    # issue 65's GPU figures are all read (the memory-alone variant ran), and none is called met on the fake
    bench = next(s for s in data["steps"] if s["name"] == "benchmark")["figures"]
    assert set(bench["issue_65"]) == {"gcn_full_stack_ratio", "tiny_full_stack_us", "tiny_memory_us"}
    assert all(f["read"] is not None and f["met"] is None for f in bench["issue_65"].values()), bench["issue_65"]
    install = next(s for s in data["steps"] if s["name"] == "install")["figures"]
    assert install["torch_after"] == install["torch_before"]
    assert "FAKE device" in md.read_text() and proc.stdout.strip().splitlines()[-1].startswith("gpu-check: 4 pass")
