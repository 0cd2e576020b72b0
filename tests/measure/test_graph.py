"""Batch shapes read from PyG objects of known shape, without touching values."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Batch, Data, HeteroData

import gnnmon
from gnnmon import graph_shape, monitor_memory_device


def chain(n):
    """A path graph on n nodes: n - 1 edges (one direction)."""
    src = torch.arange(n - 1)
    return Data(x=torch.ones(n, 3), edge_index=torch.stack([src, src + 1]))


def test_batch_of_known_graphs():
    batch = Batch.from_data_list([chain(4), chain(5), chain(6)])
    assert graph_shape(batch) == {"num_nodes": 15, "num_edges": 12, "num_graphs": 3, "batch_size": None}


def test_single_data_and_neighbor_loader_style_batch():
    data = chain(10)
    assert graph_shape(data) == {"num_nodes": 10, "num_edges": 9, "num_graphs": 1, "batch_size": None}
    data.batch_size = 4  # NeighborLoader sets the seed count
    data.n_id = torch.arange(10)
    assert graph_shape(data)["batch_size"] == 4


def test_unknown_node_count_is_none_not_a_sync():
    data = Data(edge_index=torch.tensor([[0, 7], [7, 0]]))
    assert graph_shape(data)["num_nodes"] is None  # PyG would compute edge_index.max(): a sync
    data.num_nodes = 8
    assert graph_shape(data)["num_nodes"] == 8


def test_hetero_data_totals_and_per_type():
    h = HeteroData()
    h["paper"].x = torch.ones(5, 2)
    h["author"].num_nodes = 3
    h["author", "writes", "paper"].edge_index = torch.tensor([[0, 1, 2, 2], [0, 1, 2, 4]])
    h["paper", "cites", "paper"].edge_index = torch.tensor([[0, 1], [1, 2]])
    h["paper"].batch_size = 2
    shape = graph_shape(h)
    assert shape["num_nodes"] == 8 and shape["num_edges"] == 6 and shape["batch_size"] == 2
    assert shape["num_nodes__paper"] == 5 and shape["num_nodes__author"] == 3
    assert shape["num_edges__author__writes__paper"] == 4
    assert shape["num_edges__paper__cites__paper"] == 2


def test_decorated_rows_carry_the_shape():
    @monitor_memory_device
    def step(model, batch):
        return 1

    with gnnmon.collect() as run:
        step(None, Batch.from_data_list([chain(3), chain(3)]))
        step(None, batch=chain(7))
        step(None, 5)
    a, b, c = run.records
    assert (a["num_nodes"], a["num_edges"], a["num_graphs"]) == (6, 4, 2)
    assert (b["num_nodes"], b["num_edges"], b["num_graphs"]) == (7, 6, 1)
    assert "num_nodes" not in c


def test_not_pyg_gives_nothing():
    assert graph_shape(torch.ones(3)) == {}


def test_record_graph_adds_the_shape_to_the_current_row():
    with gnnmon.collect() as run:
        with gnnmon.phase("data"):
            assert gnnmon.record_graph(chain(5))["num_nodes"] == 5
    assert run.records[0]["num_nodes"] == 5 and run.records[0]["num_edges"] == 4
    with pytest.warns(RuntimeWarning, match="outside any decorated call or scope"):
        assert gnnmon.record_graph(chain(5)) == {}  # no row open: nothing to add to, and it says so
    with gnnmon.collect(), gnnmon.phase("data"), pytest.raises(TypeError, match="takes PyG data.*Tensor"):
        gnnmon.record_graph(torch.ones(3))
