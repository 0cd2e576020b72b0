"""Every device kind in the registry keeps the same contract, checked by the same planted truths:
the CPU for real, CUDA and MPS against their faithful fakes (tests/fakes.py), and a kind that a
test registers itself (an XPU stand-in) without touching gnnmon."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

import gnnmon
from gnnmon import cuda_timed, monitor_memory_device
from gnnmon.devices import Backend, clear_backends, get_backend
from gnnmon.devices.base import MemoryWindow
from gnnmon.devices.host import HOST
from gnnmon.devices.registry import BACKENDS, BackendKind, register_backend, unregister_backend
from gnnmon.devices.resolve import BY_NOTHING, infer_device, parse_device
from gnnmon.errors import DeviceError
from gnnmon.record.manifest import build_manifest
from tests.fakes import FakeCuda, FakeMps

MiB = 2**20
PLANTED_BYTES = 64 * MiB
PLANTED_S = 0.05


class FakeXpu:
    """A device kind gnnmon does not ship: memory is a counter with a resettable peak, work is
    synchronous (no events). What a third-party backend module would hold."""

    name = "xpu"
    memory_is_host = False

    def __init__(self, device: torch.device) -> None:
        self.device = torch.device("xpu", device.index or 0)
        self.label = str(self.device)
        self.allocated = self.peak = 0
        self.in_use = False

    def alloc(self, nbytes: int) -> None:
        self.in_use = True
        self.allocated += nbytes
        self.peak = max(self.peak, self.allocated)

    def free(self, nbytes: int) -> None:
        self.allocated -= nbytes

    def synchronize(self) -> None:
        """Synchronous: nothing queued."""

    def record_event(self) -> None:
        return None

    def release_event(self, event: Any) -> None:
        """No events."""

    def open_window(self, sample_interval: float) -> Any:
        self.peak = self.allocated
        return self.allocated

    def close_window(self, start: Any) -> MemoryWindow:
        return MemoryWindow(start, self.allocated, self.peak, "measured:fake-xpu")


@dataclasses.dataclass
class Planted:
    """How a test plants memory and device work on one kind, and how it marks the kind in use."""

    type: str
    alloc_and_free: Callable[[int], None]
    work: Callable[[float], None]
    use: Callable[[], None]
    exact_memory: bool


@pytest.fixture(params=["cpu", "cuda", "mps", "xpu"])
def planted(request: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Planted]:
    clear_backends()
    kind = request.param
    for other in [k for k in BACKENDS.values() if k.accelerator and k.type != kind]:
        # no other accelerator in use, whatever the machine (a real GPU that earlier tests started)
        monkeypatch.setitem(BACKENDS, other.type, dataclasses.replace(other, in_use=lambda: None))
    if kind == "cuda":
        fake = FakeCuda(n=2).install(monkeypatch)

        def cuda_alloc(n: int) -> None:
            fake.free(fake.alloc(n, 0))

        yield Planted("cuda", cuda_alloc, fake.launch, lambda: fake.free(fake.alloc(MiB, 0)), True)
    elif kind == "mps":
        mps = FakeMps().install(monkeypatch)
        held: list[int] = []

        def mps_alloc(n: int) -> None:
            h = mps.alloc(n)
            time.sleep(0.03)  # MPS has no peak counter: held long enough to be sampled
            mps.free(h)

        yield Planted("mps", mps_alloc, mps.launch, lambda: held.append(mps.alloc(MiB)), False)
    elif kind == "xpu":
        made: list[FakeXpu] = []

        def make(device: torch.device) -> FakeXpu:
            made.append(FakeXpu(device))
            return made[-1]

        register_backend(BackendKind(
            "xpu", make,
            lambda: torch.device("xpu", 0) if made and made[0].in_use else None,
            manifest=lambda: {"xpu_available": True}))
        device = get_backend(torch.device("xpu"))
        assert isinstance(device, FakeXpu)

        def xpu_alloc(n: int) -> None:
            device.alloc(n)
            device.free(n)

        try:
            yield Planted("xpu", xpu_alloc, time.sleep, lambda: device.alloc(MiB), True)
        finally:
            unregister_backend("xpu")
    else:
        def cpu_alloc(n: int) -> None:
            t = torch.empty(n, dtype=torch.uint8)
            t.fill_(1)
            time.sleep(0.03)  # sampled where no exact peak exists
            del t

        yield Planted("cpu", cpu_alloc, time.sleep, lambda: None, HOST.exact)
    clear_backends()


def test_every_kind_declares_itself_and_makes_a_backend_that_follows_the_protocol(planted):
    kind = BACKENDS[planted.type]
    assert kind.type == planted.type
    assert parse_device(planted.type).type == planted.type
    backend = get_backend(torch.device(planted.type))
    assert isinstance(backend, Backend)
    assert backend.name == planted.type and backend.label.startswith(planted.type)
    assert backend.memory_is_host == (not kind.accelerator)
    assert get_backend(torch.device(planted.type)) is backend  # made once, then reused
    devices = build_manifest(None, {})["devices"]
    assert set(kind.manifest()) <= set(devices)


def test_a_planted_allocation_reads_as_the_call_s_peak_on_every_kind(planted):
    @monitor_memory_device(device=planted.type, sample_interval=0.002)
    def step() -> None:
        planted.alloc_and_free(PLANTED_BYTES)

    with gnnmon.collect() as run:
        step()
    (row,) = run.records
    assert row["backend"] == planted.type and row["device_source"] == "explicit"
    if planted.exact_memory and planted.type != "cpu":
        assert row["mem_peak_delta_bytes"] == PLANTED_BYTES
    else:  # the host's RSS (pages of the process besides the tensor) or a sampled peak
        assert row["mem_peak_delta_bytes"] == pytest.approx(PLANTED_BYTES, rel=0.05)
    assert row["mem_end_bytes"] - row["mem_start_bytes"] < PLANTED_BYTES / 2  # freed again


def test_planted_device_work_reads_as_the_call_s_device_time_on_every_kind(planted):
    @cuda_timed(device=planted.type)
    def step() -> None:
        planted.work(PLANTED_S)

    with gnnmon.collect() as run:
        step()
    (row,) = run.records
    assert row["device_s"] == pytest.approx(PLANTED_S, abs=0.02 if row["device_s_source"] == "events" else 0.5)
    assert row["device_s"] >= PLANTED_S * 0.9
    if BACKENDS[planted.type].accelerator and row["device_s_source"] == "events":
        assert row["wall_s"] < PLANTED_S  # the host only launched the work
    else:
        assert row["wall_s"] >= PLANTED_S * 0.9


def test_a_call_without_a_device_is_measured_on_the_kind_in_use(planted):
    kind = BACKENDS[planted.type]
    if kind.accelerator:
        assert infer_device()[1] != kind.in_use_source  # not in use yet
    planted.use()

    @monitor_memory_device
    def step() -> None:
        planted.alloc_and_free(MiB)

    with gnnmon.collect() as run:
        step()
    (row,) = run.records
    assert row["backend"] == planted.type
    assert row["device_source"] == (kind.in_use_source if kind.accelerator else BY_NOTHING)


def test_an_unregistered_kind_is_refused_by_name():
    with pytest.raises(DeviceError, match="unsupported device 'xpu'.*cuda, mps, cpu"):
        parse_device("xpu")
