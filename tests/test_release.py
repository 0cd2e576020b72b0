"""What a user installs: developer tooling stays out of the package's extras."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
