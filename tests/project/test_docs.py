"""The docs site's reference cannot fall behind the code: every public name has a generated entry,
and collect() names every option it takes. (The site itself, its links and its nav, is built
strictly by `make docs`.)"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import gnnmon
from gnnmon.record.options import Options

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"


def _rendered() -> set[str]:
    """The identifiers of the ``::: name`` directives in the reference pages."""
    return {m for page in REFERENCE.glob("*.md") for m in re.findall(r"^::: (\S+)", page.read_text(), re.M)}


def test_every_public_name_has_a_reference_entry():
    missing = sorted(n for n in gnnmon.__all__ if n != "__version__" and f"gnnmon.{n}" not in _rendered())
    assert not missing, f"public names without a '::: gnnmon.NAME' in docs/reference/: {missing}"


def test_collect_names_every_option():
    """collect(path=None, *, sinks=(), **options): its docstring is where the options show."""
    doc = gnnmon.collect.__doc__ or ""
    unnamed = sorted(f.name for f in dataclasses.fields(Options) if f"``{f.name}``" not in doc)
    assert not unnamed, f"gnnmon.collect's docstring does not name the options {unnamed}"
