"""The step's path, counted (not timed): what one decorated call does against the fake CUDA device
and the fake NVML, so that a sync, an extra stat read, a new event or an NVML query that creeps
back onto the path fails CI on any machine."""

from __future__ import annotations

import threading

import torch

import gnnmon
from gnnmon import cuda_timed, gc_controlled, monitor_memory_device, phase
from tests.fakes import FakeNvml

MiB = 2**20


def _stack(fake_cuda):
    @monitor_memory_device(device="cuda:0")
    @cuda_timed
    @gc_controlled
    def step(x):
        with phase("forward"):
            fake_cuda.launch(0.0005)
            h = fake_cuda.alloc(4 * MiB, 0)
        with phase("backward"):
            fake_cuda.launch(0.0005)
            fake_cuda.free(h)
        return x

    return step


def test_one_decorated_call_costs_no_sync_two_stat_reads_no_new_event_and_no_nvml(fake_cuda, monkeypatch, tmp_path):
    nv = FakeNvml(n=2, ramp_w=100.0, period=0.1).install(monkeypatch, tmp_path)
    step = _stack(fake_cuda)
    me = threading.current_thread().name
    with gnnmon.collect(tmp_path / "r.jsonl", sample=0.05, energy=True, carbon_intensity=50.0) as run:
        for _ in range(20):  # warm-up: the pool fills with as many events as 20 calls hold
            step(1)
        run.flush()
        syncs, stats, events = len(fake_cuda.sync_calls), fake_cuda.stats_calls, fake_cuda.events_created
        event_waits = fake_cuda.event_syncs
        nvml_mine = [c for c in nv.calls if c[1] == me]
        calls = 20
        for _ in range(calls):
            assert step(7) == 7
        assert len(fake_cuda.sync_calls) - syncs == 0  # no synchronize in the default mode
        assert fake_cuda.stats_calls - stats == 2 * calls  # one nested read at each end
        assert fake_cuda.events_created - events == 0  # 6 events a call, all from the pool
        assert events == 20 * 6
        assert [c for c in nv.calls if c[1] == me] == nvml_mine  # nothing during the calls
        assert not [c for c in nv.calls if c[0].startswith("nvmlDevice")]  # NVML only in the sampler process
        assert fake_cuda.event_syncs == event_waits  # nothing waited for an event
    rows = run.records
    assert len(rows) == 40
    assert all(r["mem_peak_delta_bytes"] == 4 * MiB for r in rows)
    assert all(r["energy_gpu_j_source"].startswith("measured:nvml-energy-counter") for r in rows)


def test_sync_mode_is_the_only_one_that_syncs(fake_cuda):
    @cuda_timed(device="cuda:0", sync="sync")
    def step():
        fake_cuda.launch(0.001)

    with gnnmon.collect():
        for _ in range(5):
            step()
    assert fake_cuda.sync_calls == [0] * 10  # both sides of every call: what "sync" is for


def test_rows_close_without_touching_the_file_or_the_device(fake_cuda, tmp_path, monkeypatch):
    """Closing a row appends it to the run's inbox: the thread that runs the steps never writes to
    the file, never queries a device event and never waits for one; the writer thread does."""
    import gnnmon.data.write as storage
    from tests.fakes import _FakeEvent

    seen: list[tuple[str, str]] = []  # (what, thread)
    real_write, real_query, real_sync = storage.JsonlWriter.write_lines, _FakeEvent.query, _FakeEvent.synchronize
    monkeypatch.setattr(storage.JsonlWriter, "write_lines",
                        lambda self, lines: (seen.append(("write", threading.current_thread().name)),
                                             real_write(self, lines))[1])
    monkeypatch.setattr(_FakeEvent, "query",
                        lambda self: (seen.append(("query", threading.current_thread().name)), real_query(self))[1])
    monkeypatch.setattr(_FakeEvent, "synchronize",
                        lambda self: (seen.append(("sync", threading.current_thread().name)), real_sync(self))[1])

    @cuda_timed(device="cuda:0")
    def step():
        fake_cuda.launch(0.001)

    me = threading.current_thread().name
    with gnnmon.collect(tmp_path / "r.jsonl", flush_interval=0.01) as run:
        for _ in range(50):
            step()
        run.flush()  # waits for the writer thread: the drain happens there
    assert [what for what, thread in seen if thread == me] == []  # nothing on the steps' thread
    assert {what for what, thread in seen if thread == "gnnmon-writer"} >= {"write", "query"}
    assert len(run.records) == 50 and all(r["device_s"] is not None for r in run.records)


def test_energy_needs_no_per_row_counter_read(fake_cuda, monkeypatch, tmp_path):
    """energy=True reads NVML's energy counter in the sampler process, on its own schedule: the
    training process makes no NVML query at all, however many rows close."""
    nv = FakeNvml(n=2, ramp_w=100.0, period=0.1).install(monkeypatch, tmp_path)

    @cuda_timed(device="cuda:0")
    def step():
        fake_cuda.launch(0.0001)

    with gnnmon.collect(energy=True, sample=10.0) as run:  # one sample at start, one at stop
        for _ in range(200):
            step()
    assert len(run.records) == 200
    assert not [c for c in nv.calls if c[0].startswith("nvmlDevice")]
    assert run.sampler_stats["nvml_energy_reads"] > 0  # the sampler process read it
    assert all(r["energy_gpu_j"] is not None for r in run.records)
    assert torch.cuda.is_available()  # the fake is installed
