"""Runs against runs: the statistics of ``gnnmon compare``'s gate. Nothing here reads a row.

Reruns of the same code land further apart than one run's calls show (a machine's speed moves from
process to process), so the unit of evidence is the **run**: each run gives one figure (its steady
calls' median, :mod:`gnnmon.report.compare.lines`) and the change is judged on the logarithms of
those figures (a relative change; a run 10 % slow and one 10 % fast weigh alike):

* two runs or more on a side: **Student's two-sample t** over the runs, their spreads pooled (reruns
  on one machine share a spread; with as many runs a side, the CI form, its error is Welch's and it
  keeps its level under unequal spreads too). Welch's degrees of freedom were not used: planted, a
  side of 2 or 3 runs against 7 or 8 made its 90 % interval miss 11-13 % of the time, not 10;
  a side of one run borrows the other side's spread;
* one run a side: the rerun-to-rerun spread cannot be seen. An assumed spread per run
  (:data:`RERUN_SPREAD`, ``--rerun-spread``; or the run's own noise where that is wider), relative,
  is taken to the logarithms' spread it stands for (:func:`log_spread`) and held at the normal
  quantile, and the verdict says so.

A change's **bounds** are one-sided at :data:`ALPHA` each (together the 90 % interval of a TOST
equivalence test). A judged line **passes** when its upper bound is under its limit (a
non-inferiority test), **regresses** when its lower bound is over it — that bound Bonferroni-corrected
for the lines judged together, so that identical code regresses in at most :data:`ALPHA` of
comparisons however many lines are judged — and is **inconclusive** otherwise: :func:`runs_to_decide`
says how many runs a side would decide it at the spread seen. Quantiles are scipy's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from gnnmon.report.stats import scipy_stats as stats

ALPHA = 0.05
"""Each one-sided bound's error rate: at most this share of identical comparisons regress, and of
changes just over the limit pass."""

RERUN_SPREAD = 0.03
"""The spread between reruns assumed for a side of one run (relative, per run): fresh-process reruns
of a GraphSAGE step on this project's 2-core VM spread 0.9-3.7 % a run in their CPU time, 1.5-5.2 %
in their wall time unless the load moved (docs/diagnosis.md). ``--rerun-spread`` sets it."""

MAX_RUNS = 50
"""The most runs a side :func:`runs_to_decide` looks for."""


@dataclasses.dataclass(frozen=True)
class Change:
    """The change from one side's runs to the other's: ``log`` the difference of the sides' mean
    log figures, ``se`` its standard error, ``df`` the t test's degrees of freedom (``inf``: a normal
    quantile), ``spread`` the per-run standard deviation the error comes from (log units), ``seen``
    whether that spread was measured between runs (False: assumed), ``test`` the test's name."""

    log: float
    se: float
    df: float
    spread: float
    seen: bool
    test: str

    @property
    def relative(self) -> float:
        """new / base − 1."""
        return math.expm1(self.log)

    def bound(self, alpha: float, upper: bool) -> float:
        """The one-sided bound at error ``alpha`` (relative: 0.05 is +5 %)."""
        q = stats.t.ppf(1 - alpha, self.df) if math.isfinite(self.df) else stats.norm.ppf(1 - alpha)
        return math.expm1(self.log + (q if upper else -q) * self.se)


def log_spread(relative: float) -> float:
    """The standard deviation of a figure's logarithm that a relative spread (its coefficient of
    variation: 0.03 is 3 %) stands for, a log-normal's √ln(1 + r²): r where r is small, and far less
    where the spread exceeds the level (r = 2.25 is 1.34 in log units: a figure against itself is
    bounded at +2,171 %, and held as 2.25 it was at +18,652 %)."""
    return math.sqrt(math.log1p(relative * relative))


def relative_spread(log_sd: float) -> float:
    """:func:`log_spread`'s inverse: the relative spread a standard deviation of logarithms stands for."""
    return math.sqrt(math.expm1(log_sd * log_sd))


def spread_text(relative: float) -> str:
    """A relative spread as the comparison says it: two digits under 10 % (``2.3 %``), whole
    percent above (``16 %``, ``1,250 %``)."""
    pct = 100 * relative
    return f"{pct:.2g} %" if pct < 10 else f"{pct:,.0f} %"


def _mean_var(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = math.fsum(values) / n
    return mean, (math.fsum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else math.nan)


def change(base: Sequence[float], new: Sequence[float], base_own: Sequence[float] = (),
           new_own: Sequence[float] = (), assumed: float = RERUN_SPREAD) -> Change:
    """The change between two sides' run figures (each > 0). ``base_own``/``new_own``: each run's
    own relative standard error (its calls' noise and drift), which a side of one run holds at least;
    ``assumed``: the relative spread between reruns where no side has two runs (see the module doc)."""
    if not base or not new:
        raise ValueError("a change needs at least one run a side")
    if min(*base, *new) <= 0:
        raise ValueError("run figures must be positive to be compared as ratios")
    a, b = [math.log(v) for v in base], [math.log(v) for v in new]
    (ma, va), (mb, vb) = _mean_var(a), _mean_var(b)
    na, nb = len(a), len(b)
    d = mb - ma
    if na >= 2 or nb >= 2:  # the sides' spreads pooled: one side of one run borrows the other's
        df = na + nb - 2
        pooled = ((na - 1) * va if na > 1 else 0.0) + ((nb - 1) * vb if nb > 1 else 0.0)
        spread = math.sqrt(pooled / df)
        return Change(d, spread * math.sqrt(1 / na + 1 / nb), df, spread, True, f"Student's t over {na} + {nb} runs")
    relative = max([assumed, *base_own, *new_own])
    spread = log_spread(relative)
    said = f"a rerun spread of {spread_text(relative)} a run assumed (normal)" if relative else "figures taken as exact"
    return Change(d, spread * math.sqrt(2), math.inf, spread, False, f"one run a side: {said}")


def decision(c: Change, limit: float, judged_lines: int = 1, alpha: float = ALPHA) -> str:
    """``regressed`` (the lower bound, Bonferroni-corrected over ``judged_lines``, over ``limit``),
    ``pass`` (the upper bound under it) or ``inconclusive``."""
    if c.bound(alpha / max(judged_lines, 1), upper=False) > limit:
        return "regressed"
    if c.bound(alpha, upper=True) < limit:
        return "pass"
    return "inconclusive"


def runs_to_decide(c: Change, limit: float, judged_lines: int = 1, alpha: float = ALPHA) -> int | None:
    """Runs a side that would decide an inconclusive line, were its change and spread what they are:
    the fewest whose bound clears ``limit`` (Student's t over that many a side); None where more
    than :data:`MAX_RUNS` would not (a change at the limit, or a spread as wide as the limit)."""
    gap = abs(math.log1p(limit) - c.log)
    a = alpha / max(judged_lines, 1) if c.log > math.log1p(limit) else alpha
    for n in range(2, MAX_RUNS + 1):
        if stats.t.ppf(1 - a, 2 * n - 2) * c.spread * math.sqrt(2 / n) < gap:
            return n
    return None
