"""Synthetic stand-ins for PyG datasets that cannot be downloaded here, with the same statistics.

A planted-partition graph: every node has a class; a share ``homophily`` of its edges go to nodes
of the same class (Flickr's edge homophily is about 0.32); features are unit Gaussian noise plus
``signal`` times a class centroid, so a GCN can learn the classes but not trivially (the defaults
give a two-layer GCN about 0.5 validation accuracy, close to what it reaches on the real Flickr).
Edges are undirected (each stored in both directions, as PyG's Flickr and Cora are), with no
self-loops and no duplicates, and the edge count is exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch_geometric.data import Data


@dataclass(frozen=True)
class GraphSpec:
    """The statistics a stand-in reproduces. ``num_edges`` counts both directions."""

    name: str
    num_nodes: int
    num_edges: int
    num_features: int
    num_classes: int
    split: tuple[float, float, float] = (0.5, 0.25, 0.25)
    train_count: int | None = None  # a fixed number of train nodes (Cora's 140) instead of a share

    def scaled(self, fraction: float) -> GraphSpec:
        """The same graph shape at ``fraction`` of the nodes and edges (average degree kept)."""
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        nodes = max(self.num_classes * 4, int(self.num_nodes * fraction))
        edges = max(2, int(self.num_edges * fraction) // 2 * 2)
        return GraphSpec(f"{self.name}@{fraction:g}", nodes, edges, self.num_features,
                         self.num_classes, self.split, self.train_count)


FLICKR = GraphSpec("Flickr", 89_250, 899_756, 500, 7, (0.5, 0.25, 0.25))
CORA = GraphSpec("Cora", 2_708, 10_556, 1_433, 7, train_count=140)


def planted_partition(
    spec: GraphSpec, *, homophily: float = 0.32, signal: float = 0.035, seed: int = 0
) -> Data:
    """A ``Data`` with ``x``, ``y``, ``edge_index`` and train/val/test masks matching ``spec``."""
    if spec.num_edges % 2:
        raise ValueError("num_edges counts both directions, so it must be even")
    n, pairs_needed = spec.num_nodes, spec.num_edges // 2
    if pairs_needed > n * (n - 1) // 2:
        raise ValueError(f"{spec.name}: {spec.num_edges} edges do not fit on {n} nodes")
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(spec.num_classes, (n,), generator=g)
    order = torch.argsort(y)
    counts = torch.bincount(y, minlength=spec.num_classes)
    starts = torch.cumsum(counts, 0) - counts

    pairs = torch.empty(0, dtype=torch.long)
    while pairs.numel() < pairs_needed:
        m = int((pairs_needed - pairs.numel()) * 1.3) + 16
        src = torch.randint(n, (m,), generator=g)
        same = torch.rand(m, generator=g) < homophily
        # Same-class partner: a random member of src's class; else any node.
        cls = y[src]
        pick = (torch.rand(m, generator=g) * counts[cls]).long()
        dst = torch.where(same, order[starts[cls] + pick], torch.randint(n, (m,), generator=g))
        keep = src != dst
        lo, hi = torch.minimum(src, dst)[keep], torch.maximum(src, dst)[keep]
        pairs = torch.unique(torch.cat([pairs, lo * n + hi]))
    pairs = pairs[torch.randperm(pairs.numel(), generator=g)[:pairs_needed]]
    lo, hi = pairs // n, pairs % n
    edge_index = torch.stack([torch.cat([lo, hi]), torch.cat([hi, lo])])
    perm = torch.argsort(edge_index[0] * n + edge_index[1])  # sorted by source, like PyG's datasets
    edge_index = edge_index[:, perm]

    centroids = torch.randn(spec.num_classes, spec.num_features, generator=g)
    x = signal * centroids[y] + torch.randn(n, spec.num_features, generator=g)

    shuffled = torch.randperm(n, generator=g)
    masks = [torch.zeros(n, dtype=torch.bool) for _ in range(3)]
    if spec.train_count is not None:
        n_train = spec.train_count
        n_val = min(500, (n - n_train) // 2)
    else:
        n_train, n_val = int(n * spec.split[0]), int(n * spec.split[1])
    masks[0][shuffled[:n_train]] = True
    masks[1][shuffled[n_train:n_train + n_val]] = True
    masks[2][shuffled[n_train + n_val:]] = True
    return Data(x=x, y=y, edge_index=edge_index, train_mask=masks[0], val_mask=masks[1],
                test_mask=masks[2], num_nodes=n)


@dataclass(frozen=True)
class MoleculeSpec:
    """Statistics of a molecular dataset's graphs (means per molecule)."""

    name: str
    num_graphs: int
    mean_atoms: float
    mean_bonds: float
    atom_features: int
    bond_features: int
    max_atoms: int = 60


PCQM4MV2 = MoleculeSpec("PCQM4Mv2", 3_746_620, 14.1, 14.6, 9, 3, max_atoms=51)
QM9 = MoleculeSpec("QM9", 130_831, 18.0, 18.6, 11, 4, max_atoms=29)


def molecules(spec: MoleculeSpec, num_graphs: int | None = None, *, seed: int = 0) -> list[Data]:
    """Molecule-shaped graphs: a random spanning tree of ``~mean_atoms`` atoms plus ring bonds to
    reach ``~mean_bonds`` bonds, both directions stored; integer atom and bond features; a
    regression target ``y`` that depends on the structure (so a GNN can learn it)."""
    count = spec.num_graphs if num_graphs is None else num_graphs
    g = torch.Generator().manual_seed(seed)
    atoms = torch.poisson(torch.full((count,), spec.mean_atoms - 2.0), generator=g).long() + 2
    atoms = atoms.clamp(2, spec.max_atoms)
    ring_rate = max(0.0, spec.mean_bonds - (spec.mean_atoms - 1))
    rings = torch.poisson(torch.full((count,), ring_rate), generator=g).long()
    out: list[Data] = []
    for n, r in zip(atoms.tolist(), rings.tolist(), strict=True):
        parent = (torch.rand(n - 1, generator=g) * torch.arange(1, n)).long()  # a random tree
        src, dst = parent, torch.arange(1, n)
        if r and n > 2:
            a = torch.randint(n, (r,), generator=g)
            b = torch.randint(n, (r,), generator=g)
            keep = a != b
            src, dst = torch.cat([src, a[keep]]), torch.cat([dst, b[keep]])
        pairs = torch.unique(torch.minimum(src, dst) * n + torch.maximum(src, dst))
        lo, hi = pairs // n, pairs % n
        edge_index = torch.stack([torch.cat([lo, hi]), torch.cat([hi, lo])])
        x = torch.randint(0, 8, (n, spec.atom_features), generator=g)
        bond = torch.randint(0, 4, (lo.numel(), spec.bond_features), generator=g)
        edge_attr = torch.cat([bond, bond])
        deg = torch.bincount(edge_index[0], minlength=n).float()
        y = torch.tensor([float((x[:, 0].float() * deg).mean() / 8 + lo.numel() / n)])
        out.append(Data(x=x, edge_index=edge_index, edge_attr=edge_attr, y=y))
    return out


# QM9's composition: the share of H, C, N, O and F among its atoms (hydrogens included).
QM9_ELEMENTS = (1, 6, 7, 8, 9)
QM9_ELEMENT_SHARE = (0.51, 0.35, 0.058, 0.078, 0.004)
_ATOM_ENERGY = {1: -0.5, 6: -1.0, 7: -1.2, 8: -1.5, 9: -1.8}  # planted per-element contributions


def qm9_molecules(num_graphs: int, *, seed: int = 0) -> list[Data]:
    """QM9-shaped molecules for a 3-D model (SchNet): the graphs of ``molecules(QM9)`` with atomic
    numbers ``z`` drawn with QM9's element shares, positions ``pos`` (Å) laid out along the bonds
    (each atom 1.0-1.6 Å from the atom it was reached from, breadth first) and a target ``y`` made
    of a per-element term and a bond-length term, as energies are (standardise it before training)."""
    g = torch.Generator().manual_seed(seed + 1)
    share = torch.tensor(QM9_ELEMENT_SHARE)
    elements = torch.tensor(QM9_ELEMENTS)
    energy = torch.zeros(10)
    for z, e in _ATOM_ENERGY.items():
        energy[z] = e
    out = []
    for d in molecules(QM9, num_graphs, seed=seed):
        n = d.num_nodes
        z = elements[torch.multinomial(share, n, replacement=True, generator=g)]
        steps = torch.randn(n, 3, generator=g)
        steps = (steps * ((1.0 + 0.6 * torch.rand(n, 1, generator=g)) / steps.norm(dim=1, keepdim=True))).tolist()
        neighbours: list[list[int]] = [[] for _ in range(n)]
        for a, b in zip(*d.edge_index.tolist(), strict=True):
            neighbours[a].append(b)
        xyz: list[list[float]] = [[0.0, 0.0, 0.0]] * n
        seen = [False] * n
        seen[0] = True
        frontier = [0]
        while frontier:  # breadth first from atom 0: each atom one bond length from the one that reached it
            nxt = []
            for a in frontier:
                for b in neighbours[a]:
                    if not seen[b]:
                        seen[b] = True
                        xyz[b] = [p + q for p, q in zip(xyz[a], steps[b], strict=True)]
                        nxt.append(b)
            frontier = nxt
        pos = torch.tensor(xyz)
        dist = (pos[d.edge_index[0]] - pos[d.edge_index[1]]).norm(dim=-1)
        y = energy[z].sum() + 0.25 * torch.exp(-dist).sum()  # each bond stored twice: 0.5 per bond
        out.append(Data(z=z, pos=pos, edge_index=d.edge_index, y=y.view(1), num_nodes=n))
    return out
