from __future__ import annotations

import gc
import os
import threading

import psutil
import pytest

from gnnmon.devices import clear_backends
from tests.fakes import FakeCuda, FakeMps


@pytest.fixture(autouse=True, scope="session")
def _own_cache_dir(tmp_path_factory):
    """gnnmon's per-machine cache (CodeCarbon's probed model) in a folder of the session's own."""
    os.environ["GNNMON_CACHE_DIR"] = str(tmp_path_factory.mktemp("gnnmon-cache"))


@pytest.fixture(autouse=True)
def _no_leftovers():
    """Every test must leave GC enabled, no gnnmon thread running and no sampler process."""
    gc_was = gc.isenabled()
    yield
    assert gc.isenabled() == gc_was, "test left automatic GC changed"
    left = [t.name for t in threading.enumerate() if t.name.startswith("gnnmon")]
    assert not left, f"gnnmon threads left running: {left}"
    assert not sampler_processes(), "a sampler process was left running"


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
    clear_backends()


@pytest.fixture
def fake_mps(monkeypatch):
    """A fake ``torch.mps`` (available), installed for one test."""
    clear_backends()
    fake = FakeMps().install(monkeypatch)
    yield fake
    clear_backends()


MiB = 2**20
