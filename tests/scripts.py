"""Planted programs run in a fresh interpreter, gnnmon taken from this checkout."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_script(code: str, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    """``code`` (dedented) in a fresh interpreter with ``args``; a hang past ``timeout`` seconds
    fails the test, and so does a non-zero exit when ``check``."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=timeout, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    if check:
        assert proc.returncode == 0, proc.stderr[-4000:]
    return proc
