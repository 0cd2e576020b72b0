"""On a real CUDA device (skipped where there is none): planted allocations read exactly with no
synchronize, nested peaks, event times against planted ``torch.cuda._sleep`` work, pooled events,
and what one decorated call costs in syncs, stat reads and new events."""

from __future__ import annotations

import time

import pytest
import torch

import gnnmon
from gnnmon import cuda_timed, gc_controlled, monitor_memory_device, phase
from gnnmon.devices import backend_for, clear_backends

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
]

MiB = 2**20
DEV = "cuda:0"


@pytest.fixture(autouse=True)
def _fresh_backends():
    clear_backends()
    torch.cuda.synchronize()
    yield
    torch.cuda.synchronize()
    clear_backends()


@pytest.fixture(scope="module")
def cycles_per_s():
    """Calibrate torch.cuda._sleep: cycles per second of GPU time, timed with two events, after
    half a second of warm-up (an idle GPU runs at a lower clock, and _sleep counts clock cycles).
    Only a nominal figure: the truth each timing test checks against is planted work timed by
    its own pair of events (:func:`planted`), immune to clock changes."""
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


def planted(seconds: float, rate: float, truths: list[float]) -> None:
    """Queue ``seconds`` of GPU sleep, timed by a raw pair of events appended to ``truths``
    (read later, when they have completed)."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    torch.cuda._sleep(int(seconds * rate))
    b.record()
    truths.append((a, b))  # type: ignore[arg-type]


def elapsed(pair: tuple) -> float:
    pair[1].synchronize()
    return pair[0].elapsed_time(pair[1]) / 1e3


@pytest.mark.parametrize("size_mib", [2, 16, 256, 1024])
def test_planted_allocations_read_exactly_without_a_sync(size_mib, cycles_per_s, monkeypatch):
    """The GPU is kept busy for 200 ms (nominal) first: the host does not wait for it, and the
    figures are still exact. The block and the fill kernel are warmed beforehand: a first
    cudaMalloc, or a kernel's first launch under CUDA's lazy module loading, may itself wait for
    the device (seen on an H100: 200 ms on the first call), which is CUDA's doing, not the
    monitor's."""
    warm = torch.empty(size_mib * MiB, dtype=torch.uint8, device=DEV)
    warm.fill_(1)
    del warm
    torch.cuda.synchronize()
    syncs = []
    real_sync = torch.cuda.synchronize
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: (syncs.append(a), real_sync(*a, **k)))

    @monitor_memory_device(device=DEV)
    def step():
        torch.cuda._sleep(int(0.2 * cycles_per_s))  # the GPU is busy for 200 ms
        t = torch.empty(size_mib * MiB, dtype=torch.uint8, device=DEV)
        t.fill_(1)
        del t

    with gnnmon.collect() as run:
        t0 = time.perf_counter()
        step()
        host_s = time.perf_counter() - t0
    (row,) = run.records
    assert row["mem_peak_delta_bytes"] == size_mib * MiB  # exact: the allocator's host counters
    assert row["mem_end_bytes"] == row["mem_start_bytes"]
    assert row["mem_peak_bytes_source"] == "measured:cuda-allocator"
    assert syncs == [] and host_s < 0.15  # the host never waited for the 200 ms of GPU work


def test_nested_peaks_survive_inner_resets():
    @monitor_memory_device(device=DEV, label="inner")
    def inner(n):
        t = torch.empty(n * MiB, dtype=torch.uint8, device=DEV)
        del t

    @monitor_memory_device(device=DEV, label="outer")
    def outer():
        t = torch.empty(300 * MiB, dtype=torch.uint8, device=DEV)
        del t
        inner(100)
        inner(50)

    with gnnmon.collect() as run:
        outer()
    rows = {(r["label"], r["index"]): r for r in run.records}
    assert rows[("outer", 0)]["mem_peak_delta_bytes"] == 300 * MiB
    assert rows[("inner", 0)]["mem_peak_delta_bytes"] == 100 * MiB
    assert rows[("inner", 1)]["mem_peak_delta_bytes"] == 50 * MiB


def test_event_times_match_planted_gpu_sleeps(cycles_per_s):
    truth_a: list = []
    truth_b: list = []

    @cuda_timed(device=DEV)
    def step():
        with phase("a"):
            planted(0.02, cycles_per_s, truth_a)
        with phase("b"):
            planted(0.03, cycles_per_s, truth_b)

    with gnnmon.collect() as run:
        for _ in range(5):
            step()
    rows = run.records
    for row, ta, tb in zip(rows[1:], truth_a[1:], truth_b[1:], strict=True):
        a, b = elapsed(ta), elapsed(tb)
        assert a == pytest.approx(0.02, rel=0.3) and b == pytest.approx(0.03, rel=0.3)  # nominal
        assert row["device_s_source"] == "events"
        assert row["phase_a_s"] == pytest.approx(a, rel=0.01)
        assert row["phase_b_s"] == pytest.approx(b, rel=0.01)
        assert row["device_s"] == pytest.approx(a + b, rel=0.01)
        assert row["wall_s"] < 0.5 * (a + b)  # only the launches: the host ran ahead


def test_one_decorated_call_costs_no_sync_two_stat_reads_and_no_new_event(monkeypatch):
    """The guard, on the real device: after warm-up a call of the full stack makes no
    synchronize, reads the allocator's statistics twice and creates no timing event."""
    x = torch.ones(1024, device=DEV)
    counts = {"sync": 0, "stats": 0, "events": 0}
    real_sync, real_stats, real_event = torch.cuda.synchronize, torch._C._cuda_memoryStats, torch.cuda.Event

    def sync(*a, **k):
        counts["sync"] += 1
        return real_sync(*a, **k)

    def stats(*a):
        counts["stats"] += 1
        return real_stats(*a)

    def event(*a, **k):
        counts["events"] += 1
        return real_event(*a, **k)

    @monitor_memory_device
    @cuda_timed
    @gc_controlled
    def step(x):
        with phase("forward"):
            y = x * 2
        with phase("backward"):
            y = y + 1
        return y

    monkeypatch.setattr(torch.cuda, "synchronize", sync)
    monkeypatch.setattr(torch._C, "_cuda_memoryStats", stats)
    monkeypatch.setattr(torch.cuda, "Event", event)
    clear_backends()  # the backend binds the stats reader when made
    with gnnmon.collect() as run:
        for _ in range(10):  # warm-up: the pool fills with the events 10 calls hold
            step(x)
        run.flush()  # events read and back in the pool
        counts.update(sync=0, stats=0, events=0)
        for _ in range(10):
            step(x)
        assert counts == {"sync": 0, "stats": 20, "events": 0}
    assert len(run.records) == 20 and all(r["device"] == "cuda:0" for r in run.records)


def test_the_stream_a_call_runs_on_is_the_one_timed(cycles_per_s):
    side = torch.cuda.Stream()

    truths: list = []

    @cuda_timed(device=DEV)
    def step():
        planted(0.01, cycles_per_s, truths)

    with gnnmon.collect() as run:
        with torch.cuda.stream(side):
            step()
        step()
    a, b = run.records
    assert a["device_s"] == pytest.approx(elapsed(truths[0]), rel=0.01)
    assert b["device_s"] == pytest.approx(elapsed(truths[1]), rel=0.01)
    assert len(backend_for(torch.device(DEV))._streams) == 2
