"""A graph with hubs: a few seeds pull in far more nodes than the rest, so a loader's batches of one
size differ by a known factor, and a few draws at a size miss the heavy ones every epoch makes.

The planted graph: 2,000 seeds, every 1,000th (2) a hub whose in-neighbours are 200 shared leaves,
every other seed one private leaf; sampled one hop with every neighbour, a batch of ``k`` seeds
holding ``h`` hubs is exactly ``2k - h + 200`` nodes where ``h >= 1`` and ``2k`` where none: a light
draw of 100 seeds is 200 nodes, a heavy one 399 (about 2x). Every epoch draws every seed, so at
any size some batch of every epoch holds a hub, and none is heavier than ``2k + 199`` nodes. The
planted memory is ``A + B·nodes`` (no cost per edge: the heaviest batch is then the one of most
nodes), on the fake CUDA allocator for the search and a model fitted on that line for the budget;
the target is the truth of the heaviest batch of 100 seeds (399 nodes), so no size above 100 fits
and a batch of 100 does (from 101 up, every epoch holds one over it).

Each answer (the budget's, the search's) is run as training runs it: three shuffled epochs of the
loader at that batch size, every batch's planted peak under the target. Judged from the heaviest
of 3 draws at a size (about a 1 in 10 chance each of a hub at 100 seeds), the budget answered 193
and the search 157, and three epochs at either held batches over the target."""

from __future__ import annotations

import random

import pytest
import torch

import gnnmon

pyg = pytest.importorskip("torch_geometric")
from torch_geometric.data import Data  # noqa: E402

from gnnmon.integrations.pyg_sampler import neighbor_loader  # noqa: E402

MiB = 2**20
A, B = 64 * MiB, 40_000  # the planted truth: bytes, per node
SEEDS, EVERY, SHARED = 2000, 1000, 200  # seeds; every EVERY-th a hub; the leaves the hubs share


def truth(nodes: float) -> float:
    return A + B * nodes


def hub_graph() -> Data:
    """Seeds 0..1,999; leaves after them: the ``SHARED`` in-neighbours of every hub, then one private
    leaf for each other seed."""
    hubs = torch.arange(0, SEEDS, EVERY)
    others = torch.tensor([s for s in range(SEEDS) if s % EVERY])
    shared = SEEDS + torch.arange(SHARED)
    src = torch.cat([shared.repeat(len(hubs)), SEEDS + SHARED + torch.arange(len(others))])
    dst = torch.cat([hubs.repeat_interleave(SHARED), others])
    return Data(x=torch.randn(SEEDS + SHARED + len(others), 4), edge_index=torch.stack([src, dst]))


def loader_of(data: Data, batch_size: int):
    return neighbor_loader(data, [-1], batch_size=batch_size, input_nodes=torch.arange(SEEDS), shuffle=True)


TARGET = truth(2 * 100 + 199)


def epochs_over(data: Data, batch_size: int, epochs: int = 3) -> list[int]:
    """The nodes of every batch of ``epochs`` shuffled epochs at ``batch_size`` whose planted peak is
    over :data:`TARGET`; each batch's shape checked against the plant."""
    torch.manual_seed(1)
    over = []
    for _ in range(epochs):
        for b in loader_of(data, batch_size):
            k = int(b.batch_size)
            hubs = int((b.n_id[:k] % EVERY == 0).sum())
            assert int(b.num_nodes) == (2 * k - hubs + SHARED if hubs else 2 * k)
            if truth(int(b.num_nodes)) > TARGET:
                over.append(int(b.num_nodes))
    return over


def planted_model():
    rng = random.Random(2)
    rows = []
    for i in range(60):
        n = rng.randint(50, 1000)
        e = rng.randint(n // 2, 2 * n)
        rows.append({"label": "step", "index": i, "error": None, "num_nodes": n, "num_edges": e,
                     "mem_peak_bytes": truth(n) + rng.gauss(0, 16 * 1024)})
    return gnnmon.Report(rows).memory_model(figure="mem_peak_bytes")


def test_the_plant_a_light_draw_and_a_heavy_one_differ_by_the_hubs_they_hold():
    """A light draw of 100 seeds (no hub) is 200 nodes, far under the target; from 101 seeds up every
    epoch holds a batch over it (some batch holds a hub: at least ``2k - 2 + 200`` nodes)."""
    data = hub_graph()
    assert truth(200) < TARGET < truth(2 * 101 - 2 + SHARED)
    assert epochs_over(data, 100) == []
    assert len(epochs_over(data, 101, epochs=1)) >= 1


def test_the_budgets_batch_size_holds_for_the_batches_the_loader_draws():
    """The budget's batch size, trained for three epochs, keeps every batch under the target; and it
    says how many batches its worst was judged from."""
    data = hub_graph()
    loader = loader_of(data, 50)
    model = planted_model()
    fc = gnnmon.forecast(loader, model, capacity=TARGET, progress=False, anchor=False)
    budget = fc.budget(1.0)
    assert budget.batch_size >= 1, budget
    assert epochs_over(data, budget.batch_size) == [], budget
    k = budget.batch_size
    worst = fc.shape_at(k)["num_nodes"]  # an epoch draws both hubs: its heaviest batch holds one or both
    assert worst in (2 * k - 2 + SHARED, 2 * k - 1 + SHARED), (k, worst)
    assert budget.batch_size_from == (
        f"the heaviest of {SEEDS // k:,} batches its sampler draws at {k:,} items (one epoch's: every seed once): "
        f"{worst:,} nodes; a batch training draws is heavier than the heaviest drawn with a chance of at most "
        f"1 in {SEEDS // k + 1:,}; one epoch of {SEEDS // k:,} holds a heavier one with a chance of up to 50%"), \
        budget.batch_size_from
    assert budget.batch_size <= 100  # from 101 up every epoch holds a batch over the target (the plant)


def planted_step(fake_cuda):
    @gnnmon.monitor_memory_device(label="train_step", device="cuda:0")
    def train_step(batch):
        handles = []
        try:
            for nbytes in (A, B * batch.num_nodes):
                handles.append(fake_cuda.alloc(nbytes, 0))
        finally:
            for h in handles:
                fake_cuda.free(h)

    return train_step


def test_the_searchs_answer_holds_for_the_batches_the_loader_draws(fake_cuda):
    """The search's answer, trained for three epochs, keeps every batch under the target, and its
    probe at the answer ran the heaviest batch an epoch there draws, so a re-check runs it again
    (as heavy), not a fresh light draw."""
    torch.manual_seed(0)
    data = hub_graph()
    cal = gnnmon.calibrate(planted_step(fake_cuda), loader_of(data, 50), capacity=TARGET, fraction=1.0,
                           twins=False)
    found = cal.search
    assert found is not None and found.batch_size >= 1, cal.summary()
    assert epochs_over(data, found.batch_size) == [], found.summary()
    at = [p for p in found.probes if p["size"] == found.batch_size]
    assert at and all(p["num_nodes"] == at[0]["num_nodes"] for p in at), found.summary()
