"""``gnnmon run``'s wait for data: the outermost ``next()`` of a loader's own iterator (PyG's
``DataLoaderIterator``, with ``filter_per_worker=False``, gathers features and runs the transform
after the inner DataLoader's ``next()``), and a PyG neighbour loader's time split as
``watch_loader`` splits it. Planted: the loader's transform sleeps a known time a batch; the wait
must hold it, and the split must name it."""

from __future__ import annotations

import time

import pytest
import torch
from torch.utils.data import DataLoader

import gnnmon
from gnnmon.measure.auto_steps import AutoSteps

pytest.importorskip("torch_geometric")

READ_S = 0.02
"""Seconds the planted transform sleeps a batch."""


def _read(batch):
    time.sleep(READ_S)
    return batch


@pytest.mark.parametrize("per_worker", [True, False], ids=["filter-in-collate", "filter-in-DataLoaderIterator"])
def test_a_pyg_neighbour_loader_s_wait_holds_its_gather_and_transform_split_as_watch_loader_splits_it(per_worker):
    from torch_geometric.data import Data
    from torch_geometric.loader.base import DataLoaderIterator

    from gnnmon.integrations.pyg_sampler import neighbor_loader

    torch.manual_seed(0)
    data = Data(x=torch.rand(200, 4), edge_index=torch.randint(0, 200, (2, 1000)))
    loader = neighbor_loader(data, num_neighbors=[3, 2], batch_size=50, transform=_read,  # planted: 4 batches
                             filter_per_worker=per_worker)
    assert isinstance(iter(loader), DataLoaderIterator) is not per_worker
    own = {name: vars(loader).get(name) for name in ("collate_fn", "filter_fn", "transform")}
    before = (DataLoaderIterator.__next__, DataLoader.__iter__)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gnnmon.collect() as run:
        engine = AutoSteps(run).start()
        for _ in range(2):  # the first pass split too: the wrappers go on before its iterator is made
            for batch in loader:
                opt.zero_grad()
                model(batch.x).sum().backward()
                opt.step()
        summary = engine.stop()
    rows = run.records
    assert [(r["label"], r["batches"], r["updates"]) for r in rows] == [("step", 1, 1)] * 8
    assert summary["batches"] == 8  # PyG's outer next() and the DataLoader's inside it: one batch each
    for r in rows:
        assert r["data_transform_s"] >= READ_S and r["data_wait_s"] >= r["data_transform_s"]
        assert r["data_sample_s"] > 0 and r["data_gather_s"] > 0
    assert (DataLoaderIterator.__next__, DataLoader.__iter__) == before  # taken off at the end
    assert {name: vars(loader).get(name) for name in ("collate_fn", "filter_fn", "transform")} == own


class _Outer:
    """An iterator of a loader's own (as PyG's): the inner DataLoader's batch, then planted work."""

    def __init__(self, inner):
        self.inner = inner

    def __iter__(self):
        return self

    def __next__(self):
        batch = next(self.inner)
        time.sleep(READ_S)  # planted: after the inner next(), inside the outer one
        return batch


class _OwnLoader(DataLoader):
    def _get_iterator(self):
        return _Outer(super()._get_iterator())


def test_the_outermost_next_of_a_loader_s_own_iterator_is_the_wait():
    loader = _OwnLoader(torch.utils.data.TensorDataset(torch.randn(12, 4)), batch_size=4)  # planted: 3 batches
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gnnmon.collect() as run:
        engine = AutoSteps(run).start()
        for (x,) in loader:
            model(x).sum().backward()
            opt.step()
        engine.stop()
    assert [(r["batches"], r["updates"]) for r in run.records] == [(1, 1)] * 3
    assert all(r["data_wait_s"] >= READ_S for r in run.records)
    assert "__wrapped__" not in vars(_Outer)["__next__"].__dict__  # its class's __next__ back as it was
