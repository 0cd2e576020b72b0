"""SIGTERM mid-run (how Slurm, Kubernetes and ``timeout`` end a job), with no handler and with
the user's own: every row returned before it is on disk, though the writer's clock is ten seconds
away, the end line names the signal, the process ends as SIGTERM would have ended it, and the
report says how the run ended on its first line. A file SIGKILL cut says so first too."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

import gnnmon
from gnnmon.record.interrupts import held_section
from gnnmon.report.markdown import DID_NOT_END
from tests.scripts import run_script

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGTERM") or sys.platform == "win32", reason="POSIX signals")

LOOP = """
    import os, signal, sys, gnnmon
    {handler}

    @gnnmon.monitor_memory_device
    @gnnmon.cuda_timed
    @gnnmon.gc_controlled
    def step(i):
        {inside}
        return i

    with gnnmon.collect(sys.argv[1], flush_interval=10) as run:  # a writer that would not flush by itself
        for i in range(100):
            step(i)
            {after}
            if STOP:
                break
    print("ended normally", flush=True)
"""

TERM = "os.kill(os.getpid(), signal.SIGTERM)"


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def rows_and_end(path: Path) -> tuple[list[dict], dict | None]:
    lines = lines_of(path)
    ends = [o for o in lines if o["type"] == "end"]
    return [o for o in lines if o["type"] == "row"], (ends[0] if ends else None)


@pytest.mark.parametrize("where, returned", [("between calls", 58), ("inside a call", 57)])
def test_sigterm_with_no_handler_writes_every_returned_row_and_ends_the_process_by_the_signal(tmp_path, where,
                                                                                              returned):
    path = tmp_path / "run.jsonl"
    code = LOOP.format(handler="STOP = False",
                       inside=f"if i == 57: {TERM}" if where == "inside a call" else "pass",
                       after=f"if i == 57: {TERM}" if where == "between calls" else "pass")
    proc = run_script(code, str(path), check=False)
    assert proc.returncode == -signal.SIGTERM, proc.stderr[-2000:]  # ended as SIGTERM ends a process
    assert "ended normally" not in proc.stdout
    rows, end = rows_and_end(path)
    assert [r["index"] for r in rows] == list(range(returned))  # the call it landed in never returned
    assert end is not None and end["ended"] == "signal SIGTERM" and end["signal"] == "SIGTERM"
    assert end["rows"] == returned
    first = gnnmon.Report.load(path).markdown().splitlines()[0]
    assert first.startswith("**Ended by SIGTERM**")


@pytest.mark.parametrize("handler, code, ended", [
    ("STOP = False\ndef mine(signum, frame):\n    global STOP\n    STOP = True\nsignal.signal(signal.SIGTERM, mine)",
     0, "stop"),
    ("STOP = False\nsignal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(7))", 7, "exception SystemExit"),
])
def test_sigterm_with_the_users_handler_runs_it_and_keeps_recording(tmp_path, handler, code, ended):
    """The user's handler decides: a graceful stop at the loop's next turn (every row, the ones
    after the signal too), or ``sys.exit`` (the run ends with it); the end line names the signal."""
    path = tmp_path / "run.jsonl"
    proc = run_script(LOOP.format(handler=handler.replace("\n", "\n    "), inside="pass", after=f"if i == 57: {TERM}"),
                      str(path), check=False)
    assert proc.returncode == code, proc.stderr[-2000:]
    rows, end = rows_and_end(path)
    assert [r["index"] for r in rows] == list(range(58))
    assert end is not None and end["ended"] == ended and end["signal"] == "SIGTERM"
    first = gnnmon.Report.load(path).markdown().splitlines()[0]
    assert first.startswith("A SIGTERM came during this run; your handler took it")


def test_a_file_sigkill_cut_says_first_that_it_did_not_end(tmp_path):
    path = tmp_path / "run.jsonl"
    code = LOOP.format(handler="STOP = False", inside="pass",
                       after="if i == 57: run.flush(); os.kill(os.getpid(), signal.SIGKILL)")
    proc = run_script(code, str(path), check=False)
    assert proc.returncode == -signal.SIGKILL
    rows, end = rows_and_end(path)
    assert end is None and len(rows) == 58
    result = gnnmon.load(path)
    assert result.complete is False
    assert gnnmon.Report(result).markdown().splitlines()[0] == DID_NOT_END
    cli = run_script("import sys; from gnnmon.cli import main; sys.exit(main(['report', sys.argv[1]]))", str(path))
    assert cli.stdout.splitlines()[0] == DID_NOT_END


def test_the_handler_is_there_only_while_a_run_is_active_and_yours_comes_back():
    before = signal.getsignal(signal.SIGTERM)
    mine_calls = []

    def mine(signum, frame):
        mine_calls.append(signum)

    signal.signal(signal.SIGTERM, mine)
    try:
        with gnnmon.collect():
            assert signal.getsignal(signal.SIGTERM) is not mine  # gnnmon's, which chains to yours
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, before)
    assert mine_calls == []


def test_a_sigterm_that_lands_in_gnnmons_own_bookkeeping_waits_for_it():
    """Delivered inside a held section (gnnmon changing its state), the work waits until the
    section ends; the user's handler then runs, once."""
    seen: list[bool] = []
    before = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(True))
    try:
        with gnnmon.collect() as run:
            with held_section():
                os.kill(os.getpid(), signal.SIGTERM)
                total = sum(range(1000))  # bytecodes for the handler to run between
                assert seen == [] and total
            assert seen == [True]
        assert run.result().end["signal"] == "SIGTERM"
    finally:
        signal.signal(signal.SIGTERM, before)


@pytest.mark.parametrize("raised, status, first", [
    ("KeyboardInterrupt", -signal.SIGINT,
     "**Ended by Ctrl-C** (KeyboardInterrupt): every row returned before it is here"),
    ("ValueError", 1, "**Ended by ValueError**, raised through the run: every row returned before it is here"),
])
def test_ctrl_c_or_an_exception_through_the_run_leads_the_report(tmp_path, raised, status, first):
    """Ctrl-C (KeyboardInterrupt, here raised in the step as the interpreter raises it) ends the run
    as SIGTERM does: the report's first line says so, every row returned before it is there and the
    call it came in is recorded with its error (Python ends a process an uncaught KeyboardInterrupt
    ended as SIGINT would)."""
    path = tmp_path / "run.jsonl"
    code = LOOP.format(handler="STOP = False", inside=f"if i == 41: raise {raised}", after="pass")
    proc = run_script(code, str(path), check=False)
    assert proc.returncode == status and raised in proc.stderr, proc.stderr[-2000:]
    rows, end = rows_and_end(path)
    assert [r["index"] for r in rows] == list(range(42)) and end is not None and end["ended"] == f"exception {raised}"
    # the call it came in: recorded, its error named
    assert [r["error"] for r in gnnmon.load(path).records if r["error"]] == [raised]
    assert gnnmon.Report.load(path).markdown().splitlines()[0].startswith(first)
