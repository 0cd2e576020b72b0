"""A small DDP job, one process per rank as ``torchrun`` starts them, gloo on the CPU (NCCL
where each rank has a GPU is the same code path in gnnmon; this script stays on the CPU):

    torchrun --nproc_per_node 2 play/ddp_gcn.py runs/ddp.jsonl plant

writes ``runs/ddp.rank0.jsonl`` and ``runs/ddp.rank1.jsonl``; ``gnnmon report runs/ddp.jsonl``
reads both. A GCN on a random graph, 20 steps, each ``@cuda_timed`` with forward/backward/
optimizer phases. Scenarios (``tests/record/test_distributed.py`` runs each):

* ``plant``: rank 1 sleeps 50 ms in step 5's forward pass (a straggler: rank 0 waits for it in
  the backward all-reduce); rank 0 collects a heap of 1,000,000 lists in step 12's forward pass;
* ``kill``: rank 1 kills itself (SIGKILL) in step 8; the others fail at their next all-reduce;
* ``gc``: no plant; the loop runs under ``gc_paused()`` and the step is
  ``@gc_controlled(collect=5)``: every rank collects after the same steps;
* ``backward``: no phases; ``gnnmon.watch_buckets`` on the DDP model; rank 1 sleeps 80 ms inside
  step 7's backward (a hook on its first layer's weight gradient) and prints to stderr how long
  the sleep took (``SLEPT``). Both ranks' rows end together (the all-reduce waits); the gradient
  buckets were ready 80 ms later on rank 1;
* ``stream``: no plant; the rows also go to the sinks named after the scenario:
  ``prometheus=PORT`` (rank k serves PORT + LOCAL_RANK and waits up to 30 s at the end for a
  last scrape) and ``mlflow=TRACKING_URI`` (one MLflow run per rank in the experiment ``ddp_gcn``).

After the run, rank 0 prints the cross-rank spikes of the job gathered over the process group
(``gnnmon.gather``) as one JSON line.
"""

from __future__ import annotations

import contextlib
import datetime
import gc
import json
import os
import signal
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch_geometric.nn import GCNConv

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gnnmon
from gnnmon import cuda_timed, gc_controlled, gc_paused, phase

SLEEP_STEP, GC_STEP, KILL_STEP, BACKWARD_STEP = 5, 12, 8, 7
BACKWARD_SLEEP_S = 0.08
SLEPT = "backward plant slept (s): "
"""What rank 1 prints to stderr after the backward plant's sleep, before the seconds it took."""


def slept_s(stderr: str) -> float:
    """The seconds the backward plant's sleep took, from rank 1's ``stderr`` (its one ``SLEPT`` line)."""
    (slept,) = [float(line[len(SLEPT):]) for line in stderr.splitlines() if line.startswith(SLEPT)]
    return slept


class GCN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = GCNConv(16, 32), GCNConv(32, 4)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.conv2(F.relu(self.conv1(x, edge_index)), edge_index)


def sinks(specs: list[str]) -> list[object]:
    """The sinks of ``name=value`` arguments (``prometheus=9180``, ``mlflow=sqlite:///runs/mlflow.db``)."""
    made: list[object] = []
    for spec in specs:
        name, _, value = spec.partition("=")
        if name == "prometheus":
            from gnnmon.integrations.prometheus import PrometheusSink
            made.append(PrometheusSink(int(value), linger=30.0))
        elif name == "mlflow":
            from gnnmon.integrations.mlflow import MlflowSink
            made.append(MlflowSink(tracking_uri=value, experiment="ddp_gcn"))
        else:
            raise SystemExit(f"unknown sink {spec!r}: prometheus=PORT or mlflow=TRACKING_URI")
    return made


def main() -> None:
    path, scenario = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
    rank = dist.get_rank()
    torch.manual_seed(rank)
    x, edge_index = torch.randn(300, 16), torch.randint(0, 300, (2, 1200))
    y = torch.randint(0, 4, (300,))
    torch.manual_seed(0)
    model = DistributedDataParallel(GCN())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    heap = [[i] for i in range(1_000_000)] if scenario == "plant" and rank == 0 else None
    at = [0]  # the step running, for the backward plant
    if scenario == "backward":
        gnnmon.watch_buckets(model)
        if rank == 1:
            weight = next(model.module.conv1.parameters())

            def slow_backward(grad: torch.Tensor) -> None:
                if at[0] == BACKWARD_STEP:
                    t0 = time.perf_counter()
                    time.sleep(BACKWARD_SLEEP_S)
                    # what the sleep really took: a busy machine wakes the thread late
                    print(f"{SLEPT}{time.perf_counter() - t0:.6f}", file=sys.stderr, flush=True)

            weight.register_hook(slow_backward)

    def plain_step(s: int) -> None:
        at[0] = s
        loss = F.cross_entropy(model(x, edge_index), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def step(s: int) -> None:
        with phase("forward"):
            if scenario == "plant" and rank == 1 and s == SLEEP_STEP:
                time.sleep(0.05)
            if scenario == "plant" and rank == 0 and s == GC_STEP:
                gc.collect()
            loss = F.cross_entropy(model(x, edge_index), y)
        with phase("backward"):
            loss.backward()
        with phase("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    if scenario == "backward":
        step = plain_step
    step = cuda_timed(label="step")(gc_controlled(collect=5)(step) if scenario == "gc" else step)
    if scenario != "gc":
        gc.disable()  # automatic collections off: only the planted one may pause a rank
    try:
        with (gnnmon.collect(path, sinks=sinks(sys.argv[3:])) as run,
              gc_paused() if scenario == "gc" else contextlib.nullcontext()):
            for s in range(20):
                if scenario == "kill" and rank == 1 and s == KILL_STEP:
                    os.kill(os.getpid(), signal.SIGKILL)
                step(s)
    finally:
        gc.enable()
        del heap
    job = gnnmon.gather(run)
    if job is not None:
        spikes = gnnmon.Report(job).cross_rank()["spikes"]
        print(json.dumps([[s["index"], s["slowest_rank"], s["cause"]] for s in spikes]))
    # Every rank waits for rank 0's report before any tears the group down: a rank that destroys
    # it and exits while another still holds its connections can make gloo abort the other
    # ("terminate called without an active exception").
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
