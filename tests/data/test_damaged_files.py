"""A hand-damaged run file gets a result or one line naming the line and the field, never a
traceback. A good run's file (tests/damage.py) with each field of its manifest, rows, GC event,
sample, marker, energy counter's point and end line damaged every way (missing, null, a string, a
bool, a list, an object, a nested object, a huge number, 2**63 and 2**64, NaN and Infinity tokens),
and each of those lines cut in the middle, replaced or retyped: ``gnnmon.load`` reads it (strict or
not) or refuses it naming the line and the field; every command (report, its CSV, HTML and
``--by``, forecast, each export) and the report's Python API (markdown, summary, spikes, analysis,
energy, frames, the trace, the timeline figure) give a result or that one line (exit status 2).
A lenient read keeps every good row and nulls what is damaged, with a warning."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import gnnmon
from gnnmon.cli import NO_MODEL
from gnnmon.errors import ReportFileError
from tests.damage import DAMAGES, LINE_DAMAGES, Case, cases, damaged, exercise, good_run, run_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    return good_run(tmp_path_factory.mktemp("good") / "run.jsonl")


@pytest.fixture(scope="module")
def every_case(good) -> list[Case]:
    found = cases(good)
    kinds = {c.kind for c in found}
    assert kinds == {"manifest", "row", "gc", "sample", "marker", "point", "end"}, kinds
    return found


def test_the_good_file_is_read_whole_by_every_command(good, tmp_path):
    run = gnnmon.load(good)
    assert len(run.records) == 2 + 6 and len(run.gc_events) >= 1 and run.samples and len(run.points) == 3
    assert [m["kind"] for m in run.markers] == ["settings", "epoch", "epoch"] and run.complete
    assert exercise(good, Case(0, "none", None, "none"), tmp_path, plot=True) == []


@pytest.mark.slow
def test_every_damaged_field_and_line_is_read_or_refused_naming_its_line_and_field(good, every_case, tmp_path):
    """Every case, through ``load`` strict and lenient (the commands read through it: below)."""
    assert len(every_case) > 1500  # every field of every chosen line, each damaged every way
    problems = {}
    for case in every_case:
        found = exercise(damaged(good, case, tmp_path / "run.jsonl"), case, tmp_path / "out", full=False)
        if found:
            problems[str(case)] = found
    assert not problems, "\n".join(f"{k}: {v[0]}" for k, v in list(problems.items())[:10])


def _case(good: Path, line_kind: str, field: str | None, damage: str, nth: int = 1) -> Case:
    """The case damaging ``field`` of the ``nth`` chosen line of ``line_kind``."""
    found = [c for c in cases(good) if c.kind == line_kind and c.field == field and c.damage == damage]
    return found[nth - 1]


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
@example(data=("row", "t_start_ns", "string"))  # was: to_frame's DateParseError
@example(data=("row", "wall_s", "object"))
@example(data=("manifest", "config", "list"))  # was: a traceback from --html
@example(data=("manifest", "distributed", "string"))
@example(data=("sample", "t_ns", "string"))  # was: a traceback from export trace
@example(data=("gc", "duration_s", "string"))
@example(data=("marker", "t_ns", "missing"))
@example(data=("point", "value", "null"))
@example(data=("row", "label", "int"))
@example(data=("row", "epoch", "nested object"))  # --by epoch
@example(data=("row", None, "cut in the middle"))
def test_every_command_on_a_damaged_file_gives_a_result_or_one_line_naming_line_and_field(good, every_case, tmp_path,
                                                                                          data):
    if isinstance(data, tuple):  # an example: the timeline figure too (matplotlib: slow)
        case, plot = _case(good, *data), True
    else:
        case, plot = data.draw(st.sampled_from(every_case), label="case"), False
    problems = exercise(damaged(good, case, tmp_path / "run.jsonl"), case, tmp_path / "out", plot=plot)
    assert not problems, f"{case}:\n" + "\n".join(problems)


@pytest.mark.parametrize("damage", ["string", "huge", "object"])
def test_the_command_line_exits_2_with_one_line_and_no_traceback(good, tmp_path, damage):
    """The real ``python -m gnnmon``, as a user runs it: every command on a string where a time
    belongs, the report on the other damages (the commands read through one loader)."""
    case = _case(good, "row", "t_start_ns", damage)
    path = damaged(good, case, tmp_path / "run.jsonl")
    commands = [["report", str(path)], ["export", "trace", str(path), "-o", str(tmp_path / "t.json")],
                ["report", str(path), "--html", str(tmp_path / "p.html")], ["forecast", str(path)]]
    for argv in commands if damage == "string" else commands[:1]:
        proc = subprocess.run([sys.executable, "-m", "gnnmon", *argv], capture_output=True, text=True, timeout=120,
                              cwd=ROOT)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1 and f"run.jsonl:{case.line}: a row's field 't_start_ns'" in proc.stderr
        lenient = subprocess.run([sys.executable, "-m", "gnnmon", *argv, "--lenient"], capture_output=True, text=True,
                                 timeout=120, cwd=ROOT)
        assert "Traceback" not in lenient.stderr, lenient.stderr
        assert (lenient.returncode == 0
                or (argv[0] == "forecast" and lenient.returncode in (NO_MODEL, 2))), lenient.stderr
        assert f"gnnmon: warning: {path}:{case.line}: a row's field 't_start_ns'" in lenient.stderr


def test_a_lenient_read_keeps_every_good_row_and_nulls_each_damaged_value(good, tmp_path):
    lines = good.read_text().splitlines()
    rows = [i for i, line in enumerate(lines) if '"type":"row"' in line]
    bad = {rows[0]: ("wall_s", "slow"), rows[2]: ("t_start_ns", "x"), rows[3]: ("notes", [1, 2]),
           rows[5]: ("mem_peak_bytes", 1e300)}
    for i, (field, value) in bad.items():
        lines[i] = json.dumps({**json.loads(lines[i]), field: value})
    gc_line = next(i for i, line in enumerate(lines) if '"type":"gc"' in line)
    lines[gc_line] = json.dumps({**json.loads(lines[gc_line]), "t_start_ns": "later"})  # required: the event goes
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(lines) + "\n")
    first = {rows[0]: "a row's field 'wall_s' is a string", gc_line: "a GC event's field 't_start_ns' is a string"}
    at = min(first)  # where an automatic collection's line lands depends on when it ran
    with pytest.raises(ReportFileError, match=rf"run.jsonl:{at + 1}: {first[at]}"):  # strict: the first damage
        gnnmon.load(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = gnnmon.load(path, strict=False)
    said = [str(w.message) for w in caught]
    for i, (field, _) in bad.items():
        assert any(f"run.jsonl:{i + 1}: a row's field {field!r}" in s and s.endswith("read as null")
                   for s in said), said
    assert any(f"run.jsonl:{gc_line + 1}: a GC event's field 't_start_ns'" in s and "skipped the line" in s
               for s in said)
    good_run_ = gnnmon.load(good)
    assert len(run.records) == len(good_run_.records)  # every row kept
    assert len(run.gc_events) == len(good_run_.gc_events) - 1
    def written_once(i: int, field: str) -> set[str]:
        """The fields a damage to ``field`` of row line ``i`` reaches: that field alone (every line whole)."""
        return {field}

    for row, before in zip(run.records, good_run_.records, strict=True):
        damaged_fields = {g for i, (f, _) in bad.items() if json.loads(lines[i]).get("index") == row["index"]
                          and json.loads(lines[i])["label"] == row["label"] for g in written_once(i, f)}
        for field, value in before.items():
            assert row[field] == (None if field in damaged_fields else value), (row["label"], row["index"], field)
    assert gnnmon.Report(run).frame()["t_start"].isna().sum() == 1
    code, _, err = run_cli(["report", str(path), "--lenient"])
    warned = 1 + sum(len(written_once(i, f)) for i, (f, _) in bad.items())  # the GC event, each damaged value
    assert code == 0 and err.count("gnnmon: warning: ") == warned and "Traceback" not in err


def test_damage_past_ten_values_is_counted_in_one_warning(good, tmp_path):
    lines = good.read_text().splitlines()
    rows = [i for i, line in enumerate(lines) if '"type":"row"' in line]
    for i in rows:
        lines[i] = json.dumps({**json.loads(lines[i]), "wall_s": "x", "device_s": "y"})
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = gnnmon.load(path, strict=False)
    said = [str(w.message) for w in caught]
    assert len(said) == 11 and said[-1].endswith(f"and {2 * len(rows) - 10} more damaged value(s) read as null or "
                                                 "line(s) skipped")
    assert all(r["wall_s"] is None and r["device_s"] is None for r in run.records)


def test_the_damages_cover_every_kind(every_case):
    assert {c.damage for c in every_case} == set(DAMAGES) | set(LINE_DAMAGES)
