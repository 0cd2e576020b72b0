"""Inside the step, on a real CUDA device (skipped where there is none): per-layer times and peaks
against planted ``torch.cuda._sleep`` work and a planted allocation in the second layer's message,
the gradient buckets' device time against a planted sleep in the backward, and a planted
out-of-memory step after a run whose memory is a planted ``a + b·nodes`` (the memory model, the
allocator's state at the failure, the allocation history's snapshot)."""

from __future__ import annotations

import datetime
import pickle

import pytest
import torch

import gnnmon
from tests.devices.test_cuda import elapsed, planted
from tests.measure.test_layers import BACKWARD_SLEEP_S, PLANT_BYTES, SLEEP_S, Net, graph

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
    pytest.mark.usefixtures("real_cuda"),
]

MiB, GiB = 2**20, 2**30
DEV = "cuda:0"


def test_layers_are_timed_by_events_and_their_peaks_read_from_the_allocator(cycles_per_s):
    truths: dict[str, list] = {"forward": [], "backward": []}

    def plant(phase: str) -> None:
        planted(SLEEP_S if phase == "forward" else BACKWARD_SLEEP_S, cycles_per_s, truths[phase])
        held = torch.empty(PLANT_BYTES, dtype=torch.uint8, device=DEV)
        del held

    model = Net(plant=plant).to(DEV)
    x, edge_index = (t.to(DEV) for t in graph())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    @gnnmon.monitor_memory_device(device=DEV)
    @gnnmon.cuda_timed(device=DEV)
    def step() -> None:
        opt.zero_grad()
        model(x, edge_index).sum().backward()
        opt.step()

    with gnnmon.collect() as run, gnnmon.watch_layers(model):
        for _ in range(4):
            step()
    for row, fwd, bwd in list(zip(run.records, truths["forward"], truths["backward"], strict=True))[1:]:
        assert row["layer_conv2_forward_s"] >= elapsed(fwd) * 0.99
        assert row["layer_conv1_forward_s"] < elapsed(fwd) / 4
        assert row["layer_conv2_backward_s"] >= elapsed(bwd) * 0.99
        assert PLANT_BYTES <= row["layer_conv2_peak_delta_bytes"] < PLANT_BYTES + 8 * MiB
        assert PLANT_BYTES <= row["layer_conv2_backward_peak_delta_bytes"] < PLANT_BYTES + 8 * MiB
        assert row["layer_conv1_peak_delta_bytes"] < 8 * MiB


@pytest.fixture()
def one_rank_group():
    import torch.distributed as dist

    backend = "nccl" if dist.is_nccl_available() else "gloo"
    # a one-rank group meets in this process's own store: no port that another job on the machine
    # can take between a probe and the bind; a rendezvous that still stalls fails within a minute
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=60))
    yield backend
    dist.destroy_process_group()


def test_bucket_device_time_covers_a_planted_sleep_in_the_backward(cycles_per_s, one_rank_group):
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    inner = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)).to(DEV)
    model = DistributedDataParallel(inner, device_ids=[0])
    truths: list = []
    plant = [False]
    inner[0].weight.register_hook(lambda grad: planted(0.03, cycles_per_s, truths) if plant[0] else None)
    x, y = torch.randn(256, 64, device=DEV), torch.randint(0, 4, (256,), device=DEV)

    @gnnmon.cuda_timed(device=DEV)
    def step(slow: bool) -> None:
        plant[0] = slow
        torch.nn.functional.cross_entropy(model(x), y).backward()

    with gnnmon.collect() as run, gnnmon.watch_buckets(model):
        for i in range(6):
            step(i == 4)
    rows = run.records
    assert all(r["ddp_buckets"] >= 1 and r["ddp_ready_device_s"] > 0 for r in rows), rows
    (truth,) = truths
    usual = sorted(r["ddp_ready_device_s"] for r in rows[1:4])[1]
    assert rows[4]["ddp_ready_device_s"] - usual >= elapsed(truth) * 0.9
    assert rows[4]["device_s"] >= elapsed(truth)


def test_an_out_of_memory_step_records_the_allocator_the_batch_and_the_forecast(tmp_path):
    from torch_geometric.data import Data

    a, b = 64 * MiB, 4096  # bytes held by the step: a + b * nodes
    total = torch.cuda.mem_get_info()[1]
    too_big = total + GiB

    @gnnmon.monitor_memory_device(device=DEV, label="step")
    def step(batch: Data, extra: int = 0) -> None:
        held = [torch.empty(a, dtype=torch.uint8, device=DEV),
                torch.empty(b * batch.num_nodes, dtype=torch.uint8, device=DEV)]
        if extra:
            held.append(torch.empty(extra, dtype=torch.uint8, device=DEV))
        del held

    def batch(n: int, e: int) -> Data:  # edges vary apart from nodes; the step holds nothing per edge
        return Data(x=torch.empty(n, 1, device=DEV), edge_index=torch.zeros(2, e, dtype=torch.long, device=DEV),
                    num_nodes=n)

    nodes = [2_000 * (1 + i % 7) + 97 * i for i in range(24)]
    with gnnmon.collect(tmp_path / "run.jsonl", memory_history=2000) as run:
        for i, n in enumerate(nodes):
            step(batch(n, n * (1 + i % 3)))
        with pytest.raises(torch.OutOfMemoryError):
            step(batch(50_000, 100_000), extra=too_big)
    model = run.report().memory_model("step")
    assert model.trusted, model.summary()
    assert model.coefficients["num_nodes"] == pytest.approx(b, rel=0.05)
    assert model.coefficients["const"] == pytest.approx(a, rel=0.05)
    assert abs(model.coefficients["num_edges"]) < 0.05 * b
    failed = run.records[-1]
    assert failed["error"] == "OutOfMemoryError" and failed["num_nodes"] == 50_000
    assert failed["oom_requested_bytes"] == pytest.approx(too_big, rel=0.01)
    assert failed["oom_device_total_bytes"] == total
    assert failed["oom_allocated_bytes"] >= a + b * 50_000
    assert failed["oom_reserved_bytes"] >= failed["oom_allocated_bytes"]
    snapshot = failed["oom_snapshot"]
    assert snapshot.endswith(".pickle") and "segments" in pickle.loads(open(snapshot, "rb").read())
    (oom,) = run.report().oom()
    assert oom["key"] == "step#24" and "ran out of memory" in oom["words"]
    assert oom["forecast_bytes"] > 0  # the report's forecast: the failing step fits nothing
