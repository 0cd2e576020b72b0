"""Every device kind in the registry keeps the same contract, checked by the same planted truths:
the CPU for real, CUDA and MPS against their faithful fakes (tests/fakes.py), and a kind gnnmon does
not ship, added as a user adds one: an Intel XPU backend in one module (tests/xpu_backend.py, over
a fake ``torch.xpu``) and one ``register_backend`` call, with nothing in gnnmon touched. Each
question a backend or its kind answers is asked of every kind: the memory window's figures
(nesting included), the device a call without one is measured on, device time, the state an
out-of-memory error leaves, the capacity a forecast reads, the device collectives use, and the
text of the errors."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

import gnnmon
from gnnmon import cuda_timed, monitor_memory_device
from gnnmon.devices import Backend, clear_backends, get_backend
from gnnmon.devices.host import HOST
from gnnmon.devices.oom_error import is_oom
from gnnmon.devices.ranks import clock_offset
from gnnmon.devices.registry import BACKENDS, collective_device, register_backend, unregister_backend
from gnnmon.devices.resolve import BY_NOTHING, infer_device, parse_device
from gnnmon.errors import DeviceError
from gnnmon.figures import MEM_PEAK
from gnnmon.forecast.forecast import parse_capacity
from gnnmon.record.manifest import build_manifest
from tests import xpu_backend
from tests.fakes import FakeCuda, FakeMps, FakeXpu
from tests.sampled import count_rss_reads, held_until_sampled
from tests.stopwatch import Stopwatch
from tests.waits import Waits

MiB = 2**20
PLANTED_BYTES = 64 * MiB
PLANTED_S = 0.05


@dataclasses.dataclass
class Planted:
    """How a test plants memory and device work on one kind, how it marks the kind in use, how it
    runs out of memory on it (the kind's own error, ``requested`` bytes in its text or None),
    which process-group backend runs collectives on it (None: none does, the host runs them), and
    the fake device whose clock the planted work runs on (None: the host's, a sleep)."""

    type: str
    alloc_and_free: Callable[[int], None]
    work: Callable[[float], None]
    use: Callable[[], None]
    exact_memory: bool
    run_out: Callable[[], None]
    requested: int | None
    collectives: str | None
    fake: Any = None


@pytest.fixture(params=["cpu", "cuda", "mps", "xpu"])
def planted(request: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Planted]:
    clear_backends()
    kind = request.param
    for other in [k for k in BACKENDS.values() if k.accelerator and k.type != kind]:
        # no other accelerator in use, whatever the machine (a real GPU that earlier tests started)
        monkeypatch.setitem(BACKENDS, other.type, dataclasses.replace(other, in_use=lambda: None))
    if kind in ("cuda", "xpu"):
        fake = (FakeCuda if kind == "cuda" else FakeXpu)(n=2).install(monkeypatch)
        if kind == "xpu":
            register_backend(xpu_backend.KIND)  # the one registration a user makes

        def gpu_alloc(n: int) -> None:
            fake.free(fake.alloc(n, 0))

        def gpu_run_out() -> None:
            fake.alloc(MiB, 0)  # held when the next one fails, as a failing step's tensors are
            fake.alloc(2 * fake.total, 0)

        try:
            yield Planted(kind, gpu_alloc, fake.launch, lambda: fake.free(fake.alloc(MiB, 0)), True, gpu_run_out,
                          2 * fake.total if kind == "cuda" else None, "nccl" if kind == "cuda" else "xccl", fake)
        finally:
            if kind == "xpu":
                unregister_backend("xpu")
    elif kind == "mps":
        mps = FakeMps().install(monkeypatch)
        held: list[int] = []

        def mps_alloc(n: int) -> None:
            h = mps.alloc(n)
            held_until_sampled(lambda: mps.reads)  # MPS has no peak counter: held until sampled
            mps.free(h)

        def mps_run_out() -> None:
            held.append(mps.alloc(MiB))
            raise RuntimeError("MPS backend out of memory (MPS allocated: 1.00 MB, other allocations: 64.00 MB, "
                               "max allowed: 24.00 GB). Tried to allocate 48.00 GB on private pool.")

        yield Planted("mps", mps_alloc, mps.launch, lambda: held.append(mps.alloc(MiB)), False, mps_run_out,
                      48 * 2**30, None, mps)
    else:
        rss_reads = count_rss_reads(monkeypatch) if not HOST.exact else [0]  # sampled: psutil's reads counted

        def cpu_alloc(n: int) -> None:
            t = torch.empty(n, dtype=torch.uint8)
            t.fill_(1)
            if not HOST.exact:  # exact: the kernel's high-water mark holds it
                held_until_sampled(lambda: rss_reads[0])
            del t

        def cpu_run_out() -> None:
            torch.empty(2**50, dtype=torch.uint8)  # 1 PiB: the CPU allocator refuses it

        yield Planted("cpu", cpu_alloc, time.sleep, lambda: None, HOST.exact, cpu_run_out, 2**50, "gloo")
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


def host_waits(fake: Any) -> tuple[int, int]:
    """The waits for its device a fake counts itself, whoever made them: ``torch.<kind>.synchronize``
    calls (a list of devices on the fake CUDA, a count on the fake MPS) and event synchronizes."""
    syncs = fake.sync_calls
    return (len(syncs) if isinstance(syncs, list) else syncs), fake.event_syncs


def test_planted_device_work_reads_as_the_call_s_device_time_on_every_kind(planted, monkeypatch):
    @cuda_timed(device=planted.type)
    def step() -> None:
        planted.work(PLANTED_S)

    fake = planted.fake
    waits = Waits(fake, monkeypatch) if fake is not None else None
    before = host_waits(fake) if fake is not None else None
    with gnnmon.collect() as run:
        with Stopwatch() as around:
            with waits.during() if waits is not None else contextlib.nullcontext():
                step()
            returned = time.perf_counter()  # on the fakes' clock
            after = host_waits(fake) if fake is not None else None
    (row,) = run.records
    # the planted work is the floor (a sleep never returns early; a fake device runs its work to the
    # planted second); the ceiling is the host's time around the call: the host's own, or on an
    # idle device the planted work plus the host's time from the start event to the launch
    top = PLANTED_S + around.s if row["device_s_source"] == "events" else around.s
    assert PLANTED_S - 1e-6 <= row["device_s"] <= top + 1e-6
    assert row["wall_s"] <= around.s
    if not (BACKENDS[planted.type].accelerator and row["device_s_source"] == "events"):
        assert row["wall_s"] >= PLANTED_S * 0.9
        return
    # Timed with events, the host only launched the work: the call waited for its device in none of
    # the ways a host waits (synchronize, an event's synchronize, an event polled), counted by the
    # fake whatever the load ...
    assert waits is not None and waits.on() == {} and after == before, (waits.on(), before, after)
    # ... and it returned before the planted work ended on the fake device's own clock: the work was
    # queued on an idle device, so it ends PLANTED_S after its launch. A host held up for longer
    # than that between the launch and the return (a loaded machine) returns after the work ended
    # however it waited, and nothing then tells it from a call that waited.
    if returned >= fake.free_at:
        pytest.skip(f"the host returned {(returned - fake.free_at) * 1e3:.1f} ms after the planted "
                    f"{PLANTED_S * 1e3:.0f} ms of device work ended (held up past the plant); no wait "
                    "was counted, but a return before the work ended could not be judged")


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


def test_a_nested_call_never_hides_the_outer_call_s_peak_on_every_kind(planted):
    """The outer call's planted allocation is freed before the inner call's window opens (and may
    reset the device's peak counter): the outer row still holds it."""
    @monitor_memory_device(device=planted.type, sample_interval=0.002, label="inner")
    def inner() -> None:
        planted.alloc_and_free(MiB)

    @monitor_memory_device(device=planted.type, sample_interval=0.002, label="outer")
    def outer() -> None:
        planted.alloc_and_free(PLANTED_BYTES)
        inner()

    with gnnmon.collect() as run:
        outer()
    rows = {r["label"]: r for r in run.records}
    assert rows["inner"]["parent"] == "outer#0"
    if planted.exact_memory and planted.type != "cpu":
        assert rows["outer"]["mem_peak_delta_bytes"] == PLANTED_BYTES
        assert rows["inner"]["mem_peak_delta_bytes"] == MiB
    else:
        assert rows["outer"]["mem_peak_delta_bytes"] == pytest.approx(PLANTED_BYTES, rel=0.05)
        assert rows["inner"]["mem_peak_delta_bytes"] < PLANTED_BYTES / 2


def test_an_out_of_memory_error_on_every_kind_leaves_the_device_s_state_in_its_row(planted):
    @monitor_memory_device(device=planted.type)
    def step() -> None:
        planted.run_out()

    with gnnmon.collect() as run:
        with pytest.raises(Exception) as raised:  # the kind's own error, passed through untouched
            step()
    assert is_oom(raised.value)
    (row,) = run.records
    total, _ = get_backend(torch.device(planted.type)).capacity()
    assert row["error"] == type(raised.value).__name__
    assert row["oom_requested_bytes"] == planted.requested  # as the error's text gives it
    assert row["oom_allocated_bytes"] >= (0 if planted.type == "cpu" else MiB) and row["oom_allocated_bytes"] > 0
    assert row["oom_device_total_bytes"] == total and 0 <= row["oom_device_free_bytes"] <= total
    if "oom_reserved_bytes" in row:  # where the device has an allocator's cache
        assert row["oom_cached_free_bytes"] == row["oom_reserved_bytes"] - row["oom_allocated_bytes"] >= 0


def test_every_kind_gives_the_capacity_a_forecast_reads(planted):
    backend = get_backend(torch.device(planted.type))
    total, what = backend.capacity()
    assert isinstance(total, int) and total > 0 and what
    assert parse_capacity(planted.type) == (total, what)
    rows = [{"label": "step", "index": i, "error": None, "num_nodes": n, "num_edges": 3 * n,
             MEM_PEAK.name: 100 * MiB + 4096 * n + 8 * (i % 3)} for i, n in enumerate(range(1000, 31_000, 1000))]
    model = gnnmon.Report(rows).memory_model(figure=MEM_PEAK.name)
    fc = gnnmon.forecast([{"num_nodes": 2000, "num_edges": 6000}], model, capacity=planted.type, progress=False)
    assert (fc.capacity_bytes, fc.capacity) == (total, what) and fc.fits is (fc.peak_bytes <= total)


def test_collectives_run_on_the_device_of_the_kind_that_runs_them(planted, monkeypatch):
    """The device each kind's process-group backend puts a collective's tensors on, and the clock
    offset's collective that uses it (a stand-in torch.distributed: one all-gather per round)."""
    name = planted.collectives or "gloo"  # no collectives of its own (MPS): the host runs them
    expected = planted.type if planted.collectives else "cpu"
    assert collective_device(name).type == expected
    seen: list[Any] = []
    real_zeros = torch.zeros

    def zeros(*size: Any, device: Any = None, **kwargs: Any) -> torch.Tensor:
        seen.append(torch.device(device))
        return real_zeros(*size, **kwargs)  # the values on the host: this torch has no such device

    class Dist:
        def get_backend(self) -> str:
            return name

        def get_world_size(self) -> int:
            return 2

        def get_rank(self) -> int:
            return 0

        def all_gather(self, gathered: list[torch.Tensor], mine: torch.Tensor) -> None:
            for t in gathered:
                t.copy_(mine)

    monkeypatch.setitem(sys.modules, "torch.distributed", Dist())
    monkeypatch.setattr(torch, "zeros", zeros)
    assert clock_offset(rounds=3)["clock_offset_rounds"] == 2
    assert seen and {d.type for d in seen} == {expected}


def test_errors_name_every_registered_kind(planted):
    with pytest.raises(DeviceError, match=f"unknown device 'tpu': expected one of .*'{planted.type}'"):
        parse_device("tpu")


def test_an_unregistered_kind_is_refused_by_name():
    with pytest.raises(DeviceError, match="unsupported device 'xpu'.*cuda, mps, cpu"):
        parse_device("xpu")
    # its out-of-memory text is one only once its kind says so (tests/xpu_backend.py)
    assert not is_oom(FakeXpu().out_of_memory(MiB, 0, FakeXpu().devices[0]))
