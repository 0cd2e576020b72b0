"""A change that alters the graphs themselves (as many graphs a step, other nodes + edges a step) is
judged per step, not per 1,000 nodes and edges (tests/report/compare/planted.py's runs: the step's
phases cost 0.5 ms per 1,000 nodes+edges and the optimizer 1 ms a step, so a figure per size
spreads that fixed 1 ms over other sizes and misreads the change). Bigger batches of the same graphs,
and other draws of the same data, stay per size. The planted truth of each change is its steps'
median time at its scale against the base's, over 4,000 noise-free-level calls; nothing depends on
the machine's speed."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from gnnmon.data.result import RunResult
from gnnmon.report.compare.comparison import Comparison
from gnnmon.report.compare.lines import GRAPHS_APART, graphs_differ, lead
from gnnmon.report.loops import loops
from tests.report.compare.planted import rerun, result
from tests.report.diagnosis.planted import steps

GRAPHS = 32  # graphs a step, both sides (the newcomer's PyG DataLoader)


def _truth(scale: float) -> float:
    """The planted change of the step's time per step at ``scale`` (new / base − 1)."""
    def level(s: float) -> float:
        return statistics.median(r["wall_s"] for r in steps(4_000, seed=99, scale=s))
    return level(scale) / level(1.0) - 1


def _run(seed: int, scale: float = 1.0, graphs: int = GRAPHS, wait_s: float = 2e-3) -> RunResult:
    """One planted run (3 % spread between reruns) whose calls each wait ``wait_s`` for their batch
    (``data_wait_s``, ±3 %), whatever its size."""
    rows = rerun(seed, 0.03, scale=scale, graphs=graphs)
    for k, r in enumerate(rows):
        r["data_wait_s"] = wait_s * (1 + 0.03 * ((k * 7919) % 11 - 5) / 5)
    return result(rows, seed)


def _pair(scale: float, runs: int, graphs: tuple[int, int] = (GRAPHS, GRAPHS), seed: int = 0) -> Comparison:
    base = [_run(s, graphs=graphs[0]) for s in range(seed, seed + runs)]
    new = [_run(s, scale, graphs[1]) for s in range(seed + runs, seed + 2 * runs)]
    return Comparison(base, new, max_slowdown=0.05)


def test_graphs_cut_to_a_quarter_are_judged_per_step_and_pass():
    """5 runs a side, the new graphs a quarter the size: per step the planted step runs 53 % faster
    (its 1 ms optimizer stays), per 1,000 nodes+edges it reads +87 % (main judged that and
    regressed). Judged per step, its 90 % interval holds the planted truth (Student's t over the
    runs: a miss has a 10 % chance for a seed; these seeds are fixed), it passes, the words say why,
    and the data wait, 2 ms a step on both sides, is not listed (per size it read +300 %)."""
    truth = _truth(0.25)
    assert truth == pytest.approx(-0.53, abs=0.02)
    c = _pair(0.25, 5)
    (d,) = c.decisions()
    assert d["figure"] == "time per step" and d["decision"] == "pass", d
    assert d["low"] <= truth <= d["high"], (d["low"], truth, d["high"])
    assert "the graphs differ between the sides: " in d["per_step"] and "(32 graphs a step both sides)" in d["per_step"]
    assert d["per_step"] in c.markdown()
    per_size = next(ln for ln in c.lines if ln["figure"] == "time per 1,000 nodes+edges" and ln["phase"] is None)
    assert per_size["low"] > 0.5  # what main judged: regressed at a 5 % limit
    moved, _ = c.other_changes()
    assert not [ln for ln in moved if ln["phase"] == "data wait"], moved
    assert all(ln["figure"].endswith("per step") for ln in moved if ln["unit"] == "s"), moved
    assert c.status() == 0


def test_graphs_twice_as_large_are_judged_per_step_and_regress():
    """3 runs a side, the new graphs twice the size (as the newcomer's doubled edges, 32 graphs a
    step): per step the planted step takes +71 %, per 1,000 nodes+edges it reads −13 % (main passed
    it). Judged per step: regressed, exit 1, the interval around the planted truth."""
    truth = _truth(2.0)
    assert truth == pytest.approx(0.71, abs=0.03)
    c = _pair(2.0, 3)
    (d,) = c.decisions()
    assert d["figure"] == "time per step" and d["decision"] == "regressed", d
    assert d["low"] <= truth <= d["high"], (d["low"], truth, d["high"])
    assert c.status() == 1


def test_one_run_a_side_of_other_graphs_is_judged_per_step():
    c = _pair(2.0, 1)
    (d,) = c.decisions()
    assert d["figure"] == "time per step" and d["decision"] == "regressed" and d["per_step"], d


def test_bigger_batches_of_the_same_graphs_stay_per_size():
    """Twice the graphs a step (32 → 64), each the same size: the batches differ, not the graphs;
    per 1,000 nodes+edges the planted step is faster (its optimizer spread thinner), and passes."""
    c = _pair(2.0, 3, graphs=(GRAPHS, 2 * GRAPHS))
    (d,) = c.decisions()
    assert d["figure"] == "time per 1,000 nodes+edges" and d["decision"] == "pass" and not d.get("per_step"), d


def test_other_draws_of_the_same_data_stay_per_size():
    """Other seeds of the same planted data (sizes ±20 % a call): their medians lie 2.3 % apart a
    pair (a standard deviation), never past GRAPHS_APART (10 %, over four of them: under 1e-4 a
    pair) in 100 pairs of one run a side, and none is judged per step."""
    assert GRAPHS_APART == 0.10
    for k in range(100):
        base, new = (loops(result(rerun(s, 0.03, graphs=GRAPHS), s).table) for s in (2 * k, 2 * k + 1))
        assert graphs_differ(base, new) is None, k


def test_graphs_differ_reads_the_shapes_and_says_so():
    """The words give each side's median nodes + edges a step; no shapes, no judgement."""
    small = loops(result(rerun(0, 0.0, scale=0.5), 0).table)
    large = loops(result(rerun(1, 0.0, scale=1.0), 1).table)
    words = graphs_differ(small, large)
    sizes = [np.median([r["num_nodes"] + r["num_edges"] for r in rerun(s, 0.0, scale=x)[2:]])
             for s, x in ((0, 0.5), (1, 1.0))]
    assert words is not None and f"{sizes[0]:,.0f} → {sizes[1]:,.0f} nodes+edges per step (1 graphs" in words
    bare = [{k: v for k, v in r.items() if k not in ("num_nodes", "num_edges")} for r in rerun(0, 0.0, scale=0.5)]
    assert graphs_differ(loops(result(bare, 0).table), large) is None


def test_lead_judges_per_step_where_told():
    both = {(None, "time per step"): (1.0, 0.0), (None, "time per 1,000 nodes+edges"): (1.0, 0.0)}
    assert lead([both], [both], False) == "time per 1,000 nodes+edges"
    assert lead([both], [both], False, by_size=False) == "time per step"


def test_bigger_batches_that_record_no_count_stay_per_size():
    """Rows with nodes and edges but neither seed nodes nor graphs a step (a ClusterLoader's or a
    custom sampler's batches): twice the batch, at a fixed 2 ms a step plus 1 us per node or edge,
    is a bigger batch of the same graphs as likely as other graphs, so it is judged per size, where
    it is faster (-14 % planted per 1,000 nodes+edges), never regressed per step."""
    def run(seed: int, scale: float) -> RunResult:
        rng, rows = np.random.default_rng(seed), []
        for i in range(200):
            nodes = int(scale * (1000 + rng.integers(-200, 201)))
            wall = (0.002 + 1e-6 * 5 * nodes) * rng.normal(1.0, 0.03)
            rows.append({"label": "step", "index": i, "t_start_ns": i * 10**9, "t_end_ns": i * 10**9 + int(wall * 1e9),
                         "wall_s": wall, "num_nodes": nodes, "num_edges": 4 * nodes})
        return RunResult(rows, manifest={})
    base, new = [run(k, 1.0) for k in range(3)], [run(10 + k, 2.0) for k in range(3)]
    assert graphs_differ(loops(base[0].table), loops(new[0].table)) is None
    (d,) = Comparison(base, new, max_slowdown=0.05).decisions()
    assert d["figure"] == "time per 1,000 nodes+edges" and d["decision"] == "pass", d
