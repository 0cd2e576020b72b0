from __future__ import annotations

import gc
import os
import signal
import threading
import time
from pathlib import Path

# One torch thread in the suite's processes and their children: the suite runs in several
# processes on as few as two cores, where two OpenMP threads per process wait on each other (a GCN
# step took 0.7 s instead of 0.04 s). Set before torch is imported; a user's setting stands.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Ctrl-C as a terminal gives it, whatever started the suite: a shell's background job (``make test
# &``, nohup) inherits SIGINT ignored, and so does every process the tests start, where Python
# then raises no KeyboardInterrupt (and gnnmon leaves an ignored SIGINT ignored, as it should).
# A Python handler is not inherited across exec: the tests' processes start with the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import psutil
import pytest

from gnnmon.devices import clear_backends
from tests.fakes import FakeCuda, FakeMps


@pytest.fixture(autouse=True, scope="session")
def _own_cache_dir(tmp_path_factory):
    """gnnmon's per-machine cache (CodeCarbon's probed model) in a folder of the session's own."""
    os.environ["GNNMON_CACHE_DIR"] = str(tmp_path_factory.mktemp("gnnmon-cache"))


@pytest.fixture(autouse=True, scope="session")
def _outside_any_launcher():
    """The suite runs as one process, not a rank of a job, wherever it runs (under Slurm's srun,
    mpirun or torchrun too): the launchers' variables are put aside for the session."""
    from gnnmon.devices.ranks import LAUNCHERS

    names = {n for launcher in LAUNCHERS for n in launcher[1:]} | {"SLURM_STEP_NUM_TASKS", "TORCHELASTIC_RUN_ID"}
    kept = {n: os.environ.pop(n) for n in names if n in os.environ}
    yield
    os.environ.update(kept)


@pytest.fixture(autouse=True, scope="session")
def _cuda_in_use_if_asked():
    """``GNNMON_TEST_CUDA_IN_USE=1``: the suite as it runs on a GPU machine where an earlier test
    of the same worker started CUDA — the fake CUDA installed and started for the whole session
    (a test's own ``fake_cuda`` replaces it while it runs). A test that assumes the CPU fails here
    as it would there: it must pin ``device="cpu"``."""
    if os.environ.get("GNNMON_TEST_CUDA_IN_USE") != "1":
        yield None
        return
    patch = pytest.MonkeyPatch()
    clear_backends()
    fake = FakeCuda(n=1, costs={}).install(patch)
    fake.free(fake.alloc(2**20, 0))
    yield fake
    patch.undo()
    clear_backends()


@pytest.fixture(autouse=True)
def _no_leftovers():
    """Every test must leave GC enabled and unfrozen as it found it, no gnnmon thread running, no
    sampler process and no child process it started (a worker a later test would count as the run's)."""
    gc_was, frozen_was = gc.isenabled(), gc.get_freeze_count()
    before = set(live_children())
    yield
    assert gc.isenabled() == gc_was, "test left automatic GC changed"
    # more frozen than before is a leak; fewer is a test's gc.unfreeze() of what a library froze at import
    assert gc.get_freeze_count() <= frozen_was, "test left objects frozen (gc.freeze() without gc.unfreeze())"
    left = [t.name for t in threading.enumerate() if t.name.startswith("gnnmon")]
    assert not left, f"gnnmon threads left running: {left}"
    assert not sampler_processes(), "a sampler process was left running"
    deadline = time.monotonic() + 10.0  # workers told to stop take a moment to exit
    while (new := set(live_children()) - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not new, f"child processes left running: {described(new)}"


def described(pids: set[int]) -> list[str]:
    """``pid: command line`` of each process (what a leftover is, for the failure's message)."""
    out = []
    for pid in sorted(pids):
        try:
            out.append(f"{pid}: {' '.join(psutil.Process(pid).cmdline())[:200]}")
        except psutil.Error:
            out.append(f"{pid}: (gone)")
    return out


KEPT: set[int] = set()
"""Pids of processes a module- or session-scoped fixture owns (a browser's driver): they and their
descendants outlive the test that started them, and its fixture ends them."""


def live_children() -> list[int]:
    """Pids of this process's live descendants, less Python's own helpers (its resource tracker
    and forkserver live as long as the process) and the processes of :data:`KEPT`."""
    from gnnmon.devices.children import is_python_helper

    out = []
    todo = [psutil.Process()]
    while todo:
        try:
            kids = todo.pop().children()
        except psutil.NoSuchProcess:
            continue
        for child in kids:
            if child.pid in KEPT:
                continue
            try:
                if child.status() != psutil.STATUS_ZOMBIE and not is_python_helper(child) and not is_runtime(child):
                    out.append(child.pid)
            except psutil.NoSuchProcess:
                continue
            todo.append(child)
    return out


RUNTIMES = ("orted",)
"""Daemons a library's runtime starts once and keeps for the life of the process, which no test
can end: Open MPI's ``orted``, which ``MPI_Init`` starts in a process that was not launched by
``mpirun`` (Lightning's MPI environment check initialises MPI where mpi4py is installed)."""


def is_runtime(proc: psutil.Process) -> bool:
    try:
        cmdline = proc.cmdline()
    except psutil.Error:
        return False
    return bool(cmdline) and Path(cmdline[0]).name in RUNTIMES


def sampler_processes() -> list[psutil.Process]:
    """This process's children that run the timeline's sampler (zombies count as gone)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE and "gnnmon.timeline.agent" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.fixture
def fake_cuda(monkeypatch):
    """A fake ``torch.cuda`` with two devices, installed for one test."""
    clear_backends()
    fake = FakeCuda(n=2).install(monkeypatch)
    yield fake
    fake.retired = True
    clear_backends()


@pytest.fixture
def fake_mps(monkeypatch):
    """A fake ``torch.mps`` (available), installed for one test."""
    clear_backends()
    fake = FakeMps().install(monkeypatch)
    yield fake
    clear_backends()


@pytest.fixture
def no_accelerator(monkeypatch):
    """This process as on a machine with neither CUDA nor MPS: none available, none in use."""
    import torch

    clear_backends()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    yield
    monkeypatch.undo()
    clear_backends()


MiB = 2**20


@pytest.fixture
def real_cuda():
    """For a test on a real CUDA device: gnnmon's backends made afresh, and the GPU idle, before
    and after it."""
    import torch

    clear_backends()
    torch.cuda.synchronize()
    yield
    torch.cuda.synchronize()
    clear_backends()


@pytest.fixture
def mlflow_store(tmp_path):
    """A real MLflow tracking store (sqlite) in the test's folder with the experiment ``e``: its URI
    and a client (``tests/mlflow_store.py``); skipped where mlflow is not installed."""
    pytest.importorskip("mlflow")
    from tests.mlflow_store import make_store

    return make_store(tmp_path)


@pytest.fixture(scope="session")
def cycles_per_s():
    """Calibrate torch.cuda._sleep: cycles per second of GPU time, timed with two events, after
    half a second of warm-up (an idle GPU runs at a lower clock, and _sleep counts clock cycles).
    Only a nominal figure: the truth each timing test checks against is planted work timed by
    its own pair of events (``planted`` in tests/devices/test_cuda.py), immune to clock changes. CUDA tests only."""
    import torch

    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    rate = 1e9
    for cycles in (200_000_000, 50_000_000):
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        rate = cycles / (start.elapsed_time(end) / 1e3)
    return rate
