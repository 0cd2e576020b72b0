"""play/compare_reruns.py at its tiny size: identical runs in fresh processes and planted ones,
every pair gated by ``gnnmon compare`` and tallied (the figures depend on the machine; what the
test holds is that every gate ran and said pass, regressed or inconclusive)."""

from __future__ import annotations

import json

import pytest

from play.compare_reruns import main


@pytest.mark.slow
def test_the_rerun_study_gates_every_pair(tmp_path, capsys):
    assert main(["--tiny", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "reruns.json").read_text())
    assert result["runs"] == 2 and json.loads(capsys.readouterr().out) == result
    assert sum(result["identical pairs"].values()) == 1  # run 1 vs run 2
    assert sum(result["planted +10 % (optimizer), one a side"].values()) == 1
    assert set(result["identical pairs"]) == {"passed", "regressed", "inconclusive"}  # no other exit status
    rows = [json.loads(line) for line in (tmp_path / "planted0.jsonl").read_text().splitlines()]
    assert any(r.get("type") == "row" and r.get("label") == "train_step" for r in rows)
