"""A package installed only as far as Python's metadata sees it: a module and its ``.dist-info``
with one entry point, in a folder to put on ``PYTHONPATH`` (how a test plants a package's export,
probe or sink without pip)."""

from __future__ import annotations

from pathlib import Path


def plugin_site(folder: Path, module: str, source: str, group: str, entry: str) -> Path:
    """``folder`` holding ``module.py`` (``source``) and a distribution of that name declaring
    ``entry`` (``name = module:attribute``) in the entry-point ``group``; returns ``folder``."""
    info = folder / f"{module}-1.0.dist-info"
    info.mkdir(parents=True)
    (folder / f"{module}.py").write_text(source)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{entry}\n")
    return folder
