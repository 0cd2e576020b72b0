"""The data pipeline, split: a NeighborLoader whose transform has a planted delay has it named in
``data_transform_s`` on the row of the step that consumed the batch, in the main process and with
worker processes; nodes per hop are the batch's; any loader's wait is ``data_wait_s``; the loader
is given back unchanged; a rank that waited for its batch is late for ``data loading``."""

from __future__ import annotations

import time

import pytest
import torch

import gnnmon

pyg = pytest.importorskip("torch_geometric")
from torch_geometric.data import Data  # noqa: E402

from gnnmon.integrations.pyg_sampler import neighbor_loader  # noqa: E402
from tests.stopwatch import TICK_S, Stopwatch  # noqa: E402

DELAY_S = 0.2
"""A planted delay (seconds): a figure that times it is at least this (a sleep never returns early)
and at most what the test's own clock saw around the batch's arrival (:func:`arrivals`)."""
N = 1000


def slow_transform(batch):
    time.sleep(DELAY_S)
    return batch


def graph() -> Data:
    torch.manual_seed(0)
    return Data(x=torch.randn(N, 16), edge_index=torch.randint(0, N, (2, 8000)), y=torch.randint(0, 3, (N,)))


def arrivals(batches, step):
    """Run ``step`` on each batch; for each, the seconds the test's clock saw in the loop's
    ``iter()``/``next()`` before it arrived (``waits``: the ceiling of a part made there, in this
    process) and from the loop's start to its arrival (``since_start``: the ceiling of a part made
    anywhere, a worker process's included), each read around what it bounds."""
    waits, since_start = [], []
    t_start = time.perf_counter()
    with Stopwatch() as start:
        it = iter(batches)
    opened = start.s
    while True:
        with Stopwatch() as wait:
            try:
                batch = next(it)
            except StopIteration:
                break
        waits.append(wait.s + opened)
        opened = 0.0  # iter() is the first batch's: a loader may start its workers there
        since_start.append(time.perf_counter() - t_start + TICK_S)
        step(batch)
    return waits, since_start


def consume(loader, **options):
    seen = []

    @gnnmon.cuda_timed
    def step(batch):
        seen.append([int(n) for n in batch.num_sampled_nodes])
        return batch.x.sum()

    with gnnmon.collect() as run, gnnmon.watch_loader(loader, **options) as batches:
        waits, since_start = arrivals(batches, step)
    return run.records, seen, waits, since_start


@pytest.mark.parametrize("workers", [0, 2])
def test_a_planted_transform_delay_is_named_with_the_batch_it_made(workers):
    loader = neighbor_loader(graph(), [5, 3], batch_size=200, transform=slow_transform, num_workers=workers)
    own = {name: vars(loader).get(name) for name in ("collate_fn", "filter_fn", "transform")}
    rows, seen, waits, since_start = consume(loader)
    assert len(rows) == len(loader) == 5
    # made in this process inside next(), else in a worker at any time since the loop began
    ceilings = waits if workers == 0 else since_start
    for row, hops, ceiling in zip(rows, seen, ceilings, strict=True):
        assert DELAY_S <= row["data_transform_s"] <= ceiling, (row["data_transform_s"], ceiling)
        assert row["data_sample_s"] < DELAY_S and row["data_gather_s"] < DELAY_S
        assert [row[f"data_hop_{k}_nodes"] for k in range(3)] == hops  # the batch the step got
        assert hops[0] == 200 or row is rows[-1]
        if workers == 0:  # made in this process, inside the wait
            assert row["data_wait_s"] >= row["data_sample_s"] + row["data_transform_s"]
    assert {name: vars(loader).get(name) for name in ("collate_fn", "filter_fn", "transform")} == own
    assert "sample_from_nodes" not in vars(loader.node_sampler)
    ours = loader.sampler_name.startswith("gnnmon")  # the fallback where neither pyg-lib nor torch-sparse is here
    assert all((row.get("data_sampler") == "gnnmon") == ours for row in rows), loader.sampler_name


@pytest.mark.parametrize("workers, kept, said", [(0, False, None), (2, False, 0), (2, True, 1)])
def test_whether_the_workers_are_kept_across_epochs_is_recorded(workers, kept, said):
    """``persistent_workers`` as the loader was made: 1 or 0 on each batch's row, absent without workers."""
    loader = torch.utils.data.DataLoader(torch.arange(8.0), batch_size=4,
                                         num_workers=workers, persistent_workers=kept)
    rows, _ = consume_plain(loader)
    assert len(rows) == 2 and all(r.get("data_persistent") == said for r in rows), rows


def test_any_loader_wait_is_timed_and_to_moves_the_batch():
    class Slow(torch.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            time.sleep(DELAY_S)
            return torch.full((3,), float(i))

    rows, waits = consume_plain(torch.utils.data.DataLoader(Slow(), batch_size=2), to="cpu")
    assert len(rows) == 2
    for row, ceiling in zip(rows, waits, strict=True):
        # next()'s wait and the copy after it are timed apart, both inside the test's next()
        assert 2 * DELAY_S <= row["data_wait_s"] and row["data_to_device_s"] >= 0
        assert row["data_wait_s"] + row["data_to_device_s"] <= ceiling, (row, ceiling)
        assert "data_sample_s" not in row


def test_to_times_the_copy_it_makes():
    class Batch:
        def __init__(self, where="cpu"):
            self.where = where

        def to(self, device, non_blocking=False):
            time.sleep(DELAY_S)  # a copy of known length
            return Batch(str(device))

    @gnnmon.cuda_timed
    def step(batch):
        assert batch.where == "cpu"  # the moved batch, not the loader's
        return 1

    with gnnmon.collect() as run, gnnmon.watch_loader([Batch("host"), Batch("host")], to="cpu") as batches:
        waits, _ = arrivals(batches, step)
    assert len(run.records) == len(waits) == 2
    for row, ceiling in zip(run.records, waits, strict=True):
        assert DELAY_S <= row["data_to_device_s"]
        assert row["data_wait_s"] + row["data_to_device_s"] <= ceiling, (row, ceiling)


def consume_plain(loader, **options):
    @gnnmon.cuda_timed
    def step(batch):
        assert batch.device.type == "cpu"
        return batch.sum()

    with gnnmon.collect() as run, gnnmon.watch_loader(loader, **options) as batches:
        waits, _ = arrivals(batches, step)
    return run.records, waits


def test_a_row_inside_the_step_does_not_take_the_batch_and_a_loop_without_rows_leaves_nothing():
    loader = [torch.ones(2), torch.ones(2)]

    @gnnmon.cuda_timed
    def inner():
        return 1

    @gnnmon.cuda_timed
    def step(batch):
        return inner()

    with gnnmon.collect() as run, gnnmon.watch_loader(loader) as batches:
        for batch in batches:
            step(batch)
    top = [r for r in run.records if r["parent"] is None]
    assert all("data_wait_s" in r for r in top)
    assert not any("data_wait_s" in r for r in run.records if r["parent"] is not None)
    with gnnmon.collect() as run, gnnmon.watch_loader(loader) as batches:
        for _batch in batches:
            pass
    assert run.records == []
    with gnnmon.collect() as run:
        step(torch.ones(1))
    assert "data_wait_s" not in run.records[0]  # nothing left over from the loop before
    with pytest.raises(TypeError, match="loader must be iterable"):
        gnnmon.watch_loader(3)


def test_a_loop_over_the_loader_inside_one_measured_call_puts_its_batches_on_no_row():
    """An epoch's function measured whole, the watched loader iterated inside it: its wait is in the
    epoch's own time already, so no row (that epoch's, or the next epoch's) takes a batch's figures."""
    @gnnmon.cuda_timed
    def epoch(loader):
        return sum(float(batch.sum()) for batch in loader)

    with gnnmon.collect() as run:
        watched = gnnmon.watch_loader([torch.ones(2), torch.ones(2)])
        assert epoch(watched) == 4.0 and epoch(watched) == 4.0
    assert len(run.records) == 2 and not any("data_wait_s" in r for r in run.records), run.records


def test_a_rank_that_waited_for_its_batch_is_late_for_data_loading():
    from gnnmon.report.compare.cross_rank import cross_rank

    rows, t = [], 0
    for i in range(10):
        late = 0.040 if i == 4 else 0.0
        for rank in (0, 1):
            start = t + int((late if rank == 1 else 0.0) * 1e9)
            end = t + int((late + 0.02) * 1e9)
            rows.append({"label": "step", "index": i, "rank": rank, "parent": None, "t_start_ns": start,
                         "t_end_ns": end, "wall_s": (end - start) / 1e9, "gc_pause_s": 0.0,
                         "data_wait_s": 0.001 + (late if rank == 1 else 0.0)})
        t += 50_000_000
    (spike,) = cross_rank(rows)["spikes"]
    assert (spike["index"], spike["slowest_rank"], spike["via"]) == (4, 1, "arrival")
    assert spike["cause"] == "data loading (rank 1)" and abs(spike["delay_s"] - 0.040) < 1e-6
