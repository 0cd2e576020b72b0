"""The batch-size search on its own, against a planted step whose peak is known at every size:
``1000 + slope·k`` bytes for a batch of k items of 10 nodes each, the model fitted on the same line.
It closes its bracket to the last item where 5 % is less than one, and a calibration size over the
target below one under it (noise between draws) does not close the bracket before it opened."""

from __future__ import annotations

import pytest

from gnnmon.data.table import Table
from gnnmon.forecast.search import search
from gnnmon.report.memory.model import fit


def planted(slope: float):
    def peak(k: int) -> float:
        return 1000.0 + slope * k

    rows = [{"label": "s", "index": i, "num_nodes": 10 * k, "num_edges": 20 * k, "mem_peak_bytes": peak(k)}
            for i, k in enumerate(range(1, 31))]
    model = fit(Table(rows), "s", "mem_peak_bytes", warmup=0)
    assert model.trusted, model.problems
    tried: list[int] = []

    def probe(k: int):
        tried.append(k)
        return {"num_nodes": 10 * k, "num_edges": 20 * k, "num_graphs": 1}, peak(k), None

    return peak, (lambda: model), probe, tried


def shape(k: int) -> dict[str, int]:
    return {"num_nodes": 10 * k, "num_edges": 20 * k}


def test_a_small_bracket_is_closed_to_the_last_item():
    """10 fits, 12 does not, the limit is 11: 5 % of 10 is under one item, so 11 is probed."""
    peak, refit, probe, tried = planted(50.0)
    found = search(probe, refit, [(10, shape(10), peak(10)), (12, shape(12), peak(12))], count=1000,
                   capacity=int(peak(11)), fraction=1.0, probes=8)
    assert tried == [11] and found.batch_size == 11 and found.over == 12
    assert found.off_by == 0.0 and "closed within 5%" in found.stopped


def test_a_size_over_the_target_below_one_under_it_does_not_close_the_bracket():
    """Calibration draws: 10 items peaked over the target (a heavy draw), 20 under it; the limit
    is 25. The search goes on above 20 rather than stopping with a bracket upside down."""
    peak, refit, probe, tried = planted(20.0)
    target = peak(25)
    found = search(probe, refit, [(10, shape(10), target + 100.0), (20, shape(20), peak(20))], count=1000,
                   capacity=int(target), fraction=1.0, probes=8)
    assert 0.95 * 25 <= found.batch_size <= 25 and found.over is not None and found.over > 25, found.summary()
    assert found.off_by is not None and 0 <= found.off_by <= 0.05
    assert all(k > 20 for k in tried)


@pytest.mark.parametrize("limit", [3, 40, 777])
def test_the_answer_is_the_limit_within_five_percent_and_never_over_it(limit):
    peak, refit, probe, tried = planted(7.0)
    found = search(probe, refit, [(k, shape(k), peak(k)) for k in (1, 2)], count=5000,
                   capacity=int(peak(limit)), fraction=1.0, probes=12)
    assert 0.95 * limit <= found.batch_size <= limit, (limit, found.summary())
    assert found.over is not None and found.over > limit and found.off_by <= 0.05
    assert len(tried) <= 12
