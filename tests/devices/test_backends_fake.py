"""CUDA and MPS backends against faithful fakes of torch.cuda / torch.mps (see tests/fakes.py),
plus real-device tests marked ``cuda`` / ``mps`` that run only where such a device exists."""

from __future__ import annotations

import threading
import time

import pytest
import torch

import gnnmon
from gnnmon import DeviceError, memory_scope, monitor_memory_device
from gnnmon.devices import get_backend
from tests.sampled import held_until_sampled

MiB = 2**20


def test_fake_cuda_planted_allocation_is_exact(fake_cuda):
    fake_cuda.alloc(10 * MiB, 0)  # something already there before the call

    @monitor_memory_device(device="cuda")
    def step():
        h = fake_cuda.alloc(256 * MiB, 0)
        fake_cuda.free(h)

    with gnnmon.collect() as run:
        step()
    (row,) = run.records
    assert row["backend"] == "cuda" and row["device"] == "cuda:0"
    assert row["mem_start_bytes"] == 10 * MiB
    assert row["mem_peak_bytes"] == 266 * MiB
    assert row["mem_peak_delta_bytes"] == 256 * MiB
    assert row["mem_end_bytes"] == 10 * MiB
    assert row["mem_peak_bytes_source"] == "measured:cuda-allocator"
    # The caching allocator keeps the freed segment reserved.
    assert row["mem_reserved_end_bytes"] == 266 * MiB == row["mem_reserved_peak_bytes"]
    assert row["cuda_ooms"] == 0 and row["cuda_alloc_retries"] == 0
    # The allocator's counters are exact on the host: no sync, one nested read at each end.
    assert fake_cuda.sync_calls == []
    assert fake_cuda.stats_on == [0, 0]


def test_fake_cuda_memory_is_exact_while_the_device_is_busy(fake_cuda):
    """The figures come from host-side counters: exact with kernels still queued, and the host
    does not wait for them (no device synchronize, no event waited on: counted)."""
    @monitor_memory_device(device="cuda:0")
    def step():
        fake_cuda.launch(0.2)  # queued work the host does not wait for
        h = fake_cuda.alloc(16 * MiB, 0)
        fake_cuda.launch(0.2)
        fake_cuda.free(h)

    with gnnmon.collect() as run:
        step()
        assert fake_cuda.sync_calls == [] and fake_cuda.event_syncs == 0  # the 0.4 s never waited for
    (row,) = run.records
    assert row["mem_peak_delta_bytes"] == 16 * MiB and row["mem_end_delta_bytes"] == 0


def test_fake_cuda_sync_option_waits_for_the_device_at_both_ends(fake_cuda):
    @monitor_memory_device(device="cuda:1", sync=True)
    def step():
        fake_cuda.launch(0.05)
        fake_cuda.free(fake_cuda.alloc(2 * MiB, 1))

    with gnnmon.collect() as run:
        step()
    (row,) = run.records
    assert fake_cuda.sync_calls == [1, 1]
    assert (row["t_end_ns"] - row["t_start_ns"]) / 1e9 >= 0.05  # the window covers the GPU work
    assert row["mem_peak_delta_bytes"] == 2 * MiB
    with pytest.raises(TypeError, match="sync must be True or False"):
        monitor_memory_device(sync="yes")


def test_fake_cuda_nested_peaks_survive_inner_resets(fake_cuda):
    @monitor_memory_device(device="cuda:0", label="inner")
    def inner(size):
        fake_cuda.free(fake_cuda.alloc(size, 0))

    @monitor_memory_device(device="cuda:0", label="outer")
    def outer():
        fake_cuda.free(fake_cuda.alloc(300 * MiB, 0))  # then an inner call resets the counter
        inner(100 * MiB)
        inner(50 * MiB)
        fake_cuda.free(fake_cuda.alloc(20 * MiB, 0))

    with gnnmon.collect() as run:
        outer()
    rows = {(r["label"], r["index"]): r for r in run.records}
    assert rows[("outer", 0)]["mem_peak_delta_bytes"] == 300 * MiB
    assert rows[("inner", 0)]["mem_peak_delta_bytes"] == 100 * MiB
    assert rows[("inner", 1)]["mem_peak_delta_bytes"] == 50 * MiB
    assert fake_cuda.reset_calls, "the inner windows needed resets (the counter was above current)"


def test_fake_cuda_no_reset_when_the_counter_is_at_current(fake_cuda):
    fake_cuda.alloc(MiB, 0)
    with memory_scope(device="cuda:0") as fields:
        fake_cuda.free(fake_cuda.alloc(5 * MiB, 0))
    assert fields["mem_peak_delta_bytes"] == 5 * MiB
    assert fake_cuda.reset_calls == []  # nothing hidden from the user's own peak counter


def test_fake_cuda_honours_a_nonzero_device_index(fake_cuda):
    @monitor_memory_device(device="cuda:1")
    def step():
        fake_cuda.alloc(500 * MiB, 0)  # on device 0: not this call's device
        fake_cuda.free(fake_cuda.alloc(64 * MiB, 1))

    with gnnmon.collect() as run:
        step()
    (row,) = run.records
    assert row["device"] == "cuda:1"
    assert row["mem_peak_delta_bytes"] == 64 * MiB
    # (CUDA untouched at the start: zeros, no read)
    assert fake_cuda.sync_calls == [] and set(fake_cuda.stats_on) == {1}
    assert set(fake_cuda.reset_calls) <= {1}


def test_fake_cuda_current_device_is_resolved_per_call(fake_cuda):
    fake_cuda.set_device(1)
    with memory_scope(device="cuda") as fields:
        fake_cuda.free(fake_cuda.alloc(3 * MiB))
    assert fields["device"] == "cuda:1" and fields["mem_peak_delta_bytes"] == 3 * MiB


def test_fake_cuda_uninitialised_stats_read_as_zero(fake_cuda):
    backend = get_backend(torch.device("cuda", 0))
    assert fake_cuda.memory_stats(0) == {}  # the real API returns {} before CUDA is initialised
    window = backend.close_window(backend.open_window(0.005))  # raw counters: start, peak, reserved peak
    assert (window.start, window.peak, window.reserved[2]) == (0, 0, 0)


def test_fake_cuda_ooms_counted_and_error_recorded(fake_cuda):
    fake_cuda.total = 100 * MiB

    @monitor_memory_device(device="cuda:0")
    def step():
        fake_cuda.alloc(200 * MiB, 0)

    with gnnmon.collect() as run:
        with pytest.raises(RuntimeError, match="out of memory"):
            step()
    (row,) = run.records
    assert row["error"] == "OutOfMemoryError" and row["cuda_ooms"] == 1


def test_fake_cuda_bad_index_is_a_clear_error(fake_cuda):
    with pytest.raises(DeviceError, match="only 2 CUDA device"):
        with memory_scope(device="cuda:5"):
            pass


def test_fake_cuda_threads_nesting_stays_correct(fake_cuda):
    """Windows opened and closed in two threads interleaved keep their own peaks."""
    results = {}
    barrier = threading.Barrier(2)

    def worker(name, size):
        with memory_scope(device="cuda:0", label=name) as fields:
            barrier.wait()
            h = fake_cuda.alloc(size, 0)
            barrier.wait()
            fake_cuda.free(h)
        results[name] = fields

    with gnnmon.collect():
        threads = [threading.Thread(target=worker, args=(n, s)) for n, s in (("a", 40 * MiB), ("b", 10 * MiB))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    # Both windows were open while both blocks were held: each saw at least its own allocation.
    assert results["a"]["mem_peak_delta_bytes"] >= 40 * MiB
    assert results["b"]["mem_peak_delta_bytes"] >= 10 * MiB


def test_fake_mps_peak_is_sampled_and_labelled(fake_mps):
    @monitor_memory_device(device="mps", sample_interval=0.002)
    def step():
        h = fake_mps.alloc(128 * MiB)
        held_until_sampled(lambda: fake_mps.reads)
        fake_mps.free(h)

    with gnnmon.collect() as run:
        step()
    (row,) = run.records
    assert row["backend"] == "mps" and row["device"] == "mps"
    assert row["mem_peak_delta_bytes"] == 128 * MiB
    assert row["mem_peak_bytes_source"] == "sampled:mps@2ms"
    assert row["mem_driver_peak_bytes"] == 128 * MiB + fake_mps.overhead
    assert row["mem_driver_bytes"] == fake_mps.overhead
    assert row["mem_recommended_max_bytes"] == fake_mps.recommended
    assert fake_mps.sync_calls == 0  # current_allocated_memory is the allocator's host counter
    assert not [t for t in threading.enumerate() if t.name == "gnnmon-mps"]


def test_fake_mps_polling_thread_stays_up_while_a_run_collects(fake_mps):
    """One polling thread for the whole run, not a thread started and joined per row."""
    @monitor_memory_device(device="mps", sample_interval=0.002)
    def step():
        fake_mps.free(fake_mps.alloc(MiB))

    def pollers():
        return [t for t in threading.enumerate() if t.name == "gnnmon-mps"]

    with gnnmon.collect():
        step()
        first = pollers()
        step()
        assert len(first) == 1 and pollers() == first
    assert pollers() == []
    step()  # outside a run: the thread lives for the window only
    assert pollers() == []


def test_fake_mps_misses_a_spike_between_samples(fake_mps):
    """Honest about sampling: a spike shorter than the interval is not seen (hence the label)."""
    with memory_scope(device="mps", sample_interval=5.0) as fields:
        fake_mps.free(fake_mps.alloc(64 * MiB))
    assert fields["mem_peak_delta_bytes"] == 0
    assert fields["mem_peak_bytes_source"].startswith("sampled:")


def test_fake_mps_nested_windows(fake_mps):
    with memory_scope(device="mps", sample_interval=0.002, label="outer") as outer:
        h = fake_mps.alloc(50 * MiB)
        held_until_sampled(lambda: fake_mps.reads)
        fake_mps.free(h)
        with memory_scope(device="mps", sample_interval=0.002, label="inner") as inner:
            h = fake_mps.alloc(10 * MiB)
            held_until_sampled(lambda: fake_mps.reads)
            fake_mps.free(h)
    assert outer["mem_peak_delta_bytes"] == 50 * MiB
    assert inner["mem_peak_delta_bytes"] == 10 * MiB


def test_mps_unavailable_is_a_clear_error(monkeypatch):
    from gnnmon.devices import clear_backends

    clear_backends()
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(DeviceError, match="MPS is not available"):
        with memory_scope(device="mps"):
            pass
    clear_backends()


# -- real devices ---------------------------------------------------------------------------------

@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_real_cuda_planted_allocation():
    from gnnmon.devices import clear_backends

    clear_backends()

    @monitor_memory_device(device="cuda:0")
    def step():
        t = torch.empty(256 * MiB, dtype=torch.uint8, device="cuda:0")
        t.fill_(1)
        del t

    with gnnmon.collect() as run:
        step()
    (row,) = run.records
    assert abs(row["mem_peak_delta_bytes"] - 256 * MiB) <= 2 * MiB
    assert abs(row["mem_end_bytes"] - row["mem_start_bytes"]) <= 2 * MiB


@pytest.mark.mps
@pytest.mark.skipif(not torch.backends.mps.is_available(), reason="no MPS device")
def test_real_mps_planted_allocation():
    from gnnmon.devices import clear_backends

    clear_backends()

    @monitor_memory_device(device="mps", sample_interval=0.001)
    def step():
        t = torch.ones(256 * MiB, dtype=torch.uint8, device="mps")
        torch.mps.synchronize()
        time.sleep(0.05)
        del t

    with gnnmon.collect() as run:
        step()
    (row,) = run.records
    assert row["mem_peak_delta_bytes"] >= 250 * MiB


def test_fake_mps_with_allocator_statistics_reads_exact_nested_peaks(monkeypatch):
    """A torch whose MPS allocator backs ``torch.accelerator.memory``: a peak held for no time at
    all (allocated and freed between two polls) is read exactly from the allocator's counter,
    nested windows keep their own peaks, no polling thread starts and nothing synchronizes."""
    from gnnmon.devices import clear_backends
    from tests.fakes import FakeMps

    clear_backends()
    fake = FakeMps(with_allocator_stats=True).install(monkeypatch)
    try:
        @monitor_memory_device(device="mps", label="inner")
        def inner():
            fake.free(fake.alloc(32 * MiB))  # a spike no sampler could see

        @monitor_memory_device(device="mps", label="outer")
        def outer():
            held = fake.alloc(100 * MiB)
            inner()
            fake.free(held)

        with gnnmon.collect() as run:
            outer()
            outer()  # opens on a counter whose peak (132 MiB) is above current: a reset
        for rows in (run.records[:2], run.records[2:]):
            by = {r["label"]: r for r in rows}
            assert by["inner"]["mem_peak_delta_bytes"] == 32 * MiB
            assert by["outer"]["mem_peak_delta_bytes"] == 132 * MiB
            assert by["outer"]["mem_peak_bytes_source"] == "measured:mps-allocator"
            assert by["outer"]["mem_reserved_peak_bytes"] == 132 * MiB + fake.overhead
        assert fake.resets >= 1 and fake.sync_calls == 0
        assert not [t for t in threading.enumerate() if t.name == "gnnmon-mps"]
    finally:
        clear_backends()
