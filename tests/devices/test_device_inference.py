"""Which device a call with no device among its arguments is measured on (the seed article's own
``@monitor_memory_device def train(): ...`` over a global model), against the fake ``torch.cuda``;
every row says how its device was chosen (``device_source``)."""

from __future__ import annotations

import json

import pytest
import torch

import gnnmon
from gnnmon import cuda_timed, monitor_memory_device

MiB = 2**20


def test_a_call_with_no_tensor_arguments_is_measured_on_the_gpu_in_use(fake_cuda):
    """CUDA in use in the process (the model was put there): the no-argument call is measured on
    the current CUDA device, and a planted 128 MiB allocation shows in full."""
    fake_cuda.free(fake_cuda.alloc(MiB, 0))  # set-up put something on the GPU: CUDA is initialised

    @monitor_memory_device
    def train():
        handle = fake_cuda.alloc(128 * MiB, 0)
        fake_cuda.free(handle)

    with gnnmon.collect() as run:
        train()
    (row,) = run.records
    assert row["device"] == "cuda:0" and row["backend"] == "cuda"
    assert row["device_source"] == "cuda in use"
    assert row["mem_peak_delta_bytes"] == 128 * MiB


def test_the_current_cuda_device_is_the_one_measured(fake_cuda):
    fake_cuda.free(fake_cuda.alloc(MiB, 1))  # CUDA in use
    fake_cuda.set_device(1)

    @cuda_timed
    def train():
        fake_cuda.launch(0.001)

    with gnnmon.collect() as run:
        train()
    (row,) = run.records
    assert row["device"] == "cuda:1" and row["device_source"] == "cuda in use"


def test_the_call_that_first_uses_cuda_is_measured_on_the_cpu_and_says_so(fake_cuda):
    """CUDA not in use when the call starts: the CPU is measured, and the row says the call started
    CUDA and its GPU memory is not in the row; the next call is measured on the GPU."""
    @monitor_memory_device
    def train():
        fake_cuda.free(fake_cuda.alloc(64 * MiB, 0))

    with gnnmon.collect() as run:
        train()
        train()
    first, second = run.records
    assert first["device"] == "cpu" and first["device_source"] == "cpu: no accelerator in use"
    assert any("CUDA was first used during this call" in n for n in first["notes"])
    assert second["device"] == "cuda:0" and second["device_source"] == "cuda in use"
    assert second["mem_peak_delta_bytes"] == 64 * MiB
    assert not any("CUDA was first used" in n for n in second["notes"])


def test_sources_of_arguments_and_explicit_devices(fake_cuda):
    @monitor_memory_device(label="by_argument")
    def by_argument(x):
        return x

    @monitor_memory_device(device="cuda:1", label="explicit")
    def explicit():
        pass

    @monitor_memory_device(label="nothing")
    def nothing():
        pass

    with gnnmon.collect() as run:
        nothing()  # CUDA not initialised yet: the CPU, said so
        by_argument(torch.ones(3))
        explicit()
    rows = {r["label"]: r for r in run.records}
    assert rows["nothing"]["device_source"] == "cpu: no accelerator in use"
    assert rows["by_argument"]["device_source"] == "argument" and rows["by_argument"]["device"] == "cpu"
    assert rows["explicit"]["device_source"] == "explicit" and rows["explicit"]["device"] == "cuda:1"


def test_without_any_accelerator_the_cpu_is_chosen_and_said():
    @monitor_memory_device
    def train():
        return 1

    with gnnmon.collect() as run:
        train()
    (row,) = run.records
    if not torch.cuda.is_initialized():
        assert row["device"] == "cpu" and row["device_source"] == "cpu: no accelerator in use"
    else:  # on a GPU machine where an earlier test put something on the GPU
        assert row["device_source"] == "cuda in use"


def _cuda_started(fake_cuda) -> None:
    fake_cuda.free(fake_cuda.alloc(MiB, 0))  # the model was put on the GPU: CUDA is in use


def test_a_step_given_the_loaders_cpu_batch_is_measured_on_the_gpu_it_moves_it_to(fake_cuda):
    """PyG's usual loop: ``batch = batch.to(device)`` inside the step, the loader's batch on the host.
    The step's work is the GPU's: its row is (planted 96 MiB, planted 20 ms of device work), and
    says how that was found, from the two reads its memory window makes and no other."""
    _cuda_started(fake_cuda)

    @monitor_memory_device
    @cuda_timed
    def train_step(batch):
        with gnnmon.phase("forward"):
            h = fake_cuda.alloc(96 * MiB, 0)  # the batch moved to the GPU, and its activations
            fake_cuda.launch(0.02)
        fake_cuda.free(h)

    with gnnmon.collect() as run:
        train_step(torch.ones(8))  # warm: the pool has its events
        reads = fake_cuda.calls["stats"]
        train_step(torch.ones(8))
        assert fake_cuda.calls["stats"] - reads == 2  # one read at each end, none more for the choice
    row = run.records[-1]
    assert (row["device"], row["backend"]) == ("cuda:0", "cuda")
    assert row["device_source"] == "cuda: its allocator was used (arguments on the cpu)"
    assert row["mem_peak_delta_bytes"] == 96 * MiB and row["mem_peak_bytes_source"] == "measured:cuda-allocator"
    assert row["device_s_source"] == "events" and row["device_s"] >= 0.02 - 1e-9
    assert row["phase_forward_s"] >= 0.02 - 1e-9
    assert row["rss_peak_bytes"] >= row["rss_start_bytes"]  # the host's figures are there too


def test_a_cpu_only_function_in_a_gpu_process_stays_on_the_cpu(fake_cuda):
    """A function given host tensors that never uses the GPU (a collate, a metric on the host) in a
    process whose model is on the GPU: its row is the host's — RSS as its memory (a planted 64 MiB
    tensor), wall time as its device time, even while the GPU is busy with earlier work — and the
    events it recorded go back to the pool unread."""
    _cuda_started(fake_cuda)

    @monitor_memory_device
    @cuda_timed
    def host_work(x):
        with gnnmon.phase("build"):
            y = torch.ones(16 * MiB, dtype=torch.float32)  # 64 MiB on the host
            y += 1
        return float(y[0]) + float(x[0])

    with gnnmon.collect() as run:
        for _ in range(3):
            fake_cuda.launch(2.0)  # the GPU busy with queued work the function does not wait for
            assert host_work(torch.ones(2)) == 3.0
    rows = run.records
    created = fake_cuda.events_created
    assert created == 4  # the first call's four events, given back and reused by the next calls
    for row in rows:
        assert (row["device"], row["backend"]) == ("cpu", "cpu")
        assert row["device_source"] == "cpu: arguments on the cpu, cuda's allocator unused"
        assert row["device_s"] == row["wall_s"] and row["device_s_source"] == "wall"
        assert 0 < row["phase_build_s"] <= row["wall_s"] < 2.0  # the host's time, not the queue's (2 s or more)
        assert row["mem_peak_bytes_source"] == row["rss_peak_bytes_source"]
        assert row["mem_peak_bytes"] == row["rss_peak_bytes"]
        assert "mem_reserved_peak_bytes" not in row and "cuda_ooms" not in row
    exact = [r for r in rows if r["rss_peak_bytes_source"].startswith("measured:")]
    assert all(r["mem_peak_delta_bytes"] >= 60 * MiB for r in exact if r["index"] == 0)


def test_a_row_timed_only_settles_with_one_read_at_each_end(fake_cuda):
    """``@cuda_timed`` alone on a host batch, in a GPU process: one allocator read at each end
    decides, and the GPU step is timed by events, the host function by the wall."""
    _cuda_started(fake_cuda)

    @cuda_timed
    def gpu(x):
        fake_cuda.free(fake_cuda.alloc(MiB, 0))
        fake_cuda.launch(0.01)

    @cuda_timed
    def host(x):
        return x + 1

    with gnnmon.collect() as run:
        reads = fake_cuda.calls["stats"]
        gpu(torch.ones(2))
        host(torch.ones(2))
        assert fake_cuda.calls["stats"] - reads == 4
    g, h = run.records
    assert g["backend"] == "cuda" and g["device_s_source"] == "events" and g["device_s"] >= 0.01 - 1e-9
    assert h["backend"] == "cpu" and h["device_s"] == h["wall_s"]


def test_a_row_with_no_device_measurement_keeps_its_arguments_device(fake_cuda):
    _cuda_started(fake_cuda)

    @gnnmon.gc_controlled
    def step(x):
        fake_cuda.free(fake_cuda.alloc(MiB, 0))

    with gnnmon.collect() as run:
        step(torch.ones(2))
    (row,) = run.records
    assert (row["device"], row["device_source"]) == ("cpu", "argument")
    assert fake_cuda.calls["stats"] == 0


def test_a_host_batch_step_that_runs_out_of_gpu_memory_is_the_gpus(fake_cuda):
    """Its first allocation on the GPU failed: nothing was allocated, yet the GPU was used and its
    row is the GPU's, with the out-of-memory figures."""
    _cuda_started(fake_cuda)

    @monitor_memory_device
    def train_step(batch):
        fake_cuda.alloc(64 * 2**30, 0)  # beyond the fake GPU's 16 GiB

    with gnnmon.collect() as run:
        with pytest.raises(torch.OutOfMemoryError):
            train_step(torch.ones(2))
    (row,) = run.records
    assert row["backend"] == "cuda" and row["cuda_ooms"] == 1 and row["error"] == "OutOfMemoryError"


def test_no_accelerator_in_use_is_said_only_where_each_kind_would_say_so(monkeypatch):
    """``none_in_use`` answers for the kinds without asking them: here it agrees with the kinds'
    own answers, and it says nothing (False: ask them) once CUDA's flag is up, a fake of torch's
    replaces ``is_initialized``, MPS is said to be available, or the table holds another kind."""
    from gnnmon.devices import registry
    from gnnmon.devices.registry import BACKENDS, BackendKind, none_in_use, register_backend, unregister_backend
    from gnnmon.devices.resolve import host_now

    asked = [kind.in_use() for kind in BACKENDS.accelerators]  # the kinds' own answers (MPS asked, if any)
    if any(used is not None for used in asked):
        assert not none_in_use() and host_now() is None  # an accelerator in use: never the host unasked
    with monkeypatch.context() as m:
        m.setattr(torch.cuda, "_initialized", True)  # CUDA started: its flag is up
        assert not none_in_use() and host_now() is None
    with monkeypatch.context() as m:
        m.setattr(torch.cuda, "is_initialized", lambda: False)  # a fake in torch's place
        assert not none_in_use()
    if registry._MPS_BACKEND is not None and registry._MPS is not None:
        with monkeypatch.context() as m:
            m.setattr(torch.backends.mps, "is_available", lambda: True)
            assert not none_in_use()
    register_backend(BackendKind("planted", registry.CpuBackend, lambda: torch.device("cpu")))
    try:
        assert not none_in_use()
    finally:
        unregister_backend("planted")
    if not any(used is not None for used in asked) and not torch.cuda.is_initialized():
        assert none_in_use()  # the built-in kinds alone again, none in use: said without asking
        assert host_now() is gnnmon.devices.backend_for(torch.device("cpu"))


def test_inference_asks_mps_again_while_it_holds_memory(fake_mps):
    """MPS available and holding memory: every inference says so (``none_in_use`` never answers for
    it once it was asked and found available)."""
    from gnnmon.devices.registry import none_in_use
    from gnnmon.devices.resolve import infer_device

    fake_mps.alloc(MiB)
    assert [infer_device() for _ in range(3)] == [(torch.device("mps"), "mps in use")] * 3
    assert not none_in_use()


def test_a_fake_of_is_initialized_put_in_place_before_gnnmon_is_imported_is_never_read_past():
    """``torch.cuda.is_initialized`` replaced before ``import gnnmon`` (a fake, a vendor's shim):
    CUDA's own flag says nothing of it, so the kinds are always asked (as they are where torch's own
    function is in place, checked in the same interpreter beside it)."""
    from tests.scripts import run_script

    proc = run_script("""
        import json, torch
        torch.cuda.is_initialized = lambda: False  # in place before gnnmon is imported
        import gnnmon
        from gnnmon.devices import registry
        from gnnmon.devices.resolve import infer_device
        infer_device()
        print(json.dumps({"torchs_own": registry._TORCHS_OWN, "none_in_use": registry.none_in_use()}))
    """)
    assert json.loads(proc.stdout) == {"torchs_own": False, "none_in_use": False}
    from gnnmon.devices import registry

    assert registry._TORCHS_OWN is True  # torch's own function here: its flag is read
