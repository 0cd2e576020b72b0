"""The batch-size search never reads a term of the model that a shape lacks as none of it.

The plant: a heterogeneous step whose peak is 1,000,000 bytes plus 1,000 a node plus 5,000 more a
paper node, and items of 4 paper and 6 author nodes (30,000 bytes an item: a batch of k items
peaks at 1,000,000 + 30,000·k). Its model, fitted on rows whose type counts vary apart, has
per-type terms (6,000 bytes a paper node, 1,000 an author node). Asked of shapes that give the
totals alone, the search read every type's count as 0: each forecast was the constant (977 KiB),
so it aimed its first probe at its reach, 88 items (3.47 MiB, 1.65 times a target of 40 items'
2.1 MiB), and where one item was over the target it said so with a forecast under it. It now
cannot forecast, says which terms the shapes lack and where they came from, and probes nothing
but its measured answer again; the same shapes with each type's count aim at the planted limit.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from gnnmon.data.table import Table
from gnnmon.forecast.search import search
from gnnmon.report.memory.model import fit, format_bytes

CONST, NODE, PAPER = 1_000_000.0, 1_000.0, 5_000.0
"""The plant: bytes held whatever the batch, bytes a node (of any type), bytes more a paper node."""
PAPERS, AUTHORS = 4, 6
"""Nodes of each type an item holds: 30,000 bytes an item."""


def truth(papers: float, authors: float) -> float:
    return CONST + NODE * (papers + authors) + PAPER * papers


def peak(k: int) -> float:
    """A batch of k items: 1,000,000 + 30,000·k bytes."""
    return truth(PAPERS * k, AUTHORS * k)


def limit(target: float) -> int:
    """The most items whose planted peak is at or under ``target``."""
    return math.floor((target - CONST) / (NODE * (PAPERS + AUTHORS) + PAPER * PAPERS))


def totals(k: int) -> dict[str, int]:
    """A batch of k items read for its totals alone."""
    return {"num_nodes": (PAPERS + AUTHORS) * k, "num_edges": 2 * (PAPERS + AUTHORS) * k, "num_graphs": 1}


def typed(k: int) -> dict[str, int]:
    """A batch of k items with each type's count, as a HeteroData batch's shape gives it."""
    return {**totals(k), "num_nodes__paper": PAPERS * k, "num_nodes__author": AUTHORS * k}


def planted_model():
    """The model fit chooses for 40 rows of the plant, their paper and author counts varying apart
    (per-type terms: the totals cannot say which type a node is), then set to the plant exactly
    (no spread: each figure to the byte)."""
    rows = []
    for i in range(40):
        p, a = 10 + (7 * i) % 37, 10 + (11 * i) % 29
        rows.append({"label": "s", "index": i, "num_nodes": p + a, "num_edges": 2 * (p + a), "num_graphs": 1,
                     "num_nodes__paper": p, "num_nodes__author": a, "mem_peak_bytes": truth(p, a)})
    model = fit(Table(rows), "s", "mem_peak_bytes", warmup=0)
    exact = {"const": CONST, "num_nodes__paper": NODE + PAPER, "num_nodes__author": NODE}
    assert model.trusted and set(model.terms) == {"num_nodes__paper", "num_nodes__author"}, (model.terms, model.notes)
    assert model.coefficients == pytest.approx(exact, rel=1e-9)
    return replace(model, coefficients=exact, spread_bytes=0.0)


def run(shape_of, heaviest: bool, capacity: float):
    """The search with probes of ``shape_of`` peaking as planted, after calibration batches of
    2-11 items; ``heaviest``: the heaviest batch of a size given (``shape_of``), else scaled from
    the largest measured. (the search, the sizes probed)"""
    model = planted_model()
    tried: list[int] = []

    def probe(k: int):
        tried.append(k)
        return shape_of(k), peak(k), None

    measured = [(k, shape_of(k), peak(k)) for k in range(2, 12)]
    found = search(probe, lambda: model, measured, count=5000, capacity=int(capacity), fraction=1.0, probes=12,
                   heaviest=shape_of if heaviest else None)
    return found, tried


WHERE = {True: "the heaviest batch of a size", False: "the items per batch of the largest batches measured"}


@pytest.mark.parametrize("heaviest", [True, False])
def test_shapes_of_totals_alone_cannot_aim_a_per_type_model_and_no_probe_goes_over_the_target(heaviest):
    """The target at 40 items' planted peak (2,200,000 bytes): shapes without the types' counts
    cannot be forecast, and the search says so, naming both terms and what gave the shapes. No
    probe is aimed (read as 0 they aimed the first at 88 items, 3,640,000 bytes): the answer is
    the calibration's largest, 11 items, measured again, its planted peak under the target, and
    no size over the target ran."""
    target = peak(40)
    found, tried = run(totals, heaviest, target)
    assert tried == [11] and found.batch_size == 11 and found.over is None, found.summary()
    assert all(peak(k) <= target for k in tried) and found.batch_size <= limit(target) == 40
    assert found.stopped.startswith(
        "cannot forecast: the shapes lack num_nodes__paper, num_nodes__author, which the model of 's' needs "
        "(its terms: num_nodes__paper, num_nodes__author); the shape from "
        f"{WHERE[heaviest]} has num_nodes, num_edges, num_graphs"), found.stopped
    assert [p["recheck"] for p in found.probes] == [True] and math.isnan(found.probes[0]["upper_bytes"])
    assert "forecast -, peaked at" in found.summary()


@pytest.mark.parametrize("lacking", ["absent", "None"])
def test_a_shape_that_gives_one_type_but_not_the_other_is_named_for_the_one_it_lacks(lacking):
    """The heaviest batch gives the papers' count but not the authors' (absent, or None: unknown):
    the search names the authors' term alone and aims no probe."""
    def partial(k: int) -> dict:
        shape: dict = {**totals(k), "num_nodes__paper": PAPERS * k}
        if lacking == "None":
            shape["num_nodes__author"] = None
        return shape

    found, tried = run(partial, True, peak(40))
    assert tried == [11] and found.batch_size == 11, found.summary()
    assert found.stopped.startswith("cannot forecast: the shapes lack num_nodes__author, which"), found.stopped
    assert "the shape from the heaviest batch of a size has num_nodes, num_edges, num_graphs, num_nodes__paper" \
        in found.stopped


@pytest.mark.parametrize("heaviest", [True, False])
def test_shapes_with_each_types_count_aim_the_first_probe_at_the_planted_limit(heaviest):
    """The same plant and target, each shape giving each type's count: the exact model aims the
    first probe at the planted limit, 40 items (41 is 30,000 bytes over), the probe 5 % above it
    (42) is over, and the bracket closes at 40, every probe's upper bound at or above its planted
    peak (the point forecast aims; the bound widens beyond the fitted shapes)."""
    target = peak(40)
    found, tried = run(typed, heaviest, target)
    assert limit(target) == 40 and tried[:2] == [40, 42], found.summary()
    assert found.batch_size == limit(target) and found.over == 42 and "closed within 5%" in found.stopped
    assert all(p["upper_bytes"] >= peak(p["size"]) for p in found.probes), found.summary()


def test_where_one_item_is_over_the_target_shapes_of_totals_claim_no_forecast_of_it():
    """A target 20,000 bytes above the constant, under one item's 30,000: with each type's count
    the search says nothing fits, one item forecast at its planted peak (over the target); with
    the totals alone (read as 0 they said one item was forecast at the constant, 977 KiB, "over"
    the 996 KiB target, after running a probe of one item over it) it runs nothing and says it
    cannot forecast."""
    target = CONST + 20_000.0
    assert limit(target) == 0
    found, tried = run(typed, True, target)
    assert tried == [] and found.batch_size == 0, found.summary()
    assert found.stopped.startswith(f"nothing fits: a batch of one item is forecast at up to {format_bytes(peak(1))} "
                                    f"(the model's constant {format_bytes(CONST)}), over the target "
                                    f"{format_bytes(target)}"), found.stopped
    found, tried = run(totals, True, target)
    assert tried == [] and found.batch_size == 0 and found.over == 2, found.summary()
    assert found.stopped.startswith("cannot forecast: the shapes lack num_nodes__paper, num_nodes__author") \
        and "nothing fits" not in found.stopped, found.stopped
