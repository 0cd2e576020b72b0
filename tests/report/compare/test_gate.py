"""The gate's statistics (gnnmon.report.compare.gate) against planted truth and against scipy: run
figures drawn with a known change and spread, the interval's coverage counted; the bounds equal to
scipy's own t tests; the decision's Bonferroni correction; the runs a side that decide a line."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats

from gnnmon.report.compare.gate import ALPHA, Change, change, decision, relative_spread, runs_to_decide, spread_text


def logs(rng: random.Random, n: int, mean: float, sd: float) -> list[float]:
    return [math.exp(rng.gauss(mean, sd)) for _ in range(n)]


@pytest.mark.parametrize("na, nb", [(5, 5), (3, 3), (3, 6), (6, 2)])
def test_the_bounds_are_scipys_student_t_test_on_the_logarithms(na, nb):
    """The one-sided bounds at ALPHA are scipy.stats.ttest_ind's 90 % interval on the log figures."""
    rng = random.Random(na * 10 + nb)
    for _ in range(20):
        a, b = logs(rng, na, 0.0, 0.03), logs(rng, nb, 0.02, rng.choice([0.01, 0.05]))
        c = change(a, b)
        ref = stats.ttest_ind([math.log(x) for x in b], [math.log(x) for x in a])
        lo, hi = ref.confidence_interval(1 - 2 * ALPHA)
        assert c.bound(ALPHA, upper=False) == pytest.approx(math.expm1(lo), rel=1e-9, abs=1e-12)
        assert c.bound(ALPHA, upper=True) == pytest.approx(math.expm1(hi), rel=1e-9, abs=1e-12)
        assert c.df == pytest.approx(ref.df) and c.seen
        assert c.test == f"Student's t over {na} + {nb} runs"


@pytest.mark.parametrize("na, nb, cv, assumed", [(5, 5, 0.04, False), (2, 7, 0.04, False), (3, 8, 0.04, False),
                                                 (1, 5, 0.04, False), (1, 1, 0.04, True), (1, 1, 2.25, True)])
def test_the_interval_covers_the_planted_change_as_often_as_it_says(na, nb, cv, assumed):
    """2,000 planted pairs, a true change of +7 % and run figures log-normal with a coefficient of
    variation ``cv`` a run (one a side: that cv assumed, as a run's own noise is given; 2.25: calls
    that vary by twice their level): the 90 % interval holds the truth in 90 % of them, within 3.5
    binomial standard deviations (2,000 draws: 0.67 % each), and each one-sided bound misses in about 5 %."""
    rng, trials, truth = random.Random(na * 100 + nb), 2000, math.log(1.07)
    sigma = math.sqrt(math.log(1 + cv**2))  # the logarithms' spread of a log-normal of that cv
    below = above = 0
    for _ in range(trials):
        c = change(logs(rng, na, 0.0, sigma), logs(rng, nb, truth, sigma), assumed=cv if assumed else 0.0)
        below += c.bound(ALPHA, upper=True) < 0.07
        above += c.bound(ALPHA, upper=False) > 0.07
    sd = math.sqrt(ALPHA * (1 - ALPHA) / trials)
    assert abs(below / trials - ALPHA) < 3.5 * sd and abs(above / trials - ALPHA) < 3.5 * sd, (below, above)


def test_one_run_a_side_assumes_the_spread_or_its_own_noise_where_wider():
    """A relative spread r (a coefficient of variation) is held as the logarithms' spread of a
    log-normal with that CV, √ln(1 + r²)."""
    sigma = math.sqrt(math.log(1 + 0.03**2))
    c = change([1.00], [1.02], assumed=0.03)
    assert not c.seen and c.spread == pytest.approx(sigma, rel=1e-12) and c.se == pytest.approx(sigma * math.sqrt(2))
    assert math.isinf(c.df) and "3 % a run assumed" in c.test
    q = stats.norm.ppf(1 - ALPHA)
    assert c.bound(ALPHA, upper=True) == pytest.approx(1.02 * math.exp(q * sigma * math.sqrt(2)) - 1)
    drifting = change([1.00], [1.02], base_own=[0.08], new_own=[0.01], assumed=0.03)
    assert drifting.spread == pytest.approx(math.sqrt(math.log(1 + 0.08**2)), rel=1e-12)
    assert "8 % a run assumed" in drifting.test
    wide = change([1.00], [1.02], base_own=[2.25], assumed=0.03)  # calls that vary by twice their level
    assert wide.spread == pytest.approx(math.sqrt(math.log(1 + 2.25**2)), rel=1e-12) and "225 % a run" in wide.test
    assert relative_spread(wide.spread) == pytest.approx(2.25, rel=1e-12)
    assert [spread_text(r) for r in (0.03, 0.023, 0.0996, 0.996, 12.5)] == ["3 %", "2.3 %", "10 %", "100 %", "1,250 %"]
    exact = change([100.0], [110.0], assumed=0.0)  # a peak, exact: its bounds are the change
    assert exact.bound(ALPHA, upper=False) == exact.bound(ALPHA, upper=True) == pytest.approx(0.10)


def test_bad_figures_are_refused():
    with pytest.raises(ValueError, match="at least one run a side"):
        change([], [1.0])
    with pytest.raises(ValueError, match="positive"):
        change([1.0, 0.0], [1.0, 1.0])


def test_the_regression_bound_is_corrected_for_the_lines_judged():
    """+8 % known to ±1 % (8 degrees of freedom): alone, its lower bound (1.08·e^(−1.86·0.01) − 1 =
    +6.0 %) is over a 5 % limit; judged with 49 other lines, the bound at 0.05/50 (t = 4.50:
    +3.2 %) is not, and the line is inconclusive. A pass is never corrected: every line must pass."""
    c = Change(math.log(1.08), 0.01, 8.0, 0.01, True, "planted")
    assert c.bound(ALPHA, upper=False) == pytest.approx(1.08 * math.exp(-stats.t.ppf(0.95, 8) * 0.01) - 1)
    assert decision(c, 0.05) == "regressed"
    assert decision(c, 0.05, judged_lines=50) == "inconclusive"
    small = Change(math.log(1.01), 0.01, 8.0, 0.01, True, "planted")
    assert decision(small, 0.05) == decision(small, 0.05, judged_lines=50) == "pass"


def _side(n: int, mean: float, sd: float) -> list[float]:
    """``n`` figures whose logs have exactly this mean and sample standard deviation."""
    z = [stats.norm.ppf((i + 0.5) / n) for i in range(n)]
    m = sum(z) / n
    s = math.sqrt(sum((x - m) ** 2 for x in z) / (n - 1))
    return [math.exp(mean + sd * (x - m) / s) for x in z]


@pytest.mark.parametrize("truth, limit", [(0.0, 0.05), (0.03, 0.05), (0.08, 0.05), (0.12, 0.10)])
def test_the_runs_needed_decide_the_line_and_one_fewer_does_not(truth, limit):
    """Two runs a side at a 3 % spread leave these lines inconclusive; with the runs a side
    runs_to_decide names (the same change and spread), the gate decides, and with one fewer not."""
    c = change(_side(2, 0.0, 0.03), _side(2, math.log1p(truth), 0.03))
    assert decision(c, limit) == "inconclusive"
    n = runs_to_decide(c, limit)
    assert n is not None and n > 2
    decided = change(_side(n, 0.0, 0.03), _side(n, math.log1p(truth), 0.03))
    short = change(_side(n - 1, 0.0, 0.03), _side(n - 1, math.log1p(truth), 0.03))
    assert decision(decided, limit) == ("pass" if truth < limit else "regressed")
    assert decision(short, limit) == "inconclusive"


def test_a_change_at_the_limit_cannot_be_decided_by_any_number_of_runs():
    c = change(_side(3, 0.0, 0.03), _side(3, math.log(1.05), 0.03))
    assert decision(c, 0.05) == "inconclusive" and runs_to_decide(c, 0.05) is None


def test_bad_figures_are_refused_with_the_reason():
    with pytest.raises(ValueError) as none:
        change([], [1.0])
    assert str(none.value) == "a change needs at least one run a side"
    with pytest.raises(ValueError) as zero:
        change([1.0, 2.0], [0.0])
    assert str(zero.value) == "run figures must be positive to be compared as ratios"


@pytest.mark.parametrize("na, nb", [(1, 5), (5, 1), (2, 1), (1, 2)])
def test_a_side_of_one_run_borrows_the_other_sides_spread(na, nb):
    """Student's t with the other side's variance for both, its runs − 1 degrees of freedom."""
    rng = random.Random(na * 7 + nb)
    a, b = logs(rng, na, 0.0, 0.03), logs(rng, nb, 0.04, 0.03)
    c = change(a, b)
    many = [math.log(x) for x in (a if na > 1 else b)]
    var = stats.tvar(many)
    d = sum(map(math.log, b)) / nb - sum(map(math.log, a)) / na
    se = math.sqrt(var * (1 / na + 1 / nb))
    assert c.df == len(many) - 1 and c.seen is True and c.test == f"Student's t over {na} + {nb} runs"
    assert c.se == pytest.approx(se) and c.spread == pytest.approx(math.sqrt(var)) and c.log == pytest.approx(d)
    assert c.bound(ALPHA, upper=True) == pytest.approx(math.expm1(d + stats.t.ppf(1 - ALPHA, len(many) - 1) * se))


def test_one_run_a_side_names_what_it_assumed_exactly():
    assumed = change([1.00], [1.02], assumed=0.03)
    assert assumed.test == "one run a side: a rerun spread of 3 % a run assumed (normal)" and assumed.seen is False
    exact = change([100.0], [110.0], assumed=0.0)
    assert exact.test == "one run a side: figures taken as exact" and exact.seen is False and exact.se == 0


def test_a_bound_on_the_limit_itself_decides_nothing():
    """A change known exactly to be the limit: neither over it (regressed) nor under it (pass)."""
    at = Change(math.log1p(0.05), 0.0, 8.0, 0.0, True, "planted")
    assert at.bound(ALPHA, upper=False) == at.bound(ALPHA, upper=True) == 0.05
    assert decision(at, 0.05) == "inconclusive"


def test_two_lines_judged_halve_the_regression_bounds_error():
    """+6.5 % known to ±1 % (8 df) against a 4.5 % limit: one line judged, its lower bound at 5 %
    error (t 1.86: +4.5 %, just over) regressed; two, at 2.5 % (t 2.31: +4.1 %): inconclusive."""
    c = Change(math.log(1.065), 0.01, 8.0, 0.01, True, "planted")
    assert decision(c, 0.045) == "regressed" and decision(c, 0.045, judged_lines=2) == "inconclusive"


def test_the_runs_a_side_follow_the_error_of_the_side_the_change_is_on():
    """Over the limit, more lines judged need more runs (the Bonferroni bound); under it, none more
    (a pass is not corrected)."""
    over = change(_side(2, 0.0, 0.03), _side(2, math.log(1.09), 0.03))
    under = change(_side(2, 0.0, 0.03), _side(2, math.log(1.01), 0.03))
    assert runs_to_decide(over, 0.05, judged_lines=4) > runs_to_decide(over, 0.05)
    assert runs_to_decide(under, 0.05, judged_lines=4) == runs_to_decide(under, 0.05)


@pytest.mark.parametrize("runs", [2, 50, 51])
def test_the_runs_a_side_found_from_two_to_fifty(runs):
    """A spread of 1 and a gap between what ``runs`` and ``runs − 1`` a side resolve: exactly
    ``runs`` a side are named (2, the fewest; 50, the most), and past 50, none."""
    def half(n: int) -> float:
        return stats.t.ppf(1 - ALPHA, 2 * n - 2) * math.sqrt(2 / n)

    gap = (half(runs) + half(runs - 1)) / 2 if runs > 2 else half(2) * 1.01
    c = Change(math.log1p(0.05) - gap, 0.5, 8.0, 1.0, True, "planted")
    assert runs_to_decide(c, 0.05) == (runs if runs <= 50 else None)
