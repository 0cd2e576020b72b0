"""The batch-size search on its own, against a planted step whose peak is known at every size:
``1000 + slope·k`` bytes for a batch of k items of 10 nodes each, the model fitted on the same line.
It closes its bracket to the last item where 5 % is less than one, and a calibration size over the
target below one under it (noise between draws) does not close the bracket before it opened; a peak
under the target by less than the model's resolution is not under it; an answer measured before
larger probes ran is measured again, on a planted process whose memory grows with the largest batch
it has run."""

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


def test_a_peak_under_the_target_by_less_than_the_figures_resolution_does_not_count_as_under_it():
    """The model states a resolution of 35 bytes (5 items' worth at 7 bytes an item: on the host,
    what RSS cannot resolve between two states of the process): a probe that reads under the target
    by less than that is not under it, so the answer is the largest size under the target by 35
    bytes, limit - 5, and the bracket's top reads within 35 bytes of the target or over it."""
    from dataclasses import replace

    peak, refit, probe, tried = planted(7.0)
    model = replace(refit(), resolution_bytes=35.0)
    limit = 400
    found = search(probe, lambda: model, [(k, shape(k), peak(k)) for k in (1, 2)], count=5000,
                   capacity=int(peak(limit)), fraction=1.0, probes=12)
    truth = limit - 5  # the largest k with peak(k) + 35 <= peak(limit)
    assert found.margin_bytes == 35.0 and "less the 35 B the figure cannot resolve" in found.summary()
    assert 0.95 * truth <= found.batch_size <= truth, found.summary()
    assert all(p["peak_bytes"] + 35 <= found.target_bytes for p in found.probes if p["fits"])
    assert found.over is not None and peak(found.over) + 35 > found.target_bytes


def test_the_answer_is_measured_again_after_larger_probes_ran_and_one_over_moves_it_down():
    """A planted process whose memory at a step's start grows with the largest batch it has run (a
    heap's high-water mark: 4 bytes for each item of the largest, on top of 1000 + 10 bytes an
    item): a size measured before a larger probe ran reads low. The search measures its answer
    again after the probes, on the state they left; a re-check over the target moves the answer
    down, and the answer ends measured last, under the target in the process's final state."""
    largest_run = [2]

    def peak_now(k: int) -> float:
        return 1000.0 + 10.0 * k + 4.0 * max(largest_run[0], k)

    rows = [{"label": "s", "index": i, "num_nodes": 10 * k, "num_edges": 20 * k, "mem_peak_bytes": 1000.0 + 14.0 * k}
            for i, k in enumerate(range(1, 31))]
    model = fit(Table(rows), "s", "mem_peak_bytes", warmup=0)
    tried: list[int] = []

    def probe(k: int):
        tried.append(k)
        got = peak_now(k)
        largest_run[0] = max(largest_run[0], k)
        return {"num_nodes": 10 * k, "num_edges": 20 * k, "num_graphs": 1}, got, None

    target = 1000.0 + 14.0 * 300  # a size measured as the largest yet fits up to 300 items
    found = search(probe, lambda: model, [(k, shape(k), 1000.0 + 14.0 * k) for k in (1, 2)], count=5000,
                   capacity=int(target), fraction=1.0, probes=8)
    rechecks = [p for p in found.probes if p["recheck"]]
    assert rechecks and not rechecks[0]["fits"], found.summary()  # 300 fit before 315 ran, not after
    assert "went over the target when measured again" in found.stopped
    last = found.probes[-1]  # the answer was measured last (again, or by the probe that closed the bracket) ...
    assert last["size"] == found.batch_size and last["fits"], found.summary()
    assert peak_now(found.batch_size) <= target  # ... so run again in the state the search left, it is under
    assert found.over is not None and found.off_by is not None and found.off_by <= 0.05
