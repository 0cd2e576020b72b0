"""What ``watch_layers``, ``watch_loader`` and ``watch_buckets`` cost on the README's Quick start
loop, paired and interleaved: each pair runs the same batch through the README's decorated step on
a bare model and on a watched copy (same weights), in alternating order; the figure is the median
(and the mean, which carries the one-in-N watched steps of ``every=N``) of the per-pair
differences. ``watch_buckets``: a small ``DistributedDataParallel`` MLP in a one-process gloo group
(the all-reduce runs, over one rank; a 0.3 ms step, where a GCN step's noise would hide tens of
µs), against DDP's built-in all-reduce, with DDP's own Python ``allreduce_hook`` beside it: the
part any Python communication hook costs.

``--device cuda``: the same on the GPU (each call then waits for its GPU work, so that the figure
counts it), and what ``collect(memory_history=N)`` costs a step: PyTorch's allocation history
recorded for one call of each pair and not for the other.

    python benchmarks/layers_cost.py [--pairs 400] [--device cuda]   (watch_buckets: 8 turns per pair)
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch_geometric.datasets import FakeDataset
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GCNConv, global_mean_pool

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gnnmon
from gnnmon import cuda_timed, gc_controlled, monitor_memory_device, phase


class GCN(torch.nn.Module):  # the README's
    def __init__(self, features: int, hidden: int, classes: int):
        super().__init__()
        self.conv1, self.conv2 = GCNConv(features, hidden), GCNConv(hidden, hidden)
        self.head = torch.nn.Linear(hidden, classes)

    def forward(self, batch: Any) -> torch.Tensor:
        x = F.relu(self.conv1(batch.x, batch.edge_index))
        x = F.relu(self.conv2(x, batch.edge_index))
        return self.head(global_mean_pool(x, batch.batch))


def make_step(label: str) -> Any:
    @monitor_memory_device(label=label)
    @cuda_timed
    @gc_controlled
    def train_step(model: Any, batch: Any, optimizer: Any) -> Any:
        gnnmon.record_graph(batch)
        with phase("forward"):
            loss = F.cross_entropy(model(batch), batch.y)
        with phase("backward"):
            loss.backward()
        with phase("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return loss

    return train_step


def synchronize() -> None:
    """Wait for the GPU's work (``--device cuda``), so that a timed call counts it."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


DEVICE = torch.device("cpu")


def paired(bare: Any, watched: Any, pairs: int) -> tuple[float, float, float]:
    """(median difference, mean difference, median bare call) in µs over ``pairs`` pairs."""
    diffs, base = [], []
    for i in range(pairs):
        order = (bare, watched) if i % 2 else (watched, bare)
        took = {}
        for fn in order:
            t0 = time.perf_counter_ns()
            fn(i)
            synchronize()
            took[fn] = time.perf_counter_ns() - t0
        diffs.append(took[watched] - took[bare])
        base.append(took[bare])
    return statistics.median(diffs) / 1e3, statistics.fmean(diffs) / 1e3, statistics.median(base) / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=400)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args()
    global DEVICE
    DEVICE = torch.device(args.device)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dataset = FakeDataset(num_graphs=256, avg_num_nodes=40, num_channels=16, num_classes=4, task="graph")
    batches = [b.to(DEVICE) for b in DataLoader(dataset, batch_size=32)]
    where = torch.cuda.get_device_name(DEVICE) if DEVICE.type == "cuda" else "CPU"
    print(f"README Quick start loop (GCN 16-64-4, batches of 32 graphs) on {where}, {args.pairs} pairs, "
          f"torch {torch.__version__}, {torch.get_num_threads()} thread")
    print("| variant | median extra µs/step | mean extra µs/step | bare step µs | extra % |")
    print("| --- | ---: | ---: | ---: | ---: |")
    with gnnmon.collect(max_records=100):
        for name, every, memory in (("watch_layers(every=1)", 1, True), ("watch_layers(every=10)", 10, True),
                                    ("watch_layers(every=1, memory=False)", 1, False)):
            model = GCN(16, 64, 4).to(DEVICE)
            twin = copy.deepcopy(model)
            opts = [torch.optim.Adam(m.parameters(), lr=1e-3) for m in (model, twin)]
            bare_step, watched_step = make_step("bare"), make_step("watched")
            with gnnmon.watch_layers(twin, every=every, memory=memory):
                for i in range(20):  # warm-up, both
                    bare_step(model, batches[i % len(batches)], opts[0])
                    watched_step(twin, batches[i % len(batches)], opts[1])
                med, mean, base = paired(
                    lambda i, f=bare_step, m=model, o=opts[0]: f(m, batches[i % len(batches)], o),
                    lambda i, f=watched_step, m=twin, o=opts[1]: f(m, batches[i % len(batches)], o),
                    args.pairs)
            print(f"| {name} | {med:.0f} | {mean:.0f} | {base:.0f} | {100 * mean / base:.1f} |")
        loader = DataLoader(dataset, batch_size=32)
        plain, watched_it = [iter(loader)], [iter(gnnmon.watch_loader(loader))]

        def take(holder: list[Any], make: Any) -> None:
            try:
                next(holder[0])
            except StopIteration:
                holder[0] = make()
                next(holder[0])

        med, mean, base = paired(lambda i: take(plain, lambda: iter(loader)),
                                 lambda i: take(watched_it, lambda: iter(gnnmon.watch_loader(loader))),
                                 args.pairs)
        print(f"| watch_loader (per batch, DataLoader of 32 graphs) | {med:.1f} | {mean:.1f} | {base:.0f} | "
              f"{100 * mean / base:.1f} |")
    buckets(args.pairs)
    if DEVICE.type == "cuda":
        memory_history(batches, args.pairs)


def memory_history(batches: list[Any], pairs: int, entries: int = 100_000) -> None:
    """The row for ``collect(memory_history=entries)``: the README's step with PyTorch's allocation
    history recorded (``torch.cuda.memory._record_memory_history``, what that option starts) and
    without, alternating; recording is switched outside the timed calls."""
    from torch.cuda.memory import _record_memory_history as record

    model = GCN(16, 64, 4).to(DEVICE)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    step = make_step("step")

    def plain(i: int) -> None:
        step(model, batches[i % len(batches)], opt)

    def recorded(i: int) -> None:
        step(model, batches[i % len(batches)], opt)

    diffs, base = [], []
    with gnnmon.collect(max_records=100):
        for i in range(20):
            plain(i)
        for i in range(pairs):
            took = {}
            for fn in ((plain, recorded) if i % 2 else (recorded, plain)):
                if fn is recorded:
                    record(max_entries=entries)
                synchronize()
                t0 = time.perf_counter_ns()
                fn(i)
                synchronize()
                took[fn] = time.perf_counter_ns() - t0
                if fn is recorded:
                    record(enabled=None)
            diffs.append(took[recorded] - took[plain])
            base.append(took[plain])
    med, mean, bare = statistics.median(diffs) / 1e3, statistics.fmean(diffs) / 1e3, statistics.median(base) / 1e3
    print(f"| collect(memory_history={entries}): allocation history recorded | {med:.0f} | {mean:.0f} | "
          f"{bare:.0f} | {100 * mean / bare:.1f} |")


def buckets(pairs: int) -> None:
    """The ``watch_buckets`` rows (see the module doc): a step of a small DDP MLP (one bucket),
    short enough that microseconds show; DDP's built-in all-reduce, a plain Python comm hook and
    the watch run in turn, each against the built-in in the same turn."""
    import datetime

    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel

    backend = "nccl" if DEVICE.type == "cuda" and dist.is_nccl_available() else "gloo"
    # a one-rank group meets in this process's own store: no port that another job on the machine
    # can take between a probe and the bind; a rendezvous that still stalls fails within a minute
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=60))
    try:
        torch.manual_seed(0)
        base = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
        base = base.to(DEVICE)
        x, y = torch.randn(256, 64, device=DEVICE), torch.randint(0, 4, (256,), device=DEVICE)
        ids = [DEVICE.index or 0] if DEVICE.type == "cuda" else None
        names = ("DDP's built-in all-reduce", "a Python comm hook (DDP's allreduce_hook)", "watch_buckets")
        models = [DistributedDataParallel(copy.deepcopy(base), device_ids=ids) for _ in names]
        models[1].register_comm_hook(None, allreduce_hook)
        for m in models[2:]:
            gnnmon.watch_buckets(m)

        @cuda_timed
        def step(model: Any) -> None:
            F.cross_entropy(model(x), y).backward()

        took: list[list[int]] = [[] for _ in models]
        with gnnmon.collect(max_records=100) as run:
            for i in range(pairs * 8 + 20):
                for k in (range(len(models)) if i % 2 else reversed(range(len(models)))):
                    t0 = time.perf_counter_ns()
                    step(models[k])
                    synchronize()
                    if i >= 20:  # after a warm-up (DDP rebuilds its buckets after the first step)
                        took[k].append(time.perf_counter_ns() - t0)
            count = run.records[-1].get("ddp_buckets")
        bare = took[0]
        print(f"| DDP step of a 64-64-4 MLP ({count} bucket), against DDP's built-in all-reduce, "
              f"{len(bare)} turns: | | | | |")
        for name, times in zip(names[1:], took[1:], strict=True):
            diffs = [a - b for a, b in zip(times, bare, strict=True)]
            med, mean = statistics.median(diffs) / 1e3, statistics.fmean(diffs) / 1e3
            base_us = statistics.median(bare) / 1e3
            print(f"| {name} | {med:.1f} | {mean:.1f} | {base_us:.0f} | {100 * med / base_us:.1f} |")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
