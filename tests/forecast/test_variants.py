"""Nodes and edges measured apart: a neighbour sampler keeps edges per node within a few per cent,
so its batches alone cannot tell a node's cost from an edge's; calibrate's denser twins (every edge
of the graph among a batch's nodes) can. The planted step allocates ``64 MiB + 2,048 B·nodes + 512
B·edges`` on the fake CUDA allocator."""

from __future__ import annotations

import pytest
import torch

import gnnmon

pyg = pytest.importorskip("torch_geometric")
from torch_geometric.data import Data  # noqa: E402
from torch_geometric.datasets import FakeDataset  # noqa: E402
from torch_geometric.loader import DataLoader  # noqa: E402
from torch_geometric.utils import subgraph  # noqa: E402

from gnnmon.forecast import variants  # noqa: E402
from gnnmon.integrations.pyg_sampler import neighbor_loader  # noqa: E402
from tests.forecast.test_calibrate import A, B, C, planted_step  # noqa: E402


def community_graph(communities: int = 8000, size: int = 50, per_node: int = 10) -> Data:
    """Communities of ``size`` nodes, as a real graph's clusters: each node's ``per_node`` in-edges
    come from the members of its own community at fixed offsets around it. A sampled neighbourhood
    stays in its seed's community and seldom meets another seed's (every sampled batch has 1.65-1.72
    edges per node), and the edges among a batch's nodes are several times those sampled."""
    g = torch.Generator().manual_seed(0)
    n = communities * size
    offsets = torch.randperm(size - 1, generator=g)[:per_node] + 1
    dst = torch.arange(n).repeat_interleave(per_node)
    src = (dst // size) * size + (dst % size + offsets.repeat(n)) % size
    return Data(x=torch.randn(n, 4), edge_index=torch.stack([src, dst]),
                edge_attr=torch.arange(n * per_node, dtype=torch.float).view(-1, 1))


@pytest.fixture
def loader():
    return neighbor_loader(community_graph(), [10, 5], batch_size=128, shuffle=True)


def test_sampled_batches_alone_cannot_split_the_cost_the_twins_can(fake_cuda, loader):
    """The premise planted: the loader's own batches keep edges per node within 5 %; the fit of them
    alone puts every byte on nodes. With the twins, both costs come out within 10 % of the planted
    2,048 B per node and 512 B per edge, and a full batch (8 edges per node) is forecast within 10 %."""
    torch.manual_seed(0)  # the sampler draws from torch's generator: the same batches in any test order
    alone = gnnmon.calibrate(planted_step(fake_cuda), loader, twins=False)
    ratios = [s["num_edges"] / s["num_nodes"] for s in alone.shapes]
    assert max(ratios) / min(ratios) < 1.05, ratios  # the premise: edges per node within 5 %
    assert alone.model.terms == ("num_nodes",) and "num_edges" in alone.model.confounded
    assert alone.measured_terms()["num_edges"].startswith("not measured")

    cal = gnnmon.calibrate(planted_step(fake_cuda), loader)
    model = cal.model
    assert set(model.terms) == {"num_nodes", "num_edges"}, model.summary()
    assert model.coefficients["num_nodes"] == pytest.approx(B, rel=0.10)
    assert model.coefficients["num_edges"] == pytest.approx(C, rel=0.10)
    assert cal.measured_terms() == {"num_nodes": "measured", "num_edges": "measured"}
    assert [(t["twin"], t["size"]) for t in cal.twins] == [("denser", 64), ("denser", 128), ("denser", 256)]
    assert all(t["num_edges"] > 4 * t["num_nodes"] for t in cal.twins)  # far off the sampler's 1.6-1.7
    assert "3 denser twins" in cal.summary()

    full = loader.data
    truth = A + B * full.num_nodes + C * full.num_edges
    fc = gnnmon.forecast(full, cal, progress=False)  # one graph: the full-batch step
    assert fc.batches == 1 and fc.worst[0]["num_edges"] == full.num_edges
    assert fc.worst[0]["bytes"] == pytest.approx(truth, rel=0.10)
    assert fc.worst[0]["upper_bytes"] >= truth  # its bound covers it
    old = gnnmon.forecast([full], alone, progress=False).worst[0]
    assert old["bytes"] < 0.8 * truth  # all on nodes: a full batch's edges are missed


@pytest.mark.parametrize("chunk", [variants.CHUNK, 100_003])  # the graph's index whole, and in 40 parts
def test_a_denser_twin_holds_every_edge_among_the_batch_nodes_and_keeps_its_fields(loader, monkeypatch, chunk):
    monkeypatch.setattr(variants, "CHUNK", chunk)
    batch = loader(torch.arange(32))
    graph = loader.data
    twin = variants.denser(batch, graph)
    expected, attr = subgraph(batch.n_id, graph.edge_index, graph.edge_attr, relabel_nodes=True,
                              num_nodes=graph.num_nodes)
    assert twin.num_nodes == batch.num_nodes and twin.batch_size == 32
    assert torch.equal(twin.x, batch.x) and torch.equal(twin.n_id, batch.n_id)
    assert sorted(map(tuple, twin.edge_index.t().tolist())) == sorted(map(tuple, expected.t().tolist()))
    assert torch.equal(twin.edge_attr.view(-1), graph.edge_attr[twin.e_id].view(-1))
    assert sorted(twin.edge_attr.view(-1).tolist()) == sorted(attr.view(-1).tolist())
    assert twin.num_edges >= batch.num_edges  # the sampled edges are among them
    assert "num_sampled_edges" not in twin and "num_sampled_edges" in batch  # its hops no longer hold


def test_a_step_that_refuses_a_twin_is_noted_and_the_calibration_stands(fake_cuda, loader):
    inner = planted_step(fake_cuda)

    def step(batch):
        if "num_sampled_edges" not in batch:  # a step that trims to layers needs the hop counts
            raise KeyError("num_sampled_edges")
        inner(batch)

    cal = gnnmon.calibrate(step, loader, label="train_step")
    assert len(cal.twins) == 1 and "KeyError" in cal.twins[0]["error"], cal.twins
    assert cal.model.trusted and "did not run" in cal.summary()
    assert cal.measured_terms()["num_edges"].startswith("not measured")


def test_a_loader_of_whole_graphs_runs_no_twins(fake_cuda):
    """A batch of whole graphs holds every edge among its nodes already: no denser twin; graphs of
    one density leave the split unmeasured, and the model says so."""
    dataset = FakeDataset(num_graphs=200, avg_num_nodes=40, avg_degree=6, num_channels=4)
    cal = gnnmon.calibrate(planted_step(fake_cuda), DataLoader(dataset, batch_size=16))
    assert cal.twins == []
    assert cal.measured_terms()["num_nodes"] == "measured"
    assert cal.measured_terms()["num_edges"].startswith("not measured: it moved with num_nodes")


def test_a_batch_that_cannot_be_densified_says_so_with_none(loader):
    """No ``n_id`` (which graph nodes the batch holds), an edge attribute the graph does not hold,
    or a loader over a remote feature and graph store: no twin, rather than a wrong one."""
    batch = loader(torch.arange(8))
    graph = loader.data
    bare = batch.clone()
    del bare.n_id
    assert variants.denser(bare, graph) is None
    odd = batch.clone()
    odd.edge_weight = torch.ones(odd.num_edges)  # the batch's own, not the graph's
    assert variants.denser(odd, graph) is None
    assert variants.denser(batch, graph) is not None

    class StoreLoader:
        data = (object(), object())  # (FeatureStore, GraphStore)

    assert variants.graph_of(StoreLoader()) is None and variants.graph_of(loader) is graph


def test_a_batch_with_as_many_nodes_as_edges_is_still_densified(loader):
    """PyG tells node from edge attributes by their length; where a batch has as many edges as
    nodes, the graph says which of its fields are which."""
    batch = loader(torch.arange(16))
    keep = torch.zeros(batch.num_edges, dtype=torch.bool)
    keep[: batch.num_nodes] = True
    even = batch.edge_subgraph(keep)
    assert even.num_edges == even.num_nodes  # the planted ambiguity
    twin = variants.denser(even, loader.data)
    assert twin is not None and torch.equal(twin.x, batch.x) and twin.num_edges > even.num_edges


def test_a_disjoint_batch_that_repeats_nodes_gets_no_twin(loader):
    batch = loader(torch.arange(8))
    repeated = batch.clone()
    repeated.n_id = torch.cat([batch.n_id[:-1], batch.n_id[:1]])  # one graph node twice
    assert variants.denser(repeated, loader.data) is None


def test_a_twin_that_cannot_be_built_is_noted_and_the_calibration_stands(fake_cuda, loader, monkeypatch):
    def broken(batch, graph):
        raise IndexError("planted")

    monkeypatch.setattr(variants, "denser", broken)
    cal = gnnmon.calibrate(planted_step(fake_cuda), loader)
    assert cal.twins == [{"twin": "denser", "size": 64, "error": "it could not be built: IndexError: planted"}]
    assert cal.model.trusted and "did not run" in cal.summary()
