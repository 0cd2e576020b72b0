"""Device resolution: explicit argument, else the call's tensors / modules / PyG data, else default."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Batch, Data, HeteroData

import gnnmon
from gnnmon import DeviceError, monitor_memory_device
from gnnmon.devices.arguments import scan_arguments
from gnnmon.devices.resolve import parse_device

META = torch.device("meta")


def _device_of(args, kwargs):
    """The device one pass over a call's arguments gives (what a decorated call's row is handed)."""
    return scan_arguments(args, kwargs)[0]


def test_parse_device_forms():
    assert parse_device("cuda:1") == torch.device("cuda", 1)
    assert parse_device(torch.device("mps")) == torch.device("mps")
    assert parse_device(2) == torch.device("cuda", 2)
    assert parse_device("cpu") == torch.device("cpu") and parse_device("cpu:0") == torch.device("cpu", 0)
    for bad, msg in [("gpu", "unknown device 'gpu'"), ("cuda:x", "unknown device"),
                     (-1, ">= 0"), (True, "not bool"), (1.5, "not float"),
                     ("xla", "unknown device|unsupported device"),
                     ("cpu:1", "cpu is one device, with no index 1; use 'cpu'"),
                     ("mps:2", "mps is one device, with no index 2")]:
        with pytest.raises(DeviceError, match=msg):
            parse_device(bad)


def test_tensor_module_and_pyg_data_resolve_their_device():
    assert _device_of((torch.ones(2, device=META),), {}) == META
    assert _device_of((), {"model": torch.nn.Linear(2, 2, device=META)}) == META
    data = Data(x=torch.ones(3, 2, device=META), edge_index=torch.zeros(2, 1, dtype=torch.long, device=META))
    assert _device_of((data,), {}) == META
    hetero = HeteroData()
    hetero["paper"].x = torch.ones(3, 2, device=META)
    assert _device_of((hetero,), {}) == META
    cpu_data = Data(x=torch.ones(3, 2), edge_index=torch.zeros(2, 1, dtype=torch.long))
    batch = Batch.from_data_list([cpu_data, cpu_data])
    assert _device_of((batch,), {}) == torch.device("cpu")
    assert _device_of(([1, torch.ones(1, device=META)],), {}) == META  # inside a list


def test_an_accelerator_wins_over_the_cpu():
    cpu_batch = torch.ones(2)
    model_on_meta = torch.nn.Linear(2, 2, device=META)  # stands for a model on cuda
    assert _device_of((cpu_batch, model_on_meta), {}) == META


def test_nothing_with_a_device_means_the_default():
    assert _device_of((1, "a", None), {}) is None

    @gnnmon.cuda_timed(label="plain")
    def plain(*args):
        return args

    @gnnmon.cuda_timed(label="explicit", device="cpu")
    def explicit(*args):
        return args

    with gnnmon.collect() as run:
        plain(1)
        explicit(torch.ones(1, device=META))
    # the default: the CPU, or the GPU in use where an earlier test of this worker started CUDA
    default = f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_initialized() else "cpu"
    assert [(r["label"], r["device"]) for r in run.records] == [("plain", default), ("explicit", "cpu")]


def test_unsupported_device_in_arguments_is_a_clear_error():
    @gnnmon.cuda_timed
    def step(x):
        return x

    with pytest.raises(DeviceError, match="live on 'meta'.*pass device= explicitly"):
        step(torch.ones(1, device=META))


def test_decorated_call_records_the_resolved_device(fake_cuda):
    @monitor_memory_device
    def on_cpu(x):
        return x

    @monitor_memory_device(device="cuda:1")
    def on_gpu(x):
        return x

    with gnnmon.collect() as run:
        on_cpu(torch.ones(1))
        on_gpu(torch.ones(1))
    assert [(r["device"], r["backend"]) for r in run.records] == [("cpu", "cpu"), ("cuda:1", "cuda")]


def test_module_without_parameters_falls_through():
    assert _device_of((torch.nn.ReLU(), torch.ones(1, device=META)), {}) == META


def test_a_call_without_tensors_follows_torch_default_device():
    """torch.set_default_device(...): a decorated call with no tensor arguments is resolved on
    that device, not silently on the CPU (and the fast default-device check sees the change).
    'meta' stands for a device this CPU-only torch has but gnnmon cannot measure: a clear error."""
    from gnnmon.devices.resolve import BY_DEFAULT, infer_device

    assert infer_device()[1] != BY_DEFAULT
    torch.set_default_device("meta")
    try:
        assert infer_device() == (torch.device("meta"), BY_DEFAULT)
        with pytest.raises(DeviceError, match="'meta'"):
            with gnnmon.memory_scope():
                pass
    finally:
        torch.set_default_device(None)
    assert infer_device()[1] != BY_DEFAULT
