"""The docs site's reference cannot fall behind the code: every public name has a generated entry
that shows its signature, and collect() names every option it takes. (The site itself, its links
and its nav, is built strictly by `make docs`.)"""

from __future__ import annotations

import dataclasses
import html
import importlib
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import gnnmon
from gnnmon.record.options import Options

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"


def _rendered() -> set[str]:
    """The identifiers of the ``::: name`` directives in the reference pages."""
    return {m for page in REFERENCE.glob("*.md") for m in re.findall(r"^::: (\S+)", page.read_text(), re.M)}


def _resolve(path: str) -> Any:
    """The object a ``::: path`` directive documents (None where it names none)."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name, None)
        return found
    return None


def _entries() -> dict[str, str]:
    """Public name -> the directive that documents it: the one naming the same object (a
    function named like its subpackage, ``gnnmon.forecast``, is documented at its module's path)."""
    by_object = {id(_resolve(path)): path for path in sorted(_rendered())}
    public = {n: getattr(gnnmon, n) for n in gnnmon.__all__ if n != "__version__"}
    return {n: by_object[id(obj)] if id(obj) in by_object else "" for n, obj in public.items()}


def test_every_public_name_has_a_reference_entry():
    missing = sorted(n for n, path in _entries().items() if not path)
    assert not missing, f"public names without a '::: ...' entry documenting them in docs/reference/: {missing}"


def test_every_member_a_reference_page_lists_exists():
    """A ``members: [...]`` list under a ``::: module`` directive names what the module holds: a
    name the code dropped would silently vanish from the page (mkdocstrings skips it)."""
    stale = []
    for page in sorted(REFERENCE.glob("*.md")):
        for path, members in re.findall(r"^::: (\S+)\n(?:[ \t]+\S.*\n)*?[ \t]+members: \[([^\]]*)\]",
                                        page.read_text(), re.M):
            target = _resolve(path)
            stale += [f"{page.name}: {path}.{m}" for m in map(str.strip, members.split(","))
                      if m and not hasattr(target, m)]
    assert not stale, f"reference pages list members the code does not have: {stale}"


@pytest.mark.slow
def test_every_public_function_and_class_shows_its_signature_on_the_built_site(tmp_path):
    """Built as ``make docs`` builds it: each public function's and class's entry has its
    signature block, whose name is the object's own, and no reference is left unresolved."""
    if shutil.which("mkdocs", path=os.path.dirname(sys.executable)) is None:
        pytest.skip("mkdocs is not installed here (make docs installs it)")
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)], cwd=ROOT,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1"), capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    pages = {page: page.read_text() for page in (site / "reference").rglob("index.html")}
    unsigned = []
    for name, path in _entries().items():
        obj = getattr(gnnmon, name)
        if not (inspect.isfunction(obj) or inspect.isclass(obj) or callable(obj) and hasattr(obj, "__signature__")):
            continue
        if inspect.isclass(obj) and issubclass(obj, BaseException):  # an exception's is Exception's own
            continue
        text = next((t for t in pages.values() if f'id="{path}"' in t), "")
        entry = text[text.find(f'id="{path}"'):]
        heading_end = entry.find("</h")
        following = entry.find('class="doc doc-heading"', heading_end)  # the next entry's heading
        entry = entry[:following if following > 0 else None]
        signature = re.search(r'<div class="doc-signature highlight">(.*?)</div>', entry, re.S)
        own = getattr(obj, "__name__", name)
        if signature is None or f">{own}<" not in signature.group(1):
            unsigned.append(name)
    assert not unsigned, f"public names whose reference entry shows no signature: {unsigned}"
    unresolved = sorted({m for page in site.rglob("*.html") for m in re.findall(r"\[<code>([^<]+)</code>\]\[\]",
                                                                              html.unescape(page.read_text()))})
    assert not unresolved, f"cross-references left unresolved on the site: {unresolved}"


def test_collect_names_every_option():
    """collect(path=None, *, sinks=(), **options): its docstring is where the options show."""
    doc = gnnmon.collect.__doc__ or ""
    unnamed = sorted(f.name for f in dataclasses.fields(Options) if f"``{f.name}``" not in doc)
    assert not unnamed, f"gnnmon.collect's docstring does not name the options {unnamed}"


def test_the_integrations_page_names_every_figure_the_loggers_and_tensorboard_get():
    """The Lightning loggers and the TensorBoard export send every step figure
    (gnnmon/figures.py STEP_FIGURES): each paragraph that lists them names each one."""
    from gnnmon.figures import STEP_FIGURES

    text = (ROOT / "docs" / "integrations.md").read_text()
    for marker in ("The figures go to the Trainer's loggers", "writes event files"):
        paragraph = " ".join(text[text.index(marker):].split("\n\n")[0].split())
        missing = [name for name, _ in STEP_FIGURES.values()
                   if name not in ("forward_ms", "backward_ms", "optimizer_ms")
                   and not re.search(rf"[`/]{name}`", paragraph)]
        assert not missing, f"docs/integrations.md ({marker!r}) does not name {missing}"


WHEEL_EXAMPLE = re.compile(r'<!-- example: runs from the wheel; prints "([^"]+)" -->\n```python\n(.*?)```', re.S)


@pytest.mark.slow
def test_the_docs_examples_marked_to_run_from_the_wheel_run_as_printed(tmp_path):
    """Each example the docs mark (``make build-check`` runs them from the wheel in a fresh
    environment; here, from an empty folder with this checkout's gnnmon): it prints what the mark
    says, and the neighbour-loader example's rows are the loader's batches, three epochs of them."""
    examples = [(page, expect, code) for page in sorted((ROOT / "docs").rglob("*.md"))
                for expect, code in WHEEL_EXAMPLE.findall(page.read_text())]
    assert any(page.name == "integrations.md" for page, _, _ in examples)
    for i, (page, expect, code) in enumerate(examples):
        script = tmp_path / f"example_{i}.py"
        script.write_text(code)
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)), check=False)
        assert done.returncode == 0 and expect in done.stdout, (page.name, done.stdout, done.stderr[-2000:])
    rows = gnnmon.load(tmp_path / "runs" / "sage.jsonl").records
    assert [r["epoch"] for r in rows] == [0] * 8 + [1] * 8 + [2] * 8
    assert all(r["num_nodes"] >= 250 and r["batch_size"] == 250 and r["data_sample_s"] > 0 for r in rows)


def test_the_home_page_names_every_command_the_cli_has():
    done = subprocess.run([sys.executable, "-m", "gnnmon", "--help"], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, COLUMNS="80", PYTHONPATH=str(ROOT)), timeout=120, check=True)
    commands = re.findall(r"^ {4}([a-z][a-z-]*) ", done.stdout.split("COMMAND", 2)[-1], flags=re.M)
    line = next(t for t in (ROOT / "docs" / "index.md").read_text().splitlines() if t.startswith("- [Command line]"))
    assert commands and not [c for c in commands if f"`{c}`" not in line and f"`gnnmon {c}`" not in line]
