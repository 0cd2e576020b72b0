"""Warm-up judged by the first calls' own shapes (:func:`gnnmon.report.diagnosis.time_findings.warm_up`).

The plant is a sorted dataset's run, as a newcomer's was: each epoch opens with 2 batches of
large graphs (15 times the nodes) and goes on with 20 of the usual ones (800-1,200 nodes, 4 edges
each: within 25 % of the usual, so none is unusual by the spikes' rule); every call's time is the
planted cost of its nodes and edges (``planted.PHASES``, 0.5 ms per 1,000, plus 1 ms), each phase
with a 3 % relative normal spread (``planted.steps``). The first epoch's 2 large batches are the
run's 2 largest. At that rate the first calls hold no warm-up, though they take 12 times the
level; 300 ms planted in each beyond its shape is warm-up, at that excess; with one epoch, no
later call has their size and the finding says it cannot tell the two apart.
"""

from __future__ import annotations

import statistics

import gnnmon
from gnnmon.report.loops import ms
from tests.report.diagnosis.planted import OPTIMIZER_S, PHASES, steps

BIG, SMALL = 2, 20
"""Large batches, then usual ones, in each epoch."""

NOISE = 0.03
"""The planted relative spread of each phase's time (``planted.steps``' default)."""

PER_SIZE = sum(PHASES.values()) / 1e3
"""Planted seconds per node or edge."""

EXTRA = 0.300
"""Seconds planted in each first call beyond its shape's time, where warm-up is planted."""


def _shape_time(row: dict) -> float:
    """The planted time of a row's nodes and edges, before its noise."""
    return OPTIMIZER_S + PER_SIZE * (row["num_nodes"] + row["num_edges"])


def usual(n: int, seed: int, epoch: int) -> list[dict]:
    """``n`` usual calls of the epoch: ``planted.steps``' 800-1,200 nodes with 4 edges each (its 3-5
    would make some shapes unusual by the spikes' 25 %), every time scaled to that shape's (its
    planted noise kept)."""
    rows = []
    for r in steps(n, seed=seed):
        before = _shape_time(r)
        r = r | {"num_edges": 4 * r["num_nodes"], "epoch": epoch}
        scale = _shape_time(r) / before
        rows.append(r | {k: v * scale for k, v in r.items() if k.startswith("phase_") or k in ("wall_s", "device_s")})
    return rows


def run(epochs: int = 3, extra: float = 0.0, shapes: bool = True) -> list[dict]:
    """The sorted run: its large batches made together, the two largest opening the first epoch,
    ``extra`` seconds added to each of them; every row's window after the one before it."""
    large = sorted(steps(BIG * epochs, seed=1, scale=15), key=lambda r: -(r["num_nodes"] + r["num_edges"]))
    rows = []
    for e in range(epochs):
        rows += [r | {"epoch": e} for r in large[BIG * e:BIG * (e + 1)]] + usual(SMALL, 10 + e, e)
    t = rows[0]["t_start_ns"]
    for i, r in enumerate(rows):
        wall = r["wall_s"] + (extra if i < BIG else 0.0)
        r.update(index=i, wall_s=wall, device_s=wall, t_start_ns=t, t_end_ns=t + int(wall * 1e9))
        t = r["t_end_ns"] + 100_000
        if not shapes:
            del r["num_nodes"], r["num_edges"]
    return rows


def size(row: dict) -> int:
    return row["num_nodes"] + row["num_edges"]


def reach(rows: list[dict]) -> None:
    """The plant's premise: the first calls are the run's largest, yet within 25 % (the spikes'
    shape tolerance) of a later call's nodes and edges, so the later calls' fit reaches them."""
    later = max(size(r) for r in rows[BIG:])
    assert all(later <= size(r) <= 1.25 * later for r in rows[:BIG]), [size(r) for r in rows[:BIG + 1]]


def warm_up(rows: list[dict]) -> dict | None:
    return next((f for f in gnnmon.Report(rows).diagnosis() if f["kind"] == "warm-up"), None)


def test_first_batches_of_the_largest_graphs_at_the_steady_rate_are_no_warm_up():
    """The first 2 calls take their shapes' time (within the planted noise) and over 10 % of the
    measured time beyond the level: without their shapes they are warm-up (as before), with them
    nothing is."""
    rows = run()
    assert rows[0]["num_nodes"] > 10 * rows[BIG]["num_nodes"]
    reach(rows)
    unshaped = warm_up(run(shapes=False))
    assert unshaped is not None and unshaped["share"] > 0.10, unshaped
    assert warm_up(rows) is None


def test_first_batches_300_ms_slower_than_their_shapes_are_warm_up_by_that_much():
    """Each first call's time is its shape's planted time (3 % spread) plus 300 ms: warm-up holds
    the 600 ms, within what the noise moves it. The error is each first call's own noise, and the
    fitted time of its shape's, read from the later large calls (their noise, 3 % each, averaged
    over them): at most 2 x 3 % of the first calls' shape times per spread; 4 spreads are allowed.
    The words say they were the run's largest graphs and the evidence holds the planted rate."""
    rows = run(extra=EXTRA)
    reach(rows)
    found = warm_up(rows)
    assert found is not None
    shape_s = sum(_shape_time(r) for r in rows[:BIG])
    bound = 4 * 2 * NOISE * shape_s
    assert abs(found["at_stake"] - BIG * EXTRA) <= bound, (found["at_stake"], bound)
    assert (f"call 0 (num_nodes {rows[0]['num_nodes']} vs usual" in found["words"]
            and f"call 1 (num_nodes {rows[1]['num_nodes']} vs usual" in found["words"]), found["words"]
    assert "were the run's largest graphs, whose shapes predict" in found["words"], found["words"]
    assert "only the excess over that is warm-up" in found["words"], found["words"]
    (rate,) = [e for e in found["evidence"] if e["figure"] == "num_nodes+num_edges"]
    assert abs(rate["value"] - PER_SIZE) <= 4 * NOISE * PER_SIZE, (rate["value"], PER_SIZE)
    assert found["next"].startswith("nothing to fix in the loop"), found["next"]


def test_first_batches_larger_than_any_later_call_are_said_to_be_undecided():
    """One epoch: no later call has the first calls' size, so their time is not read from a fit
    that never saw it; their excess over the level stays at stake (as without shapes), and the
    words and the next step say the run cannot tell it from warm-up and how to tell."""
    rows = run(epochs=1)
    found, unshaped = warm_up(rows), warm_up(run(epochs=1, shapes=False))
    assert found is not None and unshaped is not None
    assert found["at_stake"] == unshaped["at_stake"]
    assert ("were larger than any later call, so the run cannot tell the time of their size from warm-up"
            in found["words"]), found["words"]
    assert found["next"].startswith("shuffle the batches (or run another epoch)"), found["next"]


def test_without_shapes_warm_up_is_the_excess_over_the_level():
    """No shapes recorded: the first calls' excess over the steady calls' median, as always."""
    rows = run(extra=EXTRA, shapes=False)
    found = warm_up(rows)
    assert found is not None
    level = sorted(r["wall_s"] for r in rows[BIG:])
    mid = len(level) // 2
    median = level[mid] if len(level) % 2 else (level[mid - 1] + level[mid]) / 2
    assert abs(found["at_stake"] - sum(r["wall_s"] - median for r in rows[:BIG])) <= 1e-9
    took = ms(rows[0]["wall_s"] + rows[1]["wall_s"])
    assert found["words"].startswith(f"the first 2 call(s) of train_step took {took} against"), found["words"]
    assert "shapes predict" not in found["words"]


def test_a_slow_first_epoch_holds_its_large_batches_against_their_shapes():
    """A first epoch whose usual calls take 2.5 times their shapes' time (a first pass filling
    caches), its 2 large batches (mid-epoch, as in every epoch) at their shapes' time: warm-up is
    the first 2 calls' excess over the level and the first epoch's usual calls' over the later
    epochs' median, exactly as the rows give them, and the large calls' excess over what their
    shapes predict, within their noise (4 spreads of 2 x 3 % of their shape times, as above)."""
    rows = []
    for e in range(3):
        small = usual(SMALL, 10 + e, e)
        rows += small[:10] + [r | {"epoch": e} for r in steps(BIG, seed=20 + e, scale=15)] + small[10:]
    t = rows[0]["t_start_ns"]
    for i, r in enumerate(rows):
        wall = r["wall_s"] * (2.5 if r["epoch"] == 0 and r["num_nodes"] < 5000 else 1.0)
        r.update(index=i, wall_s=wall, device_s=wall, t_start_ns=t, t_end_ns=t + int(wall * 1e9))
        t = r["t_end_ns"] + 100_000
    found = warm_up(rows)
    assert found is not None
    level = statistics.median(r["wall_s"] for r in rows[BIG:])
    later = statistics.median(r["wall_s"] for r in rows if r["epoch"] > 0)
    small_first = [r for r in rows[BIG:] if r["epoch"] == 0 and r["num_nodes"] < 5000]
    large_first = [r for r in rows if r["epoch"] == 0 and r["num_nodes"] >= 5000]
    assert len(small_first) == SMALL - BIG and len(large_first) == BIG
    largest_later = max(size(r) for r in rows if r["epoch"] > 0)  # the premise: the later calls' fit reaches them
    assert all(size(r) <= 1.25 * largest_later for r in large_first), [size(r) for r in large_first]
    truth = sum(r["wall_s"] - level for r in rows[:BIG]) + sum(max(r["wall_s"] - later, 0.0) for r in small_first)
    bound = 4 * 2 * NOISE * sum(_shape_time(r) for r in large_first)
    assert truth <= found["at_stake"] <= truth + bound, (found["at_stake"], truth, bound)
    assert "its first epoch's calls took" in found["words"], found["words"]
    assert f"call {large_first[0]['index']} (num_nodes {large_first[0]['num_nodes']} vs usual" in found["words"]
