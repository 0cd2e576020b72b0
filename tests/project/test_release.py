"""What a user installs: the version is set once (gnnmon/_version.py), the changelog's newest release is
that version, and developer tooling stays out of the package's extras."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import pytest

import gnnmon

ROOT = Path(__file__).resolve().parents[2]
HEADING = re.compile(r"^## \[(?P<version>[^\]]+)\](?: - (?P<date>\d{4}-\d{2}-\d{2}))?\s*$", re.M)


def _sections() -> list[tuple[str, str | None]]:
    return [(m["version"], m["date"]) for m in HEADING.finditer((ROOT / "CHANGELOG.md").read_text())]


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def test_the_changelog_s_newest_release_is_the_package_version():
    sections = _sections()
    assert sections and sections[0] == ("Unreleased", None), "the changelog starts with '## [Unreleased]'"
    released = sections[1:]
    assert released, "no released version in CHANGELOG.md"
    assert released[0][0] == gnnmon.__version__, (
        f"CHANGELOG.md's newest release is {released[0][0]}, gnnmon/_version.py says {gnnmon.__version__}")


def test_released_versions_are_dated_and_in_order():
    released = _sections()[1:]
    for version, date in released:
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"{version}: not MAJOR.MINOR.PATCH"
        assert date is not None, f"## [{version}] has no date (## [{version}] - YYYY-MM-DD)"
        datetime.date.fromisoformat(date)
    assert [_key(v) for v, _ in released] == sorted((_key(v) for v, _ in released), reverse=True)
    assert [d for _, d in released] == sorted((d for _, d in released), reverse=True)


def test_the_version_is_single_sourced():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "gnnmon._version.__version__"}
    assert re.fullmatch(r'__version__ = "\d+\.\d+\.\d+"\n?', (ROOT / "gnnmon" / "_version.py").read_text())



DEV_TOOLS = {"pytest", "hypothesis", "selenium", "ruff", "mypy", "mkdocs", "mkdocs-material", "mkdocstrings",
             "mkdocstrings-python", "build", "twine"}


def test_developer_tooling_is_in_dependency_groups_not_extras():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    groups = project["dependency-groups"]

    def names(specs: list) -> set[str]:
        return {re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0].lower() for spec in specs if isinstance(spec, str)}

    leaked = {extra: sorted(names(specs) & DEV_TOOLS) for extra, specs in extras.items() if names(specs) & DEV_TOOLS}
    assert not leaked, f"developer tooling in user-facing extras: {leaked}"
    assert {"test", "lint", "docs", "dist"} <= set(groups)
    assert {"pytest", "hypothesis"} <= names(groups["test"]) and {"ruff", "mypy"} <= names(groups["lint"])
    assert "mkdocs" in names(groups["docs"]) and {"build", "twine"} <= names(groups["dist"])
