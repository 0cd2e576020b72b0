"""One run a side beside a busy machine (tests/report/compare/planted.py's runs, each call carrying
other processes' CPU as ``collect(sample=...)`` records it): the rerun spread the gate assumes (3 %)
is a quiet machine's, so a judged time line is judged there at a busy machine's spread (16 % a run):
inconclusive within its reach, regressed beyond it.
The planted truth is identical code whose second run lands 20 % slower, as this project's 2-core VM
gave one pair of identical runs beside 107 % and 119 % of a core (+21.8 % in its thread CPU time);
the load alone decides the rule. Nothing depends on the machine's speed."""

from __future__ import annotations

import pytest

from gnnmon.data.result import RunResult
from gnnmon.report.compare.comparison import LOAD_BUSY, LOAD_DIFFERS, Comparison
from gnnmon.report.compare.comparison_markdown import decided
from tests.report.compare.planted import rerun, result


def _run(seed: int, factor: float, load: float | None, spread: float = 0.0) -> RunResult:
    """One run of identical code whose level lands ``factor`` off (a rerun under load; times a
    draw from N(1, ``spread``)), its calls beside ``load`` % of a core (None: not sampled), its
    step's CPU time and run queue recorded."""
    rows = rerun(seed, spread, factor, cpu=True, sched=True)
    if load is not None:
        for r in rows:
            r["others_cpu_pct"] = load
    return result(rows, seed)


def test_one_run_a_side_beside_a_busy_machine_is_inconclusive_not_regressed():
    c = Comparison(_run(0, 1.0, 107.0), _run(1, 1.2, 119.0), max_slowdown=0.05)
    (d,) = c.decisions()
    assert d["figure"] == "time less wait for a core per 1,000 nodes+edges", d
    assert d["low"] > 0.05  # its bounds, on the assumed 3 %, are over the limit: today's gate regressed it
    assert d["decision"] == "inconclusive" and d["runs_needed"] is None, d
    assert "107 % and 119 % of a core" in d["undecided"] and "5 runs a side" in d["undecided"], d
    assert d["undecided"] in decided(d) and c.status() == 4


def test_a_quiet_machine_keeps_the_assumed_spread_and_its_verdict():
    """The same pair beside 3 % and 4 % of a core, or with no load sampled: the assumption holds
    (a note says where the load is unknown) and the planted +20 % regresses at a 5 % limit."""
    for loads in ((3.0, 4.0), (None, None)):
        (d,) = Comparison(_run(0, 1.0, loads[0]), _run(1, 1.2, loads[1]), max_slowdown=0.05).decisions()
        assert d["decision"] == "regressed" and d["undecided"] is None, (loads, d)


def test_loads_that_differ_leave_one_run_a_side_undecided_too():
    """Neither side busy (under LOAD_BUSY), but their loads apart by LOAD_DIFFERS: inconclusive."""
    low, high = 2.0, 2.0 + LOAD_DIFFERS
    assert high < LOAD_BUSY
    (d,) = Comparison(_run(0, 1.0, low), _run(1, 1.2, high), max_slowdown=0.05).decisions()
    assert d["decision"] == "inconclusive" and d["undecided"], d


def test_several_runs_a_side_measure_the_spread_and_decide_beside_a_busy_machine():
    """Three runs a side, 1 % apart, beside 130 % of a core: the spread is seen, and the planted
    +20 % regresses, identical code passes."""
    base = [_run(s, 1.0 + 0.01 * (s - 1), 130.0) for s in range(3)]
    same = [_run(s, 1.0 + 0.01 * (s - 4), 130.0) for s in range(3, 6)]
    slow = [_run(s, 1.2 * (1.0 + 0.01 * (s - 4)), 130.0) for s in range(3, 6)]
    assert [d["decision"] for d in Comparison(base, slow, max_slowdown=0.05).decisions()] == ["regressed"]
    assert [d["decision"] for d in Comparison(base, same, max_slowdown=0.05).decisions()] == ["pass"]


def test_identical_code_one_run_a_side_at_a_busy_machines_spread_regresses_at_the_gates_rate():
    """200 pairs of identical runs, each run's level drawn from N(1, 16 %) (the spread 15 identical
    runs showed here beside 104-158 % of a core), sampled busy: judged at that spread, a pair
    regresses where Z · 0.16 · √2 > ln 1.05 + 1.645 · 0.16 · √2, about 3 % of pairs (6 of 200; over
    20 has a chance under 0.1 %). On the assumed 3 % about a quarter would (P ≈ 0.27: 54)."""
    regressed = 0
    for k in range(200):
        base, new = (_run(s, 1.0, 130.0, 0.16) for s in (2 * k, 2 * k + 1))
        regressed += Comparison(base, new, max_slowdown=0.05).verdict() == "regressed"
    assert regressed <= 20, regressed


@pytest.mark.parametrize("factor", [3.0, 10.0])
def test_a_step_made_several_times_slower_regresses_one_run_a_side_beside_a_busy_machine(factor):
    """A change far beyond what reruns under load land apart (16 % a run) is decided: one run a side
    beside 107 % and 119 % of a core, the step 3 or 10 times slower, regresses at a 5 % limit."""
    (d,) = Comparison(_run(0, 1.0, 107.0), _run(1, factor, 119.0), max_slowdown=0.05).decisions()
    assert d["decision"] == "regressed" and d["undecided"] is None, d
    assert d["low"] > 0.05
