"""The synthetic stand-ins have the statistics of the datasets they replace."""

from __future__ import annotations

import torch

from play.synthetic import CORA, FLICKR, planted_partition


def check_graph(data, spec):
    n = data.num_nodes
    assert n == spec.num_nodes
    assert data.edge_index.size(1) == spec.num_edges
    assert data.x.shape == (spec.num_nodes, spec.num_features)
    assert int(data.y.max()) + 1 == spec.num_classes
    assert data.is_undirected() and not data.has_self_loops()
    ei = data.edge_index
    assert torch.unique(ei[0] * n + ei[1]).numel() == ei.size(1)  # no duplicate edges
    masks = data.train_mask.int() + data.val_mask.int() + data.test_mask.int()
    assert bool((masks == 1).all())  # every node in exactly one split


def test_flickr_stand_in_full_size():
    data = planted_partition(FLICKR)
    check_graph(data, FLICKR)
    assert data.train_mask.sum() == 44_625 and data.val_mask.sum() == 22_312
    # Planted homophily: close to the requested share (uniform partners add 1/7 of the rest).
    same = (data.y[data.edge_index[0]] == data.y[data.edge_index[1]]).float().mean().item()
    assert abs(same - (0.32 + 0.68 / 7)) < 0.02


def test_cora_stand_in():
    data = planted_partition(CORA)
    check_graph(data, CORA)
    assert data.train_mask.sum() == 140


def test_scaled_keeps_the_average_degree():
    small = FLICKR.scaled(0.1)
    assert small.num_nodes == 8_925 and small.num_edges == 89_974
    check_graph(planted_partition(small, seed=1), small)


def test_pcqm4mv2_like_molecules():
    from play.synthetic import PCQM4MV2, molecules

    mols = molecules(PCQM4MV2, 3000)
    atoms = sum(m.num_nodes for m in mols) / len(mols)
    bonds = sum(m.edge_index.size(1) // 2 for m in mols) / len(mols)
    assert abs(atoms - 14.1) < 0.3 and abs(bonds - 14.6) < 0.4
    assert all(m.x.shape[1] == 9 and m.edge_attr.shape == (m.edge_index.size(1), 3) for m in mols)
    assert all(m.is_undirected() and not m.has_self_loops() for m in mols[:200])
