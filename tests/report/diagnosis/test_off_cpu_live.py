"""What calls that waited off the CPU waited for, read from a live run's scheduler counters
(``collect(sched=True)``, Linux): planted sleeps are the step's own wait, never a busy machine;
planted turns on a core a spinning process shares are a busy machine, never the step's own wait.

Torch on one thread (the manifest's ``torch_threads``: the thread's CPU time is then the step's
work). Each run: 30 calls that spin 20 ms of CPU, 6 of them slowed by the plant. Where the host's
load leaves the quiet calls' own spread as wide as the plant, the plant cannot be told from it:
what can be judged is (the wrong kind is never said), then the test skips saying so."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pytest
import torch

import gnnmon
from gnnmon.devices import sched
from gnnmon.report.stats import spread
from tests.devices.test_sched import _SPINNER, _spin

pytestmark = pytest.mark.skipif(not sched.QUEUED_AVAILABLE or not hasattr(os, "sched_setaffinity"),
                                reason="run-queue time and CPU affinity are Linux's")

WORK = 0.020
"""Each call's planted CPU work, s."""
SLOW = range(20, 26)
"""The calls the plant slows (after the warm-up, among steady ones)."""
SLEEP = 0.100
"""The sleep planted in each slow call of the first run, s."""


@contextmanager
def one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def a_core_shared_on_demand() -> Iterator[Callable[[bool], None]]:
    """This thread and a spinning process pinned to one core; ``share(True)`` lets the spinner run
    (SIGCONT), ``share(False)`` stops it (SIGSTOP): the core is shared only where asked."""
    core, before = sorted(os.sched_getaffinity(0))[0], os.sched_getaffinity(0)
    child = subprocess.Popen([sys.executable, "-c", _SPINNER], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        os.sched_setaffinity(child.pid, {core})
        os.kill(child.pid, signal.SIGSTOP)
        os.sched_setaffinity(0, {core})

        def share(on: bool) -> None:
            os.kill(child.pid, signal.SIGCONT if on else signal.SIGSTOP)

        yield share
    finally:
        os.sched_setaffinity(0, before)
        child.kill()
        child.wait()


def time_findings(run: gnnmon.Run) -> dict[str, dict]:
    """The findings about the slowed calls' excess (a wait in every call, ``every_call``, is the
    level's: the load can hold every call of the run)."""
    return {f["kind"]: f for f in run.report().diagnosis() if f.get("label") == "step" and not f.get("every_call")}


def undecidable(run: gnnmon.Run, planted: float) -> str | None:
    """Why the plant cannot be told from the load, if it cannot: the quiet calls' 3 spreads reach
    it, or they waited on the run queue (other processes held the core) half of it or more at their
    median, so that the level the slow calls are held against holds such waits too."""
    quiet = [r for r in run.records if r["label"] == "step" and r["index"] >= 2 and r["index"] not in SLOW]
    noise = 3 * spread([r["wall_s"] for r in quiet])
    queued = float(np.median([r.get("thread_queued_s") or 0.0 for r in quiet]))
    load = f"the host's load (load average {os.getloadavg()[0]:.1f}) hides it"
    if noise >= planted:
        return f"the quiet calls' 3 spreads ({noise * 1e3:.0f} ms) reach the plant ({planted * 1e3:.0f} ms): {load}"
    if queued >= 0.5 * planted:
        return (f"the quiet calls waited {queued * 1e3:.0f} ms on the run queue (median), half the plant "
                f"({planted * 1e3:.0f} ms) or more: {load}")
    return None


def said_or_undecidable(run: gnnmon.Run, found: dict[str, dict], kind: str, planted: float) -> dict:
    """The finding of ``kind``; where it is not said, the test skips if the load hid the plant
    (:func:`undecidable`) and fails otherwise."""
    if kind not in found:
        why = undecidable(run, planted)
        seen = [(r["index"], round(r["wall_s"] * 1e3, 1), round(r.get("thread_cpu_s", -1) * 1e3, 1),
                 round((r.get("thread_queued_s") or 0) * 1e3, 1)) for r in run.records]
        assert why is not None, (found, run.report().diagnosis(), run.manifest["devices"].get("torch_threads"), seen)
        pytest.skip(why)
    return found[kind]


def test_planted_sleeps_are_the_steps_own_wait_never_a_busy_machine():
    @gnnmon.cuda_timed(label="step")
    def step(i: int) -> None:
        _spin(WORK)
        if i in SLOW:
            time.sleep(SLEEP)

    with one_thread(), gnnmon.collect(sched=True) as run:
        for i in range(30):
            step(i)
    found = time_findings(run)
    assert "busy machine" not in found, found  # a sleep is never the machine's
    wait = said_or_undecidable(run, found, "off-CPU wait", SLEEP)
    assert "the thread gave the CPU up" in wait["words"], wait
    # at most what the calls took beyond their planted work (each spins WORK of its thread's CPU: the
    # rest of its time is off the CPU): the slow calls' sleeps, and what the host added to any call (a
    # quiet call it held off the CPU may be named too)
    assert wait["at_stake"] <= sum(r["wall_s"] - WORK for r in run.records), wait


def test_turns_on_a_shared_core_are_a_busy_machine_never_the_steps_own_wait():
    """The slow calls' 20 ms of work on a core a spinning process shares: about 40 ms each, half of
    it on the run queue (the thread never gives the core up)."""
    @gnnmon.cuda_timed(label="step")
    def step() -> None:
        _spin(WORK)

    with one_thread(), a_core_shared_on_demand() as share, gnnmon.collect(sched=True) as run:
        for i in range(30):
            share(i in SLOW)
            step()
        share(False)
    found = time_findings(run)
    assert "the thread gave the CPU up" not in found.get("off-CPU wait", {}).get("words", ""), found
    busy = said_or_undecidable(run, found, "busy machine", WORK)
    assert "waiting for a core while the thread could run" in busy["words"], busy
    queued = next(e for e in busy["evidence"] if e["figure"] == "thread_queued_s")
    assert queued["value"] >= 0.5 * busy["at_stake"]
