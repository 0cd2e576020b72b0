"""Planted programs run in a fresh interpreter, gnnmon taken from this checkout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def one_thread() -> dict[str, str]:
    """This process's environment with one torch thread, for a script that runs torch: on a
    2-core machine that other processes keep busy, two OpenMP threads wait on each other (a GCN
    step of the Flickr stand-in took 0.7 s instead of 0.04 s)."""
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def run_script(code: str, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    """``code`` (dedented) in a fresh interpreter with ``args``; a hang past ``timeout`` seconds
    fails the test, and so does a non-zero exit when ``check``."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=timeout, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                                                       "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
    if check:
        assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def run_benchmark(name: str, *args: str, timeout: float) -> subprocess.CompletedProcess:
    """``benchmarks/<name>`` with ``args`` in a fresh interpreter with one torch thread. A run past
    ``timeout`` seconds fails the test with every thread's stack at that moment (faulthandler,
    on SIGABRT) and what the script printed, so a hang says where it hung."""
    env = {**one_thread(), "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / name), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        stacks = err.split("\nExtension modules:")[0]
        pytest.fail(f"benchmarks/{name} {' '.join(args)} ran past {timeout:g} s; its stacks then:\n"
                    f"{stacks[-6000:]}\nits output:\n{out[-2000:]}", pytrace=False)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
