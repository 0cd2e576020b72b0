"""The package layout keeps the flow: no import cycle, no import up the flow, no late gnnmon import,
each stage folder saying what it may import; the public API and old run files still work."""

from __future__ import annotations

import ast
import importlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import gnnmon
from gnnmon.cli import main
from tests import importgraph
from tests.importgraph import (
    ALLOWED,
    all_imports,
    by_string,
    cycles,
    heavy,
    late,
    many_concerns,
    stage,
    upward,
)

PACKAGE = Path(gnnmon.__file__).resolve().parent
FILES = Path(__file__).resolve().parents[1] / "files"


def test_no_import_cycle_not_even_through_annotations():
    found = cycles(all_imports(PACKAGE), typing=True)
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_no_module_holds_more_than_one_concern():
    """A module's definitions form one group that refers to itself: no two groups of 40 lines or
    more that never refer to one another (``tests/importgraph.py``: ``many_concerns``)."""
    found = many_concerns(PACKAGE)
    assert not found, "modules of two concerns or more:\n" + "\n".join(
        f"{name}: " + "; ".join(f"{n} lines ({', '.join(names)})" for n, names in big) for name, big in found)


def test_the_concern_check_catches_a_planted_second_concern(tmp_path):
    copy = _copy_package(tmp_path)
    # run.py's own code, and a copy of the sinks module's JsonlSink pasted under it: two concerns
    sinks = (copy / "record" / "sinks.py").read_text()
    pasted = sinks[sinks.index("class JsonlSink:"):sinks.index("SINKS: Registry")]
    _append(copy / "record" / "run.py", "\n\n" + pasted.replace("class JsonlSink:", "class PastedSink:"))
    found = dict(many_concerns(copy))
    assert "gnnmon.record.run" in found and any("PastedSink" in names for _, names in found["gnnmon.record.run"])
    assert "gnnmon.record.run" not in dict(many_concerns(PACKAGE))  # the module itself is one concern


PASTED_METHODS = """
    def _pasted_open(self, where):
        self._pasted_where = where
{a}
    def _pasted_close(self):
        return self._pasted_where
{b}
"""


def test_the_concern_check_sees_two_concerns_inside_one_class(tmp_path):
    """Two groups of a class's methods, 40 lines or more each, that share no attribute and call
    each other nowhere: a second concern in ``Run``, caught (the constructors tie nothing)."""
    copy = _copy_package(tmp_path)
    filler = "".join(f"        self._pasted_where = self._pasted_where  # {i}\n" for i in range(45))
    _append(copy / "record" / "run.py", PASTED_METHODS.format(a=filler, b=filler))
    found = dict(many_concerns(copy))
    assert "gnnmon.record.run.Run" in found, sorted(found)
    assert any(names == ["_pasted_close", "_pasted_open"] for _, names in found["gnnmon.record.run.Run"])
    assert "gnnmon.record.run.Run" not in dict(many_concerns(PACKAGE))  # the class itself is one concern


def test_every_import_points_down_the_flow():
    # Typing-only imports count here too: an annotation that names a stage above is still coupling.
    bad = upward(all_imports(PACKAGE))
    assert not bad, "imports up the flow:\n" + "\n".join(
        f"{i.source}:{i.line} ({stage(i.source)}) imports {i.target} ({stage(i.target)})" for i in bad
    )


def test_no_gnnmon_import_inside_a_function():
    bad = late(all_imports(PACKAGE))
    assert not bad, "late imports (put shared state in gnnmon.record.state instead):\n" + "\n".join(
        f"{i.source}:{i.line} imports {i.target}" for i in bad
    )


def test_every_folder_is_a_stage_that_says_what_it_may_import():
    folders = sorted(p.name for p in PACKAGE.iterdir()
                     if (p / "__init__.py").exists() and p.name != "cli")  # the face's
    assert folders == sorted(set(ALLOWED) - {"api", "root"})
    for name in folders:
        doc = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text()))
        assert doc and "May import:" in doc, f"gnnmon/{name}/__init__.py must say what it may import"
        allowed_line = doc[doc.index("May import:"):]
        for other in ALLOWED[name] - {"root"}:
            assert f"gnnmon.{other}" in allowed_line, f"gnnmon/{name} docstring omits gnnmon.{other}"


def _copy_package(tmp_path: Path) -> Path:
    copy = tmp_path / "gnnmon"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def test_the_checks_catch_a_planted_cycle(tmp_path):
    copy = _copy_package(tmp_path)
    _append(copy / "record" / "gc_log.py", "\nfrom gnnmon.record.row import Row  # planted\n")
    found = cycles(all_imports(copy))
    assert found and any("gnnmon.record.gc_log" in c and "gnnmon.record.row" in c for c in found)
    # ... the same import only for annotations is not a run-time cycle
    copy2 = _copy_package(tmp_path / "b")
    _append(copy2 / "record" / "gc_log.py",
            "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gnnmon.record.row import Row\n")
    assert cycles(all_imports(copy2)) == []
    assert cycles(all_imports(copy2), typing=True)  # ... but a cycle through annotations all the same


def test_the_checks_catch_an_upward_and_a_late_import(tmp_path):
    copy = _copy_package(tmp_path)
    _append(copy / "devices" / "cuda.py", "\nfrom gnnmon.report import Report  # planted\n")
    _append(copy / "timeline" / "join.py", "\n\ndef f():\n    from ..record import run  # planted\n")
    bad = {(i.source, i.target) for i in upward(all_imports(copy))}
    assert ("gnnmon.devices.cuda", "gnnmon.report") in bad
    assert ("gnnmon.timeline.join", "gnnmon.record.run") in bad  # relative imports resolved
    assert [(i.source, i.target) for i in late(all_imports(copy))] == [
        ("gnnmon.timeline.join", "gnnmon.record.run")
    ]


def test_no_import_by_string_inside_the_package():
    """A module named in a string and imported later (``importlib.import_module``, a
    ``"module:Name"`` table) is an arrow the other checks would not see. The face imports each lazy
    public name's module inside a function, written out: the graph reads those arrows too."""
    bad = by_string(all_imports(PACKAGE))
    assert not bad, "imports by string:\n" + "\n".join(f"{i.source}:{i.line} imports {i.target}" for i in bad)
    face = {i.target for i in all_imports(PACKAGE) if i.source == "gnnmon" and i.in_function}
    assert {"gnnmon.record.run", "gnnmon.report", "gnnmon.measure.timing", "gnnmon.forecast.forecast"} <= face


def test_the_checks_catch_a_planted_import_by_string(tmp_path):
    copy = _copy_package(tmp_path)
    _append(copy / "data" / "table.py", '\nMAKER = "gnnmon.record.run:Run"  # planted\n')
    _append(copy / "report" / "stats.py",
            "\n\ndef f(name):\n    import importlib\n    return importlib.import_module(name)  # planted\n")
    _append(copy / "devices" / "cuda.py", '\nDOC = "see gnnmon.record.run"  # prose, not a module name\n')
    found = {(i.source, i.target) for i in by_string(all_imports(copy))}
    assert found == {("gnnmon.data.table", "gnnmon.record.run"), ("gnnmon.report.stats", "?")}
    # the string one is an arrow like any other: up the flow from the data stage
    assert ("gnnmon.data.table", "gnnmon.record.run") in {(i.source, i.target) for i in upward(all_imports(copy))}


REPORT_FLOOR = 18
"""Modules directly in ``gnnmon/report/`` (its ground floor), at most: the rest live in its wings."""


def test_the_report_keeps_its_ground_floor_small_and_its_wings():
    floor = sorted(p.stem for p in (PACKAGE / "report").glob("*.py"))
    assert len(floor) <= REPORT_FLOOR, f"{len(floor)} modules in gnnmon/report/: {floor}"
    wings = sorted(p.parent.name for p in (PACKAGE / "report").glob("*/__init__.py"))
    assert wings == ["compare", "diagnosis", "memory", "renderers"]


def test_the_stages_that_read_a_run_import_no_torch_and_no_pyg():
    found = heavy(PACKAGE)
    assert not found, "torch or PyG where runs are read:\n" + "\n".join(
        f"{module}:{line} imports {name} (reached as {how})" for module, name, line, how in found)


def test_the_checks_catch_torch_or_an_upward_import_planted_in_the_data_stage(tmp_path):
    copy = _copy_package(tmp_path)
    _append(copy / "data" / "format.py", "\nimport torch  # planted\n")
    _append(copy / "report" / "stats.py", "\n\ndef f():\n    import torch_geometric.data  # planted\n")
    _append(copy / "fields.py", "\nfrom torch import nn  # planted: a root module the data stage reads\n")
    _append(copy / "data" / "table.py", "\nfrom gnnmon.record.run import Run  # planted\n")
    found = {(module, name) for module, name, _, _ in heavy(copy)}
    assert {("gnnmon.data.format", "torch"), ("gnnmon.report.stats", "torch_geometric"),
            ("gnnmon.fields", "torch")} <= found
    # the root module is reached from the data stage (a path is named), not from a stage of its own
    how = next(how for module, name, _, how in heavy(copy) if module == "gnnmon.fields")
    assert how.startswith(("gnnmon.data.", "gnnmon.report.")) and how.endswith("gnnmon.fields")
    assert ("gnnmon.data.table", "gnnmon.record.run") in {(i.source, i.target) for i in upward(all_imports(copy))}
    assert heavy(PACKAGE) == [] and not upward(all_imports(PACKAGE))  # the package itself is clean


READ_A_RUN = """
import sys, tempfile, os
import gnnmon
from gnnmon.report.exports import EXPORTS
run = gnnmon.load(sys.argv[1])
report = gnnmon.Report(run)
report.markdown(); report.summary(); report.spikes(); report.energy(); report.memory_model("train_step")
with tempfile.TemporaryDirectory() as out:
    for name in EXPORTS:
        report.export(name, os.path.join(out, name, "out"))
print(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "torch_geometric")), sorted(EXPORTS))
"""


def test_loading_reporting_and_exporting_a_run_import_no_torch_in_a_fresh_process():
    path = FILES / "run-0.1.0-flat-layout.jsonl"
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(READ_A_RUN), str(path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[] ['csv', 'html', 'tensorboard', 'trace']"
    timed = subprocess.run([sys.executable, "-X", "importtime", "-m", "gnnmon", "report", str(path)],
                           capture_output=True, text=True, timeout=300)
    assert timed.returncode == 0 and "### train_step" in timed.stdout, timed.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in timed.stderr.splitlines() if line.startswith("import time:")}
    assert "gnnmon.data.result" in imported and "gnnmon.report.report" in imported
    assert not {m for m in imported if m.split(".")[0] in ("torch", "torch_geometric")}


def test_the_checker_runs_as_a_script(capsys):
    assert importgraph.main() == 0
    assert "no cycle (annotations included), nothing up the flow, no late import" in capsys.readouterr().out


# -- the public API did not move -------------------------------------------------------------
PUBLIC = [
    "DeviceError", "GnnmonError", "Report", "ReportFileError", "Run", "RunResult", "__version__", "active_run",
    "calibrate", "collect", "collect_garbage", "cuda_timed", "current_row", "default_run", "emit_ranges",
    "exact_host_memory", "forecast", "freeze_gc", "gather", "gc_controlled", "gc_paused", "graph_shape", "iter_rows",
    "load", "memory_scope", "monitor_memory_device", "phase", "record_graph", "sample_utilisation", "timed",
    "track_compile", "watch_buckets", "watch_layers", "watch_loader",
]


def test_public_names_are_where_they_were():
    assert sorted(gnnmon.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert getattr(gnnmon, name) is not None
    from gnnmon.report import Report  # the one submodule path the README names

    assert Report is gnnmon.Report


def _typed_block(init: Path) -> str:
    """The lines of a face's ``if TYPE_CHECKING:`` block, as written."""
    source = init.read_text()
    (block,) = [node for node in ast.parse(source).body if isinstance(node, ast.If)
                and ast.unparse(node.test) == "TYPE_CHECKING"]
    return "".join(source.splitlines(keepends=True)[block.body[0].lineno - 1:block.body[-1].end_lineno])


def test_the_face_is_one_table_that_type_checkers_read_too():
    """gnnmon/__init__.py writes the public API once (``_PUBLIC``: name -> the module that defines
    it): ``__all__`` is its keys, each name is its module's, the layout test reads its modules as the
    face's arrows, and the ``TYPE_CHECKING`` block (what mypy reads) is what ``python -m
    tests.importgraph --face`` writes from it."""
    table = importgraph.face_table(PACKAGE)
    assert table == gnnmon._PUBLIC and list(gnnmon.__all__) == list(table)
    for name, module in table.items():
        assert getattr(gnnmon, name) is getattr(importlib.import_module(module), name), name
    assert {(i.source, i.target) for i in importgraph.face_imports(PACKAGE)} == {("gnnmon", m) for m in table.values()}
    assert _typed_block(PACKAGE / "__init__.py") == importgraph.face_block(PACKAGE), \
        "rewrite it: python -m tests.importgraph --face"


def test_the_face_check_catches_a_table_and_a_typed_block_that_disagree(tmp_path):
    copy = _copy_package(tmp_path)
    init = copy / "__init__.py"
    init.write_text(init.read_text().replace('    "gather": "gnnmon.record.job",\n', ""))
    assert _typed_block(init) != importgraph.face_block(copy)  # the block still types gather: caught
    assert ("gnnmon", "gnnmon.record.job") not in {(i.source, i.target) for i in importgraph.face_imports(copy)}


def _readme_api_names() -> set[str]:
    """Names in the API reference's table (``docs/api.md``, first column) and in the README's
    ``from gnnmon import`` lines."""
    readme = (PACKAGE.parent / "README.md").read_text()
    names: set[str] = set()
    table = (PACKAGE.parent / "docs" / "api.md").read_text()
    for line in table.splitlines():
        if line.startswith("| ") and not line.startswith(("| name", "| ---")):
            first_cell = line.split(" | ")[0]
            owner = ""
            for span in first_cell.split("`")[1::2]:
                name = span.lstrip("@").removeprefix("gnnmon.").split("(")[0].strip()
                if name.startswith("."):  # `Report.summary()`, `.markdown()`: same owner
                    name = owner + name
                owner = name.partition(".")[0]
                names.add(name)
    for line in readme.splitlines():
        if line.startswith("from gnnmon import "):
            names.update(n.strip() for n in line.split("import", 1)[1].split("#")[0].split(","))
    return names


def _module_names(module: str) -> set[str]:
    """The names a gnnmon module defines: from the module, or, where it needs an optional package
    this machine lacks (mlflow, wandb), from its source's top-level definitions."""
    try:
        return set(dir(importlib.import_module(module)))
    except ImportError:
        path = PACKAGE.parent.joinpath(*module.split(".")).with_suffix(".py")
        tree = ast.parse(path.read_text())
        return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))} | {
            t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}


def test_every_name_the_readme_uses_exists():
    names = _readme_api_names()
    assert {"monitor_memory_device", "Run.records", "Report.spikes", "load", "phase"} <= names
    run = gnnmon.Run()  # instance attributes (records, gc_events, ...) count too
    result = gnnmon.RunResult([])
    missing = []
    for name in sorted(names):
        if name.startswith("gnnmon "):  # a command: its subcommand's help must exist
            try:
                main([name.split()[1], "--help"])
            except SystemExit as done:
                if done.code == 0:
                    continue
            missing.append(name)
            continue
        module, _, last = name.rpartition(".")
        if "." in module:  # a submodule's name: integrations.lightning.GnnmonCallback
            if last not in _module_names(f"gnnmon.{module}"):
                missing.append(name)
            continue
        owner, _, attr = name.partition(".")
        obj = getattr(gnnmon, owner, None)
        instance = {"Run": run, "RunResult": result}.get(owner)
        if obj is None or (attr and not (hasattr(obj, attr) or (instance is not None and hasattr(instance, attr)))):
            missing.append(name)
    assert not missing, f"README names missing from gnnmon: {missing}"


def test_a_file_written_before_the_move_loads_the_same(tmp_path):
    """tests/files/run-0.1.0-flat-layout.jsonl was written by gnnmon 0.1.0 before the package was
    regrouped (commit 5110ccb; the script is in its first lines' config)."""
    path = FILES / "run-0.1.0-flat-layout.jsonl"
    raw = [json.loads(line) for line in path.read_text().splitlines()]
    run = gnnmon.load(path)
    rows = [{k: v for k, v in o.items() if k != "type"} for o in raw if o["type"] == "row"]
    assert run.records == rows and len(rows) == 12
    assert run.complete is True and run.manifest["gnnmon"] == "0.1.0"
    assert len(run.gc_events) == sum(o["type"] == "gc" for o in raw) == 6
    assert len(run.samples) == sum(o["type"] == "sample" for o in raw) == 5
    assert [m["kind"] for m in run.markers] == ["epoch", "epoch", "settings"]
    assert list(gnnmon.iter_rows(path)) == rows
    summary = gnnmon.Report(run).summary()
    assert summary["train_step"]["phase_forward_s"]["count"] == 6
    assert summary["inner"]["mem_peak_delta_bytes"]["count"] == 6
    assert {r["parent"] for r in run.records if r["label"] == "inner"} == {
        f"train_step#{i}" for i in range(6)
    }


def test_the_architecture_page_shows_the_rooms_as_the_code_has_them():
    """docs/architecture.md's drawing of the rooms is what ``python -m tests.importgraph --rooms``
    draws from the package now (a module added, moved or described anew changes it)."""
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    drawn = page.split("<!-- rooms: begin -->\n")[1].split("<!-- rooms: end -->")[0]
    assert drawn == importgraph.rooms(PACKAGE), "redraw it: python -m tests.importgraph --rooms"
    assert "wing `report/renderers/`" in drawn and "`session.py`" in drawn


def test_the_rooms_drawing_follows_a_planted_module(tmp_path):
    copy = _copy_package(tmp_path)
    (copy / "report" / "renderers" / "planted.py").write_text('"""A planted renderer."""\n')
    drawn = importgraph.rooms(copy)
    assert "wing `report/renderers/` (6): `csv_export.py`, `html.py`, `planted.py`" in drawn
    assert drawn != importgraph.rooms(PACKAGE)
