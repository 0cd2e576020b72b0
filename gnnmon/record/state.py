"""What is open right now: the active runs, the row being filled and the phase being timed.

The one place this shared state lives, so that the row, the run, the GC log and the measurements
all read it without importing one another. Plain holders and the functions that change them: no
gnnmon import, not even for annotations (the runs and rows are typed by what is read of them).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from contextvars import ContextVar
from typing import Any

CURRENT_ROW: ContextVar[Any] = ContextVar("gnnmon_current_row", default=None)
"""The row being filled in this thread / task (a decorated call inside it gets a child row)."""

OPEN_PHASE: ContextVar[Any] = ContextVar("gnnmon_open_phase", default=None)
"""The innermost open ``phase`` object in this thread / task (its ``name`` is what GC events
name; it knows the phase it was entered in, so that phases closed out of order hand the current
phase back to one still open)."""

UNFINISHED: set[Any] = set()
"""Rows of decorated calls on the main thread that are not finished yet (closed, their GC pause
ended): one left here while no decorated call runs was interrupted by an exception inside gnnmon,
and the next top-level row finishes it (``Row.heal``)."""

RUNS: list[Any] = []
"""Active ``collect`` runs, innermost last (changed under :data:`LOCK` only)."""

DEFAULT: list[Any] = []
"""The default run once made (at most one item): where rows go when no ``collect`` is active."""

LOCK = threading.RLock()

ON_RUNS: list[Any] = []
"""Functions called, without arguments, after a run joins or leaves :data:`RUNS` (the SIGTERM
watch, :mod:`gnnmon.record.sigterm`, follows whether any run is active)."""

_fork_hook: list[bool] = []
_exit_hook: list[bool] = []


def open_run() -> Any:
    """The innermost active ``collect`` run, else the default run if one was made, else None."""
    runs = RUNS
    if runs:
        return runs[-1]
    return DEFAULT[0] if DEFAULT else None


def push(run: Any) -> None:
    """Make ``run`` the innermost active run."""
    _watch_forks()
    _watch_exit()
    with LOCK:
        RUNS.append(run)
    for hook in ON_RUNS:
        hook()


def pop(run: Any) -> None:
    """``run`` is no longer active."""
    with LOCK:
        if run in RUNS:
            RUNS.remove(run)
    for hook in ON_RUNS:
        hook()


def _in_forked_child() -> None:
    """After a fork, in the child: every run it inherited forgets what belongs to the parent."""
    for run in [*RUNS, *DEFAULT]:
        run.after_fork_in_child()


def _forked_parent() -> None:
    """After a fork, in the parent: each active run counts it (its end line says how many)."""
    for run in RUNS:
        run.children_forked += 1


def _stop_at_exit() -> None:
    """At interpreter exit (the script's end, ``sys.exit``, an uncaught exception, a notebook kernel
    shutting down, a ``multiprocessing`` child's end): every run still active is stopped, innermost
    first, so every row closed before is written with the end line. (Registered after torch's own
    exit handlers, so it runs first.)"""
    for run in reversed(list(RUNS)):
        try:
            run.stop_at_exit()
        except Exception as exc:  # noqa: BLE001 - the other runs still end
            print(f"gnnmon could not end {run!r} at exit: {exc!r}", file=sys.stderr)


def _watch_exit() -> None:
    if not _exit_hook:
        atexit.register(_stop_at_exit)
        _exit_hook.append(True)
    _watch_child_exit()


_child_hook: list[int] = []  # the pid whose multiprocessing exit runs _stop_at_exit


def _watch_child_exit() -> None:
    """In a ``multiprocessing`` child (fork or forkserver), which ends with ``os._exit`` (no
    ``atexit`` handler runs) once its function returns or raises: stop the runs with the child's
    own exit functions, which run before that (``multiprocessing.util._exit_function``)."""
    mp = sys.modules.get("multiprocessing")
    if mp is None or os.getpid() in _child_hook or mp.parent_process() is None:
        return
    from multiprocessing import util

    util.Finalize(None, _stop_at_exit, exitpriority=100)  # before the child's other finalizers
    _child_hook.append(os.getpid())


def _watch_forks() -> None:
    if not _fork_hook and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_in_forked_child, after_in_parent=_forked_parent)
        _fork_hook.append(True)

PASSES = [0]
"""Passes of watched loaders open now (``gnnmon.watch_loader``): while any is, rows take batches."""

PROBES_STAMP = [0]
"""Bumped by :func:`probes_changed`: each run chooses its probes again at its next row."""


def probes_changed() -> None:
    """Something a probe's chooser reads has changed (profiler ranges switched, a watched loader's
    pass begun or ended): the runs' choices made before are made again (:mod:`gnnmon.record.probes`)."""
    PROBES_STAMP[0] += 1


NEXT_BATCH: list[dict[str, Any]] = []
"""The figures of the batch a watched loader handed out last (``gnnmon.watch_loader``): the next
top-level row opened takes them (its step consumes that batch). Empty when none waits."""
