from __future__ import annotations

import gc
import threading

import pytest

from gnnmon.devices import clear_backends
from tests.fakes import FakeCuda, FakeMps


@pytest.fixture(autouse=True)
def _no_leftovers():
    """Every test must leave GC enabled and no gnnmon thread running."""
    gc_was = gc.isenabled()
    yield
    assert gc.isenabled() == gc_was, "test left automatic GC changed"
    left = [t.name for t in threading.enumerate() if t.name.startswith("gnnmon")]
    assert not left, f"gnnmon threads left running: {left}"


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
