"""Every-row figures as probes (``gnnmon/record/probes.py``): the listed ones are chosen once from
a run's options (again only when what a chooser reads changes), and a new one — a module of the
test's own listed in ``PROBES``, its figure one line in ``figures.py`` and its option one line in
the options — appears on the live rows, in the file, in the report and in the field reference,
with no other edit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gnnmon
from gnnmon.record import probe_batch, probe_ranges, probe_sched
from gnnmon.record.probe_sched import Sched
from gnnmon.record.probes import PROBES, chosen

PACKAGE = Path(gnnmon.__file__).resolve().parent


def test_a_runs_probes_follow_its_options():
    assert PROBES == [probe_sched.choose, probe_batch.choose, probe_ranges.choose]
    off = gnnmon.collect(sched=False)  # the CPU time and GC figures are the row's own: no probe
    assert list(chosen(off).all) == [] == list(off.probes[False])
    on = gnnmon.collect(sched=True)
    sched = [Sched] if on.sched else []  # sched: Linux only
    assert [type(p) for p in on.probes.all] == sched
    assert list(on.probes[False]) == []  # sched: top-level rows only


def test_a_runs_probes_are_chosen_again_only_when_what_they_read_changes(tmp_path):
    """Profiler ranges switched on: the run's next row opens the range probe (chosen again once),
    and the rows after reuse that choice; switched off, it is gone from the next row."""

    @gnnmon.cuda_timed(label="step", device="cpu")
    def step() -> None:
        pass

    with gnnmon.collect(tmp_path / "run.jsonl", sample=None) as run:
        step()
        before = run.probes
        step()
        assert run.probes is before  # nothing changed: the same choice
        with gnnmon.emit_ranges():
            step()
            on = run.probes
            step()
            assert run.probes is on and on is not before
            assert probe_ranges.RowRange in [type(p) for p in on.all]
        step()
        assert probe_ranges.RowRange not in [type(p) for p in run.probes.all]


PROBE = '''
TICKS = [0]


class Ticks:
    """Planted: the ticks the step made while the row was open."""

    top_level = False

    def open(self, row):
        return TICKS[0]

    def close(self, row, opened, fields, error):
        fields["planted_ticks"] = TICKS[0] - opened


def choose(run):
    return Ticks() if run.options.planted else None
'''

STUDY = '''
import json, sys
import gnnmon
from gnnmon.record import probe_ticks as planted_probe
from gnnmon.figures import reference

@gnnmon.cuda_timed(label="step", device="cpu")
def step(k):
    planted_probe.TICKS[0] += k
    @gnnmon.cuda_timed(label="inner", device="cpu")
    def inner():
        planted_probe.TICKS[0] += 100
    if k == 3:
        inner()

path, bare = sys.argv[1], sys.argv[2]
with gnnmon.collect(path, planted=True, sample=None) as run:
    for k in range(5):
        step(k)
live = [(r["label"], r.get("planted_ticks")) for r in run.records]
with gnnmon.collect(bare, sample=None) as off:
    step(7)
print(json.dumps({
    "live": live,
    "loaded": [(r["label"], r.get("planted_ticks")) for r in gnnmon.load(path).records],
    "in_file": open(path).read().count("planted_ticks"),
    "report": [line for line in gnnmon.Report.load(path).markdown().splitlines() if "planted_ticks" in line],
    "reference": [line for line in reference().splitlines() if "planted_ticks" in line],
    "off": "planted_ticks" in off.records[0],
}))
'''


def test_a_new_probe_is_one_module_one_figure_line_and_one_option(tmp_path):
    copy = tmp_path / "pkg" / "gnnmon"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    figures = (copy / "figures.py").read_text()
    assert figures.count("    CPU_S,\n") == 1
    (copy / "figures.py").write_text(figures.replace(
        "    CPU_S,\n",
        '    CPU_S,\n    F("planted_ticks", COUNT, "row", "ticks the planted probe counted in the row"),\n'))
    options = (copy / "record" / "options.py").read_text()
    assert options.count("    sched: bool | str = AUTO\n") == 1
    (copy / "record" / "options.py").write_text(options.replace(
        "    sched: bool | str = AUTO\n", "    sched: bool | str = AUTO\n    planted: bool = False\n"))
    (copy / "record" / "probe_ticks.py").write_text(PROBE)
    listing = (copy / "record" / "probes.py").read_text()
    assert listing.count("from gnnmon.record import oom_row, ") == 1 and listing.count("    probe_ranges.choose,") == 1
    (copy / "record" / "probes.py").write_text(listing.replace(
        "from gnnmon.record import oom_row, ",
        "from gnnmon.record import probe_ticks\nfrom gnnmon.record import oom_row, "
    ).replace("    probe_ranges.choose,", "    probe_ranges.choose,\n    probe_ticks.choose,"))
    env = {**os.environ, "PYTHONPATH": str(copy.parent)}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(STUDY), str(tmp_path / "run.jsonl"),
                           str(tmp_path / "bare.jsonl")], capture_output=True, text=True, env=env, timeout=300,
                          cwd=tmp_path)  # not this checkout: the copy on PYTHONPATH is the gnnmon imported
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    # the planted truth: step k ticks k, and 100 more through its inner row at k = 3
    want = [["step", 0], ["step", 1], ["step", 2], ["inner", 100], ["step", 103], ["step", 4]]
    assert got["live"] == want and got["loaded"] == want
    assert got["in_file"] >= 1  # written by the run (said once per run where it repeats)
    assert got["report"], "the report's tables show the figure"
    assert got["reference"] and "ticks the planted probe counted in the row" in got["reference"][0]
    assert got["off"] is False  # the option off: no probe, no field


class _Raising:
    """A planted probe that raises in ``open`` or in ``close``."""

    top_level = False

    def __init__(self, where: str) -> None:
        self.where = where

    def open(self, row):
        if self.where == "open":
            raise OSError("planted: open")
        return 1

    def close(self, row, opened, fields, error):
        if self.where == "close":
            raise OSError("planted: close")
        fields["raising_probe_closed"] = opened


def test_a_probe_that_raises_is_noted_on_its_row_and_the_step_goes_on(monkeypatch, tmp_path):
    import gnnmon.record.probes as probes

    def unchoosable(run):
        return 1 / 0

    monkeypatch.setattr(probes, "PROBES", [*PROBES, lambda run: _Raising("open"), lambda run: _Raising("close"),
                                           lambda run: _Raising("neither"), unchoosable])

    @gnnmon.cuda_timed(label="step", device="cpu")
    def step(i: int) -> int:
        return i * 2

    with pytest.warns(RuntimeWarning,
                      match=r"left out a probe: choosing it \(.*unchoosable\) raised ZeroDivisionError"):
        with gnnmon.collect(tmp_path / "run.jsonl", sample=None) as run:
            assert [step(i) for i in range(3)] == [0, 2, 4]
    rows = run.records
    assert [r["index"] for r in rows] == [0, 1, 2] and all(r["error"] is None for r in rows)
    for row in rows:
        notes = " | ".join(row["notes"])
        assert "probe _Raising failed: OSError: planted: open" in notes
        assert "probe _Raising failed: OSError: planted: close" in notes
        assert row["raising_probe_closed"] == 1  # the probe that works still fills its figure
