"""``gnnmon forecast`` judges its options before it reads and fits the run: a bad --fraction or
--capacity is exit 2 with the option's own message whether the run's model is trusted or not, and
whether the run can be read at all."""

from __future__ import annotations

import pytest

from gnnmon.cli import NO_MODEL, main
from tests.report.diagnosis.planted import steps, write_run

BAD = [(["--fraction", "90"], "--fraction is a share of the capacity in (0, 1] (0.9: 90 %), got 90"),
       (["--fraction", "0"], "--fraction is a share of the capacity in (0, 1] (0.9: 90 %), got 0"),
       (["--fraction", "nan"], "--fraction is a share of the capacity in (0, 1] (0.9: 90 %), got nan"),
       (["--capacity", "lots"], "--capacity: capacity must be bytes, a size such as '80GiB' or a device"),
       (["--capacity", "0"], "--capacity: capacity must be a positive number of bytes, got 0"),
       (["--capacity", "cuda:99"], "--capacity: device 'cuda:99' requested but"),  # no GPU, or fewer than 100
       (["--capacity", "meta"], "--capacity: unsupported device 'meta'")]
"""Each bad option and the start of the one line it must give (after ``gnnmon: ``)."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two planted runs of 60 steps whose peak is exactly linear in nodes and edges: one as planted
    (a trusted model), one whose every batch has the first's shape (nothing to fit a slope on:
    untrusted), and a path that does not exist."""
    folder = tmp_path_factory.mktemp("forecast")
    rows = steps(60)
    flat = [dict(r, num_nodes=rows[0]["num_nodes"], num_edges=rows[0]["num_edges"]) for r in rows]
    return {"trusted": (write_run(folder / "trusted.jsonl", rows), 0),
            "untrusted": (write_run(folder / "untrusted.jsonl", flat), NO_MODEL),
            "missing": (folder / "missing.jsonl", 2)}


@pytest.mark.parametrize("which", ["trusted", "untrusted", "missing"])
@pytest.mark.parametrize(("options", "said"), BAD)
def test_a_bad_option_is_exit_2_with_its_message_whatever_the_run(runs, which, options, said, capsys):
    path, _ = runs[which]
    assert main(["forecast", str(path), *options]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"gnnmon: {said}") and captured.err.count("\n") == 1, captured.err
    assert captured.out == ""  # nothing fitted, nothing forecast


@pytest.mark.parametrize("which", ["trusted", "untrusted", "missing"])
def test_good_options_leave_the_status_to_the_run(runs, which, capsys):
    """The control: with --capacity 1GiB --fraction 0.5 each run gets its own status (0 forecast, 3
    no trusted model, 2 no such file)."""
    path, status = runs[which]
    assert main(["forecast", str(path), "--capacity", "1GiB", "--fraction", "0.5"]) == status
    out = capsys.readouterr().out
    assert ("budget at 50% (512 MiB)" in out) == (status == 0), out
