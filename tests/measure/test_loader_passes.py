"""``watch_loader`` over the loops PyG users write: three epochs, a watch per epoch or one for the
run, a pass broken off or dropped, an evaluation pass over the loader itself in between, workers
forked, spawned or persistent. Every batch the loop gets is the loader's own (its type checked),
every row has its ``data_wait_s``, and the loader is itself again between passes."""

from __future__ import annotations

import gc

import pytest
import torch
from torch.utils.data import DataLoader as TorchLoader
from torch.utils.data import TensorDataset

import gnnmon
from gnnmon.measure.loader import TIMES

pyg = pytest.importorskip("torch_geometric")
from torch_geometric.data import Data  # noqa: E402
from torch_geometric.loader import DataLoader as PygLoader  # noqa: E402

from gnnmon.integrations.pyg_sampler import link_neighbor_loader, neighbor_loader  # noqa: E402

N = 600
EPOCHS = 3


def graph() -> Data:
    torch.manual_seed(0)
    return Data(x=torch.randn(N, 8), edge_index=torch.randint(0, N, (2, 4000)), y=torch.randint(0, 3, (N,)))


def loaders(workers: int = 0, **kw):
    """name -> (a loader of that kind, the type of its batches)."""
    data = graph()
    edges = data.edge_index[:, :400]
    return {
        "NeighborLoader": (neighbor_loader(data, [4, 2], batch_size=100, num_workers=workers, **kw), Data),
        "LinkNeighborLoader": (link_neighbor_loader(data, [4, 2], edge_label_index=edges, batch_size=100,
                                                num_workers=workers, **kw), Data),
        "PyG DataLoader": (PygLoader([graph() for _ in range(4)], batch_size=2, num_workers=workers, **kw),
                           pyg.data.Batch),
        "torch DataLoader": (TorchLoader(TensorDataset(torch.randn(40, 4)), batch_size=8, num_workers=workers, **kw),
                             list),
    }


def own_methods(loader):
    """What a watch may change on a loader: its instance's own methods and its sampler's."""
    sampler = getattr(loader, "node_sampler", None) or getattr(loader, "link_sampler", None)
    return ({k: vars(loader).get(k) for k in ("collate_fn", "filter_fn", "transform")},
            dict(vars(sampler)) if sampler is not None else None)


@gnnmon.cuda_timed(device="cpu")
def step(batch):
    return batch


def assert_own(batches, kind):
    assert batches and all(isinstance(b, kind) for b in batches), {type(b).__name__ for b in batches}
    assert not any(TIMES in getattr(b, "__dict__", {}) for b in batches)  # the watch took its times off


def evaluate(loader, kind):
    """An evaluation pass straight over the loader: its own batches, nothing of gnnmon's."""
    batches = list(loader)
    assert batches and all(isinstance(b, kind) for b in batches)
    return len(batches)


@pytest.mark.parametrize("form", ["a watch per epoch", "one watch for the run", "a with block per epoch"])
def test_three_epochs_give_the_loaders_own_batches_and_a_wait_on_every_row(form):
    for name, (loader, kind) in loaders().items():
        before = own_methods(loader)
        watch = gnnmon.watch_loader(loader)
        with gnnmon.collect() as run:
            for epoch in range(EPOCHS):
                run.mark("epoch", epoch)
                if form == "a watch per epoch":
                    batches = [step(b) for b in gnnmon.watch_loader(loader)]
                elif form == "one watch for the run":
                    batches = [step(b) for b in watch]
                else:
                    with gnnmon.watch_loader(loader) as watched:
                        batches = [step(b) for b in watched]
                assert_own(batches, kind)
                assert own_methods(loader) == before, name  # itself again between passes
                evaluate(loader, kind)
        rows = run.records
        assert len(rows) == EPOCHS * len(loader), name
        assert all(r["data_wait_s"] is not None and r["data_wait_s"] >= 0 for r in rows), name
        if kind is Data:  # the neighbour loaders' split, on every row
            assert all(r["data_sample_s"] > 0 and r["data_gather_s"] >= 0 and r["data_hop_0_nodes"] > 0
                       for r in rows), name


def test_a_pass_broken_off_or_dropped_puts_the_loader_back():
    loader, kind = loaders()["NeighborLoader"]
    before = own_methods(loader)
    watch = gnnmon.watch_loader(loader)
    with gnnmon.collect() as run:
        for b in watch:  # broken off after one batch
            step(b)
            break
        assert own_methods(loader) == before
        it = iter(watch)
        step(next(it))
        assert own_methods(loader) != before  # a pass is open: the wrappers are on
        del it
        gc.collect()
        assert own_methods(loader) == before  # dropped unfinished: ended by the collector
        evaluate(loader, kind)
        assert_own([step(b) for b in watch], kind)  # the next epoch, whole
    assert len(run.records) == 2 + len(loader)
    assert all(r["data_wait_s"] is not None for r in run.records)


def test_passes_that_overlap_share_one_set_of_wrappers():
    """Two passes open on one loader (a watch per epoch whose previous pass was left open, or two
    watches): the times are never wrapped twice, and the loader is itself once both end."""
    loader, kind = loaders()["NeighborLoader"]
    before = own_methods(loader)
    first, second = iter(gnnmon.watch_loader(loader)), iter(gnnmon.watch_loader(loader))
    with gnnmon.collect() as run:
        a, b = step(next(first)), step(next(second))
        assert_own([a, b], kind)
        assert vars(loader)["collate_fn"].func is type(loader).collate_fn  # one wrapper, around the loader's own
        first.close()
        assert own_methods(loader) != before  # the second pass still needs them
        rest = [step(x) for x in second]
        assert_own(rest, kind)
    assert own_methods(loader) == before
    assert all(r["data_sample_s"] > 0 for r in run.records)


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_workers_forked_or_spawned_give_the_loaders_own_batches_and_the_split_on_every_row(context):
    import multiprocessing

    if context not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {context} here")
    persistent = context == "spawn"  # spawned workers start once (seconds each), forked ones every epoch
    loader, kind = loaders(2, multiprocessing_context=context, persistent_workers=persistent)["NeighborLoader"]
    before = own_methods(loader)
    with gnnmon.collect() as run:
        for _ in range(EPOCHS):
            assert_own([step(b) for b in gnnmon.watch_loader(loader)], kind)
            assert own_methods(loader) == before
        evaluate(loader, kind)  # persistent workers still time their batches: the loop gets them as they are
    kept = getattr(loader, "_iterator", None)  # persistent workers: ended here, not when the loader is freed
    if kept is not None:
        getattr(kept, "iterator", kept)._shutdown_workers()
    rows = run.records
    assert len(rows) == EPOCHS * len(loader)
    assert all(r["data_wait_s"] is not None and r["data_sample_s"] > 0 and r["data_gather_s"] >= 0
               for r in rows)
