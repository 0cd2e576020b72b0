"""The report's modules that moved into its wings still import by their old names, with a
DeprecationWarning naming where they are now, and give the very objects the new modules hold."""

from __future__ import annotations

import importlib
import sys

import pytest

import gnnmon.report
from gnnmon.report.compare import lines
from gnnmon.report.compare.comparison import Comparison
from gnnmon.report.diagnosis import findings
from gnnmon.report.memory import model
from gnnmon.report.renderers import trace


@pytest.mark.parametrize(("old", "new", "name"), [
    ("gnnmon.report.memory_model", model, "MemoryModel"),
    ("gnnmon.report.comparison", sys.modules["gnnmon.report.compare.comparison"], "Comparison"),
    ("gnnmon.report.trace", trace, "chrome_trace"),
])
def test_an_old_module_name_imports_with_a_warning_naming_the_new(old: str, new: object, name: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=rf"{old} moved to {new.__name__}"):  # type: ignore[attr-defined]
        module = importlib.import_module(old)
    assert getattr(module, name) is getattr(new, name)
    assert name in dir(module)
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018 - a missing name is still an AttributeError


def test_a_from_import_of_an_old_module_gives_the_new_objects() -> None:
    sys.modules.pop("gnnmon.report.memory_model", None)
    with pytest.warns(DeprecationWarning):
        from gnnmon.report.memory_model import MemoryModel  # type: ignore[import-not-found]
    assert MemoryModel is model.MemoryModel
    assert gnnmon.report.Comparison is Comparison


@pytest.mark.parametrize(("wing", "module", "name"), [
    ("gnnmon.report.compare", lines, "compare_sides"),
    ("gnnmon.report.diagnosis", findings, "diagnose"),
])
def test_a_wing_with_an_old_modules_name_answers_its_old_functions(wing: str, module: object, name: str) -> None:
    with pytest.warns(DeprecationWarning, match=rf"{wing}\.{name} moved to {module.__name__}\.{name}"):  # type: ignore[attr-defined]
        value = getattr(importlib.import_module(wing), name)
    assert value is getattr(module, name)
    assert callable(value)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        importlib.import_module(wing).nothing_here  # noqa: B018 - the read is the test


def test_a_name_that_never_existed_is_not_found() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("gnnmon.report.never_was")


def test_a_loaded_results_report_method_still_works_with_a_warning(tmp_path) -> None:
    """``gnnmon.load(path).report()`` (deprecated: a plain result knows no report) gives the same
    report as ``gnnmon.Report.load(path)``."""
    import gnnmon

    @gnnmon.cuda_timed(label="step", device="cpu")
    def step() -> None:
        pass

    path = tmp_path / "r.jsonl"
    with gnnmon.collect(path, sample=None):
        for _ in range(3):
            step()
    with pytest.warns(DeprecationWarning, match=r"use gnnmon\.Report\(result\)"):
        old = gnnmon.load(path).report()
    new = gnnmon.Report.load(path)
    assert isinstance(old, gnnmon.Report) and isinstance(new, gnnmon.Report)
    assert [r["index"] for r in old.records] == [r["index"] for r in new.records] == [0, 1, 2]


def test_the_old_names_warning_names_the_importing_line() -> None:
    sys.modules.pop("gnnmon.report.extrapolation", None)
    with pytest.warns(DeprecationWarning) as caught:
        import gnnmon.report.extrapolation  # noqa: F401  # type: ignore[import-not-found]
    assert caught[0].filename == __file__  # this file: a filter by module matches it, a script sees it
