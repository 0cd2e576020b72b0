"""``gnnmon run`` records the loader's settings on each batch's row as ``watch_loader`` does, by the
same helper (``loader_settings``, ``add_batch``): ``data_workers``, ``data_persistent``,
``data_sampler`` and a neighbour loader's nodes per hop. Planted: the loaders' own arguments (and,
for a PyG neighbour loader, the nodes per hop of a graph whose neighbourhoods every sampler takes
whole: the same whatever the sampler and its random numbers); the rows
of a script run through ``gnnmon run`` must carry what ``watch_loader``'s rows carry for the same
loaders, and the input diagnosis of a slow loader with 2 workers must advise from those 2."""

from __future__ import annotations

import textwrap

import pytest
import torch
from torch.utils.data import DataLoader

import gnnmon
from gnnmon.report.report import Report
from tests.cli.running import gnnmon_run, rows_of

pytest.importorskip("torch_geometric")

PLAIN = ((2, True), (0, False), (2, False))
"""The plain loaders planted, as (num_workers, persistent_workers): 2 epochs of 2 batches each."""

NEIGHBOURS = 4
"""Batches of the planted neighbour loader (200 seeds, 50 a batch, in order), one epoch."""

HOPS = [50, 3, 3]
"""Its nodes per hop, each batch: node i's neighbours are i+1..i+3 (mod 200) and the fanouts 3 and 3
take them all, so seeds i..i+49 add i+50..i+52 at hop 1 and i+53..i+55 at hop 2."""

LOADERS = """
    import torch
    from torch.utils.data import DataLoader
    from torch_geometric.data import Data

    from gnnmon.integrations.pyg_sampler import neighbor_loader

    PLAIN = ((2, True), (0, False), (2, False))


    def plain(workers, kept):
        return DataLoader(torch.arange(8.0).view(4, 2), batch_size=2, num_workers=workers, persistent_workers=kept)


    def neighbours():
        node = torch.arange(200).repeat(3)
        near = (node + torch.arange(1, 4).repeat_interleave(200)) % 200
        data = Data(x=torch.rand(200, 4), edge_index=torch.stack([near, node]))  # messages from i+1..i+3 to i
        return neighbor_loader(data, num_neighbors=[3, 3], batch_size=50)
"""
"""The loaders, made alike by the script run through ``gnnmon run`` and by this test for
``watch_loader``."""

SCRIPT = LOADERS + """

    model = torch.nn.Linear(2, 1)
    net = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD([*model.parameters(), *net.parameters()], lr=0.01)
    for workers, kept in PLAIN:
        loader = plain(workers, kept)
        for epoch in range(2):
            for x in loader:
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
        del loader
    for batch in neighbours():
        opt.zero_grad()
        net(batch.x).sum().backward()
        opt.step()
"""

SLOW = """
    import time
    import torch
    from torch.utils.data import DataLoader, Dataset


    class Slow(Dataset):
        def __len__(self):
            return 384                             # 96 batches: the steady wait told past a loaded host's noise

        def __getitem__(self, i):
            time.sleep(0.005)                      # planted: 20 ms of a worker's time a batch of 4
            return torch.randn(16)


    model = torch.nn.Linear(16, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    if __name__ == "__main__":
        for x in DataLoader(Slow(), batch_size=4, num_workers=2):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
"""


def _settings(row: dict) -> dict:
    """A row's loader fields that are not times: the settings and nodes per hop."""
    return {k: v for k, v in row.items() if k.startswith("data_") and not k.endswith("_s")}


def _watched() -> list[dict]:
    """The same loaders' rows through ``watch_loader``, in this process."""
    space: dict = {}
    exec(compile(textwrap.dedent(LOADERS), "loaders", "exec"), space)

    @gnnmon.cuda_timed
    def step(batch):
        return batch

    with gnnmon.collect() as run:
        for workers, kept in PLAIN:
            loader = space["plain"](workers, kept)
            for _ in range(2):
                for x in gnnmon.watch_loader(loader):
                    step(x)
            del loader
        for batch in gnnmon.watch_loader(space["neighbours"]()):
            step(batch)
    return run.records


def test_gnnmon_run_s_rows_carry_the_loader_s_settings_as_watch_loader_s_do(tmp_path):
    done = gnnmon_run(tmp_path, "-o", "run.jsonl", "train.py", script=SCRIPT)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = rows_of(tmp_path / "run.jsonl")
    watched = _watched()
    assert len(rows) == len(watched) == 4 * len(PLAIN) + NEIGHBOURS
    assert all(r["batches"] == 1 for r in rows)
    for i, (workers, kept) in enumerate(PLAIN):  # planted: the loaders' own arguments, on each of their rows
        said = {"data_workers": workers, **({"data_persistent": int(kept)} if workers else {})}
        assert [_settings(r) for r in rows[4 * i:4 * i + 4]] == [said] * 4, (workers, kept, rows[4 * i])
    sage = rows[-NEIGHBOURS:]
    ours = "gnnmon" in _sampler_here()
    assert all((r.get("data_sampler") == "gnnmon") == ours for r in sage)
    assert [[r[f"data_hop_{k}_nodes"] for k in range(3)] for r in sage] == [HOPS] * NEIGHBOURS
    # both paths: the same settings and the same nodes per hop on each row; the same fields timed
    assert [_settings(r) for r in rows] == [_settings(r) for r in watched]
    assert [sorted(k for k in r if k.startswith("data_")) for r in rows] == \
        [sorted(k for k in r if k.startswith("data_")) for r in watched]


def _sampler_here() -> str:
    """Which sampler gnnmon's ``neighbor_loader`` picks here (pyg-lib, torch-sparse or gnnmon's own)."""
    from torch_geometric.data import Data

    from gnnmon.integrations.pyg_sampler import neighbor_loader

    data = Data(x=torch.rand(4, 1), edge_index=torch.tensor([[0, 1], [1, 2]]))
    return str(neighbor_loader(data, num_neighbors=[1], batch_size=2).sampler_name)


def test_a_slow_loader_with_2_workers_is_advised_from_its_2_workers_under_gnnmon_run(tmp_path):
    """96 batches, each 20 ms of a worker's sleep, 2 workers, a step of well under 1 ms: the loop
    waits for its data; the diagnosis must read the loader's 2 workers, never advise fewer. The
    workers take turns, so the waits alternate between about none and two batches' worth; their
    mean is judged against 3 batch-means standard errors, which 24 batches left within reach of a
    loaded host's scatter (once at load 10-24 on this 2-core VM)."""
    done = gnnmon_run(tmp_path, "-o", "slow.jsonl", "train.py", script=SLOW)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = rows_of(tmp_path / "slow.jsonl")
    assert len(rows) == 96 and all(r["data_workers"] == 2 and r["data_persistent"] == 0 for r in rows)
    (found,) = [f for f in Report.load(tmp_path / "slow.jsonl").diagnosis() if f["kind"] == "input-bound"]
    assert "num_workers=2" in found["words"], found["words"]
    for fewer in ("num_workers=0", "num_workers=1"):
        assert fewer not in found["next"], found["next"]


def test_a_loader_s_settings_are_read_by_one_helper_for_both_paths():
    """``loader_settings`` as each path reads it: without workers no ``data_persistent``."""
    from gnnmon.measure.loader import loader_settings

    assert loader_settings(DataLoader([1.0], num_workers=2, persistent_workers=True)) == \
        {"data_workers": 2, "data_persistent": 1}
    assert loader_settings(DataLoader([1.0])) == {"data_workers": 0}
    assert loader_settings([1.0, 2.0]) == {}  # a plain iterable: nothing to say


def test_a_row_of_batches_from_two_loaders_carries_the_last_batch_s_loader_s_settings():
    """Gradient accumulated over a batch of each of two loaders: one row of 2 batches, with the
    settings of the loader whose batch came last (as ``watch_loader`` keeps the later batch's)."""
    from gnnmon.measure.auto_steps import AutoSteps

    first = DataLoader(torch.ones(4, 2), batch_size=2, num_workers=0)
    last = DataLoader(torch.ones(4, 2), batch_size=2, num_workers=1)
    model = torch.nn.Linear(2, 1)
    with gnnmon.collect() as run:
        engine = AutoSteps(run).start()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)  # made under the engine, as a script's is
        a, b = iter(first), iter(last)
        for _ in range(2):  # planted: 2 updates, each after a batch of first's and then one of last's
            model(next(a)).sum().backward()
            model(next(b)).sum().backward()
            opt.step()
        engine.stop()
    del a, b  # last's worker ends with its iterator
    rows = run.records
    assert [(r["batches"], r["updates"]) for r in rows] == [(2, 1)] * 2
    assert [_settings(r) for r in rows] == [{"data_workers": 1, "data_persistent": 0}] * 2
