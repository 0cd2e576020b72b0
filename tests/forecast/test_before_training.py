"""The batch-size search's summary says, where it answers a size measured on the host beside a
neighbour loader, that the calibration's loader must be dropped before one of the answer's size is
built (docs/memory.md: a NeighborLoader keeps its own copy of the graph's edges, 16 bytes an edge,
in a reference cycle; a second copy beside it adds to every step's peak, which the answer was
measured without). Not on a GPU (its peak does not hold the host's copy), not for a loader of whole
graphs (it holds no copy of its dataset), not where no size was answered."""

from __future__ import annotations

import warnings

import pytest
import torch

import gnnmon
from gnnmon.forecast.calibrate import EDGE_COPY_BYTES, before_training
from gnnmon.forecast.search import BatchSizeSearch

pytest.importorskip("torch_geometric")
from torch_geometric.datasets import FakeDataset
from torch_geometric.loader import DataLoader

from gnnmon.integrations.pyg_sampler import neighbor_loader
from tests.forecast.test_calibrate import graph, planted_step

NODES = 3000
EDGES = 8 * NODES  # tests/forecast/test_calibrate.py's graph


def host_step():
    """A step measured on the host: the batch's own tensors, nothing planted on a device."""
    @gnnmon.monitor_memory_device(label="train_step", device="cpu")
    def train_step(batch):
        return float(batch.x.sum())

    return train_step


def calibrate_on_host(loader):
    with warnings.catch_warnings():  # host memory inexact unless the process called exact_host_memory()
        warnings.simplefilter("ignore", RuntimeWarning)
        return gnnmon.calibrate(host_step(), loader, capacity="64GiB", twins=False, exact_host=False)


def test_a_host_search_beside_a_neighbour_loader_says_to_drop_it_first():
    """64 GiB: every size measured fits, so the search answers one (how far it goes depends on whether
    the inexact host memory's model can be trusted to aim), and the summary says to drop the
    calibration's loader (del loader; gc.collect()) before one of that size, naming the copy's bytes
    for the graph's 24,000 edges."""
    torch.manual_seed(0)
    loader = neighbor_loader(graph(NODES), [5, 5], batch_size=64, input_nodes=torch.arange(1000))
    cal = calibrate_on_host(loader)
    answer = cal.search.batch_size
    assert answer > 0, cal.search.summary()
    text = cal.summary()
    assert (f"note: drop this calibration's loader before you build one of {answer:,} items "
            "(del loader; gc.collect())") in text, text
    assert f"{EDGE_COPY_BYTES} bytes an edge (375 KiB for this graph's {EDGES:,} edges)" in text, text
    assert EDGE_COPY_BYTES * EDGES == 375 * 1024


def test_no_such_note_on_a_gpu_for_whole_graphs_or_without_an_answer(fake_cuda):
    torch.manual_seed(0)
    loader = neighbor_loader(graph(NODES), [5, 5], batch_size=64, input_nodes=torch.arange(1000))
    on_gpu = gnnmon.calibrate(planted_step(fake_cuda), loader, capacity="16GiB", twins=False)
    assert on_gpu.search.batch_size > 0 and on_gpu.search.before_training is None
    assert "del loader" not in on_gpu.summary()
    graphs = DataLoader(FakeDataset(num_graphs=64, avg_num_nodes=30, num_channels=4), batch_size=8)
    whole = calibrate_on_host(graphs)
    assert whole.search.batch_size > 0 and "del loader" not in whole.summary(), whole.summary()
    host_model = calibrate_on_host(loader).model
    assert before_training(loader, host_model, 0) is None
    none = BatchSizeSearch(0, 1.0, 2, before_training=before_training(loader, host_model, 5))
    assert none.before_training and "del loader" not in none.summary()
