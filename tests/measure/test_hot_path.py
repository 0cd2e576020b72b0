"""The step's path, counted (not timed): what one decorated call does against the fake CUDA device
and the fake NVML, so that a sync, an extra stat read, a new event or an NVML query that creeps
back onto the path fails CI on any machine."""

from __future__ import annotations

import threading

import pytest
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


def _three_phase_steps(fake_cuda):
    """The full stack with three phases, as users call it: given the loader's host batch (its
    device settled at the end), with no arguments (the GPU in use), and with ``device=``."""

    def work():
        with phase("forward"):
            fake_cuda.launch(0.0001)
            h = fake_cuda.alloc(4 * MiB, 0)
        with phase("backward"):
            fake_cuda.launch(0.0001)
            fake_cuda.free(h)
        with phase("optimizer"):
            fake_cuda.launch(0.0001)

    @monitor_memory_device
    @cuda_timed
    @gc_controlled
    def host_batch(batch):
        work()

    @monitor_memory_device
    @cuda_timed
    @gc_controlled
    def no_arguments():
        work()

    @monitor_memory_device(device="cuda:0")
    @cuda_timed
    @gc_controlled
    def explicit():
        work()

    batch = torch.ones(4)
    return {"host batch": lambda: host_batch(batch), "no arguments": no_arguments, "device=": explicit}


@pytest.mark.parametrize("driver", [True, False], ids=["driver records", "torch records"])
def test_a_rows_cuda_calls_stay_within_the_budget_in_docs_performance(fake_cuda, tmp_path, monkeypatch, driver):
    """Every kind of CUDA call a row of the full stack with three phases makes on the step's
    thread, counted by the fake, against the budget table in docs/performance.md (what
    benchmarks/row_cost.py prints beside it). Without CUDA's Python bindings the records go
    through torch instead, as many of them."""
    from benchmarks.row_cost import budget_from_docs

    budget = {kind: most for kind, (most, _) in budget_from_docs().items()}
    if not driver:
        budget["event_record"], budget["driver_record"] = budget["driver_record"], 0
        fake_cuda.driver = False
        fake_cuda.install(monkeypatch)  # no cuda.bindings beside torch: torch records
    fake_cuda.free(fake_cuda.alloc(MiB, 0))  # the model is on the GPU
    me = threading.current_thread().name
    rows = 200
    with gnnmon.collect(tmp_path / "r.jsonl", flush_interval=3600) as run:
        for name, step in _three_phase_steps(fake_cuda).items():
            for _ in range(rows):  # the pool comes to hold the events of the rows in flight
                step()
            run.flush()
            before = dict(fake_cuda.thread_calls[me])
            for _ in range(rows):
                step()
            calls = {k: v - before.get(k, 0) for k, v in fake_cuda.thread_calls[me].items() if v > before.get(k, 0)}
            run.flush()
            over = {k: v / rows for k, v in calls.items() if v > budget.get(k, 0) * rows}
            assert not over, f"{name}: over the budget a row: {over}"
            assert calls["stats"] == 2 * rows  # one read at each end, the device's settling included
            assert calls["driver_record" if driver else "event_record"] == 8 * rows
    assert len(run.records) == 6 * rows
    assert all(r["backend"] == "cuda" and r["mem_peak_delta_bytes"] == 4 * MiB for r in run.records)
    assert all(r["phase_forward_s"] >= 0.0001 - 1e-9 for r in run.records)


def test_a_driver_that_refuses_or_a_capturing_stream_leaves_the_records_to_torch(fake_cuda):
    """The driver records only where it can: never on a stream capturing a CUDA graph, and not
    again once it refused (the row's figures stay right either way)."""

    @cuda_timed(device="cuda:0")
    def step():
        fake_cuda.launch(0.001)

    with gnnmon.collect() as run:
        step()  # the pool's first events: created and recorded by torch
        run.flush()
        torch_before = fake_cuda.calls["event_record"]
        step()
        assert fake_cuda.calls["event_record"] == torch_before  # the driver recorded both
        run.flush()
        fake_cuda.capturing = True
        step()
        fake_cuda.capturing = False
        assert fake_cuda.calls["event_record"] == torch_before + 2
        run.flush()
        fake_cuda.driver_refuses = 201  # CUDA_ERROR_INVALID_CONTEXT
        step()
        step()
        assert fake_cuda.calls["event_record"] == torch_before + 6  # refused once, torch since
    rows = run.records
    assert len(rows) == 5 and all(r["device_s"] >= 0.001 - 1e-9 for r in rows)
    from gnnmon.devices import get_backend

    assert "201" in (get_backend(torch.device("cuda", 0)).driver_refusal or "")
