"""The export registry (``gnnmon/report/exports.py``): every door (``Report.export``, the
``to_*`` aliases, ``gnnmon export``, ``gnnmon report --format csv``) goes through it; a replaced
export is the one every door uses; one of yours is registered as its module is imported; ``-o -``
writes a stream export to stdout and a file-only export refuses it, naming why."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import textwrap

import pytest

import gnnmon
from gnnmon.cli import main
from gnnmon.report.exports import EXPORTS, Written, register_export

STEPS = 5


@gnnmon.cuda_timed(label="step", device="cpu")
def step(i: int) -> int:
    gnnmon.current_row().fields["planted"] = i
    return i


@pytest.fixture(scope="module")
def run_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("registry") / "run.jsonl"
    with gnnmon.collect(path, sample=None):
        for i in range(STEPS):
            step(i)
    return path


class Counting:
    """A planted export: writes one line per row, and counts the calls that reached it."""

    what = "one line per row"

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: list[str] = []

    def write(self, result, out) -> str:
        self.calls.append(str(out))
        rows = list(result.table.rows())
        with open(out, "w") as f:
            f.writelines(f"{r['planted']}\n" for r in rows)
        return Written(len(rows), "lines")


@pytest.fixture
def replaced():
    """The built-in exports, put back after a test replaced some."""
    saved = EXPORTS.items()
    yield
    EXPORTS.clear()
    for name, export in saved:
        EXPORTS.register(name, export)


def test_a_replaced_export_is_what_every_door_uses(run_path, tmp_path, replaced, capsys):
    tb, trace = Counting("tensorboard"), Counting("trace")
    register_export(tb)
    register_export(trace)
    report = gnnmon.Report.load(run_path)
    assert report.export("tensorboard", tmp_path / "tb").n == STEPS  # the count the export wrote
    report.export("trace", tmp_path / "t.json")
    assert main(["export", "trace", str(run_path), "-o", str(tmp_path / "cli.json")]) == 0
    assert tb.calls == [str(tmp_path / "tb")]
    assert trace.calls == [str(tmp_path / "t.json"), str(tmp_path / "cli.json")]
    assert (tmp_path / "cli.json").read_text().split() == [str(i) for i in range(STEPS)]
    assert f"wrote {STEPS} lines" in capsys.readouterr().err


def test_csv_to_stdout_is_the_same_from_export_and_from_report(run_path, capsys):
    assert main(["export", "csv", str(run_path), "-o", "-"]) == 0
    exported = capsys.readouterr()
    assert main(["report", str(run_path), "--format", "csv"]) == 0
    reported = capsys.readouterr()
    assert exported.out == reported.out and exported.err == reported.err == ""  # stdout holds CSV only
    rows = list(csv.DictReader(io.StringIO(exported.out)))
    assert [int(r["planted"]) for r in rows] == list(range(STEPS))


def test_a_trace_to_stdout_is_the_trace_and_a_file_only_export_refuses_stdout(run_path, capsys):
    assert main(["export", "trace", str(run_path), "-o", "-"]) == 0
    events = json.loads(capsys.readouterr().out)["traceEvents"]
    assert sum(e.get("name") == "step" and e["ph"] == "X" for e in events) == STEPS
    assert main(["export", "html", str(run_path), "-o", "-"]) == 2
    assert "the html export writes files only" in capsys.readouterr().err
    with pytest.raises(ValueError, match="writes files only"):
        gnnmon.Report.load(run_path).export("html", "-")


def test_an_unknown_export_names_the_known_ones(run_path, tmp_path):
    with pytest.raises(ValueError, match=r"no export named 'nope'; the exports: ") as refused:
        gnnmon.Report.load(run_path).export("nope", tmp_path / "x")
    named = str(refused.value).split("the exports: ")[1].split(", ")
    assert {"trace", "tensorboard", "html", "csv"} <= set(named)
    with pytest.raises(TypeError, match="an export has a name"):
        register_export(object())  # type: ignore[arg-type]
    assert set(list(EXPORTS)[:4]) == {"trace", "tensorboard", "html", "csv"}


PLUGIN = '''
from gnnmon.report.exports import Written, register_export

class LabelCount:
    name = "labels"
    what = "each label and its number of rows"

    def write(self, result, out):
        counts = {}
        for row in result.table.rows():
            counts[row["label"]] = counts.get(row["label"], 0) + 1
        with open(out, "w") as f:
            f.writelines(f"{label} {n}\\n" for label, n in counts.items())
        return Written(len(counts), "labels")
'''


def test_an_export_of_yours_registers_as_its_module_is_imported_and_every_door_finds_it(run_path, tmp_path):
    """A module of yours with one register_export call (here written to a folder on the path):
    once imported, ``Report.export`` and ``gnnmon export`` run it by name; an unknown name is
    refused naming the exports there are."""
    (tmp_path / "labelcount.py").write_text(PLUGIN)
    probe = textwrap.dedent(f"""
        import sys, gnnmon
        from gnnmon.cli import main
        from gnnmon.report.exports import EXPORTS, register_export
        import labelcount
        register_export(labelcount.LabelCount())
        print(gnnmon.Report.load({str(run_path)!r}).export("labels", {str(tmp_path / 'py.txt')!r}))
        sys.exit(main(["export", "labels", {str(run_path)!r}, "-o", {str(tmp_path / 'cli.txt')!r}]))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()])}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "1 labels", done.stderr
    assert (tmp_path / "py.txt").read_text() == (tmp_path / "cli.txt").read_text() == f"step {STEPS}\n"
    with pytest.raises(ValueError,
                       match=r"no export named 'nothing'; the exports: (csv|trace|html|tensorboard|labels)"):
        gnnmon.Report.load(run_path).export("nothing", tmp_path / "x")


def test_what_an_export_wrote_copies_and_pickles_whole():
    import copy
    import pickle

    wrote = Written(1200, "scalars")
    for again in (copy.copy(wrote), pickle.loads(pickle.dumps(wrote))):
        assert again == "1,200 scalars" and again.n == 1200 and again.unit == "scalars"


def test_a_reports_records_are_fresh_on_each_read(run_path):
    report = gnnmon.Report.load(run_path)
    first = report.records
    first[0]["planted"] = "changed"
    assert report.records[0]["planted"] == 0 and report.table.records()[0]["planted"] == 0
