"""SIGTERM while a run is active: how Slurm, Kubernetes, ``timeout`` and ``docker stop`` end a job.

Python's default for SIGTERM ends the process at once, with no ``atexit`` handler and no
``finally``: a run's rows returned since the writer's last drain, and its end line, were lost. While
a ``collect`` run is active on the main thread gnnmon puts its own handler in the place of the
one there (only Python's default or a Python function of yours; one set in C, or SIG_IGN, stays):

* **no handler of yours** (SIGTERM's default): every active run writes every row returned before
  it and an end line that says ``"ended": "signal SIGTERM"``; then SIGTERM's default is put back
  and the signal raised again, so the process ends as SIGTERM ends it (killed by signal 15: what a
  scheduler waiting on it sees);
* **a handler of yours**: every active run writes the rows returned before it (the run goes on,
  recording), and its end line will say ``"signal": "SIGTERM"``; then your handler runs, as it
  would have, and decides what SIGTERM does (a graceful stop at the epoch's end, ``sys.exit``).

If it lands while gnnmon's own bookkeeping runs (a held section, :mod:`gnnmon.record.interrupts`)
the runs end when that section does, microseconds later, as a Ctrl-C waits. When the last run
stops, the handler that was there is put back (unless you set another meanwhile). SIGKILL cannot
be caught: a file it cuts has no end line, and ``gnnmon report`` says so first.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import Any

from gnnmon.record import state
from gnnmon.record.interrupts import HELD, MAIN_THREAD, holding_or_releasing

_WAS: list[Any] = []
"""The handler in place before gnnmon's (one item while gnnmon's is installed)."""


def _follow() -> None:
    """Install gnnmon's handler while a run is active; put the previous one back after."""
    if threading.get_ident() != MAIN_THREAD:
        return
    try:
        if state.RUNS and not _WAS:
            current = signal.getsignal(signal.SIGTERM)
            if current is signal.SIG_DFL or (callable(current) and current is not _on_term):
                signal.signal(signal.SIGTERM, _on_term)
                _WAS.append(current)
        elif not state.RUNS and _WAS:
            previous = _WAS.pop()
            if signal.getsignal(signal.SIGTERM) is _on_term:  # else the user set another since
                signal.signal(signal.SIGTERM, previous)
    except (ValueError, OSError):  # not the main interpreter, or no signals here: SIGTERM as before
        return


def _on_term(signum: int, frame: FrameType | None) -> None:
    previous = _WAS[0] if _WAS else signal.SIG_DFL
    for run in list(state.RUNS):
        run.signal = signal.Signals(signum).name
    if holding_or_releasing(frame):
        HELD.later = lambda: _act(signum, frame, previous)  # run by the section's release
        return
    _act(signum, frame, previous)


def _act(signum: int, frame: FrameType | None, previous: Any) -> None:
    runs = list(reversed(state.RUNS))
    if callable(previous):
        for run in runs:  # the user's handler decides; what was returned is on disk first
            run.flush()
        previous(signum, frame)
        return
    for run in runs:
        try:
            run.stop(f"signal {signal.Signals(signum).name}")
        except Exception:  # noqa: BLE001 - the other runs still end, and the process ends as asked
            continue
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)  # the default action now: the process ends by the signal


state.ON_RUNS.append(_follow)
