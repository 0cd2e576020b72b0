"""The batching study (play/batching.py): the four algorithms against planted molecule sizes, the
padding against the model's own output, the significance test against planted groups, and the
whole script at a tiny size (Dynamo with the ``eager`` backend: its guards and recompilations
without a C++ compiler's minutes)."""

from __future__ import annotations

import json

import pytest
import torch

from play.batching import ALGORITHMS, Batcher, SchNetOnBonds, Shape, collate, main, next_pow2, permutation_p
from play.synthetic import QM9, qm9_molecules


def planted_sizes(n: int = 200) -> tuple[list[int], list[int]]:
    g = torch.Generator().manual_seed(1)
    nodes = torch.randint(3, 30, (n,), generator=g).tolist()
    edges = [2 * (k - 1) + 2 * int(r) for k, r in zip(nodes, torch.randint(0, 4, (n,), generator=g), strict=True)]
    return nodes, edges


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_graph_once_per_epoch_and_every_batch_fits_its_shape(algorithm):
    nodes, edges = planted_sizes()
    batcher = Batcher(algorithm, nodes, edges, batch_size=16)
    order = torch.randperm(len(nodes), generator=torch.Generator().manual_seed(0)).tolist()
    seen = []
    shapes = set()
    for idx, shape in batcher.epoch(order):
        assert idx, "an empty batch"
        seen += idx
        n, e = sum(nodes[j] for j in idx), sum(edges[j] for j in idx)
        if algorithm == "unpadded":
            assert shape is None and len(idx) <= 16
            continue
        assert shape.nodes >= n + 1 and shape.edges >= e and shape.graphs >= len(idx) + 1  # room for padding
        shapes.add(shape)
        if algorithm == "static-64":
            assert shape.nodes % 64 == 0 and shape.edges % 64 == 0 and shape.nodes - n <= 64
        elif algorithm == "static-2^N":
            assert shape.nodes == next_pow2(n + 1) and shape.edges == next_pow2(e)
        elif algorithm == "static-constant":
            assert shape == batcher.constant == Shape(16 * max(nodes) + 1, 16 * max(edges), 17)
    assert sorted(seen) == list(range(len(nodes)))  # each graph once: no repeat, none lost
    if algorithm in ("static-constant", "dynamic"):
        assert len(shapes) == 1


def test_the_dynamic_budget_is_jraphs_estimate_and_is_filled():
    nodes, edges = planted_sizes()
    batcher = Batcher("dynamic", nodes, edges, batch_size=16)
    mean_n = sum(nodes) / len(nodes)
    assert batcher.budget.nodes % 64 == 0 and 16 * mean_n <= batcher.budget.nodes < 16 * mean_n + 64
    batches = list(batcher.epoch(list(range(len(nodes)))))
    for (idx, shape), (nxt, _) in zip(batches, batches[1:], strict=False):
        # the batch closed because the next graph would not have fitted
        j = nxt[0]
        n, e = sum(nodes[i] for i in idx), sum(edges[i] for i in idx)
        assert n + nodes[j] > shape.nodes - 1 or e + edges[j] > shape.edges or len(idx) == 16


def test_padding_changes_no_prediction_of_a_real_graph():
    """The padding graph's nodes and edges touch no real graph: SchNet's outputs for the real
    graphs of a padded batch equal those of the unpadded batch."""
    graphs = qm9_molecules(12)
    torch.manual_seed(0)
    model = SchNetOnBonds(hidden_channels=16, num_filters=16, num_interactions=2, num_gaussians=10).eval()
    plain = collate(graphs, None)
    nodes = [g.num_nodes for g in graphs]
    edges = [g.num_edges for g in graphs]
    for algorithm in ("static-64", "static-2^N", "static-constant"):
        shape = Batcher(algorithm, nodes, edges, len(graphs)).pad_to(sum(nodes), sum(edges))
        padded = collate(graphs, shape)
        assert padded.z.numel() == shape.nodes and padded.edge_index.shape[1] == shape.edges
        assert padded.mask.tolist() == [1.0] * len(graphs) + [0.0] * (shape.graphs - len(graphs))
        with torch.no_grad():
            a = model(plain.z, plain.pos, plain.edge_index, plain.batch, plain.num_graphs)
            b = model(padded.z, padded.pos, padded.edge_index, padded.batch, padded.num_graphs)
        torch.testing.assert_close(b[: len(graphs)], a, rtol=1e-5, atol=1e-5)


def test_a_batch_that_cannot_hold_its_padding_graph_is_refused():
    graphs = qm9_molecules(2)
    n = sum(g.num_nodes for g in graphs)
    with pytest.raises(ValueError, match="does not fit"):
        collate(graphs, Batcher("static-64", [n], [1], 2).pad_to(n - 1, 0))


def test_the_qm9_stand_in_has_qm9s_statistics():
    graphs = qm9_molecules(1000)
    atoms = sum(g.num_nodes for g in graphs) / len(graphs)
    bonds = sum(g.num_edges for g in graphs) / len(graphs) / 2
    assert abs(atoms - QM9.mean_atoms) < 0.5 and abs(bonds - QM9.mean_bonds) < 1.0
    assert max(g.num_nodes for g in graphs) <= QM9.max_atoms
    z = torch.cat([g.z for g in graphs])
    assert set(z.unique().tolist()) <= {1, 6, 7, 8, 9} and 0.45 < float((z == 1).float().mean()) < 0.57
    for g in graphs[:50]:  # each atom one bond length (1.0-1.6 Å) from the atom that reached it
        d = (g.pos[g.edge_index[0]] - g.pos[g.edge_index[1]]).norm(dim=-1)
        assert float(d.min()) > 0 and int(((d >= 1.0 - 1e-5) & (d <= 1.6 + 1e-5)).sum()) >= 2 * (g.num_nodes - 1)


def test_the_permutation_test_against_planted_groups():
    assert permutation_p([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == 1.0
    # fully separated groups of four: only the observed split and its mirror are as extreme
    assert permutation_p([1.0, 1.1, 1.2, 1.3], [2.0, 2.1, 2.2, 2.3]) == pytest.approx(2 / 70)


def test_the_study_runs_and_judges_every_claim(tmp_path):
    """The whole script at a tiny size, every configuration in this process (``--same-process``:
    Dynamo is reset before each run, and the ``eager`` backend has no kernel cache to share)."""
    try:
        assert main(["--graphs", "300", "--steps", "8", "--hidden", "16", "--interactions", "1", "--backend", "eager",
                     "--modes", "static", "auto", "--rmse-seeds", "2", "--root", "", "--same-process",
                     "--out", str(tmp_path)]) == 0
    finally:
        torch._dynamo.reset()  # no compiled frame of the study's left in the test process
    text = (tmp_path / "batching.md").read_text()
    for claim in ("switching algorithm speeds training up", "the fastest algorithm depends on the setting",
                  "padding to varying shapes forces recompilations", "(ours, PyTorch) automatic dynamic shapes bound",
                  "a few combinations change the final test error"):
        assert f"| {claim}" in text
    saved = json.loads((tmp_path / "batching.json").read_text())
    results = {(r["mode"], r["algorithm"]): r for r in saved["results"]}
    assert set(results) == {(m, a) for m in ("static", "auto") for a in ALGORITHMS}
    for (_mode, algorithm), r in results.items():
        assert len(r["running_combined_ms"]) == 8 and r["compiles"] >= 1 and r["compile_s"] > 0
        assert r["recompiles"] == r["compiles"] - 1  # one frame: every compilation after the first is a recompile
        if algorithm in ("static-constant", "dynamic"):
            assert r["shapes"] == 1 and r["recompiles"] == 0
        if algorithm == "unpadded":
            assert r["node_padding"] == 0 and r["edge_padding"] == 0
        else:
            assert r["node_padding"] > 0
    # the same batches, masked padding: the static algorithms learn the same model
    rmse = [results[("static", a)]["test_rmse"] for a in ALGORITHMS[:4]]
    assert max(rmse) - min(rmse) < 1e-3 * max(rmse)
    assert len(saved["rmse_seeds"]["dynamic"]) == 2
    rows = [json.loads(line) for line in (tmp_path / "batching_static_static-64.jsonl").read_text().splitlines()]
    batching = [r for r in rows if r.get("label") == "batching"]
    assert len(batching) == 8 and all(r["padded_nodes"] % 64 == 0 for r in batching)
    assert (tmp_path / "batching.png").stat().st_size > 5000
