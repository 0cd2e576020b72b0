"""play/compare_reruns.py at its tiny size: runs in fresh processes, two a side, the planted side with
more compute in every step, gated by ``gnnmon compare`` all together and one a side. How the gate
decides depends on the machine; what the test holds is what the runs record and the gate reads."""

from __future__ import annotations

import json

import pytest

import gnnmon
from play.compare_reruns import main


@pytest.mark.slow
def test_the_rerun_study_gates_both_sides(tmp_path, capsys):
    assert main(["--tiny", "--planted", "0.5", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "reruns.json").read_text())
    assert result["runs a side"] == 2 and json.loads(capsys.readouterr().out) == result
    both = result["all runs a side"]
    assert both["exit"] in (0, 1, 4) and len(result["one a side"]) == 2
    # torch on one thread, each row its thread's CPU time: the gate judges the step's own work
    assert [d["figure"] for d in both["judged"]] == ["CPU time per 1,000 nodes+edges"], both
    assert "Student's t over 2 + 2 runs" == both["judged"][0]["test"]
    for i in range(2):
        a, b = gnnmon.load(tmp_path / f"a{i}.jsonl"), gnnmon.load(tmp_path / f"b{i}.jsonl")
        assert a.manifest["devices"]["torch_threads"] == b.manifest["devices"]["torch_threads"] == 1
        steps_a = [r for r in a.records if r["label"] == "train_step"]
        steps_b = [r for r in b.records if r["label"] == "train_step"]
        assert steps_a and all("phase_planted_s" not in r and r["thread_cpu_s"] > 0 for r in steps_a)
        assert steps_b and all(r["phase_planted_s"] > 0 for r in steps_b)
    # each planted step spent half its own CPU time again on its thread: the judged CPU time rose
    # by about half (the machine's own run-to-run change in CPU time is a few %, not 25)
    assert both["judged"][0]["change"] > 0.25, both
