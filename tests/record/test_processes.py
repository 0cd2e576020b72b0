"""Processes: a run started in a child process and never stopped loses none of its rows when the
child ends the way ``multiprocessing`` ends it (its function returns, or raises ``SystemExit``, and
the child leaves with ``os._exit``, which runs no ``atexit`` handler)."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import textwrap

import pytest

from tests.scripts import ROOT

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "win32", reason="fork")

CHILD = """
    import multiprocessing, sys
    import gnnmon

    def child(path, how):
        @gnnmon.cuda_timed(label="step", device="cpu")
        def step(i):
            return i

        gnnmon.collect(path).start()  # never stopped: the child's end must stop it
        for i in range(50):
            step(i)
        if how == "exit":
            sys.exit(0)
        if how == "raise":
            raise ValueError("the child's step failed")

    if __name__ == "__main__":
        ctx = multiprocessing.get_context(sys.argv[3])
        p = ctx.Process(target=child, args=(sys.argv[1], sys.argv[2]))
        p.start()
        p.join()
        print(p.exitcode)
"""


@pytest.mark.parametrize("how", ["return", "exit", "raise"])
@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_a_run_in_a_multiprocessing_child_keeps_every_row_however_the_child_ends(tmp_path, how, method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} here")
    path = tmp_path / f"child_{method}_{how}.jsonl"
    script = tmp_path / "parent.py"  # a file: spawn and forkserver children import it
    script.write_text(textwrap.dedent(CHILD))
    proc = subprocess.run([sys.executable, str(script), str(path), how, method], capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0 and proc.stdout.split()[-1] == ("1" if how == "raise" else "0"), proc.stderr[-3000:]
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [o["index"] for o in lines if o["type"] == "row"] == list(range(50))
    (end,) = [o for o in lines if o["type"] == "end"]
    assert end["rows"] == 50 and end["ended"] in ("exit", "uncaught ValueError")
