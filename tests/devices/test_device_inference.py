"""Which device a call with no device among its arguments is measured on (the seed article's own
``@monitor_memory_device def train(): ...`` over a global model), against the fake ``torch.cuda``;
every row says how its device was chosen (``device_source``)."""

from __future__ import annotations

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
