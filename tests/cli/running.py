"""How the tests of ``gnnmon run`` run a script: ``python -m gnnmon run ...`` in a fresh interpreter
in a test's folder, and its rows read back."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import gnnmon

ROOT = Path(__file__).resolve().parents[2]


def gnnmon_run(tmp_path: Path, *args: str, script: str | None = None, name: str = "train.py",
               timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m gnnmon run ARGS`` in ``tmp_path`` (``script`` written there as ``name`` first);
    its output decoded as written (a ``\\r`` stays one)."""
    if script is not None:
        (tmp_path / name).write_text(textwrap.dedent(script))
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "gnnmon", "run", *args], cwd=tmp_path, capture_output=True,
                          timeout=timeout, env=env)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


def rows_of(path: Path) -> list[dict[str, Any]]:
    return gnnmon.load(path).records


def counts(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["label"], r.get("batches"), r["backward_calls"], r["updates"], r["step_rule"]) for r in rows]
